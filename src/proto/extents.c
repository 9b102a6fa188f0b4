/* proto/extents.c - see extents.h. */
#include "proto/extents.h"

#include <stdlib.h>

#include "core/util.h"

void proto_cap_wire(const obj_extent *e, const proto_grant *g, uint8_t wire[TE_CAP_WIRE_LEN]) {
    te_cap cap = {.node_id = e->node, .rights = g->rights, .offset = e->offset,
                  .length = e->length, .expiry_ms = g->expiry_ms, .term = g->term,
                  .issued_us = g->issued_us};
    te_cap_sign(&cap, g->key);
    te_cap_encode(&cap, wire);
}

void proto_disk_extent(const object *o, const obj_replica *r, const proto_grant *g, obj_extent *ext,
                       uint8_t wire[TE_CAP_WIRE_LEN]) {
    *ext = (obj_extent){r->extents[0].node, o->crc, o->size};
    te_cap cap = {.node_id = ext->node, .rights = TE_CAP_DISK, .offset = ext->offset, .length = ext->length,
                  .expiry_ms = g->expiry_ms, .term = g->term, .issued_us = te_cap_disk_tag(o->key, o->keylen)};
    te_cap_sign(&cap, g->key);
    te_cap_encode(&cap, wire);
}

uint32_t proto_replicas_sent(const object *o, const proto_grant *g) {
    return g->rights == TE_CAP_READ ? proto_replicas_for_reader(o) : proto_replicas_readable(o);
}

int proto_replica_is_sent(const obj_replica *r, uint32_t readable, const proto_grant *g) {
    if (readable || g->rights != TE_CAP_READ) return !proto_replica_on_disk(r);
    return proto_replica_disk_whole(r);
}

static void encode_wire(resp_buf *b, proto_ext_form form, const obj_extent *e, const uint8_t *wire) {
    resp_add_array(b, form == PROTO_EXT_REMOTE ? 4 : 3);
    if (form == PROTO_EXT_REMOTE) resp_add_integer(b, e->node);
    resp_add_integer(b, (long long)e->offset);
    resp_add_integer(b, (long long)e->length);
    resp_add_bulk(b, wire, TE_CAP_WIRE_LEN);
}

static void encode_one(resp_buf *b, proto_ext_form form, const obj_extent *e, const proto_grant *g) {
    uint8_t wire[TE_CAP_WIRE_LEN];
    proto_cap_wire(e, g, wire);
    encode_wire(b, form, e, wire);
}

void proto_extents_encode(resp_buf *b, proto_ext_form form, const obj_extent *e, uint32_t n,
                          const proto_grant *g) {
    resp_add_array(b, n);
    for (uint32_t i = 0; i < n; i++) encode_one(b, form, &e[i], g);
}

void proto_replicas_encode(resp_buf *b, const object *o, const proto_grant *g) {
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    uint32_t readable = proto_replicas_readable(o);
    resp_add_array(b, proto_replicas_sent(o, g));
    for (uint32_t r = 0; r < o->nreplicas; r++) {
        if (!proto_replica_is_sent(&reps[r], readable, g)) continue;
        if (readable || !proto_replica_on_disk(&reps[r])) {
            proto_extents_encode(b, PROTO_EXT_REMOTE, reps[r].extents, reps[r].nextents, g);
            continue;
        }
        obj_extent ex;
        uint8_t wire[TE_CAP_WIRE_LEN];
        proto_disk_extent(o, &reps[r], g, &ex, wire);
        resp_add_array(b, 1);
        encode_wire(b, PROTO_EXT_REMOTE, &ex, wire);
    }
}

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
        e->cap.length != e->length || !proto_rights_ok(e->cap.rights, rights))
        return -1;
    return 0;
}

/* Checks and decodes r's extents into ext (room for cap): their count
 * in *n and the sum of their lengths, at most size, in *covered. */
static int decode_into(const redisReply *r, proto_ext_form form, uint64_t size, uint32_t rights,
                       te_extent *ext, uint32_t cap, uint32_t *n, uint64_t *covered) {
    *n = 0;
    *covered = 0;
    /* every extent holds at least a byte: no more of them than bytes */
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements == 0 || r->elements > cap ||
        r->elements > PROTO_MAX_EXTENTS || r->elements > size)
        return -1;
    for (size_t i = 0; i < r->elements; i++) {
        te_extent *e = &ext[i];
        /* overflow-safe: covered <= size throughout */
        if (decode_one(r->element[i], form, rights, e) != 0 || e->length > size - *covered) return -1;
        *covered += e->length;
    }
    *n = (uint32_t)r->elements;
    return 0;
}

int proto_extents_decode_share(const redisReply *r, proto_ext_form form, uint64_t size,
                               uint32_t rights, te_extent **out, uint32_t *n, uint64_t *total) {
    *out = NULL;
    *n = 0;
    *total = 0;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements == 0 || r->elements > PROTO_MAX_EXTENTS)
        return -1;
    te_extent *ext = xcalloc(r->elements, sizeof *ext);
    if (decode_into(r, form, size, rights, ext, (uint32_t)r->elements, n, total) != 0) {
        free(ext);
        return -1;
    }
    *out = ext;
    return 0;
}

int proto_extents_decode_into(const redisReply *r, proto_ext_form form, uint64_t size,
                              uint32_t rights, te_extent *ext, uint32_t cap, uint32_t *n) {
    uint64_t covered;
    if (decode_into(r, form, size, rights, ext, cap, n, &covered) != 0 || covered != size) {
        *n = 0;
        return -1;
    }
    return 0;
}
