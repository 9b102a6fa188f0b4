/* server/networking.c - sockets, the read/parse/dispatch path and the
 * reply queue, on the server's event loop (core/loop.h).
 *
 * Read path: bytes go into one shared read buffer and are fed to the
 * client's parser; each whole command is dispatched at once (pipelining).
 * Input is only kept per client when the client stops being served in the
 * middle of a buffer (blocked, throttled, closing). While the parser is
 * receiving a large bulk payload, read() goes straight into its final home
 * (for SET: the object's memory in the segment).
 *
 * Write path: replies are appended to a list of chunks, 16 KiB owned
 * blocks that coalesce small replies and zero-copy references to large
 * bodies. Before the loop sleeps (a before-sleep hook) every client with
 * new output gets one writev; what does not fit waits until writable.
 * A large value with per-slice checksums is checked slice by slice as the
 * writer reaches it, on this thread: up to 1 MiB of slices is checked and
 * handed to the socket in one writev, and when the socket is full the next
 * slice is checked while the client drains it. No byte goes before its
 * slice passed; a slice that fails closes the connection instead of being
 * sent. A writev per 256 KiB slice cost more than the checks (by hand, a
 * reader with large recv()s at 4 and 50 connections: a writev per MiB gave
 * 25-35 % more GETs/s at 20-40 % less server CPU each). A helper
 * thread did the checking before: on a 2-core VM its two hand-offs per
 * slice cost more CPU than the checksum itself (about 360 us of server CPU
 * per 1 MiB GET against 220-260 us here and 240-265 us for redis-server).
 *
 * Client sockets keep at most NET_NOTSENT_LOWAT of a reply queued unsent
 * (TCP_NOTSENT_LOWAT). Without it a writev hands the kernel up to a whole
 * send buffer (~4 MiB); what the peer's window cannot take yet waits in
 * our socket and is transmitted from the peer's ACKs, which on loopback
 * means inside the client's recv(): redis-benchmark spent about a fifth
 * of its CPU pushing our segments into its own receive queue. With the
 * limit the socket takes what can go now, our writev transmits it, the
 * client's ACK only wakes us, and the next slice is checked while the
 * client reads. By hand (redis-benchmark GET 4 MiB, 6 alternated rounds,
 * load 6-9): client CPU per GET 1000 -> 833 us at -c 4 and 2575 -> 1750
 * us at -c 50 (1016 and 2625 against redis-server), the server's 833 ->
 * 816 and 550 -> 925 us (it now does that transmit and takes more
 * wake-ups); 16 and 128 KiB cost the server more, 32 KiB the client.
 *
 * Clients are freed only from the loop's own callbacks, never from inside
 * a command: reply functions and client_close_async just mark the client,
 * and the prepare pass frees it. */
#include "server/networking.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/anet.h"
#include "core/crc32c.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/util.h"
#include "server/commands.h"
#include "server/io_threads.h"
#include "server/multi.h"
#include "server/put_guard.h"

#define NET_READ_BUF      (64 * 1024)        /* one read() of ordinary input */
#define NET_BLOCK_SIZE    (16 * 1024)        /* owned reply block */
#define NET_FREE_BLOCKS   256                /* spare blocks kept for reuse */
#define NET_FREE_SLOTS    1024               /* spare reply slots (a gateway opens one per request) */
#define NET_REF_MIN       (16 * 1024)        /* smaller ref bodies are copied */
#define NET_DIRECT_MIN    (16 * 1024)        /* smaller payload rests go via the read buffer */
#define NET_DIRECT_BUDGET (8 * 1024 * 1024)  /* direct bytes per read event (fairness) */
#define NET_WRITE_BUDGET  (16 * 1024 * 1024) /* bytes per flush (fairness) */
#define NET_CHECK_AHEAD   (1024 * 1024)      /* a sliced reply's bytes checked per writev */
#define NET_NOTSENT_LOWAT (64 * 1024)        /* a reply's bytes queued unsent per socket (top) */
#define NET_PREFETCH_KEYS 16                 /* commands whose keys are prefetched together */
#define NET_OUTPUT_SOFT   (1024 * 1024)      /* queued output that pauses reading */
#define NET_ACCEPT_BATCH  256
#define NET_MAX_SLOTS     64                 /* pipelined commands in flight per client */
#define NET_SLOT_INLINE   512                /* a slot's own room for a small reply */
#ifndef IOV_MAX
#define IOV_MAX 1024
#endif
#define NET_IOV (IOV_MAX < 1024 ? IOV_MAX : 1024)

/* One piece of queued output. Owned chunks hold their bytes in data[];
 * reference chunks point at memory the caller keeps alive until release. */
typedef struct out_chunk {
    struct out_chunk *next;
    size_t len;               /* bytes in data[] or at ref */
    size_t sent;              /* of len, already written */
    const char *ref;          /* NULL for an owned block */
    void (*release)(void *ctx);
    void *ctx;
    store_slices sl;          /* sl.count > 0: a ref sent only as checked */
    size_t checked;           /* of a sliced ref: bytes whose slices passed */
    void (*corrupt)(void *ctx, uint32_t slice);
    int slot;                 /* a reply slot's place: SLOT_OPEN holds back what follows */
    struct out_chunk *held_head, *held_tail;   /* a held slot's replies (client_slot_hold) */
    size_t cap;               /* room in data[]: NET_BLOCK_SIZE, NET_SLOT_INLINE for a slot */
    /* A slot of a measured command (metrics): recorded when it ends. */
    int measured;
    size_t cmd;
    uint64_t since_ns, value;
    char data[];
} out_chunk;

enum { SLOT_OPEN = 1, SLOT_DONE };

typedef struct conn conn;

typedef struct net_state {
    int listen_fd;
    int port;
    loop_hook *flush_hook;
    loop_signal *sigterm, *sigint;
    conn *clients_head, *clients_tail;  /* connection order */
    conn *pending;                      /* clients with work before sleep */
    char rbuf[NET_READ_BUF];
    resp_buf scratch;                   /* one reply being encoded */
    out_chunk *free_blocks, *free_refs, *free_slots; /* recycled chunks */
    unsigned nfree_blocks, nfree_refs, nfree_slots;
} net_state;

struct conn {
    client c;
    net_state *net;
    resp_parser *parser;
    conn *prev, *next;        /* net->clients list */
    conn *pending_next;       /* net->pending list */
    int in_pending;
    int resume;               /* feed held input before sleep */
    int dead;                 /* replies are dropped: closing */
    /* Input read but not yet parsed; only while not being served. */
    char *held;
    size_t held_len, held_pos;
    out_chunk *out_head, *out_tail;
    size_t out_owned, out_ref;      /* unsent bytes */
    /* Reply slots (pipelined commands in flight) and the one being
     * filled: replies go to fill_head..fill_tail until it ends. */
    unsigned nslots;
    out_chunk *filling, *fill_head, *fill_tail;
    out_chunk *last_slot;           /* the one opened last (client_slot_measure) */
    uint64_t fill_mark;             /* c.reply_bytes when the filling began */
    uint64_t put_landed;            /* reported to put_progress */
    uint64_t put_window;            /* value bytes the store lets us write (put_progress) */
    int put_stalled;                /* reading waits for the store's window to move */
    int limits_authenticated;       /* which limits the parser has */
    void (*on_free)(client *c, void *ctx);   /* role_ctx's cleanup */
};

static net_state *net_of(server *srv) { return srv->net; }
static conn *conn_of(const client *c) { return c->net; }

/* ---- Chunks --------------------------------------------------------------- */

static out_chunk *chunk_take(out_chunk **list, unsigned *n, size_t datasize) {
    out_chunk *ch = *list;
    if (ch) {
        *list = ch->next;
        (*n)--;
    } else {
        ch = xmalloc(sizeof *ch + datasize);
    }
    memset(ch, 0, sizeof *ch);
    ch->cap = datasize;
    return ch;
}

/* ch onto a free list unless it holds max already; 0 if not kept. */
static int chunk_keep(out_chunk **list, unsigned *n, unsigned max, out_chunk *ch) {
    if (*n >= max) return 0;
    ch->next = *list;
    *list = ch;
    (*n)++;
    return 1;
}

/* Return a written (or abandoned) chunk: release a reference, recycle. */
static void chunk_done(net_state *net, out_chunk *ch) {
    int kept;
    if (ch->slot) {   /* little room: a list of their own */
        kept = chunk_keep(&net->free_slots, &net->nfree_slots, NET_FREE_SLOTS, ch);
    } else if (ch->ref) {
        if (ch->release) ch->release(ch->ctx);
        kept = chunk_keep(&net->free_refs, &net->nfree_refs, NET_FREE_BLOCKS, ch);
    } else {
        kept = chunk_keep(&net->free_blocks, &net->nfree_blocks, NET_FREE_BLOCKS, ch);
    }
    if (!kept) free(ch);
}

static void chunk_list_free(out_chunk *ch) {
    while (ch) {
        out_chunk *next = ch->next;
        free(ch);
        ch = next;
    }
}

/* The last chunk replies are appended after: the slot being filled has
 * its own list until it ends (its first bytes go into the slot itself). */
static out_chunk *out_last(const conn *cn) {
    if (cn->filling) return cn->fill_tail ? cn->fill_tail : cn->filling;
    return cn->out_tail;
}

/* Whether small replies may be appended to t's bytes. */
static int out_room(const conn *cn, const out_chunk *t) {
    return t && !t->ref && t->len < t->cap && (t->slot != SLOT_OPEN || t == cn->filling);
}

static void out_push(conn *cn, out_chunk *ch) {
    out_chunk **head = cn->filling ? &cn->fill_head : &cn->out_head;
    out_chunk **tail = cn->filling ? &cn->fill_tail : &cn->out_tail;
    if (*tail) (*tail)->next = ch;
    else *head = ch;
    *tail = ch;
}

/* ---- Scheduling -------------------------------------------------------------- */

/* Make sure cn is looked at before the loop sleeps. */
static void conn_schedule(conn *cn) {
    if (cn->in_pending) return;
    cn->in_pending = 1;
    cn->pending_next = cn->net->pending;
    cn->net->pending = cn;
}

static void conn_unschedule(conn *cn) {
    if (!cn->in_pending) return;
    for (conn **pp = &cn->net->pending; *pp; pp = &(*pp)->pending_next) {
        if (*pp == cn) {
            *pp = cn->pending_next;
            break;
        }
    }
    cn->in_pending = 0;
}

static size_t conn_output(const conn *cn) { return cn->out_owned + cn->out_ref; }

/* Whether cn's input must wait: a command is still answering (blocked,
 * or waiting for the pipelined ones before it, or the pipeline is full),
 * the client is going away, or it does not read its replies fast enough. */
static int conn_paused(const conn *cn) {
    const uint32_t waiting = CLIENT_BLOCKED | CLIENT_DEFERRED | CLIENT_CLOSE_AFTER_REPLY | CLIENT_CLOSE_ASAP;
    return cn->dead || cn->put_stalled || (cn->c.flags & waiting) || cn->nslots >= NET_MAX_SLOTS ||
           conn_output(cn) > NET_OUTPUT_SOFT;
}

static void conn_mark_dead(conn *cn) {
    cn->c.flags |= CLIENT_CLOSE_ASAP;
    cn->dead = 1;
    conn_schedule(cn);
}

/* ---- Queuing replies ---------------------------------------------------------- */

/* Copy n bytes to the end of cn's owned output. */
static void out_append(conn *cn, const void *p, size_t n) {
    if (cn->dead) return;
    net_state *net = cn->net;
    const char *s = p;
    while (n) {
        out_chunk *t = out_last(cn);
        if (!out_room(cn, t)) {
            t = chunk_take(&net->free_blocks, &net->nfree_blocks, NET_BLOCK_SIZE);
            out_push(cn, t);
        }
        size_t k = t->cap - t->len;
        if (k > n) k = n;
        memcpy(t->data + t->len, s, k);
        t->len += k;
        s += k;
        n -= k;
        cn->out_owned += k;
        cn->c.reply_bytes += k;
    }
    if (cn->out_owned > cn->c.srv->cfg.client_output_limit) {
        log_warning("Client id=%llu addr=%s closed: %zu reply bytes queued, over the %llu byte limit",
                    (unsigned long long)cn->c.id, cn->c.addr, cn->out_owned,
                    (unsigned long long)cn->c.srv->cfg.client_output_limit);
        conn_mark_dead(cn);
        return;
    }
    conn_schedule(cn);
}

/* Append what the writer put in the scratch buffer. */
static resp_buf *scratch(client *c) {
    resp_buf *b = &net_of(c->srv)->scratch;
    resp_buf_clear(b);
    return b;
}

static void scratch_flush(client *c) {
    resp_buf *b = &net_of(c->srv)->scratch;
    out_append(conn_of(c), b->data, b->len);
}

void reply_raw(client *c, const void *p, size_t n) { out_append(conn_of(c), p, n); }

void reply_simple(client *c, const char *s) {
    resp_add_simple(scratch(c), s);
    scratch_flush(c);
}

void reply_error(client *c, const char *msg) {
    resp_add_error(scratch(c), msg);
    scratch_flush(c);
}

void reply_errorf(client *c, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    reply_error(c, msg);
}

void reply_integer(client *c, long long v) {
    resp_add_integer(scratch(c), v);
    scratch_flush(c);
}

void reply_bulk(client *c, const void *p, size_t n) {
    resp_add_bulk_header(scratch(c), n);
    scratch_flush(c);
    out_append(conn_of(c), p, n);
    out_append(conn_of(c), "\r\n", 2);
}

void reply_bulk_cstr(client *c, const char *s) {
    if (!s) reply_null(c);
    else reply_bulk(c, s, strlen(s));
}

void reply_null(client *c) {
    resp_add_null(scratch(c), c->resp);
    scratch_flush(c);
}

void reply_array(client *c, long long n) {
    resp_add_array(scratch(c), n);
    scratch_flush(c);
}

void reply_map(client *c, long long n) {
    resp_add_map(scratch(c), c->resp, n);
    scratch_flush(c);
}

void reply_set(client *c, long long n) {
    resp_add_set(scratch(c), c->resp, n);
    scratch_flush(c);
}

void reply_double(client *c, double d) {
    resp_add_double(scratch(c), c->resp, d);
    scratch_flush(c);
}

void reply_bool(client *c, int v) {
    resp_add_bool(scratch(c), c->resp, v);
    scratch_flush(c);
}

void reply_verbatim(client *c, const char *s, size_t n) {
    resp_add_verbatim(scratch(c), c->resp, "txt", s, n);
    scratch_flush(c);
}

void reply_ok(client *c) { out_append(conn_of(c), "+OK\r\n", 5); }

void reply_wrong_arity(client *c, const char *cmdname) {
    reply_errorf(c, "ERR wrong number of arguments for '%s' command", cmdname);
}

void reply_syntax_error(client *c) { reply_error(c, "ERR syntax error"); }

/* Queues the bulk header and a reference chunk for p (NULL when the
 * client is dead: release already ran). */
/* A zero-copy reference to n bytes at p, queued as they are. */
static out_chunk *push_ref(conn *cn, const void *p, size_t n, void (*release)(void *ctx), void *ctx) {
    out_chunk *ch = chunk_take(&cn->net->free_refs, &cn->net->nfree_refs, 0);
    ch->ref = p;
    ch->len = n;
    ch->release = release;
    ch->ctx = ctx;
    out_push(cn, ch);
    cn->out_ref += n;
    cn->c.reply_bytes += n;
    return ch;
}

static out_chunk *push_bulk_ref(client *c, const void *p, size_t n, void (*release)(void *ctx),
                                void *ctx) {
    conn *cn = conn_of(c);
    resp_add_bulk_header(scratch(c), n);
    scratch_flush(c);
    if (cn->dead) {   /* the header pushed it over the limit */
        if (release) release(ctx);
        return NULL;
    }
    out_chunk *ch = push_ref(cn, p, n, release, ctx);
    out_append(cn, "\r\n", 2);
    return ch;
}

/* A small body costs less to copy than to pin and add to the iovec, and
 * a closing client takes none: 1 when it was handled so (released). */
static int ref_copied(client *c, const void *p, size_t n, int bulk, void (*release)(void *ctx), void *ctx) {
    conn *cn = conn_of(c);
    if (n >= NET_REF_MIN && !cn->dead) return 0;
    if (!cn->dead && bulk) reply_bulk(c, p, n);
    else if (!cn->dead) reply_raw(c, p, n);
    if (release) release(ctx);
    return 1;
}

void reply_bulk_ref(client *c, const void *p, size_t n, void (*release)(void *ctx), void *ctx) {
    if (!ref_copied(c, p, n, 1, release, ctx)) push_bulk_ref(c, p, n, release, ctx);
}

void reply_raw_ref(client *c, const void *p, size_t n, void (*release)(void *ctx), void *ctx) {
    if (!ref_copied(c, p, n, 0, release, ctx)) push_ref(conn_of(c), p, n, release, ctx);
}

/* A slice failed: the reply cannot be finished, so the connection goes
 * (what the client got so far is a cut-off bulk, never a wrong byte). */
static void sliced_failed(conn *cn, out_chunk *ch, uint32_t slice) {
    if (ch->corrupt) ch->corrupt(ch->ctx, slice);
    log_warning("Client id=%llu addr=%s: slice %u of a reply failed its checksum, closing",
                (unsigned long long)cn->c.id, cn->c.addr, slice);
    conn_mark_dead(cn);
}

/* Checks the slices of a sliced chunk until `upto` bytes passed (or all
 * did). -1 when one fails: the connection is then closing. */
static int chunk_check(conn *cn, out_chunk *ch, size_t upto) {
    if (upto > ch->len) upto = ch->len;
    while (ch->checked < upto) {
        uint32_t i = (uint32_t)(ch->checked / ch->sl.slice_len);
        size_t n = ch->len - ch->checked < ch->sl.slice_len ? ch->len - ch->checked : ch->sl.slice_len;
        if (crc32c(0, ch->ref + ch->checked, n) != ch->sl.crc[i]) {
            sliced_failed(cn, ch, i);
            return -1;
        }
        ch->checked += n;
    }
    return 0;
}

void reply_bulk_ref_sliced(client *c, const void *p, size_t n, const store_slices *sl,
                           void (*release)(void *ctx), void (*corrupt)(void *ctx, uint32_t slice),
                           void *ctx) {
    if (sl->count == 0 || sl->slice_len == 0) {   /* verified whole already */
        reply_bulk_ref(c, p, n, release, ctx);
        return;
    }
    out_chunk *ch = push_bulk_ref(c, p, n, release, ctx);
    if (!ch) return;
    ch->sl = *sl;
    ch->corrupt = corrupt;
}

/* ---- Blocking -------------------------------------------------------------- */

void client_block(client *c) { c->flags |= CLIENT_BLOCKED; }

void client_unblock(client *c) {
    conn *cn = conn_of(c);
    if (!(c->flags & CLIENT_BLOCKED)) return;
    c->flags &= ~CLIENT_BLOCKED;
    commands_unblocked(c);
    cn->resume = 1;
    conn_schedule(cn);
}

/* ---- Reply slots ------------------------------------------------------------ */

reply_slot *client_slot_open(client *c) {
    conn *cn = conn_of(c);
    out_chunk *ch = chunk_take(&cn->net->free_slots, &cn->net->nfree_slots, NET_SLOT_INLINE);
    ch->slot = SLOT_OPEN;
    out_push(cn, ch);
    cn->last_slot = ch;
    cn->nslots++;
    return (reply_slot *)ch;
}

void client_slot_begin(client *c, reply_slot *s) {
    conn *cn = conn_of(c);
    cn->filling = (out_chunk *)s;
    cn->fill_head = cn->fill_tail = NULL;
    cn->fill_mark = c->reply_bytes;
}

void client_slot_hold(client *c, reply_slot *s) {
    conn *cn = conn_of(c);
    out_chunk *ch = (out_chunk *)s;
    ch->held_head = cn->fill_head;
    ch->held_tail = cn->fill_tail;
    cn->filling = cn->fill_head = cn->fill_tail = NULL;
}

/* Unsent bytes of ch leave the output counts. */
static void chunk_uncount(conn *cn, const out_chunk *ch) {
    if (ch->ref) cn->out_ref -= ch->len - ch->sent;
    else cn->out_owned -= ch->len - ch->sent;
}

void client_slot_clear(client *c, reply_slot *s) {
    conn *cn = conn_of(c);
    out_chunk *ch = (out_chunk *)s;
    for (out_chunk *x = ch->held_head, *next; x; x = next) {
        next = x->next;
        chunk_uncount(cn, x);
        chunk_done(cn->net, x);
    }
    ch->held_head = ch->held_tail = NULL;
    cn->out_owned -= ch->len;
    ch->len = 0;
}

void client_slot_end(client *c, reply_slot *s) {
    conn *cn = conn_of(c);
    out_chunk *ch = (out_chunk *)s;
    int filling = cn->filling == ch;
    out_chunk *head = filling ? cn->fill_head : ch->held_head, *tail = filling ? cn->fill_tail : ch->held_tail;
    /* The slot's replies go in right after its place. */
    if (head) {
        tail->next = ch->next;
        ch->next = head;
        if (cn->out_tail == ch) cn->out_tail = tail;
    }
    ch->held_head = ch->held_tail = NULL;
    if (filling) cn->filling = cn->fill_head = cn->fill_tail = NULL;
    ch->slot = SLOT_DONE;
    if (ch->measured) commands_slot_done(c, ch->cmd, ch->since_ns, ch->value, c->reply_bytes - cn->fill_mark);
    cn->nslots--;
    /* A command waiting for the slots, or for room in the pipeline. */
    if ((cn->c.flags & CLIENT_DEFERRED) ? cn->nslots == 0 : cn->nslots == NET_MAX_SLOTS - 1) cn->resume = 1;
    conn_schedule(cn);
}

void client_slot_part(client *c, reply_slot *s) {
    conn *cn = conn_of(c);
    out_chunk *ch = (out_chunk *)s, *head = cn->fill_head, *tail = cn->fill_tail;
    if (ch->len) {   /* the slot's own first bytes come first, as a block before it */
        out_chunk *own = chunk_take(&cn->net->free_blocks, &cn->net->nfree_blocks, NET_BLOCK_SIZE);
        memcpy(own->data, ch->data, ch->len);
        own->len = ch->len;
        ch->len = 0;
        own->next = head;
        head = own;
        if (!tail) tail = own;
    }
    cn->filling = cn->fill_head = cn->fill_tail = NULL;
    if (!head) return;
    out_chunk **pp = &cn->out_head;
    while (*pp != ch) pp = &(*pp)->next;
    tail->next = ch;
    *pp = head;
    conn_schedule(cn);
}

unsigned client_slots_open(const client *c) { return conn_of(c)->nslots; }

void client_slot_measure(client *c, uint64_t since_ns, size_t cmd, uint64_t value) {
    out_chunk *ch = conn_of(c)->last_slot;
    if (!ch || ch->slot != SLOT_OPEN) return;
    ch->measured = 1;
    ch->since_ns = since_ns;
    ch->cmd = cmd;
    ch->value = value;
}

void client_defer(client *c) {
    conn *cn = conn_of(c);
    cn->c.flags |= CLIENT_DEFERRED;
    if (cn->nslots == 0) {   /* nothing to wait for: runs before sleep */
        cn->resume = 1;
        conn_schedule(cn);
    }
}

void client_close_async(client *c) { conn_mark_dead(conn_of(c)); }

void *client_role_ctx(client *c, size_t size, void (*on_free)(client *c, void *ctx)) {
    if (!c->role_ctx) {
        c->role_ctx = xcalloc(1, size);
        conn_of(c)->on_free = on_free;
    }
    return c->role_ctx;
}

size_t client_output_bytes(const client *c) { return conn_output(conn_of(c)); }

size_t client_query_bytes(const client *c) {
    const conn *cn = conn_of(c);
    return cn->held_len - cn->held_pos;
}

void clients_foreach(server *srv, void (*fn)(client *c, void *ctx), void *ctx) {
    for (conn *cn = net_of(srv)->clients_head; cn; cn = cn->next)
        if (!cn->dead) fn(&cn->c, ctx);
}

int server_port(const server *srv) { return net_of((server *)srv)->port; }

/* ---- Connection lifetime --------------------------------------------------------- */

static void conn_free(conn *cn) {
    server *srv = cn->c.srv;
    net_state *net = cn->net;
    if (cn->c.role_ctx) {
        if (cn->on_free) cn->on_free(&cn->c, cn->c.role_ctx);
        free(cn->c.role_ctx);
        cn->c.role_ctx = NULL;
    }
    /* A value that was streaming in must vanish with its client. */
    if (cn->c.pending_put) commands_abort_put(&cn->c);
    multi_free(&cn->c);
    loop_del_file(srv->loop, cn->c.fd, LOOP_READABLE | LOOP_WRITABLE);
    close(cn->c.fd);
    resp_parser_free(cn->parser);
    for (out_chunk *ch = cn->out_head, *next; ch; ch = next) {
        next = ch->next;
        for (out_chunk *x = ch->held_head, *xn; x; x = xn) {   /* a held slot's replies */
            xn = x->next;
            chunk_done(net, x);
        }
        chunk_done(net, ch);
    }
    free(cn->held);
    conn_unschedule(cn);
    if (cn->prev) cn->prev->next = cn->next;
    else net->clients_head = cn->next;
    if (cn->next) cn->next->prev = cn->prev;
    else net->clients_tail = cn->prev;
    srv->nclients--;
    log_debug("Client closed id=%llu addr=%s", (unsigned long long)cn->c.id, cn->c.addr);
    free(cn);
}

/* Before AUTH a client may only send small commands (what AUTH and HELLO
 * need), so a peer without the password cannot make the server allocate
 * much; after it, the configured limits apply. */
static void conn_apply_limits(conn *cn) {
    const mkv_config *cfg = &cn->c.srv->cfg;
    resp_limits lim = {cfg->proto_max_bulk_len, 0, 0, NULL};
    if (!cn->c.authenticated) {
        lim.max_bulk_len = cfg->preauth_max_bulk_len;
        lim.max_multibulk_len = cfg->preauth_max_multibulk;
        if ((long long)RESP_MAX_INLINE_LEN > cfg->preauth_max_bulk_len)
            lim.max_inline_len = (size_t)cfg->preauth_max_bulk_len;
        lim.scope = "unauthenticated";
    }
    resp_parser_set_limits(cn->parser, &lim);
    cn->limits_authenticated = cn->c.authenticated;
}

static void read_cb(event_loop *el, int fd, void *data, int mask);
static void write_cb(event_loop *el, int fd, void *data, int mask);
static void *bulk_dest(void *ctx, const resp_arg *argv, int argi, int argc, size_t len);

static void conn_create(server *srv, int fd, const struct sockaddr_storage *peer) {
    net_state *net = net_of(srv);
    conn *cn = xcalloc(1, sizeof *cn);
    client *c = &cn->c;
    anet_nodelay(NULL, fd);
    anet_notsent_lowat(NULL, fd, NET_NOTSENT_LOWAT);

    c->id = ++srv->next_client_id;
    c->fd = fd;
    c->srv = srv;
    c->resp = 2;
    c->authenticated = srv->cfg.requirepass[0] == '\0';
    c->ctime_ms = c->last_ms = mono_ms();
    c->net = cn;
    anet_format_addr(peer, c->addr, sizeof c->addr);
    anet_sock_name(NULL, fd, c->laddr, sizeof c->laddr);

    cn->net = net;
    cn->parser = resp_parser_create(NULL);
    conn_apply_limits(cn);
    resp_parser_set_bulk_dest(cn->parser, bulk_dest, cn);

    loop_add_file(srv->loop, fd, LOOP_READABLE, read_cb, cn);

    cn->prev = net->clients_tail;
    if (net->clients_tail) net->clients_tail->next = cn;
    else net->clients_head = cn;
    net->clients_tail = cn;
    srv->nclients++;
    log_debug("Accepted %s id=%llu", c->addr, (unsigned long long)c->id);
}

static void accept_cb(event_loop *el, int listen_fd, void *data, int mask) {
    server *srv = data;
    for (int i = 0; i < NET_ACCEPT_BATCH; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) log_warning("Accepting client connection: %s", strerror(errno));
            return;
        }
        srv->stats.connections_received++;
        if (srv->io && io_threads_handoff(srv->io, fd, &ss)) continue;
        server_adopt(srv, fd, &ss);
    }
}

void server_adopt(server *srv, int fd, const struct sockaddr_storage *peer) {
    static const char full[] = "-ERR max number of clients reached\r\n";
    if (srv->nclients >= (unsigned)srv->cfg.maxclients) {
        /* Best effort: the socket is new, its buffer has room. */
        if (write(fd, full, sizeof full - 1) < 0) { /* nothing more to do */ }
        close(fd);
        srv->stats.connections_rejected++;
        return;
    }
    conn_create(srv, fd, peer);
}

/* ---- Reading and dispatch -------------------------------------------------------- */

static void put_resume(void *ctx);

/* The store's put_start, or its streamed form for a value that ends the
 * command (nothing after it can change what the command does). */
static int start_put(conn *cn, const resp_arg *key, int last, size_t len, void **dst, store_put **put) {
    store *st = cn->c.srv->store;
    if (last && st->ops->put_start_streamed)
        return st->ops->put_start_streamed(st, key->ptr, key->len, len, dst, put, put_resume, cn);
    return st->ops->put_start(st, key->ptr, key->len, len, dst, put);
}

/* The parser found a bulk header: a value the command streams into the
 * store gets its final memory now, so its bytes are never copied. */
static void *bulk_dest(void *ctx, const resp_arg *argv, int argi, int argc, size_t len) {
    conn *cn = ctx;
    client *c = &cn->c;
    server *srv = c->srv;
    if (argi < 2 || !srv->store || c->pending_put || !c->authenticated || multi_queuing(c)) return NULL;
    const command *cmd = commands_lookup(srv, argv[0].ptr, argv[0].len);
    if (!cmd || cmd->value_arg != argi || !commands_arity_ok(cmd, argc)) return NULL;
    void *dst = NULL;
    store_put *put = NULL;
    int last = argi == argc - 1;
    int rc = start_put(cn, &argv[1], last, len, &dst, &put);
    /* Space held by values that stopped arriving is this put's to take. */
    while (rc == STORE_NOSPACE && put_guard_reclaim(srv, c)) rc = start_put(cn, &argv[1], last, len, &dst, &put);
    /* A value that cannot fit is answered now, not once all of it came:
     * its bytes are dropped as they arrive (under the put guard's bounds)
     * and the connection goes on with the next command. */
    c->put_discarding = rc == STORE_NOSPACE || rc == STORE_TOOBIG;
    if (c->put_discarding) t_object_reply_put_refused(c, rc, len);
    c->pending_put_err = rc;
    c->pending_put_size = len;
    c->pending_put = rc == STORE_OK ? put : NULL;
    c->pending_put_landed = 0;
    c->pending_put_start_ms = c->pending_put_last_ms = c->last_ms;   /* see read_cb */
    cn->put_landed = 0;
    cn->put_window = len;
    if (rc == STORE_OK && srv->store->ops->put_progress)
        cn->put_window = srv->store->ops->put_progress(srv->store, put, 0);
    if (c->put_discarding) return RESP_BULK_DISCARD;
    return rc == STORE_OK ? dst : NULL;
}

/* Note how much of the value has landed (the put guard watches it) and
 * tell a streaming store. */
static void report_progress(conn *cn) {
    client *c = &cn->c;
    store *st = c->srv->store;
    if (!c->pending_put && !c->put_discarding) return;
    char *dst;
    size_t left = c->pending_put ? resp_parser_direct_span(cn->parser, &dst) : resp_parser_bulk_left(cn->parser);
    uint64_t landed = left <= c->pending_put_size ? c->pending_put_size - left : 0;
    if (landed > c->pending_put_landed) {
        c->pending_put_landed = landed;
        c->pending_put_last_ms = c->last_ms;   /* when those bytes were read (read_cb) */
    }
    if (c->pending_put && st->ops->put_progress && landed > cn->put_landed) {
        cn->put_landed = landed;
        cn->put_window = st->ops->put_progress(st, c->pending_put, landed);
    }
}

/* The store moved its window on: a reader held back goes on reading. */
static void put_resume(void *ctx) {
    conn *cn = ctx;
    client *c = &cn->c;
    if (!c->pending_put) return;
    cn->put_window = c->srv->store->ops->put_progress(c->srv->store, c->pending_put, cn->put_landed);
    if (!cn->put_stalled || cn->put_window <= cn->put_landed) return;
    cn->put_stalled = 0;
    if (!conn_paused(cn)) loop_add_file(c->srv->loop, c->fd, LOOP_READABLE, read_cb, cn);
}

void client_drop_put(client *c, const char *msg) {
    conn *cn = conn_of(c);
    /* Stop reading first: the parser still points into the freed space. */
    loop_del_file(c->srv->loop, c->fd, LOOP_READABLE);
    commands_abort_put(c);
    /* A discarded value was answered at its header: a second reply would
     * read as the answer to the client's next command. */
    if (!c->put_discarding) reply_error(c, msg);
    c->flags |= CLIENT_CLOSE_AFTER_REPLY;
    conn_schedule(cn);
}

static void protocol_error(conn *cn) {
    client *c = &cn->c;
    c->srv->stats.protocol_errors++;
    log_info("Protocol error (%s) from client id=%llu addr=%s", resp_parser_errstr(cn->parser),
             (unsigned long long)c->id, c->addr);
    reply_errorf(c, "ERR %s", resp_parser_errstr(cn->parser));
    c->flags |= CLIENT_CLOSE_AFTER_REPLY;
    loop_del_file(c->srv->loop, c->fd, LOOP_READABLE);
}

static void run_command(conn *cn) {
    client *c = &cn->c;
    report_progress(cn);
    c->argc = resp_parser_argc(cn->parser);
    c->argv = resp_parser_argv(cn->parser);
    commands_dispatch(c);
    if (cn->c.flags & CLIENT_DEFERRED) return;   /* runs again, same arguments, when the slots are done */
    resp_parser_reset(cn->parser);
    if (c->authenticated != cn->limits_authenticated) conn_apply_limits(cn);
    c->argc = 0;
    c->argv = NULL;
    c->pending_put_err = 0;
    c->pending_put_size = 0;
    c->put_discarding = 0;
}

/* A batch of whole commands at the start of buf: the store may start
 * loading what their keys' look-ups touch before the first one runs. */
static void prefetch_keys(conn *cn, const char *buf, size_t len) {
    store *st = cn->c.srv->store;
    if (!st || !st->ops->prefetch || !cn->c.authenticated || resp_parser_in_progress(cn->parser)) return;
    resp_span spans[NET_PREFETCH_KEYS];
    store_key keys[NET_PREFETCH_KEYS];
    size_t n = resp_peek_keys(buf, len, spans, NET_PREFETCH_KEYS);
    if (n < 2) return;   /* one command looks its key up at once anyway */
    for (size_t i = 0; i < n; i++) keys[i] = (store_key){spans[i].ptr, spans[i].len};
    st->ops->prefetch(st, keys, n);
}

/* Parse and run commands from buf until it is used up or the client must
 * wait; returns the bytes used. */
static size_t conn_process(conn *cn, const char *buf, size_t len) {
    size_t pos = 0, ran = 0;
    while (pos < len && !conn_paused(cn)) {
        if (ran++ % NET_PREFETCH_KEYS == 0) prefetch_keys(cn, buf + pos, len - pos);
        size_t used = 0;
        resp_status st = resp_parser_feed(cn->parser, buf + pos, len - pos, &used);
        pos += used;
        if (st == RESP_ERROR) {
            protocol_error(cn);
            return len;   /* the rest is never looked at */
        }
        if (st == RESP_COMMAND) run_command(cn);
    }
    report_progress(cn);
    return pos;
}

/* Keep what the client sent but cannot be served yet. */
static void conn_hold(conn *cn, const char *p, size_t n) {
    if (!n) return;
    cn->held = xrealloc(cn->held, cn->held_len - cn->held_pos + n);
    if (cn->held_pos) memmove(cn->held, cn->held + cn->held_pos, cn->held_len - cn->held_pos);
    cn->held_len -= cn->held_pos;
    cn->held_pos = 0;
    memcpy(cn->held + cn->held_len, p, n);
    cn->held_len += n;
}

/* Serve held input after a pause; restart reading once it is all used. */
static void conn_resume(conn *cn) {
    server *srv = cn->c.srv;
    cn->resume = 0;
    cn->c.last_ms = mono_ms();   /* the held bytes land now (read_cb) */
    /* An EXEC a blocking command interrupted goes on first. */
    if (multi_exec_continue(&cn->c)) return;
    if (cn->c.flags & CLIENT_DEFERRED) {
        if (cn->nslots) return;
        cn->c.flags &= ~CLIENT_DEFERRED;
        run_command(cn);
    }
    if (conn_paused(cn)) return;
    if (cn->held_pos < cn->held_len) {
        cn->held_pos += conn_process(cn, cn->held + cn->held_pos, cn->held_len - cn->held_pos);
        if (cn->held_pos < cn->held_len) return;
        free(cn->held);
        cn->held = NULL;
        cn->held_len = cn->held_pos = 0;
    }
    if (!conn_paused(cn)) loop_add_file(srv->loop, cn->c.fd, LOOP_READABLE, read_cb, cn);
}

/* Caps *span at the store's window for a streamed value: 1 when it
 * did (read that much directly, however small), 0 when the window is not
 * in the way, -1 when it is shut (reading stops until put_resume). */
static int direct_window(conn *cn, size_t *span) {
    client *c = &cn->c;
    if (!c->pending_put || *span == 0) return 0;
    uint64_t landed = c->pending_put_size - *span;
    if (cn->put_window >= c->pending_put_size) return 0;
    if (cn->put_window <= landed) {
        cn->put_stalled = 1;
        loop_del_file(c->srv->loop, c->fd, LOOP_READABLE);
        return -1;
    }
    if (*span > cn->put_window - landed) *span = (size_t)(cn->put_window - landed);
    return 1;
}

/* read() straight into a large payload's destination. 1 if the payload
 * is still in progress (come back on the next event), 0 to read normally,
 * -1 when the connection is gone. */
static int read_direct(conn *cn) {
    server *srv = cn->c.srv;
    size_t budget = NET_DIRECT_BUDGET;
    for (;;) {
        char *dst;
        size_t span = resp_parser_direct_span(cn->parser, &dst);
        int held = direct_window(cn, &span);
        if (held < 0) return 1;
        if (!held && span < NET_DIRECT_MIN) return 0;
        if (span > budget) span = budget;
        ssize_t n = read(cn->c.fd, dst, span);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 1;
        if (n <= 0) return -1;
        resp_parser_direct_advance(cn->parser, (size_t)n);
        srv->stats.net_input_bytes += (uint64_t)n;
        report_progress(cn);
        budget -= (size_t)n;
        if ((size_t)n < span || budget == 0) return 1;
    }
}

static void read_cb(event_loop *el, int fd, void *data, int mask) {
    conn *cn = data;
    client *c = &cn->c;
    server *srv = c->srv;
    net_state *net = cn->net;

    /* The clock is read once per read, not per command: the puts these
     * bytes start or feed take their times from c->last_ms (bulk_dest,
     * report_progress). Three clock reads per pipelined 64 B SET were 7 %
     * of the loop's time on this VM. */
    c->last_ms = mono_ms();
    int direct = read_direct(cn);
    if (direct == 0) {
        ssize_t n = read(c->fd, net->rbuf, sizeof net->rbuf);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        if (n <= 0) {
            if (n < 0) log_info("Reading from client id=%llu: %s", (unsigned long long)c->id, strerror(errno));
            direct = -1;
        } else {
            srv->stats.net_input_bytes += (uint64_t)n;
            size_t used = conn_process(cn, net->rbuf, (size_t)n);
            if (used < (size_t)n) conn_hold(cn, net->rbuf + used, (size_t)n - used);
        }
    }
    if (direct < 0) {
        conn_free(cn);
        return;
    }
    if (c->flags & CLIENT_CLOSE_ASAP) {
        conn_free(cn);
        return;
    }
    if (conn_paused(cn)) loop_pause_read(el, fd);
}

/* ---- Writing ------------------------------------------------------------------ */

/* Drop n written bytes from the head of the queue. */
static void out_consume(conn *cn, size_t n) {
    while (cn->out_head) {
        out_chunk *ch = cn->out_head;
        size_t k = ch->len - ch->sent;
        if (k > n) k = n;
        ch->sent += k;
        n -= k;
        if (ch->ref) cn->out_ref -= k;
        else cn->out_owned -= k;
        if (ch->sent < ch->len || ch->slot == SLOT_OPEN) break;
        cn->out_head = ch->next;
        if (!cn->out_head) cn->out_tail = NULL;
        chunk_done(cn->net, ch);
    }
}

/* How far chunk ch may go now (*end): all of it, or for a sliced chunk
 * the slices that passed, checked up to NET_CHECK_AHEAD past what was
 * sent (see the top of the file for why that much). -1 when a slice
 * failed. */
static int chunk_sendable(conn *cn, out_chunk *ch, size_t *end) {
    *end = ch->len;
    if (!ch->sl.count) return 0;
    if (ch->checked < ch->sent + NET_CHECK_AHEAD && chunk_check(cn, ch, ch->sent + NET_CHECK_AHEAD) != 0)
        return -1;
    *end = ch->checked;
    return 0;
}

/* The socket is full: check the next slice of the reply in flight while
 * the client drains the one it has (the head chunk, or the one after a
 * bulk header), staying within NET_CHECK_AHEAD of what was sent: with
 * the unsent limit nearly every write is partial, and slices checked
 * far ahead of their send would have left the cache before it. */
static int check_ahead(conn *cn) {
    out_chunk *ch = cn->out_head;
    if (ch && !ch->sl.count) ch = ch->next;
    if (!ch || !ch->sl.count || ch->checked >= ch->len || ch->checked >= ch->sent + NET_CHECK_AHEAD) return 0;
    return chunk_check(cn, ch, (ch->checked > ch->sent ? ch->checked : ch->sent) + ch->sl.slice_len);
}

/* writev as much as the socket takes. 0 when everything is written, 1
 * when output remains (waiting until writable), -1 on a dead connection. */
static int conn_write(conn *cn) {
    server *srv = cn->c.srv;
    size_t budget = NET_WRITE_BUDGET;
    int at_slot = 0;   /* stopped at an open slot: its end schedules cn */
    while (cn->out_head && budget) {
        struct iovec iov[NET_IOV];
        int cnt = 0;
        size_t want = 0;
        at_slot = 0;
        for (out_chunk *ch = cn->out_head; ch && cnt < NET_IOV && want < budget; ch = ch->next) {
            if (ch->slot == SLOT_OPEN) {   /* its reply comes first */
                at_slot = 1;
                break;
            }
            if (ch->len == ch->sent) continue;
            size_t end;
            if (chunk_sendable(cn, ch, &end) != 0) return -1;
            iov[cnt].iov_base = (char *)(ch->ref ? ch->ref : ch->data) + ch->sent;
            iov[cnt].iov_len = end - ch->sent;
            want += iov[cnt++].iov_len;
            if (end < ch->len) break;   /* nothing after it may go first */
        }
        if (cnt == 0) {   /* only empty chunks left, or waiting for a slot */
            out_consume(cn, 0);
            break;
        }
        ssize_t n = writev(cn->c.fd, iov, cnt);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                at_slot = 0;   /* full before the slot: wait for writable, not for the slot */
                break;
            }
            log_info("Writing to client id=%llu: %s", (unsigned long long)cn->c.id, strerror(errno));
            return -1;
        }
        srv->stats.net_output_bytes += (uint64_t)n;
        out_consume(cn, (size_t)n);
        if ((size_t)n < want) {   /* the socket is full: wait for writable */
            at_slot = 0;
            if (check_ahead(cn) != 0) return -1;
            break;
        }
        if (at_slot) break;
        budget = (size_t)n < budget ? budget - (size_t)n : 0;
    }
    if (cn->out_head && at_slot) {
        loop_del_file(srv->loop, cn->c.fd, LOOP_WRITABLE);
        return 1;
    }
    if (cn->out_head) {
        loop_add_file(srv->loop, cn->c.fd, LOOP_WRITABLE, write_cb, cn);
        return 1;
    }
    loop_del_file(srv->loop, cn->c.fd, LOOP_WRITABLE);
    return 0;
}

/* Write, then close or resume as the client's state asks. May free cn. */
static void conn_flush(conn *cn) {
    int was_paused = conn_paused(cn);
    int rc = conn_write(cn);
    if (rc < 0 || (rc == 0 && (cn->c.flags & CLIENT_CLOSE_AFTER_REPLY))) {
        conn_free(cn);
        return;
    }
    /* Drained below the soft limit: serve what was held back. */
    if (was_paused && !conn_paused(cn)) {
        cn->resume = 1;
        conn_schedule(cn);
    }
}

static void write_cb(event_loop *el, int fd, void *data, int mask) { conn_flush(data); }

/* Before the loop sleeps: resume unblocked clients, free dead ones, and
 * give every client with new output its writev. */
static void flush_cb(event_loop *el, void *data) {
    net_state *net = data;
    while (net->pending) {
        conn *cn = net->pending;
        net->pending = cn->pending_next;
        cn->in_pending = 0;
        if (cn->c.flags & CLIENT_CLOSE_ASAP) {
            conn_free(cn);
            continue;
        }
        if (cn->resume) conn_resume(cn);
        if (cn->c.flags & CLIENT_CLOSE_ASAP) {
            conn_free(cn);
            continue;
        }
        conn_flush(cn);
    }
}

/* ---- Lifecycle ------------------------------------------------------------------- */

static void signal_cb(event_loop *el, int signum, void *data) {
    server *srv = data;
    /* A warning, as in Redis: an exit's reason shows at every log level. */
    log_warning("Received %s, scheduling shutdown...", signum == SIGINT ? "SIGINT" : "SIGTERM");
    server_stop(srv);
}

int server_init(server *srv, const mkv_config *cfg, char *err, size_t errlen) {
    memset(srv, 0, sizeof *srv);
    srv->cfg = *cfg;
    srv->start_ms = mono_ms();
    srv->loop = loop_create();
    if (!srv->loop) {
        snprintf(err, errlen, "cannot create the event loop");
        return -1;
    }
    net_state *net = xcalloc(1, sizeof *net);
    net->listen_fd = -1;
    resp_buf_init(&net->scratch);
    srv->net = net;
    if (cfg->metrics_port) srv->metrics = metrics_create();
    net->flush_hook = loop_hook_add(srv->loop, SERVER_HOOK_FLUSH, flush_cb, net);
    /* A peer that hangs up must give EPIPE, not kill the process. */
    signal(SIGPIPE, SIG_IGN);
    put_guard_start(srv);
    return 0;
}

int server_listen(server *srv, char *err, size_t errlen) {
    net_state *net = net_of(srv);
    char why[ANET_ERR_LEN];
    int fd = anet_tcp_server(why, srv->cfg.bind, srv->cfg.port, srv->cfg.tcp_backlog, 1);
    if (fd == ANET_ERR) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s", srv->cfg.bind, srv->cfg.port, why);
        return -1;
    }
    if (anet_sock_port(why, fd, &net->port) != ANET_OK) net->port = srv->cfg.port;
    net->listen_fd = fd;
    loop_add_file(srv->loop, fd, LOOP_READABLE, accept_cb, srv);
    log_notice("Ready to accept connections tcp %s:%d", srv->cfg.bind, net->port);
    return srv->metrics ? metrics_http_start(srv, err, errlen) : 0;
}

void server_run(server *srv) {
    net_state *net = net_of(srv);
    net->sigterm = loop_signal_create(srv->loop, SIGTERM, signal_cb, srv);
    net->sigint = loop_signal_create(srv->loop, SIGINT, signal_cb, srv);
    loop_run(srv->loop);
    loop_signal_free(net->sigterm);
    loop_signal_free(net->sigint);
    net->sigterm = net->sigint = NULL;
}

void server_stop(server *srv) { loop_stop(srv->loop); }

void server_cleanup(server *srv) {
    net_state *net = net_of(srv);
    if (!net) return;
    if (net->listen_fd >= 0) {
        loop_del_file(srv->loop, net->listen_fd, LOOP_READABLE | LOOP_WRITABLE);
        close(net->listen_fd);
    }
    metrics_http_stop(srv);
    while (net->clients_head) conn_free(net->clients_head);
    put_guard_stop(srv);
    if (srv->store) srv->store->ops->destroy(srv->store);
    srv->store = NULL;
    commands_free(srv);
    loop_hook_del(net->flush_hook);
    chunk_list_free(net->free_blocks);
    chunk_list_free(net->free_refs);
    chunk_list_free(net->free_slots);
    resp_buf_free(&net->scratch);
    metrics_free(srv->metrics);
    srv->metrics = NULL;
    free(net);
    srv->net = NULL;
    loop_destroy(srv->loop);
    srv->loop = NULL;
    log_warning("moonkv is now ready to exit, bye bye");
}
