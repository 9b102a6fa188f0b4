/* proto/slices.h - per-slice checksums on the wire (master/PROTOCOL.md).
 *
 * Besides its whole CRC32C an object may carry one CRC32C per slice of a
 * fixed power-of-two size the writer chose, so a reader can verify (and
 * pass on) each slice as it arrives instead of the whole value first.
 * The writer sends them with MOON.PUTEND / MOON.MPUTEND as the slice
 * size and one bulk string of little-endian u32s; the master checks that
 * they cover the object and combine to its CRC, keeps them, and returns
 * them in MOON.GET / MOON.MGET. Everything a peer sends is bounded
 * (PROTO_MAX_SLICES) before anything is allocated. */
#ifndef MKV_PROTO_SLICES_H
#define MKV_PROTO_SLICES_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_MAX_SLICES   4096            /* slice CRCs of one object */
#define PROTO_SLICE_MIN    (64ULL << 10)   /* slice sizes: powers of two in [MIN, MAX] */
#define PROTO_SLICE_MAX    (1ULL << 40)
#define PROTO_SLICE_WRITE  (4ULL << 20)    /* the slice size moonkv's writers choose */

/* An object's slice checksums: slice i is bytes [i*size, min((i+1)*size,
 * object size)) and has CRC32C crc[i]. count 0: none kept. */
typedef struct proto_slices {
    uint64_t size;
    uint32_t count;
    uint32_t *crc;
} proto_slices;

/* How many slices of slice bytes an object of size bytes has (slice >= 1;
 * no overflow for any size). */
uint64_t proto_slice_count(uint64_t size, uint64_t slice);
/* The slice size a writer uses for an object of size bytes:
 * PROTO_SLICE_WRITE, doubled until at most PROTO_MAX_SLICES cover it;
 * 0 when one slice would cover it (its whole CRC says as much). */
uint64_t proto_slice_choose(uint64_t size);

/* The put-end's two arguments: the slice size as decimal text and the
 * packed CRCs. "0" with an empty list is "none" (count 0). On 0 out->crc
 * is a fresh array of out->count (free it); on -1 nothing is allocated
 * and err holds the reason without its error word. */
int proto_slices_parse(const char *size_arg, size_t size_len, const void *blob, size_t bloblen,
                       proto_slices *out, char *err, size_t errlen);
/* 0 if s fits an object of size bytes with CRC32C crc: one CRC per slice
 * and together they combine to crc (s->count 0 always fits). */
int proto_slices_check(const proto_slices *s, uint64_t size, uint32_t crc, char *err, size_t errlen);
/* The packed list of s (4 * s->count bytes) into out. */
void proto_slices_pack(const proto_slices *s, uint8_t *out);
/* A located reply's optional elements (slice size integer, packed list)
 * for an object of size bytes with CRC32C crc: 0 and *out filled (fresh
 * array, count 0 when the master keeps none), -1 if they do not parse
 * or do not fit the object. */
struct redisReply;
int proto_slices_decode(const struct redisReply *slice, const struct redisReply *list, uint64_t size, uint32_t crc,
                        proto_slices *out);
void proto_slices_free(proto_slices *s);

#endif
