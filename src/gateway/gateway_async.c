/* gateway/gateway_async.c - GET, MGET and SET without stalling the loop.
 *
 * The client is blocked while its values are read (GET, MGET: with the
 * reads of every other client of the same loop iteration, read_batch.h)
 * or its streamed value is put to the nodes on a worker (SET); back on
 * the loop the shared command (t_object.c) runs with the same arguments
 * and finds the results waiting in the store (store_cluster.h). So the
 * replies are the standalone server's, byte for byte, from one code path.
 *
 * SET with options, or whose value did not stream into the store, runs
 * the shared command directly: an option it refuses must never have
 * stored the value first.
 *
 * SETs of one key run one after another, as they do in standalone: a
 * second SET of a key whose put is still in flight waits for it, so it
 * finds the object complete (an idempotent OK when the bytes are the
 * same) instead of "being written". */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "gateway/gateway.h"
#include "gateway/put_batch.h"
#include "gateway/read_batch.h"
#include "gateway/store_cluster.h"
#include "server/commands.h"
#include "server/networking.h"

typedef struct gw_call gw_call;
struct gw_call {
    gw_read read;             /* GET/MGET: the read batcher's handle */
    gw_write write;           /* SET: the put batcher's */
    struct gw_async *ga;
    store *store;
    client *c;                /* NULL once the client has gone */
    command_proc *shared;     /* t_object.c's proc, run on the loop */
    int argc;
    resp_arg *argv;           /* copies; a SET's value points into the put's buffer */
    store_put *put;           /* SET: shipped by the worker */
    uint64_t put_size;
    gw_fetch *fetch;          /* GET/MGET: one per key */
    size_t nfetch;
    gw_call *next_inflight;   /* SET: in the server's gw_async.inflight */
    gw_call *waiters, *waiters_tail, *next_waiter;   /* SETs of the same key */
};

static const char *const async_names[] = {"get", "mget", "set", "put"};
#define NASYNC (sizeof async_names / sizeof async_names[0])

/* Per server: the rows replaced and the shared procs they wrap (the
 * command table keeps pointers to its rows, so the store owns this and
 * frees it last). */
typedef struct gw_async {
    command rows[NASYNC];
    command_proc *shared[NASYNC];
    gw_call *inflight;        /* SETs on a worker (few: one per blocked client) */
} gw_async;

static gw_async *async_of(client *c) { return cluster_store_async(c->srv->store); }

static command_proc *shared_proc(gw_async *ga, client *c) { return ga->shared[c->last_cmd - ga->rows]; }

/* One allocation: the call, argv, the fetches and the argument bytes.
 * Argument value_arg (if > 0; 0 = none) is not copied: it lies in the
 * put's buffer. */
static gw_call *call_create(client *c, size_t nfetch, int value_arg) {
    size_t bytes = 0;
    for (int i = 0; i < c->argc; i++)
        if (value_arg <= 0 || i != value_arg) bytes += c->argv[i].len + 1;
    size_t head = sizeof(gw_call) + (size_t)c->argc * sizeof(resp_arg) + nfetch * sizeof(gw_fetch);
    gw_call *call = xcalloc(1, head + bytes);
    call->argv = (resp_arg *)(call + 1);
    call->fetch = nfetch ? (gw_fetch *)(call->argv + c->argc) : NULL;
    call->nfetch = nfetch;
    call->argc = c->argc;
    char *p = (char *)call + head;
    for (int i = 0; i < c->argc; i++) {
        const resp_arg *a = &c->argv[i];
        if (value_arg > 0 && i == value_arg) {
            call->argv[i] = (resp_arg){.ptr = a->ptr, .len = a->len, .external = 1};
            continue;
        }
        memcpy(p, a->ptr, a->len);
        p[a->len] = '\0';
        call->argv[i] = (resp_arg){.ptr = p, .len = a->len};
        p += a->len + 1;
    }
    call->store = c->srv->store;
    call->ga = async_of(c);
    call->c = c;
    call->shared = shared_proc(call->ga, c);
    return call;
}

static void call_forget_client(client *c, void *ctx) { ((gw_call *)ctx)->c = NULL; }

/* The shared command, as dispatch would run it, on the call's arguments
 * and with the results ready in the store. */
static void call_replay(gw_call *call, client *c) {
    int argc = c->argc;
    resp_arg *argv = c->argv;
    c->argc = call->argc;
    c->argv = call->argv;
    if (call->put) {
        c->pending_put = call->put;
        c->pending_put_size = call->put_size;
        c->pending_put_err = 0;
        call->put = NULL;
    }
    call->shared(c);
    commands_abort_put(c);
    c->argc = argc;
    c->argv = argv;
    c->pending_put_size = 0;
}

static void call_ship(gw_call *call);

static int same_key(const gw_call *a, const resp_arg *key) {
    return a->argv[1].len == key->len && memcmp(a->argv[1].ptr, key->ptr, key->len) == 0;
}

static gw_call *inflight_set(gw_async *ga, const resp_arg *key) {
    for (gw_call *x = ga->inflight; x; x = x->next_inflight)
        if (same_key(x, key)) return x;
    return NULL;
}

static void inflight_remove(gw_call *call) {
    gw_call **pp = &call->ga->inflight;
    while (*pp && *pp != call) pp = &(*pp)->next_inflight;
    if (*pp) *pp = call->next_inflight;
}

/* A SET of the key is in flight: this one ships after it. */
static void wait_behind(gw_call *first, gw_call *call) {
    if (first->waiters_tail) first->waiters_tail->next_waiter = call;
    else first->waiters = call;
    first->waiters_tail = call;
}

/* A SET is done: the next SET of its key goes. */
static void ship_next(gw_call *done) {
    inflight_remove(done);
    gw_call *next = done->waiters;
    if (!next) return;
    next->waiters = next->next_waiter;
    next->waiters_tail = next->waiters ? done->waiters_tail : NULL;
    next->next_waiter = NULL;
    next->next_inflight = done->ga->inflight;
    done->ga->inflight = next;
    call_ship(next);
}

/* The call's cluster work is over (done 0: it did nothing, and the
 * shared command then asks the cluster itself): reply and free. */
static void call_finish(gw_call *call, int done) {
    store *s = call->store;
    if (call->put) ship_next(call);
    if (done) cluster_offer(s, call->fetch, call->nfetch);
    client *c = call->c;
    if (c) {
        client_set_on_free(c, NULL, NULL);
        call_replay(call, c);
        client_unblock(c);
    } else if (call->put) {
        /* Its client is gone; a value it sent in full stays stored. */
        s->ops->put_end(s, call->put);
    }
    cluster_withdraw(s);
    free(call);
}

static void read_done(gw_read *r, int fetched) {
    call_finish((gw_call *)((char *)r - offsetof(gw_call, read)), fetched);
}

static void write_done(gw_write *w) { call_finish((gw_call *)((char *)w - offsetof(gw_call, write)), 1); }

static void call_ship(gw_call *call) {
    call->write = (gw_write){.put = call->put, .done = write_done};
    put_batcher_add(cluster_store_puts(call->store), &call->write);
}

static void call_block(gw_call *call, client *c) {
    client_block(c);
    client_set_on_free(c, call_forget_client, call);
}

/* GET key / MGET key [key ...] */
static void async_read_command(client *c) {
    gw_call *call = call_create(c, (size_t)(c->argc - 1), 0);
    for (size_t i = 0; i < call->nfetch; i++) {
        call->fetch[i].key = call->argv[i + 1].ptr;
        call->fetch[i].keylen = call->argv[i + 1].len;
    }
    call->read = (gw_read){.fetch = call->fetch, .nfetch = call->nfetch, .done = read_done};
    call_block(call, c);
    read_batcher_add(cluster_store_reads(call->store), &call->read);
}

/* A value that did not stream (a SET queued in MULTI keeps its value in
 * argv) is copied into a put here, so EXEC's SETs ship on a worker too
 * and argv[2] then points into the put's buffer as a streamed one does.
 * On failure the shared command runs and reports it. */
static void start_unstreamed(client *c) {
    store *s = c->srv->store;
    resp_arg *val = &c->argv[2];
    void *dst;
    store_put *put;
    if (c->pending_put || c->pending_put_err) return;
    if (s->ops->put_start(s, c->argv[1].ptr, c->argv[1].len, val->len, &dst, &put) != STORE_OK) return;
    memcpy(dst, val->ptr, val->len);
    val->ptr = dst;
    c->pending_put = put;
    c->pending_put_size = val->len;
}

/* SET key value (no options), the value streamed into the store. */
static void async_set_command(client *c) {
    if (c->argc == 3) start_unstreamed(c);
    if (c->argc != 3 || !c->pending_put) {
        shared_proc(async_of(c), c)(c);
        return;
    }
    gw_call *call = call_create(c, 0, 2);
    call->put = c->pending_put;
    call->put_size = c->pending_put_size;
    c->pending_put = NULL;   /* the call owns it now: dispatch must not abort it */
    call_block(call, c);
    gw_call *first = inflight_set(call->ga, &call->argv[1]);
    if (first) {
        wait_behind(first, call);
        return;
    }
    call->next_inflight = call->ga->inflight;
    call->ga->inflight = call;
    call_ship(call);
}

static void async_free(gw_async *ga) { free(ga); }

void gateway_async_register(server *srv) {
    gw_async *ga = xcalloc(1, sizeof *ga);
    cluster_store_set_async(srv->store, ga, async_free);
    for (size_t i = 0; i < NASYNC; i++) {
        const command *row = commands_lookup(srv, async_names[i], strlen(async_names[i]));
        if (!row) continue;   /* t_object_register first */
        ga->rows[i] = *row;
        ga->shared[i] = row->proc;
        ga->rows[i].proc = row->value_arg ? async_set_command : async_read_command;
        commands_register(srv, &ga->rows[i], 1);
    }
}
