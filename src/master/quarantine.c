/* master/quarantine.c - extents out of use that a read cap may still
 * touch, held until no lease needs them.
 *
 * A removed object's bytes wait for its latest live lease. Leases a
 * reader can give back (mm_obj.lease) move with the bytes into a tomb
 * kept under the key, so a reader who returns its lease after the remove
 * (MOON.RELEASE) still shortens the hold: the extents free once the last
 * tracked lease is back, or at the latest expiry of the rest. Holds with
 * no tomb (dropped replicas, failed copies) simply wait for their time. */
#include <stdlib.h>

#include "core/util.h"
#include "master/meta_internal.h"

struct mm_tomb {
    uint64_t lease[MM_LEASES];    /* the removed object's unreturned leases */
    uint32_t nlease;
    uint64_t hold_until;          /* pins not tracked above (lease overflow, tasks) */
    uint32_t refs;                /* held extents tied to it */
    object *entry;                /* its key in m->tombs; entry->owner: first tomb */
    mm_tomb *next;                /* the next tomb of the same key */
};

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static void free_tomb_chain(object *o, void *ctx) {
    for (mm_tomb *t = o->owner, *next; t; t = next) {
        next = t->next;
        free(t);
    }
    object_free(o);
}

objtable *mm_tombs_create(void) { return objtable_create(free_tomb_chain, NULL); }

static uint64_t tomb_until(const mm_tomb *t, uint64_t now_ms) {
    uint64_t until = t->hold_until;
    for (uint32_t i = 0; i < t->nlease; i++) until = max_u64(until, t->lease[i]);
    return until > now_ms ? until : 0;
}

/* A tomb for o's tracked leases, or NULL when none is live (then the
 * hold, if any, is a plain one until the side part's hold_until). */
static mm_tomb *tomb_new(master_meta *m, const object *o, uint64_t now_ms) {
    const mm_more *x = mm_more_of(o);
    mm_tomb *t = NULL;
    for (uint32_t i = 0; x && i < x->nlease; i++) {
        if (x->lease[i] <= now_ms) continue;
        if (!t) t = xcalloc(1, sizeof *t);
        t->lease[t->nlease++] = x->lease[i];
    }
    if (!t) return NULL;
    t->hold_until = x->hold_until;
    int existed = 0;
    object *e = objtable_find(m->tombs, o->key, o->keylen);
    if (!e) e = objtable_insert(m->tombs, o->key, o->keylen, &existed);
    t->entry = e;
    t->next = e->owner;
    e->owner = t;
    return t;
}

static void tomb_unref(master_meta *m, mm_tomb *t) {
    if (!t || --t->refs) return;
    mm_tomb **p = (mm_tomb **)&t->entry->owner;
    while (*p != t) p = &(*p)->next;
    *p = t->next;
    if (!t->entry->owner) objtable_delete(m->tombs, t->entry->key, t->entry->keylen);
    free(t);
}

static void release_extent(master_meta *m, const obj_extent *e) {
    mm_node *n = mm_node_get(m, e->node);
    if (n && n->alloc) mm_extent_release(n, e->offset, e->length);
    m->space_freed++;
}

static void hold_extents(master_meta *m, const obj_replica *r, uint64_t until, mm_tomb *t,
                         uint64_t now_ms) {
    for (uint32_t i = 0; i < r->nextents; i++) {
        const obj_extent *e = &r->extents[i];
        if (e->offset == MM_ON_DISK) continue;   /* no segment bytes */
        mm_node *n = mm_node_get(m, e->node);
        if (!n || n->state == NODE_DEAD) continue;   /* its segment is gone anyway */
        if (until <= now_ms) {
            release_extent(m, e);
            continue;
        }
        if (m->nheld == m->capheld) {
            m->capheld = m->capheld ? m->capheld * 2 : 64;
            m->held = xrealloc(m->held, m->capheld * sizeof *m->held);
        }
        m->held[m->nheld++] = (mm_held){*e, until, t};
        if (t) t->refs++;
    }
}

void mm_hold_replica(master_meta *m, const obj_replica *r, uint64_t until, uint64_t now_ms) {
    hold_extents(m, r, until, NULL, now_ms);
}

void mm_hold_object(master_meta *m, const object *o, uint64_t now_ms) {
    uint64_t until = mm_hold_until(o, now_ms);
    mm_tomb *t = until ? tomb_new(m, o, now_ms) : NULL;
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t i = 0; i < o->nreplicas; i++) hold_extents(m, &reps[i], until, t, now_ms);
    if (t && t->refs == 0) {   /* every extent was on a dead node */
        t->refs = 1;
        tomb_unref(m, t);
    }
}

/* Keep the held entries for which keep(entry, ctx) says so; free the
 * rest's extents (release) or just forget them. */
static int sweep_held(master_meta *m, int (*keep)(const mm_held *h, const void *ctx),
                      const void *ctx, int release) {
    size_t w = 0;
    int gone = 0;
    for (size_t i = 0; i < m->nheld; i++) {
        mm_held h = m->held[i];
        if (keep(&h, ctx)) {
            m->held[w++] = h;
            continue;
        }
        if (release) release_extent(m, &h.ext);
        tomb_unref(m, h.tomb);
        gone++;
    }
    m->nheld = w;
    return gone;
}

static int not_due(const mm_held *h, const void *ctx) { return h->until > *(const uint64_t *)ctx; }

int mm_release_held(master_meta *m, uint64_t now_ms) {
    return sweep_held(m, not_due, &now_ms, 1);
}

static int not_on_node(const mm_held *h, const void *ctx) {
    return h->ext.node != *(const uint32_t *)ctx;
}

void mm_forget_held_on(master_meta *m, uint32_t node) {
    sweep_held(m, not_on_node, &node, 0);
}

/* The tomb's extents now wait until `until` (freed at once if passed). */
static void tomb_retime(master_meta *m, mm_tomb *t, uint64_t until, uint64_t now_ms) {
    for (size_t i = 0; i < m->nheld; i++)
        if (m->held[i].tomb == t) m->held[i].until = until;
    if (until <= now_ms) mm_release_held(m, now_ms);
}

int mm_tomb_lease_return(master_meta *m, const void *key, size_t keylen, uint64_t lease_until,
                         uint64_t now_ms) {
    object *e = objtable_size(m->tombs) ? objtable_find(m->tombs, key, keylen) : NULL;
    if (!e) return 0;
    for (mm_tomb *t = e->owner; t; t = t->next) {
        for (uint32_t i = 0; i < t->nlease; i++) {
            if (t->lease[i] != lease_until) continue;
            t->lease[i] = t->lease[--t->nlease];
            tomb_retime(m, t, tomb_until(t, now_ms), now_ms);
            return lease_until > now_ms;
        }
    }
    return 0;
}

int mm_tomb_has_lease(master_meta *m, const void *key, size_t keylen, uint64_t lease_until) {
    if (objtable_size(m->tombs) == 0) return 0;   /* the common case: not even a hash */
    object *e = objtable_find(m->tombs, key, keylen);
    for (mm_tomb *t = e ? e->owner : NULL; t; t = t->next)
        for (uint32_t i = 0; i < t->nlease; i++)
            if (t->lease[i] == lease_until) return 1;
    return 0;
}

int mm_space_due(master_meta *m, uint64_t size, uint32_t nrep, uint64_t horizon_ms) {
    uint64_t soon = 0, have = 0;
    for (size_t i = 0; i < m->nheld; i++) {
        const mm_held *h = &m->held[i];
        /* A tomb's extents free as soon as their readers give the leases
         * back, which reads in flight do within milliseconds. */
        int due = h->until <= horizon_ms || h->tomb;
        if (due && mm_node_usable(mm_node_get(m, h->ext.node)))
            soon += h->ext.length;
    }
    if (soon == 0) return 0;
    for (uint32_t i = 0; i < m->nnodes; i++) {
        mm_node *n = m->nodes[i];
        if (!mm_node_usable(n) || !n->alloc) continue;
        seg_alloc_stats as;
        seg_alloc_get_stats(n->alloc, &as);
        have += as.size - as.used;
    }
    return have + soon >= size * (uint64_t)nrep;
}

uint64_t mm_next_release(const master_meta *m) {
    uint64_t next = UINT64_MAX;
    for (size_t i = 0; i < m->nheld; i++)
        if (m->held[i].until < next) next = m->held[i].until;
    return next;
}

uint64_t mm_space_freed(const master_meta *m) { return m->space_freed; }
