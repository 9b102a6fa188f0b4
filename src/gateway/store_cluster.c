/* gateway/store_cluster.c - a store whose values live in the cluster.
 *
 * Values pass through registered staging memory (staging.c): put_start
 * hands networking a staging buffer the value streams into, put_end puts
 * it to the nodes; get reads into a staging buffer that the pin keeps
 * until the reply is written. GET and MGET complete through get_async
 * (the read batch, read_batch.c); SETs are shipped by the put batch
 * (put_batch.c) and gateway_async.c writes their replies from the
 * outcome, as it does for DEL, EXISTS, STRLEN, TYPE and TTL from the
 * master's answers. DBSIZE, INFO, SCAN, KEYS and FLUSHALL complete
 * through stat_async, scan_async and flush_async, MOON.PREFIX, PREFIXPIN
 * and UNPIN through pin_async (master_ask.h). The
 * synchronous calls left (a put_end not shipped, get, remove, exists,
 * stat: commands the gateway does not run asynchronously) are
 * blocking libmoonkv calls on the loop; loop_blocking_calls counts them.
 * Every loop and worker of the process calls one client (proc_client.h).
 *
 * A failed put's buffer is not freed at once: t_object.c compares the
 * value (which still lies in it) with the stored one to tell an
 * idempotent SET from a conflict, after put_end returned. Such buffers
 * are freed before the loop next sleeps. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "gateway/gateway.h"
#include "gateway/get_stream.h"
#include "client/moonkv_internal.h"
#include "gateway/master_ask.h"
#include "gateway/proc_client.h"
#include "gateway/put_batch.h"
#include "gateway/put_stream.h"
#include "gateway/read_batch.h"
#include "gateway/store_cluster.h"
#include "proto/cmd.h"
#include "proto/limits.h"
#include "proto/replies.h"
#include "server/info.h"
#include "server/server.h"

#define GATEWAY_WORKERS 2       /* the machine has few cores; transfers mostly wait */

typedef struct cluster_stats {
    uint64_t puts, gets, removes, failed_puts, failed_gets, streamed_puts;
    uint64_t empty_reads;     /* reads answered OK with 0 bytes: refused (a bug, logged) */
    uint64_t bytes_put, bytes_got;
    uint64_t loop_blocking;     /* calls that waited for the master on the loop */
} cluster_stats;

typedef struct cluster_store {
    store base;
    event_loop *loop;
    mkv_client *mc;             /* the process's (proc_client.h): the loop's, the workers', inline reads' */
    staging *pool;
    int registered;             /* the pool with mc */
    workers *workers;
    master_async *ma;           /* the batchers' master connection (the client's face); NULL over groups */
    mkv_async *face;            /* over groups: the router's async face (key questions, batch gets) */
    struct read_batcher *reads;
    struct put_batcher *puts;
    put_streamer *streams;      /* large SETs on their way while they arrive; NULL over groups */
    get_streamer *gets;         /* large GETs on their way while they arrive */
    struct gw_async *async;     /* gateway_async.c's, freed with the store */
    void (*async_free)(struct gw_async *ga);
    char master[CONFIG_STR_MAX];
    int replicas;
    int groups;                 /* mc routes over master groups (mkv_options.groups) */
    staging_buf *dead;          /* failed puts' buffers, freed in reap */
    size_t ndead, capdead;
    loop_hook *reap;            /* before sleep, ahead of the reply flush */
    loop_timer *trim;           /* gives an idle staging pool's pages back */
    struct cs_read *free_reads;    /* finished one-key reads, for the next GETs */
    size_t nfree_reads;
    struct store_pin *free_pins;   /* released pins for the next gets (a malloc per GET saved) */
    store_put *free_puts;       /* finished puts of short keys, for the next SETs (put_alloc) */
    cluster_stats stats;
} cluster_store;

struct store_pin {
    staging_buf buf;
    struct store_pin *next;     /* in free_pins */
};

static cluster_store *cs_of(store *s) { return (cluster_store *)s; }

workers *cluster_store_workers(store *s) { return cs_of(s)->workers; }

struct read_batcher *cluster_store_reads(store *s) { return cs_of(s)->reads; }
struct get_streamer *cluster_store_gets(store *s) { return cs_of(s)->gets; }
master_async *cluster_store_master(store *s) { return cs_of(s)->ma; }
mkv_async *cluster_store_face(store *s) {
    cluster_store *cs = cs_of(s);
    return cs->ma ? master_async_face(cs->ma) : cs->face;
}

static void face_ready(event_loop *el, int fd, void *data, int mask) { mkv_async_drain(data); }

/* Over groups: the router's face, its completions drained on the loop
 * (the keys' questions and the batches' gets then wait for the masters on
 * no thread); as many threads for each group's data legs as the loop has
 * workers. */
static void face_open(cluster_store *cs) {
    if (mkv_async_open(&cs->face, cs->mc, GATEWAY_WORKERS, 0) != MKV_OK) {
        log_warning("gateway: no async face over the groups (%s): keys are asked on the workers",
                    mkv_last_error(cs->mc));
        cs->face = NULL;
        return;
    }
    loop_add_file(cs->loop, mkv_async_fd(cs->face), LOOP_READABLE, face_ready, cs->face);
}

/* What is in flight on it completes first (their callbacks run now). */
static void face_close(cluster_store *cs) {
    if (!cs->face) return;
    loop_del_file(cs->loop, mkv_async_fd(cs->face), LOOP_READABLE);
    mkv_async_close(cs->face);
    cs->face = NULL;
}

struct put_batcher *cluster_store_puts(store *s) { return cs_of(s)->puts; }

void cluster_store_set_async(store *s, struct gw_async *ga, void (*free_fn)(struct gw_async *ga)) {
    cs_of(s)->async = ga;
    cs_of(s)->async_free = free_fn;
}

struct gw_async *cluster_store_async(store *s) { return cs_of(s)->async; }

/* ---- puts ---- */

/* A put whose key fits PUT_SLOT_KEY bytes has a block of one size, kept
 * for the next SET when it finishes (a zeroed allocation and a free per
 * SET were ~7 % of a busy gateway's loop under pipelined small SETs). */
#define PUT_SLOT_KEY 128

static store_put *put_alloc(cluster_store *cs, const void *key, size_t keylen) {
    store_put *p = keylen <= PUT_SLOT_KEY ? cs->free_puts : NULL;
    if (p) cs->free_puts = p->next_free;
    else p = xmalloc(sizeof *p + (keylen <= PUT_SLOT_KEY ? PUT_SLOT_KEY : keylen));
    /* errstr is written before it is read; the rest starts empty */
    p->buf = (staging_buf){0};
    p->stream = NULL;
    p->shipped = p->ship_rc = 0;
    p->errstr[0] = '\0';
    p->next_free = NULL;
    p->keylen = keylen;
    memcpy(p->key, key, keylen);
    return p;
}

/* p's block, its buffer already given back or taken. */
static void put_release(cluster_store *cs, store_put *p) {
    if (p->keylen > PUT_SLOT_KEY) {
        free(p);
        return;
    }
    p->next_free = cs->free_puts;
    cs->free_puts = p;
}

/* A put of size bytes in memory from staging_get, or (sparse) address
 * space that a stream backs only a few chunks at a time. */
static int put_create(store *s, const void *key, size_t keylen, uint64_t size, int sparse,
                      store_put **out) {
    cluster_store *cs = cs_of(s);
    if (!cluster_key_ok(keylen)) {
        snprintf(s->errstr, sizeof s->errstr, "keys must be 1 to %d bytes", PROTO_MAX_KEY_LEN);
        return STORE_ERR;
    }
    if (size == 0) {
        snprintf(s->errstr, sizeof s->errstr, "the cluster stores values of at least 1 byte");
        return STORE_ERR;
    }
    store_put *p = put_alloc(cs, key, keylen);
    int rc = sparse ? staging_get_sparse(cs->pool, size, &p->buf) : staging_get(cs->pool, size, &p->buf);
    if (rc != STORE_OK) {
        put_release(cs, p);
        snprintf(s->errstr, sizeof s->errstr,
                 "NOSPACE gateway staging memory has no room for %llu bytes now",
                 (unsigned long long)size);
        return rc;
    }
    *out = p;
    return STORE_OK;
}

static int cs_put_start(store *s, const void *key, size_t keylen, uint64_t size, void **dst,
                        store_put **out) {
    int rc = put_create(s, key, keylen, size, 0, out);
    if (rc == STORE_OK) *dst = (*out)->buf.ptr;
    return rc;
}

/* Large values move on to the nodes while they arrive (put_stream.h). */
static int cs_put_start_streamed(store *s, const void *key, size_t keylen, uint64_t size, void **dst,
                                 store_put **out, void (*resume)(void *ctx), void *ctx) {
    cluster_store *cs = cs_of(s);
    if (!cs->streams || size < PS_MIN) return cs_put_start(s, key, keylen, size, dst, out);
    int rc = put_create(s, key, keylen, size, 1, out);
    if (rc != STORE_OK) return rc;
    put_stream_start(cs->streams, *out, resume, ctx);
    cs->stats.streamed_puts++;
    *dst = (*out)->buf.ptr;
    return STORE_OK;
}

static uint64_t cs_put_progress(store *s, store_put *p, uint64_t landed) {
    return p->stream ? put_stream_progress(p->stream, landed) : p->buf.len;
}

int cluster_stream_finish(store *s, gw_write *w) {
    return w->put->stream && put_stream_finish(w->put->stream, w);
}

static void put_free(cluster_store *cs, store_put *p) {
    staging_put(cs->pool, &p->buf);
    put_release(cs, p);
}

static void bury(cluster_store *cs, staging_buf b) {
    if (cs->ndead == cs->capdead) {
        cs->capdead = cs->capdead ? cs->capdead * 2 : 8;
        cs->dead = xrealloc(cs->dead, cs->capdead * sizeof *cs->dead);
    }
    cs->dead[cs->ndead++] = b;
}

static int cs_put_end(store *s, store_put *p) {
    cluster_store *cs = cs_of(s);
    if (p->stream) {   /* its bytes are on their way: only the stream can finish it */
        put_stream_abort(p->stream);
        p->shipped = 1;
        p->ship_rc = STORE_ERR;
        snprintf(p->errstr, sizeof p->errstr, "a streamed value cannot be stored here");
    }
    if (!p->shipped) {
        cs->stats.loop_blocking++;
        cluster_ship(cs->mc, p, cs->replicas);
    }
    int rc = p->ship_rc;
    if (rc == STORE_OK) {
        cs->stats.puts++;
        cs->stats.bytes_put += p->buf.len;
        put_free(cs, p);
        return STORE_OK;
    }
    cs->stats.failed_puts++;
    memcpy(s->errstr, p->errstr, sizeof s->errstr);
    bury(cs, p->buf);
    put_release(cs, p);
    return rc;
}

static void cs_put_abort(store *s, store_put *p) {
    if (p->stream) put_stream_abort(p->stream);   /* takes the buffer */
    put_free(cs_of(s), p);
}

static void reap_cb(event_loop *el, void *data) {
    cluster_store *cs = data;
    for (size_t i = 0; i < cs->ndead; i++) staging_put(cs->pool, &cs->dead[i]);
    cs->ndead = 0;
}

/* ---- reads ---- */

/* A stored value's length and, when crc is not NULL, its CRC32C: one
 * MOON.OBJECT, blocking (the gateway's STRLEN and SET ask ahead). */
static int cs_stat(store *s, const void *key, size_t keylen, uint64_t *len, uint32_t *crc) {
    if (!cluster_key_ok(keylen)) return STORE_NOTFOUND;
    cluster_store *cs = cs_of(s);
    cs->stats.loop_blocking++;
    return cluster_store_code(mkv_stat(cs->mc, key, keylen, len, crc), cs->mc, s->errstr, sizeof s->errstr);
}

static int cs_size_of(store *s, const void *key, size_t keylen, uint64_t *len) {
    return cs_stat(s, key, keylen, len, NULL);
}

static int cs_checksum_of(store *s, const void *key, size_t keylen, uint64_t *len, uint32_t *crc) {
    return cs_stat(s, key, keylen, len, crc);
}

/* The fetch's outcome as get's: its buffer moves into a pin. */
static int fetch_result(cluster_store *cs, gw_fetch *f, const void **data, uint64_t *len,
                        store_pin **pin) {
    if (f->rc == STORE_OK) {
        cs->stats.gets++;
        cs->stats.bytes_got += f->len;
        store_pin *p = cs->free_pins;
        if (p) cs->free_pins = p->next;
        else p = xmalloc(sizeof *p);
        p->buf = f->buf;
        f->buf.ptr = NULL;
        *data = p->buf.ptr;
        *len = f->len;
        *pin = p;
        return STORE_OK;
    }
    if (f->rc != STORE_NOTFOUND) cs->stats.failed_gets++;
    memcpy(cs->base.errstr, f->errstr, sizeof cs->base.errstr);
    return f->rc;
}

/* A value located to stream (store_got.stream): the caller sends it with
 * cluster_stream_send. */
typedef struct cluster_stream {
    mkv_located *l;
    uint64_t epoch;           /* the master connection that located it */
} cluster_stream;

/* A get_async under way: the read batcher's handle, its keys. */
typedef struct cs_read {
    gw_read read;
    cluster_store *cs;
    store_got *got;
    store_got_fn *done;
    void *ctx;
    struct cs_read *next_free;   /* one-key reads are kept for the next GET */
    gw_fetch fetch[];
} cs_read;

#define CS_READS_KEPT 256

/* The cluster stores no empty value (put_create), so a read answered OK
 * with 0 bytes is a fault of ours: it fails (never a wrong value to a
 * client), logged with the path that answered (SAN test_chaos saw one
 * GET answered $0 for a 21120-byte key once; its cause is not known). */
static void refuse_empty(cluster_store *cs, gw_fetch *f) {
    cs->stats.empty_reads++;
    log_warning("gateway: a read of %.*s answered 0 bytes by %s: refused", (int)(f->keylen < 64 ? f->keylen : 64),
                f->key, f->via ? f->via : "?");
    staging_put(cs->pool, &f->buf);
    f->rc = STORE_ERR;
    snprintf(f->errstr, sizeof f->errstr, "internal error: the read answered 0 bytes (refused)");
}

/* The fetch's outcome as the reader's: its buffer moves into a pin, a
 * located value into a stream. */
static void got_of_fetch(cluster_store *cs, gw_fetch *f, int fetched, store_got *g) {
    g->stream = NULL;
    g->pin = NULL;
    g->sl.count = 0;   /* the library verified the value whole */
    if (!fetched) {   /* the batcher closed (shutdown) before the answer */
        staging_put(cs->pool, &f->buf);
        mkv_located_free(f->stream);
        g->rc = cluster_store_lost(g->errstr, sizeof g->errstr);
        return;
    }
    if (f->rc == STORE_OK && f->stream) {
        cluster_stream *st = xmalloc(sizeof *st);
        *st = (cluster_stream){.l = f->stream, .epoch = f->stream_epoch};
        g->rc = STORE_OK;
        g->data = NULL;
        g->len = f->len;
        g->stream = st;
        return;
    }
    if (f->rc == STORE_OK && f->len == 0) refuse_empty(cs, f);
    g->rc = fetch_result(cs, f, &g->data, &g->len, &g->pin);
    if (g->rc != STORE_OK) memcpy(g->errstr, f->errstr, sizeof g->errstr);
}

static void cs_read_done(gw_read *r, int fetched) {
    cs_read *q = (cs_read *)((char *)r - offsetof(cs_read, read));
    cluster_store *cs = q->cs;
    for (size_t i = 0; i < r->nfetch; i++) got_of_fetch(cs, &q->fetch[i], fetched, &q->got[i]);
    store_got_fn *done = q->done;
    void *ctx = q->ctx;
    if (r->nfetch == 1 && cs->nfree_reads < CS_READS_KEPT) {
        q->next_free = cs->free_reads;
        cs->free_reads = q;
        cs->nfree_reads++;
    } else {
        free(q);
    }
    done(ctx);
}

/* The keys join the loop iteration's read batch (read_batch.h); done
 * runs when the batch is back. */
static void cs_get_async(store *s, const store_key *keys, size_t n, int flags, store_got *got,
                         store_got_fn *done, void *ctx) {
    cluster_store *cs = cs_of(s);
    cs_read *q = n == 1 ? cs->free_reads : NULL;
    if (q) {
        cs->free_reads = q->next_free;
        cs->nfree_reads--;
    } else {
        q = xmalloc(sizeof *q + n * sizeof(gw_fetch));
    }
    *q = (cs_read){.cs = cs, .got = got, .done = done, .ctx = ctx};
    for (size_t i = 0; i < n; i++)
        q->fetch[i] = (gw_fetch){.key = keys[i].ptr, .keylen = keys[i].len,
                                 .may_stream = (flags & STORE_GET_STREAM) != 0};
    q->read = (gw_read){.fetch = q->fetch, .nfetch = n, .done = cs_read_done};
    read_batcher_add(cs->reads, &q->read);
}

get_stream *cluster_stream_send(store *s, store_got *g, client *c, reply_slot *slot, int keep_slot,
                                const char *key, size_t keylen, void (*done)(void *ctx), void *ctx) {
    cluster_stream *st = g->stream;
    g->stream = NULL;
    get_stream *gs = get_stream_start(cs_of(s)->gets, c, slot, keep_slot, st->l, g->len, key, keylen, st->epoch,
                                      done, ctx);
    free(st);
    return gs;
}

void cluster_got_forget(store *s, store_got *g) {
    cluster_stream *st = g->stream;
    if (st) {
        mkv_located_free(st->l);
        free(st);
        g->stream = NULL;
    }
    if (g->rc == STORE_OK && g->pin) s->ops->release(s, g->pin);
    g->pin = NULL;
}

static void cs_release(store *s, store_pin *p) {
    cluster_store *cs = cs_of(s);
    staging_put(cs->pool, &p->buf);
    p->next = cs->free_pins;
    cs->free_pins = p;
}

void cluster_store_removed(store *s, uint64_t n) { cs_of(s)->stats.removes += n; }

/* One key's answer by a blocking call (cluster_answer). */
static void answer_one(mkv_client *mc, const char *verb, gw_answer *a) {
    int rc;
    cluster_master_wait();
    if (strcmp(verb, PROTO_VERB_OBJECT) == 0) {
        uint64_t len = 0;
        rc = mkv_stat(mc, a->key, a->keylen, &len, &a->crc);
        a->n = rc == MKV_OK ? (long long)len : -1;
    } else if (strcmp(verb, PROTO_VERB_REMOVE) == 0) {
        rc = mkv_remove(mc, a->key, a->keylen);
        a->n = rc == MKV_OK;
    } else {
        rc = mkv_exists(mc, a->key, a->keylen);
        a->n = rc == 1;
        rc = rc < 0 ? rc : MKV_OK;
    }
    a->answered = rc == MKV_OK || rc == MKV_ENOTFOUND;
    a->failed = !a->answered;
    if (a->failed) log_warning("gateway: %s failed: %s", verb, mkv_last_error(mc));
}

static int unasked(const gw_answer *a) { return !a->answered && !a->failed && cluster_key_ok(a->keylen); }

/* A key's answer from one batch's outcome for it: 1 yes, 0 no, < 0 failed. */
static void answer_set(gw_answer *x, int got) {
    x->n = got == 1;
    x->answered = got >= 0;
    x->failed = !x->answered;
}

/* The EXISTS or DEL answers as one library batch (mkv_exists_batch,
 * mkv_remove_batch: over groups split by group, the parts at once, one
 * MOON.MEXISTS or MOON.MREMOVE each); a key the batch failed stays "no". */
static void answer_batch(mkv_client *mc, const char *verb, gw_answer *a, size_t n) {
    int remove = strcmp(verb, PROTO_VERB_REMOVE) == 0;
    mkv_obj *o = xcalloc(n, sizeof *o);
    int *res = xcalloc(n, sizeof *res);
    size_t *idx = xcalloc(n, sizeof *idx), m = 0;
    for (size_t i = 0; i < n; i++)
        if (unasked(&a[i])) {
            o[m] = (mkv_obj){.key = a[i].key, .keylen = a[i].keylen};
            idx[m++] = i;
        }
    cluster_master_wait();
    int rc = remove ? mkv_remove_batch(mc, o, m) : mkv_exists_batch(mc, o, m, res);
    for (size_t k = 0; k < m; k++) {
        int st = o[k].status;
        int got = rc != MKV_OK ? rc : !remove ? res[k] : st == MKV_OK ? 1 : st == MKV_ENOTFOUND ? 0 : st;
        answer_set(&a[idx[k]], got);
    }
    if (rc != MKV_OK) log_warning("gateway: %s failed: %s", remove ? PROTO_VERB_MREMOVE : PROTO_VERB_MEXISTS,
                                  mkv_last_error(mc));
    free(o);
    free(res);
    free(idx);
}

void cluster_answer(mkv_client *mc, const char *verb, gw_answer *a, size_t n) {
    size_t left = 0;
    for (size_t i = 0; i < n; i++) left += unasked(&a[i]);
    if (left > 1 && (strcmp(verb, PROTO_VERB_EXISTS) == 0 || strcmp(verb, PROTO_VERB_REMOVE) == 0)) {
        answer_batch(mc, verb, a, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (unasked(&a[i])) answer_one(mc, verb, &a[i]);
}

/* The store interface has no error for these: a failure counts as "no"
 * and is logged. */
static int cs_remove(store *s, const void *key, size_t keylen) {
    cluster_store *cs = cs_of(s);
    if (!cluster_key_ok(keylen)) return 0;
    cs->stats.loop_blocking++;
    int rc = mkv_remove(cs->mc, key, keylen);
    if (rc == MKV_OK) cs->stats.removes++;
    else if (rc != MKV_ENOTFOUND) log_warning("gateway: remove failed: %s", mkv_last_error(cs->mc));
    return rc == MKV_OK;
}

static int cs_exists(store *s, const void *key, size_t keylen) {
    cluster_store *cs = cs_of(s);
    if (!cluster_key_ok(keylen)) return 0;
    cs->stats.loop_blocking++;
    int rc = mkv_exists(cs->mc, key, keylen);
    if (rc < 0) log_warning("gateway: exists failed: %s", mkv_last_error(cs->mc));
    return rc == 1;
}

void cluster_store_info(store *s, resp_buf *out) {
    cluster_store *cs = cs_of(s);
    staging_stats st;
    staging_get_stats(cs->pool, &st);
    info_field(out, "master", "%s", cs->master);
    info_field(out, "replicas", "%d", cs->replicas);
    info_field(out, "workers", "%d", GATEWAY_WORKERS);
    info_field(out, "jobs_inflight", "%zu", workers_inflight(cs->workers));
    info_field(out, "jobs_done", "%llu", workers_done(cs->workers));
    info_field(out, "staging_pool_bytes", "%llu", (unsigned long long)st.pool_size);
    info_field(out, "staging_used_bytes", "%llu", (unsigned long long)st.pool_used);
    info_field(out, "staging_hot_bytes", "%llu", (unsigned long long)st.pool_hot);
    info_field(out, "staging_dedicated", "%llu", (unsigned long long)st.dedicated);
    info_field(out, "staging_dedicated_bytes", "%llu", (unsigned long long)st.dedicated_bytes);
    info_field(out, "staging_sparse", "%llu", (unsigned long long)st.sparse);
    info_field(out, "staging_refused", "%llu", (unsigned long long)st.refused);
    info_field(out, "cluster_puts", "%llu", (unsigned long long)cs->stats.puts);
    info_field(out, "cluster_gets", "%llu", (unsigned long long)cs->stats.gets);
    info_field(out, "cluster_removes", "%llu", (unsigned long long)cs->stats.removes);
    info_field(out, "cluster_streamed_puts", "%llu", (unsigned long long)cs->stats.streamed_puts);
    uint64_t streamed_gets, cut_gets;
    get_streamer_counts(cs->gets, &streamed_gets, &cut_gets);
    info_field(out, "cluster_gets_inline", "%llu", (unsigned long long)read_batcher_inline(cs->reads));
    info_field(out, "cluster_gets_inline_deferred", "%llu", (unsigned long long)read_batcher_deferred(cs->reads));
    info_field(out, "cluster_puts_inline", "%llu", (unsigned long long)put_batcher_inline(cs->puts));
    info_field(out, "cluster_put_batches_routed", "%llu", (unsigned long long)put_batcher_routed(cs->puts));
    info_field(out, "cluster_get_batches_fetched", "%llu", (unsigned long long)read_batcher_fetched(cs->reads));
    info_field(out, "cluster_streamed_gets", "%llu", (unsigned long long)streamed_gets);
    info_field(out, "cluster_streamed_gets_cut", "%llu", (unsigned long long)cut_gets);
    info_field(out, "cluster_failed_puts", "%llu", (unsigned long long)cs->stats.failed_puts);
    info_field(out, "cluster_failed_gets", "%llu", (unsigned long long)cs->stats.failed_gets);
    info_field(out, "cluster_empty_reads_refused", "%llu", (unsigned long long)cs->stats.empty_reads);
    info_field(out, "cluster_bytes_put", "%llu", (unsigned long long)cs->stats.bytes_put);
    info_field(out, "cluster_bytes_got", "%llu", (unsigned long long)cs->stats.bytes_got);
    info_field(out, "loop_blocking_calls", "%llu", (unsigned long long)cs->stats.loop_blocking);
    info_field(out, "worker_master_waits", "%llu", (unsigned long long)cluster_master_waits());
    info_field(out, "master_wakeups", "%llu", (unsigned long long)master_async_wakeups(cs->ma));
    info_field(out, "master_lease_flushes", "%llu", (unsigned long long)master_async_lease_flushes(cs->ma));
    mkv_transfer_stats ts;
    mkv_transfer_stats_get(cs->mc, &ts);   /* the process's client: every loop's bytes */
    info_field(out, "transfer_bytes_tcp", "%llu", (unsigned long long)ts.bytes_tcp);
    info_field(out, "transfer_bytes_shm", "%llu", (unsigned long long)ts.bytes_shm);
    info_field(out, "transfer_bytes_rdma", "%llu", (unsigned long long)ts.bytes_rdma);
    info_field(out, "transfer_retries", "%llu", (unsigned long long)ts.retries);
    info_field(out, "transfer_failovers", "%llu", (unsigned long long)ts.failovers);
    info_field(out, "transfer_shm_cold_bytes", "%llu", (unsigned long long)ts.shm_cold_bytes);
}

/* "# Memory" with the cluster's totals, as the master counts them: the
 * bytes of stored objects and the sum of the live nodes' segments. The
 * gateway's own numbers are in "# Gateway" (role info). */
static void cs_info(store *s, const store_stat *st, resp_buf *out, const char *section) {
    (void)s;
    if (!info_wants(section, "memory", 1)) return;
    info_section(out, "Memory");
    if (st && st->rc == STORE_OK) {
        info_field_bytes(out, "used_memory", st->bytes_used);
        info_field_bytes(out, "maxmemory", st->bytes_total);
    } else {
        info_field(out, "cluster_memory_unknown", "master unreachable");
    }
    info_field(out, "maxmemory_policy", "noeviction");
    info_field(out, "mem_allocator", "moonkv-cluster");
}

/* DBSIZE, KEYS, INFO, SCAN, FLUSHALL: the master answers (master_ask.h);
 * over master groups (no asynchronous connection then) each group's
 * master in turn, on a worker. */
static void cs_stat_async(store *s, store_stat *st, store_got_fn *done, void *ctx) {
    master_ask_stat(cs_of(s)->ma, cs_of(s)->workers, st, done, ctx);
}

static void cs_scan_async(store *s, uint64_t cursor, long count, store_page *pg, store_got_fn *done, void *ctx) {
    master_ask_scan(cs_of(s)->ma, cs_of(s)->workers, cursor, count, pg, done, ctx);
}

static void cs_flush_async(store *s, store_flushed *f, store_got_fn *done, void *ctx) {
    master_ask_flush(cs_of(s)->ma, cs_of(s)->workers, f, done, ctx);
}

/* MOON.PREFIX, PREFIXPIN, UNPIN: the master answers (master_ask.h); the
 * pins are held by the loop's asynchronous connection, one bound for all
 * its RESP clients (proto/pins.h). */
static void cs_pin_async(store *s, store_pinq *q, store_got_fn *done, void *ctx) {
    master_ask_pin(cs_of(s)->ma, cs_of(s)->face, cs_of(s)->workers, q, done, ctx);
}

/* The pool is registered once the client is taken (cs->registered). */
static void client_let_go(cluster_store *cs) {
    if (!cs->mc) return;
    if (cs->registered) staging_unregister(cs->pool, cs->mc);
    proc_client_put(cs->mc);
    cs->mc = NULL;
}

static void cs_destroy(store *s) {
    cluster_store *cs = cs_of(s);
    /* First: finishing jobs returns their buffers to the pool; then the
     * reads still waiting for the master finish unread. */
    workers_destroy(cs->workers);
    read_batcher_close(cs->reads);
    put_batcher_close(cs->puts);
    put_streamer_close(cs->streams);
    get_streamer_close(cs->gets);
    master_async_free(cs->ma);
    face_close(cs);
    read_batcher_free(cs->reads);
    put_batcher_free(cs->puts);
    put_streamer_free(cs->streams);
    get_streamer_free(cs->gets);
    if (cs->async_free) cs->async_free(cs->async);
    loop_timer_free(cs->trim);
    if (cs->loop) {
        loop_hook_del(cs->reap);
        reap_cb(cs->loop, cs);
    }
    free(cs->dead);
    for (store_pin *p = cs->free_pins, *next; p; p = next) {
        next = p->next;
        free(p);
    }
    for (store_put *p = cs->free_puts, *next; p; p = next) {
        next = p->next_free;
        free(p);
    }
    for (struct cs_read *q = cs->free_reads, *next; q; q = next) {
        next = q->next_free;
        free(q);
    }
    client_let_go(cs);
    staging_destroy(cs->pool);
    free(cs);
}

static const store_ops cluster_ops = {
    .put_start = cs_put_start,
    .put_start_streamed = cs_put_start_streamed,
    .put_progress = cs_put_progress,
    .put_end = cs_put_end,
    .put_abort = cs_put_abort,
    .get_async = cs_get_async,
    .release = cs_release,
    .remove = cs_remove,
    .exists = cs_exists,
    .size_of = cs_size_of,
    .checksum_of = cs_checksum_of,
    .stat_async = cs_stat_async,
    .scan_async = cs_scan_async,
    .flush_async = cs_flush_async,
    .info = cs_info,
    .pin_async = cs_pin_async,
    .destroy = cs_destroy,
    .space = NULL,
};

/* data_addrs as the library wants them: one comma-separated string. */
static void join_addrs(const mkv_config *cfg, char *buf, size_t len) {
    size_t pos = 0;
    buf[0] = '\0';
    for (int i = 0; i < cfg->ndata_addrs && pos < len; i++) {
        int n = snprintf(buf + pos, len - pos, "%s%s", i ? "," : "", cfg->data_addrs[i]);
        if (n < 0) break;
        pos += (size_t)n;
    }
}

/* Calls on the process's client at once: each loop and its workers. */
#define GATEWAY_LANES_MAX 16   /* mkv_options.lanes' bound */

/* The process's client, taken with the pool registered; the loop's
 * batchers and workers over it. */
static int connect_clients(cluster_store *cs, const mkv_config *cfg, char *err, size_t errlen) {
    char addrs[CONFIG_MAX_ADDRS * (CONFIG_STR_MAX + 1)];
    join_addrs(cfg, addrs, sizeof addrs);
    mkv_options opt;
    mkv_options_init(&opt);
    opt.master = cs->master;
    if (cfg->cluster_secret[0]) opt.cluster_secret = cfg->cluster_secret;
    if (cfg->master_auth[0]) opt.password = cfg->master_auth;
    if (cfg->transport[0]) opt.transport = cfg->transport;
    if (cfg->shm_mode[0]) opt.shm_mode = cfg->shm_mode;
    if (addrs[0]) opt.data_addrs = addrs;
    if (cfg->replicas > 0) opt.replicas = cfg->replicas;
    if (cfg->etcd[0]) {
        opt.etcd = cfg->etcd;
        opt.cluster_name = cfg->cluster_name;
        opt.groups = cs->groups = cfg->groups;   /* each key to its slot's group, MOVED followed */
    }
    /* A lane for every thread that may call at once, so the loop's calls
     * that must not wait (inline reads and writes) find one free. */
    int callers = cfg->io_threads * (GATEWAY_WORKERS + 1);
    opt.lanes = callers < GATEWAY_LANES_MAX ? callers : GATEWAY_LANES_MAX;
    char why[256];
    int rc = proc_client_take(&opt, &cs->mc, why, sizeof why);
    if (rc == MKV_OK && (rc = staging_register(cs->pool, cs->mc)) != MKV_OK)
        snprintf(why, sizeof why, "%s", mkv_last_error(cs->mc));
    cs->registered = rc == MKV_OK;
    if (rc != MKV_OK) {
        snprintf(err, errlen, "cannot use the master %s: %s", cs->master, why);
        return -1;
    }
    if (!(cs->workers = workers_create(cs->loop, GATEWAY_WORKERS, cs->mc, why, sizeof why))) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    /* The asynchronous connection is the client's own (its async face),
     * with --master as through etcd, where it follows the leader: the
     * process has one master connection. Over groups there are several
     * and none: the batches take the blocking calls, which route each key
     * to its group's (read_batch.h, put_batch.h). */
    if (!cs->groups) cs->ma = master_async_over(cs->loop, cs->mc);
    else face_open(cs);
    /* Only shm reads without waiting, and only while no loop can wait for a lane. */
    int may_shm = !cfg->transport[0] || strcmp(cfg->transport, "auto") == 0 || strcmp(cfg->transport, "shm") == 0;
    int inline_reads = may_shm && callers <= GATEWAY_LANES_MAX;
    cs->reads = read_batcher_create(cs->loop, cs->ma, cs->face, cs->workers, cs->pool, cs->mc, inline_reads);
    cs->puts = put_batcher_create(cs->loop, cs->ma, cs->face, cs->workers, cs->mc, cs->replicas, cs->reads, cs->groups);
    if (cs->ma) cs->streams = put_streamer_create(cs->puts, cs->ma, cs->workers, cs->pool, cs->mc, cs->replicas);
    cs->gets = get_streamer_create(cs->workers, cs->ma, cs->mc);
    return 0;
}

/* An idle gateway should not hold the memory its busiest moment needed:
 * after STAGING_IDLE_MS without pool traffic its pages go back. */
#define STAGING_TRIM_MS 500
#define STAGING_IDLE_MS 2000

static void trim_cb(event_loop *el, void *data) {
    cluster_store *cs = data;
    (void)el;
    uint64_t freed = staging_trim(cs->pool, STAGING_IDLE_MS);
    if (freed) log_debug("gateway: idle staging pool gave back %llu bytes", (unsigned long long)freed);
}

store *cluster_store_create(event_loop *loop, const mkv_config *cfg, char *err, size_t errlen) {
    cluster_store *cs = xcalloc(1, sizeof *cs);
    cs->base.ops = &cluster_ops;
    cs->loop = loop;
    /* With etcd the master is whoever leads (libmoonkv follows it); the
     * INFO/DBSIZE side connection has no fixed address then. */
    snprintf(cs->master, sizeof cs->master, "%s",
             cfg->groups ? "groups-from-etcd" : cfg->etcd[0] ? "leader-from-etcd" : cfg->master[0] ? cfg->master
                                                                                               : "127.0.0.1:7380");
    cs->replicas = cfg->replicas > 0 ? cfg->replicas : 0;
    cs->reap = loop_hook_add(loop, SERVER_HOOK_FLUSH - 1, reap_cb, cs);
    cs->pool = staging_create(cfg->segment_size, (uint64_t)cfg->proto_max_bulk_len, err, errlen);
    if (!cs->pool || connect_clients(cs, cfg, err, errlen) < 0) {
        cs_destroy(&cs->base);
        return NULL;
    }
    cs->trim = loop_timer_create(loop, trim_cb, cs);
    loop_timer_start(cs->trim, STAGING_TRIM_MS, STAGING_TRIM_MS);
    return &cs->base;
}
