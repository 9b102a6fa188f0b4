/* core/alloc.h - offset-based allocator for one memory segment.
 *
 * Works on offsets, never pointers, so the same code manages the local
 * segment of a standalone server and the remote segments of memory nodes
 * the master places objects on. Not thread-safe: the owner serialises. */
#ifndef MKV_ALLOC_H
#define MKV_ALLOC_H

#include <stdint.h>

#define ALLOC_OK   0
#define ALLOC_ERR -1

typedef struct seg_alloc seg_alloc;

typedef struct seg_alloc_stats {
    uint64_t size;          /* managed bytes */
    uint64_t used;          /* bytes in live allocations (after alignment) */
    uint64_t free;          /* size - used */
    uint64_t largest_free;  /* biggest single free extent */
    uint64_t free_extents;  /* number of free extents */
    uint64_t allocations;   /* live allocations */
    double fragmentation;   /* 1 - largest_free/free, 0 when free == 0 */
} seg_alloc_stats;

/* align must be a power of two (e.g. 64). Returns NULL on bad arguments. */
seg_alloc *seg_alloc_create(uint64_t size, uint64_t align);
void seg_alloc_destroy(seg_alloc *a);

/* Reserve len bytes (rounded up to align); ALLOC_ERR when no free extent
 * is large enough or len is 0 or would overflow. */
int seg_alloc_reserve(seg_alloc *a, uint64_t len, uint64_t *off);
/* Claim an exact range, e.g. when rebuilding state from what nodes report.
 * ALLOC_ERR if any part of it is not free or it is out of bounds. */
int seg_alloc_reserve_at(seg_alloc *a, uint64_t off, uint64_t len);
/* Give back a range obtained from reserve/reserve_at (same off and len).
 * ALLOC_ERR (and no change) if it was not allocated. */
int seg_alloc_release(seg_alloc *a, uint64_t off, uint64_t len);

void seg_alloc_get_stats(const seg_alloc *a, seg_alloc_stats *st);
uint64_t seg_alloc_align(const seg_alloc *a);

#endif
