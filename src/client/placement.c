/* client/placement.c - where an object's bytes live: the master's reply
 * decoded by proto/ (replicas.h for the array forms of PUTSTART and GET,
 * placed.h for the packed records) into a placement the engine takes as
 * it is. A malformed reply is MKV_EPROTO, never a transfer to a wrong
 * range. */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "core/util.h"
#include "proto/placed.h"
#include "proto/replicas.h"
#include "proto/slices.h"

/* Every replica's extents in one block: a placement owns that block or,
 * taken from a record (mkv_placement_take), nothing. */
static te_extent *own_block(mkv_placement *pl, size_t n) {
    pl->block = xmalloc((n ? n : 1) * sizeof *pl->block);
    return pl->block;
}

/* pl from a decoded reply: its replicas over the extents in buf, whose
 * block pl now owns (buf is left empty). */
static void take_block(mkv_placement *pl, const proto_placed *r, proto_extbuf *buf, uint64_t size) {
    for (uint32_t i = 0; i < r->nreplicas; i++)
        pl->replicas[i] = (mkv_replica){.nextents = r->next[i], .extents = r->ext[i]};
    pl->nreplicas = r->nreplicas;
    pl->size = size;
    pl->term = r->ext[0][0].cap.term;   /* one reply: one master's */
    pl->block = buf->ext;
    *buf = (proto_extbuf){0};
}

int mkv_placement_decode(mkv_client *c, const redisReply *r, uint64_t size, uint32_t rights,
                         mkv_placement *pl) {
    memset(pl, 0, sizeof *pl);
    pl->size = size;
    proto_extbuf buf = {0};
    proto_placed reps;
    if (proto_dec_replicas(r, size, rights, &buf, &reps) != 0) {
        proto_extbuf_free(&buf);
        if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 || r->elements > PROTO_MAX_REPLICAS)
            return mkv_bad_reply(c, "placement", r);
        return mkv_fail(c, MKV_EPROTO, "master: malformed extents in a replica of the placement");
    }
    take_block(pl, &reps, &buf, size);
    return MKV_OK;
}

int mkv_located_decode(mkv_client *c, const redisReply *r, mkv_placement *pl) {
    memset(pl, 0, sizeof *pl);
    proto_extbuf buf = {0};
    proto_location loc;
    int rc = proto_dec_location(r, &buf, &loc);
    if (rc <= 0) {
        proto_extbuf_free(&buf);
        return rc == 0 ? mkv_fail(c, MKV_ENOTFOUND, "no such object") : mkv_bad_reply(c, PROTO_VERB_GET, r);
    }
    take_block(pl, &loc.reps, &buf, loc.size);
    pl->crc = loc.crc;
    pl->slices = loc.slices;
    return MKV_OK;
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
