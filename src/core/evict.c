/* core/evict.c - victim choice and watermarks for garbage collection
 * (see evict.h). */
#include "core/evict.h"

#include "core/util.h"

#define EVICT_SAMPLES 16    /* eligible objects compared per pick, as Redis's maxmemory-samples */
#define EVICT_VISITS  256   /* buckets a sample may visit before a full pass */

static const char *const policy_names[] = {"noeviction", "allkeys-lru", "allkeys-random"};

const char *evict_policy_name(evict_policy p) {
    return (unsigned)p < sizeof policy_names / sizeof policy_names[0] ? policy_names[p] : "unknown";
}

void evictor_init(evictor *e, evict_policy p, unsigned high_pct, unsigned low_pct) {
    *e = (evictor){.policy = p, .high_pct = high_pct, .low_pct = low_pct};
    e->rng = mono_us() ^ (uint64_t)(uintptr_t)e ^ 0x9e3779b97f4a7c15ULL;
    if (e->rng == 0) e->rng = 1;
}

static uint64_t pct_of(uint64_t total, unsigned pct) {
    return (uint64_t)((unsigned __int128)total * pct / 100);
}

uint64_t evictor_excess(const evictor *e, uint64_t used, uint64_t total) {
    if (!evictor_on(e) || total == 0 || used <= pct_of(total, e->high_pct)) return 0;
    return used - pct_of(total, e->low_pct);
}

/* xorshift64*: the sampling start, not security. */
static uint64_t next_rand(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dULL;
}

typedef struct sample {
    const evictor *e;
    uint64_t now;
    evict_ok_fn *ok;
    void *ctx;
    object *best;
    int best_rank;
    uint64_t best_key;
    unsigned seen;
} sample;

/* 0: expiry hint passed; 1: no expiry; 2: expiry still ahead. */
static int rank_of(const object *o, uint64_t now) {
    if (o->expire_ms == 0) return 1;
    return o->expire_ms <= now ? 0 : 2;
}

static void consider(object *o, void *arg) {
    sample *s = arg;
    if (o->state != OBJ_COMPLETE || o->pins > 0) return;
    if (s->ok && !s->ok(o, s->ctx)) return;
    s->seen++;
    int rank = rank_of(o, s->now);
    /* Expired: the longest expired first. Random: the first sampled. */
    uint64_t key = rank == 0 ? o->expire_ms : s->e->policy == EVICT_LRU ? o->atime_ms : 0;
    if (!s->best || rank < s->best_rank || (rank == s->best_rank && key < s->best_key)) {
        s->best = o;
        s->best_rank = rank;
        s->best_key = key;
    }
}

static uint64_t scan_objtable(void *t, uint64_t cursor, objtable_scan_fn *fn, void *ctx) {
    return objtable_scan(t, cursor, fn, ctx);
}

object *evictor_pick(evictor *e, objtable *t, uint64_t now_ms, evict_ok_fn *ok, void *ctx) {
    return evictor_pick_in(e, scan_objtable, t, objtable_size(t), now_ms, ok, ctx);
}

object *evictor_pick_in(evictor *e, evict_scan_fn *scan, void *t, size_t size, uint64_t now_ms,
                        evict_ok_fn *ok, void *ctx) {
    if (!evictor_on(e) || size == 0) return NULL;
    sample s = {.e = e, .now = now_ms, .ok = ok, .ctx = ctx};
    uint64_t cur = next_rand(&e->rng);
    for (unsigned v = 0; v < EVICT_VISITS && s.seen < EVICT_SAMPLES; v++)
        cur = scan(t, cur, consider, &s);   /* 0 after the last bucket: wraps */
    /* Few eligible objects (most leased or pending): look at every one. */
    cur = 0;
    while (!s.best) {
        cur = scan(t, cur, consider, &s);
        if (cur == 0) break;
    }
    if (!s.best) return NULL;
    e->evicted++;
    if (s.best_rank == 0) e->evicted_expired++;
    return s.best;
}
