/* server/io_threads.c - see io_threads.h.
 *
 * A handed-off connection goes through a small locked list and a wake of
 * the receiving loop; only that loop's thread then touches it. The other
 * loops are set up on the caller's thread before their threads start and
 * torn down after they are joined, so setup code needs no locking. */
#include "server/io_threads.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/util.h"

typedef struct handoff {
    int fd;
    struct sockaddr_storage peer;
    struct handoff *next;
} handoff;

typedef struct io_thread {
    server srv;
    const io_role *role;
    pthread_t tid;
    int running;                   /* its thread was started */
    loop_wake *adopt, *stop;
    pthread_mutex_t mu;
    handoff *head, *tail;          /* connections for this loop, under mu */
} io_thread;

struct io_threads {
    server *first;
    int n;                         /* loops, the first included */
    int nready;                    /* of t[], how many were set up */
    unsigned next;                 /* round robin over the n loops */
    io_thread *t;                  /* the n - 1 others */
};

static handoff *take_all(io_thread *t) {
    pthread_mutex_lock(&t->mu);
    handoff *h = t->head;
    t->head = t->tail = NULL;
    pthread_mutex_unlock(&t->mu);
    return h;
}

static void adopt_cb(event_loop *el, void *data) {
    io_thread *t = data;
    for (handoff *h = take_all(t), *next; h; h = next) {
        next = h->next;
        server_adopt(&t->srv, h->fd, &h->peer);
        free(h);
    }
}

static void stop_cb(event_loop *el, void *data) { loop_stop(el); }

static void *thread_main(void *arg) {
    io_thread *t = arg;
    loop_run(t->srv.loop);
    return NULL;
}

/* After the thread (if any) is gone: close what never got adopted. */
static void thread_free(io_thread *t, int set_up) {
    for (handoff *h = take_all(t), *next; h; h = next) {
        next = h->next;
        close(h->fd);
        free(h);
    }
    loop_wake_free(t->adopt);
    loop_wake_free(t->stop);
    if (set_up && t->role->teardown) t->role->teardown(&t->srv);
    server_cleanup(&t->srv);
    pthread_mutex_destroy(&t->mu);
}

static int thread_setup(io_threads *io, io_thread *t, int index, char *err, size_t errlen) {
    mkv_config cfg = io->first->cfg;
    cfg.metrics_port = 0;   /* one /metrics endpoint, the first loop's */
    if (server_init(&t->srv, &cfg, err, errlen) < 0) {
        server_cleanup(&t->srv);
        return -1;
    }
    t->srv.io_thread = index;
    pthread_mutex_init(&t->mu, NULL);
    t->adopt = loop_wake_create(t->srv.loop, adopt_cb, t);
    t->stop = loop_wake_create(t->srv.loop, stop_cb, t);
    if (t->role->setup(&t->srv, err, errlen) < 0) {
        thread_free(t, 0);
        return -1;
    }
    return 0;
}

io_threads *io_threads_start(server *first, const io_role *role, char *err, size_t errlen) {
    io_threads *io = xcalloc(1, sizeof *io);
    io->first = first;
    io->n = first->cfg.io_threads;
    io->t = xcalloc((size_t)io->n - 1, sizeof *io->t);
    for (int i = 1; i < io->n; i++) {
        io_thread *t = &io->t[i - 1];
        t->role = role;
        if (thread_setup(io, t, i, err, errlen) < 0) {
            io_threads_stop(io);
            return NULL;
        }
        io->nready++;
        int rc = pthread_create(&t->tid, NULL, thread_main, t);
        if (rc != 0) {
            snprintf(err, errlen, "cannot start I/O thread %d: %s", i, strerror(rc));
            io_threads_stop(io);
            return NULL;
        }
        t->running = 1;
    }
    first->io = io;
    log_notice("%d I/O threads: connections are spread over %d event loops", io->n, io->n);
    return io;
}

void io_threads_stop(io_threads *io) {
    if (!io) return;
    io->first->io = NULL;
    for (int i = 0; i < io->nready; i++)
        if (io->t[i].running) loop_wake_send(io->t[i].stop);
    for (int i = 0; i < io->nready; i++) {
        io_thread *t = &io->t[i];
        if (t->running) pthread_join(t->tid, NULL);
        thread_free(t, 1);
    }
    free(io->t);
    free(io);
}

int io_threads_handoff(io_threads *io, int fd, const struct sockaddr_storage *peer) {
    unsigned k = io->next++ % (unsigned)io->n;
    if (k == 0) return 0;
    io_thread *t = &io->t[k - 1];
    handoff *h = xcalloc(1, sizeof *h);
    h->fd = fd;
    h->peer = *peer;
    pthread_mutex_lock(&t->mu);
    if (t->tail) t->tail->next = h;
    else t->head = h;
    t->tail = h;
    pthread_mutex_unlock(&t->mu);
    loop_wake_send(t->adopt);
    return 1;
}
