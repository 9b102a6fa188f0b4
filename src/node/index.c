/* node/index.c - see index.h. A chained hash table that doubles when it
 * is as full as it is wide; extents are the whole replica's, with ours
 * marked by node 0 (so the index survives an id change). */
#include "node/index.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/crc32c.h"
#include "core/siphash.h"
#include "core/util.h"
#include "core/workpool.h"
#include "node/journal.h"

#define IX_SELF 0              /* node id of our own extents in an entry */
#define IX_MIN_BUCKETS 1024
#define IX_BYTES_PER_ENTRY 64  /* the master's extent alignment: one entry per unit */
/* What proving an entry costs the scrub's budget besides its bytes: a
 * small object's chain link, extents and bytes are cache misses each, so
 * at its bytes alone a scrub of 64-byte values would walk a million
 * entries a second (a busy node's core) for 8 MB/s. */
#define IX_SCRUB_ENTRY_COST 4096

typedef struct ix_entry {
    struct ix_entry *next;
    uint64_t hash, size;
    uint32_t crc, want, nextents, nmine;
    obj_extent *ext;
    uint32_t keylen;
    uint16_t nslices;      /* slice CRCs, packed after the extents (0: none) */
    uint8_t slice_shift;   /* their slice size, log2 */
    uint8_t proved;        /* just proved by node_index_prove_all: its next report need not again */
    char key[];
} ix_entry;

struct node_index {
    pthread_mutex_t mu;
    const uint8_t *base;
    uint64_t seg_size, max_entries;
    ix_entry **buckets;
    size_t nbuckets;
    uint8_t seed[SIPHASH_KEY_LEN];
    node_index_stats st;
    node_journal *jr;          /* NULL: the index dies with the process */
};

node_index *node_index_create(const void *seg_base, uint64_t seg_size) {
    node_index *ix = xcalloc(1, sizeof *ix);
    pthread_mutex_init(&ix->mu, NULL);
    ix->base = seg_base;
    ix->seg_size = seg_size;
    ix->max_entries = seg_size / IX_BYTES_PER_ENTRY + 1;
    ix->nbuckets = IX_MIN_BUCKETS;
    ix->buckets = xcalloc(ix->nbuckets, sizeof *ix->buckets);
    if (random_bytes(ix->seed, sizeof ix->seed) != 0) memset(ix->seed, 0x5a, sizeof ix->seed);
    return ix;
}

static uint64_t entry_bytes(const ix_entry *e) {
    return sizeof *e + e->keylen + e->nextents * sizeof *e->ext + 4 * (uint64_t)e->nslices;
}

/* e's slice CRCs as the wire has them (count 0: none). */
static proto_slices_ref entry_slices(const ix_entry *e) {
    if (!e->nslices) return (proto_slices_ref){0, 0, NULL};
    return (proto_slices_ref){1ULL << e->slice_shift, e->nslices, (const uint8_t *)(e->ext + e->nextents)};
}

static void entry_free(node_index *ix, ix_entry *e) {
    ix->st.objects--;
    ix->st.extents -= e->nmine;
    ix->st.bytes -= entry_bytes(e);
    free(e);
}

/* ---- the log of what we hold (journal.h): every change, under the lock ---- */

static void log_hold(node_index *ix, const ix_entry *e) {
    if (!ix->jr) return;
    proto_slices_ref sl = entry_slices(e);
    node_journal_hold(ix->jr, e->key, e->keylen, e->size, e->crc, e->want, e->ext, e->nextents, &sl);
}

static void log_drop(node_index *ix, const void *key, size_t keylen) {
    if (ix->jr) node_journal_drop(ix->jr, key, keylen);
}

static void snapshot_locked(node_index *ix);

/* After each change under the lock, before anyone is told it was made. */
static void log_flush(node_index *ix) {
    if (ix->jr && node_journal_flush(ix->jr, ix->st.bytes)) snapshot_locked(ix);
}

static void clear_locked(node_index *ix) {
    for (size_t b = 0; b < ix->nbuckets; b++) {
        for (ix_entry *e = ix->buckets[b], *next; e; e = next) {
            next = e->next;
            entry_free(ix, e);
        }
        ix->buckets[b] = NULL;
    }
}

void node_index_clear(node_index *ix) {
    pthread_mutex_lock(&ix->mu);
    clear_locked(ix);
    if (ix->jr) snapshot_locked(ix);   /* an empty log */
    pthread_mutex_unlock(&ix->mu);
}

void node_index_clear_where(node_index *ix, int (*mine)(uint64_t seg_off, void *ctx), void *ctx) {
    pthread_mutex_lock(&ix->mu);
    for (size_t b = 0; b < ix->nbuckets; b++) {
        for (ix_entry **pp = &ix->buckets[b], *e; (e = *pp);) {
            int hit = 0;
            for (uint32_t k = 0; k < e->nextents && !hit; k++)
                hit = e->ext[k].node == IX_SELF && mine(e->ext[k].offset, ctx);
            if (!hit) {
                pp = &e->next;
                continue;
            }
            *pp = e->next;
            log_drop(ix, e->key, e->keylen);
            entry_free(ix, e);
        }
    }
    log_flush(ix);
    pthread_mutex_unlock(&ix->mu);
}

/* The log rewritten as one hold per entry (a new file renamed over it). */
static void snapshot_locked(node_index *ix) {
    node_journal_rewrite_begin(ix->jr);
    for (size_t b = 0; b < ix->nbuckets; b++)
        for (const ix_entry *e = ix->buckets[b]; e; e = e->next) log_hold(ix, e);
    node_journal_rewrite_end(ix->jr);
}

void node_index_attach(node_index *ix, node_journal *jr) {
    pthread_mutex_lock(&ix->mu);
    ix->jr = jr;
    pthread_mutex_unlock(&ix->mu);
}

void node_index_free(node_index *ix) {
    if (!ix) return;
    clear_locked(ix);
    free(ix->buckets);
    pthread_mutex_destroy(&ix->mu);
    free(ix);
}

/* The link pointing at key's entry (or at the NULL ending its chain). */
static ix_entry **find(node_index *ix, const void *key, size_t keylen, uint64_t h) {
    ix_entry **p = &ix->buckets[h & (ix->nbuckets - 1)];
    for (; *p; p = &(*p)->next)
        if ((*p)->hash == h && (*p)->keylen == keylen && memcmp((*p)->key, key, keylen) == 0) break;
    return p;
}

/* How far ahead lookups and rehashes start their cache misses: the
 * bucket (or chain head) D steps ahead, then, its line cached by then,
 * the next link D/2 steps ahead, so the current step finds both cached.
 * A node indexes every small put: misses one at a time were most of its
 * control thread. A rehash step is shorter than a lookup: it looks
 * further ahead. */
#define IX_AHEAD 8
#define IX_GROW_AHEAD 32

static ix_entry *bucket_ahead(const node_index *ix, size_t i) {
    return i < ix->nbuckets ? ix->buckets[i] : NULL;
}

static void grow(node_index *ix) {
    size_t n = ix->nbuckets * 2;
    ix_entry **b = xcalloc(n, sizeof *b);
    for (size_t i = 0; i < ix->nbuckets; i++) {
        ix_entry *far = bucket_ahead(ix, i + IX_GROW_AHEAD), *near = bucket_ahead(ix, i + IX_GROW_AHEAD / 2);
        if (far) __builtin_prefetch(far);
        if (near && near->next) __builtin_prefetch(near->next);
        for (ix_entry *e = ix->buckets[i], *next; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    free(ix->buckets);
    ix->buckets = b;
    ix->nbuckets = n;
}

/* Where an entry's extents start in its block: after the key, aligned. */
static size_t ext_at(size_t keylen) {
    return (sizeof(ix_entry) + keylen + _Alignof(obj_extent) - 1) & ~(_Alignof(obj_extent) - 1);
}

/* A copy of rep with our extents marked, and of the slice CRCs sl (NULL
 * or count 0: none), in one block with the entry (a node indexes every
 * small put: one allocation each, not two); NULL if none is ours or one
 * of ours lies outside the segment. */
static ix_entry *entry_new(node_index *ix, const void *key, size_t keylen, const obj_replica *rep,
                           const proto_slices_ref *sl, uint32_t self) {
    int sliced = sl && sl->count && sl->count <= PROTO_MAX_SLICES && sl->size && !(sl->size & (sl->size - 1));
    size_t at = ext_at(keylen), nsl = sliced ? sl->count : 0;
    ix_entry *e = xmalloc(at + rep->nextents * sizeof *rep->extents + 4 * nsl);
    memset(e, 0, sizeof *e);
    e->ext = (obj_extent *)((char *)e + at);
    memcpy(e->ext, rep->extents, rep->nextents * sizeof *rep->extents);
    e->nextents = rep->nextents;
    if (nsl) {
        memcpy(e->ext + e->nextents, sl->crc, 4 * nsl);
        e->nslices = (uint16_t)nsl;
        e->slice_shift = (uint8_t)__builtin_ctzll(sl->size);
    }
    for (uint32_t i = 0; i < e->nextents; i++) {
        obj_extent *x = &e->ext[i];
        if (x->node != self) continue;
        x->node = IX_SELF;
        e->nmine++;
        if (x->offset > ix->seg_size || x->length > ix->seg_size - x->offset) e->nmine = 0, i = e->nextents;
    }
    if (e->nmine == 0) {
        free(e);
        return NULL;
    }
    memcpy(e->key, key, keylen);
    e->keylen = (uint32_t)keylen;
    return e;
}

/* One hold or drop, prepared outside the lock: hashed, a hold's entry
 * built (NULL: refused, or a drop). */
typedef struct ix_op {
    uint64_t hash;
    const void *key;          /* the caller's until applied */
    size_t keylen;
    ix_entry *e;
    int drop;
} ix_op;

struct node_index_batch {
    size_t n;
    ix_op op[NODE_INDEX_BATCH];
};

static ix_op op_hold(node_index *ix, const void *key, size_t keylen, uint64_t size, uint32_t crc, uint32_t want,
                     const obj_replica *rep, const proto_slices_ref *sl, uint32_t self) {
    ix_op op = {siphash24(key, keylen, ix->seed), key, keylen, entry_new(ix, key, keylen, rep, sl, self), 0};
    if (op.e) {
        op.e->hash = op.hash;
        op.e->size = size;
        op.e->crc = crc;
        op.e->want = want;
    }
    return op;
}

static ix_op op_drop(node_index *ix, const void *key, size_t keylen) {
    return (ix_op){siphash24(key, keylen, ix->seed), key, keylen, NULL, 1};
}

/* op under the lock: the key's entry replaced (the newer note wins) or
 * dropped; -1 if a hold was refused. */
static int op_apply(node_index *ix, ix_op *op) {
    ix->st.applied++;
    ix_entry **p = find(ix, op->key, op->keylen, op->hash);
    if (*p) {
        ix_entry *old = *p;
        *p = old->next;
        entry_free(ix, old);
    }
    if (op->drop) {
        log_drop(ix, op->key, op->keylen);
        return 0;
    }
    ix_entry *e = op->e;
    op->e = NULL;
    if (!e || ix->st.objects >= ix->max_entries) {
        ix->st.refused++;
        free(e);
        log_drop(ix, op->key, op->keylen);
        return -1;
    }
    log_hold(ix, e);
    if (ix->st.objects >= ix->nbuckets) grow(ix);
    p = &ix->buckets[e->hash & (ix->nbuckets - 1)];
    e->next = *p;
    *p = e;
    ix->st.objects++;
    ix->st.extents += e->nmine;
    ix->st.bytes += entry_bytes(e);
    return 0;
}

static void prefetch_bucket(const node_index *ix, uint64_t hash) {
    __builtin_prefetch(&ix->buckets[hash & (ix->nbuckets - 1)]);
}

static void prefetch_chain(const node_index *ix, uint64_t hash) {
    const ix_entry *e = ix->buckets[hash & (ix->nbuckets - 1)];
    if (e) __builtin_prefetch(e);
}

/* ops in order under one lock, their lookups prefetched ahead (a grow
 * midway only makes some prefetches miss). */
static void ops_apply(node_index *ix, ix_op *op, size_t n) {
    pthread_mutex_lock(&ix->mu);
    for (size_t i = 0; i < n && i < IX_AHEAD; i++) prefetch_bucket(ix, op[i].hash);
    for (size_t i = 0; i < n; i++) {
        if (i + IX_AHEAD < n) prefetch_bucket(ix, op[i + IX_AHEAD].hash);
        if (i + IX_AHEAD / 2 < n) prefetch_chain(ix, op[i + IX_AHEAD / 2].hash);
        op_apply(ix, &op[i]);
    }
    log_flush(ix);
    pthread_mutex_unlock(&ix->mu);
}

int node_index_hold(node_index *ix, const void *key, size_t keylen, uint64_t size, uint32_t crc,
                    uint32_t want, const obj_replica *rep, const proto_slices_ref *sl, uint32_t self) {
    ix_op op = op_hold(ix, key, keylen, size, crc, want, rep, sl, self);
    pthread_mutex_lock(&ix->mu);
    int rc = op_apply(ix, &op);
    log_flush(ix);
    pthread_mutex_unlock(&ix->mu);
    return rc;
}

void node_index_drop(node_index *ix, const void *key, size_t keylen) {
    ix_op op = op_drop(ix, key, keylen);
    pthread_mutex_lock(&ix->mu);
    op_apply(ix, &op);
    log_flush(ix);
    pthread_mutex_unlock(&ix->mu);
}

node_index_batch *node_index_batch_new(void) { return xcalloc(1, sizeof(node_index_batch)); }

void node_index_batch_free(node_index_batch *b) {
    if (!b) return;
    for (size_t i = 0; i < b->n; i++) free(b->op[i].e);
    free(b);
}

void node_index_batch_hold(node_index *ix, node_index_batch *b, const void *key, size_t keylen, uint64_t size,
                           uint32_t crc, uint32_t want, const obj_replica *rep, const proto_slices_ref *sl,
                           uint32_t self) {
    if (b->n == NODE_INDEX_BATCH) node_index_commit(ix, b);
    b->op[b->n++] = op_hold(ix, key, keylen, size, crc, want, rep, sl, self);
}

size_t node_index_extents(node_index *ix, const void *key, size_t keylen, uint32_t self, obj_extent *out,
                          size_t max) {
    pthread_mutex_lock(&ix->mu);
    const ix_entry *e = *find(ix, key, keylen, siphash24(key, keylen, ix->seed));
    size_t n = e ? e->nextents : 0;
    for (size_t i = 0; i < n && i < max; i++) {
        out[i] = e->ext[i];
        if (out[i].node == IX_SELF) out[i].node = self;
    }
    pthread_mutex_unlock(&ix->mu);
    return n;
}

void node_index_batch_drop(node_index *ix, node_index_batch *b, const void *key, size_t keylen) {
    if (b->n == NODE_INDEX_BATCH) node_index_commit(ix, b);
    b->op[b->n++] = op_drop(ix, key, keylen);
}

void node_index_commit(node_index *ix, node_index_batch *b) {
    ops_apply(ix, b->op, b->n);
    b->n = 0;
}

/* An object wholly here must still match its CRC; one spread over other
 * nodes cannot be proved alone (readers verify it whole). */
static int proved(const node_index *ix, const ix_entry *e) {
    if (e->nmine != e->nextents) return 1;
    uint32_t crc = 0;
    for (uint32_t i = 0; i < e->nextents; i++)
        crc = crc32c(crc, ix->base + e->ext[i].offset, e->ext[i].length);
    return crc == e->crc;
}

/* Our extents of e into out (room for all of them), with object offsets;
 * the first carries the slice CRCs. */
static size_t entry_extents(const ix_entry *e, node_index_extent *out) {
    size_t n = 0;
    uint64_t pos = 0;
    for (uint32_t i = 0; i < e->nextents; i++) {
        const obj_extent *x = &e->ext[i];
        if (x->node == IX_SELF) {
            out[n] = (node_index_extent){e->key, e->keylen, e->size, e->crc, e->want, pos, x->offset, x->length,
                                         {0, 0, NULL}};
            if (n++ == 0) out[0].slices = entry_slices(e);
        }
        pos += x->length;
    }
    return n;
}

/* Whether e (proved or dropped first) goes into out: an unproved entry
 * is dropped (*p moves on), a proved one taken if it fits. */
static int take_entry(node_index *ix, ix_entry **p, node_index_extent *out, size_t *n, size_t max,
                      size_t *bytes, size_t max_bytes) {
    ix_entry *e = *p;
    if (!e->proved && !proved(ix, e)) {
        ix->st.checksum_errors++;
        *p = e->next;
        log_drop(ix, e->key, e->keylen);
        entry_free(ix, e);
        return 1;
    }
    size_t cost = (size_t)e->nmine * e->keylen + 4 * (size_t)e->nslices;
    if (*n > 0 && (*n + e->nmine > max || *bytes + cost > max_bytes)) return 0;
    *n += entry_extents(e, out + *n);
    *bytes += cost;
    e->proved = 0;
    return 1;
}

/* The link at entry `walked` of bucket b (or its chain's end). */
static ix_entry **seek(node_index *ix, uint64_t b, uint64_t walked) {
    ix_entry **p = &ix->buckets[b];
    for (uint64_t k = 0; *p && k < walked; k++) p = &(*p)->next;
    return p;
}

#define IX_REPORT_AHEAD 16   /* buckets: an entry fetched this far ahead, the bytes it proves half as far */

/* The report walk's misses, started a few buckets ahead: a bucket's
 * first entry (its head and the line its extents may start in), then
 * the segment bytes its first extent proves. Chains are short (the
 * table doubles when it is as full as it is wide). */
static void prefetch_report(const node_index *ix, uint64_t b) {
    const ix_entry *far = b + IX_REPORT_AHEAD < ix->nbuckets ? ix->buckets[b + IX_REPORT_AHEAD] : NULL;
    if (far) {
        __builtin_prefetch(far);
        __builtin_prefetch((const char *)far + 64);
    }
    const ix_entry *near = b + IX_REPORT_AHEAD / 2 < ix->nbuckets ? ix->buckets[b + IX_REPORT_AHEAD / 2] : NULL;
    if (near && near->nextents && near->ext[0].offset < ix->seg_size) __builtin_prefetch(ix->base + near->ext[0].offset);
}

size_t node_index_report(node_index *ix, uint64_t *cursor, node_index_extent *out, size_t max,
                         size_t max_key_bytes) {
    size_t n = 0, bytes = 0;
    pthread_mutex_lock(&ix->mu);
    uint64_t b = *cursor >> 32, walked = (uint32_t)*cursor;   /* entries of bucket b done */
    int full = 0;
    for (; b < ix->nbuckets && !full; b += !full) {
        prefetch_report(ix, b);
        ix_entry **p = seek(ix, b, walked);
        while (*p && !full) {
            ix_entry *e = *p;
            full = !take_entry(ix, p, out, &n, max, &bytes, max_key_bytes);
            if (!full && *p == e) p = &e->next, walked++;
        }
        if (!full) walked = 0;
    }
    *cursor = b < ix->nbuckets ? (b << 32 | walked) : 0;
    ix->st.reported += n;
    log_flush(ix);
    pthread_mutex_unlock(&ix->mu);
    return n;
}

/* ---- scrub ---- */

static uint64_t entry_len(const ix_entry *e) {
    uint64_t len = 0;
    for (uint32_t i = 0; i < e->nextents; i++) len += e->ext[i].length;
    return len;
}

static void mark(const ix_entry *e, node_index_mark *m) {
    m->key = xmemdup(e->key, e->keylen);
    m->keylen = e->keylen;
    m->crc = e->crc;
    m->size = e->size;
    m->seg_off = e->ext[0].offset;
}

uint64_t node_index_scrub(node_index *ix, uint64_t *cursor, uint64_t budget, node_index_mark *marks,
                          size_t *nmarks, size_t max) {
    uint64_t done = 0, spent = 0;
    pthread_mutex_lock(&ix->mu);
    uint64_t b = *cursor >> 32, walked = (uint32_t)*cursor;
    for (; b < ix->nbuckets && spent < budget; b += spent < budget) {
        for (ix_entry **p = seek(ix, b, walked); *p && spent < budget; p = &(*p)->next, walked++) {
            const ix_entry *e = *p;
            if (e->nmine != e->nextents) continue;   /* striped over other nodes: not ours to prove */
            done += entry_len(e);
            spent += entry_len(e) + IX_SCRUB_ENTRY_COST;
            if (!proved(ix, e) && *nmarks < max) mark(e, &marks[(*nmarks)++]);
        }
        if (spent < budget) walked = 0;
    }
    if (b >= ix->nbuckets) ix->st.scrub_passes++;
    *cursor = b < ix->nbuckets ? (b << 32 | walked) : 0;
    ix->st.scrub_bytes += done;
    pthread_mutex_unlock(&ix->mu);
    return done;
}

int node_index_confirm(node_index *ix, const node_index_mark *m) {
    uint64_t h = siphash24(m->key, m->keylen, ix->seed);
    pthread_mutex_lock(&ix->mu);
    ix_entry **p = find(ix, m->key, m->keylen, h);
    ix_entry *e = *p;
    int bad = e && e->crc == m->crc && e->size == m->size && e->nmine == e->nextents &&
              e->ext[0].offset == m->seg_off && !proved(ix, e);
    if (bad) {
        ix->st.checksum_errors++;
        *p = e->next;
        log_drop(ix, e->key, e->keylen);
        entry_free(ix, e);
        log_flush(ix);
    }
    pthread_mutex_unlock(&ix->mu);
    return bad;
}

void node_index_mark_free(node_index_mark *m) {
    free(m->key);
    m->key = NULL;
}

void node_index_get_stats(node_index *ix, node_index_stats *st) {
    pthread_mutex_lock(&ix->mu);
    *st = ix->st;
    pthread_mutex_unlock(&ix->mu);
}

/* ---- proving every entry at once (a restart) ---- */

/* An entry to prove and where its bytes start: proved in segment order,
 * the bytes stream past as one sequential read (in table order they
 * were a random 4 KiB at a time, at a tenth of memory speed). */
typedef struct prove_item {
    uint64_t off;
    ix_entry *e;
} prove_item;

static int by_offset(const void *a, const void *b) {
    uint64_t x = ((const prove_item *)a)->off, y = ((const prove_item *)b)->off;
    return (x > y) - (x < y);
}

typedef struct prove_job {
    const node_index *ix;
    prove_item *all;
    uint8_t *bad;
    size_t n;
    int parts;
} prove_job;

/* The entries (anywhere in the heap) are fetched IX_PROVE_AHEAD ahead,
 * then the first IX_PROVE_BYTES of an object's bytes IX_PROVE_NEAR
 * ahead, every line (objects need not be adjacent). */
#define IX_PROVE_AHEAD 8
#define IX_PROVE_NEAR 2
#define IX_PROVE_BYTES 8192

static void prefetch_object(const node_index *ix, const ix_entry *e) {
    const uint8_t *p = ix->base + e->ext[0].offset;
    uint64_t len = e->ext[0].length < IX_PROVE_BYTES ? e->ext[0].length : IX_PROVE_BYTES;
    for (uint64_t off = 0; off < len; off += 64) __builtin_prefetch(p + off);
}

static void prove_part(void *arg, int i) {
    prove_job *pj = arg;
    size_t from = pj->n * (size_t)i / (size_t)pj->parts, to = pj->n * (size_t)(i + 1) / (size_t)pj->parts;
    for (size_t k = from; k < to; k++) {
        if (k + IX_PROVE_AHEAD < to) {   /* the entry and the line its extents may start in */
            __builtin_prefetch(pj->all[k + IX_PROVE_AHEAD].e);
            __builtin_prefetch((const char *)pj->all[k + IX_PROVE_AHEAD].e + 64);
        }
        if (k + IX_PROVE_NEAR < to) prefetch_object(pj->ix, pj->all[k + IX_PROVE_NEAR].e);
        pj->bad[k] = !proved(pj->ix, pj->all[k].e);
    }
}

size_t node_index_prove_all(node_index *ix, struct workpool *wp, uint64_t *bytes) {
    pthread_mutex_lock(&ix->mu);
    prove_job pj = {ix, xmalloc((ix->st.objects + 1) * sizeof *pj.all), NULL, 0, 0};
    *bytes = 0;
    for (size_t b = 0; b < ix->nbuckets; b++)
        for (ix_entry *e = ix->buckets[b]; e; e = e->next) {
            if (e->nmine != e->nextents) continue;   /* striped over other nodes: readers prove it */
            pj.all[pj.n++] = (prove_item){e->ext[0].offset, e};
            *bytes += entry_len(e);
        }
    qsort(pj.all, pj.n, sizeof *pj.all, by_offset);
    pj.bad = xcalloc(pj.n + 1, 1);
    pj.parts = 4 * workpool_width(wp);   /* parts of unequal cost: whoever is free takes the next */
    workpool_run(wp, pj.parts, prove_part, &pj);
    size_t dropped = 0;
    for (size_t k = 0; k < pj.n; k++) {
        pj.all[k].e->proved = !pj.bad[k];
        if (!pj.bad[k]) continue;
        ix_entry *e = pj.all[k].e, **p = find(ix, e->key, e->keylen, e->hash);
        *p = e->next;
        log_drop(ix, e->key, e->keylen);
        ix->st.checksum_errors++;
        entry_free(ix, e);
        dropped++;
    }
    log_flush(ix);
    pthread_mutex_unlock(&ix->mu);
    free(pj.all);
    free(pj.bad);
    return dropped;
}
