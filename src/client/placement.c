/* client/placement.c - where an object's bytes live, decoded from the
 * master's reply: per replica an array of [node, offset, length, cap]
 * extents that cover the object in order, decoded and checked by
 * proto/extents.c: a malformed reply is MKV_EPROTO, never a transfer to
 * a wrong range. */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "core/util.h"
#include "proto/extents.h"
#include "proto/placed.h"
#include "proto/slices.h"

/* Every replica's extents in one block: a placement owns that block or,
 * taken from a record (mkv_placement_take), nothing. */
static te_extent *own_block(mkv_placement *pl, size_t n) {
    pl->block = xmalloc((n ? n : 1) * sizeof *pl->block);
    return pl->block;
}

int mkv_placement_decode(mkv_client *c, const redisReply *r, uint64_t size, uint32_t rights,
                         mkv_placement *pl) {
    memset(pl, 0, sizeof *pl);
    pl->size = size;
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 || r->elements > PROTO_MAX_REPLICAS)
        return mkv_bad_reply(c, "placement", r);
    size_t total = 0;   /* bounded before the sum: at most 8 x PROTO_MAX_EXTENTS */
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements > PROTO_MAX_EXTENTS)
            return mkv_fail(c, MKV_EPROTO, "master: malformed extents in replica %zu", i + 1);
        total += e->elements;
    }
    te_extent *ext = own_block(pl, total), *end = ext + total;
    for (size_t i = 0; i < r->elements; i++) {
        mkv_replica *rep = &pl->replicas[i];
        if (proto_extents_decode_into(r->element[i], PROTO_EXT_REMOTE, size, rights, ext,
                                      (uint32_t)(end - ext), &rep->nextents) != 0) {
            mkv_placement_free(pl);
            return mkv_fail(c, MKV_EPROTO, "master: malformed extents in replica %zu", i + 1);
        }
        rep->extents = ext;
        ext += rep->nextents;
        pl->nreplicas = (uint32_t)i + 1;
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
        return mkv_bad_reply(c, PROTO_VERB_GET, r);
    int rc = mkv_placement_decode(c, r->element[2], size, TE_CAP_READ, pl);
    pl->crc = (uint32_t)crc;
    if (rc == MKV_OK && r->elements == 5 &&
        proto_slices_decode(r->element[3], r->element[4], size, pl->crc, &pl->slices) != 0)
        rc = mkv_bad_reply(c, PROTO_VERB_GET "'s slice CRCs", r);
    return rc;
}

/* The part of replica r covering object bytes [off, off+len), as extents
 * of its own in out (room for r's): same caps, a node takes any range
 * inside a grant. */
static int clip_replica(const mkv_replica *r, uint64_t off, uint64_t len, te_extent *out,
                        uint32_t *n) {
    uint64_t at = 0, end = off + len;
    *n = 0;
    for (uint32_t i = 0; i < r->nextents && at < end; i++) {
        const te_extent *e = &r->extents[i];
        uint64_t lo = off > at ? off : at, hi = end < at + e->length ? end : at + e->length;
        if (lo < hi) {
            te_extent *x = &out[(*n)++];
            *x = *e;
            x->offset = e->offset + (lo - at);
            x->length = hi - lo;
        }
        at += e->length;
    }
    return at >= end ? MKV_OK : MKV_EINVAL;
}

int mkv_placement_clip(mkv_client *c, const mkv_placement *whole, uint64_t off, uint64_t len,
                       mkv_placement *pl) {
    memset(pl, 0, sizeof *pl);
    pl->term = whole->term;
    pl->size = len;
    size_t total = 0;
    for (uint32_t r = 0; r < whole->nreplicas; r++) total += whole->replicas[r].nextents;
    te_extent *ext = own_block(pl, total);
    for (uint32_t r = 0; r < whole->nreplicas; r++, pl->nreplicas++) {
        mkv_replica *rep = &pl->replicas[r];
        rep->extents = ext;
        if (clip_replica(&whole->replicas[r], off, len, ext, &rep->nextents) != MKV_OK)
            return mkv_fail(c, MKV_EPROTO, "a replica's extents do not cover the object");
        ext += rep->nextents;
    }
    return MKV_OK;
}

void mkv_placement_take(mkv_placement *pl, const proto_placed *r, te_extent *ext) {
    /* The decoder checked: 1..8 replicas, each covering the object. */
    *pl = (mkv_placement){.term = r->ext[0][0].cap.term, .nreplicas = r->nreplicas};   /* one master's */
    for (uint32_t i = 0; i < r->nreplicas; i++) {
        memcpy(ext, r->ext[i], r->next[i] * sizeof *ext);
        pl->replicas[i] = (mkv_replica){.nextents = r->next[i], .extents = ext};
        ext += r->next[i];
    }
    for (uint32_t i = 0; i < r->next[0]; i++) pl->size += r->ext[0][i].length;
}

void mkv_placement_take_own(mkv_placement *pl, const proto_placed *r) {
    te_extent *block = xmalloc(r->nextents * sizeof *block);
    mkv_placement_take(pl, r, block);
    pl->block = block;
}

void mkv_placement_free(mkv_placement *pl) {
    free(pl->block);
    proto_slices_free(&pl->slices);
    memset(pl, 0, sizeof *pl);
}
