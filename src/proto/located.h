/* proto/located.h - the packed reply of MOON.MGETPACKED.
 *
 * MOON.MGET answers per key an array [size, crc, replicas, (slice_size,
 * slice CRCs)] or null: a dozen and more RESP elements per key, each a
 * reply object for a hiredis reader. MOON.MGETPACKED answers the same as
 * one bulk string holding a record per key, in order (little-endian):
 *
 *   u8 0 | u64 size | u32 crc | u64 slice_size | u32 count | count x u32
 *        | replicas as in placed.h (u8 n, per replica u16 extents, caps)
 *   u8 2                                       (missing: the array's null)
 *
 * The decoder bounds every count, never reads past the blob, and checks
 * what the array form's decoder checks (client/placement.c): a size of
 * 1..INT64_MAX, extents with read rights covering exactly the object,
 * slice CRCs that fit it and combine to its CRC. */
#ifndef MKV_PROTO_LOCATED_H
#define MKV_PROTO_LOCATED_H

#include <stddef.h>
#include <stdint.h>

#include "proto/placed.h"
#include "proto/slices.h"

/* One key's record, decoded. */
typedef struct proto_located {
    int found;                  /* 0: missing (nothing below is set) */
    uint64_t size;
    uint32_t crc;
    proto_slices slices;        /* a fresh array (count 0: none kept) */
    proto_placed rep;           /* the replicas, extents in the caller's buffer */
} proto_located;

/* Appends o's record, its read caps signed under g, with its slice
 * CRCs sl (count 0: none). */
void proto_located_put(resp_buf *b, const object *o, const proto_slices *sl, const proto_grant *g);
void proto_located_put_missing(resp_buf *b);

/* Decodes the record at *p (before end), its extents into buf
 * (proto_placed_next's): 0 with *p past it, or -1 (nothing allocated)
 * if it is cut off or breaks a bound. Free with proto_located_free
 * unless its slices were taken (a small object keeps none: nothing is
 * allocated then). */
int proto_located_next(const uint8_t **p, const uint8_t *end, proto_extbuf *buf, proto_located *out);
void proto_located_free(proto_located *l);

#endif
