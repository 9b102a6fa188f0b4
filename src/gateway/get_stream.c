/* gateway/get_stream.c - see get_stream.h.
 *
 * Everything but a slice's read runs on the loop. A read job touches only
 * its piece and what is fixed before it is submitted (the located object,
 * the epoch). Slices are handed to the socket in order; a piece comes
 * back (its buffer free for the next slice) when the socket has written
 * it, so a slow client holds the stream at GS_WINDOW slices. */
#include "gateway/get_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "gateway/cluster_call.h"
#include "proto/cmd.h"
#include "proto/slices.h"

enum { GP_FREE, GP_READING, GP_READY, GP_SENDING, GP_WAITING };

#define GS_RELOCATIONS 64      /* fresh leases one GET may take (each lasts lease_ms) */

struct get_streamer {
    workers *w;
    master_async *ma;
    mkv_client *loop_mc;      /* decodes replies */
    int closing;
    uint64_t streamed, cut;
};

typedef struct gs_piece {
    gw_job job;               /* first: the workers' link */
    get_stream *gs;
    char *buf;                /* slice bytes, allocated at first use */
    uint32_t idx;
    int state;                /* GP_*; WAITING: for a fresh lease */
    const mkv_located *loc;   /* where its read goes (the stream's, when submitted) */
    int ok;                   /* READY: verified */
    int lease_out;            /* !ok: a node refused the read lease (it ran out) */
    char why[128];            /* !ok: the last replica's failure */
} gs_piece;

struct get_stream {
    get_streamer *sr;
    client *c;                /* NULL once gone */
    reply_slot *slot;
    mkv_located *loc;         /* the newest; reads go there */
    mkv_located *old[GS_WINDOW];   /* earlier ones still read from (NULL: none) */
    unsigned relocations;
    int relocating;           /* a MOON.GET for a fresh lease is out */
    proto_slices slices;      /* a copy of the first located's (every later one has the same) */
    const proto_slices *sl;   /* &slices */
    uint64_t size, epoch;
    uint32_t next_read, next_send;
    unsigned busy;            /* pieces not FREE */
    int over;                 /* the reply is whole, or was cut */
    int whole;                /* the value is whole: its slot ended (or, keep_slot, sent up to here) */
    int keep_slot;            /* more of the reply follows in the slot: it stays open */
    gs_piece piece[GS_WINDOW];
    void (*done)(void *ctx);
    void *ctx;
    size_t keylen;
    char key[];
};

static uint64_t slice_len(const get_stream *gs, uint32_t i) {
    uint64_t off = (uint64_t)i * gs->sl->size;
    return gs->size - off < gs->sl->size ? gs->size - off : gs->sl->size;
}

int get_stream_wanted(const mkv_located *l, uint64_t size) {
    const proto_slices *sl = mkv_located_slices(l);
    return size >= GS_MIN && sl->count > 1 && sl->size <= GS_MAX_SLICE;
}

/* ---- on a worker ---- */

/* Slice idx into buf from replica rep (-1: any); 1 if its CRC matched. */
static int read_slice(gs_piece *p, mkv_client *mc, int rep) {
    get_stream *gs = p->gs;
    uint64_t off = (uint64_t)p->idx * gs->sl->size;
    uint32_t crc;
    int rc = mkv_read_located_range(mc, p->loc, rep, p->buf, off, slice_len(gs, p->idx), &crc);
    p->lease_out |= rc == MKV_EAUTH;
    if (rc != MKV_OK)
        snprintf(p->why, sizeof p->why, "%s: %s", mkv_strerror(rc), mkv_last_error(mc));
    else if (crc != gs->sl->crc[p->idx])
        snprintf(p->why, sizeof p->why, "checksum mismatch");
    return rc == MKV_OK && crc == gs->sl->crc[p->idx];
}

/* Any replica (the engine fails over from a node that fails), then each
 * one alone: a slice rotten on one replica is read from another. */
static void piece_run(gw_job *j, mkv_client *mc) {
    gs_piece *p = (gs_piece *)j;
    cluster_worker_topology(p->gs->sr->w, mc, p->gs->epoch);
    p->ok = read_slice(p, mc, -1);
    for (int r = 0; !p->ok && r < (int)mkv_located_replicas(p->loc); r++) p->ok = read_slice(p, mc, r);
}

/* ---- on the loop ---- */

static void ignore_reply(const redisReply *r, void *ctx) {}

static void release_lease(get_stream *gs) {
    master_async *ma = gs->sr->ma;
    uint64_t until = mkv_located_lease(gs->loc);
    if (!ma || gs->sr->closing || !until) return;
    proto_cmd cmd;
    proto_cmd_release_begin(&cmd, 1);
    proto_cmd_release_add(&cmd, gs->key, gs->keylen, until);
    master_async_send(ma, cmd.argc, cmd.argv, cmd.lens, ignore_reply, NULL);
    proto_cmd_free(&cmd);
}

/* Nothing held, and the reply whole or its client gone (a cut reply
 * waits for that: the client's end tells the stream): the stream goes. */
static void maybe_finish(get_stream *gs) {
    if (gs->busy || (gs->c && !gs->whole)) return;
    for (int i = 0; i < GS_WINDOW; i++)
        if (gs->piece[i].buf) xhuge_free(gs->piece[i].buf, (size_t)gs->sl->size);
    release_lease(gs);
    mkv_located_free(gs->loc);
    for (int i = 0; i < GS_WINDOW; i++) mkv_located_free(gs->old[i]);
    proto_slices_free(&gs->slices);
    void (*done)(void *ctx) = gs->done;
    void *ctx = gs->ctx;
    free(gs);
    done(ctx);
}

static void piece_free(gs_piece *p) {
    p->state = GP_FREE;
    p->gs->busy--;
}

static void pump(get_stream *gs);
static int relocate(get_stream *gs);

/* The socket wrote the piece (or dropped it with its client). */
static void piece_sent(void *ctx) {
    gs_piece *p = ctx;
    get_stream *gs = p->gs;
    piece_free(p);
    if (gs->c && !gs->over) pump(gs);
    else maybe_finish(gs);
}

/* No replica could supply a slice: the reply cannot be finished. */
static void cut_off(get_stream *gs, const gs_piece *p) {
    log_warning("GET %.*s: slice %u of %u (%s) from no replica, closing the client", (int)gs->keylen,
                gs->key, p->idx, gs->sl->count, p->why);
    gs->over = 1;
    gs->sr->cut++;
    client_close_async(gs->c);
    for (int i = 0; i < GS_WINDOW; i++)
        if (gs->piece[i].state == GP_READY) piece_free(&gs->piece[i]);
}

/* The slices ready in order go to the socket; after the last, the CRLF. */
static void send_ready(get_stream *gs) {
    for (int more = 1; more && gs->c && !gs->over;) {
        more = 0;
        for (int i = 0; i < GS_WINDOW; i++) {
            gs_piece *p = &gs->piece[i];
            if (p->state != GP_READY || p->idx != gs->next_send) continue;
            if (!p->ok) {
                cut_off(gs, p);
                return;
            }
            p->state = GP_SENDING;
            gs->next_send++;
            client_slot_begin(gs->c, gs->slot);
            reply_raw_ref(gs->c, p->buf, (size_t)slice_len(gs, p->idx), piece_sent, p);
            if (gs->next_send < gs->sl->count) {
                client_slot_part(gs->c, gs->slot);
                more = 1;
                continue;
            }
            reply_raw(gs->c, "\r\n", 2);
            if (gs->keep_slot) client_slot_part(gs->c, gs->slot);
            else client_slot_end(gs->c, gs->slot);
            gs->over = gs->whole = 1;
        }
    }
}

static void piece_done(gw_job *j) {
    gs_piece *p = (gs_piece *)j;
    get_stream *gs = p->gs;
    if (j->cancelled) {   /* the gateway is stopping: nothing more goes */
        gs->over = 1;
        p->state = GP_READY;
    }
    if (!gs->c || gs->over) piece_free(p);
    else if (!p->ok && p->lease_out && relocate(gs)) p->state = GP_WAITING;
    else p->state = GP_READY;
    send_ready(gs);
    if (gs->c && !gs->over) pump(gs);
    else maybe_finish(gs);
}

static void submit(gs_piece *p) {
    p->state = GP_READING;
    p->loc = p->gs->loc;
    p->ok = p->lease_out = 0;
    p->job = (gw_job){.run = piece_run, .done = piece_done};
    workers_submit(p->gs->sr->w, &p->job);
}

/* Whether a and b describe the same value (a key removed and set again
 * in the meantime may hold another). */
static int same_value(const get_stream *gs, const mkv_located *b, uint64_t size) {
    const proto_slices *x = gs->sl, *y = mkv_located_slices(b);
    return size == gs->size && x->size == y->size && x->count == y->count &&
           memcmp(x->crc, y->crc, (size_t)x->count * sizeof *x->crc) == 0;
}

/* Earlier located objects no read uses any more go; old one stays while
 * a read does (at most one per piece). */
static void keep_old(get_stream *gs, mkv_located *old) {
    for (int i = 0; i < GS_WINDOW; i++) {
        int used = 0;
        for (int k = 0; k < GS_WINDOW; k++)
            used |= gs->piece[k].state == GP_READING && gs->piece[k].loc == gs->old[i];
        if (!used) {
            mkv_located_free(gs->old[i]);
            gs->old[i] = NULL;
        }
    }
    for (int i = 0; i < GS_WINDOW; i++)
        if (!gs->old[i]) {
            gs->old[i] = old;
            return;
        }
    mkv_located_free(old);   /* unreachable: GS_WINDOW pieces use at most GS_WINDOW - 1 others */
}

/* MOON.GET's answer: reads waiting for a lease go on with the fresh one,
 * or fail (the reply is then cut) when there is none for this value. */
static void relocated(const redisReply *r, void *ctx) {
    get_stream *gs = ctx;
    gs->relocating = 0;
    gs->busy--;
    mkv_located *l = NULL;
    uint64_t size = 0;
    int ok = r && mkv_located_parse(gs->sr->loop_mc, r, &l, &size) == MKV_OK && same_value(gs, l, size) &&
             gs->c && !gs->over;
    if (ok) {
        keep_old(gs, gs->loc);
        gs->relocations++;
        gs->loc = l;
        gs->epoch = master_async_epoch(gs->sr->ma);
    } else mkv_located_free(l);
    for (int i = 0; i < GS_WINDOW; i++) {
        gs_piece *p = &gs->piece[i];
        if (p->state != GP_WAITING) continue;
        if (ok) submit(p);
        else p->state = GP_READY;   /* still !ok */
    }
    send_ready(gs);
    if (gs->c && !gs->over) pump(gs);
    else maybe_finish(gs);
}

/* A read found its lease run out (a slow client): ask for a fresh one,
 * once for every read waiting. 0 when none can be had. */
static int relocate(get_stream *gs) {
    if (gs->relocating) return 1;
    if (!gs->sr->ma || gs->sr->closing || gs->relocations == GS_RELOCATIONS) return 0;
    proto_cmd cmd;
    proto_cmd_key(&cmd, PROTO_VERB_GET, gs->key, gs->keylen);
    int sent = master_async_send(gs->sr->ma, cmd.argc, cmd.argv, cmd.lens, relocated, gs) == 0;
    proto_cmd_free(&cmd);
    if (!sent) return 0;
    gs->relocating = 1;
    gs->busy++;   /* the stream waits for the answer */
    return 1;
}

/* Free pieces read the next slices. */
static void pump(get_stream *gs) {
    for (int i = 0; i < GS_WINDOW && gs->next_read < gs->sl->count; i++) {
        gs_piece *p = &gs->piece[i];
        if (p->state != GP_FREE) continue;
        if (!p->buf) p->buf = xhuge_alloc((size_t)gs->sl->size);
        p->idx = gs->next_read++;
        gs->busy++;
        submit(p);
    }
}

get_stream *get_stream_start(get_streamer *sr, client *c, reply_slot *slot, int keep_slot, mkv_located *l,
                             uint64_t size, const char *key, size_t keylen, uint64_t epoch,
                             void (*done)(void *ctx), void *ctx) {
    get_stream *gs = xcalloc(1, sizeof *gs + keylen + 1);
    const proto_slices *sl = mkv_located_slices(l);
    *gs = (get_stream){.sr = sr, .c = c, .slot = slot, .keep_slot = keep_slot, .loc = l, .size = size,
                       .epoch = epoch, .done = done, .ctx = ctx, .keylen = keylen};
    gs->slices = (proto_slices){sl->size, sl->count, xmemdup(sl->crc, (size_t)sl->count * sizeof *sl->crc)};
    gs->sl = &gs->slices;
    memcpy(gs->key, key, keylen);
    for (int i = 0; i < GS_WINDOW; i++) gs->piece[i].gs = gs;
    sr->streamed++;
    char hdr[32];
    int n = snprintf(hdr, sizeof hdr, "$%llu\r\n", (unsigned long long)size);
    client_slot_begin(c, slot);
    reply_raw(c, hdr, (size_t)n);
    client_slot_part(c, slot);
    pump(gs);
    return gs;
}

void get_stream_client_gone(get_stream *gs) {
    gs->c = NULL;
    for (int i = 0; i < GS_WINDOW; i++)
        if (gs->piece[i].state == GP_READY) piece_free(&gs->piece[i]);
    maybe_finish(gs);
}

get_streamer *get_streamer_create(workers *w, master_async *ma, mkv_client *loop_mc) {
    get_streamer *sr = xcalloc(1, sizeof *sr);
    sr->w = w;
    sr->ma = ma;
    sr->loop_mc = loop_mc;
    return sr;
}

void get_streamer_close(get_streamer *sr) {
    if (sr) sr->closing = 1;
}

void get_streamer_free(get_streamer *sr) { free(sr); }

void get_streamer_counts(const get_streamer *sr, uint64_t *streamed, uint64_t *cut) {
    *streamed = sr ? sr->streamed : 0;
    *cut = sr ? sr->cut : 0;
}
