/* proto/extents.h - extents and their capabilities on the wire.
 *
 * Replies name where bytes live as arrays of extents, each with the
 * capability (backend/cap.h) that grants it (master/PROTOCOL.md):
 *   PROTO_EXT_REMOTE  [node, offset, length, cap]   MOON.PUTSTART, MOON.GET,
 *                                                   a task's sources
 *   PROTO_EXT_LOCAL   [offset, length, cap]         a task's destinations
 *                                                   (the executing node's)
 * The decoder refuses a reply whole unless every shape, number and cap
 * is right and the extents cover the object exactly, so what a peer can
 * make us allocate is bounded by PROTO_MAX_EXTENTS. */
#ifndef MKV_PROTO_EXTENTS_H
#define MKV_PROTO_EXTENTS_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "backend/engine.h"
#include "proto/limits.h"

typedef enum proto_ext_form { PROTO_EXT_REMOTE, PROTO_EXT_LOCAL } proto_ext_form;

/* 0 and *out = r's integer if r is an integer reply in [min, max], else -1. */
int proto_int_in(const redisReply *r, long long min, long long max, uint64_t *out);

/* Decode r: 1..PROTO_MAX_EXTENTS extents in form, lengths summing to
 * exactly size, each cap granting `rights` over exactly its extent (a
 * LOCAL extent takes its node from the cap). On 0, *out is a fresh array
 * of *n extents (free it); on -1 nothing is allocated. */
int proto_extents_decode(const redisReply *r, proto_ext_form form, uint64_t size,
                         uint32_t rights, te_extent **out, uint32_t *n);

#endif
