/* standalone/seg_warm.c - see seg_warm.h.
 *
 * Per chunk, three passes that each pay one kind of first-use cost:
 * MADV_POPULATE_WRITE allocates the pages without writing them, a pass
 * through a pipe (memwarm_kernel) warms them for the kernel's copies
 * (recv of a SET, send of a GET), and one load per page warms them for
 * this process's own reads and writes (checksums). None of them changes
 * a byte, so racing a request that writes the same page is harmless. */
#include "standalone/seg_warm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/log.h"
#include "core/memwarm.h"
#include "core/util.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define WARM_CHUNK (2u << 20)   /* progress granularity; a huge page */
#define WARM_NICE 10            /* gives way to the event loop and clients */
/* Kept warm past the store's highest reservation: what it reserved over
 * the last WARM_RATE_MS, scaled to WARM_AHEAD_MS, within [MIN, MAX],
 * shrinking by at most 1/WARM_AHEAD_DECAY per WARM_RATE_MS. A
 * stream of 1 MiB SETs gets the whole 64 MiB at once; one of 64 B SETs
 * (tens of MB/s) a few MiB, so the warmer no longer takes the CPU the
 * loop and its clients need to warm pages they will not touch for
 * seconds (a fixed 64 MiB window cost 25-40 ms of CPU in each fresh
 * 400k-SET run, a tenth of the loop's own). */
#define WARM_AHEAD_MIN (4ull << 20)
#define WARM_AHEAD_MAX (64ull << 20)
#define WARM_AHEAD_MS 100
#define WARM_AHEAD_DECAY 16
#define WARM_RATE_MS 10
#define WARM_BUSY_MS 200        /* requests this recent: the server is busy */
#define WARM_NAP_US 10000       /* while busy: demand, quiet and stop are seen this soon */

struct seg_warmer {
    uint8_t *base;
    size_t len;
    pthread_t thread;
    atomic_int stop;
    atomic_uint_least64_t need;   /* seg_warm_note: the store's highest reservation end */
    atomic_uint_least64_t served; /* and the requests it served */
    atomic_uint_least64_t done;   /* bytes warmed, from base upward */
    atomic_uint_least64_t took_ms;
    /* The warmer thread's own: the served count it saw last, and when
     * that count last moved; the window ahead, and the need and time it
     * was last sized from. */
    uint64_t seen;
    uint64_t busy_ms;
    uint64_t ahead;
    uint64_t rate_need;
    uint64_t rate_ms;
};

/* The window for the store's recent rate of reservation (WARM_AHEAD_*). */
static uint64_t ahead_of(seg_warmer *w, uint64_t need) {
    uint64_t now = mono_ms();
    if (now - w->rate_ms < WARM_RATE_MS) return w->ahead;
    uint64_t grew = need > w->rate_need ? need - w->rate_need : 0;
    uint64_t ahead = grew / (now - w->rate_ms) * WARM_AHEAD_MS;
    /* Up at once, down slowly: large values come in bursts (50 clients'
     * 1 MiB SETs), and a window sized by one quiet 10 ms let the loop
     * outrun the warmer. */
    uint64_t decayed = w->ahead - w->ahead / WARM_AHEAD_DECAY;
    if (ahead < decayed) ahead = decayed;
    w->ahead = ahead < WARM_AHEAD_MIN ? WARM_AHEAD_MIN : ahead > WARM_AHEAD_MAX ? WARM_AHEAD_MAX : ahead;
    w->rate_need = need;
    w->rate_ms = now;
    return w->ahead;
}

/* Whether warming [0, off) leaves the store's reservations less than
 * the window ahead of it. */
static int wanted(seg_warmer *w, size_t off) {
    uint64_t need = atomic_load_explicit(&w->need, memory_order_relaxed);
    return need + ahead_of(w, need) > off;
}

/* Whether no request came for WARM_BUSY_MS. */
static int quiet(seg_warmer *w) {
    uint64_t served = atomic_load_explicit(&w->served, memory_order_relaxed), now = mono_ms();
    if (served != w->seen) {
        w->seen = served;
        w->busy_ms = now;
    }
    return now - w->busy_ms >= WARM_BUSY_MS;
}

static void warm_chunk(uint8_t *p, size_t n) {
    (void)madvise(p, n, MADV_POPULATE_WRITE);   /* older kernels: the touch faults them */
    (void)memwarm_kernel(p, n);
    memwarm_touch(p, n);
}

static void *warm_main(void *arg) {
    seg_warmer *w = arg;
    uint64_t t0 = mono_ms();
    w->ahead = WARM_AHEAD_MIN;
    w->rate_ms = t0;
    /* Linux nice is per thread: only this one gives way. */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), WARM_NICE);
    for (size_t off = 0; off < w->len && !atomic_load(&w->stop);) {
        /* Past the window while requests come in: pages nobody needs yet
         * wait for a quiet moment. Even niced, a third runnable thread
         * took CPU from the loop and its clients on a 2-core machine. */
        if (!wanted(w, off) && !quiet(w)) {
            usleep(WARM_NAP_US);
            continue;
        }
        size_t n = w->len - off < WARM_CHUNK ? w->len - off : WARM_CHUNK;
        warm_chunk(w->base + off, n);
        off += n;
        atomic_store(&w->done, off);
    }
    if (atomic_load(&w->done) == w->len) {
        uint64_t ms = mono_ms() - t0;
        atomic_store(&w->took_ms, ms ? ms : 1);
        log_notice("segment: %zu bytes warmed in %llu ms", w->len, (unsigned long long)ms);
    }
    return NULL;
}

seg_warmer *seg_warm_start(void *base, size_t len, char *err, size_t errlen) {
    seg_warmer *w = xcalloc(1, sizeof *w);
    w->base = base;
    w->len = len;
    int rc = pthread_create(&w->thread, NULL, warm_main, w);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the segment warmer: %s", strerror(rc));
        free(w);
        return NULL;
    }
    return w;
}

/* One writer (the loop): plain loads and stores, no read-modify-write. */
void seg_warm_note(seg_warmer *w, uint64_t end) {
    if (!w) return;
    uint64_t served = atomic_load_explicit(&w->served, memory_order_relaxed);
    atomic_store_explicit(&w->served, served + 1, memory_order_relaxed);
    if (end > atomic_load_explicit(&w->need, memory_order_relaxed))
        atomic_store_explicit(&w->need, end, memory_order_relaxed);
}

uint64_t seg_warm_bytes(const seg_warmer *w) { return atomic_load(&((seg_warmer *)w)->done); }

uint64_t seg_warm_ms(const seg_warmer *w) { return atomic_load(&((seg_warmer *)w)->took_ms); }

void seg_warm_stop(seg_warmer *w) {
    if (!w) return;
    atomic_store(&w->stop, 1);
    pthread_join(w->thread, NULL);
    free(w);
}
