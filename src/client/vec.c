/* client/vec.c - objects held in pieces (scatter/gather).
 *
 * An engine keeps a KV page as one piece per layer (and K apart from V)
 * in a host arena it registered once. Such an object moves without a
 * staging copy: each piece is a transfer of its own byte range of the
 * object, over the object's placement clipped to that range (a node
 * serves any range inside a grant), and every piece of a batch goes in
 * the same engine batch. Checksums are summed an object (or slice) at a
 * time over its pieces on the helper threads, or, where the engine
 * summed each piece on the way, combined (crc32c_combine). */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "core/crc32c.h"
#include "core/workpool.h"
#include "core/util.h"

int mkv_pieces_check(mkv_client *c, const mkv_iov *iov, size_t niov, uint64_t need) {
    if (niov == 0 || niov > MKV_MAX_PIECES)
        return mkv_fail(c, MKV_EINVAL, "an object has 1 to %d pieces", MKV_MAX_PIECES);
    if (!iov) return mkv_fail(c, MKV_EINVAL, "no pieces");
    uint64_t at = 0;
    for (size_t i = 0; i < niov && at < need; i++) {
        size_t used = iov[i].len < need - at ? iov[i].len : (size_t)(need - at);
        if (used && (!iov[i].buf || !mkv_registered(c, iov[i].buf, used)))
            return mkv_fail(c, MKV_ENOTREG, "piece %zu is not inside a registered region", i);
        at += iov[i].len;
    }
    return MKV_OK;
}

uint64_t mkv_pieces_len(const mkv_iov *iov, size_t niov) {
    uint64_t n = 0;
    for (size_t i = 0; i < niov; i++) n += iov[i].len;
    return n;
}

int mkv_pieces_xfers(mkv_client *c, const mkv_iov *iov, size_t niov, const mkv_placement *pl, int replica,
                     mkv_xfer *x, mkv_placement *clips) {
    /* One piece that is the whole placement needs no clip. */
    if (niov == 1 && iov[0].len >= pl->size) {
        x[0] = (mkv_xfer){.buf = iov[0].buf, .pl = pl, .replica = replica};
        return 1;
    }
    if (c->engine && te_engine_segments(c->engine)) {   /* one transfer, the pieces its segments */
        struct iovec *segs = xmalloc(niov * sizeof *segs);
        int n = 0;
        for (uint64_t at = 0; (size_t)n < niov && at < pl->size; n++) {
            uint64_t len = iov[n].len < pl->size - at ? iov[n].len : pl->size - at;
            segs[n] = (struct iovec){iov[n].buf, (size_t)len};
            at += len;
        }
        int w = 0;   /* empty pieces hold no bytes: dropped */
        for (int i = 0; i < n; i++)
            if (segs[i].iov_len) segs[w++] = segs[i];
        x[0] = (mkv_xfer){.pl = pl, .replica = replica, .segs = segs, .nsegs = w};
        return 1;
    }
    int k = 0;
    uint64_t at = 0;
    for (size_t i = 0; i < niov && at < pl->size; i++) {
        uint64_t len = iov[i].len < pl->size - at ? iov[i].len : pl->size - at;
        if (len == 0) continue;
        int rc = mkv_placement_clip(c, pl, at, len, &clips[k]);
        if (rc != MKV_OK) {
            for (int j = 0; j <= k; j++) mkv_placement_free(&clips[j]);
            return rc;
        }
        x[k] = (mkv_xfer){.buf = iov[i].buf, .pl = &clips[k], .replica = replica};
        k++;
        at += len;
    }
    return k;
}

void mkv_pieces_fold(const mkv_xfer *x, int k, mkv_xfer *out) {
    *out = (mkv_xfer){.status = MKV_OK, .crc_ok = 1};
    for (int j = 0; j < k; j++) {
        if (out->status == MKV_OK && x[j].status != MKV_OK) {
            out->status = x[j].status;
            out->failed_node = x[j].failed_node;
        }
        out->crc_ok &= x[j].crc_ok;
        out->crc = j == 0 ? x[j].crc : crc32c_combine(out->crc, x[j].crc, x[j].pl->size);
    }
}

/* Walks the pieces that hold object bytes [s->off, s->off + s->len):
 * fn(arg, buf, len) for each part, in order. */
static void walk_range(const mkv_span_sum *s, void (*fn)(void *arg, const void *buf, size_t len), void *arg) {
    uint64_t at = 0, end = s->off + s->len;
    for (size_t i = 0; i < s->niov && at < end; at += s->iov[i].len, i++) {
        uint64_t lo = s->off > at ? s->off : at;
        uint64_t hi = end < at + s->iov[i].len ? end : at + s->iov[i].len;
        if (lo < hi) fn(arg, (const char *)s->iov[i].buf + (lo - at), (size_t)(hi - lo));
    }
}

typedef struct parts {
    struct iovec *v;
    size_t n;
} parts;

static void count_part(void *arg, const void *buf, size_t len) {
    (void)buf;
    (void)len;
    ((parts *)arg)->n++;
}

static void add_part(void *arg, const void *buf, size_t len) {
    parts *p = arg;
    p->v[p->n++] = (struct iovec){(void *)buf, len};
}

typedef struct spans_job {
    mkv_span_sum *s;
    const size_t *at;         /* the i-th job's span: s[at[i]] */
    const struct iovec *v;
    const size_t *first;      /* its parts: v[first[i]] to v[first[i + 1]] */
} spans_job;

/* A span in one pass over its parts (crc32c_sumv prefetches each next
 * one: an engine's pieces are far apart, and summing each alone, then
 * combining, cost 1.4x a contiguous object's pass, 1.2x so). */
static void sum_span(void *arg, int i) {
    spans_job *j = arg;
    j->s[j->at[i]].crc = crc32c_sumv(0, j->v + j->first[i], (int)(j->first[i + 1] - j->first[i]));
}

/* A span holding a part of CRC32C_PARALLEL_MIN up: that part split over
 * the pool (mkv_checksum), the others summed here, combined. */
static uint32_t sum_span_large(mkv_client *c, const struct iovec *v, size_t n) {
    uint32_t crc = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t part = mkv_checksum(c, v[k].iov_base, v[k].iov_len);
        crc = k == 0 ? part : crc32c_combine(crc, part, v[k].iov_len);
    }
    return crc;
}

void mkv_pieces_sums(mkv_client *c, mkv_span_sum *s, size_t n) {
    parts p = {0};
    for (size_t i = 0; i < n; i++) walk_range(&s[i], count_part, &p);
    p = (parts){xcalloc(p.n ? p.n : 1, sizeof *p.v), 0};
    size_t *first = xcalloc(n + 1, sizeof *first);
    size_t *at = xcalloc(n ? n : 1, sizeof *at);
    size_t nsmall = 0, small_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        size_t from = p.n;
        walk_range(&s[i], add_part, &p);
        int large = 0;
        for (size_t k = from; k < p.n; k++) large |= p.v[k].iov_len >= CRC32C_PARALLEL_MIN;
        if (large) {
            s[i].crc = sum_span_large(c, p.v + from, p.n - from);
            p.n = from;   /* its parts are done with */
            continue;
        }
        first[nsmall] = from;
        at[nsmall++] = i;
        small_bytes += s[i].len;
    }
    first[nsmall] = p.n;
    spans_job j = {s, at, p.v, first};
    workpool_run(small_bytes >= CRC32C_PARALLEL_MIN ? mkv_crc_pool(c) : NULL, (int)nsmall, sum_span, &j);
    free(p.v);
    free(first);
    free(at);
}

uint32_t mkv_pieces_slices(mkv_client *c, const mkv_iov *iov, size_t niov, uint64_t len, proto_slices *sl) {
    mkv_span_sum *s = xcalloc(sl->count, sizeof *s);
    for (uint32_t i = 0; i < sl->count; i++) {
        uint64_t off = (uint64_t)i * sl->size;
        s[i] = (mkv_span_sum){.iov = iov, .niov = niov, .off = off, .len = len - off < sl->size ? len - off : sl->size};
    }
    mkv_pieces_sums(c, s, sl->count);
    uint32_t whole = 0;
    for (uint32_t i = 0; i < sl->count; i++) {
        sl->crc[i] = s[i].crc;
        whole = i == 0 ? s[i].crc : crc32c_combine(whole, s[i].crc, s[i].len);
    }
    free(s);
    return whole;
}
