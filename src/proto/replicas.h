/* proto/replicas.h - the array forms of MOON.PUTSTART's and MOON.GET's
 * replies (docs/PROTOCOL.md):
 *
 *   PUTSTART  [[extent ...] ...]           per replica its REMOTE extents
 *   GET       [size, crc, replicas]  or
 *             [size, crc, replicas, slice_size, [slice crc ...]]
 *             nil: no such object
 *
 * The packed forms (placed.h, located.h) say the same in one blob; these
 * decode into the same proto_placed, the extents into the caller's
 * proto_extbuf. Every count is bounded (1..PROTO_MAX_REPLICAS replicas,
 * extents.h's checks on each, slices.h's on the slice CRCs); no I/O. */
#ifndef MKV_PROTO_REPLICAS_H
#define MKV_PROTO_REPLICAS_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "proto/placed.h"
#include "proto/slices.h"

/* PUTSTART's reply r for an object of size bytes, every cap granting
 * `rights`: 0 with out's replicas (err NULL), their extents in buf
 * (valid until its next use), or -1 on any other shape. */
int proto_dec_replicas(const redisReply *r, uint64_t size, uint32_t rights, proto_extbuf *buf,
                       proto_placed *out);

/* GET's reply, decoded. */
typedef struct proto_location {
    uint64_t size;
    uint32_t crc;
    proto_placed reps;          /* extents in the caller's proto_extbuf */
    proto_slices slices;        /* count 0 if none sent; free with proto_slices_free */
} proto_location;

/* 1 with *out (read caps), 0 for nil (no such object), -1 on another
 * shape (nothing to free then). */
int proto_dec_location(const redisReply *r, proto_extbuf *buf, proto_location *out);

#endif
