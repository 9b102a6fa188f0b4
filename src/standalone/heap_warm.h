/* standalone/heap_warm.h - keeping malloc's free memory warm ahead of use.
 *
 * Every stored key costs object metadata on the heap (objtable entry,
 * key, extent: about 250 bytes). On a fresh server the heap grows by
 * fresh pages, and the first touch of each costs a page fault, and on
 * virtual machines with shadow page tables a trap as well (core/memwarm.h):
 * a quarter of the CPU time of a cold run of small SETs. The segment
 * warmer's thread therefore also keeps some free heap memory touched
 * ahead of the event loop: it allocates a block from the one arena
 * (glibc, M_ARENA_MAX 1), writes a byte per page and frees it again, so
 * the loop's next small allocations land on pages already in place. */
#ifndef MKV_HEAP_WARM_H
#define MKV_HEAP_WARM_H

#include <stddef.h>

/* Before any other thread starts: one malloc arena, no trimming of the
 * warmed top. A no-op where the allocator is not glibc's (sanitizers). */
void heap_warm_setup(void);

/* Warms a step if fewer than the target free bytes are warm; 1 when it
 * did work, 0 when the heap is warm enough (the caller may sleep). */
int heap_warm_step(void);

/* Free bytes malloc can hand out without growing the heap (what the
 * steps keep at or above their target); 0 where heap warming is off. */
size_t heap_warm_free_bytes(void);

/* The target: HEAP_WARM_AHEAD free bytes warm. */
#define HEAP_WARM_AHEAD (8u << 20)

#endif
