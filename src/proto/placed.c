/* proto/placed.c - see placed.h. */
#include "proto/placed.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cap.h"
#include "backend/le.h"
#include "core/util.h"

#define PLACED_OK  0
#define PLACED_ERR 1

void proto_replicas_put(resp_buf *b, const object *o, const proto_grant *g) {
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    uint32_t readable = proto_replicas_readable(o);
    uint8_t nrep = (uint8_t)proto_replicas_sent(o, g);
    resp_buf_append(b, &nrep, 1);
    for (uint32_t r = 0; r < o->nreplicas; r++) {
        const obj_replica *rep = &reps[r];
        if (!proto_replica_is_sent(rep, readable, g)) continue;
        int disk = proto_replica_on_disk(rep);
        uint8_t n[2];
        le_put16(n, (uint16_t)(disk ? 1 : rep->nextents));
        resp_buf_append(b, n, sizeof n);
        for (uint32_t i = 0; i < (disk ? 1 : rep->nextents); i++) {
            uint8_t wire[TE_CAP_WIRE_LEN];
            obj_extent ex;
            if (disk) proto_disk_extent(o, rep, g, &ex, wire);   /* the record, read from the node's disk */
            else proto_cap_wire(&rep->extents[i], g, wire);
            resp_buf_append(b, wire, sizeof wire);
        }
    }
}

void proto_placed_put(resp_buf *b, const object *o, const proto_grant *g) {
    uint8_t head = PLACED_OK;
    resp_buf_append(b, &head, 1);
    proto_replicas_put(b, o, g);
}

void proto_placed_put_error(resp_buf *b, const char *text) {
    size_t len = strlen(text);
    if (len > UINT16_MAX) len = UINT16_MAX;
    uint8_t head[3] = {PLACED_ERR};
    le_put16(head + 1, (uint16_t)len);
    resp_buf_append(b, head, sizeof head);
    resp_buf_append(b, text, len);
}

void proto_extbuf_free(proto_extbuf *b) {
    free(b->ext);
    *b = (proto_extbuf){0};
}

te_extent *proto_extbuf_room(proto_extbuf *b, size_t n) {
    if (n > b->cap) {
        free(b->ext);
        b->cap = n < 16 ? 16 : n;
        b->ext = xmalloc(b->cap * sizeof *b->ext);
    }
    return b->ext;
}

/* n caps at p as extents into ext, covering exactly size bytes; -1 if
 * one is out of bounds. */
static int extents_of(const uint8_t *p, uint32_t n, uint64_t size, uint32_t rights, te_extent *ext) {
    uint64_t covered = 0;
    for (uint32_t i = 0; i < n; i++, p += TE_CAP_WIRE_LEN) {
        te_cap cap;
        /* overflow-safe: covered <= size throughout */
        if (te_cap_decode(&cap, p, TE_CAP_WIRE_LEN) != 0 || cap.node_id == 0 || cap.node_id > PROTO_MAX_NODES ||
            cap.length == 0 || cap.length > size - covered || cap.offset > INT64_MAX ||
            !proto_rights_ok(cap.rights, rights))
            return -1;
        ext[i] = (te_extent){.node_id = cap.node_id, .offset = cap.offset, .length = cap.length, .cap = cap};
        covered += cap.length;
    }
    return covered == size ? 0 : -1;
}

/* The nrep replicas' extent counts from at into next, each checked
 * against the blob and the object (every extent holds at least a byte:
 * no more of them than bytes): their sum, or 0 if one breaks a bound. */
static size_t extent_counts(const uint8_t *at, const uint8_t *end, uint32_t nrep, uint64_t size, uint32_t *next) {
    size_t total = 0;
    for (uint32_t r = 0; r < nrep; r++) {
        uint32_t n = end - at >= 2 ? le_get16(at) : 0;
        if (n == 0 || n > PROTO_MAX_EXTENTS || n > size || (size_t)(end - at - 2) / TE_CAP_WIRE_LEN < n) return 0;
        next[r] = n;
        total += n;
        at += 2 + (size_t)n * TE_CAP_WIRE_LEN;
    }
    return total;
}

static int error_next(const uint8_t **p, const uint8_t *end, proto_placed *out) {
    const uint8_t *at = *p + 1;
    if (end - at < 2) return -1;
    size_t len = le_get16(at);
    at += 2;
    if ((size_t)(end - at) < len) return -1;
    out->err = (const char *)at;
    out->errlen = len;
    *p = at + len;
    return 0;
}

int proto_replicas_next(const uint8_t **p, const uint8_t *end, uint64_t size, uint32_t rights,
                        proto_extbuf *buf, proto_placed *out) {
    const uint8_t *at = *p;
    if (!buf || at >= end || at[0] == 0 || at[0] > PROTO_MAX_REPLICAS) return -1;
    uint32_t nrep = at[0], next[PROTO_MAX_REPLICAS];
    at += 1;
    /* the counts first, so the extents get one buffer of the right size */
    size_t total = extent_counts(at, end, nrep, size, next);
    if (total == 0) return -1;
    te_extent *ext = proto_extbuf_room(buf, total);
    for (uint32_t r = 0; r < nrep; r++) {
        if (extents_of(at + 2, next[r], size, rights, ext) != 0) return -1;
        out->ext[r] = ext;
        out->next[r] = next[r];
        ext += next[r];
        at += 2 + (size_t)next[r] * TE_CAP_WIRE_LEN;
    }
    out->nreplicas = nrep;
    out->nextents = (uint32_t)total;
    *p = at;
    return 0;
}

int proto_placed_next(const uint8_t **p, const uint8_t *end, uint64_t size, uint32_t rights,
                      proto_extbuf *buf, proto_placed *out) {
    memset(out, 0, sizeof *out);
    const uint8_t *at = *p;
    if (at >= end) return -1;
    if (at[0] == PLACED_ERR) return error_next(p, end, out);
    if (at[0] != PLACED_OK) return -1;
    at++;
    if (proto_replicas_next(&at, end, size, rights, buf, out) != 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    *p = at;
    return 0;
}
