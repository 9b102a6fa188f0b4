/* master/shares.c - memory nodes shared by master groups: our chunks.
 *
 * A node that serves several groups gives each whole chunks of its
 * segment (proto/chunks.h, node/shares.h). Its allocator here holds the
 * whole segment; what is not our group's is withheld (core/alloc.h), so
 * placement, eviction and the stats see only our chunks. The node says
 * which chunks it gave us at registration and in MOON.CHUNKS; we ask for
 * more when our room there runs low and give back a chunk we do not use
 * (withheld here first, so nothing of ours is placed in it afterwards). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "master/meta_internal.h"
#include "proto/chunks.h"

#define SHARE_MAX_WANT 16   /* chunks asked for at once */

/* Chunk i's range as the allocator takes it (a short tail below the
 * alignment stays out of every range: nothing fits there anyway). */
static void chunk_range(const mm_node *n, uint32_t i, uint64_t *off, uint64_t *len) {
    proto_chunk_range(n->chunks, n->segment_size, i, off, len);
    *len &= ~(uint64_t)(MM_ALIGN - 1);
}

/* 1 if [off, off+len) lies wholly in chunks not ours. */
static int in_others(const mm_node *n, uint64_t off, uint64_t len) {
    if (!n->chunks || !len) return 0;
    uint64_t cs = n->chunks->chunk_size;
    for (uint64_t c = off / cs; c <= (off + len - 1) / cs; c++)
        if (c >= n->chunks->n || proto_chunks_has(n->chunks, (uint32_t)c)) return 0;
    return 1;
}

/* ---- ranges of our chunks lent to another group ---- */

/* Sorted by offset, disjoint; withheld in the node's allocator. */
typedef struct mm_lent_away {
    seg_range *r;
    size_t n, cap;
    uint64_t bytes;
} mm_lent_away;

/* The index of the first range ending past off. */
static size_t away_at(const mm_lent_away *a, uint64_t off) {
    size_t lo = 0, hi = a ? a->n : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->r[mid].off + a->r[mid].len <= off) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* 1 if exactly [off, off+len) is lent away, into *at its index. */
static int away_has(const mm_lent_away *a, uint64_t off, uint64_t len, size_t *at) {
    *at = away_at(a, off);
    return a && *at < a->n && a->r[*at].off == off && a->r[*at].len == len;
}

static int away_overlaps(const mm_lent_away *a, uint64_t off, uint64_t len) {
    size_t i = away_at(a, off);
    return a && i < a->n && a->r[i].off < off + len;
}

static void away_del(mm_lent_away *a, size_t i) {
    a->bytes -= a->r[i].len;
    memmove(&a->r[i], &a->r[i + 1], (a->n - i - 1) * sizeof *a->r);
    a->n--;
}

void mm_node_shares_reset(mm_node *n) {
    free(n->chunks);
    n->chunks = NULL;
    if (n->away) free(n->away->r);
    free(n->away);
    n->away = NULL;
}

/* 1 if [off, off+len) lies wholly in our chunks of n. */
static int in_ours(const mm_node *n, uint64_t off, uint64_t len) {
    if (!n->chunks || !len || off >= n->segment_size || len > n->segment_size - off) return 0;
    uint64_t cs = n->chunks->chunk_size;
    for (uint64_t c = off / cs; c <= (off + len - 1) / cs; c++)
        if (c >= n->chunks->n || !proto_chunks_has(n->chunks, (uint32_t)c)) return 0;
    return 1;
}

/* Lent away: withheld, whether it was free (a new leader: the node does
 * not report what it lent away) or reserved (an object we gave away). */
static int away_add(mm_node *n, uint64_t off, uint64_t len) {
    if (seg_alloc_withhold(n->alloc, off, len) != 0 &&
        (seg_alloc_release(n->alloc, off, len) != 0 || seg_alloc_withhold(n->alloc, off, len) != 0))
        return -1;
    mm_lent_away *a = n->away ? n->away : (n->away = xcalloc(1, sizeof *n->away));
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 16;
        a->r = xrealloc(a->r, a->cap * sizeof *a->r);
    }
    size_t i = away_at(a, off);
    memmove(&a->r[i + 1], &a->r[i], (a->n - i) * sizeof *a->r);
    a->r[i] = (seg_range){off, len};
    a->n++;
    a->bytes += len;
    return 0;
}

proto_status mm_node_lent(master_meta *m, uint32_t id, int back, uint64_t off, uint64_t len, uint64_t now_ms,
                          char *err, size_t errlen) {
    mm_node *n = mm_node_get(m, id);
    if (!n || !n->alloc || n->state != NODE_ALIVE) return mm_fail(err, errlen, PROTO_NODEDEAD, "node %u is not a member", id);
    if (off & (MM_ALIGN - 1)) return mm_fail(err, errlen, PROTO_ERR, "node %u: %llu is not aligned", id, (unsigned long long)off);
    if (!in_ours(n, off, len))   /* a chunk we gave back that the node kept for it (node/shares.h): named ours again soon */
        return mm_fail(err, errlen, PROTO_TRYAGAIN, "node %u: %llu+%llu is not in our chunks (yet)", id,
                       (unsigned long long)off, (unsigned long long)len);
    size_t at;
    int has = away_has(n->away, off, len, &at);
    if (back) {   /* lent ranges we do not hold as lent (taken back by an adoption, told twice): nothing */
        if (has && seg_alloc_unwithhold(n->alloc, off, len) == 0) {
            away_del(n->away, at);
            m->lent_back_bytes += len;
            /* The borrower dropped it at its remove, its readers' leases may
             * outlive that (and its allocator holds the range till then):
             * ours to place on a lease time later, so the chunk is not given
             * back and handed to it while it still holds the range. */
            obj_extent e = {id, off, len};
            obj_replica r = {1, &e};
            if (seg_alloc_reserve_at(n->alloc, off, len) == 0) mm_hold_replica(m, &r, now_ms + m->cfg.lease_ms, now_ms);
        }
        return PROTO_OK;
    }
    if (has) return PROTO_OK;
    if (away_overlaps(n->away, off, len) || away_add(n, off, len) != 0)
        return mm_fail(err, errlen, PROTO_ERR, "node %u: %llu+%llu is neither free nor one extent here", id,
                       (unsigned long long)off, (unsigned long long)len);
    m->alloc_changes++;
    return PROTO_OK;
}

void mm_lent_stats(const master_meta *m, uint64_t *away, uint64_t *back) {
    *away = 0;
    for (uint32_t i = 1; i <= mm_node_count(m); i++) {
        const mm_node *n = mm_node_view(m, i);
        if (n && n->away) *away += n->away->bytes;
    }
    *back = m->lent_back_bytes;
}

/* ---- claiming and releasing extents ---- */

int mm_extent_claim(mm_node *n, uint64_t off, uint64_t len) {
    if (in_others(n, off, len)) return seg_alloc_lend(n->alloc, off, len);
    size_t at;
    if (away_has(n->away, off, len, &at)) {   /* an object we gave away comes back (a move undone) */
        if (seg_alloc_unwithhold(n->alloc, off, len) != 0) return -1;
        away_del(n->away, at);
    }
    return seg_alloc_reserve_at(n->alloc, off, len);
}

void mm_extent_release(mm_node *n, uint64_t off, uint64_t len) {
    if (in_others(n, off, len)) (void)seg_alloc_unlend(n->alloc, off, len);
    else if (!away_overlaps(n->away, off, len)) (void)seg_alloc_release(n->alloc, off, len);
}

void mm_extent_given(mm_node *n, uint64_t off, uint64_t len) {
    if (in_others(n, off, len)) (void)seg_alloc_unlend(n->alloc, off, len);
}

proto_status mm_node_share(master_meta *m, uint32_t id, const proto_chunks *given, char *err, size_t errlen) {
    mm_node *n = mm_node_get(m, id);
    if (!n || !n->alloc) return mm_fail(err, errlen, PROTO_NODEDEAD, "node %u is not a member", id);
    if (!n->chunks) {   /* a fresh allocator: nothing is ours until given */
        n->chunks_free = UINT32_MAX;
        n->chunks_push = 0;
        n->chunks_need = 0;
        seg_alloc_stats st;
        seg_alloc_get_stats(n->alloc, &st);
        if (st.allocations || seg_alloc_withhold(n->alloc, 0, n->segment_size & ~(uint64_t)(MM_ALIGN - 1)) != 0)
            return mm_fail(err, errlen, PROTO_ERR, "node %u: its segment is in use already", id);
        n->chunks = xmalloc(sizeof *n->chunks);
        if (proto_chunks_init(n->chunks, n->segment_size, given->chunk_size) != 0) abort();
    }
    if (given->chunk_size != n->chunks->chunk_size || given->n != n->chunks->n)
        return mm_fail(err, errlen, PROTO_ERR, "node %u: chunks of %llu bytes, not %llu", id,
                       (unsigned long long)given->chunk_size, (unsigned long long)n->chunks->chunk_size);
    uint32_t added = 0;
    for (uint32_t i = 0; i < given->n; i++) {
        if (!proto_chunks_has(given, i) || proto_chunks_has(n->chunks, i)) continue;
        uint64_t off, len;
        chunk_range(n, i, &off, &len);
        if (len && seg_alloc_unwithhold(n->alloc, off, len) != 0) {
            log_warning("node %u: chunk %u was not withheld", id, i);
            continue;
        }
        proto_chunks_set(n->chunks, i, 1);
        added++;
    }
    if (added) {
        m->alloc_changes++;   /* room to place on: placement orders the nodes anew */
        m->space_freed++;     /* puts parked for room try again (put_wait.c) */
        m->repair_dirty = 1;
        log_info("node %u gave our group %u chunk(s), %u in all", id, added, proto_chunks_count(n->chunks));
    }
    return PROTO_OK;
}

void mm_node_chunks_advise(master_meta *m, uint32_t id, int may_give, uint32_t *want, proto_chunks *back) {
    mm_node *n = mm_node_get(m, id);
    *want = 0;
    if (!n || !n->alloc || !n->chunks || n->state != NODE_ALIVE) {
        if (n && n->chunks) proto_chunks_init(back, n->segment_size, n->chunks->chunk_size);
        return;
    }
    proto_chunks_init(back, n->segment_size, n->chunks->chunk_size);
    uint64_t cs = n->chunks->chunk_size;
    seg_alloc_stats st;
    seg_alloc_get_stats(n->alloc, &st);   /* our chunks only */
    uint64_t low = st.size / 4 > cs ? st.size / 4 : cs, need = n->chunks_need;
    n->chunks_need = 0;
    if (st.free < low || need) {   /* ask for room up to half of what we hold: growth doubles */
        uint64_t target = st.size / 2 > 2 * cs ? st.size / 2 : 2 * cs;
        uint64_t w = target > st.free ? (target - st.free + cs - 1) / cs : 0;
        uint64_t w_need = (need + cs - 1) / cs + 1;   /* a waiting put's, whatever the rest */
        if (w < w_need) w = w_need;
        *want = w > SHARE_MAX_WANT ? SHARE_MAX_WANT : (uint32_t)w;
        return;
    }
    /* Give one back only if half of what remains stays free (and two
     * chunks): we ask below a quarter, so a steady group neither asks nor
     * gives. */
    uint64_t keep = (st.size - cs) / 2 > 2 * cs ? (st.size - cs) / 2 : 2 * cs;
    if (!may_give || n->restore || proto_chunks_count(n->chunks) < 2 || st.free < cs + keep) return;
    for (uint32_t i = n->chunks->n; i-- > 0;) {
        uint64_t off, len;
        if (!proto_chunks_has(n->chunks, i)) continue;
        chunk_range(n, i, &off, &len);
        if (len && seg_alloc_withhold(n->alloc, off, len) != 0) continue;   /* something of ours is there */
        proto_chunks_set(n->chunks, i, 0);
        proto_chunks_set(back, i, 1);
        m->alloc_changes++;
        log_info("node %u: chunk %u given back (unused)", id, i);
        return;
    }
}

void mm_node_chunks_free(master_meta *m, uint32_t id, uint32_t free_chunks) {
    mm_node *n = mm_node_get(m, id);
    if (n && n->chunks) n->chunks_free = free_chunks;
}

int mm_node_may_grow(const mm_node *n) {
    return n->chunks && n->chunks_free > 0 && n->state == NODE_ALIVE && !n->restore;
}

int mm_node_grow(mm_node *n, uint64_t size) {
    if (!n || !n->alloc || !mm_node_may_grow(n)) return 0;
    n->chunks_push = 1;
    if (n->chunks_need < size) n->chunks_need = size;
    return 1;
}

int mm_chunks_ahead(master_meta *m, uint64_t size) {
    int any = 0;
    for (uint32_t i = 0; i < m->nnodes; i++) any |= mm_node_grow(m->nodes[i], size);
    return any;
}
