/* client/get.c - reading objects: locate (MOON.GET, which also leases
 * the bytes so they are not reused while we read), read one replica into
 * the caller's registered buffer, verify the checksum (the one the engine
 * computed during the copy when it has it, else a pass over the bytes),
 * and on a mismatch read another replica. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "core/crc32c.h"
#include "core/util.h"

typedef struct get_item {
    mkv_obj *o;
    mkv_placement pl;
    int replica;               /* -1: the engine picks; after a bad checksum each one alone */
    const mkv_iov *iov;        /* where the object goes in pieces (vec.c); niov 0: o->buf */
    size_t niov;
} get_item;

/* The item's pieces: its own, or o->buf as one (in *one) of the object's size. */
static const mkv_iov *item_pieces(const get_item *g, mkv_iov *one, size_t *n) {
    if (g->niov) {
        *n = g->niov;
        return g->iov;
    }
    *one = (mkv_iov){g->o->buf, (size_t)g->pl.size};
    *n = 1;
    return one;
}

/* A placement from one MOON.MGETPACKED record (its slices taken), or
 * ENOTFOUND for a missing key. */
static int located_record(mkv_client *c, proto_located *r, mkv_placement *pl) {
    memset(pl, 0, sizeof *pl);
    if (!r->found) return mkv_fail(c, MKV_ENOTFOUND, "no such object");
    mkv_placement_take_own(pl, &r->rep);
    pl->crc = r->crc;
    pl->slices = r->slices;
    r->slices = (proto_slices){0};   /* pl's now */
    return MKV_OK;
}

/* MOON.MGETPACKED's blob: a record per item, in order. A record that
 * does not decode fails it and the rest (EPROTO); their leases, if
 * taken, expire. */
static int get_locate_packed(mkv_client *c, get_item *it, size_t n, const redisReply *r) {
    if (r->type != REDIS_REPLY_STRING) return mkv_bad_reply(c, PROTO_VERB_MGETPACKED, r);
    const uint8_t *at = (const uint8_t *)r->str, *end = at + r->len;
    proto_extbuf buf = {0};
    for (size_t i = 0; i < n; i++) {
        proto_located rec;
        if (proto_located_next(&at, end, &buf, &rec) != 0) {
            for (int rc = mkv_bad_reply(c, PROTO_VERB_MGETPACKED, r); i < n; i++) it[i].o->status = rc;
            break;
        }
        it[i].o->status = located_record(c, &rec, &it[i].pl);
        proto_located_free(&rec);
    }
    proto_extbuf_free(&buf);
    return MKV_OK;
}

/* MOON.GET key, or MOON.MGETPACKED key ... (one bulk string to parse,
 * not a dozen reply objects per key); decodes each placement. mw (or
 * NULL) runs while the reply is on its way. */
static int get_locate(mkv_client *c, get_item *it, size_t n, mkv_meanwhile *mw) {
    proto_cmd cmd;
    proto_cmd_keys_begin(&cmd, n == 1 ? PROTO_VERB_GET : PROTO_VERB_MGETPACKED, n);
    for (size_t i = 0; i < n; i++) proto_cmd_bin(&cmd, it[i].o->key, it[i].o->keylen);
    int rc;
    redisReply *r = mkv_cmd_run_meanwhile(c, &cmd, &rc, mw);
    if (!r) return rc;
    if (n > 1) rc = get_locate_packed(c, it, n, r);
    else it->o->status = mkv_located_decode(c, r, &it->pl);
    freeReplyObject(r);
    return rc;
}

static int check_fit(mkv_client *c, get_item *it) {
    mkv_obj *o = it->o;
    uint64_t size = it->pl.size;
    size_t buflen = o->len;
    o->len = (size_t)size;
    if (size > buflen)
        return mkv_fail(c, MKV_ETOOSMALL, "object is %llu bytes, buffer %zu",
                        (unsigned long long)size, buflen);
    if (it->niov) {
        int rc = mkv_pieces_check(c, it->iov, it->niov, size);
        return rc != MKV_OK ? rc : mkv_topology_cover(c, &it->pl);
    }
    if (!o->buf || !mkv_registered(c, o->buf, (size_t)size))
        return mkv_fail(c, MKV_ENOTREG, "buffer is not inside a registered region");
    return mkv_topology_cover(c, &it->pl);
}

/* After a checksum mismatch, which replica to read next (alone), or
 * ECORRUPT when none is left. */
static void next_replica(mkv_client *c, get_item *g) {
    if (++g->replica < (int)g->pl.nreplicas) return;
    g->o->status = mkv_fail(c, MKV_ECORRUPT, "checksum mismatch on every replica");
}

/* Whether g's object keeps slice CRCs that must be checked here (none
 * when the engine summed its bytes on the way in). */
static int check_sliced(const get_item *g, const mkv_xfer *x) {
    return g->pl.slices.count && !(x->status == MKV_OK && x->crc_ok);
}

/* The bytes read for g checked slice by slice against its slice CRCs
 * (which the master checked to combine to the whole one). */
static int slices_match(mkv_client *c, const get_item *g) {
    const proto_slices *want = &g->pl.slices;
    proto_slices got = {want->size, want->count, xcalloc(want->count, sizeof(uint32_t))};
    if (g->niov) mkv_pieces_slices(c, g->iov, g->niov, g->pl.size, &got);
    else mkv_checksum_slices(c, g->o->buf, g->pl.size, &got);
    int ok = memcmp(got.crc, want->crc, (size_t)want->count * sizeof(uint32_t)) == 0;
    free(got.crc);
    return ok;
}

/* One engine batch over the items still MKV_PENDING; *again when some
 * failed its checksum and has another replica to try. */
/* The engine batch of one round: a transfer per pending item, or per
 * piece of one read into pieces; x[j] the outcome of item idx[j]. */
static size_t round_xfers(mkv_client *c, get_item *it, size_t n, size_t *idx, mkv_xfer *x) {
    size_t cap = 0, ni = 0, nx = 0;
    for (size_t i = 0; i < n; i++)
        if (it[i].o->status == MKV_PENDING) cap += it[i].niov ? it[i].niov : 1;
    mkv_xfer *px = xcalloc(cap ? cap : 1, sizeof *px);
    mkv_placement *clips = xcalloc(cap ? cap : 1, sizeof *clips);
    int *count = xcalloc(n ? n : 1, sizeof *count);
    for (size_t i = 0; i < n; i++) {
        if (it[i].o->status != MKV_PENDING) continue;
        mkv_iov one;
        size_t np;
        const mkv_iov *p = item_pieces(&it[i], &one, &np);
        count[ni] = mkv_pieces_xfers(c, p, np, &it[i].pl, it[i].replica, px + nx, clips + nx);
        if (count[ni] < 0) {
            it[i].o->status = count[ni];
            continue;
        }
        nx += (size_t)count[ni];
        idx[ni++] = i;
    }
    int rc = nx ? mkv_xfer_run(c, TE_READ, px, nx) : MKV_OK;
    for (size_t j = 0, at = 0; j < ni; at += (size_t)count[j], j++) {
        mkv_pieces_fold(px + at, count[j], &x[j]);
        if (rc != MKV_OK) x[j].status = rc;
    }
    for (size_t j = 0; j < cap; j++) {
        mkv_placement_free(&clips[j]);
        free(px[j].segs);
    }
    free(clips);
    free(count);
    free(px);
    return ni;
}

static int get_round(mkv_client *c, get_item *it, size_t n, int *again) {
    mkv_xfer *x = xcalloc(n ? n : 1, sizeof *x);
    size_t *idx = xcalloc(n ? n : 1, sizeof *idx);
    size_t nx = round_xfers(c, it, n, idx, x);
    int rc = MKV_OK;
    mkv_span_sum *s = xcalloc(nx ? nx : 1, sizeof *s);
    mkv_iov *ones = xcalloc(nx ? nx : 1, sizeof *ones);
    for (size_t j = 0; j < nx; j++) {
        s[j].iov = item_pieces(&it[idx[j]], &ones[j], &s[j].niov);
        /* 0: not read, or checksummed already on the way in (shm map mode) */
        s[j].len = x[j].status == MKV_OK && !x[j].crc_ok && !check_sliced(&it[idx[j]], &x[j])
                       ? it[idx[j]].pl.size : 0;
    }
    mkv_pieces_sums(c, s, nx);
    uint32_t *sums = xcalloc(nx ? nx : 1, sizeof *sums);
    for (size_t j = 0; j < nx; j++) sums[j] = x[j].status == MKV_OK && x[j].crc_ok ? x[j].crc : s[j].crc;
    free(s);
    free(ones);
    *again = 0;
    for (size_t j = 0; j < nx; j++) {
        get_item *g = &it[idx[j]];
        int ok = x[j].status == MKV_OK &&
                 (check_sliced(g, &x[j]) ? slices_match(c, g) : sums[j] == g->pl.crc);
        if (ok) g->o->status = MKV_OK;
        else if (x[j].status != MKV_OK && g->replica < 0) g->o->status = x[j].status;
        else next_replica(c, g);   /* corrupt, or a retry replica failed: the next one */
        *again |= g->o->status == MKV_PENDING;
    }
    free(x);
    free(idx);
    free(sums);
    return rc;
}

/* Memory for an object only located now (mkv_get_placed). */
static int place_buffer(mkv_client *c, get_item *it, const mkv_pobj *p) {
    void *buf = p->place(p->ctx, it->pl.size);
    if (!buf)
        return mkv_fail(c, MKV_ENOMEM, "no memory for an object of %llu bytes",
                        (unsigned long long)it->pl.size);
    it->o->buf = buf;
    it->o->len = (size_t)it->pl.size;
    return MKV_OK;
}

/* Whether pl names disk records (read from the nodes' disks: an
 * object with no DRAM replica, docs/SSD_TIER.md). */
static int placed_on_disk(const mkv_placement *pl) {
    return pl->nreplicas && pl->replicas[0].nextents && (pl->replicas[0].extents[0].cap.rights & TE_CAP_DISK);
}

/* A read that failed over late (its node stalled) may find the read
 * leases from MOON.GET expired: the nodes refuse it (EAUTH). A record
 * read from a node's disk may be gone meanwhile (promoted into DRAM by
 * another reader, removed, or dropped for a failed CRC). Those items are
 * located again, once, and read again (or a miss). */
static int get_relocate_expired(mkv_client *c, get_item *it, size_t m) {
    get_item *re = xcalloc(m ? m : 1, sizeof *re);
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        int disk_gone = it[i].o->status == MKV_EIO && placed_on_disk(&it[i].pl);
        if (it[i].o->status != MKV_EAUTH && !disk_gone) continue;
        mkv_placement_free(&it[i].pl);
        memset(&it[i].pl, 0, sizeof it[i].pl);
        re[k++].o = it[i].o;
    }
    int rc = k ? get_locate(c, re, k, NULL) : MKV_OK;
    for (size_t i = 0, j = 0; i < m && j < k; i++) {
        if (it[i].o != re[j].o) continue;
        it[i].pl = re[j++].pl;
        it[i].replica = -1;
        if (rc == MKV_OK && it[i].o->status == MKV_OK) it[i].o->status = check_fit(c, &it[i]);
        if (rc == MKV_OK && it[i].o->status == MKV_OK) it[i].o->status = MKV_PENDING;
    }
    free(re);
    int again = rc == MKV_OK && k;
    while (rc == MKV_OK && again) rc = get_round(c, it, m, &again);
    return rc;
}

/* ---- a single get's copy while MOON.GET is on its way (recent.c) ----
 *
 * The copy starts once MOON.GET is written, from where the key's object
 * was when last read, so the round trip overlaps it; the bytes are kept
 * only if the reply names the same place (the same master term) and
 * their CRC32C is the object's. From the master's answer on, the new
 * lease holds the object there, and a complete object's bytes never
 * change (write-once). What was copied before the master answered is
 * that object's too, unless in that window the key was removed and put
 * again into exactly the same extents: then the CRC of what was copied
 * must still equal the new object's, which a different value or a torn
 * mix of the two passes only by a CRC32C collision, as a corrupted byte
 * would. Map mode only (te_engine_read_now), and only while the old
 * location's capabilities have not expired (the lease's 10 s). */

typedef struct get_ahead {
    mkv_client *c;
    const mkv_placement *was;  /* the key's last location; NULL: no copy ahead */
    void *buf;
    int copied;                /* every byte copied, their CRC in crc */
    uint32_t crc;
} get_ahead;

static void ahead_copy(void *arg) {
    get_ahead *a = arg;
    mkv_xfer x = {.buf = a->buf, .pl = a->was, .replica = -1};
    a->copied = mkv_xfer_now(a->c, TE_READ, &x, 1) == 1 && x.crc_ok;
    a->crc = x.crc;
}

/* Whether a get of o can copy ahead: its key was read before, into a
 * buffer that still fits it. */
static int ahead_start(mkv_client *c, const mkv_obj *o, get_ahead *a) {
    const mkv_placement *was = mkv_recent_find(c, o->key, o->keylen);
    *a = (get_ahead){.c = c, .buf = o->buf};
    if (!was || !c->engine || !o->buf || was->size > o->len ||
        !mkv_registered(c, o->buf, (size_t)was->size))
        return 0;
    a->was = was;
    return 1;
}

/* Whether the bytes copied ahead are it's object (placed by the reply). */
static int ahead_kept(const get_ahead *a, const get_item *it) {
    return a->was && a->copied && mkv_recent_same(a->was, &it->pl) && a->crc == it->pl.crc;
}

/* vec (or NULL): objs[i] is read into vec[i]'s pieces; placed (or
 * NULL): objs[i]'s memory is placed[i]'s to give once located. */
static int get_run(mkv_client *c, mkv_obj *objs, const mkv_objv *vec, size_t n, const mkv_pobj *placed) {
    get_item *it = xcalloc(n, sizeof *it);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        objs[i].status = mkv_check_key(c, objs[i].key, objs[i].keylen);
        if (objs[i].status == MKV_OK && vec && (vec[i].niov == 0 || vec[i].niov > MKV_MAX_PIECES || !vec[i].iov))
            objs[i].status = mkv_fail(c, MKV_EINVAL, "an object has 1 to %d pieces", MKV_MAX_PIECES);
        if (objs[i].status == MKV_OK)
            it[m++] = (get_item){.o = &objs[i], .iov = vec ? vec[i].iov : NULL, .niov = vec ? vec[i].niov : 0};
    }
    get_ahead ahead = {0};
    mkv_meanwhile mw = {ahead_copy, &ahead};
    int single = m == 1 && n == 1 && !placed && !vec;
    int rc = m ? get_locate(c, it, m, single && ahead_start(c, it[0].o, &ahead) ? &mw : NULL) : MKV_OK;
    for (size_t i = 0; rc == MKV_OK && i < m; i++) {
        it[i].replica = -1;
        if (it[i].o->status != MKV_OK) continue;
        if (placed) it[i].o->status = place_buffer(c, &it[i], &placed[it[i].o - objs]);
        if (it[i].o->status == MKV_OK) it[i].o->status = check_fit(c, &it[i]);
        if (it[i].o->status == MKV_OK) it[i].o->status = ahead_kept(&ahead, &it[i]) ? MKV_OK : MKV_PENDING;
    }
    for (int again = 1; rc == MKV_OK && again;) rc = get_round(c, it, m, &again);
    if (rc == MKV_OK) rc = get_relocate_expired(c, it, m);
    for (size_t i = 0; i < m; i++) {
        if (it[i].o->status == MKV_PENDING || (rc != MKV_OK && it[i].o->status == MKV_OK))
            it[i].o->status = rc != MKV_OK ? rc : MKV_EPROTO;
        mkv_lease_done(c, it[i].o->key, it[i].o->keylen, &it[i].pl);
        if (single && it[i].o->status == MKV_OK) mkv_recent_keep(c, it[i].o->key, it[i].o->keylen, &it[i].pl);
        mkv_placement_free(&it[i].pl);
    }
    free(it);
    return rc;
}

int mkv_get(mkv_client *c, const void *key, size_t keylen, void *buf, size_t buflen,
            size_t *len_out) {
    if (!c) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_get(c, key, keylen, buf, buflen, len_out));
    MKV_ON_LANE(c);
    mkv_obj o = {.key = key, .keylen = keylen, .buf = buf, .len = buflen};
    int rc = get_run(c, &o, NULL, 1, NULL);
    if (rc != MKV_OK) return rc;
    if (len_out && (o.status == MKV_OK || o.status == MKV_ETOOSMALL)) *len_out = o.len;
    return o.status;
}

int mkv_get_placed(mkv_client *c, const void *key, size_t keylen, mkv_place_fn *place, void *ctx,
                   uint64_t *len_out) {
    if (!c || !place) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_get_placed(c, key, keylen, place, ctx, len_out));
    MKV_ON_LANE(c);
    mkv_obj o = {.key = key, .keylen = keylen};
    mkv_pobj p = {.place = place, .ctx = ctx};
    int rc = get_run(c, &o, NULL, 1, &p);
    if (rc != MKV_OK) return rc;
    if (len_out && o.status == MKV_OK) *len_out = o.len;
    return o.status;
}

int mkv_get_batch(mkv_client *c, mkv_obj *objs, size_t n) {
    if (!c || (!objs && n)) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_get_batch(c, objs, n));
    MKV_ON_LANE(c);
    int rc = MKV_OK;
    for (size_t i = 0; rc == MKV_OK && i < n; i += PROTO_MAX_BATCH)
        rc = get_run(c, objs + i, NULL, n - i < PROTO_MAX_BATCH ? n - i : PROTO_MAX_BATCH, NULL);
    return rc;
}

int mkv_get_batch_placed(mkv_client *c, mkv_pobj *objs, size_t n) {
    if (!c || (!objs && n)) return MKV_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!objs[i].place) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_get_batch_placed(c, objs, n));
    MKV_ON_LANE(c);
    size_t cap = n < PROTO_MAX_BATCH ? n : PROTO_MAX_BATCH;
    mkv_obj *o = xcalloc(cap ? cap : 1, sizeof *o);
    int rc = MKV_OK;
    for (size_t i = 0; i < n; i++) objs[i].status = MKV_EINVAL;   /* a chunk after a failed one: not asked */
    for (size_t at = 0; rc == MKV_OK && at < n; at += PROTO_MAX_BATCH) {
        size_t k = n - at < PROTO_MAX_BATCH ? n - at : PROTO_MAX_BATCH;
        for (size_t i = 0; i < k; i++) o[i] = (mkv_obj){.key = objs[at + i].key, .keylen = objs[at + i].keylen};
        rc = get_run(c, o, NULL, k, objs + at);
        for (size_t i = 0; i < k; i++) {
            objs[at + i].status = rc != MKV_OK ? rc : o[i].status;
            objs[at + i].buf = o[i].buf;
            objs[at + i].len = o[i].status == MKV_OK ? o[i].len : 0;
        }
    }
    free(o);
    return rc;
}

int mkv_get_batchv(mkv_client *c, mkv_objv *objs, size_t n) {
    if (!c || (!objs && n)) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_get_batchv(c, objs, n));
    MKV_ON_LANE(c);
    mkv_obj *o = xcalloc(n ? n : 1, sizeof *o);
    for (size_t i = 0; i < n; i++)
        o[i] = (mkv_obj){.key = objs[i].key, .keylen = objs[i].keylen,
                         .len = objs[i].iov && objs[i].niov <= MKV_MAX_PIECES
                                    ? (size_t)mkv_pieces_len(objs[i].iov, objs[i].niov) : 0};
    int rc = MKV_OK;
    for (size_t i = 0; rc == MKV_OK && i < n; i += PROTO_MAX_BATCH)
        rc = get_run(c, o + i, objs + i, n - i < PROTO_MAX_BATCH ? n - i : PROTO_MAX_BATCH, NULL);
    for (size_t i = 0; i < n; i++) {
        objs[i].status = rc != MKV_OK && o[i].status == MKV_OK ? rc : o[i].status;
        objs[i].len = o[i].len;
    }
    free(o);
    return rc;
}

int mkv_stat(mkv_client *c, const void *key, size_t keylen, uint64_t *size, uint32_t *crc) {
    if (!c || !size) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_stat(c, key, keylen, size, crc));
    MKV_ON_LANE(c);
    int rc = mkv_check_key(c, key, keylen);
    if (rc != MKV_OK) return rc;
    get_item it = {.o = &(mkv_obj){.key = key, .keylen = keylen}};
    rc = get_locate(c, &it, 1, NULL);
    if (rc == MKV_OK && (rc = it.o->status) == MKV_OK) {
        *size = it.pl.size;
        if (crc) *crc = it.pl.crc;
    }
    mkv_lease_done(c, key, keylen, &it.pl);
    mkv_placement_free(&it.pl);
    return rc;
}

int mkv_size(mkv_client *c, const void *key, size_t keylen, uint64_t *size) {
    return mkv_stat(c, key, keylen, size, NULL);
}

/* ---- split gets (moonkv_internal.h) ---- */

struct mkv_located {
    mkv_placement pl;
};

int mkv_located_parse(mkv_client *c, const redisReply *r, mkv_located **out, uint64_t *size) {
    *out = NULL;
    if (!c || !r) return MKV_EINVAL;
    if (r->type == REDIS_REPLY_ERROR) return mkv_reply_error(c, r->str, r->len);
    mkv_placement pl;
    int rc = mkv_located_decode(c, r, &pl);
    if (rc != MKV_OK) {
        mkv_placement_free(&pl);
        return rc;
    }
    *size = pl.size;
    *out = mkv_located_wrap(&pl);
    return MKV_OK;
}

int mkv_located_take(mkv_client *c, proto_located *r, mkv_located **out, uint64_t *size) {
    *out = NULL;
    if (!c || !r) return MKV_EINVAL;
    if (!r->found) return mkv_fail(c, MKV_ENOTFOUND, "no such object");
    mkv_located *l = mkv_located_of(&r->rep);
    l->pl.crc = r->crc;
    l->pl.slices = r->slices;
    r->slices = (proto_slices){0};     /* pl's now */
    *size = l->pl.size;
    *out = l;
    return MKV_OK;
}

mkv_located *mkv_located_of(const proto_placed *r) {
    /* One block for the location and every extent: a batch of small
     * reads or writes frees its locations together, and a block per
     * replica more was ~10% of the gateway's loop with two replicas. */
    mkv_located *l = xmalloc(sizeof *l + r->nextents * sizeof(te_extent));
    mkv_placement_take(&l->pl, r, (te_extent *)(l + 1));
    return l;
}

mkv_located *mkv_located_wrap(const mkv_placement *pl) {
    mkv_located *l = xmalloc(sizeof *l);
    l->pl = *pl;
    return l;
}

const mkv_placement *mkv_located_placement(const mkv_located *l) { return &l->pl; }

uint64_t mkv_located_lease(const mkv_located *l) { return mkv_lease_until(&l->pl); }

void mkv_located_free(mkv_located *l) {
    if (!l) return;
    mkv_placement_free(&l->pl);   /* its block if wrapped; extents after l are l's */
    free(l);
}

size_t mkv_read_located_now(mkv_client *c, mkv_obj *objs, mkv_located *const *loc, size_t n) {
    if (!c || n == 0) return 0;
    MKV_ON_LANE(c);
    mkv_xfer *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        const mkv_placement *pl = &loc[i]->pl;
        /* too small a buffer: no object (the engine refuses it), the usual read says why */
        x[i] = (mkv_xfer){.buf = pl->size <= objs[i].len ? objs[i].buf : NULL, .pl = pl, .replica = -1};
    }
    mkv_xfer_now(c, TE_READ, x, n);
    size_t done = 0;
    for (size_t i = 0; i < n; i++) {
        int ok = x[i].status == MKV_OK && x[i].crc_ok && x[i].crc == loc[i]->pl.crc;
        objs[i].status = ok ? MKV_OK : MKV_PENDING;
        if (ok) objs[i].len = (size_t)loc[i]->pl.size;
        done += (size_t)ok;
    }
    free(x);
    return done;
}

/* The items share loc's placements (not copied: get_round only reads). */
int mkv_read_located(mkv_client *c, mkv_obj *objs, mkv_located *const *loc, size_t n) {
    if (!c || (!objs && n)) return MKV_EINVAL;
    MKV_ON_LANE(c);
    get_item *it = xcalloc(n ? n : 1, sizeof *it);
    for (size_t i = 0; i < n; i++) {
        it[i] = (get_item){.o = &objs[i], .pl = loc[i]->pl, .replica = -1};
        objs[i].status = check_fit(c, &it[i]);
        if (objs[i].status == MKV_OK) objs[i].status = MKV_PENDING;
    }
    int rc = MKV_OK;
    for (int again = 1; rc == MKV_OK && again;) rc = get_round(c, it, n, &again);
    for (size_t i = 0; i < n; i++)
        if (objs[i].status == MKV_PENDING || (rc != MKV_OK && objs[i].status == MKV_OK))
            objs[i].status = rc != MKV_OK ? rc : MKV_EPROTO;
    free(it);
    return rc;
}

uint32_t mkv_located_replicas(const mkv_located *l) { return l->pl.nreplicas; }

const proto_slices *mkv_located_slices(const mkv_located *l) { return &l->pl.slices; }

int mkv_read_located_range(mkv_client *c, const mkv_located *l, int replica, void *buf, uint64_t off,
                           uint64_t len, uint32_t *crc) {
    *crc = 0;
    if (!c || !l || !buf || len == 0 || replica >= (int)l->pl.nreplicas) return MKV_EINVAL;
    MKV_ON_LANE(c);
    const mkv_placement *whole = &l->pl;
    if (off > whole->size || len > whole->size - off)
        return mkv_fail(c, MKV_EINVAL, "range past the object's %llu bytes", (unsigned long long)whole->size);
    mkv_placement pl;
    int rc = mkv_placement_clip(c, whole, off, len, &pl);
    if (rc == MKV_OK) rc = mkv_topology_cover(c, whole);
    mkv_xfer x = {.buf = buf, .pl = &pl, .replica = replica};
    if (rc == MKV_OK) rc = mkv_xfer_run(c, TE_READ, &x, 1);
    if (rc == MKV_OK) rc = x.status;
    if (rc == MKV_OK) *crc = x.crc_ok ? x.crc : crc32c(0, buf, (size_t)len);
    mkv_placement_free(&pl);
    return rc;
}

/* ---- byte ranges ---- */

/* The client's scratch holds at least len bytes, registered (cold: only
 * what a read lands in becomes resident). */
static int scratch_reserve(mkv_client *c, size_t len) {
    if (len <= c->scratch_len) return MKV_OK;
    size_t cap = (len + 4095) & ~(size_t)4095;
    if (c->scratch) mkv_unregister_buffer(c, c->scratch);
    free(c->scratch);
    c->scratch_len = 0;
    if (!(c->scratch = aligned_alloc(4096, cap))) return mkv_fail(c, MKV_ENOMEM, "no scratch of %zu bytes", cap);
    int rc = mkv_register_buffer_cold(c, c->scratch, cap);
    if (rc != MKV_OK) {
        free(c->scratch);
        c->scratch = NULL;
        return rc;
    }
    c->scratch_len = cap;
    return MKV_OK;
}

/* Whether the bytes read into iov (object bytes [a, b) of pl) are right:
 * each slice's CRC when pl keeps them ([a, b) then covers whole slices),
 * else the object's (then [a, b) is all of it). */
static int range_checks(mkv_client *c, const mkv_placement *pl, const mkv_iov *iov, size_t n, uint64_t a,
                        uint64_t b, const mkv_xfer *whole) {
    const proto_slices *sl = &pl->slices;
    if (!sl->count) {
        if (whole->crc_ok) return whole->crc == pl->crc;
        mkv_span_sum s = {.iov = iov, .niov = n, .off = 0, .len = b - a};
        mkv_pieces_sums(c, &s, 1);
        return s.crc == pl->crc;
    }
    uint64_t first = a / sl->size, count = (b - a + sl->size - 1) / sl->size;
    mkv_span_sum *s = xcalloc(count, sizeof *s);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t off = i * sl->size;
        s[i] = (mkv_span_sum){.iov = iov, .niov = n, .off = off, .len = b - a - off < sl->size ? b - a - off : sl->size};
    }
    mkv_pieces_sums(c, s, count);
    int ok = 1;
    for (uint64_t i = 0; i < count && ok; i++) ok = s[i].crc == sl->crc[first + i];
    free(s);
    return ok;
}

/* One read of object bytes [a, b) into iov over replica (-1: any). */
static int range_round(mkv_client *c, const mkv_placement *region, const mkv_iov *iov, size_t n, int replica,
                       mkv_xfer *out) {
    mkv_xfer x[3];
    mkv_placement clips[3] = {0};
    int k = mkv_pieces_xfers(c, iov, n, region, replica, x, clips);
    if (k < 0) return k;
    int rc = mkv_xfer_run(c, TE_READ, x, (size_t)k);
    mkv_pieces_fold(x, k, out);
    for (int j = 0; j < k; j++) {
        mkv_placement_free(&clips[j]);
        free(x[j].segs);
    }
    return rc;
}

/* The bytes [off, end) of the object at pl into buf: the slices around
 * them (or the whole object) read, what lies outside into the scratch,
 * and checked; another replica on a mismatch. */
static int range_read(mkv_client *c, const mkv_placement *pl, uint64_t off, uint64_t end, void *buf) {
    const proto_slices *sl = &pl->slices;
    uint64_t a = 0, b = pl->size;
    if (sl->count) {
        a = off / sl->size * sl->size;
        b = (end + sl->size - 1) / sl->size * sl->size;
        if (b > pl->size) b = pl->size;
    }
    int rc = scratch_reserve(c, (size_t)((off - a) + (b - end)) + 1);
    if (rc != MKV_OK) return rc;
    mkv_iov iov[3];
    size_t n = 0;
    if (off > a) iov[n++] = (mkv_iov){c->scratch, (size_t)(off - a)};
    iov[n++] = (mkv_iov){buf, (size_t)(end - off)};
    if (b > end) iov[n++] = (mkv_iov){(char *)c->scratch + (off - a), (size_t)(b - end)};
    mkv_placement region;
    rc = mkv_placement_clip(c, pl, a, b - a, &region);
    if (rc == MKV_OK) rc = mkv_topology_cover(c, pl);
    int ok = 0;
    for (int r = -1; rc == MKV_OK && !ok && r < (int)pl->nreplicas; r++) {
        mkv_xfer got;
        rc = range_round(c, &region, iov, n, r, &got);
        if (rc != MKV_OK) break;
        if (got.status == MKV_OK) ok = range_checks(c, pl, iov, n, a, b, &got);
        else if (r < 0) rc = got.status;   /* the engine tried every replica already */
    }
    mkv_placement_free(&region);
    if (rc == MKV_OK && !ok) rc = mkv_fail(c, MKV_ECORRUPT, "checksum mismatch on every replica");
    return rc;
}

int mkv_get_range(mkv_client *c, const void *key, size_t keylen, uint64_t off, void *buf, size_t len,
                  size_t *got) {
    if (!c || !got || (!buf && len)) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_get_range(c, key, keylen, off, buf, len, got));
    MKV_ON_LANE(c);
    *got = 0;
    int rc = mkv_check_key(c, key, keylen);
    if (rc != MKV_OK) return rc;
    get_item it = {.o = &(mkv_obj){.key = key, .keylen = keylen}};
    rc = get_locate(c, &it, 1, NULL);
    if (rc == MKV_OK) rc = it.o->status;
    if (rc == MKV_OK && off < it.pl.size && len) {
        uint64_t end = len < it.pl.size - off ? off + len : it.pl.size;
        if (!mkv_registered(c, buf, (size_t)(end - off)))
            rc = mkv_fail(c, MKV_ENOTREG, "buffer is not inside a registered region");
        else if ((rc = range_read(c, &it.pl, off, end, buf)) == MKV_OK)
            *got = (size_t)(end - off);
    }
    mkv_lease_done(c, key, keylen, &it.pl);
    mkv_placement_free(&it.pl);
    return rc;
}

int mkv_topology_relearn(mkv_client *c) {
    if (!c) return MKV_EINVAL;
    MKV_ON_LANE(c);
    mkv_topology_forget(c);   /* the next placement's term is then adopted */
    return mkv_topology_refresh(c);
}
