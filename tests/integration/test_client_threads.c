/* test_client_threads - one mkv_client shared by threads (issue 27).
 *
 * Threads call put, get, batch put/get, exists and remove on one client
 * at once, each on keys of its own, and check every byte that comes
 * back. Before the shared core, two threads doing put/get/remove of
 * 256 KiB on one client aborted (SIGABRT: hiredis's reply reader of the
 * one master connection driven from two threads). Run over TCP and over
 * the same-host path (shm), against a master and two nodes of this
 * harness; also under TSan (TSAN_TESTS). The asynchronous face
 * (moonkv_async.h) is tested here too: operations submitted from one
 * thread complete on the eventfd (drained by the test as an event loop
 * would) or by callback on the library's threads. Ports: one block of
 * h_free_ports, taken first in main(). */
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"   /* the core's counters: master connections, engine contexts */
#include "client/moonkv.h"
#include "client/moonkv_async.h"
#include "client/moonkv_internal.h"   /* mkv_async_command: a caller's own command on the face */
#include "cluster_harness.h"
#include "proto/cmd.h"
#include "test.h"

static int port0;
static char master_addr[32];
#define PORT_MASTER (port0 + 0)
#define PORT_NODE   (port0 + 1)   /* and +2: two nodes */
#define PORT_DATA   (port0 + 3)   /* and +4 */

#define VAL     (256u << 10)      /* the size */
#define BATCH   4
#define SMALL   (20u << 10)

static const char *transport = "tcp";
static int lanes;                 /* mkv_options.lanes of the next client (0: default) */
static int run_no;                /* keys of each run are its own */

typedef struct worker {
    mkv_client *c;
    int id, rounds;
    int failures;                 /* calls that failed or bytes that differed */
    char why[200];                /* the first of them */
} worker;

static void failed(worker *w, const char *what, int rc) {
    if (!w->failures++)
        snprintf(w->why, sizeof w->why, "thread %d: %s: %s (%s)", w->id, what, mkv_strerror(rc),
                 mkv_last_error(w->c));
}

/* One object of VAL + round bytes (sizes off the slice grid): put, exists,
 * get byte-exact, remove, then gone. */
static void one_object(worker *w, int r, unsigned char *src, unsigned char *dst) {
    char key[64];
    int n = snprintf(key, sizeof key, "thr:%d:%d:%d", run_no, w->id, r);
    size_t len = VAL + (size_t)r * 13, got = 0;
    h_fill(src, len, (uint64_t)(w->id * 1000 + r));
    memset(dst, 0, len);
    int rc = mkv_put(w->c, key, (size_t)n, src, len, 0);
    if (rc != MKV_OK) return failed(w, "put", rc);
    if ((rc = mkv_exists(w->c, key, (size_t)n)) != 1) return failed(w, "exists after put", rc);
    if ((rc = mkv_get(w->c, key, (size_t)n, dst, VAL * 2, &got)) != MKV_OK) return failed(w, "get", rc);
    if (got != len || memcmp(src, dst, len) != 0) return failed(w, "get: bytes differ", MKV_ECORRUPT);
    if ((rc = mkv_remove(w->c, key, (size_t)n)) != MKV_OK) return failed(w, "remove", rc);
    if ((rc = mkv_get(w->c, key, (size_t)n, dst, VAL * 2, &got)) != MKV_ENOTFOUND)
        return failed(w, "get after remove", rc);
}

/* BATCH objects of a few KiB: batch put, batch exists, batch get
 * byte-exact, removed one by one. */
static void one_batch(worker *w, int r, unsigned char *src, unsigned char *dst) {
    char keys[BATCH][64];
    mkv_obj o[BATCH];
    int present[BATCH];
    for (int i = 0; i < BATCH; i++) {
        int n = snprintf(keys[i], sizeof keys[i], "thr:%d:%d:%d:b%d", run_no, w->id, r, i);
        size_t len = SMALL + (size_t)(i * 977 + r);
        h_fill(src + (size_t)i * 2 * SMALL, len, (uint64_t)(w->id * 7919 + r * 31 + i));
        o[i] = (mkv_obj){.key = keys[i], .keylen = (size_t)n, .buf = src + (size_t)i * 2 * SMALL, .len = len};
    }
    int rc = mkv_put_batch(w->c, o, BATCH, 0);
    for (int i = 0; rc == MKV_OK && i < BATCH; i++) rc = o[i].status;
    if (rc != MKV_OK) return failed(w, "put_batch", rc);
    if ((rc = mkv_exists_batch(w->c, o, BATCH, present)) != MKV_OK) return failed(w, "exists_batch", rc);
    for (int i = 0; i < BATCH; i++)
        if (!present[i]) return failed(w, "exists_batch: missing", MKV_ENOTFOUND);
    mkv_obj g[BATCH];
    for (int i = 0; i < BATCH; i++)
        g[i] = (mkv_obj){.key = o[i].key, .keylen = o[i].keylen, .buf = dst + (size_t)i * 2 * SMALL, .len = 2 * SMALL};
    if ((rc = mkv_get_batch(w->c, g, BATCH)) != MKV_OK) return failed(w, "get_batch", rc);
    for (int i = 0; i < BATCH; i++) {
        if (g[i].status != MKV_OK) return failed(w, "get_batch: object", g[i].status);
        if (g[i].len != o[i].len || memcmp(g[i].buf, o[i].buf, o[i].len) != 0)
            return failed(w, "get_batch: bytes differ", MKV_ECORRUPT);
    }
    for (int i = 0; i < BATCH; i++)
        if ((rc = mkv_remove(w->c, o[i].key, o[i].keylen)) != MKV_OK) return failed(w, "remove (batch)", rc);
}

/* Each thread registers buffers of its own on the shared client (at once
 * with the others), works through its rounds, and unregisters them. */
static void *work(void *arg) {
    worker *w = arg;
    size_t room = VAL * 2;
    unsigned char *src = malloc(room), *dst = malloc(room);
    int rc = mkv_register_buffer(w->c, src, room);
    if (rc == MKV_OK) rc = mkv_register_buffer(w->c, dst, room);
    if (rc != MKV_OK) failed(w, "register", rc);
    for (int r = 0; rc == MKV_OK && r < w->rounds && !w->failures; r++) {
        one_object(w, r, src, dst);
        if (!w->failures) one_batch(w, r, src, dst);
    }
    mkv_unregister_buffer(w->c, src);
    mkv_unregister_buffer(w->c, dst);
    free(src);
    free(dst);
    return NULL;
}

/* What the last threads_on_one_client saw of its client before closing it. */
static int last_conns, last_contexts, last_same_engine;
static long long last_master_clients;   /* the master's connected_clients beside the test's own */

/* n threads on one client, rounds each: every call succeeded and every
 * byte came back. */
static void threads_on_one_client(int n, int rounds) {
    mkv_options opt;
    mkv_options_init(&opt);
    opt.master = master_addr;
    opt.transport = transport;
    opt.lanes = lanes;
    /* No case waits for a timeout: the default 5 s per call is what TSan
     * builds overlapping on a loaded machine missed (MKV_ETIMEDOUT). */
    opt.timeout_ms = 30000;
    mkv_client *c = NULL;
    run_no++;
    ASSERT_MSG(mkv_connect(&c, &opt) == MKV_OK, "connect: %s", mkv_last_error(NULL));
    worker w[8];
    pthread_t t[8];
    for (int i = 0; i < n; i++) {
        w[i] = (worker){.c = c, .id = i, .rounds = rounds};
        pthread_create(&t[i], NULL, work, &w[i]);
    }
    int failures = 0;
    const char *why = "";
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        if (w[i].failures && !failures) why = w[i].why;
        failures += w[i].failures;
    }
    last_conns = mkv_link_connections(c);
    last_contexts = te_engine_contexts(c->core->engine);
    last_same_engine = 1;
    for (int i = 0; i < c->core->nlanes; i++) last_same_engine &= c->core->lanes[i]->engine == c->core->engine;
    redisContext *m = h_redis(PORT_MASTER);
    last_master_clients = m ? h_info_field(m, "clients", "connected_clients") : -1;
    if (m) redisFree(m);
    mkv_close(c);
    ASSERT_MSG(failures == 0, "%d failures; first: %s", failures, why);
}

/* The reproduction: two threads, put/get/remove of 256 KiB. */
static void test_two_threads_256k(void) { threads_on_one_client(2, 6); }

/* Eight threads doing every kind of call at once. */
static void test_eight_threads_mixed(void) { threads_on_one_client(8, 4); }

/* Eight threads on one client share ONE master connection (their
 * commands pipelined on it) and one engine whose contexts are at most
 * the lanes: the client's own count of connections it opened, and the
 * master's count of connections while it is open against after it
 * closed (the nodes' links and the test's own are the rest). */
static void test_eight_threads_one_connection(void) {
    threads_on_one_client(8, 3);
    ASSERT_EQ(last_conns, 1);
    ASSERT_MSG(last_contexts >= 1 && last_contexts <= MKV_DEFAULT_LANES, "engine contexts %d", last_contexts);
    ASSERT(last_same_engine);
    /* The master counts connections of nodes too: compare with it closed,
     * allowing a few tries for a node link that is reconnecting. */
    long long open = last_master_clients, closed = -1;
    for (int tries = 0; tries < 50 && open - closed != 1; tries++) {
        redisContext *m = h_redis(PORT_MASTER);
        closed = m ? h_info_field(m, "clients", "connected_clients") : -1;
        if (m) redisFree(m);
        if (open - closed != 1) usleep(100 * 1000);
    }
    ASSERT_MSG(open - closed == 1, "master connected_clients %lld with the client open, %lld closed", open, closed);
}

/* One lane for four threads: every call but one at a time waits for it. */
static void test_one_lane_four_threads(void) {
    lanes = 1;
    threads_on_one_client(4, 3);
    lanes = 0;
}

/* A lane count past the bound is refused. */
static void test_lanes_bound(void) {
    mkv_options opt;
    mkv_options_init(&opt);
    opt.master = master_addr;
    opt.lanes = 17;
    mkv_client *c = NULL;
    ASSERT_EQ(mkv_connect(&c, &opt), MKV_EINVAL);
    ASSERT(strstr(mkv_last_error(NULL), "lanes") != NULL);
}

/* A client of the master with the default options, or NULL. */
static mkv_client *connect_default(void) {
    mkv_options opt;
    mkv_options_init(&opt);
    opt.master = master_addr;
    mkv_client *c = NULL;
    return mkv_connect(&c, &opt) == MKV_OK ? c : NULL;
}

/* ---- the asynchronous face ---- */

#define AOPS 16

/* Done callbacks run (inline: from the library's threads): the first
 * member of each test's run, op->ctx. */
typedef struct done_count {
    int called;
    pthread_mutex_t mu;
} done_count;

static void count_done(mkv_op *op) {
    done_count *d = op->ctx;
    pthread_mutex_lock(&d->mu);
    d->called++;
    pthread_mutex_unlock(&d->mu);
}

static int count_of(done_count *d) {
    pthread_mutex_lock(&d->mu);
    int n = d->called;
    pthread_mutex_unlock(&d->mu);
    return n;
}

typedef struct async_run {
    done_count dc;               /* first */
    mkv_op ops[AOPS];
    char keys[AOPS][48];
    unsigned char *src, *dst;    /* AOPS values of VAL bytes each, registered */
} async_run;

/* Every op of r of kind k submitted (gets into dst, the rest from src). */
static int submit_all(mkv_async *a, async_run *r, mkv_op_kind k) {
    for (int i = 0; i < AOPS; i++) {
        mkv_op *op = &r->ops[i];
        *op = (mkv_op){.kind = k, .key = r->keys[i], .keylen = strlen(r->keys[i]), .done = count_done, .ctx = r};
        op->buf = (k == MKV_OP_GET ? r->dst : r->src) + (size_t)i * VAL;
        op->len = VAL - (size_t)i;
        int rc = mkv_async_submit(a, op);
        if (rc != MKV_OK) return rc;
    }
    return MKV_OK;
}

/* Until want callbacks of d ran: queued mode polls the fd and drains
 * (the event loop's part), inline mode just looks. Bounded: 60 s. */
static int wait_count(mkv_async *a, done_count *d, int want) {
    for (int waited = 0; count_of(d) < want && waited < 60000; waited += 100) {
        struct pollfd p = {.fd = mkv_async_fd(a), .events = POLLIN};
        if (p.fd < 0) usleep(100000);
        else if (poll(&p, 1, 100) > 0) mkv_async_drain(a);
    }
    return count_of(d);
}

static int wait_called(mkv_async *a, async_run *r, int want) { return wait_count(a, &r->dc, want); }

static int all_status(async_run *r, int want) {
    for (int i = 0; i < AOPS; i++)
        if (r->ops[i].status != want) return r->ops[i].status == MKV_OK ? MKV_EPROTO : r->ops[i].status;
    return want;
}

/* AOPS puts, gets (byte-exact), exists and removes submitted at once from
 * this thread, each round completing before the next is submitted. */
static void async_rounds(int flags) {
    mkv_options opt;
    mkv_options_init(&opt);
    opt.master = master_addr;
    opt.transport = transport;
    mkv_client *c = NULL;
    ASSERT_MSG(mkv_connect(&c, &opt) == MKV_OK, "connect: %s", mkv_last_error(NULL));
    async_run *r = calloc(1, sizeof *r);
    pthread_mutex_init(&r->dc.mu, NULL);
    r->src = malloc((size_t)AOPS * VAL);
    r->dst = calloc(AOPS, VAL);
    run_no++;
    for (int i = 0; i < AOPS; i++) snprintf(r->keys[i], sizeof r->keys[i], "async:%d:%d", run_no, i);
    h_fill(r->src, (size_t)AOPS * VAL, (uint64_t)run_no);
    mkv_async *a = NULL;
    int rc = mkv_register_buffer(c, r->src, (size_t)AOPS * VAL);
    if (rc == MKV_OK) rc = mkv_register_buffer(c, r->dst, (size_t)AOPS * VAL);
    if (rc == MKV_OK) rc = mkv_async_open(&a, c, 4, flags);
    int put = -1, got = -1, exist = -1, removed = -1, same = 1, nfd = a ? mkv_async_fd(a) : -1;
    if (rc == MKV_OK && (rc = submit_all(a, r, MKV_OP_PUT)) == MKV_OK && wait_called(a, r, AOPS) == AOPS)
        put = all_status(r, MKV_OK);
    if (put == MKV_OK && (rc = submit_all(a, r, MKV_OP_GET)) == MKV_OK && wait_called(a, r, 2 * AOPS) == 2 * AOPS) {
        got = all_status(r, MKV_OK);
        for (int i = 0; got == MKV_OK && i < AOPS; i++)
            same &= r->ops[i].len == VAL - (size_t)i &&
                    memcmp(r->src + (size_t)i * VAL, r->dst + (size_t)i * VAL, VAL - (size_t)i) == 0;
    }
    if (got == MKV_OK && (rc = submit_all(a, r, MKV_OP_EXISTS)) == MKV_OK && wait_called(a, r, 3 * AOPS) == 3 * AOPS)
        exist = all_status(r, 1);
    if (exist == 1 && (rc = submit_all(a, r, MKV_OP_REMOVE)) == MKV_OK && wait_called(a, r, 4 * AOPS) == 4 * AOPS)
        removed = all_status(r, MKV_OK);
    size_t pending = a ? mkv_async_pending(a) : 0;
    mkv_async_close(a);
    mkv_close(c);
    free(r->src);
    free(r->dst);
    free(r);
    ASSERT_MSG(rc == MKV_OK, "setup or submit: %s (%s)", mkv_strerror(rc), mkv_last_error(NULL));
    ASSERT_EQ(put, MKV_OK);
    ASSERT_EQ(got, MKV_OK);
    ASSERT(same);
    ASSERT_EQ(exist, 1);
    ASSERT_EQ(removed, MKV_OK);
    ASSERT_EQ(pending, 0);
    if (flags & MKV_ASYNC_INLINE) ASSERT_EQ(nfd, -1);
    else ASSERT(nfd >= 0);
}

static void test_async_queued(void) { async_rounds(0); }

static void test_async_drain_reads(void) { async_rounds(MKV_ASYNC_DRAIN_READS); }

static void test_async_inline(void) { async_rounds(MKV_ASYNC_INLINE); }

/* A drain from the done callback's own submission: an operation
 * submitted from done (as an event loop chains requests) runs too, and
 * close waits for it. Also: a bad kind is refused. */
static int chained;
static void chain_done(mkv_op *op) {
    chained++;
    if (chained < 3) mkv_async_submit(op->ctx, op);   /* the same exists, again */
}

static void test_async_chain_and_close(void) {
    mkv_client *c = connect_default();
    ASSERT_MSG(c, "connect: %s", mkv_last_error(NULL));
    mkv_async *a = NULL;
    ASSERT_EQ(mkv_async_open(&a, c, 0, 0), MKV_OK);
    mkv_op bad = {.kind = (mkv_op_kind)99};
    int bad_rc = mkv_async_submit(a, &bad);
    mkv_op op = {.kind = MKV_OP_EXISTS, .key = "async:none", .keylen = 10, .done = chain_done, .ctx = a};
    chained = 0;
    int rc = mkv_async_submit(a, &op);
    for (int waited = 0; rc == MKV_OK && chained < 3 && waited < 60000; waited += 100) {
        struct pollfd p = {.fd = mkv_async_fd(a), .events = POLLIN};
        if (poll(&p, 1, 100) > 0) mkv_async_drain(a);
    }
    mkv_async_close(a);
    mkv_close(c);
    ASSERT_EQ(bad_rc, MKV_EINVAL);
    ASSERT_EQ(rc, MKV_OK);
    ASSERT_EQ(chained, 3);
    ASSERT_EQ(op.status, 0);   /* no such key */
}

/* A caller's own commands on the face (mkv_async_command, the gateway's
 * way through etcd), in flight at once with the face's operations: each
 * completes once, in the queue, with its own reply (MOON.EXISTS of a key
 * put: 1; of one never put: 0), the face's exists likewise. */
#define CMDS 64

typedef struct cmd_run {
    done_count dc;               /* first */
    mkv_cmd_op cmd[CMDS];
    mkv_op ops[CMDS];
    char keys[CMDS][32];
} cmd_run;

static void test_async_command(void) {
    mkv_client *c = connect_default();
    ASSERT_MSG(c, "connect: %s", mkv_last_error(NULL));
    cmd_run *r = calloc(1, sizeof *r);
    pthread_mutex_init(&r->dc.mu, NULL);
    char *val = malloc(64);
    memset(val, 'v', 64);
    int rc = mkv_register_buffer(c, val, 64);
    for (int i = 0; i < CMDS; i++) {
        snprintf(r->keys[i], sizeof r->keys[i], "acmd:%d:%d", (int)getpid(), i);
        if (rc == MKV_OK && i % 2 == 0) rc = mkv_put(c, r->keys[i], strlen(r->keys[i]), val, 64, 1);
    }
    mkv_async *a = NULL;
    if (rc == MKV_OK) rc = mkv_async_open(&a, c, 1, 0);
    for (int i = 0; rc == MKV_OK && i < CMDS; i++) {
        proto_cmd cmd;
        proto_cmd_key(&cmd, PROTO_VERB_EXISTS, r->keys[i], strlen(r->keys[i]));
        r->cmd[i].op = (mkv_op){.done = count_done, .ctx = r};
        rc = mkv_async_command(a, &r->cmd[i], cmd.argc, cmd.argv, cmd.lens);
        proto_cmd_free(&cmd);
        r->ops[i] = (mkv_op){.kind = MKV_OP_EXISTS, .key = r->keys[i], .keylen = strlen(r->keys[i]),
                             .done = count_done, .ctx = r};
        if (rc == MKV_OK) rc = mkv_async_submit(a, &r->ops[i]);
    }
    int called = rc == MKV_OK ? wait_count(a, &r->dc, 2 * CMDS) : -1, replied = 0, exists = 0;
    for (int i = 0; called == 2 * CMDS && i < CMDS; i++) {
        redisReply *x = r->cmd[i].reply;
        replied += r->cmd[i].op.status == MKV_OK && x && x->type == REDIS_REPLY_INTEGER && x->integer == (i % 2 == 0);
        exists += r->ops[i].status == (i % 2 == 0);
    }
    for (int i = 0; i < CMDS; i++)
        if (r->cmd[i].reply) freeReplyObject(r->cmd[i].reply);
    size_t pending = a ? mkv_async_pending(a) : 1;
    mkv_async_close(a);
    mkv_close(c);
    free(val);
    free(r);
    ASSERT_MSG(rc == MKV_OK, "setup or submit: %s", mkv_strerror(rc));
    ASSERT_EQ(called, 2 * CMDS);
    ASSERT_EQ(replied, CMDS);
    ASSERT_EQ(exists, CMDS);
    ASSERT_EQ(pending, 0);
}

/* ---- the async face: every operation in flight at once ---- */

#define MANY     256
#define MANY_VAL 4096

/* Up to 3 * MANY operations of one face, and their callbacks counted. */
typedef struct many_run {
    done_count dc;               /* first */
    mkv_op ops[3 * MANY];
    char keys[MANY][48];
    unsigned char *src, *dst;    /* MANY values of MANY_VAL bytes each, registered */
} many_run;

static int many_called(many_run *r) { return count_of(&r->dc); }

/* MANY operations of kind k into ops[at..], one per key, submitted at
 * once: values of their own size (MANY_VAL - i) from src, gets into dst. */
static int many_submit(mkv_async *a, many_run *r, int at, mkv_op_kind k) {
    for (int i = 0; i < MANY; i++) {
        mkv_op *op = &r->ops[at + i];
        *op = (mkv_op){.kind = k, .key = r->keys[i], .keylen = strlen(r->keys[i]), .done = count_done, .ctx = r};
        op->buf = (k == MKV_OP_GET ? r->dst : r->src) + (size_t)i * MANY_VAL;
        op->len = k == MKV_OP_GET ? MANY_VAL : MANY_VAL - (size_t)i;
        int rc = mkv_async_submit(a, op);
        if (rc != MKV_OK) return rc;
    }
    return MKV_OK;
}

/* Until want callbacks ran, draining the fd as an event loop; bounded by
 * ms. How many ran. */
static int many_wait(mkv_async *a, many_run *r, int want, int ms) {
    uint64_t end = mono_ms() + (uint64_t)ms;
    while (many_called(r) < want && mono_ms() < end) {
        struct pollfd p = {.fd = mkv_async_fd(a), .events = POLLIN};
        if (poll(&p, 1, 100) > 0) mkv_async_drain(a);
    }
    return many_called(r);
}

/* How many of ops[at..at+n) ended with status want. */
static int many_count(const many_run *r, int at, int n, int want) {
    int k = 0;
    for (int i = at; i < at + n; i++) k += r->ops[i].status == want;
    return k;
}

static many_run *many_new(mkv_client *c, const char *tag) {
    many_run *r = calloc(1, sizeof *r);
    pthread_mutex_init(&r->dc.mu, NULL);
    r->src = malloc((size_t)MANY * MANY_VAL);
    r->dst = calloc(MANY, MANY_VAL);
    run_no++;
    for (int i = 0; i < MANY; i++) snprintf(r->keys[i], sizeof r->keys[i], "%s:%d:%d", tag, run_no, i);
    h_fill(r->src, (size_t)MANY * MANY_VAL, (uint64_t)run_no * 77);
    if (c && (mkv_register_buffer(c, r->src, (size_t)MANY * MANY_VAL) != MKV_OK ||
              mkv_register_buffer(c, r->dst, (size_t)MANY * MANY_VAL) != MKV_OK)) {
        free(r->src);
        free(r->dst);
        free(r);
        return NULL;
    }
    return r;
}

static void many_free(many_run *r) {
    if (!r) return;
    free(r->src);
    free(r->dst);
    free(r);
}

/* MANY puts, gets (byte-exact), exists and removes, each kind submitted
 * at once on a face of ONE thread: they all complete, each kind in one
 * wait, the master's legs pipelined on the one connection. */
static void test_async_many_one_thread(void) {
    mkv_client *c = connect_default();
    ASSERT_MSG(c, "connect: %s", mkv_last_error(NULL));
    many_run *r = many_new(c, "many");
    mkv_async *a = NULL;
    int rc = r ? mkv_async_open(&a, c, 1, 0) : MKV_ENOMEM;
    int put = -1, got = -1, exist = -1, removed = -1, same = 1;
    if (rc == MKV_OK && (rc = many_submit(a, r, 0, MKV_OP_PUT)) == MKV_OK && many_wait(a, r, MANY, 60000) == MANY)
        put = many_count(r, 0, MANY, MKV_OK);
    if (put == MANY && (rc = many_submit(a, r, MANY, MKV_OP_GET)) == MKV_OK && many_wait(a, r, 2 * MANY, 60000) == 2 * MANY) {
        got = many_count(r, MANY, MANY, MKV_OK);
        for (int i = 0; i < MANY; i++)
            same &= r->ops[MANY + i].len == MANY_VAL - (size_t)i &&
                    memcmp(r->src + (size_t)i * MANY_VAL, r->dst + (size_t)i * MANY_VAL, MANY_VAL - (size_t)i) == 0;
    }
    /* exists and removes of every key, both kinds in flight together */
    if (got == MANY && (rc = many_submit(a, r, 0, MKV_OP_EXISTS)) == MKV_OK && many_wait(a, r, 3 * MANY, 60000) == 3 * MANY)
        exist = many_count(r, 0, MANY, 1);
    if (exist == MANY && (rc = many_submit(a, r, 2 * MANY, MKV_OP_REMOVE)) == MKV_OK && many_wait(a, r, 4 * MANY, 60000) == 4 * MANY)
        removed = many_count(r, 2 * MANY, MANY, MKV_OK);
    int conns = mkv_link_connections(c);
    size_t pending = a ? mkv_async_pending(a) : 0;
    mkv_async_close(a);
    mkv_close(c);
    many_free(r);
    ASSERT_MSG(rc == MKV_OK, "setup or submit: %s", mkv_strerror(rc));
    ASSERT_EQ(put, MANY);
    ASSERT_EQ(got, MANY);
    ASSERT(same);
    ASSERT_EQ(exist, MANY);
    ASSERT_EQ(removed, MANY);
    ASSERT_EQ(pending, 0);
    ASSERT_EQ(conns, 1);   /* one master connection carried them all */
}

#define PORT_AUX (port0 + 5)      /* a master of its own, stopped and killed */
#define AUX_TIMEOUT_MS 3000

/* The aux master started (*aux, 0 if it did not start: MKV_ECONN), a
 * client of it with timeout_ms AUX_TIMEOUT_MS, its face of one thread
 * and MANY keys' buffers. */
static int aux_open(pid_t *aux, mkv_client **c, mkv_async **a, many_run **r, const char *tag) {
    *c = NULL;
    *a = NULL;
    *r = NULL;
    if ((*aux = h_start_master(PORT_AUX, NULL)) <= 0) {
        *aux = 0;
        return MKV_ECONN;
    }
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", PORT_AUX);
    mkv_options opt;
    mkv_options_init(&opt);
    opt.master = addr;
    opt.timeout_ms = AUX_TIMEOUT_MS;
    int rc = mkv_connect(c, &opt);
    if (rc == MKV_OK && !(*r = many_new(*c, tag))) rc = MKV_ENOMEM;
    if (rc == MKV_OK) rc = mkv_async_open(a, *c, 1, 0);
    return rc;
}

static void aux_close(mkv_client *c, mkv_async *a, many_run *r) {
    mkv_async_close(a);
    mkv_close(c);
    many_free(r);
}

/* No thread is parked per operation: with the master stopped, MANY
 * exists, MANY removes and MANY puts on a face of one thread are all
 * sent at once and all time out together, after about one timeout_ms.
 * A face that ran them one at a time on its thread (as before) would
 * take a timeout each: 768 x 3 s. Then MANY more, which find no
 * connection and one that cannot be opened, fail after one connect's
 * timeout between them. */
static void test_async_stopped_master_times_out_together(void) {
    pid_t aux;
    mkv_client *c;
    mkv_async *a;
    many_run *r;
    int rc = aux_open(&aux, &c, &a, &r, "stopped");
    ASSERT_MSG(aux > 0, "aux master did not start");
    int ran = -1, timedout = -1, again = -1, again_failed = 0;
    uint64_t took = 0, took_again = 0;
    if (rc == MKV_OK) {
        h_sigstop(aux);
        uint64_t t0 = mono_ms();
        rc = many_submit(a, r, 0, MKV_OP_EXISTS);
        if (rc == MKV_OK) rc = many_submit(a, r, MANY, MKV_OP_REMOVE);
        if (rc == MKV_OK) rc = many_submit(a, r, 2 * MANY, MKV_OP_PUT);
        ran = many_wait(a, r, 3 * MANY, 120000);
        took = mono_ms() - t0;
        timedout = many_count(r, 0, 3 * MANY, MKV_ETIMEDOUT);
        printf("# %d of %d done in %llu ms, %d timed out\n", ran, 3 * MANY, (unsigned long long)took, timedout);
        for (int i = 0; i < 3 * MANY; i++)   /* the first that did not time out says what it met */
            if (r->ops[i].status != MKV_ETIMEDOUT) {
                printf("# op %d: %s (%s)\n", i, mkv_strerror(r->ops[i].status), mkv_last_error(c));
                break;
            }
        /* Still stopped: the connection is gone and a new one cannot be
         * opened (the kernel accepts it, the master never answers). The
         * next MANY wait out one connect between them, not one each. */
        t0 = mono_ms();
        if (rc == MKV_OK && ran == 3 * MANY) rc = many_submit(a, r, 0, MKV_OP_EXISTS);
        again = many_wait(a, r, 4 * MANY, 120000) - 3 * MANY;
        took_again = mono_ms() - t0;
        for (int i = 0; i < MANY; i++) again_failed += r->ops[i].status < 0;
        printf("# %d more done in %llu ms, %d failed\n", again, (unsigned long long)took_again, again_failed);
        kill(aux, SIGCONT);
    }
    aux_close(c, a, r);
    h_kill(aux);
    ASSERT_MSG(rc == MKV_OK, "setup or submit: %s (%s)", mkv_strerror(rc), mkv_last_error(NULL));
    ASSERT_EQ(ran, 3 * MANY);
    ASSERT_EQ(timedout, 3 * MANY);
    ASSERT_MSG(took < 60000, "%llu ms for %d timeouts of %d ms", (unsigned long long)took, 3 * MANY, AUX_TIMEOUT_MS);
    ASSERT_EQ(again, MANY);
    ASSERT_EQ(again_failed, MANY);
    ASSERT_MSG(took_again < 60000, "%llu ms for %d operations with no master", (unsigned long long)took_again, MANY);
}

/* The master killed with every operation in flight: each completes with
 * an error, none hangs, and the face closes; an operation submitted after
 * that fails at once (nobody to connect to). */
static void test_async_master_killed_mid_flight(void) {
    pid_t aux;
    mkv_client *c;
    mkv_async *a;
    many_run *r;
    int rc = aux_open(&aux, &c, &a, &r, "killed");
    int ran = -1, failed = 0, after = MKV_OK;
    if (rc == MKV_OK) {
        h_sigstop(aux);
        rc = many_submit(a, r, 0, MKV_OP_EXISTS);
        if (rc == MKV_OK) rc = many_submit(a, r, MANY, MKV_OP_PUT);
        usleep(200 * 1000);   /* not needed for the outcome: most are sent by now */
        h_kill(aux);
        ran = many_wait(a, r, 2 * MANY, 60000);
        for (int i = 0; i < 2 * MANY; i++) failed += r->ops[i].status < 0;
        mkv_op late = {.kind = MKV_OP_EXISTS, .key = "late", .keylen = 4, .done = count_done, .ctx = r};
        if (mkv_async_submit(a, &late) == MKV_OK && many_wait(a, r, 2 * MANY + 1, 60000) == 2 * MANY + 1)
            after = late.status;
    }
    aux_close(c, a, r);
    ASSERT_MSG(rc == MKV_OK, "setup or submit: %s (%s)", mkv_strerror(rc), mkv_last_error(NULL));
    ASSERT_EQ(ran, 2 * MANY);
    ASSERT_EQ(failed, 2 * MANY);
    ASSERT_EQ(after, MKV_ECONN);
}

/* A master answering READONLY (no longer, or not yet, the leader) to one
 * command retires the connection (client/mlink.c): the commands already
 * on it keep their replies, since the master may have begun to lead and
 * done them, and the next call opens another. Here the retire comes
 * while the master is stopped with MANY exists in flight; before, it
 * broke the connection and all MANY failed with ECONN. */
static void test_async_retired_link_keeps_replies(void) {
    pid_t aux;
    mkv_client *c;
    mkv_async *a;
    many_run *r;
    int rc = aux_open(&aux, &c, &a, &r, "retired");
    ASSERT_MSG(aux > 0, "aux master did not start");
    int ran = -1, answered = -1, conns = -1, conns_after = -1, after = -1;
    if (rc == MKV_OK && (rc = mkv_link_open(c)) == MKV_OK) {
        conns = mkv_link_connections(c);
        h_sigstop(aux);
        rc = many_submit(a, r, 0, MKV_OP_EXISTS);
        usleep(300 * 1000);   /* sent by the face's thread by now; their replies are due */
        mkv_link_retire(c);
        kill(aux, SIGCONT);
        ran = many_wait(a, r, MANY, 60000);
        answered = many_count(r, 0, MANY, 0);   /* none of the keys exists */
        mkv_op late = {.kind = MKV_OP_EXISTS, .key = "late", .keylen = 4, .done = count_done, .ctx = r};
        if (mkv_async_submit(a, &late) == MKV_OK && many_wait(a, r, MANY + 1, 60000) == MANY + 1)
            after = late.status;
        conns_after = mkv_link_connections(c);
    }
    aux_close(c, a, r);
    h_kill(aux);
    ASSERT_MSG(rc == MKV_OK, "setup or submit: %s (%s)", mkv_strerror(rc), mkv_last_error(NULL));
    ASSERT_EQ(ran, MANY);
    ASSERT_EQ(answered, MANY);
    ASSERT_EQ(after, 0);
    ASSERT_EQ(conns_after, conns + 1);   /* the retired one closed, another opened */
}

/* ---- the async face: many submitters while the master link drops ---- */

#define DROP_THREADS 4
#define DROP_PAIRS   150          /* per thread: a REMOVE and an EXISTS of one key */
#define DROP_VAL     64

typedef struct drop_op {
    mkv_op op;                    /* first */
    int calls;                    /* its done ran this often (atomic) */
} drop_op;

typedef struct drop_run {
    mkv_client *c;
    mkv_async *a;
    drop_op ops[DROP_THREADS][2 * DROP_PAIRS];
    char keys[DROP_THREADS][DROP_PAIRS][48];
    int put[DROP_THREADS][DROP_PAIRS];   /* the key's blocking put succeeded */
    int submitted, finished, stop;   /* atomic */
    unsigned char *val;           /* registered */
} drop_run;

/* Slow on purpose: inline, the I/O thread runs it, and what was handed
 * to that thread meanwhile waits while the link may be up again. */
static void drop_done(mkv_op *op) {
    usleep(300);
    __atomic_add_fetch(&((drop_op *)op)->calls, 1, __ATOMIC_ACQ_REL);
}

typedef struct drop_arg {
    drop_run *r;
    int t;
} drop_arg;

/* One submitter: each key put (blocking), then its REMOVE and EXISTS
 * submitted with no wait for the REMOVE, a blocking call between them
 * (which opens the link again if it is down: the EXISTS may then find
 * it up while the REMOVE still waits for the I/O thread). */
static void *drop_submitter(void *arg) {
    drop_arg *d = arg;
    drop_run *r = d->r;
    for (int i = 0; i < DROP_PAIRS; i++) {
        const char *key = r->keys[d->t][i];
        r->put[d->t][i] = mkv_put(r->c, key, strlen(key), r->val, DROP_VAL, 0) == MKV_OK;
        for (int k = 0; k < 2; k++) {
            drop_op *o = &r->ops[d->t][2 * i + k];
            o->op = (mkv_op){.kind = k ? MKV_OP_EXISTS : MKV_OP_REMOVE, .key = key, .keylen = strlen(key),
                             .done = drop_done, .status = MKV_PENDING};
            if (mkv_async_submit(r->a, &o->op) == MKV_OK) __atomic_add_fetch(&r->submitted, 1, __ATOMIC_ACQ_REL);
            else o->calls = -1000;   /* refused: never called back */
            if (!k) mkv_exists(r->c, "drop:none", 9);   /* a blocking call between: it opens the link if down */
        }
    }
    __atomic_add_fetch(&r->finished, 1, __ATOMIC_ACQ_REL);
    return NULL;
}

static int drop_calls(drop_run *r) {
    int n = 0;
    for (int t = 0; t < DROP_THREADS; t++)
        for (int i = 0; i < 2 * DROP_PAIRS; i++) n += __atomic_load_n(&r->ops[t][i].calls, __ATOMIC_ACQUIRE) > 0;
    return n;
}

/* Breaks the master connection every 1-5 ms until told to stop, letting
 * a few operations complete between breaks (or 50 ms pass) so a slow
 * build still sees some answered. */
static void *drop_dropper(void *arg) {
    drop_run *r = arg;
    for (unsigned i = 0; !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE); i++) {
        int before = drop_calls(r);
        uint64_t id;
        mkv_link_fd(r->c, &id);
        mkv_link_drop_id(&r->c->core->link, id);   /* as a master's close would */
        for (int ms = 0; ms < 50 && drop_calls(r) < before + 8 && !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE); ms++)
            usleep(1000);
        usleep(1000 + (i % 7) * 700);
    }
    return NULL;
}

/* DROP_THREADS threads submit to ONE face (flags) while another breaks
 * the master connection every few ms, so operations are sent from the
 * submitting thread, handed to the I/O thread (no link up), and failed
 * by a break, all at once. Every operation completes exactly once; and
 * where a key's REMOVE succeeded, the EXISTS submitted after it by the
 * same thread (sent after it, on the same connection or a later one)
 * finds nothing: a face that let the EXISTS overtake a REMOVE waiting
 * for the I/O thread would answer 1. The test drains the face as an
 * event loop would (queued) or only waits (inline). */
static void async_threads_link_drops(int flags) {
    drop_run *r = calloc(1, sizeof *r);
    r->c = connect_default();
    ASSERT_MSG(r->c, "connect: %s", mkv_last_error(NULL));
    r->val = malloc(DROP_VAL);
    h_fill(r->val, DROP_VAL, 5);
    run_no++;
    for (int t = 0; t < DROP_THREADS; t++)
        for (int i = 0; i < DROP_PAIRS; i++) snprintf(r->keys[t][i], sizeof r->keys[t][i], "drop:%d:%d:%d", run_no, t, i);
    int rc = mkv_register_buffer(r->c, r->val, DROP_VAL);
    if (rc == MKV_OK) rc = mkv_async_open(&r->a, r->c, 1, flags);
    ASSERT_MSG(rc == MKV_OK, "setup: %s (%s)", mkv_strerror(rc), mkv_last_error(NULL));
    int conns0 = mkv_link_connections(r->c);
    pthread_t sub[DROP_THREADS], dropper;
    drop_arg args[DROP_THREADS];
    pthread_create(&dropper, NULL, drop_dropper, r);
    for (int t = 0; t < DROP_THREADS; t++) {
        args[t] = (drop_arg){r, t};
        pthread_create(&sub[t], NULL, drop_submitter, &args[t]);
    }
    /* the event loop's part until the submitters are done and every op called back, bounded */
    uint64_t end = mono_ms() + 120000;
    while (mono_ms() < end && (__atomic_load_n(&r->finished, __ATOMIC_ACQUIRE) < DROP_THREADS ||
                               drop_calls(r) < __atomic_load_n(&r->submitted, __ATOMIC_ACQUIRE))) {
        struct pollfd p = {.fd = mkv_async_fd(r->a), .events = POLLIN};
        if (p.fd < 0) usleep(20000);
        else if (poll(&p, 1, 100) > 0) mkv_async_drain(r->a);
    }
    __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
    pthread_join(dropper, NULL);
    for (int t = 0; t < DROP_THREADS; t++) pthread_join(sub[t], NULL);
    mkv_async_close(r->a);   /* waits for the rest: each then called back */
    int conns = mkv_link_connections(r->c) - conns0;
    int once = 0, twice = 0, never = 0, both_ok = 0, overtaken = 0, failed = 0, broke = 0;
    for (int t = 0; t < DROP_THREADS; t++) {
        for (int i = 0; i < 2 * DROP_PAIRS; i++) {
            int n = r->ops[t][i].calls;
            once += n == 1;
            twice += n > 1;
            never += n < 1;
            failed += n == 1 && r->ops[t][i].op.status < 0;
            broke += n == 1 && r->ops[t][i].op.status == MKV_ECONN;
        }
        for (int i = 0; i < DROP_PAIRS; i++) {
            const mkv_op *rm = &r->ops[t][2 * i].op, *ex = &r->ops[t][2 * i + 1].op;
            if (!r->put[t][i] || rm->status != MKV_OK || (ex->status != 0 && ex->status != 1)) continue;
            both_ok++;
            overtaken += ex->status == 1;
        }
    }
    printf("# flags %d: %d ops called back once (%d failed, %d of them by a break), %d master connections, "
           "%d pairs both answered, %d EXISTS ahead of their REMOVE\n", flags, once, failed, broke, conns, both_ok,
           overtaken);
    mkv_close(r->c);
    free(r->val);
    free(r);
    ASSERT_EQ(twice, 0);
    ASSERT_EQ(never, 0);
    ASSERT_EQ(once, 2 * DROP_THREADS * DROP_PAIRS);
    ASSERT_EQ(overtaken, 0);
    ASSERT_MSG(conns >= 3, "the link came back only %d times", conns);
    ASSERT(both_ok > 0);
}

static void test_async_threads_link_drops_queued(void) { async_threads_link_drops(MKV_ASYNC_DRAIN_READS); }

static void test_async_threads_link_drops_inline(void) { async_threads_link_drops(MKV_ASYNC_INLINE); }

/* A client holding a pin makes no call while its master is killed -9
 * and started again on its port (the nodes report their objects): its
 * keeper thread (client/pinkeep.c) reconnects and pins the key again,
 * and until then the restarted master holds removes of the objects it
 * rebuilt (PROTO_REPIN_GRACE_MS). Another connection's removes, from the
 * restart on, never take the key; past the grace the refusal names the
 * pin. In the TSan build: the keeper against the client's calls and
 * close. Last: it restarts the cluster's master. */
static pid_t master_pid;

static void test_pin_kept_across_master_restart(void) {
    mkv_client *c = connect_default();
    ASSERT(c != NULL);
    static char val[4096];
    h_fill(val, sizeof val, 77);
    ASSERT_EQ(mkv_register_buffer(c, val, sizeof val), MKV_OK);
    ASSERT_EQ(mkv_put(c, "kept-pin", 8, val, sizeof val, 0), MKV_OK);
    mkv_obj o = {.key = "kept-pin", .keylen = 8};
    uint64_t pin = 0;
    size_t hit = 0;
    ASSERT_EQ(mkv_exists_prefix_pin(c, &o, 1, 600000, &pin, &hit), MKV_OK);
    ASSERT_EQ(hit, 1);
    /* the nodes hold it in their indexes (what they report after the restart) */
    ASSERT_EQ(h_wait_port_info(PORT_MASTER, "cluster", "holdings_pending", 0, 20000), 0);
    h_kill(master_pid);
    master_pid = h_start_master(PORT_MASTER, NULL);
    uint64_t started = mono_ms();
    ASSERT(master_pid > 0);
    h_pin_watch w;
    ASSERT_MSG(h_watch_pinned(PORT_MASTER, "kept-pin", started, 60000, "a client making no call across its "
                              "master's restart", &w), "removed: %d, last: %s", w.removed, w.last);
    size_t held = 0;
    ASSERT_EQ(mkv_unpin(c, pin, &held), MKV_OK);
    ASSERT_EQ(held, 1);
    ASSERT_EQ(mkv_remove(c, "kept-pin", 8), MKV_OK);
    mkv_close(c);
}

int main(void) {
    h_init(300);
    h_setup_or_exit(port0 = h_free_ports(8), "free ports");
    snprintf(master_addr, sizeof master_addr, "127.0.0.1:%d", PORT_MASTER);
    if ((master_pid = h_start_master(PORT_MASTER, NULL)) < 0) {
        printf("not ok - master did not start\n");
        return 1;
    }
    for (int i = 0; i < 2; i++) h_start_node(PORT_MASTER, PORT_NODE + i, PORT_DATA + i, "64MB");
    if (h_wait_nodes(PORT_MASTER, "alive", 2, 30000) != 0) {
        printf("not ok - nodes did not join the master\n");
        return 1;
    }
    static const char *transports[] = {"tcp", "auto"};
    for (int i = 0; i < 2; i++) {
        char name[2][64];
        transport = transports[i];
        snprintf(name[0], sizeof name[0], "two_threads_256k/%s", transport);
        snprintf(name[1], sizeof name[1], "eight_threads_mixed/%s", transport);
        RUN_TEST_NAMED(test_two_threads_256k, name[0]);
        RUN_TEST_NAMED(test_eight_threads_mixed, name[1]);
    }
    transport = "tcp";
    RUN_TEST(test_eight_threads_one_connection);
    RUN_TEST(test_one_lane_four_threads);
    RUN_TEST(test_lanes_bound);
    RUN_TEST(test_async_queued);
    RUN_TEST(test_async_inline);
    RUN_TEST(test_async_drain_reads);
    RUN_TEST(test_async_chain_and_close);
    RUN_TEST(test_async_command);
    RUN_TEST(test_async_many_one_thread);
    RUN_TEST(test_async_stopped_master_times_out_together);
    RUN_TEST(test_async_master_killed_mid_flight);
    RUN_TEST(test_async_retired_link_keeps_replies);
    RUN_TEST(test_async_threads_link_drops_queued);
    RUN_TEST(test_async_threads_link_drops_inline);
    RUN_TEST(test_pin_kept_across_master_restart);
    h_kill_all();
    TEST_EXIT();
}
