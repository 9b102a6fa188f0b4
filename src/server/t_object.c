/* server/t_object.c - object commands: SET/PUT, GET, MGET, DEL/REMOVE,
 * EXISTS, STRLEN, TTL/PTTL, TYPE, SCAN, KEYS, DBSIZE, FLUSHALL/FLUSHDB.
 *
 * Objects are write-once: SET on an existing key is refused (or, with
 * on_conflict keep, answered OK) and the stored value stays as it was.
 * SET EX/PX/EXAT/PXAT are accepted only as a garbage-collection hint, on
 * a store that collects (maxmemory_policy other than noeviction). A SET's value normally streams from the socket
 * straight into the store (the row's value_arg): networking has called
 * put_start and c->pending_put / c->pending_put_err hold the outcome. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crc32c.h"
#include "core/log.h"
#include "core/util.h"
#include "proto/limits.h"
#include "proto/pins.h"
#include "proto/verbs.h"
#include "server/commands.h"
#include "server/glob.h"

/* Values at least this big are sent straight out of the segment. */
#define GET_ZERO_COPY_MIN (16 * 1024)
#define SCAN_COUNT_DEFAULT 10
#define SCAN_COUNT_MAX (1L << 20)

static store *store_of(client *c) { return c->srv->store; }

/* ---- SET ---- */

static const char *const set_unsupported[] = {"XX", "GET", "KEEPTTL"};

/* The expiry options, as a multiple of ms and whether they are absolute. */
static const struct {
    const char *name;
    long long unit_ms;
    int absolute;
} set_expiry_opts[] = {{"EX", 1000, 0}, {"PX", 1, 0}, {"EXAT", 1000, 1}, {"PXAT", 1, 1}};

/* Collection hints need a store that collects. */
static int expiry_refused(client *c, const char *opt) {
    store *s = store_of(c);
    if (!s->ops->set_expiry) {
        reply_errorf(c, "ERR moonkv objects are write-once and never expire here: SET option '%s' "
                        "is a garbage-collection hint, accepted only where values are collected "
                        "(standalone with maxmemory_policy allkeys-lru or allkeys-random)", opt);
        return 1;
    }
    if (c->srv->cfg.maxmemory_policy == 0) {
        reply_errorf(c, "ERR moonkv objects are write-once and never expire: SET option '%s' is a "
                        "garbage-collection hint and maxmemory_policy is noeviction "
                        "(set allkeys-lru or allkeys-random to use it)", opt);
        return 1;
    }
    return 0;
}

/* EX/PX/EXAT/PXAT at argv[i] with its value at i+1: ms from now in
 * *ttl_ms. 0 ok, -1 after replying an error. */
static int set_parse_expiry(client *c, int i, int j, uint64_t *ttl_ms) {
    if (expiry_refused(c, set_expiry_opts[j].name)) return -1;
    long long v;
    long long unit = set_expiry_opts[j].unit_ms;
    if (i + 1 >= c->argc) {
        reply_syntax_error(c);
        return -1;
    }
    if (arg_to_ll(&c->argv[i + 1], LLONG_MIN, LLONG_MAX, &v) < 0) {
        reply_error(c, "ERR value is not an integer or out of range");
        return -1;
    }
    if (v <= 0 || v > LLONG_MAX / unit) {
        reply_error(c, "ERR invalid expire time in 'set' command");
        return -1;
    }
    uint64_t ms = (uint64_t)v * (uint64_t)unit;
    if (set_expiry_opts[j].absolute) {
        uint64_t now = wall_ms();
        ms = ms > now ? ms - now : 1;   /* already past: a victim from now on */
    }
    *ttl_ms = ms;
    return 0;
}

/* Options after key and value. 0 ok (nx set, *ttl_ms 0 or an expiry
 * hint), -1 after replying an error. */
static int set_parse_options(client *c, int *nx, uint64_t *ttl_ms) {
    *nx = 0;
    *ttl_ms = 0;
    for (int i = 3; i < c->argc; i++) {
        const resp_arg *a = &c->argv[i];
        if (strieq_len(a->ptr, a->len, "NX")) {
            *nx = 1;
            continue;
        }
        int expiry = -1;
        for (size_t j = 0; j < sizeof set_expiry_opts / sizeof set_expiry_opts[0]; j++)
            if (strieq_len(a->ptr, a->len, set_expiry_opts[j].name)) expiry = (int)j;
        if (expiry >= 0) {
            if (*ttl_ms) {
                reply_syntax_error(c);   /* two expiry options */
                return -1;
            }
            if (set_parse_expiry(c, i, expiry, ttl_ms) < 0) return -1;
            i++;
            continue;
        }
        for (size_t j = 0; j < sizeof set_unsupported / sizeof set_unsupported[0]; j++) {
            if (strieq_len(a->ptr, a->len, set_unsupported[j])) {
                reply_errorf(c, "ERR moonkv objects are write-once: SET option '%s' is not supported",
                             set_unsupported[j]);
                return -1;
            }
        }
        reply_syntax_error(c);
        return -1;
    }
    return 0;
}

/* Starts the put unless networking already did while the value arrived;
 * either way on STORE_OK *put holds the in-flight put with the bytes in
 * place. One path for streamed and in-memory values. */
static int set_begin(client *c, store_put **put, uint64_t *size) {
    if (c->pending_put || c->pending_put_err) {
        *put = c->pending_put;
        *size = c->pending_put_size;
        c->pending_put = NULL;
        int err = c->pending_put_err;
        c->pending_put_err = 0;
        return *put ? STORE_OK : err;
    }
    store *s = store_of(c);
    const resp_arg *key = &c->argv[1], *val = &c->argv[2];
    void *dst;
    *size = val->len;
    int rc = s->ops->put_start(s, key->ptr, key->len, val->len, &dst, put);
    if (rc == STORE_OK && val->len > 0) memcpy(dst, val->ptr, val->len);
    return rc;
}

/* Keys are content hashes, so a second put of the same key normally
 * carries the same bytes: that is a no-op, not a conflict, and answers OK
 * (nothing is overwritten). Different bytes under a stored key are the
 * conflict write-once forbids. An in-flight key never matches. A store
 * that can tell size and CRC32C without reading (the cluster) is compared
 * by those: other bytes of the same size pass as the same with odds of
 * 2^-32, and are then not stored (the stored value stays). */
static int same_value_stored(client *c) {
    store *s = store_of(c);
    const resp_arg *key = &c->argv[1], *val = &c->argv[2];
    if (s->ops->checksum_of) {
        uint64_t len;
        uint32_t crc;
        if (s->ops->checksum_of(s, key->ptr, key->len, &len, &crc) != STORE_OK) return 0;
        return len == val->len && crc == crc32c(0, val->ptr, val->len);
    }
    const void *data;
    uint64_t len;
    store_pin *pin;
    if (s->ops->get(s, key->ptr, key->len, &data, &len, &pin) != STORE_OK) return 0;
    int same = len == val->len && (len == 0 || memcmp(data, val->ptr, len) == 0);
    s->ops->release(s, pin);
    return same;
}

/* The store's own reply text for a refusal of class word ("EXISTS ..."
 * from the local table or the master), or NULL to use the generic one. */
static const char *store_reason(const store *s, const char *word) {
    size_t n = strlen(word);
    return strncmp(s->errstr, word, n) == 0 && s->errstr[n] == ' ' ? s->errstr : NULL;
}

/* Only a store with a segment here (->space) can say how full it is. */
static void reply_nospace(client *c, uint64_t size) {
    store *s = c->srv->store;
    const char *why = store_reason(s, "NOSPACE");
    uint64_t free_bytes = 0, largest = 0;
    if (why) {
        reply_error(c, why);
    } else if (s->ops->space) {
        s->ops->space(s, &free_bytes, &largest);
        reply_errorf(c, "NOSPACE not enough memory for a value of %llu bytes "
                        "(segment: %llu free, largest free extent %llu)",
                     (unsigned long long)size, (unsigned long long)free_bytes,
                     (unsigned long long)largest);
    } else {
        reply_errorf(c, "NOSPACE no room for a value of %llu bytes", (unsigned long long)size);
    }
}

/* A failure the command has no words of its own for. */
static void reply_store_error(client *c, int rc) {
    store *s = c->srv->store;
    if (rc == STORE_REFUSED) reply_error(c, s->errstr);
    else reply_errorf(c, "ERR %s: %s", store_strerror(rc), s->errstr);
}

/* same: whether the stored value is the SET's bytes, when the caller
 * knows (1 or 0); -1 asks the store here (same_value_stored). */
static void reply_put_error(client *c, int rc, uint64_t size, int nx, int same) {
    server *srv = c->srv;
    store *s = srv->store;
    char why[sizeof s->errstr];
    switch (rc) {
    case STORE_EXISTS:
        /* A copy: looking the stored value up may rewrite errstr. */
        snprintf(why, sizeof why, "%s", store_reason(s, "EXISTS") ? s->errstr : "EXISTS key already exists");
        if (nx) {
            srv->stats.exists_rejections++;
            reply_null(c);
        } else if (same > 0 || (same < 0 && same_value_stored(c))) {
            srv->stats.idempotent_puts++;
            reply_ok(c);
        } else if (srv->cfg.on_conflict == CONFLICT_KEEP) {
            /* Write-once still holds: the first value stays, the client
             * (that expects +OK to every SET) is told it is stored. */
            srv->stats.conflicts_kept++;
            reply_ok(c);
        } else {
            srv->stats.exists_rejections++;
            reply_error(c, why);
        }
        break;
    case STORE_NOSPACE:
        srv->stats.nospace_rejections++;
        reply_nospace(c, size);
        break;
    case STORE_TOOBIG:
        srv->stats.nospace_rejections++;
        reply_errorf(c, "TOOBIG a value of %llu bytes is larger than the store can ever hold",
                     (unsigned long long)size);
        break;
    default:
        reply_store_error(c, rc);
        break;
    }
}

void t_object_reply_put_refused(client *c, int rc, uint64_t size) { reply_put_error(c, rc, size, 0, -1); }

void t_object_reply_set(client *c, int rc, uint64_t size, int nx, int same) {
    if (rc == STORE_OK) reply_ok(c);
    else reply_put_error(c, rc, size, nx, same);
}

static void set_command(client *c) {
    int nx;
    uint64_t ttl_ms;
    if (set_parse_options(c, &nx, &ttl_ms) < 0) return;   /* dispatch aborts a streamed put */
    store *s = store_of(c);
    store_put *put = NULL;
    uint64_t size = 0;
    int rc = set_begin(c, &put, &size);
    if (rc == STORE_OK) rc = s->ops->put_end(s, put);
    if (rc == STORE_OK && ttl_ms) s->ops->set_expiry(s, c->argv[1].ptr, c->argv[1].len, ttl_ms);
    t_object_reply_set(c, rc, size, nx, -1);
}

/* ---- reads ---- */

typedef struct value_ref {
    store *s;
    store_pin *pin;
} value_ref;

static void value_ref_release(void *ctx) {
    value_ref *ref = ctx;
    ref->s->ops->release(ref->s, ref->pin);
    free(ref);
}

static void value_ref_corrupt(void *ctx, uint32_t slice) {
    value_ref *ref = ctx;
    if (ref->s->ops->slice_corrupt) ref->s->ops->slice_corrupt(ref->s, ref->pin, slice);
}

/* A read's outcome as a bulk reply (null if absent), whichever store
 * and whenever it came: the pin is taken. Big values go out zero-copy,
 * pinned until written; a sliced one is checked slice by slice while it
 * is sent. */
void t_object_reply_got(client *c, store_got *g) {
    server *srv = c->srv;
    store *s = srv->store;
    if (g->rc == STORE_NOTFOUND) {
        srv->stats.keyspace_misses++;
        reply_null(c);
        return;
    }
    if (g->rc != STORE_OK) {
        if (g->rc == STORE_REFUSED) reply_error(c, g->errstr);
        else reply_errorf(c, "ERR %s: %s", store_strerror(g->rc), g->errstr);
        return;
    }
    srv->stats.keyspace_hits++;
    if (g->len >= GET_ZERO_COPY_MIN) {
        value_ref *ref = xmalloc(sizeof *ref);
        ref->s = s;
        ref->pin = g->pin;
        reply_bulk_ref_sliced(c, g->data, g->len, &g->sl, value_ref_release, value_ref_corrupt, ref);
    } else {
        reply_bulk(c, g->data, g->len);
        s->ops->release(s, g->pin);
    }
    g->pin = NULL;
}

static void got_inline(void *ctx) { *(int *)ctx = 1; }

/* A store that completes later here would leave the reply unwritten: its
 * role has its own command, which holds the reply slot meanwhile. */
static void must_be_inline(int done) {
    if (done) return;
    log_warning("t_object: a store answered later without its role holding the reply");
    abort();
}

/* Keys read on the stack up to this many (a GET, a short MGET). */
#define READ_ON_STACK 8

/* GET (one key) or MGET (array): the store's reads complete inline here;
 * a store that completes later has its role's own GET (gateway_async.c),
 * which holds the reply slot meanwhile. */
static void read_command(client *c, int array) {
    store *s = store_of(c);
    size_t n = (size_t)c->argc - 1;
    store_key kbuf[READ_ON_STACK], *keys = n <= READ_ON_STACK ? kbuf : xmalloc(n * sizeof *keys);
    store_got gbuf[READ_ON_STACK], *got = n <= READ_ON_STACK ? gbuf : xmalloc(n * sizeof *got);
    for (size_t i = 0; i < n; i++) keys[i] = (store_key){c->argv[i + 1].ptr, c->argv[i + 1].len};
    int done = 0;
    s->ops->get_async(s, keys, n, 0, got, got_inline, &done);
    if (!done) {
        log_warning("t_object: a store completed a read later without its role holding the reply");
        abort();
    }
    if (array) reply_array(c, (long long)n);
    for (size_t i = 0; i < n; i++) t_object_reply_got(c, &got[i]);
    if (keys != kbuf) free(keys);
    if (got != gbuf) free(got);
}

static void get_command(client *c) { read_command(c, 0); }

static void mget_command(client *c) { read_command(c, 1); }

void t_object_reply_answers(client *c, const command *cmd, const long long *n, size_t nkeys) {
    const char *name = cmd->name;
    long long sum = 0;
    for (size_t i = 0; i < nkeys; i++) sum += n[i] > 0;
    if (strcmp(name, "strlen") == 0) reply_integer(c, n[0] > 0 ? n[0] : 0);
    else if (strcmp(name, "type") == 0) reply_simple(c, n[0] > 0 ? "string" : "none");
    else if (strcmp(name, "ttl") == 0 || strcmp(name, "pttl") == 0) reply_integer(c, n[0] > 0 ? -1 : -2);
    else reply_integer(c, sum);   /* DEL, REMOVE, UNLINK, EXISTS */
}

/* The outcomes of the keys in c->argv, asked one after another. */
#define KEYS_ON_STACK 16

static void answer_keys(client *c, int (*ask)(store *s, const void *key, size_t keylen)) {
    store *s = store_of(c);
    size_t n = (size_t)c->argc - 1;
    long long buf[KEYS_ON_STACK] = {0}, *out = n <= KEYS_ON_STACK ? buf : xmalloc(n * sizeof *out);
    for (size_t i = 0; i < n; i++) out[i] = ask(s, c->argv[i + 1].ptr, c->argv[i + 1].len);
    t_object_reply_answers(c, c->last_cmd, out, n);
    if (out != buf) free(out);
}

static int ask_remove(store *s, const void *key, size_t keylen) { return s->ops->remove(s, key, keylen); }
static int ask_exists(store *s, const void *key, size_t keylen) { return s->ops->exists(s, key, keylen); }

static void del_command(client *c) { answer_keys(c, ask_remove); }

static void exists_command(client *c) { answer_keys(c, ask_exists); }

static void strlen_command(client *c) {
    store *s = store_of(c);
    uint64_t len = 0;
    long long n = s->ops->size_of(s, c->argv[1].ptr, c->argv[1].len, &len) == STORE_OK ? (long long)len : -1;
    t_object_reply_answers(c, c->last_cmd, &n, 1);
}

/* TTL/PTTL: -2 no such key, -1 no expiry hint, else what is left (0
 * once passed: the value stays until it is collected). */
static void reply_ttl(client *c, long long unit_ms) {
    store *s = store_of(c);
    const resp_arg *key = &c->argv[1];
    int64_t ms = -1;
    if (!s->ops->ttl) {   /* no expiry hints: -1 or -2 by whether the key exists */
        answer_keys(c, ask_exists);
        return;
    }
    if (s->ops->ttl(s, key->ptr, key->len, &ms) != STORE_OK) ms = -2;
    reply_integer(c, ms < 0 ? ms : (ms + unit_ms / 2) / unit_ms);
}

static void ttl_command(client *c) { reply_ttl(c, 1000); }
static void pttl_command(client *c) { reply_ttl(c, 1); }

/* Every object is a string. */
static void type_command(client *c) { answer_keys(c, ask_exists); }

/* ---- the keyspace: DBSIZE, SCAN, KEYS, FLUSHALL ----
 *
 * Each asks its store once (store.h stat_async, scan_async, flush_async)
 * and writes its reply once from the answer, with the writers below. The
 * commands here need a store that answers at once (standalone); the
 * gateway's own commands hold the reply slot meanwhile and call the same
 * writers (gateway_async.c). */

void t_object_reply_dbsize(client *c, const store_stat *st) {
    if (st->rc != STORE_OK) reply_error(c, st->errstr);   /* a client must not take a 0 for the truth */
    else reply_integer(c, (long long)st->objects);
}

static void dbsize_command(client *c) {
    store *s = store_of(c);
    store_stat st;
    int done = 0;
    s->ops->stat_async(s, &st, got_inline, &done);
    must_be_inline(done);
    t_object_reply_dbsize(c, &st);
}

/* ---- SCAN ---- */

static int scan_keeps(const scan_opts *o, const store_key *k) {
    return !o->none && (!o->match || glob_match(o->match->ptr, o->match->len, k->ptr, k->len, 0));
}

const char *scan_parse(int argc, const resp_arg *argv, scan_opts *o) {
    long long count = SCAN_COUNT_DEFAULT;
    *o = (scan_opts){0};
    if (arg_to_u64(&argv[1], &o->cursor) < 0) return "ERR invalid cursor";
    for (int i = 2; i < argc; i += 2) {
        const resp_arg *opt = &argv[i];
        if (i + 1 >= argc) return "ERR syntax error";
        if (strieq_len(opt->ptr, opt->len, "MATCH")) {
            o->match = &argv[i + 1];
        } else if (strieq_len(opt->ptr, opt->len, "TYPE")) {
            /* Every object is a string: another type matches nothing. */
            if (!strieq_len(argv[i + 1].ptr, argv[i + 1].len, "string")) o->none = 1;
        } else if (strieq_len(opt->ptr, opt->len, "COUNT")) {
            if (arg_to_ll(&argv[i + 1], LLONG_MIN, LLONG_MAX, &count) < 0)
                return "ERR value is not an integer or out of range";
            if (count < 1) return "ERR syntax error";
            if (count > SCAN_COUNT_MAX) count = SCAN_COUNT_MAX;
        } else {
            return "ERR syntax error";
        }
    }
    o->count = (long)count;
    /* A match-all pattern needs no per-key test. */
    if (o->match && o->match->len == 1 && o->match->ptr[0] == '*') o->match = NULL;
    return NULL;
}

void t_object_reply_scan(client *c, const scan_opts *o, const store_page *pg) {
    if (pg->rc != STORE_OK) {   /* an empty walk is no answer */
        reply_error(c, pg->errstr);
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < pg->nkeys; i++) n += scan_keeps(o, &pg->keys[i]);
    char cur[24];
    int len = snprintf(cur, sizeof cur, "%llu", (unsigned long long)pg->next);
    reply_array(c, 2);
    reply_bulk(c, cur, (size_t)len);
    reply_array(c, (long long)n);
    for (size_t i = 0; i < pg->nkeys; i++)
        if (scan_keeps(o, &pg->keys[i])) reply_bulk(c, pg->keys[i].ptr, pg->keys[i].len);
}

typedef struct scan_call {
    client *c;
    const scan_opts *o;
    store_page pg;
} scan_call;

/* The page is replied while its keys are valid (in done). */
static void scan_paged(void *ctx) {
    scan_call *sc = ctx;
    t_object_reply_scan(sc->c, sc->o, &sc->pg);
    sc->c = NULL;
}

static void scan_command(client *c) {
    scan_opts o;
    const char *err = scan_parse(c->argc, c->argv, &o);
    if (err) {
        reply_error(c, err);
        return;
    }
    store *s = store_of(c);
    scan_call sc = {.c = c, .o = &o};
    s->ops->scan_async(s, o.cursor, o.count, &sc.pg, scan_paged, &sc);
    must_be_inline(sc.c == NULL);
}

/* ---- KEYS ---- */

/* Every key matching the pattern, by a full walk, bounded: a keyspace
 * larger than KEYS_MAX is refused before the walk (its stat), and so is a
 * walk that meets more (keys added meanwhile). Each page's keys are
 * written into a buffer while they are valid, so the array's length is
 * known at the end. A store that answers at once runs the walk in a loop
 * here, not one call deeper per page. */
struct keys_walk {
    store *s;
    char *pat;                /* NULL: every key */
    size_t plen;
    store_stat st;
    store_page pg;
    uint64_t cursor, seen;
    resp_buf out;
    int rc;                   /* STORE_OK; else errstr */
    char errstr[STORE_ERRSTR];
    int over;                 /* more than KEYS_MAX */
    int asking, again, ended; /* inside scan_async; its page came inline; the walk is over */
    store_got_fn *done;
    void *ctx;
};

/* done may free w: never while walk_next's loop still reads it. */
static void walk_end(keys_walk *w, int rc, const char *why) {
    w->rc = rc;
    if (why) snprintf(w->errstr, sizeof w->errstr, "%s", why);
    w->ended = 1;
    if (!w->asking) w->done(w->ctx);
}

static void walk_next(keys_walk *w);

static void walk_paged(void *ctx) {
    keys_walk *w = ctx;
    const store_page *pg = &w->pg;
    if (pg->rc != STORE_OK) {   /* part of a walk is no answer */
        walk_end(w, pg->rc, pg->errstr);
        return;
    }
    for (size_t i = 0; i < pg->nkeys; i++) {
        const store_key *k = &pg->keys[i];
        if (w->pat && !glob_match(w->pat, w->plen, k->ptr, k->len, 0)) continue;
        resp_add_bulk(&w->out, k->ptr, k->len);
        w->seen++;
    }
    w->cursor = pg->next;
    w->over = w->seen > KEYS_MAX;
    if (w->cursor == 0 || w->over) walk_end(w, STORE_OK, NULL);
    else if (w->asking) w->again = 1;   /* walk_next's loop asks the next page */
    else walk_next(w);
}

static void walk_next(keys_walk *w) {
    do {
        w->again = 0;
        w->asking = 1;
        w->s->ops->scan_async(w->s, w->cursor, 1000, &w->pg, walk_paged, w);
        w->asking = 0;
    } while (w->again);
    if (w->ended) w->done(w->ctx);   /* it ended inside scan_async */
}

static void walk_counted(void *ctx) {
    keys_walk *w = ctx;
    if (w->st.rc != STORE_OK) {
        walk_end(w, w->st.rc, w->st.errstr);
        return;
    }
    w->seen = w->st.objects;
    w->over = w->seen > KEYS_MAX;
    if (w->over) {
        walk_end(w, STORE_OK, NULL);
        return;
    }
    w->seen = 0;
    walk_next(w);
}

keys_walk *t_object_keys_new(const resp_arg *pattern) {
    keys_walk *w = xcalloc(1, sizeof *w);
    resp_buf_init(&w->out);
    if (!(pattern->len == 1 && pattern->ptr[0] == '*')) {   /* match-all needs no test */
        w->pat = xmalloc(pattern->len ? pattern->len : 1);
        memcpy(w->pat, pattern->ptr, pattern->len);
        w->plen = pattern->len;
    }
    return w;
}

void t_object_keys_run(keys_walk *w, store *s, store_got_fn *done, void *ctx) {
    w->s = s;
    w->done = done;
    w->ctx = ctx;
    s->ops->stat_async(s, &w->st, walk_counted, w);
}

void t_object_keys_free(keys_walk *w) {
    if (!w) return;
    resp_buf_free(&w->out);
    free(w->pat);
    free(w);
}

void t_object_reply_keys(client *c, const keys_walk *w) {
    if (w->rc != STORE_OK) reply_error(c, w->errstr);
    else if (w->over)
        reply_errorf(c, "ERR KEYS is refused on more than %d keys (%llu seen): use SCAN with MATCH",
                     KEYS_MAX, (unsigned long long)w->seen);
    else {
        reply_array(c, (long long)w->seen);
        if (w->out.len) reply_raw(c, w->out.data, w->out.len);
    }
}

static void keys_command(client *c) {
    int done = 0;
    keys_walk *w = t_object_keys_new(&c->argv[1]);
    t_object_keys_run(w, store_of(c), got_inline, &done);
    must_be_inline(done);
    t_object_reply_keys(c, w);
    t_object_keys_free(w);
}

/* ---- FLUSHALL / FLUSHDB ---- */

/* FLUSHALL|FLUSHDB [ASYNC|SYNC]: every object goes (one database). Space
 * still under a read lease is reused once the lease ends, either way. */
int flushall_args_ok(const client *c) {
    return c->argc == 1 || (c->argc == 2 && (strieq_len(c->argv[1].ptr, c->argv[1].len, "ASYNC") ||
                                             strieq_len(c->argv[1].ptr, c->argv[1].len, "SYNC")));
}

void t_object_reply_flush(client *c, const char *name, const store_flushed *f) {
    if (f->rc == STORE_REFUSED) {   /* the store's whole text: -TRYAGAIN during a rebuild */
        reply_error(c, f->errstr);
        return;
    }
    if (f->rc != STORE_OK) {
        reply_errorf(c, "ERR %s: %s", store_strerror(f->rc), f->errstr);
        return;
    }
    log_notice("%s: %llu objects removed", name, (unsigned long long)f->removed);
    reply_ok(c);
}

static void flushall_command(client *c) {
    if (!flushall_args_ok(c)) {
        reply_syntax_error(c);
        return;
    }
    store *s = store_of(c);
    store_flushed f;
    int done = 0;
    s->ops->flush_async(s, &f, got_inline, &done);
    must_be_inline(done);
    t_object_reply_flush(c, c->last_cmd->name, &f);
}

/* ---- the calls inference engines make ---- */

/* Whether the slices of a sliced value that bytes [from, to] touch pass
 * their checksums (a failed one is reported to the store). */
static int range_slices_ok(store *s, store_pin *pin, const void *data, uint64_t len, const store_slices *sl,
                           uint64_t from, uint64_t to) {
    for (uint64_t i = from / sl->slice_len; i <= to / sl->slice_len && i < sl->count; i++) {
        uint64_t off = i * sl->slice_len, n = len - off < sl->slice_len ? len - off : sl->slice_len;
        if (crc32c(0, (const char *)data + off, (size_t)n) == sl->crc[i]) continue;
        if (s->ops->slice_corrupt) s->ops->slice_corrupt(s, pin, (uint32_t)i);
        return 0;
    }
    return 1;
}

/* GETRANGE key start end: Redis's inclusive range, negative offsets from
 * the end, "" for no key or an empty range. A value with slice checksums
 * has only the slices the range touches checked; any other was checked
 * whole by the store. */
int t_object_getrange_args(const resp_arg *argv, long long *start, long long *end) {
    return arg_to_ll(&argv[2], LLONG_MIN, LLONG_MAX, start) < 0 || arg_to_ll(&argv[3], LLONG_MIN, LLONG_MAX, end) < 0
               ? -1
               : 0;
}

void t_object_reply_getrange(client *c, long long start, long long end, store_got *g) {
    store *s = store_of(c);
    if (g->rc == STORE_NOTFOUND) {
        reply_bulk(c, "", 0);
        return;
    }
    if (g->rc != STORE_OK) {
        if (g->rc == STORE_REFUSED) reply_error(c, g->errstr);
        else reply_errorf(c, "ERR %s: %s", store_strerror(g->rc), g->errstr);
        return;
    }
    long long n = (long long)g->len;
    if (start < 0) start = n + start > 0 ? n + start : 0;
    if (end < 0) end = n + end;
    if (end >= n) end = n - 1;
    if (start > end || n == 0) reply_bulk(c, "", 0);
    else if (g->sl.count && !range_slices_ok(s, g->pin, g->data, g->len, &g->sl, (uint64_t)start, (uint64_t)end))
        reply_error(c, "CORRUPT checksum mismatch in the value's bytes");
    else reply_bulk(c, (const char *)g->data + start, (size_t)(end - start + 1));
    s->ops->release(s, g->pin);
    g->pin = NULL;
}

static void getrange_command(client *c) {
    long long start, end;
    if (t_object_getrange_args(c->argv, &start, &end) < 0) {
        reply_error(c, "ERR value is not an integer or out of range");
        return;
    }
    store *s = store_of(c);
    store_key key = {c->argv[1].ptr, c->argv[1].len};
    store_got got;
    int done = 0;
    s->ops->get_async(s, &key, 1, 0, &got, got_inline, &done);
    must_be_inline(done);
    t_object_reply_getrange(c, start, end, &got);
}

/* ---- MOON.PREFIX, MOON.PREFIXPIN, MOON.UNPIN (store.h store_pinq) ----
 *
 * MOON.PREFIX key [key ...]: how many keys, from the first on, are
 * stored (a prefix-cache lookup). MOON.PREFIXPIN id ms key [key ...]:
 * that count, the keys it counted pinned under id for ms (proto/pins.h:
 * until MOON.UNPIN id or the time runs out, a remove of them is refused
 * and garbage collection passes them over); the client draws id, the
 * same id again adds keys. MOON.UNPIN id [id ...]: those pins released;
 * how many keys they held. */

static int pinq_kind(const resp_arg *name) {
    if (strieq_len(name->ptr, name->len, PROTO_VERB_PREFIXPIN)) return STORE_PQ_PREFIXPIN;
    if (strieq_len(name->ptr, name->len, PROTO_VERB_UNPIN)) return STORE_PQ_UNPIN;
    return STORE_PQ_PREFIX;
}

/* A pin id argument (1 to 2^63-1). */
static int pin_id_of(const resp_arg *a, uint64_t *id) {
    long long v;
    if (arg_to_ll(a, 1, (long long)PROTO_PIN_ID_MAX, &v) != 0) return -1;
    *id = (uint64_t)v;
    return 0;
}

static int pinq_refuse(char *err, size_t errlen, const char *why) {
    snprintf(err, errlen, "%s", why);
    return -1;
}

/* The id, ms and count checks of PREFIXPIN and UNPIN, in the order the
 * commands always made them. */
static int pinq_check(int kind, int argc, const resp_arg *argv, uint64_t *id, long long *ms, char *err,
                      size_t errlen) {
    if (kind == STORE_PQ_PREFIXPIN) {
        if (pin_id_of(&argv[1], id) != 0) return pinq_refuse(err, errlen, "ERR pin id must be 1 to 9223372036854775807");
        if (arg_to_ll(&argv[2], 1, PROTO_PIN_MAX_MS, ms) != 0) {
            snprintf(err, errlen, "ERR pin time must be 1 to %u ms", PROTO_PIN_MAX_MS);
            return -1;
        }
        if (argc - 3 > PROTO_MAX_BATCH) {
            snprintf(err, errlen, "ERR at most %d keys per " PROTO_VERB_PREFIXPIN, PROTO_MAX_BATCH);
            return -1;
        }
        return 0;
    }
    if (argc - 1 > PROTO_MAX_UNPIN) {
        snprintf(err, errlen, "ERR at most %d ids per " PROTO_VERB_UNPIN, PROTO_MAX_UNPIN);
        return -1;
    }
    uint64_t any;
    for (int i = 1; i < argc; i++)   /* all or none */
        if (pin_id_of(&argv[i], &any) != 0) return pinq_refuse(err, errlen, "ERR pin id must be 1 to 9223372036854775807");
    return 0;
}

int t_object_pinq_parse(int argc, const resp_arg *argv, int pins, store_pinq *q, char *err, size_t errlen) {
    int kind = pinq_kind(&argv[0]);
    uint64_t id = 0;
    long long ms = 0;
    if (kind != STORE_PQ_PREFIX && !pins)
        return pinq_refuse(err, errlen, "ERR this server keeps no pins (" PROTO_VERB_PREFIX " counts without)");
    if (kind != STORE_PQ_PREFIX && pinq_check(kind, argc, argv, &id, &ms, err, errlen) != 0) return -1;
    if (!q) return 0;
    *q = (store_pinq){.kind = kind, .id = id, .ms = (uint32_t)ms};
    int first = kind == STORE_PQ_PREFIXPIN ? 3 : 1;
    size_t n = (size_t)(argc - first);
    if (kind == STORE_PQ_UNPIN) {
        uint64_t *ids = xmalloc((n ? n : 1) * sizeof *ids);
        for (size_t i = 0; i < n; i++) pin_id_of(&argv[first + i], &ids[i]);   /* checked above */
        q->ids = ids;
        q->nids = n;
        return 0;
    }
    store_key *keys = xmalloc((n ? n : 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) keys[i] = (store_key){argv[first + i].ptr, argv[first + i].len};
    q->keys = keys;
    q->nkeys = n;
    return 0;
}

void t_object_pinq_free(store_pinq *q) {
    free((void *)q->keys);
    free((void *)q->ids);
    q->keys = NULL;
    q->ids = NULL;
}

void t_object_reply_pinq(client *c, const store_pinq *q) {
    if (q->rc == STORE_OK) reply_integer(c, (long long)q->count);
    else if (q->rc == STORE_REFUSED) reply_error(c, q->errstr);
    else reply_errorf(c, "ERR %s: %s", store_strerror(q->rc), q->errstr);
}

/* The three commands: asked of the store at once (a store that holds its
 * keys answers inline; the gateway's own form asks the master and
 * replies later, gateway_async.c). */
static void pin_command(client *c) {
    store *s = store_of(c);
    store_pinq q;
    char err[128];
    if (t_object_pinq_parse(c->argc, c->argv, store_keeps_pins(s), &q, err, sizeof err) != 0) {
        reply_error(c, err);
        return;
    }
    int done = 0;
    store_pin_ask(s, &q, got_inline, &done);
    must_be_inline(done);
    t_object_reply_pinq(c, &q);
    t_object_pinq_free(&q);
}

/* ---- the table ---- */

static const command object_commands[] = {
    {"set", set_command, -3, CMD_WRITE, 1, 1, 1, 2, "string", "0.1.0",
     "Store a write-once object; an existing key is an EXISTS error (OK with on_conflict keep); "
     "an expiry is a garbage-collection hint", "key value [NX] [EX seconds|PX ms|EXAT unix-s|PXAT unix-ms]"},
    {"put", set_command, -3, CMD_WRITE, 1, 1, 1, 2, "string", "0.1.0",
     "Alias of SET", "key value [NX] [EX seconds|PX ms|EXAT unix-s|PXAT unix-ms]"},
    {"get", get_command, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, 0, "string", "0.1.0",
     "Get the checksum-verified value of a key", "key"},
    {"mget", mget_command, -2, CMD_READONLY | CMD_FAST, 1, -1, 1, 0, "string", "0.1.0",
     "Get the values of several keys", "key [key ...]"},
    {"del", del_command, -2, CMD_WRITE, 1, -1, 1, 0, "generic", "0.1.0",
     "Remove objects, returning how many existed", "key [key ...]"},
    {"remove", del_command, -2, CMD_WRITE, 1, -1, 1, 0, "generic", "0.1.0",
     "Alias of DEL", "key [key ...]"},
    {"unlink", del_command, -2, CMD_WRITE, 1, -1, 1, 0, "generic", "0.2.0",
     "Alias of DEL (space is reused once no read lease needs it, either way)", "key [key ...]"},
    {"exists", exists_command, -2, CMD_READONLY | CMD_FAST, 1, -1, 1, 0, "generic", "0.1.0",
     "Count how many of the keys exist", "key [key ...]"},
    {"strlen", strlen_command, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, 0, "string", "0.1.0",
     "Length of a value in bytes, 0 if absent", "key"},
    {"ttl", ttl_command, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, 0, "generic", "0.1.0",
     "Seconds left of a key's expiry hint: -1 none, -2 no key", "key"},
    {"pttl", pttl_command, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, 0, "generic", "0.1.0",
     "Milliseconds left of a key's expiry hint: -1 none, -2 no key", "key"},
    {"scan", scan_command, -2, CMD_READONLY, 0, 0, 0, 0, "generic", "0.1.0",
     "Iterate the keys", "cursor [MATCH pattern] [COUNT count] [TYPE type]"},
    {"type", type_command, 2, CMD_READONLY | CMD_FAST, 1, 1, 1, 0, "generic", "0.2.0",
     "The type of a key: string, or none if absent", "key"},
    {"keys", keys_command, 2, CMD_READONLY, 0, 0, 0, 0, "generic", "0.2.0",
     "Every key matching a pattern (refused above 100000 keys: use SCAN)", "pattern"},
    {"dbsize", dbsize_command, 1, CMD_READONLY | CMD_FAST, 0, 0, 0, 0, "server", "0.1.0",
     "Number of objects stored", ""},
    {"flushall", flushall_command, -1, CMD_WRITE, 0, 0, 0, 0, "server", "0.2.0",
     "Remove every object (the caller's own collection)", "[ASYNC|SYNC]"},
    {"flushdb", flushall_command, -1, CMD_WRITE, 0, 0, 0, 0, "server", "0.2.0",
     "Alias of FLUSHALL: there is one database", "[ASYNC|SYNC]"},
    {"getrange", getrange_command, 4, CMD_READONLY, 1, 1, 1, 0, "string", "0.3.0",
     "Bytes start..end (inclusive, negative from the end) of a value, checked per slice when it keeps slice CRCs",
     "key start end"},
    {"moon.prefix", pin_command, -2, CMD_READONLY | CMD_FAST, 1, -1, 1, 0, "moonkv", "0.3.0",
     "How many keys, from the first on, are stored (a prefix-cache lookup)", "key [key ...]"},
    {"moon.prefixpin", pin_command, -4, CMD_READONLY | CMD_FAST, 3, -1, 1, 0, "moonkv", "0.6.0",
     PROTO_VERB_PREFIX "'s count, the keys it counted pinned under id for ms (no remove, no collection) "
     "until " PROTO_VERB_UNPIN, "id ms key [key ...]"},
    {"moon.unpin", pin_command, -2, CMD_READONLY | CMD_FAST, 0, 0, 0, 0, "moonkv", "0.6.0",
     "Release pins made by " PROTO_VERB_PREFIXPIN "; how many keys they held", "id [id ...]"},
};

void t_object_register(server *srv) {
    commands_register(srv, object_commands, sizeof object_commands / sizeof object_commands[0]);
}
