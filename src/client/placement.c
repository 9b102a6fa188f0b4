/* client/placement.c - where an object's bytes live, decoded from the
 * master's reply: per replica an array of [node, offset, length, cap]
 * extents that cover the object in order, decoded and checked by
 * proto/extents.c: a malformed reply is MKV_EPROTO, never a transfer to
 * a wrong range. */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "proto/extents.h"
#include "proto/slices.h"

int mkv_placement_decode(mkv_client *c, const redisReply *r, uint64_t size, uint32_t rights,
                         mkv_placement *pl) {
    memset(pl, 0, sizeof *pl);
    pl->size = size;
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 || r->elements > PROTO_MAX_REPLICAS)
        return mkv_bad_reply(c, "placement", r);
    for (size_t i = 0; i < r->elements; i++) {
        pl->nreplicas = (uint32_t)i + 1;   /* so free releases a partial decode */
        mkv_replica *rep = &pl->replicas[i];
        if (proto_extents_decode(r->element[i], PROTO_EXT_REMOTE, size, rights, &rep->extents,
                                 &rep->nextents) != 0) {
            mkv_placement_free(pl);
            return mkv_fail(c, MKV_EPROTO, "master: malformed extents in replica %zu", i + 1);
        }
    }
    pl->term = pl->replicas[0].extents[0].cap.term;   /* one reply: one master's */
    return MKV_OK;
}

int mkv_located_decode(mkv_client *c, const redisReply *r, mkv_placement *pl) {
    memset(pl, 0, sizeof *pl);
    if (r->type == REDIS_REPLY_NIL) return mkv_fail(c, MKV_ENOTFOUND, "no such object");
    uint64_t size, crc;
    if (r->type != REDIS_REPLY_ARRAY || (r->elements != 3 && r->elements != 5) ||
        proto_int_in(r->element[0], 1, INT64_MAX, &size) != 0 ||
        proto_int_in(r->element[1], 0, UINT32_MAX, &crc) != 0)
        return mkv_bad_reply(c, "MOON.GET", r);
    int rc = mkv_placement_decode(c, r->element[2], size, TE_CAP_READ, pl);
    pl->crc = (uint32_t)crc;
    if (rc == MKV_OK && r->elements == 5 &&
        proto_slices_decode(r->element[3], r->element[4], size, pl->crc, &pl->slices) != 0)
        rc = mkv_bad_reply(c, "MOON.GET's slice CRCs", r);
    return rc;
}

void mkv_placement_free(mkv_placement *pl) {
    for (uint32_t i = 0; i < pl->nreplicas; i++) free(pl->replicas[i].extents);
    proto_slices_free(&pl->slices);
    memset(pl, 0, sizeof *pl);
}
