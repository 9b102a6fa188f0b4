/* tests/unit/test_heap_huge.c - after heap_huge_setup the heap grows in
 * large steps, and heap_huge_advise marks what it grew by for huge pages
 * (the heap mapping's VmFlags gain "hg"), and heap_huge_reserve faults
 * growth in ahead; with the sanitizers' allocators all are no-ops. */
#include "core/heap_huge.h"
#include "test.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define SMALL 200
#define NSMALL 200000   /* 40 MB of metadata-sized blocks: more than one growth step */

/* Whether a mapping of the heap is advised for huge pages (VmFlags "hg"
 * in /proc/self/smaps); -1 if smaps cannot be read. */
static int heap_advised(void) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in_heap = 0, hg = 0;
    while (fgets(line, sizeof line, f)) {
        if (strchr(line, '-') && strstr(line, " rw")) in_heap = strstr(line, "[heap]") != NULL;
        if (in_heap && strncmp(line, "VmFlags:", 8) == 0 && strstr(line, " hg")) hg = 1;
    }
    fclose(f);
    return hg;
}

static void test_growth_advised(void) {
    uintptr_t before = (uintptr_t)sbrk(0);
    heap_huge_setup();
    heap_huge_advise();   /* nothing grew yet */
    ASSERT_EQ(heap_advised(), 0);
    void **blocks = malloc(NSMALL * sizeof *blocks);
    ASSERT(blocks != NULL);
    for (int i = 0; i < NSMALL; i++) blocks[i] = malloc(SMALL);
    heap_huge_advise();
    uintptr_t grown = (uintptr_t)sbrk(0) - before;
    int advised = heap_advised();
    for (int i = 0; i < NSMALL; i++) free(blocks[i]);
    free(blocks);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    printf("# heap_huge is off with the sanitizers' allocators\n");
    (void)grown;
    ASSERT_EQ(advised, 0);
#else
    ASSERT(grown >= HEAP_HUGE_STEP);   /* one step covers what 40 MB needed beyond the first */
    ASSERT_EQ(advised, 1);
    ASSERT((uintptr_t)sbrk(0) - before == grown);   /* freed, not trimmed */
#endif
}

/* The range of the [heap] mappings (advice splits the heap in several)
 * from /proc/self/maps; 0 if there is none. */
static int heap_range(uintptr_t *lo, uintptr_t *hi) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (!strstr(line, "[heap]") || sscanf(line, "%lx-%lx", &a, &b) != 2) continue;
        if (!found || a < *lo) *lo = a;
        if (!found || b > *hi) *hi = b;
        found = 1;
    }
    fclose(f);
    return found;
}

static void *thread_block(void *arg) {
    (void)arg;
    return malloc(SMALL);
}

/* After heap_huge_setup_shared another thread's small blocks come from
 * the brk heap too (without it glibc gives a thread its own arena,
 * mapped elsewhere and grown 4 KiB at a time). */
static void test_threads_share_the_heap(void) {
    heap_huge_setup_shared();
    pthread_t t;
    void *block = NULL;
    ASSERT_EQ(pthread_create(&t, NULL, thread_block, NULL), 0);
    ASSERT_EQ(pthread_join(t, &block), 0);
    uintptr_t p = (uintptr_t)block, lo = 0, hi = 0;
    int mapped = heap_range(&lo, &hi);
    free(block);
    ASSERT(p != 0);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    printf("# heap_huge is off with the sanitizers' allocators\n");
    (void)mapped;
#else
    ASSERT(mapped);
    ASSERT_MSG(p >= lo && p < hi, "thread block at %#lx, [heap] %#lx-%#lx", (unsigned long)p, (unsigned long)lo,
               (unsigned long)hi);
#endif
}

static long minor_faults(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

#define RESERVE (128u << 20)   /* more than the earlier tests left free at the heap's top (~72 MiB) */
#define NRESERVED ((RESERVE - (4u << 20)) / (SMALL + 16))   /* blocks that fit in it, with malloc's headers */

/* heap_huge_reserve grows the heap by what it is asked for (beyond what
 * is free at its top) and faults it in then: small blocks carved from it
 * afterwards grow the heap no further and take next to no page faults
 * (without it, one per fresh 4 KiB page they cover: over 10,000), and
 * freeing them trims nothing while the reservation is held. */
static void test_reserve(void) {
    heap_huge_setup();
    void **blocks = malloc(NRESERVED * sizeof *blocks);
    ASSERT(blocks != NULL);
    uintptr_t before = (uintptr_t)sbrk(0);
    heap_huge_reserve(RESERVE);
    uintptr_t grown = (uintptr_t)sbrk(0) - before;
    long faults = minor_faults();
    for (size_t i = 0; i < NRESERVED; i++) blocks[i] = malloc(SMALL);
    faults = minor_faults() - faults;
    uintptr_t used = (uintptr_t)sbrk(0) - before;
    for (size_t i = 0; i < NRESERVED; i++) free(blocks[i]);
    uintptr_t after_free = (uintptr_t)sbrk(0) - before;
    heap_huge_reserve(0);
    free(blocks);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    printf("# heap_huge is off with the sanitizers' allocators\n");
    (void)grown, (void)used, (void)after_free, (void)faults;
#else
    ASSERT(grown > 0);
    ASSERT_EQ(used, grown);   /* the blocks fit in what was reserved */
    ASSERT_EQ(after_free, grown);
    ASSERT_MSG(faults < 500, "%ld page faults for %zu blocks", faults, (size_t)NRESERVED);
#endif
}

int main(void) {
    RUN_TEST(test_growth_advised);
    RUN_TEST(test_threads_share_the_heap);
    RUN_TEST(test_reserve);
    TEST_EXIT();
}
