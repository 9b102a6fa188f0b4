/* proto/chunks.h - a memory node's segment cut into chunks for master groups.
 *
 * A node shared by several master groups gives each group whole chunks of
 * its segment on request; a group's master places objects only inside its
 * chunks, and the node honours a group's capabilities only there
 * (docs/SCALE.md, "Nodes shared by groups"). A chunk set travels as text,
 * "<chunk_size>:<hex>", the hex a bitmap of chunk numbers (chunk i is bit
 * i % 4 of hex digit i / 4; trailing zero digits may be left out, "-" for
 * none). No I/O here. */
#ifndef MKV_PROTO_CHUNKS_H
#define MKV_PROTO_CHUNKS_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_MAX_CHUNKS    4096                 /* per segment */
#define PROTO_MIN_CHUNK     (1ULL << 20)         /* 1 MiB */
#define PROTO_CHUNKS_TEXT   (24 + PROTO_MAX_CHUNKS / 4)   /* the text's room, NUL included */

typedef struct proto_chunks {
    uint64_t chunk_size;          /* a power of two, >= PROTO_MIN_CHUNK */
    uint32_t n;                   /* chunks in the segment (the last may be short) */
    uint8_t bits[PROTO_MAX_CHUNKS / 8];
} proto_chunks;

/* The chunk size for a segment: a 64th of it rounded up to a power of
 * two, at least PROTO_MIN_CHUNK and so that at most PROTO_MAX_CHUNKS fit. */
uint64_t proto_chunk_size_for(uint64_t segment_size);
/* An empty set for a segment cut in chunks of chunk_size; -1 if that
 * size is not a power of two of at least PROTO_MIN_CHUNK or makes too many. */
int proto_chunks_init(proto_chunks *c, uint64_t segment_size, uint64_t chunk_size);
static inline int proto_chunks_has(const proto_chunks *c, uint32_t i) {
    return i < c->n && (c->bits[i / 8] >> (i % 8)) & 1;
}
void proto_chunks_set(proto_chunks *c, uint32_t i, int on);
uint32_t proto_chunks_count(const proto_chunks *c);
/* Chunk i's range of a segment of segment_size bytes. */
void proto_chunk_range(const proto_chunks *c, uint64_t segment_size, uint32_t i, uint64_t *off, uint64_t *len);
/* The text of c into out (PROTO_CHUNKS_TEXT is room enough): its length. */
size_t proto_chunks_format(const proto_chunks *c, char *out, size_t cap);
/* The text into c for a segment of segment_size bytes: 0, or -1 (a bad
 * size, a chunk past the segment, not hex). */
int proto_chunks_parse(const char *s, size_t len, uint64_t segment_size, proto_chunks *c);

#endif
