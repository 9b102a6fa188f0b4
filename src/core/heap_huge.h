/* core/heap_huge.h - how the main heap grows: on transparent huge pages,
 * or kept between a loop's batches (heap_steady_setup, below).
 *
 * A fresh master's table grows by a few hundred bytes of metadata per
 * object. Each first touch of a 4 KiB heap page is a page fault, and on
 * a virtual machine a trap as well: under a stream of small puts those
 * were a third of the master's CPU. Grown in large steps, each step
 * advised MADV_HUGEPAGE before the loop uses it, the heap faults in 2 MiB
 * pages instead (where THP is "always" or "madvise"; with "never" the
 * advice does nothing). Only the brk heap, which serves the main thread
 * (and every thread after heap_huge_setup_shared); other threads' arenas
 * are left as they are. heap_huge_advise from one thread only. A no-op
 * where the allocator is not glibc's (sanitizers). */
#ifndef MKV_HEAP_HUGE_H
#define MKV_HEAP_HUGE_H

#include <stddef.h>

#define HEAP_HUGE_STEP (32u << 20)   /* the heap grows by at least this */

/* Once, before the heap grows much: large growth steps, no trimming. */
void heap_huge_setup(void);
/* The same, and every thread allocates from that heap (one malloc
 * arena), for a process whose metadata grows off its main thread (a
 * node's index, filled by its control thread: other threads' arenas grow
 * 4 KiB pages at a time). Before any thread starts. */
void heap_huge_setup_shared(void);

/* For a loop that frees about what it allocates every iteration (the
 * gateway's batches): glibc's default returns the heap's top to the
 * system past 128 KiB free and grows it back at the next batch, a brk
 * pair and a page fault per page each time. This keeps up to
 * HEAP_STEADY_KEEP free at the top, and blocks of HEAP_STEADY_MMAP and
 * more (large values) still get a mapping of their own, given back when
 * freed. No huge pages. Once, at start-up. */
#define HEAP_STEADY_KEEP (16u << 20)
#define HEAP_STEADY_MMAP (1u << 20)
void heap_steady_setup(void);

/* Advises what the heap grew by since the last call (cheap when it did
 * not grow): call it often, e.g. before the loop waits, and within work
 * that allocates much in one go (growth touched before it is advised
 * stays on 4 KiB pages). */
void heap_huge_advise(void);

/* A process about to allocate about bytes (capped at 1 GiB) in small
 * pieces, with time to spare now (e.g. a master waiting for its rebuild
 * window to close): the heap grows by that much at once and every page
 * of it is faulted in (zeroed by the kernel) now, not one at a time
 * under the work that follows. Kept from trimming until
 * heap_huge_reserve(0). A no-op before heap_huge_setup. */
void heap_huge_reserve(size_t bytes);

#endif
