/* gateway/workers.c - the worker threads and their two queues. */
#include "gateway/workers.h"

#include <ev.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/util.h"

#define WORKERS_MAX 8

typedef struct job_queue {
    gw_job *head, *tail;
} job_queue;

typedef struct worker {
    workers *w;
    pthread_t tid;
    mkv_client *mc;
    int started;
} worker;

struct workers {
    struct ev_loop *loop;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    job_queue todo, finished;   /* under lock */
    int stopping;               /* under lock */
    ev_async notify;
    size_t inflight;            /* loop only */
    unsigned long long done;    /* loop only */
    void (*teardown)(mkv_client *mc, void *ctx);
    void *ctx;
    int n;
    worker t[WORKERS_MAX];
};

static void queue_push(job_queue *q, gw_job *j) {
    j->next = NULL;
    if (q->tail) q->tail->next = j;
    else q->head = j;
    q->tail = j;
}

static gw_job *queue_take_all(job_queue *q) {
    gw_job *j = q->head;
    q->head = q->tail = NULL;
    return j;
}

static gw_job *queue_pop(job_queue *q) {
    gw_job *j = q->head;
    if (j && !(q->head = j->next)) q->tail = NULL;
    return j;
}

static void *worker_main(void *arg) {
    worker *t = arg;
    workers *w = t->w;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        gw_job *j;
        while (!w->stopping && !(j = queue_pop(&w->todo))) pthread_cond_wait(&w->wake, &w->lock);
        if (w->stopping) break;
        pthread_mutex_unlock(&w->lock);
        j->run(j, t->mc);
        pthread_mutex_lock(&w->lock);
        queue_push(&w->finished, j);
        ev_async_send(w->loop, &w->notify);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* Finish the jobs in list on the loop. */
static void finish_all(workers *w, gw_job *j) {
    while (j) {
        gw_job *next = j->next;
        w->inflight--;
        w->done++;
        j->done(j);
        j = next;
    }
}

static void notify_cb(struct ev_loop *loop, ev_async *a, int revents) {
    workers *w = a->data;
    pthread_mutex_lock(&w->lock);
    gw_job *done = queue_take_all(&w->finished);
    pthread_mutex_unlock(&w->lock);
    finish_all(w, done);
}

workers *workers_create(struct ev_loop *loop, int n, const mkv_options *opt,
                        int (*setup)(mkv_client *mc, void *ctx),
                        void (*teardown)(mkv_client *mc, void *ctx), void *ctx, char *err,
                        size_t errlen) {
    if (n < 1 || n > WORKERS_MAX) {
        snprintf(err, errlen, "worker count must be 1 to %d", WORKERS_MAX);
        return NULL;
    }
    workers *w = xcalloc(1, sizeof *w);
    w->loop = loop;
    w->teardown = teardown;
    w->ctx = ctx;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    ev_async_init(&w->notify, notify_cb);
    w->notify.data = w;
    ev_async_start(loop, &w->notify);
    ev_unref(loop);   /* idle workers do not keep the loop running */
    for (; w->n < n; w->n++) {
        worker *t = &w->t[w->n];
        t->w = w;
        int rc = mkv_connect(&t->mc, opt);
        if (rc == MKV_OK) rc = setup(t->mc, ctx);
        if (rc != MKV_OK) {
            snprintf(err, errlen, "worker %d: %s", w->n, t->mc ? mkv_last_error(t->mc) : mkv_last_error(NULL));
            w->n++;   /* so destroy closes this client too */
            workers_destroy(w);
            return NULL;
        }
        if (pthread_create(&t->tid, NULL, worker_main, t) != 0) {
            snprintf(err, errlen, "cannot start worker thread %d", w->n);
            w->n++;
            workers_destroy(w);
            return NULL;
        }
        t->started = 1;
    }
    return w;
}

void workers_submit(workers *w, gw_job *j) {
    j->cancelled = 0;
    w->inflight++;
    pthread_mutex_lock(&w->lock);
    queue_push(&w->todo, j);
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

size_t workers_inflight(const workers *w) { return w->inflight; }

unsigned long long workers_done(const workers *w) { return w->done; }

void workers_destroy(workers *w) {
    if (!w) return;
    pthread_mutex_lock(&w->lock);
    w->stopping = 1;
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->lock);
    for (int i = 0; i < w->n; i++) {
        worker *t = &w->t[i];
        if (t->started) pthread_join(t->tid, NULL);
        if (t->mc) {
            if (w->teardown) w->teardown(t->mc, w->ctx);
            mkv_close(t->mc);
        }
    }
    /* Threads are gone: the queues are the loop's now. */
    finish_all(w, queue_take_all(&w->finished));
    /* done may submit more (the next SET of a key): until none is left. */
    for (gw_job *j; (j = queue_take_all(&w->todo));) {
        for (gw_job *next; j; j = next) {
            next = j->next;
            j->cancelled = 1;
            w->inflight--;
            j->done(j);
        }
    }
    ev_ref(w->loop);
    ev_async_stop(w->loop, &w->notify);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
