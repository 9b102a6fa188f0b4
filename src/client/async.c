/* client/async.c - the asynchronous face (moonkv_async.h): a queue of
 * submitted operations, a few threads that run each one through the
 * same calls as the blocking face (mkv_op_run, on a lane of the shared
 * client), and completions told by callback or through an eventfd. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client/client.h"
#include "client/moonkv_async.h"
#include "core/util.h"

#define MKV_ASYNC_MAX_THREADS MKV_MAX_LANES

typedef struct op_queue {
    mkv_op *head, *tail;
} op_queue;

struct mkv_async {
    mkv_client *c;
    int flags, efd, nthreads, closing;
    pthread_t threads[MKV_ASYNC_MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    op_queue todo, done;
    size_t pending;                /* submitted, not yet drained / called back */
};

static void q_push(op_queue *q, mkv_op *op) {
    op->next = NULL;
    if (q->tail) q->tail->next = op;
    else q->head = op;
    q->tail = op;
}

static mkv_op *q_pop(op_queue *q) {
    mkv_op *op = q->head;
    if (op && !(q->head = op->next)) q->tail = NULL;
    return op;
}

int mkv_op_run(mkv_client *c, mkv_op *op) {
    size_t got = 0;
    switch (op->kind) {
    case MKV_OP_PUT:
        op->status = mkv_put(c, op->key, op->keylen, op->buf, op->len, op->replicas);
        break;
    case MKV_OP_GET:
        op->status = mkv_get(c, op->key, op->keylen, op->buf, op->len, &got);
        if (op->status == MKV_OK || op->status == MKV_ETOOSMALL) op->len = got;
        break;
    case MKV_OP_PUT_BATCH: op->status = mkv_put_batch(c, op->objs, op->n, op->replicas); break;
    case MKV_OP_GET_BATCH: op->status = mkv_get_batch(c, op->objs, op->n); break;
    case MKV_OP_EXISTS: op->status = mkv_exists(c, op->key, op->keylen); break;
    case MKV_OP_EXISTS_BATCH: op->status = mkv_exists_batch(c, op->objs, op->n, op->results); break;
    case MKV_OP_REMOVE: op->status = mkv_remove(c, op->key, op->keylen); break;
    default: op->status = MKV_EINVAL;
    }
    return op->status;
}

/* A finished op: its done now (inline), or queued for the drain. */
static void complete(mkv_async *a, mkv_op *op) {
    if (a->flags & MKV_ASYNC_INLINE) {
        if (op->done) op->done(op);
        pthread_mutex_lock(&a->mu);
        a->pending--;
        pthread_mutex_unlock(&a->mu);
        return;
    }
    pthread_mutex_lock(&a->mu);
    q_push(&a->done, op);
    pthread_mutex_unlock(&a->mu);
    uint64_t one = 1;
    while (write(a->efd, &one, sizeof one) < 0 && errno == EINTR) {}
}

static void *worker(void *arg) {
    mkv_async *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        mkv_op *op = q_pop(&a->todo);
        if (!op) {
            if (a->closing) break;
            pthread_cond_wait(&a->work_cv, &a->mu);
            continue;
        }
        pthread_mutex_unlock(&a->mu);
        mkv_op_run(a->c, op);
        complete(a, op);
        pthread_mutex_lock(&a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

int mkv_async_open(mkv_async **out, mkv_client *c, int threads, int flags) {
    if (!out || !c || threads < 0 || threads > MKV_ASYNC_MAX_THREADS || (flags & ~MKV_ASYNC_INLINE))
        return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_refused(c, "the async face"));
    mkv_async *a = xcalloc(1, sizeof *a);
    a->c = c;
    a->flags = flags;
    a->efd = -1;
    if (!(flags & MKV_ASYNC_INLINE) && (a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        free(a);
        return mkv_fail(c, MKV_ENOMEM, "eventfd: %s", strerror(errno));
    }
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->work_cv, NULL);
    int want = threads ? threads : c->core->max_lanes;
    for (int i = 0; i < want; i++)
        if (pthread_create(&a->threads[a->nthreads], NULL, worker, a) == 0) a->nthreads++;
    if (a->nthreads == 0) {
        mkv_async_close(a);
        return mkv_fail(c, MKV_ENOMEM, "no thread for the async face");
    }
    *out = a;
    return MKV_OK;
}

int mkv_async_fd(const mkv_async *a) { return a ? a->efd : -1; }

int mkv_async_submit(mkv_async *a, mkv_op *op) {
    if (!a || !op || (unsigned)op->kind > MKV_OP_REMOVE) return MKV_EINVAL;
    pthread_mutex_lock(&a->mu);
    int rc = a->closing ? MKV_EINVAL : MKV_OK;
    if (rc == MKV_OK) {
        q_push(&a->todo, op);
        a->pending++;
        pthread_cond_signal(&a->work_cv);
    }
    pthread_mutex_unlock(&a->mu);
    return rc;
}

size_t mkv_async_drain(mkv_async *a) {
    if (!a || a->efd < 0) return 0;
    uint64_t n;
    while (read(a->efd, &n, sizeof n) < 0 && errno == EINTR) {}   /* EAGAIN: none counted */
    pthread_mutex_lock(&a->mu);
    op_queue q = a->done;
    a->done = (op_queue){0};
    pthread_mutex_unlock(&a->mu);
    size_t ran = 0;
    for (mkv_op *op; (op = q_pop(&q)); ran++)
        if (op->done) op->done(op);   /* may submit again: a->mu is not held */
    pthread_mutex_lock(&a->mu);
    a->pending -= ran;
    pthread_mutex_unlock(&a->mu);
    return ran;
}

size_t mkv_async_pending(mkv_async *a) {
    pthread_mutex_lock(&a->mu);
    size_t n = a->pending;
    pthread_mutex_unlock(&a->mu);
    return n;
}

void mkv_async_close(mkv_async *a) {
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    a->closing = 1;
    pthread_cond_broadcast(&a->work_cv);
    pthread_mutex_unlock(&a->mu);
    for (int i = 0; i < a->nthreads; i++) pthread_join(a->threads[i], NULL);
    mkv_async_drain(a);   /* the workers are gone: every op is done and queued */
    if (a->efd >= 0) close(a->efd);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->work_cv);
    free(a);
}
