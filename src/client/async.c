/* client/async.c - the asynchronous face (moonkv_async.h): submitted
 * operations, the threads that drive them and their completions (by
 * callback, or queued behind an eventfd).
 *
 * An operation starts on the submitting thread while the master link is
 * up (async_ops.c sends its master command on the core's shared master
 * connection, with a callback for its reply, never waiting to connect or
 * for room to write: mkv_link_send_up); otherwise, or while an earlier
 * one still waits for it, on the face's one I/O thread, which connects
 * (so commands go out in submit order). The I/O thread serves the
 * connection (mkv_link_serve): it reads the replies in order and runs the
 * callbacks, so any number of operations wait for the master at once
 * and no thread waits for any one of them. With MKV_ASYNC_DRAIN_READS
 * the caller's drain reads the face's replies instead (the link's fd is
 * in the face's epoll fd) and the I/O thread only looks every
 * IO_TICK_MS for what nobody read and for timeouts. The `threads` others
 * run data legs only (an operation's transfers, through the engine's
 * contexts), one at a time each. Over a router the face has no threads:
 * route.c splits each operation onto its groups' own faces. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client/client.h"
#include "client/moonkv_async.h"
#include "client/moonkv_internal.h"
#include "core/util.h"
#include "proto/status.h"

#define IO_IDLE_MS 1000   /* the I/O thread with nothing to serve sleeps on its wake fd */
#define IO_TICK_MS 100    /* DRAIN_READS: the I/O thread looks at the link this often while owed */
#define DOWN_HOLD_MS 1000
#define LEADER_RETRY_MS 50   /* etcd: between a send's attempts to find a leader */

static void q_push(mkv_opq *q, mkv_op *op) {
    op->next = NULL;
    if (q->tail) q->tail->next = op;
    else q->head = op;
    q->tail = op;
}

static mkv_op *q_pop(mkv_opq *q) {
    mkv_op *op = q->head;
    if (op && !(q->head = op->next)) q->tail = NULL;
    return op;
}

static void efd_post(int fd) {
    uint64_t one = 1;
    while (write(fd, &one, sizeof one) < 0 && errno == EINTR) {}
}

static void efd_clear(int fd) {
    uint64_t n;
    while (read(fd, &n, sizeof n) < 0 && errno == EINTR) {}   /* EAGAIN: none counted */
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
    case MKV_OP_GET_BATCH: op->status = op->place ? MKV_EINVAL : mkv_get_batch(c, op->objs, op->n); break;
    case MKV_OP_EXISTS: op->status = mkv_exists(c, op->key, op->keylen); break;
    case MKV_OP_EXISTS_BATCH: op->status = mkv_exists_batch(c, op->objs, op->n, op->results); break;
    case MKV_OP_REMOVE: op->status = mkv_remove(c, op->key, op->keylen); break;
    case MKV_OP_REMOVE_BATCH: op->status = mkv_remove_batch(c, op->objs, op->n); break;
    case MKV_OP_STAT: {
        uint64_t size = 0;
        if ((op->status = mkv_stat(c, op->key, op->keylen, &size, &op->crc)) == MKV_OK) op->len = (size_t)size;
        break;
    }
    default: op->status = MKV_EINVAL;
    }
    return op->status;
}

/* The face whose op this thread starts inside mkv_async_submit: its
 * sends must not wait (for a connect, etcd, or room to write) and an
 * inline face's completions must not run in the caller's submit. */
static __thread mkv_async *submitting;
/* The face whose replies this thread reads in mkv_async_drain: what
 * completes meanwhile is drained next, with no post of its fd. */
static __thread mkv_async *draining;

/* The eventfd the link posts when one of the face's replies is due and
 * the thread that read it does not run it (DRAIN_READS), else -1. */
static int notify_fd(const mkv_async *a) { return a->pfd >= 0 ? a->efd : -1; }

/* DRAIN_READS: the link's live fd watched in pfd, edge triggered (a
 * drain reads what came; a thread reading for everyone may take it
 * first). A closed connection's fd leaves pfd by itself. */
static void watch_sync(mkv_async *a) {
    if (a->pfd < 0) return;
    uint64_t id = __atomic_load_n(&a->watch_id, __ATOMIC_ACQUIRE);
    if (mkv_link_watch(a->c, a->pfd, &id)) __atomic_store_n(&a->watch_id, id, __ATOMIC_RELEASE);
}

/* DRAIN_READS: a face woken with no reply owed stops watching the link's
 * fd: faces on other threads share the connection (one a gateway loop),
 * and each of their replies would wake this one for nothing. Its next
 * send watches it again (watch_sync after the send counts itself owed,
 * under mu; an fd added while readable reports at once). 1 if idle. */
static int unwatch_idle(mkv_async *a) {
    pthread_mutex_lock(&a->mu);
    int idle = a->master_wait == 0;
    uint64_t id = __atomic_load_n(&a->watch_id, __ATOMIC_ACQUIRE);
    if (idle && id && mkv_link_unwatch(a->c, a->pfd, id)) {
        __atomic_compare_exchange_n(&a->watch_id, &id, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    pthread_mutex_unlock(&a->mu);
    return idle;
}

/* ---- for the steps (async_ops.c) ---- */

void mkv_async_finish(mkv_async *a, mkv_op *op) {
    if ((a->flags & MKV_ASYNC_INLINE) && submitting == a) {   /* done inside submit: the I/O thread calls back */
        pthread_mutex_lock(&a->mu);
        q_push(&a->late, op);
        pthread_mutex_unlock(&a->mu);
        efd_post(a->wake);
        return;
    }
    if (a->flags & MKV_ASYNC_INLINE) {
        if (op->done) op->done(op);
        pthread_mutex_lock(&a->mu);
        a->pending--;
    } else {
        pthread_mutex_lock(&a->mu);
        q_push(&a->done, op);
        if (draining != a) efd_post(a->efd);
    }
    if (--a->live == 0) pthread_cond_broadcast(&a->idle_cv);
    pthread_mutex_unlock(&a->mu);
}

void mkv_async_leg(mkv_async *a, mkv_ajob *j) {
    j->next = NULL;
    pthread_mutex_lock(&a->mu);
    if (a->legs_tail) a->legs_tail->next = j;
    else a->legs = j;
    a->legs_tail = j;
    pthread_cond_signal(&a->work_cv);
    pthread_mutex_unlock(&a->mu);
}

void mkv_async_out(mkv_async *a, mkv_out *out) {
    pthread_mutex_lock(&a->mu);
    mkv_leases_out(&a->leases, out);   /* MOON.RELEASE ahead of the command: no round trip of its own */
    pthread_mutex_unlock(&a->mu);
}

/* ---- etcd: sends repeated until a leader answers ---- */

/* As the blocking calls do under etcd (client.c): a send that found no
 * leader (nothing went out), or that a master no longer leading refused
 * (READONLY: it did nothing), goes again every LEADER_RETRY_MS until
 * timeout_ms; a reply lost after sending is not. */
typedef struct mkv_asend {
    mkv_async *a;
    mkv_out out;
    mkv_reply_fn *fn;
    void *arg;
    uint64_t deadline, due;
    int unsent;                /* the code of a post that sent nothing */
    struct mkv_asend *next;
} mkv_asend;

static __thread mkv_asend *posting;   /* the send this thread is posting */

static mkv_asend *asend_new(mkv_async *a, mkv_out *out, mkv_reply_fn *fn, void *arg) {
    mkv_asend *s = xcalloc(1, sizeof *s);
    *s = (mkv_asend){.a = a, .out = *out, .fn = fn, .arg = arg,
                     .deadline = mono_ms() + (uint64_t)a->c->timeout_ms};
    *out = (mkv_out){0};   /* s's now */
    return s;
}

static void asend_free(mkv_asend *s) {
    mkv_out_free(&s->out);
    free(s);
}

static void asend_later(mkv_asend *s) {
    mkv_async *a = s->a;
    s->due = mono_ms() + LEADER_RETRY_MS;
    pthread_mutex_lock(&a->mu);
    s->next = a->retry;
    a->retry = s;
    pthread_mutex_unlock(&a->mu);
    efd_post(a->wake);   /* the I/O thread may sleep with nothing else owed */
}

static int is_readonly(const redisReply *r) {
    return r && r->type == REDIS_REPLY_ERROR && proto_status_of_reply(r->str, r->len) == PROTO_READONLY;
}

static void asend_replied(void *arg, redisReply *r, int code) {
    mkv_asend *s = arg;
    if (posting == s && !r) {   /* nothing sent: asend_try decides */
        s->unsent = code;
        return;
    }
    if (is_readonly(r) && mono_ms() + LEADER_RETRY_MS < s->deadline) {
        freeReplyObject(r);
        mkv_link_retire(s->a->c);   /* a post after its replies asks etcd again */
        asend_later(s);
        return;
    }
    s->fn(s->arg, r, code);
    asend_free(s);
}

/* The bytes go from a copy of this thread's: s, and its out, may be
 * freed by the reply's callback on another thread before the send
 * returns here. */
static void asend_try(mkv_asend *s) {
    mkv_out mine = {0};
    mkv_out_append(&mine, &s->out);
    posting = s;
    s->unsent = MKV_OK;
    int rc = mkv_link_send(s->a->c, &mine, asend_replied, s, notify_fd(s->a));
    posting = NULL;
    mkv_out_free(&mine);
    if (rc == MKV_OK) return;   /* s is the link's now, maybe done already */
    if (mono_ms() + LEADER_RETRY_MS < s->deadline) {
        asend_later(s);
    } else {
        s->fn(s->arg, NULL, s->unsent ? s->unsent : rc);
        asend_free(s);
    }
}

/* The I/O thread: the sends due again. */
static void asend_due(mkv_async *a) {
    uint64_t now = mono_ms();
    mkv_asend *due = NULL;
    pthread_mutex_lock(&a->mu);
    for (mkv_asend **p = &a->retry; *p;) {
        mkv_asend *s = *p;
        if (s->due > now) {
            p = &s->next;
            continue;
        }
        *p = s->next;
        s->next = due;
        due = s;
    }
    pthread_mutex_unlock(&a->mu);
    for (mkv_asend *s, *next = due; (s = next);) {
        next = s->next;
        asend_try(s);
    }
}

/* A send that found no master (its connect failed or timed out) fails
 * those after it at once for DOWN_HOLD_MS: without this, each operation
 * of a stopped master's backlog would wait out a connect of its own.
 * Under etcd the send is repeated instead (above). */
static void send_now(mkv_async *a, mkv_out *out, mkv_reply_fn *fn, void *arg) {
    if (a->c->etcd) {
        asend_try(asend_new(a, out, fn, arg));
        return;
    }
    pthread_mutex_lock(&a->mu);
    int down = mono_ms() < a->down_until ? a->down_code : MKV_OK;
    pthread_mutex_unlock(&a->mu);
    if (down != MKV_OK) {
        mkv_out_free(out);
        fn(arg, NULL, down);
        return;
    }
    int rc = mkv_link_send(a->c, out, fn, arg, notify_fd(a));
    mkv_out_free(out);
    if (rc != MKV_OK) {
        pthread_mutex_lock(&a->mu);
        a->down_until = mono_ms() + DOWN_HOLD_MS;
        a->down_code = rc;
        pthread_mutex_unlock(&a->mu);
    }
}

/* The I/O thread serves the link once it knows the reply is owed: woken
 * only if it sleeps with nothing owed (else it reads the link, or waits
 * on it, and the reply or the queued waiter wakes it). */
static void wake_if_idle(mkv_async *a) {
    pthread_mutex_lock(&a->mu);
    int idle = a->io_idle;
    a->io_idle = 0;
    pthread_mutex_unlock(&a->mu);
    if (idle) efd_post(a->wake);
}

/* Inside submit: out goes on the wire from this thread while the link is
 * up (the I/O thread's wake-up then overlaps the round trip, and with
 * DRAIN_READS the drain reads the reply: no wake-up); else the I/O
 * thread sends it, in the order handed over, opening the link. */
static void send_direct(mkv_async *a, mkv_out *out, mkv_reply_fn *fn, void *arg) {
    mkv_asend *s = NULL;
    if (a->c->etcd) {   /* s keeps a copy to send again; the bytes go from out (as asend_try) */
        mkv_out copy = {0};
        mkv_out_append(&copy, out);
        s = asend_new(a, &copy, fn, arg);
    }
    int rc = s ? mkv_link_send_up(a->c, out, asend_replied, s, notify_fd(a))
               : mkv_link_send_up(a->c, out, fn, arg, notify_fd(a));
    if (rc == MKV_OK) {
        mkv_out_free(out);
        if (a->pfd >= 0) watch_sync(a);
        else wake_if_idle(a);
        return;
    }
    if (s) mkv_out_free(out);
    else s = asend_new(a, out, fn, arg);
    pthread_mutex_lock(&a->mu);
    *a->handoff_tail = s;
    a->handoff_tail = &s->next;
    pthread_mutex_unlock(&a->mu);
    efd_post(a->wake);
}

/* The I/O thread: the sends handed over, in order. */
static void handoff_run(mkv_async *a, mkv_asend *s) {
    for (mkv_asend *next; s; s = next) {
        next = s->next;
        s->next = NULL;
        if (a->c->etcd) {
            asend_try(s);
        } else {
            send_now(a, &s->out, s->fn, s->arg);
            free(s);
        }
    }
}

void mkv_async_send(mkv_async *a, mkv_out *out, mkv_reply_fn *fn, void *arg) {
    pthread_mutex_lock(&a->mu);
    a->master_wait++;
    pthread_mutex_unlock(&a->mu);
    if (submitting == a) return send_direct(a, out, fn, arg);
    send_now(a, out, fn, arg);
    efd_post(a->wake);   /* queued now: the I/O thread serves it */
}

void mkv_async_replied(mkv_async *a) {
    pthread_mutex_lock(&a->mu);
    if (--a->master_wait == 0 && a->closing) efd_post(a->wake);   /* closing waits for it */
    pthread_mutex_unlock(&a->mu);
}

void mkv_async_lease(mkv_async *a, const void *key, size_t keylen, uint64_t until) {
    pthread_mutex_lock(&a->mu);
    mkv_lease_keep(&a->leases, key, keylen, until);
    pthread_mutex_unlock(&a->mu);
}

/* ---- threads ---- */

/* Starts what was submitted and serves the master link while the face
 * waits for it; leaves once closing with nothing owed. */
static void *io_main(void *arg) {
    mkv_async *a = arg;
    for (;;) {
        efd_clear(a->wake);
        pthread_mutex_lock(&a->mu);
        mkv_opq q = a->todo, late = a->late;
        mkv_asend *h = a->handoff;
        a->todo = a->late = (mkv_opq){0};
        a->handoff = NULL;
        a->handoff_tail = &a->handoff;
        a->starting = q.head || h;
        pthread_mutex_unlock(&a->mu);
        handoff_run(a, h);   /* submitted before anything in q */
        for (mkv_op *op; (op = q_pop(&q));) mkv_aop_start(a, op);
        for (mkv_op *op; (op = q_pop(&late));) mkv_async_finish(a, op);
        asend_due(a);
        pthread_mutex_lock(&a->mu);
        a->starting = 0;
        size_t owed = a->master_wait;
        int stop = a->closing && !owed && !a->todo.head;
        a->io_idle = !owed && !stop;
        pthread_mutex_unlock(&a->mu);
        if (stop) break;
        if (owed && a->pfd >= 0) {   /* the drain reads; here what it left, and the timeouts */
            mkv_link_serve_now(a->c, -1, 1);
            watch_sync(a);
            struct pollfd p = {.fd = a->wake, .events = POLLIN};
            poll(&p, 1, IO_TICK_MS);
        } else if (owed) {
            mkv_link_serve(a->c, a->wake);
        } else {
            struct pollfd p = {.fd = a->wake, .events = POLLIN};
            poll(&p, 1, IO_IDLE_MS);
        }
    }
    return NULL;
}

/* Runs data legs: those of one kind queued in a row at once (one engine
 * batch for all their objects), up to MKV_ASYNC_LEG_BATCH. */
static void *leg_main(void *arg) {
    mkv_async *a = arg;
    mkv_ajob *jobs[MKV_ASYNC_LEG_BATCH];
    pthread_mutex_lock(&a->mu);
    for (;;) {
        if (!a->legs) {
            if (a->closing) break;
            pthread_cond_wait(&a->work_cv, &a->mu);
            continue;
        }
        size_t n = 0, objs = 0;
        do {
            objs += a->legs->objs;
            jobs[n++] = a->legs;
            a->legs = a->legs->next;
        } while (a->legs && a->legs->leg == jobs[0]->leg && n < MKV_ASYNC_LEG_BATCH &&
                 objs + a->legs->objs <= PROTO_MAX_BATCH);
        if (!a->legs) a->legs_tail = NULL;
        pthread_mutex_unlock(&a->mu);
        jobs[0]->leg(jobs, n);
        pthread_mutex_lock(&a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* ---- the face ---- */

int mkv_async_open(mkv_async **out, mkv_client *c, int threads, int flags) {
    if (!out || !c || threads < 0 || threads > MKV_ASYNC_MAX_THREADS ||
        (flags & ~(MKV_ASYNC_INLINE | MKV_ASYNC_DRAIN_READS)) ||
        (flags & (MKV_ASYNC_INLINE | MKV_ASYNC_DRAIN_READS)) == (MKV_ASYNC_INLINE | MKV_ASYNC_DRAIN_READS))
        return MKV_EINVAL;
    mkv_async *a = xcalloc(1, sizeof *a);
    a->c = c;
    a->flags = flags;
    a->efd = a->pfd = -1;
    a->handoff_tail = &a->handoff;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->work_cv, NULL);
    pthread_cond_init(&a->idle_cv, NULL);
    if ((a->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        (!(flags & MKV_ASYNC_INLINE) && (a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)) {
        int err = errno;
        mkv_async_close(a);
        return mkv_fail(c, MKV_ENOMEM, "eventfd: %s", strerror(err));
    }
    if ((flags & MKV_ASYNC_DRAIN_READS) && !c->route) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = a->efd};
        if ((a->pfd = epoll_create1(EPOLL_CLOEXEC)) < 0 || epoll_ctl(a->pfd, EPOLL_CTL_ADD, a->efd, &ev) != 0) {
            int err = errno;
            mkv_async_close(a);
            return mkv_fail(c, MKV_ENOMEM, "epoll: %s", strerror(err));
        }
    }
    if (c->route) {   /* the groups' faces run the parts: no thread of its own */
        a->route = mkv_route_face_new(a, threads);
        *out = a;
        return MKV_OK;
    }
    a->io_started = pthread_create(&a->io, NULL, io_main, a) == 0;
    int want = threads ? threads : c->core->max_lanes;
    for (int i = 0; a->io_started && i < want; i++)
        if (pthread_create(&a->threads[a->nthreads], NULL, leg_main, a) == 0) a->nthreads++;
    if (a->nthreads == 0) {
        mkv_async_close(a);
        return mkv_fail(c, MKV_ENOMEM, "no thread for the async face");
    }
    *out = a;
    return MKV_OK;
}

int mkv_async_fd(const mkv_async *a) { return !a ? -1 : a->pfd >= 0 ? a->pfd : a->efd; }

/* op started on this thread: its first master command sent from here
 * (send_direct), its early completion, if any, left to the I/O thread. */
static void start_here(mkv_async *a, mkv_op *op) {
    mkv_async *was = submitting;
    submitting = a;
    mkv_aop_start(a, op);
    submitting = was;
}

/* op counted as in flight, then started here while the master link is up
 * and nothing submitted before waits for the I/O thread (its commands go
 * out in submit order); else to the I/O thread (over a router: to its
 * groups' faces). */
static int enqueue(mkv_async *a, mkv_op *op) {
    int up = !a->route && mkv_link_up(a->c);
    pthread_mutex_lock(&a->mu);
    int rc = a->closing ? MKV_EINVAL : MKV_OK, here = 0;
    if (rc == MKV_OK) {
        here = up && !a->todo.head && !a->handoff && !a->starting;
        if (!a->route && !here) q_push(&a->todo, op);
        a->pending++;
        a->live++;
    }
    pthread_mutex_unlock(&a->mu);
    if (rc != MKV_OK) return rc;
    if (a->route) mkv_route_face_submit(a->route, op);
    else if (here) start_here(a, op);
    else efd_post(a->wake);
    return MKV_OK;
}

int mkv_async_submit(mkv_async *a, mkv_op *op) {
    if (!a || !op || (unsigned)op->kind > MKV_OP_STAT) return MKV_EINVAL;
    return enqueue(a, op);
}

int mkv_async_command(mkv_async *a, mkv_cmd_op *op, int argc, const char **argv, const size_t *lens) {
    if (!a || !op || argc < 1) return MKV_EINVAL;
    if (a->route) return mkv_route_refused(a->c, "a command of the caller's own on the async face");
    mkv_out *out = xcalloc(1, sizeof *out);
    mkv_out_add(out, argc, argv, lens);
    op->op.kind = MKV_OP_COMMAND_;
    op->reply = NULL;
    op->face = a;
    op->out = out;
    int rc = enqueue(a, &op->op);
    if (rc != MKV_OK) {
        mkv_out_free(out);
        free(out);
        op->out = NULL;
    }
    return rc;
}

static void lease_flush_done(mkv_op *op) {
    mkv_cmd_op *c = (mkv_cmd_op *)op;
    if (c->reply) freeReplyObject(c->reply);
    free(c);
}

int mkv_async_lease_flush(mkv_async *a) {
    if (!a || a->route) return 0;
    pthread_mutex_lock(&a->mu);
    int waiting = a->leases.n > 0;
    pthread_mutex_unlock(&a->mu);
    if (!waiting) return 0;
    /* a command of no words of its own: cmd_start puts the leases ahead
     * of nothing (or completes it unsent when another took them first) */
    mkv_cmd_op *c = xcalloc(1, sizeof *c);
    c->op.kind = MKV_OP_COMMAND_;
    c->op.done = lease_flush_done;
    c->face = a;
    c->out = xcalloc(1, sizeof(mkv_out));
    if (enqueue(a, &c->op) != MKV_OK) {
        free(c->out);
        free(c);
        return 0;
    }
    return 1;
}

uint64_t mkv_master_epoch(mkv_client *c) { return (uint64_t)mkv_link_connections(c); }

/* DRAIN_READS: pfd's ready edges taken, and efd read when it was posted
 * (level triggered: a post after the wait keeps pfd readable). */
static void edges_take(mkv_async *a) {
    struct epoll_event ev[2];
    int n;
    while ((n = epoll_wait(a->pfd, ev, 2, 0)) < 0 && errno == EINTR) {}
    for (int i = 0; i < n; i++)
        if (ev[i].data.fd == a->efd) efd_clear(a->efd);
}

/* DRAIN_READS: the replies that came read here, the face's callbacks run
 * (their ops, if done, join the queue drained next). A wake-up whose
 * replies this drain read leaves pfd's edge be: polling pfd finds the
 * link's fd no longer readable and drops it (one syscall a round trip
 * less). Any other (efd posted: a reply another thread read, an op done
 * there; or an edge whose bytes another reader took) takes the edges, so
 * pfd goes quiet, and runs what was posted before it did. */
static void drain_reads(mkv_async *a) {
    if (a->closing) {
        edges_take(a);
        return;
    }
    if (unwatch_idle(a)) {   /* nothing of ours to read: what was posted runs */
        edges_take(a);
        return;
    }
    watch_sync(a);
    mkv_async *was = draining;
    draining = a;
    if (mkv_link_serve_now(a->c, a->efd, 1) == 0) {
        edges_take(a);
        mkv_link_serve_now(a->c, a->efd, 0);
    }
    draining = was;
}

size_t mkv_async_drain(mkv_async *a) {
    if (!a || a->efd < 0) return 0;
    if (a->pfd >= 0) drain_reads(a);
    else efd_clear(a->efd);
    pthread_mutex_lock(&a->mu);
    mkv_opq q = a->done;
    a->done = (mkv_opq){0};
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
    while (a->live > 0 && (a->io_started || a->route)) pthread_cond_wait(&a->idle_cv, &a->mu);
    a->closing = 1;
    pthread_cond_broadcast(&a->work_cv);
    pthread_mutex_unlock(&a->mu);
    if (a->wake >= 0) efd_post(a->wake);
    if (a->io_started) pthread_join(a->io, NULL);   /* after the callbacks the link owed the face */
    for (int i = 0; i < a->nthreads; i++) pthread_join(a->threads[i], NULL);
    mkv_route_face_free(a->route);
    mkv_async_drain(a);   /* every op is done and queued */
    if (a->efd >= 0) close(a->efd);
    if (a->pfd >= 0) close(a->pfd);
    if (a->wake >= 0) close(a->wake);
    mkv_leases_free(&a->leases);   /* they expire on the master */
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->work_cv);
    pthread_cond_destroy(&a->idle_cv);
    free(a);
}
