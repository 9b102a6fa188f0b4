/* core/workpool.c - see workpool.h. */
#include "core/workpool.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/util.h"

struct workpool {
    pthread_t th[WORKPOOL_MAX_THREADS];
    int nthreads;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    workpool_fn *fn;
    void *arg;
    int next, end;           /* parts [next, end) not yet taken */
    int running;             /* parts taken by helpers, not finished */
    int stop;
};

static void *helper_main(void *p) {
    workpool *wp = p;
    pthread_mutex_lock(&wp->mu);
    for (;;) {
        while (!wp->stop && wp->next == wp->end) pthread_cond_wait(&wp->work, &wp->mu);
        if (wp->stop) break;
        int i = wp->next++;
        wp->running++;
        workpool_fn *fn = wp->fn;
        void *arg = wp->arg;
        pthread_mutex_unlock(&wp->mu);
        fn(arg, i);
        pthread_mutex_lock(&wp->mu);
        if (--wp->running == 0 && wp->next == wp->end) pthread_cond_signal(&wp->done);
    }
    pthread_mutex_unlock(&wp->mu);
    return NULL;
}

workpool *workpool_start(int nthreads) {
    if (nthreads < 1) nthreads = 1;
    if (nthreads > WORKPOOL_MAX_THREADS) nthreads = WORKPOOL_MAX_THREADS;
    workpool *wp = xcalloc(1, sizeof *wp);
    pthread_mutex_init(&wp->mu, NULL);
    pthread_cond_init(&wp->work, NULL);
    pthread_cond_init(&wp->done, NULL);
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&wp->th[i], NULL, helper_main, wp) != 0) break;
        wp->nthreads++;
    }
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
    /* Helpers take parts 1.. from the shared range; the caller takes part
     * 0 and then whatever is left, so no part waits for a busy helper. */
    pthread_mutex_lock(&wp->mu);
    wp->fn = fn;
    wp->arg = arg;
    wp->next = 1;
    wp->end = n;
    pthread_cond_broadcast(&wp->work);
    pthread_mutex_unlock(&wp->mu);
    fn(arg, 0);
    pthread_mutex_lock(&wp->mu);
    while (wp->next < wp->end) {
        int i = wp->next++;
        pthread_mutex_unlock(&wp->mu);
        fn(arg, i);
        pthread_mutex_lock(&wp->mu);
    }
    while (wp->running > 0) pthread_cond_wait(&wp->done, &wp->mu);
    pthread_mutex_unlock(&wp->mu);
}

void workpool_stop(workpool *wp) {
    if (!wp) return;
    pthread_mutex_lock(&wp->mu);
    wp->stop = 1;
    pthread_cond_broadcast(&wp->work);
    pthread_mutex_unlock(&wp->mu);
    for (int i = 0; i < wp->nthreads; i++) pthread_join(wp->th[i], NULL);
    pthread_cond_destroy(&wp->work);
    pthread_cond_destroy(&wp->done);
    pthread_mutex_destroy(&wp->mu);
    free(wp);
}
