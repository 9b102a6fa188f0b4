/* core/jobqueue.c - see jobqueue.h. One mutex guards both lists and the
 * counters; a thread holds it only to take a job or hand one back. */
#include "core/jobqueue.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/util.h"

typedef struct jq_list {
    jq_job *head, *tail;
} jq_list;

typedef struct jq_thread {
    jobqueue *q;
    pthread_t tid;
    void *arg;
} jq_thread;

struct jobqueue {
    pthread_mutex_t mu;
    pthread_cond_t work;       /* a job was queued, or stop */
    pthread_cond_t idle;       /* a job finished */
    jq_list todo, finished;    /* under mu */
    size_t pending;            /* jobs in todo */
    int running;               /* jobs taken, not finished */
    int stop;
    size_t max_pending;
    void (*on_finished)(void *arg);
    void *finished_arg;
    int nthreads;
    jq_thread th[JOBQUEUE_MAX_THREADS];
};

static void list_push(jq_list *l, jq_job *j) {
    j->next = NULL;
    if (l->tail) l->tail->next = j;
    else l->head = j;
    l->tail = j;
}

static jq_job *list_pop(jq_list *l) {
    jq_job *j = l->head;
    if (j && !(l->head = j->next)) l->tail = NULL;
    return j;
}

static jq_job *list_take_all(jq_list *l) {
    jq_job *j = l->head;
    l->head = l->tail = NULL;
    return j;
}

static void *thread_main(void *p) {
    jq_thread *t = p;
    jobqueue *q = t->q;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->stop && !q->todo.head) pthread_cond_wait(&q->work, &q->mu);
        if (q->stop) break;
        jq_job *j = list_pop(&q->todo);
        q->pending--;
        q->running++;
        pthread_mutex_unlock(&q->mu);
        j->run(j, t->arg);
        pthread_mutex_lock(&q->mu);
        /* The job may be freed by its owner once run returns unless the
         * queue keeps it: touch it only when it goes on finished. The
         * job counts as running until its owner has been told. */
        if (q->on_finished) {
            list_push(&q->finished, j);
            pthread_mutex_unlock(&q->mu);
            q->on_finished(q->finished_arg);
            pthread_mutex_lock(&q->mu);
        }
        if (--q->running == 0 && !q->todo.head) pthread_cond_broadcast(&q->idle);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

jobqueue *jobqueue_start(const jobqueue_config *cfg, char *err, size_t errlen) {
    if (cfg->nthreads < 1 || cfg->nthreads > JOBQUEUE_MAX_THREADS) {
        snprintf(err, errlen, "thread count must be 1 to %d", JOBQUEUE_MAX_THREADS);
        return NULL;
    }
    jobqueue *q = xcalloc(1, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->idle, NULL);
    q->max_pending = cfg->max_pending;
    q->on_finished = cfg->finished;
    q->finished_arg = cfg->finished_arg;
    for (; q->nthreads < cfg->nthreads; q->nthreads++) {
        jq_thread *t = &q->th[q->nthreads];
        t->q = q;
        t->arg = cfg->thread_arg ? cfg->thread_arg[q->nthreads] : NULL;
        if (pthread_create(&t->tid, NULL, thread_main, t) != 0) {
            snprintf(err, errlen, "cannot start thread %d", q->nthreads);
            jobqueue_stop(q);
            jobqueue_free(q);
            return NULL;
        }
    }
    return q;
}

int jobqueue_submit(jobqueue *q, jq_job *j) {
    pthread_mutex_lock(&q->mu);
    if (q->max_pending && q->pending >= q->max_pending) {
        pthread_mutex_unlock(&q->mu);
        return -1;
    }
    list_push(&q->todo, j);
    q->pending++;
    pthread_cond_signal(&q->work);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

jq_job *jobqueue_cancel(jobqueue *q) {
    pthread_mutex_lock(&q->mu);
    jq_job *j = list_take_all(&q->todo);
    q->pending = 0;
    if (q->running == 0) pthread_cond_broadcast(&q->idle);
    pthread_mutex_unlock(&q->mu);
    return j;
}

jq_job *jobqueue_take_finished(jobqueue *q) {
    pthread_mutex_lock(&q->mu);
    jq_job *j = list_take_all(&q->finished);
    pthread_mutex_unlock(&q->mu);
    return j;
}

void jobqueue_wait_idle(jobqueue *q) {
    pthread_mutex_lock(&q->mu);
    while (q->running > 0 || (q->todo.head && !q->stop)) pthread_cond_wait(&q->idle, &q->mu);
    pthread_mutex_unlock(&q->mu);
}

int jobqueue_threads(const jobqueue *q) { return q->nthreads; }

void jobqueue_stop(jobqueue *q) {
    pthread_mutex_lock(&q->mu);
    int already = q->stop;
    q->stop = 1;
    pthread_cond_broadcast(&q->work);
    pthread_cond_broadcast(&q->idle);
    pthread_mutex_unlock(&q->mu);
    if (already) return;
    for (int i = 0; i < q->nthreads; i++) pthread_join(q->th[i].tid, NULL);
}

void jobqueue_free(jobqueue *q) {
    if (!q) return;
    pthread_cond_destroy(&q->work);
    pthread_cond_destroy(&q->idle);
    pthread_mutex_destroy(&q->mu);
    free(q);
}
