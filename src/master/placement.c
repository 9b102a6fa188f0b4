/* master/placement.c - choosing nodes and offsets for an object's replicas.
 *
 * Every replica goes to nodes no other replica of the object uses, so one
 * node failing costs at most one copy. Small objects are one extent on
 * one node; objects above stripe_threshold are cut into slice_size slices
 * dealt round-robin over `width` nodes, so a reader can pull one replica
 * from several nodes at once. Nodes are taken most-free first (ties in
 * round-robin order) to keep the cluster balanced. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "master/meta_internal.h"

typedef struct candidate {
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
        seg_alloc_release(n->alloc, r->extents[i].offset, r->extents[i].length);
    }
    mm_replica_clear(r);
}

/* Usable nodes not excluded, best first. Returns how many. */
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
    qsort(out, n, sizeof *out, by_free_then_rr);
    return n;
}

/* The layout of one replica: nslices slices of slice bytes (the last one
 * shorter), slice i on the (i % width)-th node. */
typedef struct layout {
    uint64_t size, slice, nslices;
    uint32_t width;
} layout;

static uint64_t slice_len(const layout *l, uint64_t i) {
    return i + 1 < l->nslices ? l->slice : l->size - i * l->slice;
}

/* Bytes the j-th node of a replica must hold (aligned). */
static uint64_t node_need(const layout *l, uint32_t j) {
    uint64_t need = 0;
    for (uint64_t i = j; i < l->nslices; i += l->width) need += align_up(slice_len(l, i));
    return need;
}

static int fits(const candidate *c, const layout *l, uint32_t j) {
    return c->free >= node_need(l, j) && c->largest >= align_up(slice_len(l, j));
}

/* Reserve the slices of one replica on the chosen nodes. */
static int reserve_replica(master_meta *m, const layout *l, mm_node **nodes, obj_replica *r) {
    r->nextents = (uint32_t)l->nslices;
    r->extents = xcalloc(l->nslices, sizeof *r->extents);
    for (uint64_t i = 0; i < l->nslices; i++) {
        obj_extent *e = &r->extents[i];
        e->node = nodes[i % l->width]->id;
        e->length = slice_len(l, i);
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
        l->slice = size;
        l->nslices = 1;
        l->width = 1;
        return;
    }
    l->slice = m->cfg.slice_size;
    l->nslices = size / l->slice + (size % l->slice != 0);
    uint64_t width = m->cfg.stripe_width;
    if (width > l->nslices) width = l->nslices;
    /* Replicas never share a node: with few nodes each stripes narrower. */
    if (width > usable / nrep) width = usable / nrep ? usable / nrep : 1;
    l->width = (uint32_t)width;
}

proto_status mm_place(master_meta *m, uint64_t size, uint32_t nrep, const uint8_t *exclude,
                   obj_replica *reps, char *err, size_t errlen) {
    candidate *cand = xcalloc(m->nnodes ? m->nnodes : 1, sizeof *cand);
    uint32_t ncand = candidates(m, exclude, cand);
    proto_status st = PROTO_OK;
    if (ncand < nrep) {
        st = mm_fail(err, errlen, PROTO_NOREPLICAS,
                     "%u replicas need %u alive nodes, only %u available",
                     nrep, nrep, ncand);
        goto out;
    }
    /* Refuse what cannot fit before laying it out: a peer asking for an
     * absurd size must cost O(nodes), not O(size / slice_size). */
    uint64_t largest = 0, total_free = 0;
    for (uint32_t i = 0; i < ncand; i++) {
        if (cand[i].largest > largest) largest = cand[i].largest;
        total_free += cand[i].free;
    }
    if (size > total_free / nrep) {
        st = mm_fail(err, errlen, PROTO_NOSPACE,
                     "cluster full: %u replicas of %llu bytes exceed the %llu bytes free",
                     nrep, (unsigned long long)size, (unsigned long long)total_free);
        goto out;
    }
    layout l;
    plan_layout(m, size, nrep, ncand, &l);
    if (align_up(slice_len(&l, 0)) > largest) {
        st = mm_fail(err, errlen, PROTO_NOSPACE,
                     "%llu bytes do not fit: the largest free extent on any node is %llu bytes",
                     (unsigned long long)slice_len(&l, 0), (unsigned long long)largest);
        goto out;
    }
    mm_node *chosen[MM_MAX_WIDTH];
    uint32_t placed = 0, next = 0;   /* cand[next..] not yet used by a replica */
    for (; placed < nrep; placed++) {
        uint32_t got = 0;
        /* Candidates are sorted: the first ones that fit are the emptiest. */
        for (uint32_t i = next; i < ncand && got < l.width; i++) {
            if (!fits(&cand[i], &l, got)) continue;
            chosen[got++] = cand[i].node;
            candidate t = cand[next]; cand[next] = cand[i]; cand[i] = t;
            next++;
        }
        if (got < l.width || reserve_replica(m, &l, chosen, &reps[placed]) != 0) break;
        m->rr = chosen[got - 1]->id;
    }
    if (placed < nrep) {
        for (uint32_t i = 0; i < placed; i++) release_replica(m, &reps[i]);
        st = mm_fail(err, errlen, PROTO_NOSPACE,
                     "cluster full: room for %u of %u replicas of %llu bytes",
                     placed, nrep, (unsigned long long)size);
    }
out:
    free(cand);
    return st;
}
