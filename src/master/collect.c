/* master/collect.c - garbage collection for the cluster: the master
 * decides, the nodes free as on a remove (they keep no index, so the
 * master giving the extents back to its allocators is the whole of it).
 *
 * Victims come from core/evict.h, the same choice the standalone store
 * makes. The master adds its veto: an object with a read lease
 * outstanding (mm_hold_until: a read cap on its bytes may still be used)
 * or with a replica copy in flight stays, and so does one a prefix
 * lookup pinned (core/pinset.h). */
#include "master/meta_internal.h"

#define COLLECT_MAX_PER_PUT 1024   /* victims one put may cost before NOSPACE */

typedef struct veto_ctx {
    master_meta *m;
    uint64_t now_ms;
} veto_ctx;

static int may_collect(const object *o, void *arg) {
    const veto_ctx *v = arg;
    return !mm_obj_job(o) && mm_hold_until(o, v->now_ms) == 0 &&
           pinset_left(v->m->pins, o->key, o->keylen, v->now_ms) == 0 &&   /* a lookup will load it */
           mm_repin_left(v->m, o, v->now_ms) == 0;   /* or it may, once pinned again */
}

static uint64_t scan_objects(void *t, uint64_t cursor, objtable_scan_fn *fn, void *ctx) {
    return otable_scan(t, cursor, fn, ctx);
}

/* One victim dropped; 0 if none may go. */
static int collect_one(master_meta *m, uint64_t now_ms) {
    veto_ctx v = {m, now_ms};
    object *o = evictor_pick_in(&m->gc, scan_objects, m->objs, otable_size(m->objs), now_ms, may_collect, &v);
    if (!o) return 0;
    mm_drop_object(m, o, now_ms);
    return 1;
}

static void bytes_in_use(master_meta *m, uint64_t *used, uint64_t *total) {
    *used = *total = 0;
    for (uint32_t i = 0; i < m->nnodes; i++) {
        mm_node *n = m->nodes[i];
        if (!n || !n->alloc || n->state == NODE_DEAD) continue;
        seg_alloc_stats as;
        seg_alloc_get_stats(n->alloc, &as);
        *used += as.used;
        *total += as.size;
    }
}

int mm_collect(master_meta *m, uint64_t now_ms) {
    if (!evictor_on(&m->gc)) return 0;
    uint64_t used, total;
    bytes_in_use(m, &used, &total);
    uint64_t excess = evictor_excess(&m->gc, used, total);
    if (excess == 0) return 0;
    uint64_t target = used - excess;
    int n = 0;
    while (used > target && collect_one(m, now_ms)) {
        n++;
        bytes_in_use(m, &used, &total);
    }
    return n;
}

proto_status mm_place_collecting(master_meta *m, uint64_t size, uint32_t nrep, obj_replica *reps,
                              uint64_t now_ms, char *err, size_t errlen) {
    proto_status st = mm_place(m, size, nrep, NULL, reps, err, errlen);
    for (int i = 0; st == PROTO_NOSPACE && i < COLLECT_MAX_PER_PUT && collect_one(m, now_ms); i++)
        st = mm_place(m, size, nrep, NULL, reps, err, errlen);
    return st;
}
