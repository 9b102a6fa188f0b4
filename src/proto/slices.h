/* proto/slices.h - per-slice checksums on the wire (docs/PROTOCOL.md).
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

/* Slice CRCs as they lie in a peer's packed record (MOON.HOLDINGS and
 * MOON.REPORT, docs/PROTOCOL.md), not copied: u64 slice size, u16 count, then
 * count little-endian u32s. count 0: none. */
#define PROTO_SLICES_REF_HDR 10
typedef struct proto_slices_ref {
    uint64_t size;
    uint32_t count;
    const uint8_t *crc;   /* 4 * count packed bytes */
} proto_slices_ref;

/* Bytes the packed form of count CRCs takes. */
static inline size_t proto_slices_ref_len(uint32_t count) { return PROTO_SLICES_REF_HDR + 4 * (size_t)count; }
/* Writes s (count >= 1) at out (room for proto_slices_ref_len); returns the bytes. */
size_t proto_slices_ref_put(uint8_t *out, uint64_t size, uint32_t count, const uint32_t *crc);
/* The same for r (count >= 1), its CRCs copied as they are. */
size_t proto_slices_ref_copy(uint8_t *out, const proto_slices_ref *r);
/* Decodes the packed CRCs at p (left bytes there) of an object of
 * obj_size bytes: the bytes taken, or 0 if cut off or out of bounds
 * (slice size a power of two from PROTO_SLICE_MIN to PROTO_SLICE_MAX,
 * count 1..PROTO_MAX_SLICES and exactly the object's slices). Whether
 * they combine to the object's CRC is the keeper's check. */
size_t proto_slices_ref_get(const uint8_t *p, size_t left, uint64_t obj_size, proto_slices_ref *out);
/* 1 if a and b are the same list. */
int proto_slices_ref_eq(const proto_slices_ref *a, const proto_slices_ref *b);
/* r as a fresh proto_slices (free it). */
void proto_slices_from_ref(const proto_slices_ref *r, proto_slices *out);

#endif
