/* gateway/workers.c - the worker threads: a jobqueue over the process's
 * client, whose finished jobs a loop wake brings back to the loop. */
#include "gateway/workers.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/util.h"

#define WORKERS_MAX JOBQUEUE_MAX_THREADS

struct workers {
    jobqueue *q;
    loop_wake *notify;          /* a worker -> the loop: jobs finished */
    size_t inflight;            /* loop only */
    unsigned long long done;    /* loop only */
    uint64_t learnt;            /* workers_learnt (atomic) */
    mkv_client *mc[WORKERS_MAX];   /* the one client, once per thread (the queue's thread_arg) */
};

/* On the worker: the job's own run with this thread's client. */
static void job_run(jq_job *q, void *mc) {
    gw_job *j = (gw_job *)q;
    j->run(j, mc);
}

static void job_finished(void *arg) {
    workers *w = arg;
    loop_wake_send(w->notify);
}

/* Finish the jobs in list on the loop. */
static void finish_all(workers *w, jq_job *q, int cancelled) {
    while (q) {
        gw_job *j = (gw_job *)q;
        q = q->next;
        j->cancelled = cancelled;
        w->inflight--;
        if (!cancelled) w->done++;
        j->done(j);
    }
}

static void notify_cb(event_loop *el, void *data) {
    workers *w = data;
    finish_all(w, jobqueue_take_finished(w->q), 0);
}

workers *workers_create(event_loop *loop, int n, mkv_client *mc, char *err, size_t errlen) {
    if (n < 1 || n > WORKERS_MAX) {
        snprintf(err, errlen, "worker count must be 1 to %d", WORKERS_MAX);
        return NULL;
    }
    workers *w = xcalloc(1, sizeof *w);
    for (int i = 0; i < n; i++) w->mc[i] = mc;
    w->notify = loop_wake_create(loop, notify_cb, w);   /* idle workers do not keep the loop running */
    jobqueue_config cfg = {.nthreads = n, .thread_arg = (void *const *)w->mc,
                           .finished = job_finished, .finished_arg = w};
    char why[128];
    if (!(w->q = jobqueue_start(&cfg, why, sizeof why))) {
        snprintf(err, errlen, "cannot start the workers: %s", why);
        workers_destroy(w);
        return NULL;
    }
    return w;
}

void workers_submit(workers *w, gw_job *j) {
    j->cancelled = 0;
    j->q.run = job_run;
    w->inflight++;
    jobqueue_submit(w->q, &j->q);   /* no bound: cannot fail */
}

size_t workers_inflight(const workers *w) { return w->inflight; }

unsigned long long workers_done(const workers *w) { return w->done; }

uint64_t *workers_learnt(workers *w) { return &w->learnt; }

void workers_destroy(workers *w) {
    if (!w) return;
    if (w->q) jobqueue_stop(w->q);
    if (w->q) {
        /* Threads are gone: the queues are the loop's now. */
        finish_all(w, jobqueue_take_finished(w->q), 0);
        /* done may submit more (the next SET of a key): until none is left. */
        for (jq_job *q; (q = jobqueue_cancel(w->q));) finish_all(w, q, 1);
        jobqueue_free(w->q);
    }
    loop_wake_free(w->notify);
    free(w);
}
