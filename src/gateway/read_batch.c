/* gateway/read_batch.c - see read_batch.h. */
#include "gateway/read_batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/moonkv_internal.h"
#include "core/util.h"
#include "gateway/get_stream.h"
#include "proto/limits.h"
#include "proto/verbs.h"
#include "server/server.h"

#define RB_PENDING 1           /* a fetch not answered yet (STORE_* codes are <= 0) */
/* Batches whose MOON.MGETPACKED is still unanswered: while this many
 * are, new reads wait in the queue for the next loop iteration after an
 * answer, so under load each batch carries more keys (a batch's master
 * command, worker hand-off and engine run cost the same for 50 keys as
 * for 500); an idle gateway sends at once. */
#define RB_MAX_ASKING 2
/* Values up to this size share one staging range per batch (they are
 * copied into their replies and put back at once). */
#define RB_SHARED_MAX 4096

/* Bytes a loop iteration reads on the loop (read_batch.h): at least one
 * value, so 1 and 4 MiB GETs go one per iteration, a batch of small
 * ones all in one. */
#define RB_STEP_BYTES (1024 * 1024)

/* How often at most the same-host paths are dialed again. */
#define RB_DIAL_MS 1000

typedef struct rb_batch rb_batch;

/* Reads on the loop of what needs no waiting (a same-host node's warm
 * mapping: mkv_read_located_now), so a batch of small values skips the
 * worker hand-off. The client is the process's (its calls may run on any
 * thread at once); the paths it reads through are dialed on a worker
 * (a dial may wait; the loop never does), at most every RB_DIAL_MS. */
typedef struct rb_inline {
    gw_job dial;              /* first: the workers' link */
    mkv_client *mc;           /* NULL: no inline reads */
    int dialing;              /* the dial job is out */
    uint64_t dialed_ms;       /* the last dial */
    uint64_t epoch;           /* the master connection for the next dial */
} rb_inline;

struct read_batcher {
    rb_inline now;            /* first: the dial job's link */
    event_loop *loop;
    master_async *ma;
    struct mkv_async *face;   /* over groups: the router's, for the batches' gets */
    workers *w;
    staging *pool;
    mkv_client *loop_mc;      /* decodes replies (its last error is their text) */
    loop_hook *send;          /* after the reply flush: it resumes clients, who add reads */
    loop_wake *step;          /* the next iteration reads on (batch_step) */
    rb_batch *steps, **steps_tail;   /* batches read on the loop, a step at a time */
    gw_read *queue, **tail;
    int asking;               /* batches waiting for the master's answer */
    int closing;
    uint64_t read_inline;     /* values read on the loop (INFO gets_inline) */
    uint64_t deferred;        /* steps that left keys for the next iteration (INFO) */
    uint64_t fetch_batches;   /* batches read by one library batch, on the face or a worker (INFO; atomic) */
    proto_extbuf ext;         /* the replies' records decode into it, one at a time */
};

struct rb_batch {
    gw_job job;               /* first: the workers' link */
    read_batcher *b;
    gw_read *reads;           /* those not done yet */
    size_t nkeys;
    size_t done_keys;         /* keys of the reads done so far (their fetches are gone) */
    size_t at;                /* keys before it are read (on the loop) */
    rb_batch *next_step;      /* in the batcher's steps */
    gw_fetch **f;             /* every read's keys, in order */
    mkv_located **loc;        /* [i] once key i is located and has memory */
    ma_chunk *chunks;         /* one per MOON.MGET */
    size_t waiting;           /* MOON.MGETs without their reply yet */
    int failed;               /* a MOON.MGET got no answer: fetch key by key */
    uint64_t epoch;           /* the master connection that located them */
};

/* ---- on a worker ---- */

/* No MOON.MGETPACKED answer (over groups there is none to ask): the
 * pending keys as one library batch, which the client splits by group
 * and whose parts run at once. */
static void fetch_each(gw_job *j, mkv_client *mc) {
    rb_batch *bt = (rb_batch *)j;
    gw_fetch **f = xcalloc(bt->nkeys ? bt->nkeys : 1, sizeof *f);
    size_t n = 0;
    for (size_t i = bt->done_keys; i < bt->nkeys; i++)
        if (bt->f[i]->rc == RB_PENDING) f[n++] = bt->f[i];
    cluster_fetch_batch(bt->b->pool, mc, f, n);
    if (n) __atomic_fetch_add(&bt->b->fetch_batches, 1, __ATOMIC_RELAXED);
    free(f);
}

/* A located key's read outcome into its fetch. A lease that ran out
 * before the read (a stalled node) is located afresh, the blocking way. */
static void read_result(rb_batch *bt, mkv_client *mc, gw_fetch *f, const mkv_obj *o) {
    if (o->status == MKV_OK) {
        f->rc = STORE_OK;
        f->len = o->len;
        f->via = "mkv_read_located";
        return;
    }
    staging_put(bt->b->pool, &f->buf);
    if (o->status == MKV_EAUTH) cluster_fetch(bt->b->pool, mc, f);
    else f->rc = cluster_store_code(o->status, mc, f->errstr, sizeof f->errstr);
}

static void read_located(gw_job *j, mkv_client *mc) {
    rb_batch *bt = (rb_batch *)j;
    cluster_worker_topology(bt->b->w, mc, bt->epoch);
    mkv_obj *objs = xcalloc(bt->nkeys ? bt->nkeys : 1, sizeof *objs);
    mkv_located **loc = xcalloc(bt->nkeys ? bt->nkeys : 1, sizeof *loc);
    size_t *idx = xcalloc(bt->nkeys ? bt->nkeys : 1, sizeof *idx), n = 0;
    for (size_t i = bt->done_keys; i < bt->nkeys; i++) {
        gw_fetch *f = bt->f[i];
        if (!bt->loc[i] || f->rc != RB_PENDING) continue;
        if (staging_bind(mc, &f->buf) != MKV_OK) {
            staging_put(bt->b->pool, &f->buf);
            cluster_fetch(bt->b->pool, mc, f);
            continue;
        }
        objs[n] = (mkv_obj){.key = f->key, .keylen = f->keylen, .buf = f->buf.ptr, .len = f->buf.len};
        loc[n] = bt->loc[i];
        idx[n++] = i;
    }
    mkv_read_located(mc, objs, loc, n);
    for (size_t k = 0; k < n; k++) {
        gw_fetch *f = bt->f[idx[k]];
        staging_unbind(mc, &f->buf);
        read_result(bt, mc, f, &objs[k]);
    }
    free(objs);
    free(loc);
    free(idx);
}

/* The same-host paths dialed, the node table read again first:
 * relearnt when the master connection changed since, refreshed
 * otherwise, since a node that joined after the client connected is
 * named by placements and known to no path until then. */
static void dial_run(gw_job *j, mkv_client *mc) {
    rb_inline *in = (rb_inline *)j;
    read_batcher *b = (read_batcher *)in;   /* now is its first member */
    if (!cluster_worker_topology(b->w, mc, in->epoch)) mkv_topology_refresh(mc);
    mkv_connect_paths(mc);
}

/* ---- on the loop ---- */

static void dial_done(gw_job *j) { ((rb_inline *)j)->dialing = 0; }

/* A worker dials the missing same-host paths, at most every RB_DIAL_MS;
 * inline reads go on meanwhile. */
static void dial_soon(read_batcher *b) {
    rb_inline *in = &b->now;
    uint64_t now = loop_now_ms(b->loop);
    if (in->dialing || b->closing || (in->dialed_ms && now - in->dialed_ms < RB_DIAL_MS)) return;
    in->dialed_ms = now ? now : 1;
    in->epoch = b->ma ? master_async_epoch(b->ma) : 0;
    in->dialing = 1;
    in->dial = (gw_job){.run = dial_run, .done = dial_done};
    workers_submit(b->w, &in->dial);
}

/* The located keys from..to that can be read without waiting, read
 * here; 1 when none of them is left for a worker. */
static int read_inline(rb_batch *bt, size_t from, size_t to) {
    read_batcher *b = bt->b;
    size_t n = 0, left = 0, most = to > from ? to - from : 1;
    mkv_obj *objs = xmalloc(most * sizeof *objs);
    mkv_located **loc = xmalloc(most * sizeof *loc);
    size_t *idx = xmalloc(most * sizeof *idx);
    for (size_t i = from; i < to; i++) {
        gw_fetch *f = bt->f[i];
        if (!bt->loc[i] || f->rc != RB_PENDING) continue;
        objs[n] = (mkv_obj){.key = f->key, .keylen = f->keylen, .buf = f->buf.ptr, .len = f->buf.len};
        loc[n] = bt->loc[i];
        idx[n++] = i;
    }
    if (n && mkv_read_located_now(b->now.mc, objs, loc, n) < n) dial_soon(b);   /* a path may be missing */
    for (size_t k = 0; k < n; k++) {
        if (objs[k].status == MKV_OK) {
            bt->f[idx[k]]->rc = STORE_OK;
            bt->f[idx[k]]->via = "mkv_read_located_now";
            b->read_inline++;
        } else {
            left++;
        }
    }
    free(objs);
    free(loc);
    free(idx);
    return left == 0;
}

/* The leases of keys from..to go back with the loop's next master
 * command (master_async_release): no command of their own. */
static void leases_back(rb_batch *bt, size_t from, size_t to) {
    if (!bt->b->ma || bt->b->closing) return;
    for (size_t i = from; i < to; i++)
        if (bt->loc[i])
            master_async_release(bt->b->ma, bt->f[i]->key, bt->f[i]->keylen, mkv_located_lease(bt->loc[i]));
}

static void batch_free(rb_batch *bt) {
    for (size_t i = 0; i < bt->nkeys; i++) mkv_located_free(bt->loc[i]);
    free(bt->f);
    free(bt->loc);
    free(bt->chunks);
    free(bt);
}

/* The reads not done yet whose keys all come before key upto: their
 * leases go back (leases), then each one's done, in order. */
static void reads_finish(rb_batch *bt, size_t upto, int fetched, int leases) {
    size_t end = bt->done_keys;
    gw_read *last = bt->reads;
    for (; last && end + last->nbatched <= upto; last = last->next) end += last->nbatched;
    if (leases) leases_back(bt, bt->done_keys, end);
    if (!fetched)
        for (size_t i = bt->done_keys; i < end; i++) staging_put(bt->b->pool, &bt->f[i]->buf);
    bt->done_keys = end;
    while (bt->reads != last) {
        gw_read *r = bt->reads;
        bt->reads = r->next;
        r->done(r, fetched);
    }
}

/* Every read's done, in order; the batch is gone after. */
static void batch_finish(rb_batch *bt, int fetched) {
    reads_finish(bt, bt->nkeys, fetched, 0);
    batch_free(bt);
}

static void batch_done(gw_job *j) {
    rb_batch *bt = (rb_batch *)j;
    reads_finish(bt, bt->nkeys, !j->cancelled, 1);
    batch_free(bt);
}

static void face_done(void *ctx) {
    rb_batch *bt = ctx;
    __atomic_fetch_add(&bt->b->fetch_batches, 1, __ATOMIC_RELAXED);
    reads_finish(bt, bt->nkeys, 1, 1);
    batch_free(bt);
}

/* Over groups: the pending keys as one batch get on the router's face
 * (split by group there, the parts at once), each value's memory asked
 * once its size is known; no thread waits for a master. */
static void batch_to_face(rb_batch *bt) {
    gw_fetch **f = xcalloc(bt->nkeys ? bt->nkeys : 1, sizeof *f);
    size_t n = 0;
    for (size_t i = bt->done_keys; i < bt->nkeys; i++)
        if (bt->f[i]->rc == RB_PENDING) f[n++] = bt->f[i];
    cluster_fetch_face(bt->b->face, bt->b->pool, bt->b->loop_mc, f, n, face_done, bt);
    free(f);
}

/* Staging memory for located key i, alone. */
static void buffer_get(rb_batch *bt, size_t i) {
    gw_fetch *f = bt->f[i];
    if (staging_get(bt->b->pool, f->len, &f->buf) == STORE_OK) return;
    f->rc = STORE_ERR;
    snprintf(f->errstr, sizeof f->errstr, "no memory for an object of %llu bytes", (unsigned long long)f->len);
}

/* Staging memory for the located keys from..to: the small values share
 * one pool range (one lock and allocator call per batch, not per value),
 * larger ones, or all when the pool has no such range, get their own. */
static void buffers_get(rb_batch *bt, size_t from, size_t to) {
    size_t n = 0, most = to > from ? to - from : 1, *idx = xmalloc(most * sizeof *idx);
    uint64_t *lens = xmalloc(most * sizeof *lens);
    for (size_t i = from; i < to; i++) {
        gw_fetch *f = bt->f[i];
        if (!bt->loc[i] || f->rc != RB_PENDING) continue;
        if (f->len > RB_SHARED_MAX) buffer_get(bt, i);
        else {
            idx[n] = i;
            lens[n++] = f->len;
        }
    }
    staging_buf *bufs = xmalloc((n ? n : 1) * sizeof *bufs);
    int shared = staging_get_shared(bt->b->pool, lens, n, bufs) == STORE_OK;
    for (size_t k = 0; k < n; k++) {
        if (shared) bt->f[idx[k]]->buf = bufs[k];
        else buffer_get(bt, idx[k]);
    }
    free(bufs);
    free(lens);
    free(idx);
}

/* The rest of the batch, from key bt->at on, to a worker. */
static void batch_to_worker(rb_batch *bt) {
    buffers_get(bt, bt->at, bt->nkeys);
    bt->job.run = read_located;
    bt->job.done = batch_done;
    workers_submit(bt->b->w, &bt->job);
}

/* One step of a batch read on the loop (read_batch.h): its keys from
 * bt->at on until *budget bytes moved (at least one key), then the
 * reads whose values are all in are done. 1 when the batch is over
 * here (finished and freed, or handed to a worker), 0 when it has keys
 * left for the next step. */
static int batch_step(rb_batch *bt, uint64_t *budget) {
    read_batcher *b = bt->b;
    if (!b->now.mc) {
        batch_to_worker(bt);
        return 1;
    }
    size_t from = bt->at, to = from;
    uint64_t bytes = 0;
    for (; to < bt->nkeys && bytes < *budget; to++)
        if (bt->loc[to] && bt->f[to]->rc == RB_PENDING) bytes += bt->f[to]->len;
    *budget = bytes < *budget ? *budget - bytes : 0;
    buffers_get(bt, from, to);
    int all = read_inline(bt, from, to);
    bt->at = to;
    if (!all) {   /* its misses, and the keys after them, are read by a worker */
        batch_to_worker(bt);
        return 1;
    }
    reads_finish(bt, to, 1, 1);
    if (to < bt->nkeys) {
        b->deferred++;
        return 0;
    }
    batch_free(bt);
    return 1;
}

/* The batches read on the loop, RB_STEP_BYTES an iteration (a wake
 * brings the next iteration at once while any is left). */
static void step_cb(event_loop *el, void *data) {
    read_batcher *b = data;
    uint64_t budget = RB_STEP_BYTES;
    while (b->steps && budget) {
        rb_batch *bt = b->steps, *next = bt->next_step;
        if (!batch_step(bt, &budget)) break;
        b->steps = next;
        if (!next) b->steps_tail = &b->steps;
    }
    if (b->steps) loop_wake_send(b->step);
}

/* Every MOON.MGET answered (or none could be sent): the bytes move. */
static void batch_ready(rb_batch *bt) {
    read_batcher *b = bt->b;
    if (b->closing) {
        batch_finish(bt, 0);
        return;
    }
    if (bt->failed) {
        /* Forget what was located: each key is asked again (no buffer
         * was taken yet). */
        for (size_t i = 0; i < bt->nkeys; i++) {
            mkv_located_free(bt->f[i]->stream);
            bt->f[i]->stream = NULL;
            mkv_located_free(bt->loc[i]);
            bt->loc[i] = NULL;
            bt->f[i]->rc = RB_PENDING;
        }
    }
    if (b->ma) bt->epoch = master_async_epoch(b->ma);
    if (bt->failed && !b->ma && b->face) {
        batch_to_face(bt);
    } else if (bt->failed) {
        bt->job.run = fetch_each;
        bt->job.done = batch_done;
        workers_submit(b->w, &bt->job);
    } else if (b->now.mc) {
        *b->steps_tail = bt;   /* behind the batches still being read here */
        b->steps_tail = &bt->next_step;
        step_cb(b->loop, b);
    } else {
        batch_to_worker(bt);
    }
}

/* One key's record of a MOON.MGETPACKED reply: its placement and size. */
static void key_located(rb_batch *bt, size_t i, proto_located *rec) {
    read_batcher *b = bt->b;
    gw_fetch *f = bt->f[i];
    uint64_t size = 0;
    int rc = mkv_located_take(b->loop_mc, rec, &bt->loc[i], &size);
    if (rc != MKV_OK) {
        f->rc = cluster_store_code(rc, b->loop_mc, f->errstr, sizeof f->errstr);
        return;
    }
    f->len = size;   /* a buffer of this size comes with the others' (buffers_get) */
    if (f->may_stream && get_stream_wanted(bt->loc[i], size)) {
        /* read slice by slice as its reply goes (get_stream.h), lease and all */
        f->stream = bt->loc[i];
        f->stream_epoch = master_async_epoch(b->ma);
        bt->loc[i] = NULL;
        f->rc = STORE_OK;
    }
}

/* The chunk's records (proto/located.h): one reply object for all of
 * them. One that does not decode fails the batch (fetched key by key). */
static void mget_reply(const redisReply *r, void *ctx) {
    ma_chunk *ch = ctx;
    rb_batch *bt = ch->owner;
    if (!r || r->type != REDIS_REPLY_STRING) bt->failed = 1;
    const uint8_t *at = r ? (const uint8_t *)r->str : NULL, *end = at ? at + r->len : NULL;
    for (size_t k = 0; !bt->failed && k < ch->n; k++) {
        proto_located rec;
        if (proto_located_next(&at, end, &bt->b->ext, &rec) != 0) {
            bt->failed = 1;
            break;
        }
        key_located(bt, ch->first + k, &rec);
        proto_located_free(&rec);
    }
    if (!bt->failed && at != end) bt->failed = 1;
    if (--bt->waiting == 0) {
        bt->b->asking--;
        batch_ready(bt);
    }
}

static void mget_item(void *owner, size_t i, const char **argv, size_t *lens, char (*num)[24]) {
    rb_batch *bt = owner;
    argv[0] = bt->f[i]->key;
    lens[0] = bt->f[i]->keylen;
}

/* The batch's keys as MOON.MGETPACKEDs, pipelined. */
static void batch_send(rb_batch *bt) {
    static const char *const head[] = {PROTO_VERB_MGETPACKED};
    bt->waiting = master_async_send_batch(bt->b->ma, head, 1, bt->nkeys, 1, mget_item, bt, &bt->chunks,
                                          mget_reply, &bt->failed);
    if (bt->waiting == 0) batch_ready(bt);
    else bt->b->asking++;
}

/* The queued reads as one batch; keys no master would know are answered
 * (not found) without asking. */
static rb_batch *batch_take(read_batcher *b) {
    rb_batch *bt = xcalloc(1, sizeof *bt);
    bt->b = b;
    bt->reads = b->queue;
    b->queue = NULL;
    b->tail = &b->queue;
    size_t n = 0;
    for (gw_read *r = bt->reads; r; r = r->next) n += r->nfetch;
    bt->f = xcalloc(n ? n : 1, sizeof *bt->f);
    bt->loc = xcalloc(n ? n : 1, sizeof *bt->loc);
    for (gw_read *r = bt->reads; r; r = r->next) {
        r->nbatched = 0;
        for (size_t i = 0; i < r->nfetch; i++) {
            gw_fetch *f = &r->fetch[i];
            f->buf.ptr = NULL;
            f->len = 0;
            f->via = "none";
            f->rc = cluster_key_ok(f->keylen) ? RB_PENDING : STORE_NOTFOUND;
            if (f->rc == RB_PENDING) bt->f[bt->nkeys++] = f;
            r->nbatched += f->rc == RB_PENDING;
        }
    }
    return bt;
}

static void send_cb(event_loop *el, void *data) {
    read_batcher *b = data;
    if (!b->queue || b->asking >= RB_MAX_ASKING) return;
    batch_send(batch_take(b));
}

void read_batcher_add(read_batcher *b, gw_read *r) {
    r->next = NULL;
    *b->tail = r;
    b->tail = &r->next;
}

read_batcher *read_batcher_create(event_loop *loop, master_async *ma, struct mkv_async *face, workers *w,
                                  staging *pool, mkv_client *mc, int inline_reads) {
    read_batcher *b = xcalloc(1, sizeof *b);
    *b = (read_batcher){.loop = loop, .ma = ma, .face = face, .w = w, .pool = pool, .loop_mc = mc,
                        .now = {.mc = inline_reads && ma ? mc : NULL}};
    b->tail = &b->queue;
    b->steps_tail = &b->steps;
    b->send = loop_hook_add(loop, SERVER_HOOK_FLUSH + 1, send_cb, b);
    b->step = loop_wake_create(loop, step_cb, b);
    return b;
}

void read_batcher_close(read_batcher *b) {
    if (!b) return;
    b->closing = 1;
    loop_hook_del(b->send);
    b->send = NULL;
    loop_wake_free(b->step);
    b->step = NULL;
    while (b->steps) {
        rb_batch *bt = b->steps;
        b->steps = bt->next_step;
        batch_finish(bt, 0);
    }
    b->steps_tail = &b->steps;
    for (gw_read *r = b->queue, *next; r; r = next) {
        next = r->next;
        r->done(r, 0);
    }
    b->queue = NULL;
}

void read_batcher_free(read_batcher *b) {
    if (!b) return;
    proto_extbuf_free(&b->ext);
    free(b);
}

uint64_t read_batcher_inline(const read_batcher *b) { return b ? b->read_inline : 0; }

uint64_t read_batcher_deferred(const read_batcher *b) { return b ? b->deferred : 0; }

uint64_t read_batcher_fetched(const read_batcher *b) {
    return b ? __atomic_load_n(&b->fetch_batches, __ATOMIC_RELAXED) : 0;
}

mkv_client *read_batcher_inline_client(read_batcher *b) {
    return b && !b->closing ? b->now.mc : NULL;
}

void read_batcher_inline_missed(read_batcher *b) {
    if (b && b->now.mc) dial_soon(b);
}
