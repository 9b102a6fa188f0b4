/* tests/unit/test_heap_warm.c - the heap warmer keeps at least its target
 * of free heap memory in place while allocations eat into it (with
 * glibc's allocator; under the sanitizers' allocators it is off). */
#include "standalone/heap_warm.h"
#include "test.h"

#include <stdlib.h>

#define SMALL 200
#define NSMALL 60000   /* 12 MB of metadata-sized blocks: more than the target */

/* Steps until there is nothing to do (bounded); the steps that worked. */
static int warm_fully(void) {
    int worked = 0;
    for (int i = 0; i < 64 && heap_warm_step(); i++) worked++;
    return worked;
}

static void test_keeps_target_free(void) {
    heap_warm_setup();
    if (heap_warm_free_bytes() == 0 && !heap_warm_step()) {
        printf("# heap warming is off with this allocator\n");
        ASSERT_EQ(warm_fully(), 0);
        return;
    }
    warm_fully();
    ASSERT(heap_warm_free_bytes() >= HEAP_WARM_AHEAD);
    ASSERT_EQ(heap_warm_step(), 0);   /* warm enough: nothing to do */
    void **blocks = malloc(NSMALL * sizeof *blocks);
    ASSERT(blocks != NULL);
    for (int i = 0; i < NSMALL; i++) blocks[i] = malloc(SMALL);
    int refilled = warm_fully();
    size_t after = heap_warm_free_bytes();
    for (int i = 0; i < NSMALL; i++) free(blocks[i]);
    free(blocks);
    ASSERT(refilled > 0);             /* the allocations ate the warm memory */
    ASSERT(after >= HEAP_WARM_AHEAD);
}

int main(void) {
    RUN_TEST(test_keeps_target_free);
    TEST_EXIT();
}
