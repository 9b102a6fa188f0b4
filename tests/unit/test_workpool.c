/* tests/unit/test_workpool.c - every part runs exactly once, on whichever
 * thread; the call returns only after all of them; reuse and stop. */
#include "core/workpool.h"
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define PARTS 64

typedef struct job {
    atomic_int ran[PARTS];
    atomic_int total;
    pthread_t caller;
    atomic_int off_caller;   /* parts run by another thread */
    atomic_int zero_on_caller;
    int slow;                /* part 0 waits for the others, so helpers must take them */
} job;

static void part(void *arg, int i) {
    job *j = arg;
    /* Waits until the other parts ran (bounded: 10 s), not a fixed time:
     * on a loaded machine a helper may not get a core within a few ms. */
    if (j->slow && i == 0) {
        atomic_store(&j->zero_on_caller, pthread_equal(pthread_self(), j->caller));
        for (int w = 0; w < 10000 && atomic_load(&j->total) < j->slow; w++) usleep(1000);
    }
    atomic_fetch_add(&j->ran[i], 1);
    atomic_fetch_add(&j->total, 1);
    if (!pthread_equal(pthread_self(), j->caller)) atomic_fetch_add(&j->off_caller, 1);
}

static int each_once(job *j, int n) {
    for (int i = 0; i < n; i++)
        if (atomic_load(&j->ran[i]) != 1) return 0;
    return atomic_load(&j->total) == n;
}

static void test_parts_run_once(void) {
    workpool *wp = workpool_start(3);
    ASSERT_EQ(workpool_width(wp), 4);
    static const int ns[] = {1, 2, 4, 5, PARTS};
    for (int r = 0; r < 50; r++) {
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            job j = {.caller = pthread_self()};
            workpool_run(wp, ns[k], part, &j);
            ASSERT_MSG(each_once(&j, ns[k]), "round %d n %d", r, ns[k]);
        }
    }
    workpool_stop(wp);
}

static void test_helpers_take_work(void) {
    workpool *wp = workpool_start(2);
    job j = {.caller = pthread_self(), .slow = 2};   /* part 0 waits for 2 others */
    workpool_run(wp, 3, part, &j);
    ASSERT(each_once(&j, 3));
    /* Whoever was held in part 0, the others were taken meanwhile: by the
     * helpers alone when the caller was the one held. */
    if (atomic_load(&j.zero_on_caller)) ASSERT_EQ(atomic_load(&j.off_caller), 2);
    else ASSERT(atomic_load(&j.off_caller) >= 1);
    workpool_stop(wp);
}

static void test_null_and_clamp(void) {
    job j = {.caller = pthread_self()};
    workpool_run(NULL, 7, part, &j);
    ASSERT(each_once(&j, 7));
    ASSERT_EQ(atomic_load(&j.off_caller), 0);
    ASSERT_EQ(workpool_width(NULL), 1);
    workpool *wp = workpool_start(1000);
    ASSERT_EQ(workpool_width(wp), 1 + WORKPOOL_MAX_THREADS);
    workpool_stop(wp);
    workpool_stop(NULL);
    wp = workpool_start(0);
    ASSERT_EQ(workpool_width(wp), 2);
    workpool_run(wp, 0, part, &j);
    ASSERT_EQ(atomic_load(&j.total), 7);
    workpool_stop(wp);
}

int main(void) {
    RUN_TEST(test_parts_run_once);
    RUN_TEST(test_helpers_take_work);
    RUN_TEST(test_null_and_clamp);
    TEST_EXIT();
}
