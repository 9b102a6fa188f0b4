/* core/alloc.h - offset-based allocator for one memory segment.
 *
 * Works on offsets, never pointers, so the same code manages the local
 * segment of a standalone server and the remote segments of memory nodes
 * the master places objects on. Not thread-safe: the owner serialises. */
#ifndef MKV_ALLOC_H
#define MKV_ALLOC_H

#include <stddef.h>
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
/* The same without a record of every allocation (a tree node of 40
 * bytes each, and a tree insert per reserve), for an owner that keeps
 * where each of its allocations lies anyway (a standalone's object
 * table). A release is then checked against the free extents only: a
 * range that is out of bounds, misaligned or overlaps free space
 * (released twice, never reserved) is still refused, but other bounds
 * inside allocated space cannot be told from the right ones. The
 * SEG_TREE_LIVE dump holds nothing; everything else is the same. */
seg_alloc *seg_alloc_create_untracked(uint64_t size, uint64_t align);
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
/* Take an exact free range out of the allocator's reach without counting
 * it as used: the stats' size and used leave it out (a memory node's
 * chunk that another master group holds). ALLOC_ERR if any of it is not
 * free. unwithhold gives such a range back (same off and len). */
int seg_alloc_withhold(seg_alloc *a, uint64_t off, uint64_t len);
int seg_alloc_unwithhold(seg_alloc *a, uint64_t off, uint64_t len);
/* A sub-range of withheld space taken as ours (counted used) and given
 * back as withheld (not free): a master group adopting an object another
 * group placed in its own chunk of a shared node (master/migrate.h).
 * Untracked allocators only (withheld ranges are not split in the live
 * tree); ALLOC_ERR if any of it is free, or more than is withheld (lend)
 * or lent (unlend) would be. The caller knows the range is withheld. */
int seg_alloc_lend(seg_alloc *a, uint64_t off, uint64_t len);
int seg_alloc_unlend(seg_alloc *a, uint64_t off, uint64_t len);

/* An exact range of the segment. */
typedef struct seg_range {
    uint64_t off, len;
} seg_range;

/* Claim r[0..n) at once in an allocator that holds no allocation: the
 * ranges sorted by offset, aligned, inside the segment and disjoint once
 * their lengths are rounded up to the alignment. The trees are built in
 * one pass from the sorted ranges (O(n): a rebuild claims millions, and
 * n claims one by one cost O(n log n) tree steps). The result holds the
 * same extents as n seg_alloc_reserve_at calls would. ALLOC_ERR and no
 * change if the allocator holds or withholds anything or a range breaks
 * a rule. */
int seg_alloc_claim_sorted(seg_alloc *a, const seg_range *r, size_t n);
/* The heap that claim takes for n ranges with few gaps between them (a
 * tree node each), for a caller that sizes memory ahead. */
size_t seg_alloc_claim_bytes(size_t n);

void seg_alloc_get_stats(const seg_alloc *a, seg_alloc_stats *st);
/* Count every reserve and release of a in *changes (shared by many
 * allocators: the master's placement knows its view of them is current). */
void seg_alloc_watch(seg_alloc *a, uint64_t *changes);
uint64_t seg_alloc_align(const seg_alloc *a);

/* For tests: one of the trees in key order, as (k1, k2) pairs into
 * out[0..2*max); returns how many it holds (all of them even when more
 * than max), or -1 if its search or heap order is broken. */
typedef enum seg_alloc_tree { SEG_TREE_FREE_OFF, SEG_TREE_FREE_LEN, SEG_TREE_LIVE } seg_alloc_tree;
long seg_alloc_dump(const seg_alloc *a, seg_alloc_tree which, uint64_t *out, size_t max);

#endif
