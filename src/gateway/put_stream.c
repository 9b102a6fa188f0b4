/* gateway/put_stream.c - see put_stream.h.
 *
 * Everything but a slice's write runs on the loop. A slice job reads only
 * what is fixed before it is submitted (the placement, the buffer, the
 * epoch) and its own fields, so the loop may go on with the stream. */
#include "gateway/put_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/moonkv_internal.h"
#include "core/crc32c.h"
#include "core/util.h"
#include "proto/cmd.h"
#include "proto/slices.h"

enum { PS_PLACING, PS_PLACED, PS_UNPLACED, PS_FAILED };

struct put_streamer {
    put_batcher *puts;        /* a stream never placed goes the ordinary way */
    master_async *ma;
    workers *w;
    staging *pool;
    mkv_client *loop_mc;      /* decodes replies (its last error is their text) */
    int replicas;
    put_stream *streams;      /* every stream alive */
    int closing;
};

typedef struct ps_slice {
    gw_job job;               /* first: the workers' link */
    put_stream *st;
    uint32_t idx;
    uint64_t off, len;
    int rc;                   /* STORE_* */
    uint32_t crc;
    char errstr[STORE_ERRSTR];
} ps_slice;

struct put_stream {
    put_streamer *sr;
    store_put *p;             /* NULL once aborted */
    staging_buf buf;          /* the put's buffer, taken when aborted */
    char *base;               /* the value's bytes */
    int state;                /* PS_* */
    int aborted, revoked, ending;
    mkv_located *loc;         /* PS_PLACED */
    uint64_t epoch;           /* the master connection that placed it */
    uint64_t size, landed;
    uint64_t sent;            /* bytes handed to workers, whole slices */
    uint64_t written;         /* bytes from the start written, their pages given back */
    uint32_t nslices;
    uint32_t *crc;            /* per slice */
    uint8_t *done;            /* per slice: written */
    unsigned jobs;            /* slices on workers */
    int err_rc;               /* PS_FAILED */
    char errstr[STORE_ERRSTR];
    gw_write *finish;         /* the whole value is in: its done runs at the end */
    void (*resume)(void *ctx);
    void *rctx;
    put_stream *prev, *next;
    size_t keylen;
    char key[];
};

static void ignore_reply(const redisReply *r, void *ctx) {}

static uint64_t slice_len(const put_stream *st, uint64_t off) {
    return st->size - off < PROTO_SLICE_WRITE ? st->size - off : PROTO_SLICE_WRITE;
}

static void stream_free(put_stream *st) {
    put_streamer *sr = st->sr;
    if (st->prev) st->prev->next = st->next;
    else sr->streams = st->next;
    if (st->next) st->next->prev = st->prev;
    mkv_located_free(st->loc);
    staging_put(sr->pool, &st->buf);   /* only an aborted stream holds it */
    free(st->crc);
    free(st->done);
    free(st);
}

/* An abandoned stream goes once nothing refers to it any more. */
static void maybe_free(put_stream *st) {
    if (st->aborted && st->jobs == 0 && st->state != PS_PLACING) stream_free(st);
}

/* Best effort: the master revokes it anyway when its put timeout ends. */
static void stream_revoke(put_stream *st) {
    if (!st->loc || st->revoked || st->sr->closing) return;
    st->revoked = 1;
    proto_cmd cmd;
    proto_cmd_key(&cmd, PROTO_VERB_PUTREVOKE, st->key, st->keylen);
    master_async_send(st->sr->ma, cmd.argc, cmd.argv, cmd.lens, ignore_reply, NULL);
    proto_cmd_free(&cmd);
}

/* Pages of [from, to) given back, to whole pages inside the range. */
static void drop_pages(put_stream *st, uint64_t from, uint64_t to) {
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    from = (from + page - 1) / page * page;
    if (to < st->size) to = to / page * page;   /* the value's end: its last page is its own */
    if (to > from) madvise(st->base + from, (size_t)(to - from), MADV_DONTNEED);
}

/* The reader may write up to here. */
static uint64_t window(const put_stream *st) {
    if (st->state == PS_UNPLACED || st->state == PS_FAILED) return st->size;
    return st->size - st->written < PS_WINDOW ? st->size : st->written + PS_WINDOW;
}

static void wake(put_stream *st) {
    if (st->resume && !st->aborted && !st->finish && st->landed < st->size) st->resume(st->rctx);
}

/* The outcome is known: the put carries it, the stream goes, the write is done. */
static void complete(put_stream *st, int rc, const char *errstr) {
    store_put *p = st->p;
    gw_write *w = st->finish;
    p->ship_rc = rc;
    p->shipped = 1;
    if (rc != STORE_OK) snprintf(p->errstr, sizeof p->errstr, "%s", errstr);
    p->stream = NULL;
    stream_free(st);
    w->done(w);
}

static void fail(put_stream *st, int rc, const char *errstr) {
    st->state = PS_FAILED;
    st->err_rc = rc;
    snprintf(st->errstr, sizeof st->errstr, "%s", errstr);
    stream_revoke(st);
    drop_pages(st, st->written, st->landed);   /* what is left only ever goes */
    st->written = st->landed;
}

/* ---- slices, on a worker ---- */

static void slice_run(gw_job *j, mkv_client *mc) {
    ps_slice *ch = (ps_slice *)j;
    put_stream *st = ch->st;
    uint32_t failed_node;
    cluster_worker_topology(st->sr->w, mc, st->epoch);
    int rc = mkv_write_located_range(mc, st->loc, st->base + ch->off, ch->off, ch->len, &ch->crc, &failed_node);
    ch->rc = cluster_store_code(rc, mc, ch->errstr, sizeof ch->errstr);
    if (ch->rc == STORE_REFUSED || ch->rc == STORE_OK) return;
    /* A node's fault or a lapsed grant: the bytes before it are gone, so
     * the put cannot be placed again; say which. */
    char why[160];
    memcpy(why, ch->errstr, sizeof why - 1);   /* cut: the prefix says the rest */
    why[sizeof why - 1] = '\0';
    snprintf(ch->errstr, sizeof ch->errstr, "streamed write of bytes %llu-%llu failed (node %u): %s",
             (unsigned long long)ch->off, (unsigned long long)(ch->off + ch->len), failed_node, why);
    ch->rc = STORE_ERR;
}

/* ---- on the loop ---- */

static void maybe_end(put_stream *st);

static void slice_done(gw_job *j) {
    ps_slice *ch = (ps_slice *)j;
    put_stream *st = ch->st;
    st->jobs--;
    if (j->cancelled) {
        ch->rc = STORE_ERR;
        snprintf(ch->errstr, sizeof ch->errstr, "the gateway is shutting down");
    }
    if (!st->aborted && ch->rc == STORE_OK && st->state == PS_PLACED) {
        st->crc[ch->idx] = ch->crc;
        st->done[ch->idx] = 1;
        drop_pages(st, ch->off, ch->off + ch->len);
        while (st->written < st->size && st->done[st->written / PROTO_SLICE_WRITE]) st->written += slice_len(st, st->written);
    } else if (!st->aborted && st->state == PS_PLACED) {
        fail(st, ch->rc, ch->errstr);
    }
    free(ch);
    if (st->aborted) {
        maybe_free(st);
        return;
    }
    wake(st);   /* the window moved on (or opened: a failed put's bytes only pass through) */
    maybe_end(st);
}

/* Every whole slice that landed goes to a worker. */
static void pump(put_stream *st) {
    while (st->state == PS_PLACED && !st->aborted && st->sent < st->size &&
           st->landed - st->sent >= slice_len(st, st->sent)) {
        ps_slice *ch = xcalloc(1, sizeof *ch);
        ch->st = st;
        ch->idx = (uint32_t)(st->sent / PROTO_SLICE_WRITE);
        ch->off = st->sent;
        ch->len = slice_len(st, st->sent);
        ch->job.run = slice_run;
        ch->job.done = slice_done;
        st->sent += ch->len;
        st->jobs++;
        workers_submit(st->sr->w, &ch->job);
    }
}

static void end_reply(const redisReply *r, void *ctx) {
    put_stream *st = ctx;
    put_streamer *sr = st->sr;
    char errstr[sizeof st->errstr] = "";
    int rc = r ? mkv_ended_parse(sr->loop_mc, r) : MKV_ECONN;
    if (!r) rc = cluster_store_lost(errstr, sizeof errstr);
    else rc = cluster_store_code(rc, sr->loop_mc, errstr, sizeof errstr);
    complete(st, rc, errstr);
}

static uint32_t value_crc(const put_stream *st) {
    uint32_t crc = st->crc[0];
    for (uint32_t i = 1; i < st->nslices; i++)
        crc = crc32c_combine(crc, st->crc[i], slice_len(st, (uint64_t)i * PROTO_SLICE_WRITE));
    return crc;
}

/* Once the value is whole and every slice is written: MOON.PUTEND. */
static void maybe_end(put_stream *st) {
    if (!st->finish || st->ending || st->jobs) return;
    if (st->state == PS_FAILED) {
        complete(st, st->err_rc, st->errstr);
        return;
    }
    if (st->state != PS_PLACED || st->written < st->size) return;
    /* The slices readers verify and stream (proto/slices.h). */
    proto_slices sl = {PROTO_SLICE_WRITE, st->nslices, st->crc};
    uint8_t *packed = xmalloc((size_t)st->nslices * 4);
    proto_slices_pack(&sl, packed);
    proto_slices_arg arg = {PROTO_SLICE_WRITE, packed, (size_t)st->nslices * 4};
    proto_cmd cmd;
    int sliced = proto_slice_choose(st->size) == PROTO_SLICE_WRITE;
    proto_cmd_putend(&cmd, st->key, st->keylen, value_crc(st), sliced ? &arg : NULL);
    char errstr[sizeof st->errstr];
    int sent = !st->sr->closing && master_async_send(st->sr->ma, cmd.argc, cmd.argv, cmd.lens, end_reply, st) == 0;
    proto_cmd_free(&cmd);
    free(packed);
    if (!sent) {
        complete(st, cluster_store_lost(errstr, sizeof errstr), errstr);   /* written, never published */
        return;
    }
    st->ending = 1;
}

/* The whole value is in and the stream was never placed: the ordinary way. */
static void go_ordinary(put_stream *st) {
    gw_write *w = st->finish;
    put_batcher *puts = st->sr->puts;
    st->p->stream = NULL;
    stream_free(st);
    put_batcher_add(puts, w);
}

static void place_reply(const redisReply *r, void *ctx) {
    put_stream *st = ctx;
    put_streamer *sr = st->sr;
    int rc = r ? mkv_placed_parse(sr->loop_mc, r, st->size, &st->loc) : MKV_ECONN;
    st->state = rc == MKV_OK ? PS_PLACED : PS_UNPLACED;
    if (rc == MKV_OK) st->epoch = master_async_epoch(sr->ma);
    if (st->aborted) {
        stream_revoke(st);
        maybe_free(st);
        return;
    }
    if (st->state == PS_UNPLACED && st->finish) {
        go_ordinary(st);
        return;
    }
    pump(st);
    wake(st);
    maybe_end(st);
}

void put_stream_start(put_streamer *sr, store_put *p, void (*resume)(void *ctx), void *ctx) {
    put_stream *st = xcalloc(1, sizeof *st + p->keylen + 1);
    st->sr = sr;
    st->p = p;
    st->base = p->buf.ptr;
    st->size = p->buf.len;
    st->nslices = (uint32_t)((st->size + PROTO_SLICE_WRITE - 1) / PROTO_SLICE_WRITE);
    st->crc = xcalloc(st->nslices, sizeof *st->crc);
    st->done = xcalloc(st->nslices, sizeof *st->done);
    st->resume = resume;
    st->rctx = ctx;
    st->keylen = p->keylen;
    memcpy(st->key, p->key, p->keylen);
    st->next = sr->streams;
    if (sr->streams) sr->streams->prev = st;
    sr->streams = st;
    p->stream = st;
    proto_cmd cmd;
    proto_cmd_putstart(&cmd, st->key, st->keylen, st->size, sr->replicas);
    st->state = PS_PLACING;
    if (sr->closing || master_async_send(sr->ma, cmd.argc, cmd.argv, cmd.lens, place_reply, st) != 0)
        st->state = PS_UNPLACED;
    proto_cmd_free(&cmd);
}

uint64_t put_stream_progress(put_stream *st, uint64_t landed) {
    if (landed > st->landed) st->landed = landed;
    if (st->state == PS_FAILED) {   /* the put is lost: its bytes only pass through */
        drop_pages(st, st->written, st->landed);
        st->written = st->landed;
    }
    pump(st);
    return window(st);
}

int put_stream_finish(put_stream *st, gw_write *w) {
    st->landed = st->size;
    if (st->state == PS_UNPLACED) {
        st->p->stream = NULL;
        stream_free(st);
        return 0;
    }
    st->finish = w;
    pump(st);
    maybe_end(st);
    return 1;
}

void put_stream_abort(put_stream *st) {
    st->aborted = 1;
    st->buf = st->p->buf;
    st->p->buf.ptr = NULL;
    st->p->stream = NULL;
    st->p = NULL;
    if (st->state != PS_PLACING) stream_revoke(st);
    maybe_free(st);
}

put_streamer *put_streamer_create(put_batcher *puts, master_async *ma, workers *w, staging *pool,
                                  mkv_client *loop_mc, int replicas) {
    put_streamer *sr = xcalloc(1, sizeof *sr);
    *sr = (put_streamer){.puts = puts, .ma = ma, .w = w, .pool = pool, .loop_mc = loop_mc};
    sr->replicas = replicas > 0 ? replicas : 1;
    return sr;
}

void put_streamer_close(put_streamer *sr) {
    if (!sr) return;
    sr->closing = 1;
    for (put_stream *st = sr->streams, *next; st; st = next) {
        next = st->next;
        if (st->finish && !st->ending) complete(st, STORE_ERR, "the gateway is shutting down");
    }
}

void put_streamer_free(put_streamer *sr) {
    if (!sr) return;
    while (sr->streams) {
        put_stream *st = sr->streams;
        if (st->p) st->p->stream = NULL;
        stream_free(st);
    }
    free(sr);
}
