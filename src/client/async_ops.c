/* client/async_ops.c - the async face's operations as steps.
 *
 * A master leg is a command sent on the core's shared master connection
 * with a callback for its reply (mkv_async_send); a data leg (the
 * engine's transfers) runs on a thread of the face through the split
 * calls of moonkv_internal.h (mkv_write_located, mkv_read_located), as
 * the gateway moves bytes. Between legs an operation is a record in a
 * queue: no thread waits for the master.
 *
 * - exists, remove, stat, exists batch, remove batch: one command
 *   (MOON.OBJECT for a stat: no lease, no bytes), done in its callback.
 * - put: PUTSTART (MPUTSTART PACKED for a batch), the write on a thread,
 *   then PUTEND (MPUTEND PACKED) with the failed ones' PUTREVOKEs ahead
 *   of it in the same write. A write a node's fault failed is placed
 *   again (SUSPECT, PUTREVOKE and PUTSTART in one write) up to
 *   MKV_PUT_ATTEMPTS times, as the blocking put does.
 * - get: GET (MGETPACKED), the read on a thread (located once more when
 *   a read lease ran out first); the leases go back ahead of the face's
 *   next command.
 *
 * A batch goes in chunks of PROTO_MAX_BATCH, all at once; the operation
 * is done when every chunk is, its status the first chunk failure. */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "client/moonkv_async.h"
#include "client/moonkv_internal.h"
#include "core/util.h"
#include "proto/ended.h"
#include "proto/replies.h"

#define GET_ATTEMPTS 2   /* a read whose lease ran out is located once more */

/* One submitted operation. */
typedef struct aop {
    mkv_async *a;
    mkv_op *op;
    int parts;                 /* chunks not yet done (atomic) */
    int status;                /* the first chunk's failure, else MKV_OK (atomic) */
} aop;

/* One chunk of it: its objects (the op's, or `one` for a single key). */
typedef struct chunk {
    mkv_ajob job;              /* first: a queued data leg */
    aop *o;
    mkv_obj *objs, one;
    int *results;              /* exists batch */
    size_t n;
    int replicas;              /* puts */
    size_t *idx, m;            /* the objects in this step */
    mkv_located **loc;         /* per object: its placement, while it has one */
    unsigned char *placed;     /* per object: holds a pending put on the master */
    uint32_t *crc, *failed;    /* per object: a write's CRC, the node at fault */
    int attempt;
} chunk;

static int single(const aop *o) {
    mkv_op_kind k = o->op->kind;
    return k == MKV_OP_PUT || k == MKV_OP_GET || k == MKV_OP_EXISTS || k == MKV_OP_REMOVE || k == MKV_OP_STAT;
}

static void chunk_free(chunk *ch) {
    for (size_t i = 0; ch->loc && i < ch->n; i++) mkv_located_free(ch->loc[i]);
    free(ch->loc);
    free(ch->idx);
    free(ch->placed);
    free(ch->crc);
    free(ch->failed);
    free(ch);
}

/* The chunk is over with status (a single key's outcome, or a batch
 * chunk's failure); the operation completes with its last chunk. */
static void chunk_done(chunk *ch, int status) {
    aop *o = ch->o;
    if ((o->op->kind == MKV_OP_GET || o->op->kind == MKV_OP_STAT) && (status == MKV_OK || status == MKV_ETOOSMALL))
        o->op->len = ch->one.len;
    int ok = MKV_OK;
    if (status != MKV_OK)
        __atomic_compare_exchange_n(&o->status, &ok, status, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    chunk_free(ch);
    if (__atomic_sub_fetch(&o->parts, 1, __ATOMIC_ACQ_REL) > 0) return;
    o->op->status = __atomic_load_n(&o->status, __ATOMIC_ACQUIRE);
    mkv_async_finish(o->a, o->op);
    free(o);
}

/* A single key's outcome: the round's failure, else its object's. */
static int outcome(const chunk *ch, int rc) {
    return rc != MKV_OK || !single(ch->o) ? rc : ch->one.status;
}

/* cmd after the face's leases, sent with fn for its reply. */
static void send_cmd(chunk *ch, mkv_out *out, proto_cmd *cmd, mkv_reply_fn *fn) {
    mkv_out_add(out, cmd->argc, cmd->argv, cmd->lens);
    proto_cmd_free(cmd);
    mkv_async_send(ch->o->a, out, fn, ch);
}

static void begin(chunk *ch, mkv_out *out) {
    *out = (mkv_out){0};
    mkv_async_out(ch->o->a, out);
}

/* The objects still OK into idx: how many. */
static size_t keep_ok(chunk *ch) {
    ch->m = 0;
    for (size_t i = 0; i < ch->n; i++)
        if (ch->objs[i].status == MKV_OK) ch->idx[ch->m++] = i;
    return ch->m;
}

/* The objects of idx still OK, kept in idx: how many. */
static size_t idx_ok(chunk *ch) {
    size_t k = 0;
    for (size_t j = 0; j < ch->m; j++)
        if (ch->objs[ch->idx[j]].status == MKV_OK) ch->idx[k++] = ch->idx[j];
    return ch->m = k;
}

/* ---- exists, remove, stat, exists batch ---- */

static const char *key_verb(const chunk *ch) {
    mkv_op_kind k = ch->o->op->kind;
    return k == MKV_OP_EXISTS ? PROTO_VERB_EXISTS : k == MKV_OP_STAT ? PROTO_VERB_OBJECT : PROTO_VERB_REMOVE;
}

/* A stat's MOON.OBJECT: the size into one.len and the CRC into the op. */
static int stat_status(chunk *ch, const redisReply *r) {
    uint64_t size = 0;
    int got = proto_dec_object(r, &size, &ch->o->op->crc);
    if (got < 0) return mkv_bad_reply(ch->o->a->c, PROTO_VERB_OBJECT, r);
    if (got) ch->one.len = (size_t)size;
    return got ? MKV_OK : MKV_ENOTFOUND;
}

static void key_replied(void *arg, redisReply *r, int code) {
    chunk *ch = arg;
    mkv_async *a = ch->o->a;
    int exists = ch->o->op->kind == MKV_OP_EXISTS, st = code;
    long long v;
    if (r && ch->o->op->kind == MKV_OP_STAT) st = stat_status(ch, r);
    else if (r && proto_dec_int(r, INT64_MIN, INT64_MAX, &v) != 0) st = mkv_bad_reply(a->c, key_verb(ch), r);
    else if (r) st = exists ? v != 0 : v ? MKV_OK : MKV_ENOTFOUND;
    if (r) freeReplyObject(r);
    chunk_done(ch, st);
    mkv_async_replied(a);
}

static void key_start(chunk *ch) {
    int rc = mkv_check_key(ch->o->a->c, ch->one.key, ch->one.keylen);
    if (rc != MKV_OK) return chunk_done(ch, rc);
    proto_cmd cmd;
    proto_cmd_key(&cmd, key_verb(ch), ch->one.key, ch->one.keylen);
    mkv_out out;
    begin(ch, &out);
    send_cmd(ch, &out, &cmd, key_replied);
}

static void mexists_replied(void *arg, redisReply *r, int code) {
    chunk *ch = arg;
    mkv_async *a = ch->o->a;
    int rc = code;
    if (r) rc = proto_dec_flags(r, ch->n, ch->results) == 0 ? MKV_OK : mkv_bad_reply(a->c, PROTO_VERB_MEXISTS, r);
    for (size_t i = 0; rc == MKV_OK && i < ch->n; i++) ch->objs[i].status = MKV_OK;
    if (r) freeReplyObject(r);
    chunk_done(ch, rc);
    mkv_async_replied(a);
}

static void keys_start(chunk *ch, const char *verb, mkv_reply_fn *fn);

static void mexists_start(chunk *ch) { keys_start(ch, PROTO_VERB_MEXISTS, mexists_replied); }

static void mremove_replied(void *arg, redisReply *r, int code) {
    chunk *ch = arg;
    mkv_async *a = ch->o->a;
    int rc = r ? mkv_removed_statuses(a->c, r, ch->objs, ch->n) : code;
    if (r) freeReplyObject(r);
    chunk_done(ch, rc);
    mkv_async_replied(a);
}

/* MOON.MEXISTS or MOON.MREMOVE over the chunk's keys, with fn for the reply. */
static void keys_start(chunk *ch, const char *verb, mkv_reply_fn *fn) {
    for (size_t i = 0; i < ch->n; i++) {
        int rc = mkv_check_key(ch->o->a->c, ch->objs[i].key, ch->objs[i].keylen);
        if (rc != MKV_OK) return chunk_done(ch, rc);
    }
    proto_cmd cmd;
    proto_cmd_keys_begin(&cmd, verb, ch->n);
    for (size_t i = 0; i < ch->n; i++) proto_cmd_bin(&cmd, ch->objs[i].key, ch->objs[i].keylen);
    mkv_out out;
    begin(ch, &out);
    send_cmd(ch, &out, &cmd, fn);
}

static void mremove_start(chunk *ch) { keys_start(ch, PROTO_VERB_MREMOVE, mremove_replied); }

/* ---- put ---- */

static void put_started(void *arg, redisReply *r, int code);

/* PUTREVOKE for every object placed and not published, into out. */
static void put_revokes(chunk *ch, mkv_out *out) {
    for (size_t i = 0; i < ch->n; i++) {
        if (!ch->placed[i] || ch->objs[i].status == MKV_OK) continue;
        proto_cmd cmd;
        proto_cmd_key(&cmd, PROTO_VERB_PUTREVOKE, ch->objs[i].key, ch->objs[i].keylen);
        mkv_out_add(out, cmd.argc, cmd.argv, cmd.lens);
        proto_cmd_free(&cmd);
        ch->placed[i] = 0;
    }
}

static void dropped(void *arg, redisReply *r, int code) {
    (void)code;
    if (r) freeReplyObject(r);
    mkv_async_replied(arg);
}

/* The put is over with rc: the revokes still owed go out (best effort:
 * the master revokes them anyway when its put timeout ends). */
static void put_finish(chunk *ch, int rc) {
    if (rc != MKV_OK)
        for (size_t i = 0; i < ch->n; i++)
            if (ch->objs[i].status == MKV_OK) ch->objs[i].status = rc;
    mkv_out out;
    begin(ch, &out);
    put_revokes(ch, &out);
    if (out.count) mkv_async_send(ch->o->a, &out, dropped, ch->o->a);
    else mkv_out_free(&out);
    chunk_done(ch, outcome(ch, rc));
}

/* (M)PUTSTART for the objects of idx into out. */
static void put_start_add(chunk *ch, mkv_out *out) {
    proto_cmd cmd;
    if (ch->m == 1) {
        mkv_obj *o = &ch->objs[ch->idx[0]];
        proto_cmd_putstart(&cmd, o->key, o->keylen, o->len, ch->replicas);
    } else {
        proto_cmd_mputstart_begin(&cmd, ch->replicas, ch->m);
        for (size_t j = 0; j < ch->m; j++) {
            mkv_obj *o = &ch->objs[ch->idx[j]];
            proto_cmd_mputstart_add(&cmd, o->key, o->keylen, o->len);
        }
    }
    send_cmd(ch, out, &cmd, put_started);
}

static void put_start(chunk *ch) {
    mkv_client *c = ch->o->a->c;
    for (size_t i = 0; i < ch->n; i++) ch->objs[i].status = mkv_put_check(c, &ch->objs[i], NULL);
    if (!keep_ok(ch)) return put_finish(ch, MKV_OK);
    mkv_out out;
    begin(ch, &out);
    put_start_add(ch, &out);
}

/* MOON.PUTSTART's reply: a placement, the master's refusal, or one that
 * does not decode (placed all the same: revoked then). */
static void put_placed_one(chunk *ch, size_t i, const redisReply *r) {
    mkv_client *c = ch->o->a->c;
    if (r->type == REDIS_REPLY_ERROR) {
        ch->objs[i].status = mkv_reply_error(c, r->str, r->len);
        return;
    }
    ch->placed[i] = 1;
    ch->objs[i].status = mkv_placed_parse(c, r, ch->objs[i].len, &ch->loc[i]);
}

/* MOON.MPUTSTART PACKED's blob: a record per object of idx, in order. */
static int put_placed_packed(chunk *ch, const redisReply *r) {
    mkv_client *c = ch->o->a->c;
    if (r->type != REDIS_REPLY_STRING) return mkv_bad_reply(c, PROTO_VERB_MPUTSTART " PACKED", r);
    const uint8_t *at = (const uint8_t *)r->str, *end = at + r->len;
    proto_extbuf buf = {0};
    for (size_t j = 0; j < ch->m; j++) {
        size_t i = ch->idx[j];
        proto_placed rec;
        if (proto_placed_next(&at, end, ch->objs[i].len, TE_CAP_WRITE, &buf, &rec) != 0) {
            for (int rc = mkv_bad_reply(c, PROTO_VERB_MPUTSTART " PACKED", r); j < ch->m; j++)
                ch->objs[ch->idx[j]].status = rc;
            break;
        }
        ch->placed[i] = rec.err == NULL;
        ch->objs[i].status = mkv_placed_take(c, &rec, &ch->loc[i]);
    }
    proto_extbuf_free(&buf);
    return MKV_OK;
}

static void put_write(mkv_ajob **jobs, size_t n);
static void put_end(chunk *ch, mkv_out *out);

static void put_started(void *arg, redisReply *r, int code) {
    chunk *ch = arg;
    mkv_async *a = ch->o->a;
    int rc = code;
    if (r && ch->m == 1) put_placed_one(ch, ch->idx[0], r);
    else if (r) rc = put_placed_packed(ch, r);
    if (r) freeReplyObject(r);
    if (rc != MKV_OK) {
        put_finish(ch, rc);
    } else if (idx_ok(ch)) {
        ch->job.leg = put_write;
        ch->job.objs = ch->m;
        mkv_async_leg(a, &ch->job);
    } else {   /* none placed: the ones written before (a retry's) end */
        mkv_out out;
        begin(ch, &out);
        put_end(ch, &out);
    }
    mkv_async_replied(a);
}

/* The objects of idx a node's fault failed, with attempts left, into
 * idx again; their SUSPECT and PUTREVOKEs into out. How many. */
static size_t put_faults(chunk *ch, mkv_out *out) {
    if (ch->attempt >= MKV_PUT_ATTEMPTS) return 0;
    size_t k = 0;
    for (size_t j = 0; j < ch->m; j++) {
        size_t i = ch->idx[j];
        if (ch->objs[i].status != MKV_OK && ch->failed[i]) ch->idx[k++] = i;
    }
    if (!k) return 0;
    proto_cmd cmd;
    proto_cmd_suspect_begin(&cmd, k);
    for (size_t j = 0; j < k; j++) proto_cmd_u64(&cmd, ch->failed[ch->idx[j]]);
    mkv_out_add(out, cmd.argc, cmd.argv, cmd.lens);
    proto_cmd_free(&cmd);
    put_revokes(ch, out);   /* these, and the others that failed meanwhile */
    for (size_t j = 0; j < k; j++) {
        size_t i = ch->idx[j];
        mkv_located_free(ch->loc[i]);
        ch->loc[i] = NULL;
        ch->failed[i] = 0;
        ch->objs[i].status = MKV_OK;
    }
    ch->m = k;
    ch->attempt++;
    return k;
}

static void put_ended(void *arg, redisReply *r, int code);

/* PUTEND (MPUTEND PACKED) for the written objects, after the revokes. */
static void put_end(chunk *ch, mkv_out *out) {
    put_revokes(ch, out);
    if (!keep_ok(ch)) {
        if (out->count) mkv_async_send(ch->o->a, out, dropped, ch->o->a);
        else mkv_out_free(out);
        chunk_done(ch, outcome(ch, MKV_OK));
        return;
    }
    proto_cmd cmd;
    if (ch->m > 1) proto_cmd_mputend_begin(&cmd, 0, ch->m);
    for (size_t j = 0; j < ch->m; j++) {
        mkv_obj *o = &ch->objs[ch->idx[j]];
        if (ch->m == 1) proto_cmd_putend(&cmd, o->key, o->keylen, ch->crc[ch->idx[j]], NULL);
        else proto_cmd_mputend_add(&cmd, o->key, o->keylen, ch->crc[ch->idx[j]], NULL);
    }
    send_cmd(ch, out, &cmd, put_ended);
}

/* The objects of idx still OK in the chunks of a data leg, gathered
 * into one list for one engine batch. */
typedef struct leg_objs {
    mkv_obj *w;
    mkv_located **loc;
    uint32_t *crc, *failed;
    size_t n;
} leg_objs;

static void leg_gather(leg_objs *g, mkv_ajob **jobs, size_t n) {
    size_t cap = 0;
    for (size_t k = 0; k < n; k++) cap += ((chunk *)jobs[k])->m;
    g->w = xcalloc(cap ? cap : 1, sizeof *g->w);
    g->loc = xcalloc(cap ? cap : 1, sizeof *g->loc);
    g->crc = xcalloc(cap ? cap : 1, sizeof *g->crc);
    g->failed = xcalloc(cap ? cap : 1, sizeof *g->failed);
    g->n = 0;
    for (size_t k = 0; k < n; k++) {
        chunk *ch = (chunk *)jobs[k];
        for (size_t j = 0; j < ch->m; j++) {
            size_t i = ch->idx[j];
            if (ch->objs[i].status != MKV_OK) continue;
            g->w[g->n] = ch->objs[i];
            g->loc[g->n++] = ch->loc[i];
        }
    }
}

/* Each gathered object's outcome back into its chunk, in the order
 * leg_gather took them: status, and a write's checksum and failed node
 * or a read's length. */
static void leg_scatter(const leg_objs *g, mkv_ajob **jobs, size_t n, int write) {
    for (size_t k = 0, at = 0; k < n; k++) {
        chunk *ch = (chunk *)jobs[k];
        for (size_t j = 0; j < ch->m; j++) {
            size_t i = ch->idx[j];
            if (ch->objs[i].status != MKV_OK) continue;   /* not gathered */
            ch->objs[i].status = g->w[at].status;
            if (write) {
                ch->crc[i] = g->crc[at];
                ch->failed[i] = g->failed[at];
            } else {
                ch->objs[i].len = g->w[at].len;
            }
            at++;
        }
    }
}

static void leg_objs_free(leg_objs *g) {
    free(g->w);
    free(g->loc);
    free(g->crc);
    free(g->failed);
}

/* The data leg: every object of the chunks' idx written to its replicas
 * in one engine batch, then each chunk placed again or ended. */
static void put_write(mkv_ajob **jobs, size_t n) {
    leg_objs g;
    leg_gather(&g, jobs, n);
    mkv_write_located(((chunk *)jobs[0])->o->a->c, g.w, g.loc, g.n, g.crc, g.failed);
    leg_scatter(&g, jobs, n, 1);
    for (size_t k = 0; k < n; k++) {
        chunk *ch = (chunk *)jobs[k];
        mkv_out out;
        begin(ch, &out);
        if (put_faults(ch, &out)) put_start_add(ch, &out);
        else put_end(ch, &out);
    }
    leg_objs_free(&g);
}

static void put_ended(void *arg, redisReply *r, int code) {
    chunk *ch = arg;
    mkv_async *a = ch->o->a;
    mkv_client *c = a->c;
    int rc = code;
    if (r && ch->m == 1) {
        mkv_obj *o = &ch->objs[ch->idx[0]];
        ch->placed[ch->idx[0]] = 0;   /* published, or refused and gone on the master */
        o->status = mkv_ended_parse(c, r);
    } else if (r && r->type != REDIS_REPLY_STRING) {
        rc = mkv_bad_reply(c, PROTO_VERB_MPUTEND " PACKED", r);
    } else if (r) {
        const uint8_t *at = (const uint8_t *)r->str, *end = at + r->len;
        int broken = 0;
        for (size_t j = 0; j < ch->m; j++) {
            size_t i = ch->idx[j];
            proto_ended rec;
            if (broken || (broken = proto_ended_next(&at, end, &rec) != 0)) {
                ch->objs[i].status = mkv_bad_reply(c, PROTO_VERB_MPUTEND " PACKED", r);
                continue;
            }
            ch->placed[i] = 0;
            if (rec.err) ch->objs[i].status = mkv_ended_take(c, rec.err, rec.errlen);
        }
    }
    if (r) freeReplyObject(r);
    put_finish(ch, rc);
    mkv_async_replied(a);
}

/* ---- get ---- */

static void get_located(void *arg, redisReply *r, int code);

/* GET (MGETPACKED) for the objects of idx. */
static void get_locate(chunk *ch) {
    proto_cmd cmd;
    proto_cmd_keys_begin(&cmd, ch->m == 1 ? PROTO_VERB_GET : PROTO_VERB_MGETPACKED, ch->m);
    for (size_t j = 0; j < ch->m; j++) proto_cmd_bin(&cmd, ch->objs[ch->idx[j]].key, ch->objs[ch->idx[j]].keylen);
    mkv_out out;
    begin(ch, &out);
    send_cmd(ch, &out, &cmd, get_located);
}

static void get_start(chunk *ch) {
    mkv_client *c = ch->o->a->c;
    for (size_t i = 0; i < ch->n; i++) ch->objs[i].status = mkv_check_key(c, ch->objs[i].key, ch->objs[i].keylen);
    if (!keep_ok(ch)) return chunk_done(ch, outcome(ch, MKV_OK));
    get_locate(ch);
}

/* With op->place, object i's memory, asked once its size is known (its
 * buf was place's ctx) and only once (a second locate keeps it); NULL
 * fails it, its lease still given back after the read (get_after). */
static void get_place(chunk *ch, size_t i, uint64_t size) {
    mkv_obj *o = &ch->objs[i];
    mkv_place_fn *place = ch->o->op->place;
    if (!place || o->status != MKV_OK || ch->placed[i]) return;
    ch->placed[i] = 1;
    void *mem = place(o->buf, size);
    if (!mem) {
        o->status = mkv_fail(ch->o->a->c, MKV_ENOMEM, "no memory for an object of %llu bytes",
                             (unsigned long long)size);
        return;
    }
    o->buf = mem;
    o->len = (size_t)size;
}

/* MOON.MGETPACKED's blob: a record per object of idx, in order. */
static int get_located_packed(chunk *ch, const redisReply *r) {
    mkv_client *c = ch->o->a->c;
    if (r->type != REDIS_REPLY_STRING) return mkv_bad_reply(c, PROTO_VERB_MGETPACKED, r);
    const uint8_t *at = (const uint8_t *)r->str, *end = at + r->len;
    proto_extbuf buf = {0};
    for (size_t j = 0; j < ch->m; j++) {
        size_t i = ch->idx[j];
        proto_located rec;
        uint64_t size;
        if (proto_located_next(&at, end, &buf, &rec) != 0) {
            for (int rc = mkv_bad_reply(c, PROTO_VERB_MGETPACKED, r); j < ch->m; j++) ch->objs[ch->idx[j]].status = rc;
            break;
        }
        ch->objs[i].status = mkv_located_take(c, &rec, &ch->loc[i], &size);
        proto_located_free(&rec);
        get_place(ch, i, size);
    }
    proto_extbuf_free(&buf);
    return MKV_OK;
}

static void get_read(mkv_ajob **jobs, size_t n);

static void get_located(void *arg, redisReply *r, int code) {
    chunk *ch = arg;
    mkv_async *a = ch->o->a;
    int rc = code;
    uint64_t size;
    if (r && ch->m == 1) {
        ch->objs[ch->idx[0]].status = mkv_located_parse(a->c, r, &ch->loc[ch->idx[0]], &size);
        get_place(ch, ch->idx[0], size);
    } else if (r) {
        rc = get_located_packed(ch, r);
    }
    if (r) freeReplyObject(r);
    if (rc != MKV_OK) {
        for (size_t j = 0; j < ch->m; j++) ch->objs[ch->idx[j]].status = rc;
        chunk_done(ch, outcome(ch, rc));
    } else {
        ch->job.leg = get_read;
        ch->job.objs = ch->m;
        mkv_async_leg(a, &ch->job);
    }
    mkv_async_replied(a);
}

/* After the read of ch's objects: each lease given back, or, when it
 * ran out first, the object located again (once); else ch is done. */
static void get_after(chunk *ch) {
    mkv_async *a = ch->o->a;
    size_t again = 0;
    for (size_t j = 0; j < ch->m; j++) {
        size_t i = ch->idx[j];
        if (!ch->loc[i]) continue;
        if (ch->objs[i].status != MKV_EAUTH) {
            mkv_async_lease(a, ch->objs[i].key, ch->objs[i].keylen, mkv_located_lease(ch->loc[i]));
        } else if (ch->attempt + 1 < GET_ATTEMPTS) {
            ch->objs[i].status = MKV_OK;
            ch->idx[again++] = i;
        }
        mkv_located_free(ch->loc[i]);
        ch->loc[i] = NULL;
    }
    if (again) {
        ch->m = again;
        ch->attempt++;
        get_locate(ch);
    } else {
        chunk_done(ch, outcome(ch, MKV_OK));
    }
}

/* The data leg: every located object of the chunks read in one engine
 * batch (checksums verified, another replica after a mismatch). */
static void get_read(mkv_ajob **jobs, size_t n) {
    leg_objs g;
    leg_gather(&g, jobs, n);
    mkv_read_located(((chunk *)jobs[0])->o->a->c, g.w, g.loc, g.n);
    leg_scatter(&g, jobs, n, 0);
    for (size_t k = 0; k < n; k++) get_after((chunk *)jobs[k]);
    leg_objs_free(&g);
}

/* ---- a caller's own command (mkv_async_command) ---- */

static void cmd_replied(void *arg, redisReply *r, int code) {
    mkv_cmd_op *c = arg;
    mkv_async *a = c->face;
    c->reply = r;
    c->op.status = r ? MKV_OK : code;
    mkv_async_finish(a, &c->op);
    mkv_async_replied(a);
}

/* Its command after the face's leases, in one write. A lease flush's
 * (mkv_async_lease_flush: no words of its own) whose leases another
 * command took meanwhile has nothing to send: done, with no reply. */
static void cmd_start(mkv_async *a, mkv_cmd_op *c) {
    mkv_out *mine = c->out, out = {0};
    c->out = NULL;
    mkv_async_out(a, &out);
    mkv_out_append(&out, mine);
    mkv_out_free(mine);
    free(mine);
    if (out.count == 0) {
        c->op.status = MKV_OK;
        mkv_async_finish(a, &c->op);
        return;
    }
    mkv_async_send(a, &out, cmd_replied, c);
}

/* ---- start ---- */

static chunk *chunk_new(aop *o, mkv_obj *objs, int *results, size_t n, int replicas) {
    chunk *ch = xcalloc(1, sizeof *ch);
    ch->o = o;
    ch->objs = objs;
    ch->results = results;
    ch->n = n;
    ch->replicas = replicas;
    ch->idx = xcalloc(n, sizeof *ch->idx);
    ch->loc = xcalloc(n, sizeof *ch->loc);
    ch->placed = xcalloc(n, 1);
    ch->crc = xcalloc(n, sizeof *ch->crc);
    ch->failed = xcalloc(n, sizeof *ch->failed);
    ch->attempt = 1;
    return ch;
}

static void chunk_start(chunk *ch) {
    switch (ch->o->op->kind) {
    case MKV_OP_EXISTS:
    case MKV_OP_REMOVE:
    case MKV_OP_STAT: key_start(ch); break;
    case MKV_OP_EXISTS_BATCH: mexists_start(ch); break;
    case MKV_OP_REMOVE_BATCH: mremove_start(ch); break;
    case MKV_OP_PUT:
    case MKV_OP_PUT_BATCH: put_start(ch); break;
    default: get_start(ch); break;
    }
}

int mkv_op_is_batch(const mkv_op *op) {
    return op->kind == MKV_OP_PUT_BATCH || op->kind == MKV_OP_GET_BATCH || op->kind == MKV_OP_EXISTS_BATCH ||
           op->kind == MKV_OP_REMOVE_BATCH;
}

int mkv_op_batch_bad(const mkv_op *op) {
    return mkv_op_is_batch(op) && op->n && (!op->objs || (op->kind == MKV_OP_EXISTS_BATCH && !op->results));
}

/* What the op asks is well formed: MKV_OK, or why not. */
static int op_check(mkv_client *c, const mkv_op *op, int *replicas) {
    *replicas = op->replicas ? op->replicas : c->replicas;
    if (op->replicas < 0 || op->replicas > PROTO_MAX_REPLICAS)
        return mkv_fail(c, MKV_EINVAL, "replicas must be 0 to %d", PROTO_MAX_REPLICAS);
    return mkv_op_batch_bad(op) ? MKV_EINVAL : MKV_OK;
}

void mkv_aop_start(mkv_async *a, mkv_op *op) {
    if (op->kind == MKV_OP_COMMAND_) return cmd_start(a, (mkv_cmd_op *)op);
    int replicas, rc = op_check(a->c, op, &replicas);
    int one = !mkv_op_is_batch(op);
    size_t n = one ? 1 : op->n, chunks = (n + PROTO_MAX_BATCH - 1) / PROTO_MAX_BATCH;
    if (rc != MKV_OK || chunks == 0) {
        op->status = rc;
        mkv_async_finish(a, op);
        return;
    }
    aop *o = xcalloc(1, sizeof *o);
    *o = (aop){.a = a, .op = op, .parts = (int)chunks};
    for (size_t at = 0; at < n; at += PROTO_MAX_BATCH) {
        size_t k = n - at < PROTO_MAX_BATCH ? n - at : PROTO_MAX_BATCH;
        chunk *ch = chunk_new(o, one ? NULL : op->objs + at, op->results ? op->results + at : NULL, k, replicas);
        if (one) {
            ch->one = (mkv_obj){.key = op->key, .keylen = op->keylen, .buf = op->buf, .len = op->len};
            ch->objs = &ch->one;
        }
        chunk_start(ch);
    }
}
