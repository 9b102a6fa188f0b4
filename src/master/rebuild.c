/* master/rebuild.c - re-creating the object table from what nodes hold.
 *
 * After a master restart the nodes are the truth: each reports the
 * extents it holds (key, object size and checksum, which object bytes,
 * where in its segment). Extents of one key are chained in object order
 * into replicas first, touching no space; only replicas that came out
 * whole then claim their space. So what forms no whole replica never
 * blocks another key's extents (only whole replicas that overlap each
 * other compete, the first one visited wins), and the same reports a
 * second time add nothing. Refused extents leave their space free.
 * A report of a node's disk record (seg_off MM_ON_DISK) is the object
 * whole, or a piece of the node's share of an object striped over nodes
 * (each where it lies in the object): chained into a disk replica of
 * their own, which claims no segment space. A share whose other nodes'
 * pieces are missing forms no whole replica and is refused (its node
 * drops its record). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/heap_huge.h"
#include "core/util.h"
#include "master/meta_internal.h"

/* Replicas being assembled for one key: end = object bytes covered so far. */
typedef struct partial {
    const mm_report *ext[PROTO_MAX_EXTENTS];
    uint32_t n;
    uint64_t end;
} partial;

#define MM_MAX_PARTIALS (2 * PROTO_MAX_REPLICAS)

static int on_segment(const mm_report *r) { return r->seg_off != MM_ON_DISK; }

static int key_cmp(const mm_report *x, const mm_report *y) {
    size_t n = x->keylen < y->keylen ? x->keylen : y->keylen;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    return x->keylen < y->keylen ? -1 : x->keylen > y->keylen;
}

/* Within one key: object order, then a fixed order for ties. */
static int by_offset(const void *a, const void *b) {
    const mm_report *x = *(const mm_report *const *)a, *y = *(const mm_report *const *)b;
    if (x->obj_off != y->obj_off) return x->obj_off < y->obj_off ? -1 : 1;
    if (x->node != y->node) return x->node < y->node ? -1 : 1;
    if (x->seg_off != y->seg_off) return x->seg_off < y->seg_off ? -1 : 1;
    return x->length < y->length ? -1 : x->length > y->length;
}

/* One key's reports: v[start..end), and where its first extent lies. */
typedef struct key_group {
    size_t start, end;
    uint64_t where;
    uint64_t hash;   /* the key's objtable_hash: hashed once for grouping and filing */
    uint64_t first;  /* its first report's place among all: ties of where go by it */
} key_group;

/* The reports' key hashes, taken as the reports arrive (the part of
 * grouping that needs no other report). The grouping itself sorts the
 * hashes once every report is in (when the window closes, or ahead of
 * that: mm_rebuild_prepare): a hash table probed per report as it came
 * (a slot, then its group, its first report and that key, each a miss
 * depending on the last) was ~35% of a restarted master's CPU; a sort's
 * misses do not wait on each other. */
struct mm_groups {
    uint64_t *hash;   /* per report: objtable_hash of its key */
    size_t n, cap;
    /* mm_rebuild_prepare's grouping of the n reports at r (v NULL: none) */
    const mm_report *r;
    const mm_report **v;
    key_group *kg;
    size_t ngroups;
    size_t bytes;     /* what the objects of those groups may take */
    struct node_ranges *ranges;   /* and their extents by node (claim_all's) */
};

mm_groups *mm_groups_create(void) { return xcalloc(1, sizeof(mm_groups)); }

static void ranges_drop(mm_groups *g);

/* A grouping made ahead no longer fits: reports were added. */
static void drop_prepared(mm_groups *g) {
    if (!g->v) return;
    xhuge_free(g->v, (g->n + 1) * sizeof *g->v);
    xhuge_free(g->kg, (g->n + 1) * sizeof *g->kg);
    g->v = NULL, g->kg = NULL, g->r = NULL;
    ranges_drop(g);
    heap_huge_reserve(0);   /* the memory it reserved */
}

void mm_groups_free(mm_groups *g) {
    if (!g) return;
    drop_prepared(g);
    xhuge_free(g->hash, g->cap * sizeof *g->hash);
    free(g);
}

void mm_groups_add(mm_groups *g, const mm_report *r, size_t from, size_t to) {
    drop_prepared(g);
    if (to > g->cap) {
        size_t cap = g->cap ? g->cap : 1024;
        while (cap < to) cap *= 2;
        g->hash = xhuge_realloc(g->hash, g->cap * sizeof *g->hash, cap * sizeof *g->hash);
        g->cap = cap;
    }
    for (size_t i = from; i < to; i++) g->hash[i] = objtable_hash(r[i].key, r[i].keylen);
    g->n = to;
}

#define RADIX_BITS 16
#define RADIX (1u << RADIX_BITS)

static uint64_t radix_key(const char *e, size_t key_at) {
    uint64_t k;
    memcpy(&k, e + key_at, sizeof k);
    return k;
}

/* n elements of size bytes at v by the uint64_t at key_at in each,
 * least significant 16 bits first (a stable counting sort per digit; a
 * digit all share is skipped), moving them between v and tmp (room for
 * n too): linear, where qsort's compares were ~6% of a rebuild. Returns
 * where the sorted elements are, v or tmp. */
#define RADIX_MIN 256   /* fewer elements: sorted by insertion (no count table to clear) */
#define RADIX_MAX_ELEM 64

/* The same for a few elements, in place (stable). */
static void insertion_sort(char *v, size_t n, size_t size, size_t key_at) {
    char x[RADIX_MAX_ELEM];
    for (size_t i = 1; i < n; i++) {
        memcpy(x, v + i * size, size);
        uint64_t key = radix_key(x, key_at);
        size_t k = i;
        for (; k > 0 && radix_key(v + (k - 1) * size, key_at) > key; k--) memcpy(v + k * size, v + (k - 1) * size, size);
        memcpy(v + k * size, x, size);
    }
}

static void *radix_sort(void *v, void *tmp, size_t n, size_t size, size_t key_at) {
    if (n < RADIX_MIN && size <= RADIX_MAX_ELEM) {
        insertion_sort(v, n, size, key_at);
        return v;
    }
    uint32_t *count = xcalloc(RADIX, sizeof *count);
    char *from = v, *to = tmp;
    for (int shift = 0; shift < 64; shift += RADIX_BITS) {
        memset(count, 0, RADIX * sizeof *count);
        for (size_t i = 0; i < n; i++) count[(radix_key(from + i * size, key_at) >> shift) & (RADIX - 1)]++;
        if (n == 0 || count[(radix_key(from, key_at) >> shift) & (RADIX - 1)] == n) continue;
        uint32_t at = 0;
        for (uint32_t d = 0; d < RADIX; d++) {
            uint32_t c = count[d];
            count[d] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++) {
            uint32_t *slot = &count[(radix_key(from + i * size, key_at) >> shift) & (RADIX - 1)];
            memcpy(to + (size_t)(*slot)++ * size, from + i * size, size);
        }
        char *t = from;
        from = to, to = t;
    }
    free(count);
    return from;
}

/* A report by its key's hash. */
typedef struct hashed {
    uint64_t hash;
    size_t at;
} hashed;

#define HASH_BUCKET_BITS_MAX 20

/* The n hashes, each with its report, into out by hash (equal hashes in
 * report order): a counting pass on the top bits into about n/2
 * buckets, then one insertion pass, which only moves entries within
 * their bucket (a few each). */
static void sort_by_hash(const uint64_t *hash, size_t n, hashed *out) {
    int bits = 1;
    while (bits < HASH_BUCKET_BITS_MAX && ((size_t)1 << (bits + 1)) <= n) bits++;
    size_t nb = (size_t)1 << bits, *at = xhuge_alloc((nb + 1) * sizeof *at);
    for (size_t i = 0; i < n; i++) at[(hash[i] >> (64 - bits)) + 1]++;
    for (size_t b = 1; b <= nb; b++) at[b] += at[b - 1];
    for (size_t i = 0; i < n; i++) out[at[hash[i] >> (64 - bits)]++] = (hashed){hash[i], i};
    xhuge_free(at, (nb + 1) * sizeof *at);
    insertion_sort((char *)out, n, sizeof *out, offsetof(hashed, hash));
}

/* The reports of e[i]'s key from e[i] on (all of its hash follow it):
 * those of another key with the same hash (one pair in 2^64) are moved
 * behind them, in order. Returns where the key's reports end. */
static size_t key_run(const mm_report *r, hashed *e, size_t i, size_t n) {
    const mm_report *first = &r[e[i].at];
    size_t end = i + 1;
    for (size_t k = i + 1; k < n && e[k].hash == e[i].hash; k++) {
        if (key_cmp(first, &r[e[k].at]) != 0) continue;
        if (k != end) {
            hashed t = e[k];
            memmove(&e[end + 1], &e[end], (k - end) * sizeof *e);
            e[end] = t;
        }
        end++;
    }
    return end;
}

#define GROUP_AHEAD 16   /* sorted reports fetched ahead: the report, then its key */

/* v (grouped in hash order) laid out again in the groups' order, which
 * the build walks: finding a group's reports in v by hash order was a
 * miss per key (~90% of the build step's own time). v is freed. */
static const mm_report **in_group_order(const mm_report **v, size_t n, key_group *kg, size_t ngroups) {
    const mm_report **w = xhuge_alloc((n + 1) * sizeof *w);
    size_t at = 0;
    for (size_t k = 0; k < ngroups; k++) {
        if (k + GROUP_AHEAD < ngroups) __builtin_prefetch(&v[kg[k + GROUP_AHEAD].start]);
        size_t from = kg[k].start;
        kg[k].start = at;
        while (from < kg[k].end) w[at++] = v[from++];
        kg[k].end = at;
    }
    xhuge_free(v, (n + 1) * sizeof *v);
    return w;
}

/* The reports grouped by key in one array, each group in object order.
 * The groups come ordered by where their first extent lies (node,
 * offset), so claiming space walks each node's allocator mostly in
 * order. hash: every report's key hash. *bytes: what the objects the
 * groups may become take (mm_obj_bytes, at most one replica per
 * report). */
static const mm_report **group_by_key(const mm_report *r, size_t n, const uint64_t *hash, key_group **groups,
                                      size_t *ngroups_out, size_t *bytes) {
    hashed *e = xhuge_alloc((n + 1) * sizeof *e);
    sort_by_hash(hash, n, e);
    const mm_report **v = xhuge_alloc((n + 1) * sizeof *v);
    key_group *kg = xhuge_alloc((n + 1) * sizeof *kg);
    size_t ngroups = 0, ahead = 0, key_ahead = 0;
    *bytes = 0;
    for (size_t i = 0, end; i < n; i = end) {
        /* the reports a few ahead, then (once those arrived) their keys */
        for (; ahead < n && ahead < i + GROUP_AHEAD; ahead++) __builtin_prefetch(&r[e[ahead].at]);
        for (; key_ahead < n && key_ahead < i + GROUP_AHEAD / 2; key_ahead++)
            __builtin_prefetch(r[e[key_ahead].at].key);
        end = key_run(r, e, i, n);
        const mm_report **in = v + i;
        for (size_t k = i; k < end; k++) v[k] = &r[e[k].at];
        size_t c = end - i;
        if (c == 2 && by_offset(&in[0], &in[1]) > 0) {   /* the common case: two replicas */
            const mm_report *t = in[0];
            in[0] = in[1], in[1] = t;
        } else if (c > 2) {
            qsort(in, c, sizeof *v, by_offset);
        }
        *bytes += mm_obj_bytes(in[0]->keylen, (uint32_t)(c < PROTO_MAX_REPLICAS ? c : PROTO_MAX_REPLICAS), c);
        kg[ngroups++] = (key_group){i, end, ((uint64_t)in[0]->node << 48) ^ (in[0]->seg_off & ((1ULL << 48) - 1)),
                                    e[i].hash, e[i].at};
    }
    xhuge_free(e, (n + 1) * sizeof *e);
    /* by where, keys of equal where in the order they were reported (the
     * first one wins their bytes, whatever the hashes' order) */
    key_group *tmp = xhuge_alloc((n + 1) * sizeof *tmp), *by_first;
    by_first = radix_sort(kg, tmp, ngroups, sizeof *kg, offsetof(key_group, first));
    *groups = radix_sort(by_first, by_first == kg ? tmp : kg, ngroups, sizeof *kg, offsetof(key_group, where));
    xhuge_free(*groups == kg ? tmp : kg, (n + 1) * sizeof *kg);
    *ngroups_out = ngroups;
    return in_group_order(v, n, *groups, ngroups);
}

static int on_node(const partial *p, uint32_t node) {
    for (uint32_t i = 0; i < p->n; i++)
        if (p->ext[i]->node == node) return 1;
    return 0;
}

/* The partial replica r continues, or NULL: one of r's tier (segment or
 * disk: a replica is on disk whole or not at all) ending at r's offset,
 * preferring one already on r's node (a node holds every width-th
 * extent). A disk piece continues only its node's partial, if it has
 * one: the node's record holds its pieces together, so one replica must
 * hold them all. */
static partial *continue_of(partial *p, uint32_t np, const mm_report *r) {
    partial *any = NULL;
    for (uint32_t i = 0; i < np; i++) {
        if (p[i].n == 0 || on_segment(p[i].ext[0]) != on_segment(r)) continue;
        int fits = p[i].end == r->obj_off && p[i].n < PROTO_MAX_EXTENTS;
        if (!on_segment(r) && on_node(&p[i], r->node)) return fits ? &p[i] : NULL;
        if (!fits) continue;
        if (on_segment(r) && on_node(&p[i], r->node)) return &p[i];
        if (!any) any = &p[i];
    }
    return any;
}

/* Chain r into a partial replica (no space is touched); 0 if it fits one.
 * A disk record is the object whole, or a piece of a node's share of one
 * striped over nodes (chained as segment extents are, with the other
 * nodes' pieces). */
static int chain_extent(master_meta *m, partial *p, uint32_t *np, const mm_report *r,
                        const mm_report *first) {
    mm_node *node = mm_node_get(m, r->node);
    if (!node || !node->alloc || r->size != first->size || r->crc != first->crc) return -1;
    if (r->length == 0 || r->obj_off >= r->size || r->length > r->size - r->obj_off) return -1;
    partial *to = continue_of(p, *np, r);
    if (!to) {
        if (r->obj_off != 0 || *np == MM_MAX_PARTIALS) return -1;
        to = &p[(*np)++];
    }
    to->ext[to->n++] = r;
    to->end += r->length;
    return 0;
}

#define PREFETCH_AHEAD 8   /* keys */

/* A node whose reported extents were all claimed in one pass when the
 * job began: the allocator they went into, and when the node registered
 * (a node that died and came back meanwhile has another allocator). */
typedef struct pre_claim {
    const seg_alloc *alloc;
    uint64_t registered_ms;
} pre_claim;

struct mm_rebuild_job {
    const mm_report **v;     /* the reports, grouped by key */
    size_t n;
    key_group *kg;
    size_t ngroups, next;    /* next: the first group not built yet */
    int fresh;               /* the table holds only what this job made */
    int short_made;          /* an object with fewer replicas than it wants: repair */
    size_t made;
    partial *p;
    obj_extent *room;        /* where whole replicas' extents are assembled */
    pre_claim *pre;          /* by node id, npre of them */
    uint32_t npre;
};

/* What one step works with. */
typedef struct build_ctx {
    master_meta *m;
    mm_rebuild_job *j;
    uint64_t now_ms;
    mm_rebuild_stats *st;
    mm_rebuild_refused_fn *fn;
    void *ctx;
} build_ctx;

/* ---- claims made when the job begins ---- */

/* A node's reported extents were claimed when the job began, into the
 * allocator it still has. */
static int pre_claimed(const build_ctx *b, uint32_t id) {
    const mm_node *n = mm_node_get(b->m, id);
    const pre_claim *pc = id < b->j->npre ? &b->j->pre[id] : NULL;
    return pc && pc->alloc && n && n->alloc == pc->alloc && n->registered_ms == pc->registered_ms;
}

static int alloc_empty(const seg_alloc *a) {
    seg_alloc_stats st;
    seg_alloc_get_stats(a, &st);
    return st.allocations == 0;
}

/* Every report's extent, by node: node id's are r[at[id]..at[id + 1])
 * (ids 1..nn; at has nn + 2 entries), each node's sorted by offset. */
typedef struct node_ranges {
    seg_range *r;
    size_t *at;
    size_t n;
    uint32_t nn;
} node_ranges;

static void node_ranges_free(node_ranges *nr) {
    xhuge_free(nr->r, (nr->n + 1) * sizeof *nr->r);
    free(nr->at);
    memset(nr, 0, sizeof *nr);
}

static void ranges_by_node(const mm_report *rep, size_t n, uint32_t nn, node_ranges *nr) {
    size_t *at = xcalloc((size_t)nn + 2, sizeof *at);
    seg_range *r = xhuge_alloc((n + 1) * sizeof *r), *tmp = xhuge_alloc((n + 1) * sizeof *tmp);
    for (size_t i = 0; i < n; i++)
        if (rep[i].node <= nn && on_segment(&rep[i])) at[rep[i].node + 1]++;
    for (uint32_t id = 1; id <= nn + 1; id++) at[id] += at[id - 1];
    size_t *fill = xmalloc((size_t)(nn + 1) * sizeof *fill);
    memcpy(fill, at, (size_t)(nn + 1) * sizeof *fill);
    for (size_t i = 0; i < n; i++)
        if (rep[i].node <= nn && on_segment(&rep[i]))
            r[fill[rep[i].node]++] = (seg_range){rep[i].seg_off, rep[i].length};
    free(fill);
    for (uint32_t id = 1; id <= nn; id++) {
        size_t k = at[id + 1] - at[id];
        const seg_range *v = radix_sort(r + at[id], tmp + at[id], k, sizeof *r, offsetof(seg_range, off));
        if (v != r + at[id]) memcpy(r + at[id], v, k * sizeof *r);
    }
    xhuge_free(tmp, (n + 1) * sizeof *tmp);
    *nr = (node_ranges){r, at, n, nn};
}

/* Every node whose allocator holds nothing takes all its reported
 * extents in one pass (seg_alloc_claim_sorted), if they are disjoint:
 * claims one by one were ~10% of a rebuild. What no whole replica
 * keeps is given back as it is refused. A node whose extents overlap
 * (two keys claim the same bytes: the first visited wins) or that holds
 * something already claims replica by replica as the keys come. nr:
 * the reports' extents by node (nodes registered since have none). */
static void claim_all(master_meta *m, mm_rebuild_job *j, const node_ranges *nr) {
    uint32_t nn = mm_node_count(m) < nr->nn ? mm_node_count(m) : nr->nn;
    j->npre = nn + 1;
    j->pre = xcalloc(j->npre, sizeof *j->pre);
    for (uint32_t id = 1; id <= nn; id++) {
        size_t k = nr->at[id + 1] - nr->at[id];
        mm_node *node = k ? mm_node_get(m, id) : NULL;   /* ids without reports stay empty slots */
        if (k == 0 || !node || !node->alloc || !alloc_empty(node->alloc)) continue;
        if (seg_alloc_claim_sorted(node->alloc, nr->r + nr->at[id], k) == ALLOC_OK)
            j->pre[id] = (pre_claim){node->alloc, node->registered_ms};
    }
}

/* ---- building ---- */

/* Every extent of r goes back to its node's allocator. */
static void release_claimed(master_meta *m, const obj_replica *r) {
    for (uint32_t k = 0; k < r->nextents; k++) {
        const obj_extent *e = &r->extents[k];
        if (e->offset != MM_ON_DISK) mm_extent_release(mm_node_get(m, e->node), e->offset, e->length);
    }
}

/* Claim a whole replica's space; 0 with rep filled (its extents in
 * room, PROTO_MAX_EXTENTS of them), or -1 (nothing claimed here held:
 * extents claimed when the job began stay so until refused). */
static int claim_replica(const build_ctx *b, const partial *p, obj_replica *rep, obj_extent *room) {
    rep->extents = room;
    rep->nextents = 0;
    for (uint32_t k = 0; k < p->n; k++) {
        const mm_report *r = p->ext[k];
        if (on_segment(r) && !pre_claimed(b, r->node) &&
            mm_extent_claim(mm_node_get(b->m, r->node), r->seg_off, r->length) != ALLOC_OK) {
            for (uint32_t i = 0; i < rep->nextents; i++)
                if (rep->extents[i].offset != MM_ON_DISK && !pre_claimed(b, rep->extents[i].node))
                    mm_extent_release(mm_node_get(b->m, rep->extents[i].node), rep->extents[i].offset,
                                      rep->extents[i].length);
            rep->nextents = 0;
            return -1;
        }
        rep->extents[rep->nextents++] = (obj_extent){r->node, r->seg_off, r->length};
    }
    return 0;
}

/* No node may hold parts of two replicas of one object. */
static int shares_node(const obj_replica *whole, uint32_t nwhole, const partial *p) {
    for (uint32_t i = 0; i < nwhole; i++)
        for (uint32_t k = 0; k < p->n; k++)
            if (mm_replica_on_node(&whole[i], p->ext[k]->node)) return 1;
    return 0;
}

/* r is kept by no object: its space is free again if the job claimed it. */
static void refuse(const build_ctx *b, const mm_report *r) {
    b->st->extents_rejected++;
    if (on_segment(r) && pre_claimed(b, r->node))
        seg_alloc_release(mm_node_get(b->m, r->node)->alloc, r->seg_off, r->length);
    if (b->fn) b->fn(r, b->ctx);
}

/* The slice CRCs the reports of the kept replicas (p[kept[..]]) carry,
 * onto o: only if every report that carries some carries the same, and
 * they combine to the object's CRC (a node keeps them from the holdings
 * notes; what disagrees is trusted by no one: readers verify o whole). */
static void restore_slices(master_meta *m, object *o, const partial *p, const uint32_t *kept, uint32_t nkept) {
    proto_slices_ref got = {0, 0, NULL}, s;
    for (uint32_t i = 0; i < nkept; i++)
        for (uint32_t k = 0; k < p[kept[i]].n; k++) {
            const mm_report *r = p[kept[i]].ext[k];
            if (!r->slices || !proto_slices_ref_get(r->slices, proto_slices_ref_len(PROTO_MAX_SLICES), o->size, &s))
                continue;
            if (got.count && !proto_slices_ref_eq(&got, &s)) return;
            got = s;
        }
    if (!got.count) return;
    proto_slices sl;
    proto_slices_from_ref(&got, &sl);
    if (proto_slices_check(&sl, o->size, o->crc, NULL, 0) != 0) {
        proto_slices_free(&sl);
        return;
    }
    mm_more_get(o)->slices = sl;
    m->slice_crc_bytes += (uint64_t)sl.count * sizeof *sl.crc;
}

/* Turn the whole replicas of one key (np partials) into a COMPLETE object. */
static void commit_key(const build_ctx *b, const mm_report *first, uint64_t hash, uint32_t np) {
    master_meta *m = b->m;
    mm_rebuild_stats *st = b->st;
    partial *p = b->j->p;
    obj_replica whole[PROTO_MAX_REPLICAS];
    uint32_t kept[PROTO_MAX_REPLICAS];   /* the partials whole[] came from */
    uint32_t nwhole = 0, want = 0, any_whole = 0;
    for (uint32_t i = 0; i < np; i++) {
        int ok = p[i].end == first->size;
        any_whole |= ok;
        ok = ok && nwhole < PROTO_MAX_REPLICAS && !shares_node(whole, nwhole, &p[i]) &&
             claim_replica(b, &p[i], &whole[nwhole], b->j->room + (size_t)nwhole * PROTO_MAX_EXTENTS) == 0;
        if (ok) {
            kept[nwhole++] = i;
            st->extents += p[i].n;
            for (uint32_t k = 0; k < p[i].n; k++)
                if (p[i].ext[k]->want > want) want = p[i].ext[k]->want;
            continue;
        }
        for (uint32_t k = 0; k < p[i].n; k++) refuse(b, p[i].ext[k]);
    }
    if (nwhole == 0) {
        if (any_whole) st->keys_refused++;
        else st->keys_incomplete++;
        return;
    }
    if (want < nwhole) want = nwhole;
    if (want > PROTO_MAX_REPLICAS) want = PROTO_MAX_REPLICAS;
    object *o = mm_obj_insert(m, first->key, first->keylen, hash, first->size, whole, nwhole, want, 0);
    if (!o) {   /* refused (usable_key bounds the key, so it cannot be): nothing kept */
        for (uint32_t i = 0; i < nwhole; i++) release_claimed(m, &whole[i]);
        st->keys_refused++;
        return;
    }
    o->crc = first->crc;
    restore_slices(m, o, p, kept, nwhole);
    o->created_ms = o->atime_ms = b->now_ms;
    if (b->now_ms > m->rebuilt_last_ms) m->rebuilt_last_ms = b->now_ms;   /* mm_repin_left */
    otable_set_state(m->objs, o, OBJ_COMPLETE);
    m->under_replicated += mm_under(o);
    st->objects++;
    st->replicas += nwhole;
    st->objects_short += nwhole < want;
}

/* fresh: the table was empty when the rebuild began, so no key of a
 * group (one per key) can be in it yet. */
static int usable_key(master_meta *m, const mm_report *first, int fresh) {
    return first->keylen > 0 && first->keylen <= PROTO_MAX_KEY_LEN && first->size > 0 &&
           (fresh || !mm_find(m, first->key, first->keylen));
}

/* g's grouping of its n reports at r, made now unless made ahead. */
static void group(mm_groups *g, const mm_report *r, size_t n) {
    if (g->v && g->r == r) return;
    drop_prepared(g);
    g->r = r;
    g->v = group_by_key(r, n, g->hash, &g->kg, &g->ngroups, &g->bytes);
}

static void ranges_drop(mm_groups *g) {
    if (!g->ranges) return;
    node_ranges_free(g->ranges);
    free(g->ranges);
    g->ranges = NULL;
}

void mm_rebuild_prepare(master_meta *m, const mm_report *reports, size_t n, mm_groups *g) {
    if (!g || g->n != n || n == 0 || (g->v && g->r == reports)) return;
    group(g, reports, n);
    g->ranges = xmalloc(sizeof *g->ranges);
    ranges_by_node(reports, n, mm_node_count(m), g->ranges);
    otable_reserve(m->objs, otable_size(m->objs) + g->ngroups);
    heap_huge_reserve(g->bytes + seg_alloc_claim_bytes(n));
}

mm_rebuild_job *mm_rebuild_begin(master_meta *m, const mm_report *reports, size_t n, mm_groups *g) {
    mm_rebuild_job *j = xcalloc(1, sizeof *j);
    j->n = n;
    if (!g || g->n != n) {   /* not hashed as they came (or not all of them): hash them now */
        mm_groups_free(g);
        g = mm_groups_create();
        mm_groups_add(g, reports, 0, n);
    }
    group(g, reports, n);
    j->v = g->v, j->kg = g->kg, j->ngroups = g->ngroups;
    g->v = NULL, g->kg = NULL;   /* the job's now */
    node_ranges nr;
    if (g->ranges) nr = *g->ranges, free(g->ranges), g->ranges = NULL;
    else ranges_by_node(reports, n, mm_node_count(m), &nr);
    mm_groups_free(g);
    j->fresh = otable_size(m->objs) == 0;
    otable_reserve(m->objs, otable_size(m->objs) + j->ngroups);
    claim_all(m, j, &nr);
    node_ranges_free(&nr);
    j->p = xcalloc(MM_MAX_PARTIALS, sizeof *j->p);
    j->room = xmalloc((size_t)PROTO_MAX_REPLICAS * PROTO_MAX_EXTENTS * sizeof *j->room);
    return j;
}

/* The reports of one key: chained into replicas, the whole ones kept. */
static void build_key(const build_ctx *b, const key_group *g) {
    mm_rebuild_job *j = b->j;
    const mm_report *first = j->v[g->start];
    int usable = usable_key(b->m, first, j->fresh);
    uint32_t np = 0;
    for (size_t k = g->start; k < g->end; k++)
        if (!usable || chain_extent(b->m, j->p, &np, j->v[k], first) != 0) refuse(b, j->v[k]);
    if (usable) commit_key(b, first, g->hash, np);
    for (uint32_t k = 0; k < np; k++) j->p[k].n = 0, j->p[k].end = 0;
}

int mm_rebuild_step(master_meta *m, mm_rebuild_job *j, size_t keys, uint64_t now_ms,
                    mm_rebuild_stats *st, mm_rebuild_refused_fn *fn, void *ctx) {
    const build_ctx b = {m, j, now_ms, st, fn, ctx};
    heap_huge_advise();   /* the last step's growth, before this one touches more */
    size_t stop = j->ngroups - j->next < keys ? j->ngroups : j->next + keys;
    uint64_t before = st->objects, short_before = st->objects_short;
    /* between steps others ran: a key removed or put meanwhile ends the shortcut */
    j->fresh = j->fresh && otable_size(m->objs) == j->made;
    for (; j->next < stop; j->next++) {
        const key_group *g = &j->kg[j->next];
        if (j->next + PREFETCH_AHEAD < j->ngroups) {   /* the misses of a key a few ahead start now */
            const key_group *ahead = g + PREFETCH_AHEAD;
            otable_prefetch(m->objs, ahead->hash);
            for (size_t k = ahead->start; k < ahead->end && k < ahead->start + 4; k++) __builtin_prefetch(j->v[k]);
        }
        if (j->next + PREFETCH_AHEAD / 2 < j->ngroups)   /* its key, once its first report is here */
            __builtin_prefetch(j->v[g[PREFETCH_AHEAD / 2].start]->key);
        build_key(&b, g);
    }
    j->made += st->objects - before;
    j->short_made |= st->objects_short != short_before;
    return j->next < j->ngroups;
}

void mm_rebuild_free(mm_rebuild_job *j) {
    if (!j) return;
    heap_huge_reserve(0);
    free(j->pre);
    free(j->room);
    free(j->p);
    xhuge_free(j->kg, (j->n + 1) * sizeof *j->kg);
    xhuge_free(j->v, (j->n + 1) * sizeof *j->v);
    free(j);
}

/* Repair walks the whole table: only when some object came back short. */
void mm_rebuild_end(master_meta *m, mm_rebuild_job *j) {
    otable_reserve(m->objs, 0);
    if (j->short_made) {
        m->repair_dirty = 1;
        m->repair_next_ms = 0;
    }
    mm_rebuild_free(j);
}

void mm_rebuild(master_meta *m, const mm_report *reports, size_t n, uint64_t now_ms,
                mm_rebuild_stats *st, mm_rebuild_refused_fn *fn, void *ctx) {
    memset(st, 0, sizeof *st);
    mm_rebuild_job *j = mm_rebuild_begin(m, reports, n, NULL);
    while (mm_rebuild_step(m, j, SIZE_MAX, now_ms, st, fn, ctx)) {}
    mm_rebuild_end(m, j);
}
