/* core/heap_huge.h - the main heap on transparent huge pages.
 *
 * A fresh master's table grows by a few hundred bytes of metadata per
 * object. Each first touch of a 4 KiB heap page is a page fault, and on
 * a virtual machine a trap as well: under a stream of small puts those
 * were a third of the master's CPU. Grown in large steps, each step
 * advised MADV_HUGEPAGE before the loop uses it, the heap faults in 2 MiB
 * pages instead (where THP is "always" or "madvise"; with "never" the
 * advice does nothing). Only the brk heap, which serves the thread that
 * calls these (the event loop); other threads' arenas are left as they
 * are. A no-op where the allocator is not glibc's (sanitizers). */
#ifndef MKV_HEAP_HUGE_H
#define MKV_HEAP_HUGE_H

#define HEAP_HUGE_STEP (32u << 20)   /* the heap grows by at least this */

/* Once, before the heap grows much: large growth steps, no trimming. */
void heap_huge_setup(void);

/* Advises what the heap grew by since the last call (cheap when it did
 * not grow): call it often, e.g. before the loop waits. */
void heap_huge_advise(void);

#endif
