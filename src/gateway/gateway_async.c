/* gateway/gateway_async.c - GET, MGET, GETRANGE and SET without stalling the loop;
 * and the commands that only ask the master (DEL, EXISTS, STRLEN, TYPE,
 * TTL; DBSIZE, SCAN, KEYS, INFO, FLUSHALL, MOON.PREFIX, MOON.PREFIXPIN
 * and MOON.UNPIN through the store's keyspace and pin questions).
 *
 * A GET or MGET asks the store (store.h get_async: with the reads of
 * every other call of the same loop iteration) and, when the values are
 * in, writes its reply once from them with GET's own writer
 * (t_object_reply_got) into its slot. A SET puts its streamed value to
 * the nodes (put_batch.h) while the loop serves others, and its reply is
 * written from the outcome (t_object_reply_set); DEL, EXISTS, STRLEN,
 * TYPE and TTL from the master's answers (t_object_reply_answers). So
 * DBSIZE, SCAN, KEYS, INFO and FLUSHALL ask the store (stat_async,
 * scan_async, flush_async, a KEYS walk over them), MOON.PREFIX,
 * PREFIXPIN and UNPIN its pin_async, and write their reply from its
 * answer with t_object.c's and t_server.c's writers. So the
 * replies are the standalone server's, byte for byte, written once: no
 * command runs twice.
 *
 * Pipelining: a call answers into a reply slot (networking.h), so the
 * client's next commands are parsed and start into the same batches
 * while it is in flight, and the replies still go out in order. Only
 * what cannot change a result runs ahead: a SET waits for every call of
 * its connection touching its key, a read for the connection's SETs of
 * its keys, and any other command (options, DEL, MULTI...) for all of
 * them (gateway_pipelined). The value bytes a connection has in flight
 * are bounded too (staging memory is shared). Inside EXEC a call blocks
 * the client instead, as the transaction runs one command at a time.
 *
 * SET with options other than NX, or whose value did not stream into the
 * store, runs the shared command directly: an option it refuses must
 * never have stored the value first.
 *
 * SETs of one key run one after another, as they do in standalone: a
 * second SET of a key whose put is still in flight waits for it, so it
 * finds the object complete (an idempotent OK when the bytes are the
 * same) instead of "being written". */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "client/moonkv_async.h"
#include "core/crc32c.h"
#include "core/siphash.h"
#include "core/util.h"
#include "gateway/gateway.h"
#include "gateway/get_stream.h"
#include "gateway/put_batch.h"
#include "gateway/store_cluster.h"
#include "proto/verbs.h"
#include "server/commands.h"
#include "server/info.h"
#include "server/networking.h"

typedef struct gw_call gw_call;
struct gw_call {
    gw_write write;           /* SET: the put batcher's */
    struct gw_async *ga;
    store *store;
    client *c;                /* NULL once the client has gone */
    const command *row;       /* the command's row (its name) */
    command_proc *shared;     /* t_object.c's proc, run on the loop */
    int argc;
    resp_arg *argv;           /* copies; a SET's value points into the put's buffer */
    store_put *put;           /* SET: shipped by the worker */
    uint64_t put_size;
    store_key *keys;          /* GET/MGET: into argv */
    store_got *got;           /* GET/MGET: one outcome per key (store.h get_async) */
    size_t ngot;
    gw_call *next_inflight;   /* SET: in its bucket of the server's in-flight SETs */
    uint64_t hash;            /* SET: of its key */
    gw_call *waiters, *waiters_tail, *next_waiter;   /* SETs of the same key */
    gw_answer *ans;           /* DEL/EXISTS: one per key */
    const char *verb;         /* the master command answering each key */
    gw_job job;               /* answers none came for, by blocking calls on a worker */
    struct gw_keyspace *ks;   /* DBSIZE, SCAN, KEYS, INFO, FLUSHALL: the store's answer */
    size_t nans, asking;      /* replies still to come */
    int writes;               /* SET, DEL: later commands on its keys wait */
    int nkeys;                /* argv[1..nkeys] */
    reply_slot *slot;         /* its reply's place; NULL: the client is blocked */
    uint64_t cost;            /* value bytes counted in its connection's */
    gw_call *next_of_conn;    /* the connection's calls, in order */
    get_stream *gstream;      /* GET/MGET: the value streaming to the client now */
    size_t next;              /* GET/MGET streaming: the next element to reply */
    int array;                /* MGET: the reply is an array */
    int range;                /* GETRANGE: the reply is a part of the value */
    int pooled;               /* a CALL_POOLED block: back to the free list */
};

/* A connection's calls in flight (client->role_ctx). */
typedef struct gw_conn {
    gw_call *calls;
    uint64_t bytes;           /* their value bytes, as estimated */
} gw_conn;

/* Value bytes one connection may have in flight before its next command
 * waits; the first call always goes. */
#define GW_PIPE_BYTES (1024 * 1024)
/* How long a value size seen stays the reads' estimate. */
#define GW_HINT_MS 1000
/* Calls that fit this many bytes (a GET with its key) come from a free
 * list: a batch allocates hundreds and frees them together, past what
 * malloc's per-thread cache keeps, so each went through its slow path. */
#define CALL_POOLED 1024
#define CALL_POOL_MAX 4096      /* blocks kept at most */

static const char *const async_names[] = {"get",  "mget",  "set",  "put",  "del",  "remove",   "unlink",
                                          "exists", "strlen", "type", "ttl", "pttl", "dbsize", "scan",
                                          "keys", "info", "flushall", "flushdb", "getrange",
                                          "moon.prefix", "moon.prefixpin", "moon.unpin"};
#define NASYNC (sizeof async_names / sizeof async_names[0])

/* Per server: the rows replaced and the shared procs they wrap (the
 * command table keeps pointers to its rows, so the store owns this and
 * frees it last). */
typedef struct gw_async {
    command rows[NASYNC];
    command_proc *shared[NASYNC];
    /* SETs under way, by key (chained buckets, a power of two; keys come
     * from clients, so the hash is keyed). */
    gw_call **inflight;
    size_t nbuckets, ninflight;
    uint8_t hash_key[SIPHASH_KEY_LEN];
    /* The largest value seen in this and the last GW_HINT_MS period: a
     * read's size is not known before the master answers. */
    uint64_t hint_now, hint_last, hint_since_ms;
    event_loop *loop;         /* its time dates the periods */
    gw_call *free_calls;      /* CALL_POOLED blocks, linked by next_of_conn */
    size_t nfree_calls;
} gw_async;

static gw_async *async_of(client *c) { return cluster_store_async(c->srv->store); }

static command_proc *shared_proc(gw_async *ga, client *c) { return ga->shared[c->last_cmd - ga->rows]; }

/* One allocation: the call, argv, a read's keys and outcomes, and the
 * argument bytes.
 * Argument value_arg (if > 0; 0 = none) is not copied: it lies in the
 * put's buffer. */
static gw_call *call_create(client *c, size_t ngot, int value_arg) {
    size_t bytes = 0;
    for (int i = 0; i < c->argc; i++)
        if (value_arg <= 0 || i != value_arg) bytes += c->argv[i].len + 1;
    size_t head = sizeof(gw_call) + (size_t)c->argc * sizeof(resp_arg) + ngot * (sizeof(store_got) + sizeof(store_key));
    gw_async *ga = async_of(c);
    int pooled = head + bytes <= CALL_POOLED;
    gw_call *call = pooled ? ga->free_calls : NULL;
    if (call) {
        ga->free_calls = call->next_of_conn;
        ga->nfree_calls--;
        memset(call, 0, head + bytes);
    } else {
        call = xcalloc(1, pooled ? CALL_POOLED : head + bytes);
    }
    call->pooled = pooled;
    call->argv = (resp_arg *)(call + 1);
    call->got = ngot ? (store_got *)(call->argv + c->argc) : NULL;
    call->keys = ngot ? (store_key *)(call->got + ngot) : NULL;
    call->ngot = ngot;
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
    call->ga = ga;
    call->c = c;
    call->row = c->last_cmd;
    call->shared = shared_proc(call->ga, c);
    return call;
}

/* A finished call: a pooled block back to the free list (bounded). */
static void call_free(gw_call *call) {
    gw_async *ga = call->ga;
    if (!call->pooled || ga->nfree_calls == CALL_POOL_MAX) {
        free(call);
        return;
    }
    call->next_of_conn = ga->free_calls;
    ga->free_calls = call;
    ga->nfree_calls++;
}

/* ---- a connection's calls ---- */

static void conn_forget(client *c, void *ctx) {
    gw_conn *gc = ctx;
    (void)c;
    for (gw_call *x = gc->calls, *next; x; x = next) {
        next = x->next_of_conn;
        x->c = NULL;
        if (x->gstream) get_stream_client_gone(x->gstream);   /* may free x */
    }
}

static gw_conn *conn_of(client *c) {
    return client_role_ctx(c, sizeof(gw_conn), conn_forget);
}

static void conn_remove(gw_conn *gc, gw_call *call) {
    gw_call **pp = &gc->calls;
    while (*pp && *pp != call) pp = &(*pp)->next_of_conn;
    if (*pp) *pp = call->next_of_conn;
    gc->bytes -= call->cost;
}

/* The largest value size seen lately (a read's estimated size). */
static uint64_t hint(gw_async *ga) {
    uint64_t now = loop_now_ms(ga->loop);
    if (now < ga->hint_since_ms) ga->hint_since_ms = now;   /* the wall clock stepped back */
    if (now - ga->hint_since_ms >= GW_HINT_MS) {
        ga->hint_last = now - ga->hint_since_ms >= 2 * GW_HINT_MS ? 0 : ga->hint_now;
        ga->hint_now = 0;
        ga->hint_since_ms = now;
    }
    return ga->hint_now > ga->hint_last ? ga->hint_now : ga->hint_last;
}

static void hint_saw(gw_async *ga, uint64_t len) {
    hint(ga);
    if (len > ga->hint_now) ga->hint_now = len;
}

static void async_read_command(client *c);
static void async_set_command(client *c);
static void async_ask_command(client *c);
static void async_keyspace_command(client *c);

/* The keys of the command in c->argv (a SET's one, none of a command on
 * no key, every argument of the others) and the value bytes it will hold
 * while in flight. */
static int nkeys_of(const client *c, const command *cmd) {
    if (cmd->first_key != 1) return 0;   /* MOON.PREFIXPIN's keys start later: all count */
    return cmd->last_key > 0 ? cmd->last_key - cmd->first_key + 1 : c->argc - cmd->first_key;
}

static uint64_t cost_of(client *c, const command *cmd) {
    if (cmd->value_arg) return c->pending_put ? c->pending_put_size : c->argv[2].len;
    if (cmd->proc == async_read_command) return (uint64_t)nkeys_of(c, cmd) * hint(async_of(c));
    return 0;
}

static int arg_eq(const resp_arg *a, const resp_arg *b) {
    return a->len == b->len && memcmp(a->ptr, b->ptr, a->len) == 0;
}

/* Whether a command on these keys could see or change what x does:
 * one of them writes (SET, DEL) and they share a key. A command on no
 * key (DBSIZE, SCAN, FLUSHALL) counts them all: it waits for every
 * write, and a write waits for it. */
static int conflicts(const gw_call *x, const resp_arg *keys, int nkeys, int writes) {
    if (!writes && !x->writes) return 0;   /* reads never disturb reads */
    if (nkeys == 0 || x->nkeys == 0) return 1;
    for (int i = 1; i <= x->nkeys; i++)
        for (int k = 0; k < nkeys; k++)
            if (arg_eq(&x->argv[i], &keys[k])) return 1;
    return 0;
}

/* SET key value, or with NX (once or more: a key that exists is refused
 * by the put batch as by the shared command). Any other option runs the
 * shared command at once: the gateway's store takes none of them (no
 * expiry hints: collection is the master's), so it refuses them before
 * anything is stored or asked. */
static int set_goes_async(const client *c) {
    for (int i = 3; i < c->argc; i++)
        if (!strieq_len(c->argv[i].ptr, c->argv[i].len, "NX")) return 0;
    return 1;
}

static int keyspace_goes_async(const client *c);

static int is_async_row(gw_async *ga, const command *cmd) {
    for (size_t i = 0; i < NASYNC; i++)
        if (cmd == &ga->rows[i]) return 1;
    return 0;
}

/* srv->role_pipelined: whether cmd may start while c's calls are in
 * flight without changing what any of them, or it, answers. */
static int gateway_pipelined(client *c, const command *cmd) {
    gw_async *ga = async_of(c);
    gw_conn *gc = c->role_ctx;
    if (!gc || c->multi || !is_async_row(ga, cmd)) return 0;
    if (cmd->value_arg && !set_goes_async(c)) return 0;   /* the shared command, synchronously */
    if (cmd->proc == async_keyspace_command && !keyspace_goes_async(c)) return 0;
    if (cmd->proc == async_keyspace_command && !cluster_store_master(c->srv->store)) return 0;
    if (cmd->proc == async_ask_command && !cluster_store_face(c->srv->store)) return 0;
    if (gc->bytes + cost_of(c, cmd) > GW_PIPE_BYTES) return 0;
    int writes = (cmd->flags & CMD_WRITE) != 0;
    for (gw_call *x = gc->calls; x; x = x->next_of_conn)
        if (conflicts(x, &c->argv[1], nkeys_of(c, cmd), writes)) return 0;
    return 1;
}

/* ---- calls ---- */

static void call_ship(gw_call *call);

static int same_key(const gw_call *a, const resp_arg *key) { return arg_eq(&a->argv[1], key); }

static gw_call **bucket(gw_async *ga, uint64_t hash) { return &ga->inflight[hash & (ga->nbuckets - 1)]; }

static gw_call *inflight_set(gw_async *ga, const resp_arg *key, uint64_t hash) {
    for (gw_call *x = *bucket(ga, hash); x; x = x->next_inflight)
        if (x->hash == hash && same_key(x, key)) return x;
    return NULL;
}

static void inflight_grow(gw_async *ga) {
    gw_call **old = ga->inflight;
    size_t n = ga->nbuckets;
    ga->nbuckets *= 2;
    ga->inflight = xcalloc(ga->nbuckets, sizeof *ga->inflight);
    for (size_t i = 0; i < n; i++)
        for (gw_call *x = old[i], *next; x; x = next) {
            next = x->next_inflight;
            x->next_inflight = *bucket(ga, x->hash);
            *bucket(ga, x->hash) = x;
        }
    free(old);
}

static void inflight_add(gw_async *ga, gw_call *call) {
    if (++ga->ninflight > ga->nbuckets) inflight_grow(ga);
    call->next_inflight = *bucket(ga, call->hash);
    *bucket(ga, call->hash) = call;
}

static void inflight_remove(gw_call *call) {
    gw_async *ga = call->ga;
    gw_call **pp = bucket(ga, call->hash);
    while (*pp && *pp != call) pp = &(*pp)->next_inflight;
    if (!*pp) return;
    *pp = call->next_inflight;
    ga->ninflight--;
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
    inflight_add(done->ga, next);
    call_ship(next);
}

/* Whether the stored value is this SET's bytes, by MOON.OBJECT's size
 * and CRC32C (ask_same_bytes): a failed or missing answer says no. */
static int same_bytes(const gw_call *call) {
    const gw_answer *a = call->ans;
    if (!a || !a->answered || a->failed || a->n < 0 || (uint64_t)a->n != call->put_size) return 0;
    return a->crc == crc32c(0, call->put->buf.ptr, (size_t)call->put_size);
}

/* A SET's reply, once, from its put's outcome (put_end reports how the
 * ship went): SET's own words (t_object_reply_set). */
static void set_reply(gw_call *call, client *c) {
    store *s = call->store;
    int nx = call->argc > 3;   /* set_goes_async: NX is its only option */
    int same = same_bytes(call);
    int rc = s->ops->put_end(s, call->put);
    call->put = NULL;
    t_object_reply_set(c, rc, call->put_size, nx, same);
}

#define ANSWERS_ON_STACK 16

/* DEL, EXISTS, STRLEN, TYPE, TTL: the reply, once, from the master's
 * answers (t_object_reply_answers); a failed or missing answer says no,
 * as a failed call does. */
static void answers_reply(gw_call *call, client *c) {
    long long buf[ANSWERS_ON_STACK], *n = call->nans <= ANSWERS_ON_STACK ? buf : xmalloc(call->nans * sizeof *n);
    uint64_t yes = 0;
    for (size_t i = 0; i < call->nans; i++) {
        const gw_answer *a = &call->ans[i];
        n[i] = a->answered && !a->failed ? a->n : -1;
        yes += n[i] > 0;
    }
    if (call->writes) cluster_store_removed(call->store, yes);
    t_object_reply_answers(c, call->row, n, call->nans);
    if (n != buf) free(n);
}

static void keyspace_reply(gw_call *call, client *c);

/* The reply, into the call's slot or to the blocked client: a SET's from
 * its outcome, a key question's from its answers, a keyspace command's
 * (DBSIZE, SCAN, KEYS, INFO, FLUSHALL) from the store's answer. */
static void call_answer(gw_call *call, client *c) {
    conn_remove(c->role_ctx, call);
    if (call->slot) client_slot_begin(c, call->slot);
    if (call->put) set_reply(call, c);
    else if (call->verb) answers_reply(call, c);
    else keyspace_reply(call, c);
    if (call->slot) client_slot_end(c, call->slot);
    else client_unblock(c);
}

/* ---- GET and MGET replies that stream ---- */

/* The streamed reply is over (whole, or its client gone): what was not
 * sent is dropped and the call goes. */
static void seq_over(gw_call *call) {
    if (call->c) conn_remove(call->c->role_ctx, call);
    for (size_t i = call->next; i < call->ngot; i++) cluster_got_forget(call->store, &call->got[i]);
    free(call);   /* not to the free list: a stream may end after the server's state is gone */
}

static void seq_next(gw_call *call);

/* A value's stream is over: the reply goes on with the next element. */
static void stream_done(void *ctx) {
    gw_call *call = ctx;
    call->gstream = NULL;
    if (call->c && call->next < call->ngot) seq_next(call);
    else seq_over(call);
}

/* The reply from element call->next on, into the call's slot: values
 * read whole as GET replies them (t_object_reply_got), up to one located
 * to stream, whose stream comes back to stream_done when over. The last
 * element ends the slot. */
static void seq_next(gw_call *call) {
    client *c = call->c;
    client_slot_begin(c, call->slot);
    if (call->next == 0 && call->array) reply_array(c, (long long)call->ngot);
    for (; call->next < call->ngot; call->next++) {
        store_got *g = &call->got[call->next];
        if (!g->stream) {
            t_object_reply_got(c, g);
            continue;
        }
        client_slot_part(c, call->slot);
        const store_key *k = &call->keys[call->next];
        int last = ++call->next == call->ngot;
        call->gstream = cluster_stream_send(call->store, g, c, call->slot, !last, k->ptr, k->len, stream_done, call);
        return;
    }
    client_slot_end(c, call->slot);
    seq_over(call);
}

/* A GET or MGET with a value located to stream (read_batch.c): the reply
 * fills a slot element by element, a streamed value slice by slice, and
 * the call stays its connection's until the reply is over. Inside EXEC
 * (the client waits, no slot) the slot opens now and the transaction
 * goes on behind it. 0 if nothing streams. */
static int call_streams(gw_call *call) {
    client *c = call->c;
    size_t i = 0;
    while (i < call->ngot && !call->got[i].stream) i++;
    if (!c || i == call->ngot) return 0;
    int blocked = !call->slot;
    if (blocked) call->slot = client_slot_open(c);
    seq_next(call);
    if (blocked) client_unblock(c);
    return 1;
}

static void keyspace_free(struct gw_keyspace *ks);

/* The call's cluster work is over: reply and free. */
static void call_finish(gw_call *call) {
    store *s = call->store;
    if (call->put) ship_next(call);
    if (call->c) call_answer(call, call->c);
    else if (call->put) s->ops->put_end(s, call->put);   /* its client is gone; a value it sent in full stays stored */
    free(call->ans);
    keyspace_free(call->ks);
    call_free(call);
}

/* A GET's or MGET's values are in (store.h get_async): the reply is
 * written from them, once, into the call's slot (inside EXEC: to the
 * waiting client). */
static void read_got(void *ctx) {
    gw_call *call = ctx;
    client *c = call->c;
    for (size_t i = 0; i < call->ngot; i++)
        if (call->got[i].rc == STORE_OK) hint_saw(call->ga, call->got[i].len);
    if (call_streams(call)) return;
    if (!c) {
        for (size_t i = 0; i < call->ngot; i++) cluster_got_forget(call->store, &call->got[i]);
        call_free(call);
        return;
    }
    conn_remove(c->role_ctx, call);
    if (call->slot) client_slot_begin(c, call->slot);
    if (call->array) reply_array(c, (long long)call->ngot);
    long long start, end;
    if (call->range && t_object_getrange_args(call->argv, &start, &end) == 0)   /* checked before asking */
        t_object_reply_getrange(c, start, end, &call->got[0]);
    else
        for (size_t i = 0; i < call->ngot; i++) t_object_reply_got(c, &call->got[i]);
    if (call->slot) client_slot_end(c, call->slot);
    else client_unblock(c);
    call_free(call);
}

static int ask_same_bytes(gw_call *call);

static void write_done(gw_write *w) {
    gw_call *call = (gw_call *)((char *)w - offsetof(gw_call, write));
    if (!ask_same_bytes(call)) call_finish(call);
}

static void call_ship(gw_call *call) {
    call->write = (gw_write){.put = call->put, .done = write_done};
    if (!cluster_stream_finish(call->store, &call->write))   /* not streamed on the way in */
        put_batcher_add(cluster_store_puts(call->store), &call->write);
}

/* The call is under way: its reply takes a slot (inside EXEC: the client
 * waits). Its cost is estimated before argv moves on. */
static void call_start(gw_call *call, client *c) {
    gw_conn *gc = conn_of(c);
    gw_call **pp = &gc->calls;
    while (*pp) pp = &(*pp)->next_of_conn;
    *pp = call;
    call->writes = (c->last_cmd->flags & CMD_WRITE) != 0;
    call->nkeys = nkeys_of(c, c->last_cmd);
    call->cost = cost_of(c, c->last_cmd);
    gc->bytes += call->cost;
    if (c->multi) client_block(c);
    else call->slot = client_slot_open(c);
}

/* GET key / MGET key [key ...] / GETRANGE key start end: the store reads
 * them with every other read of this loop iteration; read_got replies.
 * Large values of GET and MGET stream into the reply (call_streams);
 * GETRANGE's is read whole, its range checked slice by slice. */
static void async_read_command(client *c) {
    long long start, end;
    int range = strcmp(c->last_cmd->name, "getrange") == 0;
    if (range && t_object_getrange_args(c->argv, &start, &end) < 0) {   /* its error asks nothing */
        shared_proc(async_of(c), c)(c);
        return;
    }
    gw_call *call = call_create(c, (size_t)nkeys_of(c, c->last_cmd), 0);
    for (size_t i = 0; i < call->ngot; i++) call->keys[i] = (store_key){call->argv[i + 1].ptr, call->argv[i + 1].len};
    call->array = strcmp(c->last_cmd->name, "mget") == 0;
    call->range = range;
    call_start(call, c);
    store *s = call->store;
    s->ops->get_async(s, call->keys, call->ngot, range ? 0 : STORE_GET_STREAM, call->got, read_got, call);
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
    resp_arg_replace(val, dst);   /* an inline SET's value was the parser's */
    c->pending_put = put;
    c->pending_put_size = val->len;
}

/* SET key value (no options), the value streamed into the store. */
static void async_set_command(client *c) {
    int async = set_goes_async(c);
    if (async) start_unstreamed(c);
    if (!async || !c->pending_put) {
        shared_proc(async_of(c), c)(c);
        return;
    }
    gw_call *call = call_create(c, 0, 2);
    call_start(call, c);
    hint_saw(call->ga, c->pending_put_size);
    call->put = c->pending_put;
    call->put_size = c->pending_put_size;
    c->pending_put = NULL;   /* the call owns it now: dispatch must not abort it */
    call->hash = siphash24(call->argv[1].ptr, call->argv[1].len, call->ga->hash_key);
    gw_call *first = inflight_set(call->ga, &call->argv[1], call->hash);
    if (first) {
        wait_behind(first, call);
        return;
    }
    inflight_add(call->ga, call);
    call_ship(call);
}

/* ---- DEL, EXISTS, STRLEN, TYPE, TTL, a stored SET's bytes: asked on
 * the client's async face, answered on the loop ---- */

static void answered(gw_call *call) { call_finish(call); }

static void ask_run(gw_job *j, mkv_client *mc) {
    gw_call *call = (gw_call *)((char *)j - offsetof(gw_call, job));
    cluster_answer(mc, call->verb, call->ans, call->nans);
}

static void ask_ran(gw_job *j) {
    gw_call *call = (gw_call *)((char *)j - offsetof(gw_call, job));
    for (size_t i = 0; j->cancelled && i < call->nans; i++) call->ans[i].failed |= !call->ans[i].answered;
    answered(call);
}

/* Every answer asked is in. Keys whose answer did not come (the
 * connection failed, a key was refused, or there is no face) are asked
 * by blocking calls on a worker, never on the loop. */
static void ask_done(gw_call *call) {
    if (--call->asking) return;
    int missing = 0;
    for (size_t i = 0; call->verb && i < call->nans; i++)
        missing |= !call->ans[i].answered && cluster_key_ok(call->ans[i].keylen);
    if (!missing) {
        answered(call);
        return;
    }
    call->job = (gw_job){.run = ask_run, .done = ask_ran};
    workers_submit(cluster_store_workers(call->store), &call->job);
}

/* A stat's outcome: the size (-1: no complete object) and CRC. */
static void stat_answer(gw_answer *a, const mkv_op *op) {
    if (op->status != MKV_OK && op->status != MKV_ENOTFOUND) return;
    a->answered = 1;
    a->n = op->status == MKV_OK && op->len <= INT64_MAX ? (long long)op->len : -1;
    a->crc = op->crc;
}

/* On the loop: each key's outcome as its answer; a key that failed is
 * left unanswered (a worker then asks). */
static void face_answered(mkv_op *op) {
    gw_face_op *q = (gw_face_op *)op;
    gw_call *call = q->owner;
    if (op->kind == MKV_OP_STAT) stat_answer(&call->ans[0], op);
    for (size_t k = 0; k < op->n; k++) {
        gw_answer *a = &call->ans[q->idx[k]];
        int st = q->objs[k].status;
        if (op->kind == MKV_OP_REMOVE_BATCH && (st == MKV_OK || st == MKV_ENOTFOUND)) a->n = st == MKV_OK;
        else if (op->kind == MKV_OP_EXISTS_BATCH && op->status == MKV_OK && st == MKV_OK) a->n = q->res[k] == 1;
        else continue;
        a->answered = 1;
    }
    free(q);
    ask_done(call);
}

/* The call's keys a master could hold (duplicates too: EXISTS counts
 * each) as one operation on the client's async face (over groups the
 * router's, split there by group): a DEL's or EXISTS's (TYPE's, TTL's) as
 * a batch, STRLEN's or a stored SET's one key as a stat. */
static void ask_face(mkv_async *face, gw_call *call, mkv_op_kind kind) {
    gw_face_op *q = cluster_face_op(kind, call->nans, 0, face_answered);
    for (size_t i = 0; i < call->nans; i++) {
        const gw_answer *a = &call->ans[i];
        if (!cluster_key_ok(a->keylen)) continue;
        q->idx[q->op.n] = i;
        q->objs[q->op.n++] = (mkv_obj){.key = a->key, .keylen = a->keylen};
    }
    q->owner = call;
    size_t m = q->op.n;
    q->op.key = q->objs[0].key;
    q->op.keylen = q->objs[0].keylen;
    if (kind == MKV_OP_STAT) q->op.n = 0;   /* one key, no batch */
    if (face && m > 0 && mkv_async_submit(face, &q->op) == MKV_OK) call->asking++;
    else free(q);
}

static void answers_alloc(gw_call *call, size_t n) {
    call->nans = n;
    call->ans = xcalloc(n, sizeof(gw_answer));
}

/* The master command answering a key for the shared command c runs
 * (a worker's blocking call names it), and the face's operation for it. */
static const char *ask_verb(const client *c) {
    if (c->last_cmd->flags & CMD_WRITE) return PROTO_VERB_REMOVE;   /* DEL, REMOVE, UNLINK */
    return strcmp(c->last_cmd->name, "strlen") == 0 ? PROTO_VERB_OBJECT : PROTO_VERB_EXISTS;
}

static mkv_op_kind face_kind(const char *verb) {
    if (strcmp(verb, PROTO_VERB_REMOVE) == 0) return MKV_OP_REMOVE_BATCH;
    return strcmp(verb, PROTO_VERB_OBJECT) == 0 ? MKV_OP_STAT : MKV_OP_EXISTS_BATCH;
}

/* A started call with room for n answers. */
static gw_call *ask_call_start(client *c, size_t n) {
    gw_call *call = call_create(c, 0, 0);
    answers_alloc(call, n);
    call_start(call, c);
    return call;
}

/* DEL key [key ...] / EXISTS key [key ...] / TYPE, TTL, PTTL / STRLEN
 * key: the keys as one operation on the client's async face (one
 * MOON.MREMOVE or MOON.MEXISTS per 4096 keys, STRLEN one MOON.OBJECT;
 * over groups one per group, the parts at once), pipelined with every
 * other's; the reply is written once from the answers. Keys no master
 * would know are answered "no". */
static void async_ask_command(client *c) {
    gw_call *call = ask_call_start(c, (size_t)(c->argc - 1));
    call->verb = ask_verb(c);
    call->asking = 1;   /* until every key is sent */
    for (size_t i = 0; i < call->nans; i++) {
        call->ans[i].key = call->argv[i + 1].ptr;
        call->ans[i].keylen = call->argv[i + 1].len;
    }
    ask_face(cluster_store_face(c->srv->store), call, face_kind(call->verb));
    ask_done(call);
}

/* A SET (without NX) whose key is stored answers OK if the stored bytes
 * are its own: their size and CRC are asked here, pipelined, rather than
 * by the shared command on the loop. 1 if asked: the call finishes when
 * the answer comes. */
static int ask_same_bytes(gw_call *call) {
    const store_put *p = call->put;
    if (!call->c || call->argc > 3 || !p->shipped || p->ship_rc != STORE_EXISTS) return 0;
    answers_alloc(call, 1);
    call->ans[0].key = call->argv[1].ptr;
    call->ans[0].keylen = call->argv[1].len;
    call->verb = PROTO_VERB_OBJECT;
    call->asking = 1;
    ask_face(cluster_store_face(call->store), call, MKV_OP_STAT);
    ask_done(call);
    return 1;
}

/* ---- DBSIZE, SCAN, KEYS, INFO, FLUSHALL: one question to the store
 * (store.h stat_async, scan_async, flush_async; KEYS walks them), the
 * reply written once from its answer ---- */

enum { KS_DBSIZE, KS_INFO, KS_SCAN, KS_KEYS, KS_FLUSH, KS_PIN };

typedef struct gw_keyspace {
    int kind;
    store_stat st;            /* DBSIZE, INFO */
    store_page pg;            /* SCAN: its keys valid while the answer's done runs */
    store_flushed fl;         /* FLUSHALL */
    keys_walk *walk;          /* KEYS */
    store_pinq pq;            /* MOON.PREFIX, PREFIXPIN, UNPIN: keys into the call's argv */
} gw_keyspace;

static void keyspace_free(gw_keyspace *ks) {
    if (!ks) return;
    t_object_keys_free(ks->walk);
    t_object_pinq_free(&ks->pq);
    free(ks);
}

/* MOON.PREFIX, MOON.PREFIXPIN, MOON.UNPIN (the gateway keeps pins: the master does). */
static int is_pin_verb(const resp_arg *name) {
    static const char *const verbs[] = {PROTO_VERB_PREFIX, PROTO_VERB_PREFIXPIN, PROTO_VERB_UNPIN};
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (strieq_len(name->ptr, name->len, verbs[i])) return 1;
    return 0;
}

static int cmd_is(const client *c, const char *name) { return strcmp(c->last_cmd->name, name) == 0; }

/* Whether the call asks the store: not when its arguments are refused
 * (nothing may be asked then: FLUSHALL would flush) or INFO's sections
 * do not read the store; the shared command then runs as it is, without
 * asking it. c->last_cmd may be another's: the row is named by argv[0]. */
static int keyspace_goes_async(const client *c) {
    scan_opts o;
    const resp_arg *name = &c->argv[0];
    if (strieq_len(name->ptr, name->len, "scan")) return scan_parse(c->argc, c->argv, &o) == NULL;
    if (strieq_len(name->ptr, name->len, "info")) return info_reads_store(c->argc - 1, c->argv + 1);
    if (strieq_len(name->ptr, name->len, "keys") || strieq_len(name->ptr, name->len, "dbsize")) return 1;
    if (is_pin_verb(name)) {
        char err[128];
        return t_object_pinq_parse(c->argc, c->argv, 1, NULL, err, sizeof err) == 0;
    }
    return flushall_args_ok(c);
}

/* The store answered: the reply is written now (a SCAN page's keys are
 * valid only meanwhile). */
static void keyspace_answered(void *ctx) { call_finish(ctx); }

static void keyspace_reply(gw_call *call, client *c) {
    gw_keyspace *ks = call->ks;
    scan_opts o;
    switch (ks->kind) {
    case KS_DBSIZE: t_object_reply_dbsize(c, &ks->st); break;
    case KS_INFO: t_server_reply_info(c, call->argc, call->argv, &ks->st); break;
    case KS_KEYS: t_object_reply_keys(c, ks->walk); break;
    case KS_FLUSH: t_object_reply_flush(c, call->row->name, &ks->fl); break;
    case KS_PIN: t_object_reply_pinq(c, &ks->pq); break;
    default:
        scan_parse(call->argc, call->argv, &o);   /* valid: keyspace_goes_async */
        t_object_reply_scan(c, &o, &ks->pg);
        break;
    }
}

static int keyspace_kind(const client *c) {
    if (cmd_is(c, "dbsize")) return KS_DBSIZE;
    if (cmd_is(c, "info")) return KS_INFO;
    if (cmd_is(c, "scan")) return KS_SCAN;
    if (cmd_is(c, "keys")) return KS_KEYS;
    if (is_pin_verb(&c->argv[0])) return KS_PIN;
    return KS_FLUSH;   /* flushall, flushdb: named in async_proc, never a default */
}

/* DBSIZE / SCAN / KEYS / INFO / FLUSHALL|FLUSHDB / MOON.PREFIX|PREFIXPIN|UNPIN: the store's question is
 * asked (pipelined with everyone else's over the master connection) and
 * keyspace_answered writes the reply once. */
static void async_keyspace_command(client *c) {
    if (!keyspace_goes_async(c)) {
        shared_proc(async_of(c), c)(c);
        return;
    }
    store *s = c->srv->store;
    gw_call *call = call_create(c, 0, 0);
    gw_keyspace *ks = call->ks = xcalloc(1, sizeof *ks);
    ks->kind = keyspace_kind(c);
    call_start(call, c);
    scan_opts o;
    switch (ks->kind) {
    case KS_DBSIZE:
    case KS_INFO: s->ops->stat_async(s, &ks->st, keyspace_answered, call); break;
    case KS_KEYS:
        ks->walk = t_object_keys_new(&call->argv[1]);
        t_object_keys_run(ks->walk, s, keyspace_answered, call);
        break;
    case KS_FLUSH: s->ops->flush_async(s, &ks->fl, keyspace_answered, call); break;
    case KS_PIN: {
        char err[128];
        t_object_pinq_parse(call->argc, call->argv, 1, &ks->pq, err, sizeof err);   /* valid: keyspace_goes_async */
        store_pin_ask(s, &ks->pq, keyspace_answered, call);
        break;
    }
    default:
        scan_parse(call->argc, call->argv, &o);
        s->ops->scan_async(s, o.cursor, o.count, &ks->pg, keyspace_answered, call);
        break;
    }
}

/* The proc replacing row's shared one. */
static command_proc *async_proc(const command *row) {
    static const char *const keyspace[] = {"dbsize", "scan", "keys", "info", "flushall", "flushdb",
                                           "moon.prefix", "moon.prefixpin", "moon.unpin"};
    if (row->value_arg) return async_set_command;
    if (strcmp(row->name, "get") == 0 || strcmp(row->name, "mget") == 0 || strcmp(row->name, "getrange") == 0)
        return async_read_command;
    for (size_t i = 0; i < sizeof keyspace / sizeof keyspace[0]; i++)
        if (strcmp(row->name, keyspace[i]) == 0) return async_keyspace_command;
    return async_ask_command;
}

static void async_free(gw_async *ga) {
    for (gw_call *x = ga->free_calls, *next; x; x = next) {
        next = x->next_of_conn;
        free(x);
    }
    free(ga->inflight);
    free(ga);
}

void gateway_async_register(server *srv) {
    gw_async *ga = xcalloc(1, sizeof *ga);
    ga->loop = srv->loop;
    ga->hint_since_ms = loop_now_ms(ga->loop);
    ga->nbuckets = 64;
    ga->inflight = xcalloc(ga->nbuckets, sizeof *ga->inflight);
    if (random_bytes(ga->hash_key, sizeof ga->hash_key) != 0) {
        uint64_t seed[2] = {mono_us(), (uint64_t)(uintptr_t)ga};   /* no CSPRNG: still per process */
        memcpy(ga->hash_key, seed, sizeof ga->hash_key);
    }
    cluster_store_set_async(srv->store, ga, async_free);
    for (size_t i = 0; i < NASYNC; i++) {
        const command *row = commands_lookup(srv, async_names[i], strlen(async_names[i]));
        if (!row) continue;   /* t_object_register first */
        ga->rows[i] = *row;
        ga->shared[i] = row->proc;
        ga->rows[i].proc = async_proc(row);
        commands_register(srv, &ga->rows[i], 1);
    }
    srv->role_pipelined = gateway_pipelined;
}
