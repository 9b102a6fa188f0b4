/* master/placement.c - choosing nodes and offsets for an object's replicas.
 *
 * Every replica goes to nodes no other replica of the object uses, so one
 * node failing costs at most one copy. Small objects are one extent on
 * one node; objects above stripe_threshold are cut into stripe_unit extents
 * dealt round-robin over `width` nodes, so a reader can pull one replica
 * from several nodes at once. Nodes are taken most-free first (ties in
 * round-robin order) to keep the cluster balanced. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "master/meta_internal.h"

typedef struct mm_cand {
    mm_node *node;
    uint64_t free, largest;
    uint32_t rr_rank;     /* distance after the last node chosen */
} candidate;

static int by_free_then_rr(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    if (x->free != y->free) return x->free > y->free ? -1 : 1;
    return x->rr_rank < y->rr_rank ? -1 : x->rr_rank > y->rr_rank;
}

static uint64_t align_up(uint64_t n) { return (n + MM_ALIGN - 1) & ~(uint64_t)(MM_ALIGN - 1); }

void mm_replica_clear(obj_replica *r) {
    free(r->extents);
    r->extents = NULL;
    r->nextents = 0;
}

static void release_replica(master_meta *m, obj_replica *r) {
    for (uint32_t i = 0; i < r->nextents; i++) {
        mm_node *n = mm_node_get(m, r->extents[i].node);
        mm_extent_release(n, r->extents[i].offset, r->extents[i].length);
    }
    mm_replica_clear(r);
}

proto_status mm_place_like(master_meta *m, const obj_replica *like, obj_replica *out) {
    out->nextents = 0;
    out->extents = xcalloc(like->nextents, sizeof *out->extents);
    for (uint32_t i = 0; i < like->nextents; i++) {
        obj_extent *e = &out->extents[i];
        mm_node *n = mm_node_get(m, like->extents[i].node);
        *e = (obj_extent){like->extents[i].node, 0, like->extents[i].length};
        if (!mm_node_usable(n) || !n->alloc || n->restore ||
            seg_alloc_reserve(n->alloc, e->length, &e->offset) != ALLOC_OK) {
            release_replica(m, out);
            return PROTO_NOSPACE;
        }
        out->nextents++;
    }
    return PROTO_OK;
}

/* Usable nodes not excluded, unsorted (best_first orders them). Returns how many. */
static uint32_t candidates(master_meta *m, const uint8_t *exclude, candidate *out) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->nnodes; i++) {
        mm_node *node = m->nodes[i];
        /* a suspect node may be dead: new bytes go elsewhere */
        /* a restoring node's objects are being confirmed: nothing new there until then */
        if (!mm_node_usable(node) || node->suspect || node->restore || (exclude && exclude[i])) continue;
        seg_alloc_stats st;
        seg_alloc_get_stats(node->alloc, &st);
        out[n].node = node;
        out[n].free = st.free;
        out[n].largest = st.largest_free;
        out[n].rr_rank = node->id > m->rr ? node->id - m->rr : node->id + m->nnodes - m->rr;
        n++;
    }
    return n;
}

static void swap_cand(candidate *a, candidate *b) {
    candidate t = *a;
    *a = *b;
    *b = t;
}

/* The k best of c[0..n) first, in order (the rest after them, unordered):
 * a placement uses the first few of a thousand nodes, so it selects them
 * (quickselect, O(n)) and sorts only those instead of all n. */
static void best_first(candidate *c, uint32_t n, uint32_t k) {
    uint32_t lo = 0, hi = n;   /* the k-th lies in [lo, hi) */
    while (k < n && hi - lo > 1) {
        swap_cand(&c[lo + (hi - lo) / 2], &c[hi - 1]);   /* the middle one as pivot */
        uint32_t store = lo;
        for (uint32_t i = lo; i + 1 < hi; i++)
            if (by_free_then_rr(&c[i], &c[hi - 1]) < 0) swap_cand(&c[i], &c[store++]);
        swap_cand(&c[store], &c[hi - 1]);
        if (store == k) break;
        if (store < k) lo = store + 1;
        else hi = store;
    }
    qsort(c, k < n ? k : n, sizeof *c, by_free_then_rr);
}

/* The layout of one replica: nunits extents of unit bytes (the last one
 * shorter), extent i on the (i % width)-th node. */
typedef struct layout {
    uint64_t size, unit, nunits;
    uint32_t width;
} layout;

static uint64_t unit_len(const layout *l, uint64_t i) {
    return i + 1 < l->nunits ? l->unit : l->size - i * l->unit;
}

/* Bytes the j-th node of a replica must hold (aligned). */
static uint64_t node_need(const layout *l, uint32_t j) {
    uint64_t need = 0;
    for (uint64_t i = j; i < l->nunits; i += l->width) need += align_up(unit_len(l, i));
    return need;
}

static int fits(const candidate *c, const layout *l, uint32_t j) {
    return c->free >= node_need(l, j) && c->largest >= align_up(unit_len(l, j));
}

/* Reserve the extents of one replica on the chosen nodes. */
static int reserve_replica(master_meta *m, const layout *l, mm_node **nodes, obj_replica *r) {
    r->nextents = (uint32_t)l->nunits;
    r->extents = xcalloc(l->nunits, sizeof *r->extents);
    for (uint64_t i = 0; i < l->nunits; i++) {
        obj_extent *e = &r->extents[i];
        e->node = nodes[i % l->width]->id;
        e->length = unit_len(l, i);
        if (seg_alloc_reserve(nodes[i % l->width]->alloc, e->length, &e->offset) != ALLOC_OK) {
            r->nextents = (uint32_t)i;   /* release what was taken */
            release_replica(m, r);
            return -1;
        }
    }
    return 0;
}

static void plan_layout(const master_meta *m, uint64_t size, uint32_t nrep, uint32_t usable,
                        layout *l) {
    l->size = size;
    if (size <= m->cfg.stripe_threshold) {
        l->unit = size;
        l->nunits = 1;
        l->width = 1;
        return;
    }
    l->unit = m->cfg.stripe_unit;
    l->nunits = size / l->unit + (size % l->unit != 0);
    uint64_t width = m->cfg.stripe_width;
    if (width > l->nunits) width = l->nunits;
    /* Replicas never share a node: with few nodes each stripes narrower. */
    if (width > usable / nrep) width = usable / nrep ? usable / nrep : 1;
    l->width = (uint32_t)width;
}

/* Take nrep replicas of layout l from cand[0..ncand) (best first):
 * how many were placed into reps. */
static uint32_t place_from(master_meta *m, candidate *cand, uint32_t ncand, const layout *l, uint32_t nrep,
                           obj_replica *reps) {
    mm_node *chosen[MM_MAX_WIDTH];
    uint32_t placed = 0, next = 0;   /* cand[next..] not yet used by a replica */
    for (; placed < nrep; placed++) {
        uint32_t got = 0;
        /* Candidates are sorted: the first ones that fit are the emptiest. */
        for (uint32_t i = next; i < ncand && got < l->width; i++) {
            if (!fits(&cand[i], l, got)) continue;
            chosen[got++] = cand[i].node;
            swap_cand(&cand[next], &cand[i]);
            next++;
        }
        if (got < l->width || reserve_replica(m, l, chosen, &reps[placed]) != 0) break;
        m->rr = chosen[got - 1]->id;
    }
    return placed;
}

/* ---- the order kept between placements ----
 *
 * With a thousand nodes, finding the emptiest ones anew for every put
 * (stats of every node, then a selection) cost the master 90 % of a
 * put's time. Unstriped objects, the common case, place from an order
 * kept instead: every node with a segment, most free first; a placement
 * takes the first usable nodes that fit and moves them down to where
 * their new free space puts them (after the nodes with as much, so equal
 * nodes take turns, as the round-robin ranks make them do). Any other
 * change of an allocator (a release, a rebuild's claim: seg_alloc_watch
 * counts them in alloc_changes) or a node starting orders it anew;
 * whatever the order misses, the full path below handles. */
#define ORDER_SCAN 64   /* nodes looked at before the full path takes over */

static void order_build(master_meta *m) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->nnodes; i++) {
        mm_node *node = m->nodes[i];
        if (!node || !node->alloc) continue;
        seg_alloc_stats st;
        seg_alloc_get_stats(node->alloc, &st);
        m->order[n++] = (candidate){node, st.free, st.largest_free,
                                    node->id > m->rr ? node->id - m->rr : node->id + m->nnodes - m->rr};
    }
    if (n > 1) qsort(m->order, n, sizeof *m->order, by_free_then_rr);
    m->norder = n;
    m->order_changes = m->alloc_changes;
}

/* Entry i's node changed: refresh it and move it down to its place. */
static void order_sink(master_meta *m, uint32_t i) {
    candidate c = m->order[i];
    seg_alloc_stats st;
    seg_alloc_get_stats(c.node->alloc, &st);
    c.free = st.free;
    c.largest = st.largest_free;
    uint32_t lo = i + 1, hi = m->norder;   /* the first after i with less free */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (m->order[mid].free >= c.free) lo = mid + 1;
        else hi = mid;
    }
    memmove(&m->order[i], &m->order[i + 1], (lo - i - 1) * sizeof *m->order);
    m->order[lo - 1] = c;
}

/* nrep single-extent replicas of size bytes from the kept order: 0, or
 * -1 with nothing reserved (the full path decides). */
static int place_ordered(master_meta *m, uint64_t size, uint32_t nrep, obj_replica *reps) {
    if (m->order_changes != m->alloc_changes || m->norder == 0) order_build(m);
    uint32_t at[PROTO_MAX_REPLICAS] = {0}, got = 0;
    uint64_t need = align_up(size);
    for (uint32_t i = 0; i < m->norder && i < ORDER_SCAN && got < nrep; i++) {
        const candidate *c = &m->order[i];
        const mm_node *n = c->node;
        if (!mm_node_usable(n) || n->suspect || n->restore || c->free < need || c->largest < need) continue;
        at[got++] = i;
    }
    if (got < nrep || nrep == 0) return -1;
    for (uint32_t r = 0; r < nrep; r++) {
        obj_extent *e = xcalloc(1, sizeof *e);
        e->node = m->order[at[r]].node->id;
        e->length = size;
        reps[r] = (obj_replica){1, e};
        if (seg_alloc_reserve(m->order[at[r]].node->alloc, size, &e->offset) != ALLOC_OK) {
            for (uint32_t k = 0; k <= r; k++) {
                if (k < r) release_replica(m, &reps[k]);
                else mm_replica_clear(&reps[k]);
            }
            m->norder = 0;   /* it was wrong: anew next time */
            return -1;
        }
    }
    m->rr = m->order[at[nrep - 1]].node->id;
    /* Deepest first: moving one down never shifts the ones above it. */
    for (uint32_t r = nrep; r-- > 0;) order_sink(m, at[r]);
    m->order_changes = m->alloc_changes;   /* our own reserves */
    return 0;
}

/* Candidates sorted past the few a placement needs: enough that one
 * that does not fit rarely sends it back for all of them. */
#define PLACE_SPARE 16

proto_status mm_place(master_meta *m, uint64_t size, uint32_t nrep, const uint8_t *exclude,
                   obj_replica *reps, char *err, size_t errlen) {
    if (m->capcand < m->nnodes) {
        free(m->order);
        m->order = xcalloc(m->nnodes, sizeof *m->order);
        m->norder = 0;   /* kept: a placement per put must not allocate per node */
        free(m->cand);
        m->capcand = m->nnodes;
        m->cand = xcalloc(m->capcand, sizeof *m->cand);
    }
    if (!exclude && size > 0 && size <= m->cfg.stripe_threshold && nrep <= PROTO_MAX_REPLICAS &&
        place_ordered(m, size, nrep, reps) == 0)
        return PROTO_OK;
    candidate *cand = m->cand;
    uint32_t ncand = candidates(m, exclude, cand);
    if (ncand < nrep)
        return mm_fail(err, errlen, PROTO_NOREPLICAS,
                       "%u replicas need %u alive nodes, only %u available",
                       nrep, nrep, ncand);
    /* Refuse what cannot fit before laying it out: a peer asking for an
     * absurd size must cost O(nodes), not O(size / stripe_unit). */
    uint64_t largest = 0, total_free = 0;
    for (uint32_t i = 0; i < ncand; i++) {
        if (cand[i].largest > largest) largest = cand[i].largest;
        total_free += cand[i].free;
    }
    if (size > total_free / nrep)
        return mm_fail(err, errlen, PROTO_NOSPACE,
                       "cluster full: %u replicas of %llu bytes exceed the %llu bytes free",
                       nrep, (unsigned long long)size, (unsigned long long)total_free);
    layout l;
    plan_layout(m, size, nrep, ncand, &l);
    if (align_up(unit_len(&l, 0)) > largest)
        return mm_fail(err, errlen, PROTO_NOSPACE,
                       "%llu bytes do not fit: the largest free extent on any node is %llu bytes",
                       (unsigned long long)unit_len(&l, 0), (unsigned long long)largest);
    /* The best few sorted; all of them only if those few do not fit
     * (the same nodes either way: the order of the first k is the order
     * a full sort gives). */
    uint32_t k = nrep * l.width + PLACE_SPARE;
    if (k > ncand) k = ncand;
    best_first(cand, ncand, k);
    uint32_t placed = place_from(m, cand, k, &l, nrep, reps);
    if (placed < nrep && k < ncand) {
        for (uint32_t i = 0; i < placed; i++) release_replica(m, &reps[i]);
        best_first(cand, ncand, ncand);
        placed = place_from(m, cand, ncand, &l, nrep, reps);
    }
    if (placed < nrep) {
        for (uint32_t i = 0; i < placed; i++) release_replica(m, &reps[i]);
        return mm_fail(err, errlen, PROTO_NOSPACE,
                       "cluster full: room for %u of %u replicas of %llu bytes",
                       placed, nrep, (unsigned long long)size);
    }
    return PROTO_OK;
}
