/* tests/integration/stream_harness.h - a stream of puts on its own thread
 * that records when every key was acknowledged, and the check that every
 * acknowledged key reads back byte-exact: the fault-injection test
 * (test_acked_faults) and the bench's failover step (bench_acked) inject
 * their faults while one runs.
 *
 * Two kinds: SETs through a gateway (hiredis, one at a time), and
 * libmoonkv batch puts (mkv_put_batch, ST_BATCH keys per call). Key i of a
 * stream is "<name>-<i>"; its value is a pattern of the key, so a wrong
 * replica cannot pass for it. A key is tried once: one that failed is
 * neither counted nor checked (whether it exists is not defined). */
#ifndef MKV_STREAM_HARNESS_H
#define MKV_STREAM_HARNESS_H

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "core/util.h"

#define ST_BATCH     16     /* keys per mkv_put_batch */
#define ST_CHECK     32     /* keys per pipelined GET round or mkv_get_batch */
#define ST_PAUSE_MS  10     /* after a failed put: the cluster is changing master */

typedef enum st_kind { ST_GATEWAY, ST_LIBMOONKV } st_kind;

typedef struct st_stream {
    /* set by the caller before st_start */
    st_kind kind;
    int gw_port;               /* ST_GATEWAY: the gateway on 127.0.0.1 */
    mkv_options opt;           /* ST_LIBMOONKV: how to reach the master (its strings outlive the stream) */
    int replicas;              /* ST_LIBMOONKV */
    char name[32];             /* key prefix, unique per stream */
    size_t vlen;
    int max_keys;              /* the stream ends there at the latest */
    int rate;                  /* keys tried per second at most (0: as fast as it goes) */
    /* the thread's; read by others once st_stop returned, or as atomics */
    pthread_t th;
    int started, stop;
    int tried;
    uint64_t next_us;          /* paced: when the next attempt may start */
    uint64_t *ack_ms;          /* per key: mono_ms of its OK, 0 if none */
    long long acks, errors;
    char last_err[160];
} st_stream;

/* What a check found among the acknowledged keys. A lost key is one
 * not read back by the deadline: either the store said it has none (nil,
 * MKV_ENOTFOUND) the last time, or the read itself failed (an error
 * reply, a failed batch, no connection: the store did not say) and
 * last_err says how. All lost and all unanswered is an outage of the
 * read path, not a loss; the "# " lines tell them apart. */
typedef struct st_result {
    long long acked, lost, wrong;
    long long lost_from, lost_to;   /* ack time of the lost keys, ms after the event (negative: before) */
    long long unanswered;           /* of the lost: their last read failed rather than said "none" */
    char last_err[160];             /* the last failed read's error */
} st_result;

static inline void st_key(const st_stream *s, int i, char *buf, size_t len) {
    snprintf(buf, len, "%s-%d", s->name, i);
}

static inline void st_value(const st_stream *s, int i, void *buf) {
    uint64_t seed = 1469598103934665603ULL;   /* FNV-1a of the name, then the index */
    for (const char *p = s->name; *p; p++) seed = (seed ^ (uint8_t)*p) * 1099511628211ULL;
    h_fill(buf, s->vlen, seed ^ (uint64_t)i);
}

/* A failed put: counted, the last error kept (and, with MKV_FAULTS_TRACE
 * set, every one on stderr with its mono_ms), a pause. */
static inline void st_note_error(st_stream *s, const char *what) {
    if (getenv("MKV_FAULTS_TRACE")) fprintf(stderr, "trace %llu %s: %s\n", (unsigned long long)mono_ms(), s->name, what);
    __atomic_add_fetch(&s->errors, 1, __ATOMIC_RELAXED);
    snprintf(s->last_err, sizeof s->last_err, "%s", what);
    usleep(ST_PAUSE_MS * 1000);
}

static inline void st_acked(st_stream *s, int i) {
    __atomic_store_n(&s->ack_ms[i], mono_ms(), __ATOMIC_RELEASE);
    __atomic_add_fetch(&s->acks, 1, __ATOMIC_RELAXED);
}

static inline int st_stopping(const st_stream *s) {
    return __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE) || s->tried >= s->max_keys;
}

/* Waits for the pace of an attempt at n keys. A paced stream stays within
 * its bound for as long as a fault lasts, its load does not depend on the
 * machine's, and after a pause it goes on at its rate (no burst to catch
 * up: the rate after a fault compares with the rate before). */
static inline void st_pace(st_stream *s, int n) {
    if (s->rate <= 0) return;
    uint64_t now = mono_us();
    if (s->next_us > now) usleep((useconds_t)(s->next_us - now));
    s->next_us = (s->next_us > now ? s->next_us : now) + (uint64_t)n * 1000000 / (uint64_t)s->rate;
}

static inline void st_run_gateway(st_stream *s, char *val) {
    redisContext *c = NULL;
    char key[64];
    while (!st_stopping(s)) {
        if (!c && !(c = h_redis_ms("127.0.0.1", s->gw_port, 10000))) {
            st_note_error(s, "cannot connect to the gateway");
            continue;
        }
        st_pace(s, 1);
        int i = s->tried++;
        st_key(s, i, key, sizeof key);
        st_value(s, i, val);
        redisReply *r = redisCommand(c, "SET %s %b", key, val, s->vlen);
        if (r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0) st_acked(s, i);
        else st_note_error(s, r && r->str ? r->str : c->errstr);
        if (!r) {   /* the connection is gone or timed out: a new one */
            redisFree(c);
            c = NULL;
        }
        freeReplyObject(r);
    }
    if (c) redisFree(c);
}

static inline void st_run_batch(st_stream *s, char *vals) {
    mkv_client *mc = NULL;
    mkv_obj objs[ST_BATCH];
    char keys[ST_BATCH][64];
    while (!st_stopping(s)) {
        if (!mc && (mkv_connect(&mc, &s->opt) != MKV_OK ||
                    mkv_register_buffer(mc, vals, ST_BATCH * s->vlen) != MKV_OK)) {
            st_note_error(s, mc ? mkv_last_error(mc) : mkv_last_error(NULL));
            mkv_close(mc);
            mc = NULL;
            continue;
        }
        int n = s->max_keys - s->tried < ST_BATCH ? s->max_keys - s->tried : ST_BATCH, first = s->tried;
        st_pace(s, n);
        for (int k = 0; k < n; k++) {
            st_key(s, first + k, keys[k], sizeof keys[k]);
            st_value(s, first + k, vals + (size_t)k * s->vlen);
            objs[k] = (mkv_obj){keys[k], strlen(keys[k]), vals + (size_t)k * s->vlen, s->vlen, 0};
        }
        s->tried += n;
        int rc = mkv_put_batch(mc, objs, (size_t)n, s->replicas);
        int bad = 0;
        for (int k = 0; k < n; k++) {
            if (rc == MKV_OK && objs[k].status == MKV_OK) st_acked(s, first + k);
            else bad = rc != MKV_OK ? rc : objs[k].status;
        }
        if (bad) st_note_error(s, mkv_last_error(mc));
    }
    mkv_close(mc);
}

static inline void *st_main(void *arg) {
    st_stream *s = arg;
    char *buf = malloc(ST_BATCH * s->vlen);
    if (buf) {
        if (s->kind == ST_GATEWAY) st_run_gateway(s, buf);
        else st_run_batch(s, buf);
    }
    free(buf);
    return NULL;
}

/* Starts s (its fields above the thread's set): 0, or -1. */
static inline int st_start(st_stream *s) {
    s->tried = 0;
    s->stop = 0;
    s->acks = s->errors = 0;
    s->last_err[0] = '\0';
    s->next_us = 0;
    s->ack_ms = calloc((size_t)s->max_keys, sizeof *s->ack_ms);
    if (!s->ack_ms || pthread_create(&s->th, NULL, st_main, s) != 0) return -1;
    s->started = 1;
    return 0;
}

static inline void st_stop(st_stream *s) {
    if (!s->started) return;
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    pthread_join(s->th, NULL);
    s->started = 0;
}

static inline void st_free(st_stream *s) {
    st_stop(s);
    free(s->ack_ms);
    s->ack_ms = NULL;
}

static inline long long st_acks(const st_stream *s) { return __atomic_load_n(&s->acks, __ATOMIC_RELAXED); }

/* The first acknowledgement at or after t (mono_ms), 0 if none yet;
 * safe while the stream runs. */
static inline uint64_t st_first_ack_since(const st_stream *s, uint64_t t) {
    uint64_t first = 0;
    for (int i = 0; i < s->max_keys; i++) {
        uint64_t a = __atomic_load_n(&s->ack_ms[i], __ATOMIC_ACQUIRE);
        if (a >= t && (!first || a < first)) first = a;
    }
    return first;
}

/* The longest time without an acknowledgement in [from, to]. */
static inline uint64_t st_longest_pause(const st_stream *s, uint64_t from, uint64_t to) {
    uint64_t last = from, longest = 0;
    for (int i = 0; i < s->max_keys; i++) {   /* keys are tried in order: acks come in order */
        uint64_t a = s->ack_ms[i];
        if (!a || a < from || a > to) continue;
        if (a - last > longest) longest = a - last;
        last = a;
    }
    return to - last > longest ? to - last : longest;
}

/* ---- the check ---- */

enum { ST_OK, ST_MISSING, ST_WRONG, ST_FAILED };

/* Reads keys idx[0..n) through the gateway (pipelined): a verdict each;
 * -1 when the reads got no replies (the reason in err). */
static inline int st_read_gateway(const st_stream *s, redisContext **c, const int *idx, int n, int *verdict,
                                  char *want, char *err, size_t errlen) {
    if (!*c && !(*c = h_redis_ms("127.0.0.1", s->gw_port, 10000))) {
        snprintf(err, errlen, "cannot connect to the gateway");
        return -1;
    }
    char key[64];
    for (int k = 0; k < n; k++) {
        st_key(s, idx[k], key, sizeof key);
        redisAppendCommand(*c, "GET %s", key);
    }
    for (int k = 0; k < n; k++) {
        redisReply *r = NULL;
        if (redisGetReply(*c, (void **)&r) != REDIS_OK) {
            snprintf(err, errlen, "gateway connection: %s", (*c)->errstr);
            redisFree(*c);
            *c = NULL;
            return -1;
        }
        st_value(s, idx[k], want);
        if (r->type == REDIS_REPLY_STRING) {
            verdict[k] = r->len == s->vlen && memcmp(r->str, want, s->vlen) == 0 ? ST_OK : ST_WRONG;
        } else if (r->type == REDIS_REPLY_ERROR) {   /* such as TRYAGAIN: asked again */
            verdict[k] = ST_FAILED;
            snprintf(err, errlen, "%s", r->str);
        } else {
            verdict[k] = ST_MISSING;   /* nil: asked again until the deadline */
        }
        freeReplyObject(r);
    }
    return 0;
}

/* The same through libmoonkv (mkv_get_batch into back, registered). */
static inline int st_read_batch(const st_stream *s, mkv_client *mc, const int *idx, int n, int *verdict,
                                char *want, char *back, char *err, size_t errlen) {
    mkv_obj objs[ST_CHECK];
    char keys[ST_CHECK][64];
    for (int k = 0; k < n; k++) {
        st_key(s, idx[k], keys[k], sizeof keys[k]);
        objs[k] = (mkv_obj){keys[k], strlen(keys[k]), back + (size_t)k * s->vlen, s->vlen, 0};
    }
    memset(back, 0, (size_t)n * s->vlen);
    int rc = mkv_get_batch(mc, objs, (size_t)n);
    if (rc != MKV_OK) {
        snprintf(err, errlen, "mkv_get_batch: %s: %s", mkv_strerror(rc), mkv_last_error(mc));
        return -1;
    }
    for (int k = 0; k < n; k++) {
        st_value(s, idx[k], want);
        if (objs[k].status == MKV_OK) {
            verdict[k] = objs[k].len == s->vlen && memcmp(back + (size_t)k * s->vlen, want, s->vlen) == 0
                             ? ST_OK : ST_WRONG;
        } else if (objs[k].status == MKV_ECORRUPT) {
            verdict[k] = ST_WRONG;
        } else if (objs[k].status == MKV_ENOTFOUND) {
            verdict[k] = ST_MISSING;
        } else {
            verdict[k] = ST_FAILED;
            snprintf(err, errlen, "%s", mkv_strerror(objs[k].status));
        }
    }
    return 0;
}

/* Every key s acknowledged (s stopped), read until it is there or until
 * deadline (mono_ms; every key is read at least once): the lost and wrong
 * ones counted in *res, with their ack times against event (mono_ms). The
 * first few lost or wrong keys are printed as TAP diagnostics unless quiet. */
/* The check's libmoonkv client, connected and with back registered:
 * *mc, or NULL with the reason in err (tried again on the next pass). */
static inline mkv_client *st_check_client(const st_stream *s, mkv_client **mc, char *back, char *err,
                                          size_t errlen) {
    if (*mc) return *mc;
    int rc = mkv_connect(mc, &s->opt);
    if (rc == MKV_OK) rc = mkv_register_buffer(*mc, back, ST_CHECK * s->vlen);
    if (rc == MKV_OK) return *mc;
    snprintf(err, errlen, "connect: %s: %s", mkv_strerror(rc), mkv_last_error(*mc));
    mkv_close(*mc);
    *mc = NULL;
    return NULL;
}

static inline void st_check(const st_stream *s, uint64_t deadline, uint64_t event, int quiet, st_result *res) {
    memset(res, 0, sizeof *res);
    int *pending = malloc(sizeof(int) * (size_t)(s->max_keys + 1)), np = 0;
    char *failed = calloc((size_t)s->max_keys + 1, 1);   /* per key: its last read failed */
    char *want = malloc(s->vlen), *back = malloc(ST_CHECK * s->vlen);
    redisContext *c = NULL;
    mkv_client *mc = NULL;
    if (!pending || !failed || !want || !back) abort();
    for (int i = 0; i < s->tried; i++)
        if (s->ack_ms[i]) pending[np++] = i;
    res->acked = np;
    for (int pass = 0; np > 0 && (pass == 0 || mono_ms() < deadline); pass++) {
        int left = 0;
        for (int at = 0; at < np; at += ST_CHECK) {
            int n = np - at < ST_CHECK ? np - at : ST_CHECK, verdict[ST_CHECK];
            char *err = res->last_err;
            size_t errlen = sizeof res->last_err;
            int rc = s->kind == ST_GATEWAY ? st_read_gateway(s, &c, pending + at, n, verdict, want, err, errlen)
                     : st_check_client(s, &mc, back, err, errlen)
                         ? st_read_batch(s, mc, pending + at, n, verdict, want, back, err, errlen) : -1;
            for (int k = 0; k < n; k++) {
                int key = pending[at + k];
                if (rc == 0 && verdict[k] == ST_WRONG) {
                    if (res->wrong++ < 3 && !quiet) printf("# %s-%d: wrong bytes\n", s->name, key);
                } else if (rc != 0 || verdict[k] != ST_OK) {
                    failed[key] = rc != 0 || verdict[k] == ST_FAILED;
                    pending[left++] = key;
                }
            }
        }
        np = left;
        if (np) usleep(100 * 1000);
    }
    for (int k = 0; k < np; k++) {
        long long rel = (long long)s->ack_ms[pending[k]] - (long long)event;
        if (k == 0 || rel < res->lost_from) res->lost_from = rel;
        if (k == 0 || rel > res->lost_to) res->lost_to = rel;
        res->unanswered += failed[pending[k]];
        if (k < 3 && !quiet)
            printf("# %s-%d: %s (acknowledged %lld ms after the event)\n", s->name, pending[k],
                   failed[pending[k]] ? "not read: the read failed" : "lost: nil", rel);
    }
    if (res->unanswered && !quiet)
        printf("# %s: %lld of the %d not read back were never answered; the last error: %s\n", s->name,
               res->unanswered, np, res->last_err);
    res->lost = np;
    free(failed);
    if (c) redisFree(c);
    mkv_close(mc);
    free(pending);
    free(want);
    free(back);
}

#endif
