/* gateway/staging.c - the registered staging pool and its overflow. */
#include "gateway/staging.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/alloc.h"
#include "core/util.h"
#include "server/store.h"

#define STAGING_ALIGN 64

struct staging {
    mkv_client *mc;
    void *base;
    uint64_t size, max_value;
    seg_alloc *alloc;
    uint64_t dedicated, dedicated_bytes, refused;
};

static void *map_anon(uint64_t len) {
    void *p = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

staging *staging_create(mkv_client *mc, uint64_t pool_size, uint64_t max_value, char *err,
                        size_t errlen) {
    staging *sp = xcalloc(1, sizeof *sp);
    sp->mc = mc;
    sp->size = pool_size;
    sp->max_value = max_value;
    sp->alloc = seg_alloc_create(pool_size, STAGING_ALIGN);
    sp->base = sp->alloc ? map_anon(pool_size) : NULL;
    if (!sp->base) {
        snprintf(err, errlen, "cannot map a staging pool of %llu bytes", (unsigned long long)pool_size);
        staging_destroy(sp);
        return NULL;
    }
    int rc = mkv_register_buffer(mc, sp->base, (size_t)pool_size);
    if (rc != MKV_OK) {
        snprintf(err, errlen, "cannot register the staging pool: %s", mkv_last_error(mc));
        munmap(sp->base, (size_t)pool_size);
        sp->base = NULL;
        staging_destroy(sp);
        return NULL;
    }
    return sp;
}

/* A value the pool cannot hold right now: its own registered mapping. */
static int get_dedicated(staging *sp, uint64_t len, staging_buf *out) {
    if (sp->dedicated >= STAGING_MAX_DEDICATED) return STORE_NOSPACE;
    void *p = map_anon(len);
    if (!p) return STORE_NOSPACE;
    if (mkv_register_buffer(sp->mc, p, (size_t)len) != MKV_OK) {
        munmap(p, (size_t)len);
        return STORE_NOSPACE;
    }
    *out = (staging_buf){.ptr = p, .len = len, .map_len = len};
    sp->dedicated++;
    sp->dedicated_bytes += len;
    return STORE_OK;
}

int staging_get(staging *sp, uint64_t len, staging_buf *out) {
    if (len == 0 || len > sp->max_value) return STORE_TOOBIG;
    uint64_t off;
    if (seg_alloc_reserve(sp->alloc, len, &off) == ALLOC_OK) {
        *out = (staging_buf){.ptr = (char *)sp->base + off, .len = len, .off = off};
        return STORE_OK;
    }
    int rc = get_dedicated(sp, len, out);
    if (rc != STORE_OK) sp->refused++;
    return rc;
}

void staging_put(staging *sp, staging_buf *b) {
    if (!b->ptr) return;
    if (b->map_len) {
        mkv_unregister_buffer(sp->mc, b->ptr);
        munmap(b->ptr, (size_t)b->map_len);
        sp->dedicated--;
        sp->dedicated_bytes -= b->map_len;
    } else {
        seg_alloc_release(sp->alloc, b->off, b->len);
    }
    b->ptr = NULL;
}

void staging_get_stats(const staging *sp, staging_stats *st) {
    seg_alloc_stats as;
    seg_alloc_get_stats(sp->alloc, &as);
    *st = (staging_stats){.pool_size = sp->size, .pool_used = as.used, .dedicated = sp->dedicated,
                          .dedicated_bytes = sp->dedicated_bytes, .refused = sp->refused};
}

void staging_destroy(staging *sp) {
    if (!sp) return;
    if (sp->base) {
        mkv_unregister_buffer(sp->mc, sp->base);
        munmap(sp->base, (size_t)sp->size);
    }
    seg_alloc_destroy(sp->alloc);
    free(sp);
}
