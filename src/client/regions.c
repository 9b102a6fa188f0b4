/* client/regions.c - buffers registered with the transfer engine. Puts
 * and gets move bytes straight from and into them, so each request is
 * checked to lie inside one before anything is sent. The list is the
 * core's, one for every lane, as is the engine that holds them. */
#include <errno.h>
#include <string.h>

#include "client/client.h"
#include "core/memwarm.h"

static int overlaps(const mkv_region *r, uintptr_t a, size_t len) {
    uintptr_t b = (uintptr_t)r->addr;
    return a < b + r->len && b < a + len;
}

static const mkv_region *region_find(const mkv_regions *rs, const void *addr, size_t len) {
    uintptr_t a = (uintptr_t)addr;
    if (a + len < a) return NULL;
    for (int i = 0; i < rs->n; i++) {
        uintptr_t b = (uintptr_t)rs->r[i].addr;
        if (a >= b && len <= rs->r[i].len && a - b <= rs->r[i].len - len) return &rs->r[i];
    }
    return NULL;
}

int mkv_registered(mkv_client *c, const void *addr, size_t len) {
    pthread_rwlock_rdlock(&c->core->regions_lock);
    int found = region_find(&c->core->regions, addr, len) != NULL;
    pthread_rwlock_unlock(&c->core->regions_lock);
    return found;
}

static int register_locked(mkv_client *c, void *addr, size_t len, int warm) {
    mkv_regions *rs = &c->core->regions;
    for (int i = 0; i < rs->n; i++)
        if (overlaps(&rs->r[i], (uintptr_t)addr, len))
            return mkv_fail(c, MKV_EINVAL, "buffer overlaps a registered region");
    if (rs->n == MKV_MAX_REGIONS)
        return mkv_fail(c, MKV_ENOMEM, "at most %d registered regions", MKV_MAX_REGIONS);
    int rc = mkv_engine_reg(c, addr, len);
    /* Best effort: cold only costs speed. But memory the kernel cannot
     * read would fail every put from it: the caller's error, said now. */
    if (rc == MKV_OK && warm && memwarm_kernel(addr, len) != 0 && errno == EFAULT) {
        mkv_engine_dereg(c, addr);
        rc = mkv_fail(c, MKV_EFAULT, "buffer %p (%zu bytes) is not readable memory", addr, len);
    }
    if (rc != MKV_OK) return rc;
    rs->r[rs->n++] = (mkv_region){.addr = addr, .len = len};
    return MKV_OK;
}

static int register_region(mkv_client *c, void *addr, size_t len, int warm) {
    if (!c || !addr || len == 0) return c ? mkv_fail(c, MKV_EINVAL, "empty buffer") : MKV_EINVAL;
    if ((uintptr_t)addr + len < (uintptr_t)addr)
        return mkv_fail(c, MKV_EINVAL, "buffer wraps the address space");
    pthread_rwlock_wrlock(&c->core->regions_lock);
    int rc = register_locked(c, addr, len, warm);
    pthread_rwlock_unlock(&c->core->regions_lock);
    return rc;
}

int mkv_register_buffer(mkv_client *c, void *addr, size_t len) {
    MKV_ROUTED(c, mkv_route_register(c, addr, len, 1));
    return register_region(c, addr, len, 1);
}

int mkv_register_buffer_cold(mkv_client *c, void *addr, size_t len) {
    MKV_ROUTED(c, mkv_route_register(c, addr, len, 0));
    return register_region(c, addr, len, 0);
}

int mkv_unregister_buffer(mkv_client *c, void *addr) {
    if (!c) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_unregister(c, addr));
    mkv_regions *rs = &c->core->regions;
    int rc = MKV_EINVAL;
    pthread_rwlock_wrlock(&c->core->regions_lock);
    for (int i = 0; i < rs->n && rc != MKV_OK; i++) {
        if (rs->r[i].addr != addr) continue;
        mkv_engine_dereg(c, addr);
        rs->r[i] = rs->r[--rs->n];
        rc = MKV_OK;
    }
    pthread_rwlock_unlock(&c->core->regions_lock);
    return rc == MKV_OK ? rc : mkv_fail(c, MKV_EINVAL, "no region registered at %p", addr);
}

void mkv_regions_clear(mkv_client *c) {
    pthread_rwlock_wrlock(&c->core->regions_lock);
    while (c->core->regions.n > 0) {
        mkv_region *r = &c->core->regions.r[--c->core->regions.n];
        mkv_engine_dereg(c, r->addr);
    }
    pthread_rwlock_unlock(&c->core->regions_lock);
}
