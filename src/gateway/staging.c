/* gateway/staging.c - the registered staging pool and its overflow. */
#include "gateway/staging.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "client/moonkv_internal.h"
#include "core/alloc.h"
#include "core/util.h"
#include "server/store.h"

#define STAGING_ALIGN 64
/* Small values are the bulk of a busy gateway's buffers: a range of up
 * to STAGING_SMALL bytes put back is kept, per aligned size, for the
 * next get of that size (a pop under the lock instead of a dozen steps
 * of the offset allocator's trees each way: ~7% of the loop under
 * pipelined 64 B SETs). Kept ranges count as free in the stats and go
 * back to the allocator when it runs short and when the pool is trimmed. */
#define STAGING_SMALL 256
#define STAGING_SIZES (STAGING_SMALL / STAGING_ALIGN)
#define STAGING_KEEP 4096        /* ranges kept per size: a few batches' worth */

struct staging {
    pthread_mutex_t lock;    /* alloc and the counters */
    void *base;
    uint64_t size, max_value;
    seg_alloc *alloc;
    uint64_t hot_end;        /* no pool page at or above it was handed out since the last trim */
    /* Pool gets and puts counted, not timed (a clock read per value was
     * ~5% of the gateway loop under GET -P16): a trim that sees the count
     * unchanged since the last one measures the quiet from that one. */
    uint64_t uses, uses_seen, quiet_since_ms;
    uint64_t dedicated, dedicated_bytes, sparse, refused;
    uint64_t kept[STAGING_SIZES][STAGING_KEEP];   /* offsets, by aligned size */
    uint32_t nkept[STAGING_SIZES];
    uint64_t kept_bytes;
};

/* One pool range that staging_get_shared's buffers share. */
struct staging_slab {
    uint64_t off, len;
    size_t refs;             /* buffers not put yet (atomic) */
};

static uint64_t aligned(uint64_t len) { return (len + STAGING_ALIGN - 1) & ~(uint64_t)(STAGING_ALIGN - 1); }

static void *map_anon(uint64_t len, int flags) {
    void *p = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

staging *staging_create(uint64_t pool_size, uint64_t max_value, char *err, size_t errlen) {
    staging *sp = xcalloc(1, sizeof *sp);
    pthread_mutex_init(&sp->lock, NULL);
    sp->size = pool_size;
    sp->max_value = max_value;
    sp->alloc = seg_alloc_create(pool_size, STAGING_ALIGN);
    sp->base = sp->alloc ? map_anon(pool_size, 0) : NULL;
    if (!sp->base) {
        snprintf(err, errlen, "cannot map a staging pool of %llu bytes", (unsigned long long)pool_size);
        staging_destroy(sp);
        return NULL;
    }
    return sp;
}

/* Cold: warming the pool for the kernel's copies would make all of it
 * resident at start; its pages become resident as values use them. */
int staging_register(staging *sp, mkv_client *mc) {
    return mkv_register_buffer_cold(mc, sp->base, (size_t)sp->size);
}

void staging_unregister(staging *sp, mkv_client *mc) { mkv_unregister_buffer(mc, sp->base); }

int staging_bind(mkv_client *mc, const staging_buf *b) {
    return b->map_len ? mkv_register_buffer(mc, b->ptr, (size_t)b->map_len) : MKV_OK;
}

void staging_unbind(mkv_client *mc, const staging_buf *b) {
    if (b->map_len) mkv_unregister_buffer(mc, b->ptr);
}

/* A value the pool cannot hold right now: its own mapping. Called locked.
 * Together they stay within the larger of the pool and one maximal
 * value, so the overflow at most doubles the gateway's staging memory. */
static int get_dedicated(staging *sp, uint64_t len, staging_buf *out) {
    uint64_t cap = sp->size > sp->max_value ? sp->size : sp->max_value;
    if (sp->dedicated >= STAGING_MAX_DEDICATED || len > cap - sp->dedicated_bytes) return STORE_NOSPACE;
    void *p = map_anon(len, 0);
    if (!p) return STORE_NOSPACE;
    *out = (staging_buf){.ptr = p, .len = len, .map_len = len};
    sp->dedicated++;
    sp->dedicated_bytes += len;
    return STORE_OK;
}

/* The kept-range size of a len-byte value; -1 if it is not small. */
static int small_size(uint64_t len) {
    return len <= STAGING_SMALL ? (int)(aligned(len) / STAGING_ALIGN) - 1 : -1;
}

/* Called locked: every kept range back to the allocator; 0 if none was. */
static int drop_kept(staging *sp) {
    int any = 0;
    for (int k = 0; k < STAGING_SIZES; k++) {
        for (uint32_t i = 0; i < sp->nkept[k]; i++)
            seg_alloc_release(sp->alloc, sp->kept[k][i], (uint64_t)(k + 1) * STAGING_ALIGN);
        any |= sp->nkept[k] > 0;
        sp->nkept[k] = 0;
    }
    sp->kept_bytes = 0;
    return any;
}

/* Called locked: a pool range of len bytes, marked hot; a kept one first. */
static int pool_reserve(staging *sp, uint64_t len, uint64_t *off) {
    int k = small_size(len);
    sp->uses++;
    if (k >= 0 && sp->nkept[k]) {
        *off = sp->kept[k][--sp->nkept[k]];
        sp->kept_bytes -= aligned(len);
        return 0;
    }
    if (seg_alloc_reserve(sp->alloc, len, off) != ALLOC_OK &&
        (!drop_kept(sp) || seg_alloc_reserve(sp->alloc, len, off) != ALLOC_OK))
        return -1;
    if (*off + len > sp->hot_end) sp->hot_end = *off + len;
    return 0;
}

/* Called locked: the range back, kept if it is small and there is room. */
static void pool_release(staging *sp, uint64_t off, uint64_t len) {
    int k = small_size(len);
    sp->uses++;
    if (k >= 0 && sp->nkept[k] < STAGING_KEEP) {
        sp->kept[k][sp->nkept[k]++] = off;
        sp->kept_bytes += aligned(len);
        return;
    }
    seg_alloc_release(sp->alloc, off, len);
}

int staging_get(staging *sp, uint64_t len, staging_buf *out) {
    if (len == 0 || len > sp->max_value) return STORE_TOOBIG;
    uint64_t off;
    int rc = STORE_OK;
    pthread_mutex_lock(&sp->lock);
    if (pool_reserve(sp, len, &off) == 0)
        *out = (staging_buf){.ptr = (char *)sp->base + off, .len = len, .off = off};
    else if ((rc = get_dedicated(sp, len, out)) != STORE_OK)
        sp->refused++;
    pthread_mutex_unlock(&sp->lock);
    return rc;
}

int staging_get_shared(staging *sp, const uint64_t *lens, size_t n, staging_buf *out) {
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (lens[i] == 0 || lens[i] > sp->max_value) return STORE_TOOBIG;
        total += aligned(lens[i]);   /* at most size + max_value + 63: no overflow */
        if (total > sp->size) return STORE_NOSPACE;
    }
    if (n == 0) return STORE_OK;
    uint64_t off;
    pthread_mutex_lock(&sp->lock);
    int rc = pool_reserve(sp, total, &off);
    pthread_mutex_unlock(&sp->lock);
    if (rc != 0) return STORE_NOSPACE;
    staging_slab *slab = xmalloc(sizeof *slab);
    *slab = (staging_slab){.off = off, .len = total, .refs = n};
    for (size_t i = 0; i < n; i++) {
        out[i] = (staging_buf){.ptr = (char *)sp->base + off, .len = lens[i], .off = off, .slab = slab};
        off += aligned(lens[i]);
    }
    return STORE_OK;
}

int staging_get_sparse(staging *sp, uint64_t len, staging_buf *out) {
    if (len == 0 || len > sp->max_value) return STORE_TOOBIG;
    pthread_mutex_lock(&sp->lock);
    void *p = sp->sparse < STAGING_MAX_SPARSE ? map_anon(len, MAP_NORESERVE) : NULL;
    if (p) sp->sparse++;
    else sp->refused++;
    pthread_mutex_unlock(&sp->lock);
    if (!p) return STORE_NOSPACE;
    *out = (staging_buf){.ptr = p, .len = len, .map_len = len, .sparse = 1};
    return STORE_OK;
}

/* A shared buffer's slab loses a piece; the last one puts its range. */
static void put_shared(staging *sp, staging_buf *b) {
    staging_slab *slab = b->slab;
    b->ptr = NULL;
    b->slab = NULL;
    if (__atomic_sub_fetch(&slab->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    pthread_mutex_lock(&sp->lock);
    pool_release(sp, slab->off, slab->len);
    pthread_mutex_unlock(&sp->lock);
    free(slab);
}

void staging_put(staging *sp, staging_buf *b) {
    if (!b->ptr) return;
    if (b->slab) {
        put_shared(sp, b);
        return;
    }
    if (b->map_len) munmap(b->ptr, (size_t)b->map_len);
    pthread_mutex_lock(&sp->lock);
    if (b->sparse) {
        sp->sparse--;
    } else if (b->map_len) {
        sp->dedicated--;
        sp->dedicated_bytes -= b->map_len;
    } else {
        pool_release(sp, b->off, b->len);
    }
    pthread_mutex_unlock(&sp->lock);
    b->ptr = NULL;
}

uint64_t staging_trim(staging *sp, uint64_t idle_ms) {
    seg_alloc_stats as;
    uint64_t freed = 0;
    pthread_mutex_lock(&sp->lock);
    seg_alloc_get_stats(sp->alloc, &as);
    uint64_t now = mono_ms();
    if (sp->uses != sp->uses_seen) {
        sp->uses_seen = sp->uses;
        sp->quiet_since_ms = now;
    }
    int idle = now - sp->quiet_since_ms >= idle_ms;
    if (idle && drop_kept(sp)) seg_alloc_get_stats(sp->alloc, &as);
    if (as.used == 0 && sp->hot_end > 0 && idle) {
        /* Under the lock: no get may hand out a page while it is dropped. */
        uint64_t len = (sp->hot_end + 4095) & ~4095ULL;
        if (len > sp->size) len = sp->size;
        if (madvise(sp->base, (size_t)len, MADV_DONTNEED) == 0) {
            freed = len;
            sp->hot_end = 0;
        }
    }
    pthread_mutex_unlock(&sp->lock);
    return freed;
}

void staging_get_stats(staging *sp, staging_stats *st) {
    seg_alloc_stats as;
    pthread_mutex_lock(&sp->lock);
    seg_alloc_get_stats(sp->alloc, &as);
    *st = (staging_stats){.pool_size = sp->size, .pool_used = as.used - sp->kept_bytes, .pool_hot = sp->hot_end,
                          .dedicated = sp->dedicated,
                          .dedicated_bytes = sp->dedicated_bytes, .sparse = sp->sparse,
                          .refused = sp->refused};
    pthread_mutex_unlock(&sp->lock);
}

void staging_destroy(staging *sp) {
    if (!sp) return;
    if (sp->base) munmap(sp->base, (size_t)sp->size);
    seg_alloc_destroy(sp->alloc);
    pthread_mutex_destroy(&sp->lock);
    free(sp);
}
