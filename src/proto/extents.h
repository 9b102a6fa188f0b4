/* proto/extents.h - extents and their capabilities on the wire.
 *
 * Replies name where bytes live as arrays of extents, each with the
 * capability (backend/cap.h) that grants it (docs/PROTOCOL.md):
 *   PROTO_EXT_REMOTE  [node, offset, length, cap]   MOON.PUTSTART, MOON.GET,
 *                                                   a task's sources
 *   PROTO_EXT_LOCAL   [offset, length, cap]         a task's destinations
 *                                                   (the executing node's)
 * The encoders sign each extent's cap as they write it (the master's
 * side); the decoder refuses a reply whole unless every shape, number
 * and cap is right and the extents cover the object exactly, so what a
 * peer can make us allocate is bounded by PROTO_MAX_EXTENTS. */
#ifndef MKV_PROTO_EXTENTS_H
#define MKV_PROTO_EXTENTS_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "backend/cap.h"
#include "backend/engine.h"
#include "core/objtable.h"
#include "proto/limits.h"
#include "resp/resp_writer.h"

typedef enum proto_ext_form { PROTO_EXT_REMOTE, PROTO_EXT_LOCAL } proto_ext_form;

/* A replica on nodes' disk tiers rather than in their segments: one
 * extent {node, PROTO_ON_DISK, size}, or for an object striped over
 * nodes its layout with every offset PROTO_ON_DISK (each node's slices
 * one record there; a segment offset can never be this, and a replica
 * is on disk whole or not at all). A reader is sent an object's DRAM
 * replicas; only an object with none is sent its whole records (one
 * extent each), read from the node's disk (TE_READ_DISK): such an
 * extent is {node, crc, size} under a cap of rights TE_CAP_DISK naming
 * the record (backend/cap.h). Shares of a striped one are not sent. */
#define PROTO_ON_DISK UINT64_MAX
static inline int proto_replica_on_disk(const obj_replica *r) {
    return r->nextents >= 1 && r->extents[0].offset == PROTO_ON_DISK;
}
/* o's replicas a reader can be sent (not on disk). */
static inline uint32_t proto_replicas_readable(const object *o) {
    uint32_t n = 0;
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t r = 0; r < o->nreplicas; r++) n += !proto_replica_on_disk(&reps[r]);
    return n;
}

/* A disk replica a reader may be sent: one record, the object whole. */
static inline int proto_replica_disk_whole(const obj_replica *r) {
    return proto_replica_on_disk(r) && r->nextents == 1;
}
/* How many replicas of o a reader is sent: its DRAM ones, or with none
 * its whole disk records. */
static inline uint32_t proto_replicas_for_reader(const object *o) {
    uint32_t n = proto_replicas_readable(o);
    if (n) return n;
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t r = 0; r < o->nreplicas; r++) n += proto_replica_disk_whole(&reps[r]);
    return n;
}
/* Whether a reader asking `rights` (read: TE_CAP_READ) may take a cap of
 * cap_rights: a read is also served by a disk cap. */
static inline int proto_rights_ok(uint32_t cap_rights, uint32_t rights) {
    return (cap_rights & rights) || ((rights & TE_CAP_READ) && (cap_rights & TE_CAP_DISK));
}

/* The grant of a signed capability, expiring at expiry_ms. */
typedef struct proto_grant {
    uint32_t rights;              /* TE_CAP_READ or TE_CAP_WRITE */
    uint64_t expiry_ms;
    const uint8_t *key;           /* TE_CAP_KEY_LEN bytes */
    uint64_t issued_us;           /* write grants: unique, newer wins on the node */
    uint64_t term;                /* the issuing master's (cap.h) */
} proto_grant;

/* e's cap under g, signed, in its wire form. */
void proto_cap_wire(const obj_extent *e, const proto_grant *g, uint8_t wire[TE_CAP_WIRE_LEN]);
/* The replicas of o a grant g sends (proto_replicas_encode, _put): for
 * reads its DRAM ones, or with none its whole disk records; for writes
 * its DRAM ones. sent(o, g) counts them, is_sent(r, readable, g) says
 * whether r is one (readable: proto_replicas_readable(o)). */
uint32_t proto_replicas_sent(const object *o, const proto_grant *g);
int proto_replica_is_sent(const obj_replica *r, uint32_t readable, const proto_grant *g);
/* The extent and signed cap (wire form) a reader of o is sent for r's
 * record on its node: {node, o->crc, o->size}, rights TE_CAP_DISK,
 * issued_us the key's te_cap_disk_tag. */
void proto_disk_extent(const object *o, const obj_replica *r, const proto_grant *g, obj_extent *ext,
                       uint8_t wire[TE_CAP_WIRE_LEN]);
/* An array of the n extents e in form, each with its cap under g. */
void proto_extents_encode(resp_buf *b, proto_ext_form form, const obj_extent *e, uint32_t n,
                          const proto_grant *g);
/* Per replica of o its REMOTE extents (MOON.PUTSTART, MOON.GET). */
void proto_replicas_encode(resp_buf *b, const object *o, const proto_grant *g);

/* 0 and *out = r's integer if r is an integer reply in [min, max], else -1. */
int proto_int_in(const redisReply *r, long long min, long long max, uint64_t *out);

/* Decode r into ext (room for cap extents): 1..PROTO_MAX_EXTENTS extents
 * in form, lengths summing to exactly size, each cap granting `rights`
 * over exactly its extent (a LOCAL extent takes its node from the cap).
 * On 0 their count is in *n; on -1 ext holds nothing usable. */
int proto_extents_decode_into(const redisReply *r, proto_ext_form form, uint64_t size,
                              uint32_t rights, te_extent *ext, uint32_t cap, uint32_t *n);
/* The same checks, for a part of an object (a node's share of a striped
 * replica in a copy task): lengths summing to at most size, the sum in
 * *total. On 0, *out is a fresh array of *n extents (free it); on -1
 * nothing is allocated. */
int proto_extents_decode_share(const redisReply *r, proto_ext_form form, uint64_t size,
                               uint32_t rights, te_extent **out, uint32_t *n, uint64_t *total);

#endif
