/* core/alloc.c - offset-based best-fit segment allocator.
 *
 * State lives in three treaps (randomised balanced trees, O(log n)
 * expected per operation) of (k1, k2) pairs ordered lexicographically:
 *   free_off  (offset, length)  free extents by position, for coalescing
 *   free_len  (length, offset)  the same extents by size, for best fit
 *   live      (offset, length)  every allocation, so a release of anything
 *                               not handed out is refused without harm
 *                               (not kept by an untracked allocator)
 * Offsets handed out are multiples of align and lengths are rounded up to
 * it, so every free extent starts aligned. The segment is never touched.
 * Tree nodes come from a pool of blocks owned by the allocator: a master
 * rebuilding its table claims millions of extents in a row, and a malloc
 * per node was a large part of that. */
#include "core/alloc.h"
#include "core/siphash.h"
#include "core/util.h"

#include <stdlib.h>

typedef struct tnode {
    uint64_t k1, k2;
    uint32_t prio;
    struct tnode *l, *r;
} tnode;

typedef struct treap {
    tnode *root;
    uint64_t count;
} treap;

#define POOL_NODES 1024   /* tree nodes per pool block */

typedef struct pool_block {
    struct pool_block *next;
    tnode nodes[POOL_NODES];
} pool_block;

struct seg_alloc {
    uint64_t size, align;
    uint64_t used;
    uint64_t allocations;
    uint64_t withheld;    /* seg_alloc_withhold: reserved, and not ours to count */
    uint64_t lent;        /* seg_alloc_lend: withheld space taken as ours */
    int untracked;        /* no live tree (seg_alloc_create_untracked) */
    treap free_off, free_len, live;
    uint64_t rng;         /* treap priorities */
    tnode *spare;         /* unused pool nodes, linked by l */
    pool_block *blocks;
    uint64_t *changes;    /* seg_alloc_watch: counted at every reserve and release */
};

/* ---- the node pool ---- */

static tnode *node_new(seg_alloc *a) {
    if (!a->spare) {
        pool_block *b = xmalloc(sizeof *b);
        b->next = a->blocks;
        a->blocks = b;
        for (int i = POOL_NODES - 1; i >= 0; i--) {
            b->nodes[i].l = a->spare;
            a->spare = &b->nodes[i];
        }
    }
    tnode *n = a->spare;
    a->spare = n->l;
    return n;
}

static void node_free(seg_alloc *a, tnode *n) {
    n->l = a->spare;
    a->spare = n;
}

/* ---- treap of (k1, k2) pairs ---- */

static int key_cmp(const tnode *n, uint64_t k1, uint64_t k2) {
    if (n->k1 != k1) return n->k1 < k1 ? -1 : 1;
    if (n->k2 != k2) return n->k2 < k2 ? -1 : 1;
    return 0;
}

/* Split t into keys < (k1,k2) and keys >= (k1,k2). */
static void treap_split(tnode *t, uint64_t k1, uint64_t k2, tnode **lo, tnode **hi) {
    while (t) {
        if (key_cmp(t, k1, k2) < 0) {
            *lo = t;
            lo = &t->r;
            t = t->r;
        } else {
            *hi = t;
            hi = &t->l;
            t = t->l;
        }
    }
    *lo = *hi = NULL;
}

/* Join two treaps where every key of a is below every key of b. */
static tnode *treap_merge(tnode *a, tnode *b) {
    tnode *root = NULL, **link = &root;
    while (a && b) {
        if (a->prio > b->prio) {
            *link = a;
            link = &a->r;
            a = a->r;
        } else {
            *link = b;
            link = &b->l;
            b = b->l;
        }
    }
    *link = a ? a : b;
    return root;
}

static uint32_t next_prio(seg_alloc *a) {
    a->rng ^= a->rng << 13;
    a->rng ^= a->rng >> 7;
    a->rng ^= a->rng << 17;
    return (uint32_t)(a->rng >> 32);
}

static void treap_insert(seg_alloc *a, treap *t, uint64_t k1, uint64_t k2) {
    tnode *n = node_new(a);
    n->k1 = k1;
    n->k2 = k2;
    n->prio = next_prio(a);
    tnode **link = &t->root;
    while (*link && (*link)->prio > n->prio)
        link = key_cmp(*link, k1, k2) < 0 ? &(*link)->r : &(*link)->l;
    treap_split(*link, k1, k2, &n->l, &n->r);
    *link = n;
    t->count++;
}

/* Remove the exact key; 0 if it was there. */
static int treap_remove(seg_alloc *a, treap *t, uint64_t k1, uint64_t k2) {
    tnode **link = &t->root;
    while (*link) {
        int c = key_cmp(*link, k1, k2);
        if (c == 0) {
            tnode *n = *link;
            *link = treap_merge(n->l, n->r);
            node_free(a, n);
            t->count--;
            return 0;
        }
        link = c < 0 ? &(*link)->r : &(*link)->l;
    }
    return -1;
}

/* Smallest node >= key. */
static tnode *treap_ceil(const treap *t, uint64_t k1, uint64_t k2) {
    tnode *best = NULL;
    for (tnode *n = t->root; n;) {
        if (key_cmp(n, k1, k2) >= 0) {
            best = n;
            n = n->l;
        } else {
            n = n->r;
        }
    }
    return best;
}

/* Largest node <= key. */
static tnode *treap_floor(const treap *t, uint64_t k1, uint64_t k2) {
    tnode *best = NULL;
    for (tnode *n = t->root; n;) {
        if (key_cmp(n, k1, k2) <= 0) {
            best = n;
            n = n->r;
        } else {
            n = n->l;
        }
    }
    return best;
}

/* ---- trees built from keys in order ---- */

/* Keys come in ascending order, so each new node is the rightmost yet:
 * it joins the right spine (kept as a stack) below the last spine node
 * of a priority at least its own, and the spine nodes of lower priority
 * it passes become its left subtree. The result is the treap the same
 * keys and priorities would form inserted one by one. */
typedef struct tree_builder {
    treap *t;
    tnode **spine;
    size_t depth, cap;
} tree_builder;

static void build_start(tree_builder *b, treap *t) {
    *b = (tree_builder){t, NULL, 0, 0};
    t->root = NULL;
    t->count = 0;
}

static void build_add(seg_alloc *a, tree_builder *b, uint64_t k1, uint64_t k2) {
    tnode *n = node_new(a);
    n->k1 = k1;
    n->k2 = k2;
    n->prio = next_prio(a);
    n->l = n->r = NULL;
    while (b->depth && b->spine[b->depth - 1]->prio < n->prio) n->l = b->spine[--b->depth];
    if (b->depth) b->spine[b->depth - 1]->r = n;
    else b->t->root = n;
    if (b->depth == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->spine = xrealloc(b->spine, b->cap * sizeof *b->spine);
    }
    b->spine[b->depth++] = n;
    b->t->count++;
}

static void build_end(tree_builder *b) { free(b->spine); }

/* ---- free extents: both indexes change together ---- */

static void free_add(seg_alloc *a, uint64_t off, uint64_t len) {
    if (len == 0) return;
    treap_insert(a, &a->free_off, off, len);
    treap_insert(a, &a->free_len, len, off);
}

static void free_del(seg_alloc *a, uint64_t off, uint64_t len) {
    treap_remove(a, &a->free_off, off, len);
    treap_remove(a, &a->free_len, len, off);
}

/* Round len up to the alignment; -1 on 0 or overflow. */
static int round_len(const seg_alloc *a, uint64_t len, uint64_t *out) {
    if (len == 0 || len > UINT64_MAX - (a->align - 1)) return -1;
    *out = (len + a->align - 1) & ~(a->align - 1);
    return 0;
}

/* Carve [off, off+len) out of the free extent whose free_off node is
 * ext. Its pieces keep ext's place among the other free extents, so ext
 * is changed in place there (a claim costs 3-5 tree operations, not
 * 5-7: a rebuild claims millions); by size, they move. */
static void carve(seg_alloc *a, tnode *ext, uint64_t off, uint64_t len) {
    uint64_t ext_off = ext->k1, ext_len = ext->k2;
    uint64_t left = off - ext_off, right = ext_off + ext_len - (off + len);
    treap_remove(a, &a->free_len, ext_len, ext_off);
    if (left) treap_insert(a, &a->free_len, left, ext_off);
    if (right) treap_insert(a, &a->free_len, right, off + len);
    if (left) {
        ext->k2 = left;
        if (right) treap_insert(a, &a->free_off, off + len, right);
    } else if (right) {
        ext->k1 = off + len;
        ext->k2 = right;
    } else {
        treap_remove(a, &a->free_off, ext_off, ext_len);
    }
    if (!a->untracked) treap_insert(a, &a->live, off, len);
    a->used += len;
    a->allocations++;
    if (a->changes) ++*a->changes;
}

void seg_alloc_watch(seg_alloc *a, uint64_t *changes) { a->changes = changes; }

seg_alloc *seg_alloc_create(uint64_t size, uint64_t align) {
    if (size == 0 || align == 0 || (align & (align - 1))) return NULL;
    seg_alloc *a = xcalloc(1, sizeof *a);
    a->size = size;
    a->align = align;
    if (random_bytes(&a->rng, sizeof a->rng) != 0 || a->rng == 0) a->rng = 0x9e3779b97f4a7c15ULL;
    free_add(a, 0, size);
    return a;
}

seg_alloc *seg_alloc_create_untracked(uint64_t size, uint64_t align) {
    seg_alloc *a = seg_alloc_create(size, align);
    if (a) a->untracked = 1;
    return a;
}

void seg_alloc_destroy(seg_alloc *a) {
    if (!a) return;
    for (pool_block *b = a->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(a);
}

int seg_alloc_reserve(seg_alloc *a, uint64_t len, uint64_t *off) {
    uint64_t rlen;
    if (round_len(a, len, &rlen) != 0) return ALLOC_ERR;
    /* Best fit: the smallest extent that holds rlen, lowest offset on ties. */
    tnode *ext = treap_ceil(&a->free_len, rlen, 0);
    if (!ext) return ALLOC_ERR;
    uint64_t ext_off = ext->k2;
    carve(a, treap_floor(&a->free_off, ext_off, ext->k1), ext_off, rlen);
    *off = ext_off;
    return ALLOC_OK;
}

int seg_alloc_reserve_at(seg_alloc *a, uint64_t off, uint64_t len) {
    uint64_t rlen;
    if (round_len(a, len, &rlen) != 0 || (off & (a->align - 1))) return ALLOC_ERR;
    if (off >= a->size || rlen > a->size - off) return ALLOC_ERR;
    tnode *ext = treap_floor(&a->free_off, off, UINT64_MAX);
    if (!ext || ext->k2 < rlen || off - ext->k1 > ext->k2 - rlen) return ALLOC_ERR;
    carve(a, ext, off, rlen);
    return ALLOC_OK;
}

int seg_alloc_withhold(seg_alloc *a, uint64_t off, uint64_t len) {
    uint64_t rlen;
    if (round_len(a, len, &rlen) != 0 || seg_alloc_reserve_at(a, off, len) != ALLOC_OK) return ALLOC_ERR;
    a->withheld += rlen;
    a->allocations--;
    return ALLOC_OK;
}

int seg_alloc_unwithhold(seg_alloc *a, uint64_t off, uint64_t len) {
    uint64_t rlen;
    if (round_len(a, len, &rlen) != 0 || rlen > a->withheld) return ALLOC_ERR;
    a->allocations++;
    if (seg_alloc_release(a, off, len) != ALLOC_OK) {
        a->allocations--;
        return ALLOC_ERR;
    }
    a->withheld -= rlen;
    return ALLOC_OK;
}

/* What an untracked allocator can check of a release: [off, off+rlen)
 * aligned, inside the segment and clear of every free extent. */
static int clear_of_free(const seg_alloc *a, uint64_t off, uint64_t rlen) {
    if ((off & (a->align - 1)) || off >= a->size || rlen > a->size - off) return 0;
    const tnode *prev = treap_floor(&a->free_off, off, UINT64_MAX);
    if (prev && prev->k2 > off - prev->k1) return 0;
    const tnode *next = treap_ceil(&a->free_off, off, 0);
    return !next || next->k1 - off >= rlen;
}

int seg_alloc_lend(seg_alloc *a, uint64_t off, uint64_t len) {
    uint64_t rlen;
    if (!a->untracked || round_len(a, len, &rlen) != 0 || rlen > a->withheld || !clear_of_free(a, off, rlen))
        return ALLOC_ERR;
    a->withheld -= rlen;
    a->lent += rlen;
    a->allocations++;
    if (a->changes) ++*a->changes;
    return ALLOC_OK;
}

int seg_alloc_unlend(seg_alloc *a, uint64_t off, uint64_t len) {
    uint64_t rlen;
    if (!a->untracked || round_len(a, len, &rlen) != 0 || rlen > a->lent || !clear_of_free(a, off, rlen))
        return ALLOC_ERR;
    a->lent -= rlen;
    a->withheld += rlen;
    a->allocations--;
    if (a->changes) ++*a->changes;
    return ALLOC_OK;
}

int seg_alloc_release(seg_alloc *a, uint64_t off, uint64_t len) {
    uint64_t rlen;
    if (round_len(a, len, &rlen) != 0) return ALLOC_ERR;
    if (a->untracked ? !clear_of_free(a, off, rlen) : treap_remove(a, &a->live, off, rlen) != 0)
        return ALLOC_ERR;
    a->used -= rlen;
    a->allocations--;
    if (a->changes) ++*a->changes;

    /* Coalesce with the free neighbours on either side. */
    uint64_t start = off, end = off + rlen;
    tnode *prev = treap_floor(&a->free_off, off, 0);
    if (prev && prev->k1 + prev->k2 == off) {
        start = prev->k1;
        free_del(a, prev->k1, prev->k2);
    }
    tnode *next = treap_ceil(&a->free_off, end, 0);
    if (next && next->k1 == end) {
        end += next->k2;
        free_del(a, next->k1, next->k2);
    }
    free_add(a, start, end - start);
    return ALLOC_OK;
}

/* The ranges are sorted, aligned, inside the segment and disjoint. */
static int ranges_ok(const seg_alloc *a, const seg_range *r, size_t n) {
    uint64_t end = 0, rlen;
    for (size_t i = 0; i < n; i++) {
        if (round_len(a, r[i].len, &rlen) != 0 || (r[i].off & (a->align - 1)) || r[i].off < end ||
            r[i].off >= a->size || rlen > a->size - r[i].off)
            return 0;
        end = r[i].off + rlen;
    }
    return 1;
}

static int by_len_off(const void *x, const void *y) {
    const seg_range *p = x, *q = y;
    if (p->len != q->len) return p->len < q->len ? -1 : 1;
    return p->off < q->off ? -1 : p->off > q->off;
}

/* The free extents between the ranges (n + 1 at most), in offset order. */
static size_t gaps_of(const seg_alloc *a, const seg_range *r, size_t n, seg_range *gap) {
    size_t ngaps = 0;
    uint64_t at = 0;
    for (size_t i = 0; i <= n; i++) {
        uint64_t next = i < n ? r[i].off : a->size;
        if (next > at) gap[ngaps++] = (seg_range){at, next - at};
        if (i < n) at = r[i].off + ((r[i].len + a->align - 1) & ~(a->align - 1));
    }
    return ngaps;
}

int seg_alloc_claim_sorted(seg_alloc *a, const seg_range *r, size_t n) {
    /* no allocation and nothing withheld: one free extent, the whole segment */
    if (a->allocations != 0 || a->withheld || a->free_off.count != 1 || !ranges_ok(a, r, n)) return ALLOC_ERR;
    free_del(a, 0, a->size);
    tree_builder b;
    build_start(&b, &a->live);
    for (size_t i = 0; i < n; i++) {
        uint64_t rlen = (r[i].len + a->align - 1) & ~(a->align - 1);
        if (!a->untracked) build_add(a, &b, r[i].off, rlen);
        a->used += rlen;
    }
    build_end(&b);
    a->allocations = n;
    seg_range *gap = xmalloc((n + 1) * sizeof *gap);
    size_t ngaps = gaps_of(a, r, n, gap);
    build_start(&b, &a->free_off);
    for (size_t i = 0; i < ngaps; i++) build_add(a, &b, gap[i].off, gap[i].len);
    build_end(&b);
    qsort(gap, ngaps, sizeof *gap, by_len_off);
    build_start(&b, &a->free_len);
    for (size_t i = 0; i < ngaps; i++) build_add(a, &b, gap[i].len, gap[i].off);
    build_end(&b);
    free(gap);
    return ALLOC_OK;
}

size_t seg_alloc_claim_bytes(size_t n) { return (n / POOL_NODES + 1) * (sizeof(pool_block) + 16); }

void seg_alloc_get_stats(const seg_alloc *a, seg_alloc_stats *st) {
    const tnode *n = a->free_len.root;
    while (n && n->r) n = n->r;
    st->size = a->size - a->withheld;
    st->used = a->used - a->withheld;
    st->free = a->size - a->used;
    st->largest_free = n ? n->k1 : 0;
    st->free_extents = a->free_off.count;
    st->allocations = a->allocations;
    st->fragmentation = st->free ? 1.0 - (double)st->largest_free / (double)st->free : 0.0;
}

uint64_t seg_alloc_align(const seg_alloc *a) {
    return a->align;
}

long seg_alloc_dump(const seg_alloc *a, seg_alloc_tree which, uint64_t *out, size_t max) {
    const treap *t = which == SEG_TREE_FREE_OFF ? &a->free_off : which == SEG_TREE_FREE_LEN ? &a->free_len : &a->live;
    const tnode **stack = xmalloc((t->count + 1) * sizeof *stack);
    const tnode *n = t->root, *prev = NULL;
    size_t depth = 0, got = 0;
    int ok = 1;
    while (ok && (n || depth)) {
        for (; n; n = n->l) {   /* a child's priority never exceeds its parent's */
            ok &= depth < t->count && (!n->l || n->l->prio <= n->prio) && (!n->r || n->r->prio <= n->prio);
            if (!ok) break;
            stack[depth++] = n;
        }
        if (!ok) break;
        n = stack[--depth];
        ok &= !prev || key_cmp(prev, n->k1, n->k2) < 0;
        if (got < max) out[2 * got] = n->k1, out[2 * got + 1] = n->k2;
        got++;
        prev = n;
        n = n->r;
    }
    free(stack);
    return ok && got == t->count ? (long)got : -1;
}
