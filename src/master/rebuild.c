/* master/rebuild.c - re-creating the object table from what nodes hold.
 *
 * After a master restart the nodes are the truth: each reports the
 * extents it holds (key, object size and checksum, which object bytes,
 * where in its segment). Extents of one key are chained in object order
 * into replicas first, touching no space; only replicas that came out
 * whole then claim their space. So what forms no whole replica never
 * blocks another key's extents (only whole replicas that overlap each
 * other compete, the first one visited wins), and the same reports a
 * second time add nothing. Refused extents leave their space free. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "master/meta_internal.h"

/* Replicas being assembled for one key: end = object bytes covered so far. */
typedef struct partial {
    const mm_report *ext[PROTO_MAX_EXTENTS];
    uint32_t n;
    uint64_t end;
} partial;

#define MM_MAX_PARTIALS (2 * PROTO_MAX_REPLICAS)

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
} key_group;

#define RADIX_BITS 16
#define RADIX (1u << RADIX_BITS)

/* kg[0..n) by where, least significant 16 bits first (a stable counting
 * sort per digit; a digit all groups share is skipped): linear, where
 * qsort's compares were ~6% of a rebuild. */
static void sort_by_where(key_group **kg, size_t n) {
    uint32_t *count = xcalloc(RADIX, sizeof *count);
    key_group *from = *kg, *to = xhuge_alloc((n + 1) * sizeof *to);
    for (int shift = 0; shift < 64; shift += RADIX_BITS) {
        memset(count, 0, RADIX * sizeof *count);
        for (size_t i = 0; i < n; i++) count[(from[i].where >> shift) & (RADIX - 1)]++;
        if (n == 0 || count[(from[0].where >> shift) & (RADIX - 1)] == n) continue;
        uint32_t at = 0;
        for (uint32_t d = 0; d < RADIX; d++) {
            uint32_t c = count[d];
            count[d] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++) to[count[(from[i].where >> shift) & (RADIX - 1)]++] = from[i];
        key_group *t = from;
        from = to, to = t;
    }
    xhuge_free(to, (n + 1) * sizeof *to);
    free(count);
    *kg = from;
}

/* Reports grouped by key as they arrive: a hash table of each key's
 * first report (grown by doubling), and each report's group. Hashing
 * and probing were the largest cost of a rebuild and blocked the loop
 * for seconds when done at the end; spread over the reports' arrival,
 * they run while the nodes are still sending. Indices, not pointers:
 * the reports' array may move between calls. */
struct mm_groups {
    uint64_t *slot;       /* the hash's top half (a tag) | group + 1; 0: empty */
    size_t cap;           /* slots, a power of two */
    size_t *first;        /* per group: its first report */
    uint64_t *hash;       /* per group: the key's objtable_hash */
    uint32_t *count;      /* per group: its reports */
    size_t ngroups, capgroups;
    uint32_t *group;      /* per report */
    size_t n, capreports;
};

#define GROUP_TAG(h) ((h) & ~(uint64_t)UINT32_MAX)
#define GROUP_AT(h, cap) ((size_t)((h) >> 20) & ((cap) - 1))   /* other bits than the table's buckets */

mm_groups *mm_groups_create(void) { return xcalloc(1, sizeof(mm_groups)); }

void mm_groups_free(mm_groups *g) {
    if (!g) return;
    xhuge_free(g->slot, g->cap * sizeof *g->slot);
    xhuge_free(g->first, g->capgroups * sizeof *g->first);
    xhuge_free(g->hash, g->capgroups * sizeof *g->hash);
    xhuge_free(g->count, g->capgroups * sizeof *g->count);
    xhuge_free(g->group, g->capreports * sizeof *g->group);
    free(g);
}

/* Twice the slots, every group filed again by its kept hash. */
static void groups_rehash(mm_groups *g) {
    size_t cap = g->cap ? g->cap * 2 : 1024;
    uint64_t *slot = xhuge_alloc(cap * sizeof *slot);
    for (size_t k = 0; k < g->ngroups; k++) {
        size_t at = GROUP_AT(g->hash[k], cap);
        while (slot[at]) at = (at + 1) & (cap - 1);
        slot[at] = GROUP_TAG(g->hash[k]) | (k + 1);
    }
    xhuge_free(g->slot, g->cap * sizeof *g->slot);
    g->slot = slot;
    g->cap = cap;
}

static void *grow(void *p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    p = xhuge_realloc(p, *cap * size, c * size);
    *cap = c;
    return p;
}

/* Room for reports reports and groups groups. */
static void groups_room(mm_groups *g, size_t reports, size_t groups) {
    g->group = grow(g->group, &g->capreports, reports, sizeof *g->group);
    if (groups <= g->capgroups) return;
    size_t c1 = g->capgroups, c2 = c1, c3 = c1;
    g->first = grow(g->first, &c1, groups, sizeof *g->first);
    g->hash = grow(g->hash, &c2, groups, sizeof *g->hash);
    g->count = grow(g->count, &c3, groups, sizeof *g->count);
    g->capgroups = c1;
}

#define GROUP_AHEAD 8   /* reports whose slot is prefetched ahead of the probe */

static uint64_t report_hash(const mm_report *r) { return objtable_hash(r->key, r->keylen); }

void mm_groups_add(mm_groups *g, const mm_report *r, size_t from, size_t to) {
    groups_room(g, to, g->ngroups + (to - from));
    /* sized for the batch first: no rehash under the prefetched probes */
    while (2 * (g->ngroups + (to - from)) > g->cap) groups_rehash(g);
    uint64_t ahead[GROUP_AHEAD];   /* hashes of the next reports, their slots on the way */
    for (size_t k = 0; k < GROUP_AHEAD && from + k < to; k++) {
        ahead[k] = report_hash(&r[from + k]);
        __builtin_prefetch(&g->slot[GROUP_AT(ahead[k], g->cap)]);
    }
    for (size_t i = from; i < to; i++) {
        uint64_t h = ahead[(i - from) % GROUP_AHEAD], tag = GROUP_TAG(h);
        if (i + GROUP_AHEAD < to) {
            uint64_t next = report_hash(&r[i + GROUP_AHEAD]);
            ahead[(i - from) % GROUP_AHEAD] = next;
            __builtin_prefetch(&g->slot[GROUP_AT(next, g->cap)]);
        }
        size_t at = GROUP_AT(h, g->cap);
        while (g->slot[at] && (GROUP_TAG(g->slot[at]) != tag ||
                               key_cmp(&r[g->first[(uint32_t)g->slot[at] - 1]], &r[i]) != 0))
            at = (at + 1) & (g->cap - 1);
        if (!g->slot[at]) {
            g->first[g->ngroups] = i;
            g->hash[g->ngroups] = h;
            g->count[g->ngroups] = 0;
            g->slot[at] = tag | ++g->ngroups;
        }
        uint32_t k = (uint32_t)g->slot[at] - 1;
        g->group[i] = k;
        g->count[k]++;
    }
    g->n = to;
}

/* The grouped reports in one array (a counting sort), each group in
 * object order. The groups come ordered by where their first extent
 * lies (node, offset), so claiming space walks each node's allocator
 * mostly in order. g is consumed. */
static const mm_report **group_by_key(const mm_report *r, size_t n, mm_groups *g, key_group **groups,
                                      size_t *ngroups_out) {
    size_t nn = n ? n : 1, ngroups = g->ngroups;
    xhuge_free(g->slot, g->cap * sizeof *g->slot);
    g->slot = NULL, g->cap = 0;
    key_group *kg = xhuge_alloc((ngroups + 1) * sizeof *kg);
    size_t at = 0;
    for (size_t k = 0; k < ngroups; k++) {
        kg[k].start = kg[k].end = at, kg[k].hash = g->hash[k];
        at += g->count[k];
    }
    const mm_report **v = xhuge_alloc(nn * sizeof *v);
    for (size_t i = 0; i < n; i++) v[kg[g->group[i]].end++] = &r[i];
    mm_groups_free(g);
    for (size_t k = 0; k < ngroups; k++) {
        size_t c = kg[k].end - kg[k].start;
        const mm_report **in = v + kg[k].start;
        if (c == 2 && by_offset(&in[0], &in[1]) > 0) {   /* the common case: two replicas */
            const mm_report *t = in[0];
            in[0] = in[1], in[1] = t;
        } else if (c > 2) {
            qsort(in, c, sizeof *v, by_offset);
        }
        kg[k].where = ((uint64_t)in[0]->node << 48) ^ (in[0]->seg_off & ((1ULL << 48) - 1));
    }
    sort_by_where(&kg, ngroups);
    *groups = kg;
    *ngroups_out = ngroups;
    return v;
}

static int on_node(const partial *p, uint32_t node) {
    for (uint32_t i = 0; i < p->n; i++)
        if (p->ext[i]->node == node) return 1;
    return 0;
}

/* The partial replica r continues, or NULL: one ending at r's offset,
 * preferring one already on r's node (a node holds every width-th slice). */
static partial *continue_of(partial *p, uint32_t np, const mm_report *r) {
    partial *any = NULL;
    for (uint32_t i = 0; i < np; i++) {
        if (p[i].end != r->obj_off || p[i].n == 0 || p[i].n == PROTO_MAX_EXTENTS) continue;
        if (on_node(&p[i], r->node)) return &p[i];
        if (!any) any = &p[i];
    }
    return any;
}

/* Chain r into a partial replica (no space is touched); 0 if it fits one. */
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

static void release_claimed(master_meta *m, const obj_replica *r) {
    for (uint32_t k = 0; k < r->nextents; k++) {
        const obj_extent *e = &r->extents[k];
        seg_alloc_release(mm_node_get(m, e->node)->alloc, e->offset, e->length);
    }
}

/* Claim a whole replica's space; 0 with rep filled (its extents in
 * room, PROTO_MAX_EXTENTS of them), or -1 (nothing held). */
static int claim_replica(master_meta *m, const partial *p, obj_replica *rep, obj_extent *room) {
    rep->extents = room;
    rep->nextents = 0;
    for (uint32_t k = 0; k < p->n; k++) {
        const mm_report *r = p->ext[k];
        if (seg_alloc_reserve_at(mm_node_get(m, r->node)->alloc, r->seg_off, r->length) != ALLOC_OK) {
            release_claimed(m, rep);
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

static void refuse(mm_rebuild_stats *st, mm_rebuild_refused_fn *fn, void *ctx, const mm_report *r) {
    st->extents_rejected++;
    if (fn) fn(r, ctx);
}

/* Turn the whole replicas of one key into a COMPLETE object. */
static void commit_key(master_meta *m, const mm_report *first, uint64_t hash, partial *p, uint32_t np,
                       obj_extent *room, uint64_t now_ms, mm_rebuild_stats *st, mm_rebuild_refused_fn *fn,
                       void *ctx) {
    obj_replica whole[PROTO_MAX_REPLICAS];
    uint32_t nwhole = 0, want = 0, any_whole = 0;
    for (uint32_t i = 0; i < np; i++) {
        int ok = p[i].end == first->size;
        any_whole |= ok;
        ok = ok && nwhole < PROTO_MAX_REPLICAS && !shares_node(whole, nwhole, &p[i]) &&
             claim_replica(m, &p[i], &whole[nwhole], room + (size_t)nwhole * PROTO_MAX_EXTENTS) == 0;
        if (ok) {
            nwhole++;
            st->extents += p[i].n;
            for (uint32_t k = 0; k < p[i].n; k++)
                if (p[i].ext[k]->want > want) want = p[i].ext[k]->want;
            continue;
        }
        for (uint32_t k = 0; k < p[i].n; k++) refuse(st, fn, ctx, p[i].ext[k]);
    }
    if (nwhole == 0) {
        if (any_whole) st->keys_refused++;
        else st->keys_incomplete++;
        return;
    }
    if (want < nwhole) want = nwhole;
    if (want > PROTO_MAX_REPLICAS) want = PROTO_MAX_REPLICAS;
    object *o = mm_obj_insert(m, first->key, first->keylen, hash, whole, nwhole, want, 0);
    if (!o) {   /* refused (usable_key bounds the key, so it cannot be): nothing kept */
        for (uint32_t i = 0; i < nwhole; i++) release_claimed(m, &whole[i]);
        st->keys_refused++;
        return;
    }
    o->size = first->size;
    o->crc = first->crc;
    o->created_ms = o->atime_ms = now_ms;
    objtable_set_state(m->objs, o, OBJ_COMPLETE);
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

#define PREFETCH_AHEAD 8   /* keys */

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
};

mm_rebuild_job *mm_rebuild_begin(master_meta *m, const mm_report *reports, size_t n, mm_groups *g) {
    mm_rebuild_job *j = xcalloc(1, sizeof *j);
    j->n = n;
    if (!g || g->n != n) {   /* not grouped as they came (or not all of them): group them now */
        mm_groups_free(g);
        g = mm_groups_create();
        mm_groups_add(g, reports, 0, n);
    }
    j->v = group_by_key(reports, n, g, &j->kg, &j->ngroups);
    j->fresh = objtable_size(m->objs) == 0;
    objtable_reserve(m->objs, objtable_size(m->objs) + j->ngroups);
    j->p = xcalloc(MM_MAX_PARTIALS, sizeof *j->p);
    j->room = xmalloc((size_t)PROTO_MAX_REPLICAS * PROTO_MAX_EXTENTS * sizeof *j->room);
    return j;
}

int mm_rebuild_step(master_meta *m, mm_rebuild_job *j, size_t keys, uint64_t now_ms,
                    mm_rebuild_stats *st, mm_rebuild_refused_fn *fn, void *ctx) {
    size_t stop = j->ngroups - j->next < keys ? j->ngroups : j->next + keys;
    uint64_t before = st->objects, short_before = st->objects_short;
    /* between steps others ran: a key removed or put meanwhile ends the shortcut */
    j->fresh = j->fresh && objtable_size(m->objs) == j->made;
    for (; j->next < stop; j->next++) {
        const key_group *g = &j->kg[j->next];
        if (j->next + PREFETCH_AHEAD < j->ngroups) {   /* the misses of a key a few ahead start now */
            const key_group *ahead = g + PREFETCH_AHEAD;
            objtable_prefetch(m->objs, ahead->hash);
            for (size_t k = ahead->start; k < ahead->end && k < ahead->start + 4; k++) __builtin_prefetch(j->v[k]);
        }
        const mm_report *first = j->v[g->start];
        int usable = usable_key(m, first, j->fresh);
        uint32_t np = 0;
        for (size_t k = g->start; k < g->end; k++)
            if (!usable || chain_extent(m, j->p, &np, j->v[k], first) != 0) refuse(st, fn, ctx, j->v[k]);
        if (usable) commit_key(m, first, g->hash, j->p, np, j->room, now_ms, st, fn, ctx);
        for (uint32_t k = 0; k < np; k++) j->p[k].n = 0, j->p[k].end = 0;
    }
    j->made += st->objects - before;
    j->short_made |= st->objects_short != short_before;
    return j->next < j->ngroups;
}

void mm_rebuild_free(mm_rebuild_job *j) {
    if (!j) return;
    free(j->room);
    free(j->p);
    xhuge_free(j->kg, (j->ngroups + 1) * sizeof *j->kg);
    xhuge_free(j->v, (j->n ? j->n : 1) * sizeof *j->v);
    free(j);
}

/* Repair walks the whole table: only when some object came back short. */
void mm_rebuild_end(master_meta *m, mm_rebuild_job *j) {
    objtable_reserve(m->objs, 0);
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
