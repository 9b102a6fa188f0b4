/* proto/extents.c - see extents.h. */
#include "proto/extents.h"

#include <stdlib.h>

#include "backend/cap.h"
#include "core/util.h"

int proto_int_in(const redisReply *r, long long min, long long max, uint64_t *out) {
    if (!r || r->type != REDIS_REPLY_INTEGER || r->integer < min || r->integer > max) return -1;
    *out = (uint64_t)r->integer;
    return 0;
}

static int cap_of(const redisReply *r, te_cap *cap) {
    if (!r || r->type != REDIS_REPLY_STRING) return -1;
    return te_cap_decode(cap, (const uint8_t *)r->str, r->len);
}

/* One extent; its cap must grant exactly that range. */
static int decode_one(const redisReply *r, proto_ext_form form, uint32_t rights, te_extent *e) {
    size_t fields = form == PROTO_EXT_REMOTE ? 4 : 3, f = 0;
    uint64_t node = 0;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != fields) return -1;
    if (form == PROTO_EXT_REMOTE && proto_int_in(r->element[f++], 1, PROTO_MAX_NODES, &node) != 0)
        return -1;
    if (proto_int_in(r->element[f++], 0, INT64_MAX, &e->offset) != 0 ||
        proto_int_in(r->element[f++], 1, INT64_MAX, &e->length) != 0 ||
        cap_of(r->element[f], &e->cap) != 0)
        return -1;
    e->node_id = form == PROTO_EXT_REMOTE ? (uint32_t)node : e->cap.node_id;
    if (e->cap.node_id != e->node_id || e->cap.offset != e->offset ||
        e->cap.length != e->length || !(e->cap.rights & rights))
        return -1;
    return 0;
}

int proto_extents_decode(const redisReply *r, proto_ext_form form, uint64_t size,
                         uint32_t rights, te_extent **out, uint32_t *n) {
    *out = NULL;
    *n = 0;
    /* every extent holds at least a byte: no more of them than bytes */
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements == 0 ||
        r->elements > PROTO_MAX_EXTENTS || r->elements > size)
        return -1;
    te_extent *ext = xcalloc(r->elements, sizeof *ext);
    uint64_t covered = 0;
    for (size_t i = 0; i < r->elements; i++) {
        te_extent *e = &ext[i];
        /* overflow-safe: covered <= size throughout */
        if (decode_one(r->element[i], form, rights, e) != 0 || e->length > size - covered) {
            free(ext);
            return -1;
        }
        covered += e->length;
    }
    if (covered != size) {
        free(ext);
        return -1;
    }
    *out = ext;
    *n = (uint32_t)r->elements;
    return 0;
}
