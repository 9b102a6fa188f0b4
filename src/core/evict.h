/* core/evict.h - opt-in garbage collection: when to collect and which
 * object goes.
 *
 * Values are write-once, but with a policy other than noeviction a stored
 * pair may be collected so a full store keeps accepting puts. The same
 * evictor serves the standalone store (one segment) and the master (the
 * whole cluster): the owner says how full it is and which objects it may
 * let go (e.g. none under a read lease), the evictor picks the victim,
 * the owner frees it as on a remove.
 *
 * Victim choice, like Redis's approximated LRU: a sample of objects from a
 * random point of the table; an expired object (SET EX/PX hint) wins, then
 * objects without an expiry, then unexpired ones; within a rank the least
 * recently used (allkeys-lru) or the first sampled (allkeys-random). */
#ifndef MKV_EVICT_H
#define MKV_EVICT_H

#include <stdint.h>

#include "core/objtable.h"

/* In the order of the config names (noeviction, allkeys-lru, allkeys-random). */
typedef enum evict_policy { EVICT_NONE = 0, EVICT_LRU = 1, EVICT_RANDOM = 2 } evict_policy;

typedef struct evictor {
    evict_policy policy;
    unsigned high_pct, low_pct;  /* start collecting above high, stop at low */
    uint64_t rng;                /* sampling state */
    uint64_t evicted;            /* objects collected so far */
    uint64_t evicted_expired;    /* of which their expiry hint had passed */
} evictor;

/* Owner's veto: 1 if o may be collected now (it is COMPLETE and unpinned
 * already; the owner adds e.g. "no read lease"). NULL accepts all. */
typedef int evict_ok_fn(const object *o, void *ctx);

void evictor_init(evictor *e, evict_policy p, unsigned high_pct, unsigned low_pct);
static inline int evictor_on(const evictor *e) { return e->policy != EVICT_NONE; }
const char *evict_policy_name(evict_policy p);

/* Bytes to collect now: 0 below the high watermark (or with GC off),
 * else what brings used down to the low watermark. */
uint64_t evictor_excess(const evictor *e, uint64_t used, uint64_t total);

/* The next victim, or NULL if no object may go. Counts it in evicted
 * (the caller must then free it). */
object *evictor_pick(evictor *e, objtable *t, uint64_t now_ms, evict_ok_fn *ok, void *ctx);
/* The same over any table of objects with a SCAN-like walk (cursor 0
 * starts, 0 returned ends; any other cursor is a place to start from)
 * and size objects. */
typedef uint64_t evict_scan_fn(void *table, uint64_t cursor, objtable_scan_fn *fn, void *ctx);
object *evictor_pick_in(evictor *e, evict_scan_fn *scan, void *table, size_t size, uint64_t now_ms,
                        evict_ok_fn *ok, void *ctx);

#endif
