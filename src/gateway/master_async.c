/* gateway/master_async.c - see master_async.h: commands on the process's
 * client's async face, their completions drained on the loop. */
#include "gateway/master_async.h"

#include <stdlib.h>
#include <string.h>

#include "client/moonkv_internal.h"
#include "core/util.h"
#include "proto/limits.h"

/* Read leases given back (master_async_release) wait at most this long,
 * and at most this many, for a command to ride ahead of before they go by
 * themselves (the face keeps a bounded list; past it they would expire). */
#define MA_LEASE_FLUSH_MS 5
#define MA_LEASES_WAITING PROTO_MAX_BATCH

struct master_async {
    event_loop *loop;
    mkv_client *mc;
    mkv_async *face;
    loop_timer *lease_flush;   /* armed while leases may wait for a command */
    size_t leases_waiting;     /* given back since a command of ours went (at least those waiting) */
    uint64_t wakeups;          /* the loop woken for the face's fd (INFO) */
    uint64_t lease_flushes;    /* leases that went by themselves (INFO) */
    int closing;               /* being freed: what completes now gets NULL */
};

typedef struct ma_cmd {
    mkv_cmd_op op;             /* first: the face's completion */
    master_async_cb *cb;
    void *ctx;
} ma_cmd;

/* On the loop, from mkv_async_drain. */
static void face_done(mkv_op *op) {
    ma_cmd *q = (ma_cmd *)op;
    master_async *m = op->ctx;
    redisReply *r = q->op.reply;
    q->cb(m->closing ? NULL : r, q->ctx);
    if (r) freeReplyObject(r);
    free(q);
}

static void face_ready(event_loop *el, int fd, void *data, int mask) {
    master_async *m = data;
    m->wakeups++;
    mkv_async_drain(m->face);
}

static void lease_flush_cb(event_loop *el, void *data) {
    master_async *m = data;
    m->leases_waiting = 0;
    m->lease_flushes += (uint64_t)mkv_async_lease_flush(m->face);
}

master_async *master_async_over(event_loop *loop, mkv_client *mc) {
    master_async *m = xcalloc(1, sizeof *m);
    m->loop = loop;
    m->mc = mc;
    /* One thread for data legs, which these commands never use; the
     * replies are read on the loop, in its drain (no thread hand-off). */
    if (mkv_async_open(&m->face, mc, 1, MKV_ASYNC_DRAIN_READS) != MKV_OK) {
        free(m);
        return NULL;
    }
    loop_add_file(loop, mkv_async_fd(m->face), LOOP_READABLE, face_ready, m);
    m->lease_flush = loop_timer_create(loop, lease_flush_cb, m);
    return m;
}

void master_async_release(master_async *m, const void *key, size_t keylen, uint64_t until) {
    if (!until || m->closing) return;
    mkv_async_lease(m->face, key, keylen, until);
    if (++m->leases_waiting >= MA_LEASES_WAITING) {
        loop_timer_stop(m->lease_flush);
        lease_flush_cb(m->loop, m);
    } else if (!loop_timer_active(m->lease_flush)) {
        loop_timer_start(m->lease_flush, MA_LEASE_FLUSH_MS, 0);
    }
}

uint64_t master_async_lease_flushes(const master_async *m) { return m ? m->lease_flushes : 0; }

uint64_t master_async_wakeups(const master_async *m) { return m ? m->wakeups : 0; }

int master_async_send(master_async *m, int argc, const char **argv, const size_t *lens,
                      master_async_cb *cb, void *ctx) {
    m->leases_waiting = 0;   /* the face sends the waiting leases ahead of it */
    ma_cmd *q = xcalloc(1, sizeof *q);
    q->cb = cb;
    q->ctx = ctx;
    q->op.op.done = face_done;
    q->op.op.ctx = m;
    if (m->closing || mkv_async_command(m->face, &q->op, argc, argv, lens) != MKV_OK) {
        free(q);
        return -1;
    }
    return 0;
}

size_t master_async_send_batch(master_async *m, const char *const *head, int nhead, size_t n,
                               int per_item, ma_item_fn *item, void *owner, ma_chunk **chunks,
                               master_async_cb *cb, int *failed) {
    size_t per_cmd = n < PROTO_MAX_BATCH ? n : PROTO_MAX_BATCH, sent = 0;
    size_t max_args = (size_t)nhead + (size_t)per_item * (per_cmd ? per_cmd : 1);
    const char **argv = xcalloc(max_args, sizeof *argv);
    size_t *lens = xcalloc(max_args, sizeof *lens);
    char (*num)[24] = xcalloc(max_args, sizeof *num);
    *chunks = xcalloc(n / PROTO_MAX_BATCH + 1, sizeof **chunks);
    for (int a = 0; a < nhead; a++) {
        argv[a] = head[a];
        lens[a] = strlen(head[a]);
    }
    for (size_t i = 0; i < n && !*failed;) {
        ma_chunk *ch = &(*chunks)[sent];
        *ch = (ma_chunk){.owner = owner, .first = i};
        for (size_t a = (size_t)nhead; i < n && ch->n < PROTO_MAX_BATCH; i++, ch->n++, a += (size_t)per_item)
            item(owner, i, argv + a, lens + a, num + a);
        int argc = nhead + per_item * (int)ch->n;
        if (!m || master_async_send(m, argc, argv, lens, cb, ch) != 0) *failed = 1;
        else sent++;
    }
    free(argv);
    free(lens);
    free(num);
    return sent;
}

mkv_async *master_async_face(master_async *m) { return m->face; }

int master_async_local_addr(master_async *m, struct sockaddr_storage *ss) {
    return mkv_master_local_addr(m->mc, ss) == MKV_OK ? 0 : -1;
}

uint64_t master_async_epoch(const master_async *m) { return mkv_master_epoch(m->mc); }

void master_async_free(master_async *m) {
    if (!m) return;
    m->closing = 1;
    loop_timer_free(m->lease_flush);
    mkv_async_lease_flush(m->face);   /* before it closes: on the master at once, not at their expiry */
    loop_del_file(m->loop, mkv_async_fd(m->face), LOOP_READABLE);
    mkv_async_close(m->face);
    free(m);
}
