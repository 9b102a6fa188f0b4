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
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/memwarm.h"
#include "core/util.h"
#include "standalone/heap_warm.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define WARM_CHUNK (2u << 20)   /* progress granularity; a huge page */
#define WARM_NICE 10            /* gives way to the event loop and clients */
/* Heap checks once the segment is warm: every 5 ms while the heap is
 * being used up, backing off to 200 ms while it is not (each check takes
 * the arena lock the event loop's mallocs need). */
#define HEAP_POLL_MIN_US 5000
#define HEAP_POLL_MAX_US 200000

struct seg_warmer {
    uint8_t *base;
    size_t len;
    pthread_t thread;
    atomic_int stop;
    pthread_mutex_t mu;           /* with wake: seg_warm_stop cuts a poll's sleep short */
    pthread_cond_t wake;
    atomic_uint_least64_t done;   /* bytes warmed, from base upward */
    atomic_uint_least64_t took_ms;
};

/* Sleeps us microseconds, or less if the warmer is being stopped. */
static void nap(seg_warmer *w, unsigned us) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (long)us * 1000;
    until.tv_sec += until.tv_nsec / 1000000000;
    until.tv_nsec %= 1000000000;
    pthread_mutex_lock(&w->mu);
    if (!atomic_load(&w->stop)) pthread_cond_timedwait(&w->wake, &w->mu, &until);
    pthread_mutex_unlock(&w->mu);
}

static void *warm_main(void *arg) {
    seg_warmer *w = arg;
    uint64_t t0 = mono_ms();
    /* Linux nice is per thread: only this one gives way. */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), WARM_NICE);
    for (size_t off = 0; off < w->len && !atomic_load(&w->stop);) {
        size_t n = w->len - off < WARM_CHUNK ? w->len - off : WARM_CHUNK;
        uint8_t *p = w->base + off;
        heap_warm_step();   /* small keys' metadata first: it is used at once */
        (void)madvise(p, n, MADV_POPULATE_WRITE);   /* older kernels: the touch faults them */
        (void)memwarm_kernel(p, n);
        memwarm_touch(p, n);
        off += n;
        atomic_store(&w->done, off);
    }
    if (atomic_load(&w->done) == w->len) {
        uint64_t ms = mono_ms() - t0;
        atomic_store(&w->took_ms, ms ? ms : 1);
        log_notice("segment: %zu bytes warmed in %llu ms", w->len, (unsigned long long)ms);
    }
    unsigned poll_us = HEAP_POLL_MIN_US;
    while (!atomic_load(&w->stop)) {
        if (heap_warm_step()) {
            poll_us = HEAP_POLL_MIN_US;
            continue;
        }
        nap(w, poll_us);
        poll_us = poll_us * 2 > HEAP_POLL_MAX_US ? HEAP_POLL_MAX_US : poll_us * 2;
    }
    return NULL;
}

seg_warmer *seg_warm_start(void *base, size_t len, char *err, size_t errlen) {
    seg_warmer *w = xcalloc(1, sizeof *w);
    w->base = base;
    w->len = len;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->wake, NULL);
    int rc = pthread_create(&w->thread, NULL, warm_main, w);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the segment warmer: %s", strerror(rc));
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return NULL;
    }
    return w;
}

uint64_t seg_warm_bytes(const seg_warmer *w) { return atomic_load(&((seg_warmer *)w)->done); }

uint64_t seg_warm_ms(const seg_warmer *w) { return atomic_load(&((seg_warmer *)w)->took_ms); }

void seg_warm_stop(seg_warmer *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    atomic_store(&w->stop, 1);
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
