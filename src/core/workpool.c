/* core/workpool.c - see workpool.h. Parts are handed out by one atomic
 * counter; the helpers' runner jobs and the caller take from it alike,
 * so no part waits for a busy helper. */
#include "core/workpool.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/util.h"

typedef struct runner {
    jq_job job;
    workpool *wp;
} runner;

struct workpool {
    jobqueue *q;             /* NULL: no helper could be started */
    int nthreads;
    runner r[WORKPOOL_MAX_THREADS];
    /* The run in progress; set before the runners are queued. */
    workpool_fn *fn;
    void *arg;
    atomic_int next;         /* first part not yet taken */
    int end;
};

/* Parts until none is left; the caller and every runner do this. */
static void take_parts(workpool *wp) {
    for (int i; (i = atomic_fetch_add_explicit(&wp->next, 1, memory_order_relaxed)) < wp->end;)
        wp->fn(wp->arg, i);
}

static void runner_run(jq_job *j, void *unused) {
    (void)unused;
    take_parts(((runner *)j)->wp);
}

workpool *workpool_start(int nthreads) {
    if (nthreads < 1) nthreads = 1;
    if (nthreads > WORKPOOL_MAX_THREADS) nthreads = WORKPOOL_MAX_THREADS;
    workpool *wp = xcalloc(1, sizeof *wp);
    char err[64];
    jobqueue_config cfg = {.nthreads = nthreads};
    wp->q = jobqueue_start(&cfg, err, sizeof err);
    wp->nthreads = wp->q ? nthreads : 0;
    for (int i = 0; i < WORKPOOL_MAX_THREADS; i++) wp->r[i] = (runner){.job.run = runner_run, .wp = wp};
    return wp;
}

int workpool_helpers_for_cores(int max) {
    long n = sysconf(_SC_NPROCESSORS_ONLN) - 1;
    if (n > max) n = max;
    return n < 1 ? 1 : (int)n;
}

int workpool_width(const workpool *wp) {
    return wp ? 1 + wp->nthreads : 1;
}

void workpool_run(workpool *wp, int n, workpool_fn *fn, void *arg) {
    if (n <= 0) return;
    if (!wp || wp->nthreads == 0 || n == 1) {
        for (int i = 0; i < n; i++) fn(arg, i);
        return;
    }
    wp->fn = fn;
    wp->arg = arg;
    wp->end = n;
    atomic_store_explicit(&wp->next, 1, memory_order_relaxed);
    int helpers = n - 1 < wp->nthreads ? n - 1 : wp->nthreads;
    for (int i = 0; i < helpers; i++) jobqueue_submit(wp->q, &wp->r[i].job);
    fn(arg, 0);
    take_parts(wp);
    /* Every part is taken: a runner no helper picked up has nothing to
     * do, so take it back and wait only for those still in a part. */
    jobqueue_cancel(wp->q);
    jobqueue_wait_idle(wp->q);
}

void workpool_stop(workpool *wp) {
    if (!wp) return;
    if (wp->q) {
        jobqueue_stop(wp->q);
        jobqueue_free(wp->q);
    }
    free(wp);
}
