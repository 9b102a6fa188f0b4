/* gateway/put_batch.c - see put_batch.h. */
#include "gateway/put_batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/moonkv_internal.h"
#include "core/util.h"
#include "proto/cmd.h"
#include "proto/ended.h"
#include "server/server.h"

struct put_batcher {
    int nreplicas;
    master_async *ma;
    struct mkv_async *face;   /* over groups: the router's, for the batches' puts */
    workers *w;
    mkv_client *loop_mc;      /* decodes replies (its last error is their text) */
    loop_hook *send;          /* after the reply flush, like the reads' */
    char replicas[24];
    read_batcher *reads;      /* says whether the loop moves bytes itself (read_batcher_inline_client) */
    gw_write *queue, **tail;
    int closing;
    int routed;               /* the client routes over master groups: a batch call splits by group */
    uint64_t written_inline;  /* values written on the loop (INFO puts_inline) */
    uint64_t routed_batches;  /* batches put by one routed call (atomic: workers count) */
    proto_extbuf ext;         /* the replies' records decode into it, one at a time */
};

typedef struct pb_batch {
    gw_job job;               /* first: the workers' link */
    put_batcher *b;
    gw_write *writes;
    size_t n;
    store_put **p;            /* every write's put, in order */
    mkv_located **loc;        /* [i] while placed and not yet published */
    uint32_t *crc;
    uint8_t *inline_done;     /* [i]: written on the loop, the worker leaves it */
    size_t *ended;            /* the written ones, for MOON.MPUTEND */
    ma_chunk *chunks;
    size_t waiting;           /* commands without their reply yet */
    int failed;               /* a MOON.MPUTSTART got no answer */
    uint64_t epoch;           /* the master connection that placed them */
    size_t again;             /* puts the master dropped before MOON.MPUTEND */
} pb_batch;

static void shipped(store_put *p, int rc) {
    p->ship_rc = rc;
    p->shipped = 1;
}

/* ---- on a worker ---- */

/* Placed or not, put the slow way (revoked first: that frees its key). */
static void put_again(pb_batch *bt, mkv_client *mc, size_t i) {
    if (bt->loc[i]) mkv_revoke(mc, bt->p[i]->key, bt->p[i]->keylen);
    mkv_located_free(bt->loc[i]);
    bt->loc[i] = NULL;
    cluster_ship(mc, bt->p[i], bt->b->nreplicas);
}

/* Over master groups (no asynchronous connection, nothing placed yet):
 * the batch's puts in one library batch, which the client splits by
 * group and runs the parts at once; a put whose grants ran out goes
 * again alone, as cluster_ship would. */
static void put_routed(pb_batch *bt, mkv_client *mc) {
    size_t cap = bt->n ? bt->n : 1, n = 0;
    mkv_obj *objs = xcalloc(cap, sizeof *objs);
    size_t *idx = xcalloc(cap, sizeof *idx);
    for (size_t i = 0; i < bt->n; i++) {
        store_put *p = bt->p[i];
        if (p->shipped) continue;
        if (staging_bind(mc, &p->buf) != MKV_OK) {
            cluster_ship(mc, p, bt->b->nreplicas);
            continue;
        }
        objs[n] = (mkv_obj){.key = p->key, .keylen = p->keylen, .buf = p->buf.ptr, .len = (size_t)p->buf.len};
        idx[n++] = i;
    }
    if (n) {
        cluster_master_wait();
        mkv_put_batch(mc, objs, n, bt->b->nreplicas);
    }
    for (size_t k = 0; k < n; k++) {
        store_put *p = bt->p[idx[k]];
        staging_unbind(mc, &p->buf);
        if (objs[k].status == MKV_EAUTH) cluster_ship(mc, p, bt->b->nreplicas);
        else shipped(p, cluster_store_code(objs[k].status, mc, p->errstr, sizeof p->errstr));
    }
    if (n) __atomic_fetch_add(&bt->b->routed_batches, 1, __ATOMIC_RELAXED);
    free(objs);
    free(idx);
}

static void put_each(gw_job *j, mkv_client *mc) {
    pb_batch *bt = (pb_batch *)j;
    if (bt->b->routed) {
        put_routed(bt, mc);
        return;
    }
    for (size_t i = 0; i < bt->n; i++)
        if (!bt->p[i]->shipped) put_again(bt, mc, i);
}

static void write_result(pb_batch *bt, mkv_client *mc, size_t i, const mkv_obj *o, uint32_t failed_node) {
    if (o->status == MKV_OK) return;   /* published from the loop */
    /* A node's fault, or grants that ran out before the bytes went (a
     * busy gateway, a short put timeout): placed again. */
    if (failed_node || o->status == MKV_EAUTH) {
        put_again(bt, mc, i);
        return;
    }
    store_put *p = bt->p[i];
    shipped(p, cluster_store_code(o->status, mc, p->errstr, sizeof p->errstr));
    mkv_revoke(mc, p->key, p->keylen);
    mkv_located_free(bt->loc[i]);
    bt->loc[i] = NULL;
}

static void write_located(gw_job *j, mkv_client *mc) {
    pb_batch *bt = (pb_batch *)j;
    size_t cap = bt->n ? bt->n : 1, n = 0;
    cluster_worker_topology(bt->b->w, mc, bt->epoch);
    mkv_obj *objs = xcalloc(cap, sizeof *objs);
    mkv_located **loc = xcalloc(cap, sizeof *loc);
    size_t *idx = xcalloc(cap, sizeof *idx);
    uint32_t *crc = xcalloc(cap, sizeof *crc), *failed = xcalloc(cap, sizeof *failed);
    for (size_t i = 0; i < bt->n; i++) {
        store_put *p = bt->p[i];
        if (!bt->loc[i] || bt->inline_done[i]) continue;
        if (staging_bind(mc, &p->buf) != MKV_OK) {
            put_again(bt, mc, i);
            continue;
        }
        objs[n] = (mkv_obj){.key = p->key, .keylen = p->keylen, .buf = p->buf.ptr, .len = p->buf.len};
        loc[n] = bt->loc[i];
        idx[n++] = i;
    }
    mkv_write_located(mc, objs, loc, n, crc, failed);
    for (size_t k = 0; k < n; k++) {
        staging_unbind(mc, &bt->p[idx[k]]->buf);
        bt->crc[idx[k]] = crc[k];
        write_result(bt, mc, idx[k], &objs[k], failed[k]);
    }
    free(objs);
    free(loc);
    free(idx);
    free(crc);
    free(failed);
}

/* ---- on the loop ---- */

static void batch_finish(pb_batch *bt) {
    for (gw_write *w = bt->writes, *next; w; w = next) {
        next = w->next;
        w->done(w);
    }
    for (size_t i = 0; i < bt->n; i++) mkv_located_free(bt->loc[i]);
    free(bt->p);
    free(bt->loc);
    free(bt->crc);
    free(bt->inline_done);
    free(bt->ended);
    free(bt->chunks);
    free(bt);
}

/* A put that outlived the master's put timeout between MOON.MPUTSTART
 * and MOON.MPUTEND is gone there (a busy gateway, a short timeout): it
 * is put again, the blocking way; other refusals are the answer. */
static void end_refused(pb_batch *bt, size_t i, int rc) {
    store_put *p = bt->p[i];
    mkv_located_free(bt->loc[i]);
    bt->loc[i] = NULL;   /* nothing to revoke */
    if (rc == MKV_ENOTFOUND || rc == MKV_ETIMEDOUT) bt->again++;
    else shipped(p, cluster_store_code(rc, bt->b->loop_mc, p->errstr, sizeof p->errstr));
}

static void batch_retried(gw_job *j) { batch_finish((pb_batch *)j); }

/* Every MOON.MPUTEND answered: done, unless some must be put again. */
static void batch_published(pb_batch *bt) {
    if (!bt->again || bt->b->closing) {
        batch_finish(bt);
        return;
    }
    bt->job.run = put_each;
    bt->job.done = batch_retried;
    workers_submit(bt->b->w, &bt->job);
}

/* The chunk's records (MOON.MPUTEND PACKED, proto/ended.h): one reply
 * object for all of them. Keys without a record (no answer, or a blob
 * cut short) are written but not known to be published: lost. */
static void end_reply(const redisReply *r, void *ctx) {
    ma_chunk *ch = ctx;
    pb_batch *bt = ch->owner;
    int ok = r && r->type == REDIS_REPLY_STRING;
    const uint8_t *at = ok ? (const uint8_t *)r->str : NULL, *end = ok ? at + r->len : NULL;
    for (size_t k = 0; k < ch->n; k++) {
        store_put *p = bt->p[bt->ended[ch->first + k]];
        proto_ended rec;
        ok = ok && proto_ended_next(&at, end, &rec) == 0;
        if (!ok) shipped(p, cluster_store_lost(p->errstr, sizeof p->errstr));
        else if (!rec.err) shipped(p, STORE_OK);
        else end_refused(bt, bt->ended[ch->first + k], mkv_ended_take(bt->b->loop_mc, rec.err, rec.errlen));
    }
    if (--bt->waiting == 0) batch_published(bt);
}

static void end_item(void *owner, size_t j, const char **argv, size_t *lens, char (*num)[24]) {
    pb_batch *bt = owner;
    size_t i = bt->ended[j];
    argv[0] = bt->p[i]->key;
    lens[0] = bt->p[i]->keylen;
    lens[1] = u64_decimal(bt->crc[i], num[1]);
    argv[1] = num[1];
}

/* The bytes are on the nodes: MOON.MPUTEND publishes them. */
static void batch_written(gw_job *j) {
    pb_batch *bt = (pb_batch *)j;
    if (j->cancelled || bt->b->closing) {
        batch_finish(bt);
        return;
    }
    size_t n = 0;
    bt->ended = xcalloc(bt->n ? bt->n : 1, sizeof *bt->ended);
    for (size_t i = 0; i < bt->n; i++)
        if (bt->loc[i] && !bt->p[i]->shipped) bt->ended[n++] = i;
    const char *head[PROTO_MPUTEND_HEAD];
    size_t nhead = proto_mputend_head(head);
    int failed = 0;
    free(bt->chunks);
    bt->waiting = master_async_send_batch(bt->b->ma, head, (int)nhead, n, 2, end_item, bt, &bt->chunks, end_reply, &failed);
    /* Those not sent: written, never published (the put timeout frees them). */
    size_t sent = bt->waiting ? bt->chunks[bt->waiting - 1].first + bt->chunks[bt->waiting - 1].n : 0;
    for (size_t k = sent; k < n; k++) {
        store_put *p = bt->p[bt->ended[k]];
        shipped(p, cluster_store_lost(p->errstr, sizeof p->errstr));
    }
    if (bt->waiting == 0) batch_published(bt);
}

/* Values up to this size are written on the loop when they can be: a
 * copy that small costs less than the hand-off to a worker and back,
 * while a larger one would hold up every other client of the loop. */
#define PB_INLINE_MAX (64 * 1024)

/* The placed small values that can be written without waiting, written
 * here (their CRCs for MOON.MPUTEND); 1 when none is left for a worker. */
static int write_inline(pb_batch *bt) {
    mkv_client *mc = read_batcher_inline_client(bt->b->reads);
    if (!mc) return 0;
    size_t cap = bt->n ? bt->n : 1, n = 0, left = 0;
    mkv_obj *objs = xmalloc(cap * sizeof *objs);
    mkv_located **loc = xmalloc(cap * sizeof *loc);
    size_t *idx = xmalloc(cap * sizeof *idx);
    uint32_t *crc = xmalloc(cap * sizeof *crc);
    for (size_t i = 0; i < bt->n; i++) {
        store_put *p = bt->p[i];
        if (!bt->loc[i] || p->shipped) continue;
        if (p->buf.len > PB_INLINE_MAX) {
            left++;
            continue;
        }
        objs[n] = (mkv_obj){.key = p->key, .keylen = p->keylen, .buf = p->buf.ptr, .len = p->buf.len};
        loc[n] = bt->loc[i];
        idx[n++] = i;
    }
    if (n) mkv_write_located_now(mc, objs, loc, n, crc);
    size_t missed = 0;
    for (size_t k = 0; k < n; k++) {
        if (objs[k].status != MKV_OK) {
            missed++;
            continue;
        }
        bt->inline_done[idx[k]] = 1;
        bt->crc[idx[k]] = crc[k];
        bt->b->written_inline++;
    }
    if (missed) read_batcher_inline_missed(bt->b->reads);   /* a path may be missing */
    left += missed;
    free(objs);
    free(loc);
    free(idx);
    free(crc);
    return left == 0;
}

/* On the loop: each put's outcome; one whose grants ran out before its
 * bytes went is put again on a worker (put_each), as cluster_ship does. */
static void face_put(mkv_op *op) {
    gw_face_op *q = (gw_face_op *)op;
    pb_batch *bt = q->owner;
    size_t again = 0;
    for (size_t k = 0; k < op->n; k++) {
        store_put *p = bt->p[q->idx[k]];
        if (q->objs[k].status == MKV_EAUTH) again++;
        else shipped(p, cluster_face_code(op, q->objs[k].status, p->errstr, sizeof p->errstr));
    }
    __atomic_fetch_add(&bt->b->routed_batches, 1, __ATOMIC_RELAXED);
    free(q);
    if (!again || bt->b->closing) {
        batch_finish(bt);
        return;
    }
    bt->job.run = put_each;
    bt->job.done = batch_retried;
    workers_submit(bt->b->w, &bt->job);
}

/* Over groups: the batch's puts as one batch put on the router's face
 * (split by group there, the parts at once), so no thread waits for a
 * master. 0 (nothing submitted) when a value has a mapping of its own,
 * registered only around its transfer by the thread moving it: a
 * worker's job. */
static int put_on_face(pb_batch *bt) {
    gw_face_op *q = cluster_face_op(MKV_OP_PUT_BATCH, bt->n, 0, face_put);
    for (size_t i = 0; i < bt->n; i++) {
        store_put *p = bt->p[i];
        if (p->shipped) continue;
        if (p->buf.map_len) {
            free(q);
            return 0;
        }
        q->objs[q->op.n] = (mkv_obj){.key = p->key, .keylen = p->keylen, .buf = p->buf.ptr,
                                     .len = (size_t)p->buf.len, .status = CLUSTER_UNTOLD};
        q->idx[q->op.n++] = i;
    }
    q->owner = bt;
    q->op.replicas = bt->b->nreplicas;
    if (q->op.n > 0 && mkv_async_submit(bt->b->face, &q->op) == MKV_OK) return 1;
    free(q);
    return 0;
}

/* Every MOON.MPUTSTART answered (or none could be sent): the bytes move. */
static void batch_placed(pb_batch *bt) {
    if (bt->b->closing) {
        batch_finish(bt);
        return;
    }
    if (bt->failed && bt->b->routed && bt->b->face && put_on_face(bt)) return;
    if (bt->b->ma) bt->epoch = master_async_epoch(bt->b->ma);
    bt->job.run = bt->failed ? put_each : write_located;
    bt->job.done = batch_written;
    if (!bt->failed && write_inline(bt)) {
        batch_written(&bt->job);   /* every value is on its nodes: no worker needed */
        return;
    }
    workers_submit(bt->b->w, &bt->job);
}

/* The chunk's records (MOON.MPUTSTART PACKED, proto/placed.h): one
 * reply object for all of them. */
static void start_reply(const redisReply *r, void *ctx) {
    ma_chunk *ch = ctx;
    pb_batch *bt = ch->owner;
    if (!r || r->type != REDIS_REPLY_STRING) bt->failed = 1;
    const uint8_t *at = r ? (const uint8_t *)r->str : NULL, *end = at ? at + r->len : NULL;
    for (size_t k = 0; !bt->failed && k < ch->n; k++) {
        size_t i = ch->first + k;
        store_put *p = bt->p[i];
        proto_placed rec;
        if (proto_placed_next(&at, end, p->buf.len, TE_CAP_WRITE, &bt->b->ext, &rec) != 0) {
            bt->failed = 1;   /* what it placed already is revoked (put_again) */
            break;
        }
        int rc = mkv_placed_take(bt->b->loop_mc, &rec, &bt->loc[i]);
        if (rc != MKV_OK) shipped(p, cluster_store_code(rc, bt->b->loop_mc, p->errstr, sizeof p->errstr));
    }
    if (!bt->failed && at != end) bt->failed = 1;
    if (--bt->waiting == 0) batch_placed(bt);
}

static void start_item(void *owner, size_t i, const char **argv, size_t *lens, char (*num)[24]) {
    pb_batch *bt = owner;
    argv[0] = bt->p[i]->key;
    lens[0] = bt->p[i]->keylen;
    lens[1] = u64_decimal(bt->p[i]->buf.len, num[1]);
    argv[1] = num[1];
}

static void send_cb(event_loop *el, void *data) {
    put_batcher *b = data;
    if (!b->queue) return;
    pb_batch *bt = xcalloc(1, sizeof *bt);
    bt->b = b;
    bt->writes = b->queue;
    b->queue = NULL;
    b->tail = &b->queue;
    for (gw_write *w = bt->writes; w; w = w->next) bt->n++;
    bt->p = xcalloc(bt->n, sizeof *bt->p);
    bt->loc = xcalloc(bt->n, sizeof *bt->loc);
    bt->crc = xcalloc(bt->n, sizeof *bt->crc);
    bt->inline_done = xcalloc(bt->n, sizeof *bt->inline_done);
    size_t i = 0;
    for (gw_write *w = bt->writes; w; w = w->next) bt->p[i++] = w->put;
    const char *head[PROTO_MPUTSTART_HEAD];
    size_t nhead = proto_mputstart_head(head, b->replicas);
    bt->waiting = master_async_send_batch(b->ma, head, (int)nhead, bt->n, 2, start_item, bt, &bt->chunks, start_reply,
                                          &bt->failed);
    if (bt->waiting == 0) batch_placed(bt);
}

void put_batcher_add(put_batcher *b, gw_write *w) {
    w->put->shipped = 0;
    w->next = NULL;
    *b->tail = w;
    b->tail = &w->next;
}

uint64_t put_batcher_inline(const put_batcher *b) { return b ? b->written_inline : 0; }

uint64_t put_batcher_routed(const put_batcher *b) {
    return b ? __atomic_load_n(&b->routed_batches, __ATOMIC_RELAXED) : 0;
}

put_batcher *put_batcher_create(event_loop *loop, master_async *ma, struct mkv_async *face, workers *w,
                                mkv_client *loop_mc, int replicas, read_batcher *reads, int routed) {
    put_batcher *b = xcalloc(1, sizeof *b);
    *b = (put_batcher){.ma = ma, .face = face, .w = w, .loop_mc = loop_mc, .reads = reads, .routed = routed && !ma};
    b->nreplicas = replicas;
    snprintf(b->replicas, sizeof b->replicas, "%d", replicas > 0 ? replicas : 1);
    b->tail = &b->queue;
    b->send = loop_hook_add(loop, SERVER_HOOK_FLUSH + 1, send_cb, b);
    return b;
}

void put_batcher_close(put_batcher *b) {
    if (!b) return;
    b->closing = 1;
    loop_hook_del(b->send);
    b->send = NULL;
    for (gw_write *w = b->queue, *next; w; w = next) {
        next = w->next;
        w->done(w);
    }
    b->queue = NULL;
}

void put_batcher_free(put_batcher *b) {
    if (!b) return;
    proto_extbuf_free(&b->ext);
    free(b);
}
