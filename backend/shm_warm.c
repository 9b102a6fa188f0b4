/* backend/shm_warm.c - see shm_warm.h. */
#include "backend/shm_warm.h"

#include <stdlib.h>
#include <sys/mman.h>

#include "core/memwarm.h"
#include "core/util.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

struct shm_warm {
    char *base;
    uint64_t size;
    uint64_t nchunks;
    uint64_t *bits;           /* bit i: chunk i is warm; set once, with release */
    uint64_t nwarm;           /* chunks warm (atomic) */
    uint64_t hint;            /* 1 + a chunk a transfer found cold, 0 = none (atomic) */
    uint64_t cursor;          /* the stepping thread's: no chunk below it is cold */
};

shm_warm *shm_warm_new(char *base, uint64_t size) {
    shm_warm *w = xcalloc(1, sizeof *w);
    w->base = base;
    w->size = size;
    w->nchunks = (size + SHM_WARM_CHUNK - 1) / SHM_WARM_CHUNK;
    w->bits = xcalloc((size_t)(w->nchunks + 63) / 64 + 1, sizeof *w->bits);
    return w;
}

void shm_warm_free(shm_warm *w) {
    if (!w) return;
    free(w->bits);
    free(w);
}

static int chunk_warm(const shm_warm *w, uint64_t i) {
    return (__atomic_load_n(&w->bits[i / 64], __ATOMIC_ACQUIRE) >> (i % 64)) & 1;
}

int shm_warm_ready(shm_warm *w, uint64_t off, uint64_t len) {
    if (len == 0 || off > w->size || len > w->size - off) return 0;
    if (__atomic_load_n(&w->nwarm, __ATOMIC_ACQUIRE) == w->nchunks) return 1;
    for (uint64_t i = off / SHM_WARM_CHUNK, last = (off + len - 1) / SHM_WARM_CHUNK; i <= last; i++) {
        if (!chunk_warm(w, i)) {
            __atomic_store_n(&w->hint, i + 1, __ATOMIC_RELAXED);
            return 0;
        }
    }
    return 1;
}

/* The chunk to warm next: the hinted one if still cold (*asked set),
 * else the first cold one from the cursor up; nchunks when none is left. */
static uint64_t next_cold(shm_warm *w, int sweep, int *asked) {
    uint64_t h = __atomic_exchange_n(&w->hint, 0, __ATOMIC_RELAXED);
    *asked = h && h <= w->nchunks && !chunk_warm(w, h - 1);
    if (*asked) return h - 1;
    if (!sweep) return w->nchunks;
    while (w->cursor < w->nchunks && chunk_warm(w, w->cursor)) w->cursor++;
    return w->cursor;
}

/* MADV_POPULATE_WRITE maps the pages writable (saving the kernel's fault
 * per page; an older kernel without it leaves that to the loads), then a
 * load per page pays this process's trap per page. */
int shm_warm_step(shm_warm *w, int sweep) {
    int asked;
    uint64_t i = next_cold(w, sweep, &asked);
    if (i == w->nchunks) return SHM_WARM_NONE;
    uint64_t off = i * SHM_WARM_CHUNK;
    size_t len = (size_t)(w->size - off < SHM_WARM_CHUNK ? w->size - off : SHM_WARM_CHUNK);
    (void)madvise(w->base + off, len, MADV_POPULATE_WRITE);
    memwarm_touch(w->base + off, len);
    __atomic_fetch_or(&w->bits[i / 64], 1ULL << (i % 64), __ATOMIC_RELEASE);
    __atomic_fetch_add(&w->nwarm, 1, __ATOMIC_RELEASE);
    return asked ? SHM_WARM_ASKED : SHM_WARM_SWEPT;
}

int shm_warm_asked(const shm_warm *w) { return __atomic_load_n(&w->hint, __ATOMIC_RELAXED) != 0; }

int shm_warm_done(const shm_warm *w) { return __atomic_load_n(&w->nwarm, __ATOMIC_ACQUIRE) == w->nchunks; }

uint64_t shm_warm_bytes(const shm_warm *w) {
    uint64_t bytes = __atomic_load_n(&w->nwarm, __ATOMIC_ACQUIRE) * SHM_WARM_CHUNK;
    return bytes < w->size ? bytes : w->size;   /* the last chunk may be short */
}
