/* client/placement.c - where an object's bytes live, decoded from the
 * master's reply: per replica an array of [node, offset, length, cap]
 * extents that cover the object in order. Everything is checked before
 * use: a malformed reply is MKV_EPROTO, never a transfer to a wrong range. */
#include <stdlib.h>
#include <string.h>

#include "backend/cap.h"
#include "client/client.h"
#include "core/util.h"

static int int_in(const redisReply *r, long long min, long long max, uint64_t *out) {
    if (!r || r->type != REDIS_REPLY_INTEGER || r->integer < min || r->integer > max) return -1;
    *out = (uint64_t)r->integer;
    return 0;
}

/* One [node, offset, length, cap]; the cap must grant exactly that range. */
static int decode_extent(const redisReply *r, uint32_t rights, te_extent *e) {
    uint64_t node;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4) return -1;
    if (int_in(r->element[0], 1, MKV_MAX_NODES, &node) != 0 ||
        int_in(r->element[1], 0, INT64_MAX, &e->offset) != 0 ||
        int_in(r->element[2], 1, INT64_MAX, &e->length) != 0)
        return -1;
    const redisReply *cap = r->element[3];
    if (cap->type != REDIS_REPLY_STRING || te_cap_decode(&e->cap, (const uint8_t *)cap->str,
                                                         cap->len) != 0)
        return -1;
    e->node_id = (uint32_t)node;
    if (e->cap.node_id != e->node_id || e->cap.offset != e->offset ||
        e->cap.length != e->length || !(e->cap.rights & rights))
        return -1;
    return 0;
}

static int decode_replica(const redisReply *r, uint64_t size, uint32_t rights, mkv_replica *rep) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 || r->elements > MKV_MAX_EXTENTS ||
        r->elements > size)
        return -1;
    rep->extents = xcalloc(r->elements, sizeof *rep->extents);
    rep->nextents = (uint32_t)r->elements;
    uint64_t covered = 0;
    for (size_t i = 0; i < r->elements; i++) {
        te_extent *e = &rep->extents[i];
        if (decode_extent(r->element[i], rights, e) != 0) return -1;
        if (e->length > size - covered) return -1;   /* overflow-safe: covered <= size */
        covered += e->length;
    }
    return covered == size ? 0 : -1;
}

int mkv_placement_decode(mkv_client *c, const redisReply *r, uint64_t size, uint32_t rights,
                         mkv_placement *pl) {
    memset(pl, 0, sizeof *pl);
    pl->size = size;
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 || r->elements > MKV_MAX_REPLICAS)
        return mkv_bad_reply(c, "placement", r);
    for (size_t i = 0; i < r->elements; i++) {
        pl->nreplicas = (uint32_t)i + 1;   /* so free releases a partial decode */
        if (decode_replica(r->element[i], size, rights, &pl->replicas[i]) != 0) {
            mkv_placement_free(pl);
            return mkv_fail(c, MKV_EPROTO, "master: malformed extents in replica %zu", i + 1);
        }
    }
    return MKV_OK;
}

int mkv_located_decode(mkv_client *c, const redisReply *r, mkv_placement *pl) {
    memset(pl, 0, sizeof *pl);
    if (r->type == REDIS_REPLY_NIL) return mkv_fail(c, MKV_ENOTFOUND, "no such object");
    uint64_t size, crc;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        int_in(r->element[0], 1, INT64_MAX, &size) != 0 ||
        int_in(r->element[1], 0, UINT32_MAX, &crc) != 0)
        return mkv_bad_reply(c, "MOON.GET", r);
    int rc = mkv_placement_decode(c, r->element[2], size, TE_CAP_READ, pl);
    pl->crc = (uint32_t)crc;
    return rc;
}

void mkv_placement_free(mkv_placement *pl) {
    for (uint32_t i = 0; i < pl->nreplicas; i++) free(pl->replicas[i].extents);
    memset(pl, 0, sizeof *pl);
}
