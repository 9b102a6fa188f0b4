/* master/rebuild.c - re-creating the object table from what nodes hold.
 *
 * After a master restart the nodes are the truth: each reports the
 * extents it holds (key, object size and checksum, which object bytes,
 * where in its segment). Extents of one key are chained in object order
 * into whole replicas; what forms no whole replica, overlaps another
 * claim or lies outside a segment is refused and its space stays free. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "master/meta_internal.h"

/* Replicas being assembled for one key: end = object bytes covered so far. */
typedef struct partial {
    obj_replica r;
    uint64_t end;
} partial;

#define MM_MAX_PARTIALS (2 * PROTO_MAX_REPLICAS)

static int by_key_then_offset(const void *a, const void *b) {
    const mm_report *x = *(const mm_report *const *)a, *y = *(const mm_report *const *)b;
    size_t n = x->keylen < y->keylen ? x->keylen : y->keylen;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    if (x->keylen != y->keylen) return x->keylen < y->keylen ? -1 : 1;
    if (x->obj_off != y->obj_off) return x->obj_off < y->obj_off ? -1 : 1;
    return x->node < y->node ? -1 : x->node > y->node;
}

static int same_key(const mm_report *a, const mm_report *b) {
    return a->keylen == b->keylen && memcmp(a->key, b->key, a->keylen) == 0;
}

/* The partial replica r continues, or NULL: one ending at r's offset,
 * preferring one already on r's node (a node holds every width-th slice). */
static partial *continue_of(partial *p, uint32_t np, const mm_report *r) {
    partial *any = NULL;
    for (uint32_t i = 0; i < np; i++) {
        if (p[i].end != r->obj_off || p[i].r.nextents == 0) continue;
        if (mm_replica_on_node(&p[i].r, r->node)) return &p[i];
        if (!any) any = &p[i];
    }
    return any;
}

/* Claim r's range and chain it; 0 if accepted. */
static int accept_extent(master_meta *m, partial *p, uint32_t *np, const mm_report *r,
                         const mm_report *first) {
    mm_node *node = mm_node_get(m, r->node);
    if (!node || !node->alloc || r->size != first->size || r->crc != first->crc) return -1;
    if (r->length == 0 || r->obj_off >= r->size || r->length > r->size - r->obj_off) return -1;
    partial *to = continue_of(p, *np, r);
    if (!to) {
        if (r->obj_off != 0 || *np == MM_MAX_PARTIALS) return -1;
        to = &p[(*np)++];
    }
    if (seg_alloc_reserve_at(node->alloc, r->seg_off, r->length) != ALLOC_OK) {
        if (to->r.nextents == 0) (*np)--;
        return -1;
    }
    obj_extent e = {r->node, r->seg_off, r->length};
    to->r.extents = xrealloc(to->r.extents, (to->r.nextents + 1) * sizeof e);
    to->r.extents[to->r.nextents++] = e;
    to->end += r->length;
    return 0;
}

/* Turn the whole replicas of one key into a COMPLETE object; give back
 * the extents of the rest. */
static void commit_key(master_meta *m, const mm_report *first, partial *p, uint32_t np,
                       uint64_t now_ms, mm_rebuild_stats *st) {
    obj_replica whole[PROTO_MAX_REPLICAS];
    uint32_t nwhole = 0;
    for (uint32_t i = 0; i < np; i++) {
        if (p[i].end == first->size && nwhole < PROTO_MAX_REPLICAS) {
            whole[nwhole++] = p[i].r;
            continue;
        }
        for (uint32_t k = 0; k < p[i].r.nextents; k++) {
            const obj_extent *e = &p[i].r.extents[k];
            seg_alloc_release(mm_node_get(m, e->node)->alloc, e->offset, e->length);
        }
        st->extents_rejected += p[i].r.nextents;
        st->extents -= p[i].r.nextents;
    }
    if (nwhole) {
        int existed = 0;
        object *o = objtable_insert(m->objs, first->key, first->keylen, &existed);
        o->size = first->size;
        o->crc = first->crc;
        o->state = OBJ_COMPLETE;
        o->created_ms = now_ms;
        object_set_replicas(o, whole, nwhole);
        mm_obj_new(m, o, nwhole, now_ms);
        st->objects++;
        st->replicas += nwhole;
    }
    for (uint32_t i = 0; i < np; i++) mm_replica_clear(&p[i].r);
}

void mm_rebuild(master_meta *m, const mm_report *reports, size_t n, uint64_t now_ms,
                mm_rebuild_stats *st) {
    memset(st, 0, sizeof *st);
    const mm_report **v = xcalloc(n ? n : 1, sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = &reports[i];
    qsort(v, n, sizeof *v, by_key_then_offset);
    for (size_t i = 0; i < n;) {
        size_t end = i + 1;
        while (end < n && same_key(v[i], v[end])) end++;
        const mm_report *first = v[i];
        int usable = first->keylen > 0 && first->keylen <= PROTO_MAX_KEY_LEN && first->size > 0 &&
                     !mm_find(m, first->key, first->keylen);
        partial p[MM_MAX_PARTIALS];
        memset(p, 0, sizeof p);
        uint32_t np = 0;
        for (size_t k = i; k < end; k++) {
            if (usable && accept_extent(m, p, &np, v[k], first) == 0) st->extents++;
            else st->extents_rejected++;
        }
        commit_key(m, first, p, np, now_ms, st);
        i = end;
    }
    free(v);
    m->repair_dirty = 1;
}
