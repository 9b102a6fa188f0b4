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
    uint8_t nrep = (uint8_t)o->nreplicas;
    resp_buf_append(b, &nrep, 1);
    for (uint32_t r = 0; r < o->nreplicas; r++) {
        const obj_replica *rep = &o->replicas[r];
        uint8_t n[2];
        le_put16(n, (uint16_t)rep->nextents);
        resp_buf_append(b, n, sizeof n);
        for (uint32_t i = 0; i < rep->nextents; i++) {
            uint8_t wire[TE_CAP_WIRE_LEN];
            proto_cap_wire(&rep->extents[i], g, wire);
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

void proto_placed_free(proto_placed *pl) {
    for (uint32_t r = 0; r < pl->nreplicas; r++) free(pl->ext[r]);
    memset(pl, 0, sizeof *pl);
}

/* n caps at p as extents covering exactly size bytes; NULL if one is
 * out of bounds. */
static te_extent *extents_of(const uint8_t *p, uint32_t n, uint64_t size, uint32_t rights) {
    te_extent *ext = xmalloc(n * sizeof *ext);   /* every field is written below */
    uint64_t covered = 0;
    for (uint32_t i = 0; i < n; i++, p += TE_CAP_WIRE_LEN) {
        te_extent *e = &ext[i];
        /* overflow-safe: covered <= size throughout */
        if (te_cap_decode(&e->cap, p, TE_CAP_WIRE_LEN) != 0 || e->cap.node_id == 0 ||
            e->cap.node_id > PROTO_MAX_NODES || e->cap.length == 0 || e->cap.length > size - covered ||
            e->cap.offset > INT64_MAX || !(e->cap.rights & rights)) {
            free(ext);
            return NULL;
        }
        *e = (te_extent){.node_id = e->cap.node_id, .offset = e->cap.offset, .length = e->cap.length,
                         .cap = e->cap};
        covered += e->length;
    }
    if (covered == size) return ext;
    free(ext);
    return NULL;
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
                        proto_placed *out) {
    const uint8_t *at = *p;
    if (at >= end || at[0] == 0 || at[0] > PROTO_MAX_REPLICAS) return -1;
    uint32_t nrep = at[0];
    at += 1;
    for (uint32_t r = 0; r < nrep; r++) {
        uint32_t n = end - at >= 2 ? le_get16(at) : 0;
        /* every extent holds at least a byte: no more of them than bytes */
        if (n == 0 || n > PROTO_MAX_EXTENTS || n > size || (size_t)(end - at - 2) / TE_CAP_WIRE_LEN < n ||
            !(out->ext[r] = extents_of(at + 2, n, size, rights))) {
            proto_placed_free(out);
            return -1;
        }
        out->next[r] = n;
        out->nreplicas = r + 1;
        at += 2 + (size_t)n * TE_CAP_WIRE_LEN;
    }
    *p = at;
    return 0;
}

int proto_placed_next(const uint8_t **p, const uint8_t *end, uint64_t size, uint32_t rights,
                      proto_placed *out) {
    memset(out, 0, sizeof *out);
    const uint8_t *at = *p;
    if (at >= end) return -1;
    if (at[0] == PLACED_ERR) return error_next(p, end, out);
    if (at[0] != PLACED_OK) return -1;
    at++;
    if (proto_replicas_next(&at, end, size, rights, out) != 0) return -1;
    *p = at;
    return 0;
}
