/* core/heap_huge.c - see heap_huge.h. */
#include "core/heap_huge.h"

#include <stdint.h>

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#include <limits.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#define HEAP_HUGE 1
#endif

#define HUGE_PAGE ((uintptr_t)2 << 20)
#define RESERVE_MAX ((size_t)1 << 30)
#define MMAP_MAX_DEFAULT 65536   /* glibc's M_MMAP_MAX default */

#ifdef HEAP_HUGE

/* The heap is advised up to here. Process-wide, as the brk heap is. */
static uintptr_t advised;

void heap_huge_setup(void) {
    mallopt(M_TOP_PAD, HEAP_HUGE_STEP);
    mallopt(M_TRIM_THRESHOLD, 2 * HEAP_HUGE_STEP);
    advised = ((uintptr_t)sbrk(0) + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
}

void heap_huge_setup_shared(void) {
    mallopt(M_ARENA_MAX, 1);
    heap_huge_setup();
}

void heap_steady_setup(void) {
    mallopt(M_MMAP_THRESHOLD, HEAP_STEADY_MMAP);   /* set, it no longer follows the largest free */
    mallopt(M_TOP_PAD, HEAP_STEADY_MMAP);
    mallopt(M_TRIM_THRESHOLD, HEAP_STEADY_KEEP);
}

void heap_huge_advise(void) {
    uintptr_t top = (uintptr_t)sbrk(0) & ~(HUGE_PAGE - 1);
    if (!advised || top <= advised) return;
    (void)madvise((void *)advised, top - advised, MADV_HUGEPAGE);   /* best effort */
    advised = top;
}

/* malloc'd from the heap (mappings of their own turned off for it),
 * touched once a page, freed back into the heap's top, where it stays:
 * while a reservation is held nothing trims the heap. */
void heap_huge_reserve(size_t bytes) {
    if (!advised) return;
    mallopt(M_TRIM_THRESHOLD, bytes ? INT_MAX : (int)(2 * HEAP_HUGE_STEP));
    if (!bytes) return;
    if (bytes > RESERVE_MAX) bytes = RESERVE_MAX;
    mallopt(M_MMAP_MAX, 0);
    volatile char *p = malloc(bytes);
    mallopt(M_MMAP_MAX, MMAP_MAX_DEFAULT);
    if (!p) return;
    heap_huge_advise();
    long page = sysconf(_SC_PAGESIZE);
    for (size_t at = 0; at < bytes; at += (size_t)page) p[at] = 0;
    free((void *)p);
}

#else

void heap_huge_setup(void) {}

void heap_huge_reserve(size_t bytes) { (void)bytes; }

void heap_huge_setup_shared(void) {}

void heap_steady_setup(void) {}

void heap_huge_advise(void) {}

#endif
