/* standalone/heap_warm.c - see heap_warm.h. */
#include "standalone/heap_warm.h"

#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#include <malloc.h>
#define HEAP_WARM 1
#endif

#define HEAP_AHEAD HEAP_WARM_AHEAD

#ifdef HEAP_WARM

void heap_warm_setup(void) {
    mallopt(M_ARENA_MAX, 1);                    /* the warmer's blocks serve the loop */
    mallopt(M_MMAP_THRESHOLD, 2 * HEAP_AHEAD);  /* its blocks come from the heap */
    mallopt(M_TRIM_THRESHOLD, 8 * HEAP_AHEAD);  /* and stay there once freed */
    mallopt(M_TOP_PAD, 1u << 20);
}

size_t heap_warm_free_bytes(void) { return mallinfo2().fordblks; }

int heap_warm_step(void) {
    if (heap_warm_free_bytes() >= HEAP_AHEAD) return 0;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    volatile char *p = malloc(HEAP_AHEAD);
    if (!p) return 0;
    for (size_t off = 0; off < HEAP_AHEAD; off += page) p[off] = 0;
    free((void *)p);
    return 1;
}

#else

void heap_warm_setup(void) {}

int heap_warm_step(void) { return 0; }

size_t heap_warm_free_bytes(void) { return 0; }

#endif
