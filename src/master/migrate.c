/* master/migrate.c - see migrate.h: giving objects away as records,
 * adopting them. */
#include "master/migrate.h"

#include <stdlib.h>
#include <string.h>

#include "backend/le.h"
#include "core/util.h"
#include "master/meta_internal.h"

/* ---- giving ---- */

static void put_record(resp_buf *out, uint32_t node, uint64_t instance, const proto_report_rec *r) {
    uint8_t hdr[MM_GIVE_HDR];
    le_put32(hdr, node);
    le_put64(hdr + 4, instance);
    resp_buf_append(out, hdr, sizeof hdr);
    size_t len = proto_report_len(r);
    if (out->cap - out->len < len) {   /* room for it, then written in place */
        out->cap = out->cap * 2 > out->len + len ? out->cap * 2 : out->len + len;
        out->data = xrealloc(out->data, out->cap);
    }
    out->len += proto_report_put((uint8_t *)out->data + out->len, r);
}

void mm_give_records(master_meta *m, const object *o, resp_buf *out) {
    const proto_slices *sl = mm_obj_slices(o);
    uint8_t *packed = sl->count ? xmalloc(4 * (size_t)sl->count) : NULL;
    if (packed) proto_slices_pack(sl, packed);
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t i = 0; i < o->nreplicas; i++) {
        uint64_t at = 0;
        for (uint32_t k = 0; k < reps[i].nextents; k++) {
            const obj_extent *e = &reps[i].extents[k];
            const mm_node *n = mm_node_get(m, e->node);
            proto_report_rec r = {o->key, o->keylen, o->size, o->crc, mm_obj_of(o)->want, at, e->offset, e->length,
                                  {0, 0, NULL}};
            if (k == 0 && packed) r.slices = (proto_slices_ref){sl->size, sl->count, packed};
            put_record(out, e->node, n ? n->instance : 0, &r);
            at += e->length;
        }
    }
    free(packed);
}

/* o leaves the table; its extents stay reserved in their allocators (the
 * bytes are another group's now: a shared node tells us when it lent them,
 * then they are withheld, mm_node_lent) and its nodes are told nothing
 * (the adopter notes them its own). Extents we had lent from another
 * group's chunks (a move back) go back to withheld at once. */
static void give_away(master_meta *m, object *o, mm_give_pass *p) {
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t i = 0; i < o->nreplicas; i++)
        for (uint32_t k = 0; k < reps[i].nextents; k++) {
            const obj_extent *e = &reps[i].extents[k];
            mm_node *n = mm_node_get(m, e->node);
            if (e->offset == MM_ON_DISK) continue;
            p->lent_bytes += e->length;
            if (n && n->alloc) mm_extent_given(n, e->offset, e->length);
        }
    m->under_replicated -= mm_under(o);
    otable_unlink(m->objs, o);
    m->slice_crc_bytes -= (uint64_t)mm_obj_slices(o)->count * sizeof(uint32_t);
    mm_obj_free(o);
    object_free_replicas(o);
    otable_free(m->objs, o);
    p->given++;
}

typedef struct give_ctx {
    master_meta *m;
    mm_give_pass *p;
    mm_give_fn *fn;
    void *ctx;
    resp_buf *outs;
    size_t *objects;
} give_ctx;

static void give_one(object *o, void *arg) {
    give_ctx *g = arg;
    int dest = 0;
    if (o->state != OBJ_COMPLETE || !g->fn(o, g->ctx, &dest) || dest < 0 || dest >= MM_GIVE_DESTS) return;
    if (mm_obj_job(o)) {   /* a copy in flight names it: next pass */
        g->p->busy++;
        return;
    }
    mm_give_records(g->m, o, &g->outs[dest]);
    if (g->objects) g->objects[dest]++;
    give_away(g->m, o, g->p);
}

int mm_give_step(master_meta *m, mm_give_pass *p, mm_give_fn *fn, void *ctx, resp_buf *outs, size_t *objects) {
    give_ctx g = {m, p, fn, ctx, outs, objects};
    p->cursor = otable_scan(m->objs, p->cursor, give_one, &g);
    return p->cursor != 0;
}

/* ---- adopting ---- */

/* Our id of the node the giver calls id, by its process's token. */
static uint32_t our_node(master_meta *m, uint32_t id, uint64_t instance) {
    if (!instance) return 0;
    const mm_node *n = mm_node_view(m, id);
    if (n && n->instance == instance && n->alloc) return id;
    for (uint32_t i = 1; i <= mm_node_count(m); i++)
        if ((n = mm_node_view(m, i)) && n->instance == instance && n->alloc) return i;
    return 0;
}

/* The records of blob into v (room for len / (MM_GIVE_HDR + PROTO_REPORT_HDR)),
 * nodes still the giver's ids; instances into inst: how many, or -1. */
static long decode(const uint8_t *blob, size_t len, mm_report *v, uint64_t *inst) {
    const uint8_t *p = blob, *end = blob + len;
    long n = 0;
    while (p < end) {
        if ((size_t)(end - p) < MM_GIVE_HDR) return -1;
        uint32_t node = le_get32(p);
        inst[n] = le_get64(p + 4);
        p += MM_GIVE_HDR;
        proto_report_rec r;
        if (proto_report_next(&p, end, &r) != 0) return -1;
        const uint8_t *sl = r.slices.count ? (const uint8_t *)r.key + r.keylen : NULL;
        v[n++] = (mm_report){node, (uint32_t)r.keylen, r.key, r.size, r.crc, r.want, r.obj_off, r.seg_off, r.length, sl};
    }
    return n;
}

static int same_key(const mm_report *a, const mm_report *b) {
    return a->keylen == b->keylen && memcmp(a->key, b->key, a->keylen) == 0;
}

/* The records [from, to) of one object: nodes made ours in place; 0 if
 * one is not known here. */
static int map_nodes(master_meta *m, mm_report *v, const uint64_t *inst, size_t from, size_t to) {
    for (size_t i = from; i < to; i++)
        if (!(v[i].node = our_node(m, v[i].node, inst[i]))) return 0;
    return 1;
}

int mm_adopt(master_meta *m, const uint8_t *blob, size_t len, uint64_t hold_ms, uint64_t now_ms,
             mm_adopt_stats *st) {
    memset(st, 0, sizeof *st);
    size_t room = len / (MM_GIVE_HDR + PROTO_REPORT_HDR) + 1;
    mm_report *v = xmalloc(room * sizeof *v);
    uint64_t *inst = xmalloc(room * sizeof *inst);
    long n = decode(blob, len, v, inst);
    if (n < 0) {
        free(v);
        free(inst);
        return -1;
    }
    st->records = (uint64_t)n;
    size_t keep = 0, wanted = 0;
    for (size_t i = 0, j; i < (size_t)n; i = j) {   /* an object's records are consecutive */
        for (j = i + 1; j < (size_t)n && same_key(&v[i], &v[j]); j++) {}
        if (mm_find(m, v[i].key, v[i].keylen)) {
            st->present++;
        } else if (!map_nodes(m, v, inst, i, j)) {
            st->waiting++;
        } else {
            memmove(&v[keep], &v[i], (j - i) * sizeof *v);
            keep += j - i;
            wanted++;
        }
    }
    mm_rebuild_stats rs;
    if (keep) mm_rebuild(m, v, keep, now_ms, &rs, NULL, NULL);
    else memset(&rs, 0, sizeof rs);
    st->objects = rs.objects;
    st->refused = wanted - rs.objects;
    for (size_t i = 0; i < keep; i++) {   /* the giver's readers' leases; the nodes learn it is ours */
        if (i && same_key(&v[i - 1], &v[i])) continue;
        object *o = mm_find(m, v[i].key, v[i].keylen);
        if (!o) continue;
        mm_more_get(o)->hold_until = now_ms + hold_ms;
        mm_note_object(m, o, 0);
    }
    free(v);
    free(inst);
    return 0;
}

size_t mm_give_cut(const uint8_t *blob, size_t len, size_t max) {
    const uint8_t *p = blob, *end = blob + len, *key = NULL;
    size_t keylen = 0, cut = 0;   /* the last object boundary within max */
    while (p < end) {
        size_t at = (size_t)(p - blob);
        proto_report_rec r;
        if ((size_t)(end - p) < MM_GIVE_HDR) break;
        p += MM_GIVE_HDR;
        if (proto_report_next(&p, end, &r) != 0) break;
        if (key && r.keylen == keylen && memcmp(r.key, key, keylen) == 0) continue;
        if (key) {   /* an object ends at at */
            if (at > max) return cut ? cut : at;
            cut = at;
        }
        key = (const uint8_t *)r.key, keylen = r.keylen;
    }
    return len <= max || !cut ? len : cut;
}
