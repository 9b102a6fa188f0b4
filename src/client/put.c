/* client/put.c - writing objects: place (PUTSTART), write every replica
 * from the caller's registered buffer, then publish with the checksum
 * (PUTEND). A put whose transfer fails is revoked so its key and space
 * come back at once instead of after the put timeout.
 *
 * A node can die between its last heartbeat and the master noticing
 * (node_timeout_ms): a write that cannot reach a placed node tells the
 * master the node is suspect (MOON.SUSPECT), revokes the put and places
 * it again, on other nodes, up to MKV_PUT_ATTEMPTS times. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "core/crc32c.h"
#include "core/util.h"
#include "proto/ended.h"
#include "proto/replies.h"

typedef struct put_item {
    mkv_obj *o;
    mkv_placement pl;
    int placed;                /* holds a pending object on the master */
    uint32_t failed_node;      /* the node whose fault failed the write, 0 if none */
    int crc_ok;                /* crc computed while the bytes were written */
    uint32_t crc;
    proto_slices sl;           /* per-slice CRCs for PUTEND (count 0: none) */
    int want_slices;           /* PUTEND with slice CRCs if the object has several */
    const mkv_iov *iov;        /* the value in pieces (vec.c); niov 0: o->buf */
    size_t niov;
} put_item;

/* The item's pieces: its own, or o->buf as one (in *one). */
static const mkv_iov *item_pieces(const put_item *it, mkv_iov *one, size_t *n) {
    if (it->niov) {
        *n = it->niov;
        return it->iov;
    }
    *one = (mkv_iov){it->o->buf, it->o->len};
    *n = 1;
    return one;
}

/* v: the object's pieces, or NULL when it is o->buf. */
int mkv_put_check(mkv_client *c, const mkv_obj *o, const mkv_objv *v) {
    int rc = mkv_check_key(c, o->key, o->keylen);
    if (rc != MKV_OK) return rc;
    if (o->len == 0) return mkv_fail(c, MKV_EINVAL, "objects are at least 1 byte");
    if (v) return mkv_pieces_check(c, v->iov, v->niov, o->len);
    if (!o->buf || !mkv_registered(c, o->buf, o->len))
        return mkv_fail(c, MKV_ENOTREG, "buffer is not inside a registered region");
    return MKV_OK;
}

/* A placement from one PACKED record, or the master's refusal. */
static int placed_record(mkv_client *c, const proto_placed *r, mkv_placement *pl) {
    memset(pl, 0, sizeof *pl);
    if (r->err) return mkv_reply_error(c, r->err, r->errlen);
    mkv_placement_take_own(pl, r);
    return MKV_OK;
}

/* MOON.MPUTSTART PACKED's blob: a record per item, in order. A record
 * that does not decode fails it and the rest (EPROTO), unplaced here:
 * what the master placed for them ends with the put timeout. */
static int put_start_packed(mkv_client *c, put_item *it, size_t n, const redisReply *r) {
    if (r->type != REDIS_REPLY_STRING) return mkv_bad_reply(c, PROTO_VERB_MPUTSTART " PACKED", r);
    const uint8_t *at = (const uint8_t *)r->str, *end = at + r->len;
    proto_extbuf buf = {0};
    for (size_t i = 0; i < n; i++) {
        proto_placed rec;
        if (proto_placed_next(&at, end, it[i].o->len, TE_CAP_WRITE, &buf, &rec) != 0) {
            for (int rc = mkv_bad_reply(c, PROTO_VERB_MPUTSTART " PACKED", r); i < n; i++) it[i].o->status = rc;
            break;
        }
        it[i].placed = rec.err == NULL;
        it[i].o->status = placed_record(c, &rec, &it[i].pl);
    }
    proto_extbuf_free(&buf);
    return MKV_OK;
}

/* MOON.PUTSTART key size REPLICAS n, or MOON.MPUTSTART REPLICAS n PACKED
 * key size ... (one bulk string to parse, not a dozen reply objects per
 * key). */
static int put_start(mkv_client *c, put_item *it, size_t n, int replicas) {
    proto_cmd cmd;
    if (n == 1) {
        proto_cmd_putstart(&cmd, it->o->key, it->o->keylen, it->o->len, replicas);
    } else {
        proto_cmd_mputstart_begin(&cmd, replicas, n);
        for (size_t i = 0; i < n; i++) proto_cmd_mputstart_add(&cmd, it[i].o->key, it[i].o->keylen, it[i].o->len);
    }
    int rc;
    redisReply *r = mkv_cmd_run(c, &cmd, &rc);
    if (!r) return rc;
    if (n > 1) {
        rc = put_start_packed(c, it, n, r);
        freeReplyObject(r);
        return rc;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        it->o->status = mkv_reply_error(c, r->str, r->len);
    } else {
        /* Placed, even if the reply turns out malformed: revoke then. */
        it->placed = 1;
        it->o->status = mkv_placement_decode(c, r, it->o->len, TE_CAP_WRITE, &it->pl);
    }
    freeReplyObject(r);
    return MKV_OK;
}

/* An object of several slices that wants their CRCs asks the engine for
 * them with its sum (one transfer: the units' sums combined, no second
 * pass over the bytes); room for them in it->sl. 1 if asked. */
static int ask_slices(put_item *it, int count) {
    proto_slices_free(&it->sl);   /* a placement again after a node's fault */
    uint64_t slice = it->want_slices && count == 1 ? proto_slice_choose(it->o->len) : 0;
    if (!slice) return 0;
    uint64_t n = proto_slice_count(it->o->len, slice);
    it->sl = (proto_slices){slice, (uint32_t)n, xcalloc(n, sizeof(uint32_t))};
    return 1;
}

/* Write every placed object's replicas in one engine batch: a transfer
 * per object, or per piece of one held in pieces. */
static int put_transfer(mkv_client *c, put_item *it, size_t n) {
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) cap += it[i].niov ? it[i].niov : 1;
    mkv_xfer *x = xcalloc(cap ? cap : 1, sizeof *x);
    mkv_placement *clips = xcalloc(cap ? cap : 1, sizeof *clips);
    int *count = xcalloc(n ? n : 1, sizeof *count);
    size_t nx = 0;
    for (size_t i = 0; i < n; i++) {
        if (it[i].o->status != MKV_OK) continue;
        if ((it[i].o->status = mkv_topology_cover(c, &it[i].pl)) != MKV_OK) continue;
        mkv_iov one;
        size_t np;
        const mkv_iov *p = item_pieces(&it[i], &one, &np);
        count[i] = mkv_pieces_xfers(c, p, np, &it[i].pl, -1, x + nx, clips + nx);
        if (count[i] < 0) it[i].o->status = count[i];
        else if (ask_slices(&it[i], count[i])) x[nx++].sl = &it[i].sl;
        else nx += (size_t)count[i];
    }
    int rc = nx ? mkv_xfer_run(c, TE_WRITE, x, nx) : MKV_OK;
    for (size_t i = 0, j = 0; i < n; i++) {
        if (it[i].o->status != MKV_OK || count[i] <= 0) continue;
        mkv_xfer out;
        mkv_pieces_fold(x + j, count[i], &out);
        it[i].o->status = rc != MKV_OK ? rc : out.status;
        it[i].failed_node = rc != MKV_OK ? 0 : out.failed_node;
        /* slices asked and not had: summed in a pass, slices and all (put_sums) */
        it[i].crc_ok = out.crc_ok && (it[i].sl.count == 0 || x[j].slices_ok);
        if (!it[i].crc_ok) proto_slices_free(&it[i].sl);
        it[i].crc = out.crc;
        j += (size_t)count[i];
    }
    for (size_t j = 0; j < cap; j++) {
        mkv_placement_free(&clips[j]);
        free(x[j].segs);
    }
    free(clips);
    free(count);
    free(x);
    return MKV_OK;
}

/* The slice CRCs of an object of several slices, summed in the pass
 * that checks it; the whole checksum combined from them. */
static uint32_t put_slices(mkv_client *c, put_item *it, uint64_t slice) {
    uint64_t count = proto_slice_count(it->o->len, slice);
    it->sl = (proto_slices){slice, (uint32_t)count, xcalloc(count, sizeof(uint32_t))};
    if (it->niov) return mkv_pieces_slices(c, it->iov, it->niov, it->o->len, &it->sl);
    return mkv_checksum_slices(c, it->o->buf, it->o->len, &it->sl);
}

/* sums[j]: the checksum of the j-th of the m written items (the one the
 * engine computed on the way out when it has it, with its slices' when
 * asked: put_transfer). With want_slices, an object of several slices
 * that needs a pass gets its slice CRCs from it. */
static void put_sums(mkv_client *c, put_item *it, size_t n, size_t m, uint32_t *sums, int want_slices) {
    mkv_span_sum *s = xcalloc(m ? m : 1, sizeof *s);
    mkv_iov *ones = xcalloc(m ? m : 1, sizeof *ones);
    for (size_t i = 0, j = 0; i < n; i++) {
        if (it[i].o->status != MKV_OK) continue;
        int sliced = want_slices && !it[i].crc_ok && proto_slice_choose(it[i].o->len);
        s[j].iov = item_pieces(&it[i], &ones[j], &s[j].niov);
        s[j++].len = it[i].crc_ok || sliced ? 0 : it[i].o->len;   /* 0: summed elsewhere */
    }
    mkv_pieces_sums(c, s, m);
    for (size_t j = 0; j < m; j++) sums[j] = s[j].crc;
    free(s);
    free(ones);
    for (size_t i = 0, j = 0; i < n; i++) {
        if (it[i].o->status != MKV_OK) continue;
        uint64_t slice = want_slices && !it[i].crc_ok ? proto_slice_choose(it[i].o->len) : 0;
        if (it[i].crc_ok) sums[j] = it[i].crc;
        else if (slice) sums[j] = put_slices(c, &it[i], slice);
        j++;
    }
}

/* An item's slice arguments: its packed CRCs into *packed (freed by the
 * caller after the send); size 0 without. */
static proto_slices_arg slice_args(const put_item *it, uint8_t **packed) {
    *packed = xmalloc(it->sl.count ? (size_t)it->sl.count * 4 : 1);
    proto_slices_pack(&it->sl, *packed);
    return (proto_slices_arg){.size = it->sl.count ? it->sl.size : 0, .packed = *packed,
                              .len = (size_t)it->sl.count * 4};
}

/* MOON.PUTEND's reply, or MOON.MPUTEND [SLICES]'s array: an element per
 * written item (m of them). */
static int put_ended(mkv_client *c, put_item *it, size_t n, size_t m, const redisReply *r) {
    if (m > 1 && !mkv_reply_item(r, m, 0)) return mkv_bad_reply(c, PROTO_VERB_MPUTEND, r);
    for (size_t i = 0, j = 0; i < n; i++) {
        if (it[i].o->status != MKV_OK) continue;
        const redisReply *e = mkv_reply_item(r, m, j++);
        it[i].placed = 0;   /* published, or refused and gone on the master */
        if (e->type == REDIS_REPLY_ERROR) it[i].o->status = mkv_reply_error(c, e->str, e->len);
        else if (e->type != REDIS_REPLY_STATUS) it[i].o->status = mkv_bad_reply(c, "PUTEND", e);
    }
    return MKV_OK;
}

/* MOON.MPUTEND PACKED's blob: a record per written item, in order. One
 * that does not decode fails it and the rest (EPROTO), still placed:
 * revoked then, as the array form's malformed element. */
static int put_ended_packed(mkv_client *c, put_item *it, size_t n, const redisReply *r) {
    if (r->type != REDIS_REPLY_STRING) return mkv_bad_reply(c, PROTO_VERB_MPUTEND " PACKED", r);
    const uint8_t *at = (const uint8_t *)r->str, *end = at + r->len;
    int broken = 0;
    for (size_t i = 0; i < n; i++) {
        if (it[i].o->status != MKV_OK) continue;
        proto_ended rec;
        if (broken || (broken = proto_ended_next(&at, end, &rec) != 0)) {
            it[i].o->status = mkv_bad_reply(c, PROTO_VERB_MPUTEND " PACKED", r);
            continue;
        }
        it[i].placed = 0;   /* published, or refused and gone on the master */
        if (rec.err) it[i].o->status = mkv_reply_error(c, rec.err, rec.errlen);
    }
    return MKV_OK;
}

/* MOON.PUTEND key crc, or MOON.MPUTEND key crc ... for the written ones. */
static int put_end(mkv_client *c, put_item *it, size_t n) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += it[i].o->status == MKV_OK;
    if (m == 0) return MKV_OK;
    uint32_t *sums = xcalloc(m, sizeof *sums);
    put_sums(c, it, n, m, sums, 1);
    int sliced = 0;
    for (size_t i = 0; i < n; i++) sliced |= it[i].sl.count > 0;
    /* MOON.PUTEND key crc [SLICES size crcs] / MOON.MPUTEND [SLICES] key crc [size crcs] ... */
    uint8_t **packed = xcalloc(m, sizeof *packed);
    proto_cmd cmd;
    if (m > 1) proto_cmd_mputend_begin(&cmd, sliced, m);
    for (size_t i = 0, j = 0; i < n; i++) {
        if (it[i].o->status != MKV_OK) continue;
        proto_slices_arg sl = {0};
        if (sliced) sl = slice_args(&it[i], &packed[j]);
        if (m == 1) proto_cmd_putend(&cmd, it[i].o->key, it[i].o->keylen, sums[j], &sl);
        else proto_cmd_mputend_add(&cmd, it[i].o->key, it[i].o->keylen, sums[j], &sl);
        j++;
    }
    free(sums);
    int rc;
    redisReply *r = mkv_cmd_run(c, &cmd, &rc);
    for (size_t j = 0; j < m; j++) free(packed[j]);
    free(packed);
    if (!r) return rc;
    rc = m > 1 && !sliced ? put_ended_packed(c, it, n, r) : put_ended(c, it, n, m, r);
    freeReplyObject(r);
    return rc;
}

/* PUTREVOKE every put that was placed but not published, pipelined.
 * Best effort: the master revokes it anyway when its put timeout ends. */
static void put_revoke(mkv_client *c, put_item *it, size_t n) {
    mkv_out out = {0};
    for (size_t i = 0; i < n; i++) {
        if (!it[i].placed) continue;
        proto_cmd cmd;
        proto_cmd_key(&cmd, PROTO_VERB_PUTREVOKE, it[i].o->key, it[i].o->keylen);
        mkv_out_add(&out, cmd.argc, cmd.argv, cmd.lens);
        proto_cmd_free(&cmd);
    }
    char why[MKV_ERR_LEN];   /* the put's failure stays the one told */
    snprintf(why, sizeof why, "%s", mkv_last_error(c));
    int code, sent;
    redisReply *r = out.count ? mkv_link_call(c, &out, &code, &sent, NULL) : NULL;
    if (r) freeReplyObject(r);
    else if (out.count) mkv_fail(c, MKV_EIO, "%s", why);
    mkv_out_free(&out);
}

/* ---- placing again around a failed node ---- */

/* MOON.SUSPECT for the nodes that failed these writes. Best effort: an
 * older master without the command only makes the retry less likely to
 * avoid the node. */
static void report_suspects(mkv_client *c, const put_item *it, size_t n) {
    proto_cmd cmd;
    proto_cmd_suspect_begin(&cmd, PROTO_MAX_SUSPECTS);
    uint32_t seen[PROTO_MAX_SUSPECTS];
    int nseen = 0;
    for (size_t i = 0; i < n && nseen < PROTO_MAX_SUSPECTS; i++) {
        int dup = 0;
        for (int k = 0; k < nseen && !dup; k++) dup = seen[k] == it[i].failed_node;
        if (dup) continue;
        seen[nseen++] = it[i].failed_node;
        proto_cmd_u64(&cmd, it[i].failed_node);
    }
    int rc;
    redisReply *r = mkv_cmd_run(c, &cmd, &rc);
    if (r) freeReplyObject(r);
}

static void gather(put_item *sub, const put_item *it, const size_t *idx, size_t k) {
    for (size_t j = 0; j < k; j++) sub[j] = it[idx[j]];
}

static void scatter(put_item *it, const put_item *sub, const size_t *idx, size_t k) {
    for (size_t j = 0; j < k; j++) it[idx[j]] = sub[j];
}

/* Keeps in idx the items a node's fault failed; returns how many. */
static size_t node_faults(const put_item *it, size_t *idx, size_t k) {
    size_t w = 0;
    for (size_t j = 0; j < k; j++)
        if (it[idx[j]].o->status != MKV_OK && it[idx[j]].failed_node) idx[w++] = idx[j];
    return w;
}

/* Report, revoke and forget the placements of sub, so they can be placed
 * again from scratch. */
static void release_for_retry(mkv_client *c, put_item *sub, size_t k) {
    report_suspects(c, sub, k);
    put_revoke(c, sub, k);
    for (size_t j = 0; j < k; j++) {
        mkv_placement_free(&sub[j].pl);
        memset(&sub[j].pl, 0, sizeof sub[j].pl);
        sub[j].placed = 0;
        sub[j].failed_node = 0;
        sub[j].o->status = MKV_OK;
    }
}

/* PUTSTART and the transfers of every item, placing again those whose
 * write a node's fault failed (bounded). */
static int put_place_and_write(mkv_client *c, put_item *it, size_t n, int replicas) {
    put_item *sub = xcalloc(n, sizeof *sub);
    size_t *idx = xcalloc(n, sizeof *idx);
    size_t k = n;
    for (size_t i = 0; i < n; i++) idx[i] = i;
    int rc = MKV_OK;
    for (int attempt = 1;; attempt++) {
        gather(sub, it, idx, k);
        rc = put_start(c, sub, k, replicas);
        if (rc == MKV_OK) rc = put_transfer(c, sub, k);
        scatter(it, sub, idx, k);
        if (rc != MKV_OK || attempt == MKV_PUT_ATTEMPTS) break;
        if ((k = node_faults(it, idx, k)) == 0) break;
        gather(sub, it, idx, k);
        release_for_retry(c, sub, k);
        scatter(it, sub, idx, k);
    }
    free(sub);
    free(idx);
    return rc;
}

/* vec (or NULL): the pieces of objs[i] are vec[i]'s. */
static int put_run(mkv_client *c, mkv_obj *objs, const mkv_objv *vec, size_t n, int replicas) {
    put_item *it = xcalloc(n, sizeof *it);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const mkv_iov *iov = vec ? vec[i].iov : NULL;
        size_t niov = vec ? vec[i].niov : 0;
        objs[i].status = mkv_put_check(c, &objs[i], vec ? &vec[i] : NULL);
        if (objs[i].status == MKV_OK) it[m++] = (put_item){.o = &objs[i], .iov = iov, .niov = niov, .want_slices = 1};
    }
    int rc = m ? put_place_and_write(c, it, m, replicas) : MKV_OK;
    if (rc == MKV_OK) rc = put_end(c, it, m);
    put_revoke(c, it, m);
    for (size_t i = 0; i < m; i++) {
        if (rc != MKV_OK && it[i].o->status == MKV_OK) it[i].o->status = rc;
        mkv_placement_free(&it[i].pl);
        proto_slices_free(&it[i].sl);
    }
    free(it);
    return rc;
}

static int replica_count(mkv_client *c, int replicas, int *out) {
    if (replicas < 0 || replicas > PROTO_MAX_REPLICAS)
        return mkv_fail(c, MKV_EINVAL, "replicas must be 0 to %d", PROTO_MAX_REPLICAS);
    *out = replicas ? replicas : c->replicas;
    return MKV_OK;
}

int mkv_put(mkv_client *c, const void *key, size_t keylen, const void *buf, size_t len,
            int replicas) {
    if (!c) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_put(c, key, keylen, buf, len, replicas));
    MKV_ON_LANE(c);
    int reps = 1, rc = replica_count(c, replicas, &reps);
    if (rc != MKV_OK) return rc;
    /* The engine only reads a put's buffer; mkv_obj's is shared with gets. */
    mkv_obj o = {.key = key, .keylen = keylen, .buf = (void *)buf, .len = len};
    rc = put_run(c, &o, NULL, 1, reps);
    return rc != MKV_OK ? rc : o.status;
}

int mkv_put_batch(mkv_client *c, mkv_obj *objs, size_t n, int replicas) {
    if (!c || (!objs && n)) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_put_batch(c, objs, n, replicas));
    MKV_ON_LANE(c);
    int reps = 1, rc = replica_count(c, replicas, &reps);
    for (size_t i = 0; rc == MKV_OK && i < n; i += PROTO_MAX_BATCH)
        rc = put_run(c, objs + i, NULL, n - i < PROTO_MAX_BATCH ? n - i : PROTO_MAX_BATCH, reps);
    return rc;
}

int mkv_put_batchv(mkv_client *c, mkv_objv *objs, size_t n, int replicas) {
    if (!c || (!objs && n)) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_put_batchv(c, objs, n, replicas));
    MKV_ON_LANE(c);
    int reps = 1, rc = replica_count(c, replicas, &reps);
    mkv_obj *o = xcalloc(n ? n : 1, sizeof *o);
    for (size_t i = 0; i < n; i++) {
        o[i] = (mkv_obj){.key = objs[i].key, .keylen = objs[i].keylen,
                         .len = objs[i].iov && objs[i].niov <= MKV_MAX_PIECES
                                    ? (size_t)mkv_pieces_len(objs[i].iov, objs[i].niov) : 0};
        objs[i].len = o[i].len;
    }
    for (size_t i = 0; rc == MKV_OK && i < n; i += PROTO_MAX_BATCH)
        rc = put_run(c, o + i, objs + i, n - i < PROTO_MAX_BATCH ? n - i : PROTO_MAX_BATCH, reps);
    for (size_t i = 0; i < n; i++) objs[i].status = rc != MKV_OK && o[i].status == MKV_OK ? rc : o[i].status;
    free(o);
    return rc;
}

/* ---- split puts (moonkv_internal.h) ---- */

int mkv_placed_parse(mkv_client *c, const redisReply *r, uint64_t size, mkv_located **out) {
    *out = NULL;
    if (!c || !r) return MKV_EINVAL;
    if (r->type == REDIS_REPLY_ERROR) return mkv_reply_error(c, r->str, r->len);
    mkv_placement pl;
    int rc = mkv_placement_decode(c, r, size, TE_CAP_WRITE, &pl);
    if (rc == MKV_OK) *out = mkv_located_wrap(&pl);
    else mkv_placement_free(&pl);
    return rc;
}

int mkv_placed_take(mkv_client *c, const proto_placed *r, mkv_located **out) {
    *out = NULL;
    if (!c || !r) return MKV_EINVAL;
    if (r->err) return mkv_reply_error(c, r->err, r->errlen);
    *out = mkv_located_of(r);
    return MKV_OK;
}

int mkv_ended_parse(mkv_client *c, const redisReply *r) {
    if (!c || !r) return MKV_EINVAL;
    if (r->type == REDIS_REPLY_ERROR) return mkv_reply_error(c, r->str, r->len);
    return proto_dec_ok(r) == 0 ? MKV_OK : mkv_bad_reply(c, PROTO_VERB_MPUTEND, r);
}

int mkv_ended_take(mkv_client *c, const char *err, size_t errlen) {
    if (!c || !err) return MKV_EINVAL;
    return mkv_reply_error(c, err, errlen);
}

int mkv_write_located(mkv_client *c, mkv_obj *objs, mkv_located *const *loc, size_t n,
                      uint32_t *crc, uint32_t *failed_node) {
    if (!c || (!objs && n)) return MKV_EINVAL;
    MKV_ON_LANE(c);
    put_item *it = xcalloc(n ? n : 1, sizeof *it);
    for (size_t i = 0; i < n; i++) {
        it[i] = (put_item){.o = &objs[i], .pl = *mkv_located_placement(loc[i])};
        objs[i].status = mkv_put_check(c, &objs[i], NULL);
    }
    put_transfer(c, it, n);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += objs[i].status == MKV_OK;
    uint32_t *sums = xcalloc(m ? m : 1, sizeof *sums);
    put_sums(c, it, n, m, sums, 0);
    for (size_t i = 0, j = 0; i < n; i++) {
        failed_node[i] = it[i].failed_node;
        crc[i] = objs[i].status == MKV_OK ? sums[j++] : 0;
    }
    free(sums);
    free(it);
    return MKV_OK;
}

size_t mkv_write_located_now(mkv_client *c, mkv_obj *objs, mkv_located *const *loc, size_t n, uint32_t *crc) {
    if (!c || n == 0) return 0;
    MKV_ON_LANE(c);
    mkv_xfer *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        const mkv_placement *pl = mkv_located_placement(loc[i]);
        /* a value not of the placed size: no object (the engine refuses it), the usual write says why */
        x[i] = (mkv_xfer){.buf = pl->size == objs[i].len ? objs[i].buf : NULL, .pl = pl, .replica = -1};
    }
    mkv_xfer_now(c, TE_WRITE, x, n);
    size_t done = 0;
    for (size_t i = 0; i < n; i++) {
        int ok = x[i].status == MKV_OK && x[i].crc_ok;
        objs[i].status = ok ? MKV_OK : MKV_PENDING;
        crc[i] = ok ? x[i].crc : 0;
        done += (size_t)ok;
    }
    free(x);
    return done;
}

int mkv_write_located_range(mkv_client *c, const mkv_located *loc, const void *buf, uint64_t off,
                            uint64_t len, uint32_t *crc, uint32_t *failed_node) {
    *crc = 0;
    *failed_node = 0;
    if (!c || !loc || !buf || len == 0) return MKV_EINVAL;
    MKV_ON_LANE(c);
    const mkv_placement *whole = mkv_located_placement(loc);
    if (off > whole->size || len > whole->size - off)
        return mkv_fail(c, MKV_EINVAL, "range past the object's %llu bytes", (unsigned long long)whole->size);
    mkv_placement pl;
    int rc = mkv_placement_clip(c, whole, off, len, &pl);
    if (rc == MKV_OK) rc = mkv_topology_cover(c, whole);
    mkv_xfer x = {.buf = (void *)buf, .pl = &pl, .replica = -1};
    if (rc == MKV_OK) rc = mkv_xfer_run(c, TE_WRITE, &x, 1);
    if (rc == MKV_OK) rc = x.status;
    if (rc == MKV_OK) *crc = x.crc_ok ? x.crc : crc32c(0, buf, (size_t)len);
    else *failed_node = x.failed_node;
    mkv_placement_free(&pl);
    return rc;
}

void mkv_revoke(mkv_client *c, const void *key, size_t keylen) {
    if (!c) return;
    MKV_ON_LANE(c);
    mkv_obj o = {.key = key, .keylen = keylen};
    put_item it = {.o = &o, .placed = 1};
    put_revoke(c, &it, 1);
}
