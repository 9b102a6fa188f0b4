/* gateway/master_async.c - see master_async.h. hiredis's async context
 * on the loop's file events (the adapter is the ev callbacks below), or,
 * through etcd, the process's client's async face (the face section). */
#include "gateway/master_async.h"

#include <hiredis/async.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "client/moonkv_internal.h"
#include "core/log.h"
#include "core/util.h"
#include "proto/limits.h"
#include "proto/cmd.h"
#include "link/master_link.h"
#include "proto/reply_bound.h"
#include "resp/resp_writer.h"
#include "server/server.h"

#define MA_RETRY_MS 200        /* between connection attempts */
#define MA_TICK_MS  100        /* the reply deadline's check */
/* After the read and put batchers' sends (SERVER_HOOK_FLUSH + 1). */
#define MA_HOOK_FLUSH (SERVER_HOOK_FLUSH + 2)

struct master_async {
    event_loop *loop;
    redisAsyncContext *ac;     /* NULL: not connected */
    loop_timer *tick;
    char host[256];
    int port;
    char *password;
    char *secret;              /* proven on each connection (MOON.PROVE) */
    int timeout_ms;
    uint64_t last_try_ms;      /* the last connection attempt (0: none yet) */
    uint64_t progress_ms;     /* the last reply, or when the first pending was sent */
    size_t pending;            /* commands waiting for their reply */
    uint64_t epoch;
    resp_buf cmd;              /* the command being sent, formatted */
    loop_hook *flush;          /* writes what the iteration queued (flush_cb) */
    int want_write;            /* hiredis has output queued for flush_cb */
    int flushing;              /* inside flush_cb: a write wish arms the socket */
    /* Until the master accepts the proof, commands wait here, in order:
     * sent before MOON.PROVE they would be refused. */
    int proven;
    resp_buf held;             /* their formatted text, back to back */
    struct ma_held *hq;
    size_t nheld, capheld;
    /* Over the process's client (master_async_over): its async face. */
    mkv_client *mc;
    mkv_async *face;
    int closing;               /* being freed: what completes now gets NULL */
};

typedef struct ma_req {
    master_async *m;
    master_async_cb *cb;
    void *ctx;
} ma_req;

typedef struct ma_held {
    ma_req *q;
    size_t len;                /* of its text in held */
} ma_held;

/* ---- the loop adapter ---- */

static void ev_file(event_loop *el, int fd, void *data, int mask) {
    redisAsyncContext *ac = data;
    if (mask & LOOP_READABLE) redisAsyncHandleRead(ac);
    else redisAsyncHandleWrite(ac);
}

static void ev_add_read(void *p) {
    redisAsyncContext *ac = p;
    loop_add_file(((master_async *)ac->data)->loop, ac->c.fd, LOOP_READABLE, ev_file, ac);
}

static void ev_del_read(void *p) {
    redisAsyncContext *ac = p;
    loop_del_file(((master_async *)ac->data)->loop, ac->c.fd, LOOP_READABLE);
}

/* Commands queued on a connected link are written by flush_cb before
 * the loop waits, as Redis writes its replies: arming the socket for
 * writability instead costs two epoll_ctl and a wakeup per round. The
 * socket is armed only for a connect in progress or a write the socket
 * could not take whole. */
static void ev_add_write(void *p) {
    redisAsyncContext *ac = p;
    master_async *m = ac->data;
    if (!m->flushing && (ac->c.flags & REDIS_CONNECTED)) {
        m->want_write = 1;
        return;
    }
    loop_add_file(m->loop, ac->c.fd, LOOP_WRITABLE, ev_file, ac);
}

static void ev_del_write(void *p) {
    redisAsyncContext *ac = p;
    master_async *m = ac->data;
    m->want_write = 0;
    loop_del_file(m->loop, ac->c.fd, LOOP_WRITABLE);
}

/* hiredis closes the fd next: both events go in one call (loop.h). */
static void ev_cleanup(void *p) {
    redisAsyncContext *ac = p;
    master_async *m = ac->data;
    m->want_write = 0;
    loop_del_file(m->loop, ac->c.fd, LOOP_READABLE | LOOP_WRITABLE);
}

/* Before the loop waits (after the batchers queued their commands). */
static void flush_cb(event_loop *el, void *data) {
    master_async *m = data;
    if (!m->ac || !m->want_write) return;
    m->want_write = 0;
    m->flushing = 1;
    redisAsyncHandleWrite(m->ac);   /* may drop the link: m->ac is NULL then */
    m->flushing = 0;
}

/* ---- the connection ---- */

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata);

/* The link is gone: the commands held for it get NULL, as the ones
 * hiredis had do. Taken off first: a callback may send again. */
static void held_fail(master_async *m) {
    ma_held *hq = m->hq;
    size_t n = m->nheld;
    m->hq = NULL;
    m->nheld = m->capheld = 0;
    resp_buf_clear(&m->held);
    m->proven = 0;
    for (size_t i = 0; i < n; i++) on_reply(NULL, NULL, hq[i].q);
    free(hq);
}

/* The proof was accepted: the held commands go out, in order. */
static void held_send(master_async *m) {
    m->proven = 1;
    size_t off = 0, i = 0;
    for (; i < m->nheld && m->ac; off += m->hq[i++].len)
        if (redisAsyncFormattedCommand(m->ac, on_reply, m->hq[i].q, m->held.data + off, m->hq[i].len) != REDIS_OK)
            break;
    /* What could not be sent (the link broke meanwhile) fails. */
    for (size_t k = i; k < m->nheld; k++) on_reply(NULL, NULL, m->hq[k].q);
    m->nheld = 0;
    resp_buf_clear(&m->held);
}

static void link_lost(master_async *m, const redisAsyncContext *ac) {
    if (m->ac != ac) return;
    m->ac = NULL;
    held_fail(m);
}

static void on_connect(const redisAsyncContext *ac, int status) {
    master_async *m = ac->data;
    if (status == REDIS_OK) return;
    /* hiredis frees the context after this; no disconnect callback. */
    link_lost(m, ac);
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
    link_lost(ac->data, ac);
}

static void on_auth(redisAsyncContext *ac, void *reply, void *privdata) {
    const redisReply *r = reply;
    if (!r || r->type != REDIS_REPLY_ERROR) return;
    log_warning("gateway: the master refused AUTH: %s%s", r->str, proto_master_hint(r->str));
    redisAsyncDisconnect(ac);
}

static void on_prove(redisAsyncContext *ac, void *reply, void *privdata) {
    master_async *m = privdata;
    char err[256];
    if (!reply || m->ac != ac) return;   /* lost: held_fail ran or runs */
    if (proto_prove_accepted(reply, err, sizeof err)) {
        held_send(m);
        return;
    }
    log_warning("gateway: %s", err);
    redisAsyncDisconnect(ac);
}

static void on_challenge(redisAsyncContext *ac, void *reply, void *privdata) {
    master_async *m = privdata;
    char hex[2 * PROTO_PROOF_LEN + 1], err[256];
    /* lost, or refused AUTH (said already) */
    if (!reply || m->ac != ac || (ac->c.flags & REDIS_DISCONNECTING)) return;
    if (proto_prove_arg(reply, m->secret, hex, err, sizeof err) != 0) {
        log_warning("gateway: %s", err);
        redisAsyncDisconnect(ac);
        return;
    }
    proto_cmd cmd;
    proto_cmd_prove(&cmd, hex);
    redisAsyncCommandArgv(ac, on_prove, m, cmd.argc, cmd.argv, cmd.lens);
    proto_cmd_free(&cmd);
}

static int link_open(master_async *m) {
    uint64_t now = mono_ms();
    if (m->last_try_ms && now - m->last_try_ms < MA_RETRY_MS) return -1;
    m->last_try_ms = now;
    redisAsyncContext *ac = redisAsyncConnect(m->host, m->port);
    if (!ac) return -1;
    if (ac->err) {
        redisAsyncFree(ac);
        return -1;
    }
    proto_reader_bound(ac->c.reader);   /* like every reader of master replies */
    ac->data = m;
    ac->ev.data = ac;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    m->ac = ac;
    m->epoch++;
    if (m->password) {
        const char *argv[2] = {"AUTH", m->password};
        size_t lens[2] = {4, strlen(m->password)};
        redisAsyncCommandArgv(ac, on_auth, NULL, 2, argv, lens);
    }
    m->proven = 0;
    proto_cmd cmd;
    proto_cmd_bare(&cmd, PROTO_VERB_CHALLENGE);
    redisAsyncCommandArgv(ac, on_challenge, m, cmd.argc, cmd.argv, cmd.lens);
    proto_cmd_free(&cmd);
    return 0;
}

/* Also for held commands that never went out (ac NULL). */
static void on_reply(redisAsyncContext *ac, void *reply, void *privdata) {
    ma_req *q = privdata;
    master_async *m = q->m;
    m->pending--;
    m->progress_ms = mono_ms();
    q->cb(reply, q->ctx);
    free(q);
}

/* A master that stopped answering: drop the link, failing what waits. */
static void tick_cb(event_loop *el, void *data) {
    master_async *m = data;
    if (!m->ac || !m->pending || mono_ms() - m->progress_ms < (uint64_t)m->timeout_ms) return;
    log_warning("gateway: the master %s:%d did not answer within %d ms; reconnecting", m->host,
                m->port, m->timeout_ms);
    redisAsyncContext *ac = m->ac;
    m->ac = NULL;
    redisAsyncFree(ac);
    held_fail(m);
}

master_async *master_async_create(event_loop *loop, const char *hostport, const char *password,
                                  const char *secret, int timeout_ms) {
    master_async *m = xcalloc(1, sizeof *m);
    if (parse_hostport(hostport, m->host, sizeof m->host, &m->port) != 0) {
        free(m);
        return NULL;
    }
    m->loop = loop;
    m->password = password && *password ? xstrdup(password) : NULL;
    m->secret = xstrdup(secret ? secret : "");
    resp_buf_init(&m->held);
    m->timeout_ms = timeout_ms;
    resp_buf_init(&m->cmd);
    m->tick = loop_timer_create(loop, tick_cb, m);
    loop_timer_start(m->tick, MA_TICK_MS, MA_TICK_MS);
    m->flush = loop_hook_add(loop, MA_HOOK_FLUSH, flush_cb, m);
    return m;
}

/* q's command (in m->cmd) waits for the proof. */
static void hold(master_async *m, ma_req *q) {
    if (m->nheld == m->capheld) {
        m->capheld = m->capheld ? m->capheld * 2 : 16;
        m->hq = xrealloc(m->hq, m->capheld * sizeof *m->hq);
    }
    m->hq[m->nheld++] = (ma_held){q, m->cmd.len};
    resp_buf_append(&m->held, m->cmd.data, m->cmd.len);
}

/* ---- over the client's async face ---- */

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
    mkv_async_drain(m->face);
}

static int face_send(master_async *m, int argc, const char **argv, const size_t *lens, master_async_cb *cb,
                     void *ctx) {
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

master_async *master_async_over(event_loop *loop, mkv_client *mc) {
    master_async *m = xcalloc(1, sizeof *m);
    m->loop = loop;
    m->mc = mc;
    /* One thread for data legs, which these commands never use. */
    if (mkv_async_open(&m->face, mc, 1, 0) != MKV_OK) {
        free(m);
        return NULL;
    }
    loop_add_file(loop, mkv_async_fd(m->face), LOOP_READABLE, face_ready, m);
    return m;
}

int master_async_follows(const master_async *m) { return m->face != NULL; }

/* Waits for what is in flight (each within the client's timeout), whose
 * callbacks then get NULL. */
static void face_free(master_async *m) {
    m->closing = 1;
    loop_del_file(m->loop, mkv_async_fd(m->face), LOOP_READABLE);
    mkv_async_close(m->face);
    free(m);
}

/* ---- sending ---- */

int master_async_send(master_async *m, int argc, const char **argv, const size_t *lens,
                      master_async_cb *cb, void *ctx) {
    if (m->face) return face_send(m, argc, argv, lens, cb, ctx);
    if (!m->ac && link_open(m) != 0) return -1;
    ma_req *q = xmalloc(sizeof *q);
    *q = (ma_req){.m = m, .cb = cb, .ctx = ctx};
    /* Formatted here: hiredis's formatter costs a printf-style pass per
     * argument, and a batch has thousands. */
    resp_buf_clear(&m->cmd);
    resp_add_array(&m->cmd, argc);
    for (int i = 0; i < argc; i++) resp_add_bulk(&m->cmd, argv[i], lens[i]);
    if (!m->proven) {
        hold(m, q);
    } else if (redisAsyncFormattedCommand(m->ac, on_reply, q, m->cmd.data, m->cmd.len) != REDIS_OK) {
        free(q);
        return -1;
    }
    if (m->pending++ == 0) m->progress_ms = mono_ms();
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

int master_async_local_addr(master_async *m, struct sockaddr_storage *ss) {
    if (m->face) return -1;
    if (!m->ac && link_open(m) != 0) return -1;
    socklen_t sl = sizeof *ss;
    return getsockname(m->ac->c.fd, (struct sockaddr *)ss, &sl) == 0 ? 0 : -1;
}

/* Over the client: its connections (a command may go on one opened after). */
uint64_t master_async_epoch(const master_async *m) { return m->face ? mkv_master_epoch(m->mc) : m->epoch; }

void master_async_free(master_async *m) {
    if (!m) return;
    if (m->face) return face_free(m);
    if (m->ac) {
        redisAsyncContext *ac = m->ac;
        m->ac = NULL;
        redisAsyncFree(ac);   /* pending callbacks get NULL */
    }
    held_fail(m);
    loop_timer_free(m->tick);
    loop_hook_del(m->flush);
    resp_buf_free(&m->cmd);
    resp_buf_free(&m->held);
    free(m->hq);
    free(m->secret);
    free(m->password);
    free(m);
}
