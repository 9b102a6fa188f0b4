/* server/store.h - where the RESP front end keeps values.
 *
 * The command code (t_object.c) talks only to this interface. Standalone
 * uses the local segment (src/standalone/store_local.c); the gateway plugs in a
 * store backed by the cluster (src/gateway/). A put is three steps so a
 * value can stream straight from the socket into its final memory:
 * put_start (space reserved, key PENDING, invisible), bytes land in *dst,
 * put_end (checksum, visible) or put_abort (space and key freed).
 *
 * Reads complete through a callback (get_async): a store that has its
 * values (standalone) completes before the call returns, so the reply is
 * written in the same loop iteration; one whose values are elsewhere (the
 * cluster) completes on the loop when they arrived, and its caller holds
 * the client's reply slot (networking.h) meanwhile. The reply is written
 * once, from the outcome (t_object_reply_got): no command runs twice.
 * The keyspace questions (count, a scan page, a flush) complete the same
 * way. */
#ifndef MKV_STORE_H
#define MKV_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "resp/resp_writer.h"

enum {
    STORE_OK = 0,
    STORE_EXISTS = -1,     /* key present or being written */
    STORE_NOSPACE = -2,    /* no room for the value: nothing stored is touched */
    STORE_NOTFOUND = -3,
    STORE_TOOBIG = -4,     /* larger than the store could ever hold */
    STORE_ERR = -5,        /* backend failure; message in the store's errstr */
    STORE_REFUSED = -6     /* the store knows the reply: errstr is its whole text,
                            * opening with the error word ("TRYAGAIN ...") */
};

#define STORE_ERRSTR 256   /* a store's, and a read's, failure text */

typedef struct store store;
typedef struct store_put store_put;   /* an in-flight put */
typedef struct store_pin store_pin;   /* keeps a value's memory alive for a reader */

typedef void store_scan_fn(const char *key, size_t keylen, void *ctx);

typedef struct store_key {
    const char *ptr;
    size_t len;
} store_key;

/* How to verify a value slice by slice (store_ops.get_sliced): slice i is
 * bytes [i*slice_len, min((i+1)*slice_len, len)) and must have CRC32C
 * crc[i]. count 0: the value was verified whole already. */
typedef struct store_slices {
    uint64_t slice_len;
    uint32_t count;
    const uint32_t *crc;     /* valid while the value is pinned */
} store_slices;

/* One key's read outcome (get_async). */
#define STORE_GET_STREAM 1   /* get_async flag: a large value may come as got->stream */
typedef struct store_got {
    int rc;                  /* STORE_OK, STORE_NOTFOUND, or a failure (text in errstr) */
    const void *data;        /* STORE_OK: len bytes, kept by pin until release */
    uint64_t len;
    store_pin *pin;
    store_slices sl;         /* check each slice before it leaves (get_sliced) */
    /* STORE_OK with STORE_GET_STREAM asked: a value too large to hold, which
     * the store sends itself as it arrives (data and pin NULL; the cluster:
     * gateway/store_cluster.h). */
    void *stream;
    char errstr[STORE_ERRSTR];
} store_got;
typedef void store_got_fn(void *ctx);

/* What a store tells of its keyspace (stat_async): DBSIZE, KEYS's
 * bound, INFO's Memory, Stats and Keyspace. */
typedef struct store_stat {
    int rc;                  /* STORE_OK; else no answer, errstr says why ("TRYAGAIN ...") */
    uint64_t objects;        /* COMPLETE objects */
    uint64_t bytes_used, bytes_total;   /* of the values, where the store's info tells them */
    long long evicted;       /* keys garbage collection removed; -1 cannot be told */
    char errstr[STORE_ERRSTR];
} store_stat;

/* One page of a walk (scan_async). */
typedef struct store_page {
    int rc;                  /* STORE_OK; else no answer (errstr): the walk means nothing */
    uint64_t next;           /* the next cursor, 0 at the end */
    const store_key *keys;   /* valid while done runs */
    size_t nkeys;
    char errstr[STORE_ERRSTR];
} store_page;

/* FLUSHALL's outcome (flush_async). */
typedef struct store_flushed {
    int rc;                  /* STORE_OK; STORE_REFUSED: errstr is the whole reply */
    uint64_t removed;
    char errstr[STORE_ERRSTR];
} store_flushed;

/* A prefix lookup or a pin's release (MOON.PREFIX, MOON.PREFIXPIN,
 * MOON.UNPIN: store_ops.pin_async), with its outcome. */
enum { STORE_PQ_PREFIX, STORE_PQ_PREFIXPIN, STORE_PQ_UNPIN };
typedef struct store_pinq {
    int kind;                /* STORE_PQ_* */
    uint64_t id;             /* PREFIXPIN: the pin */
    uint32_t ms;             /* PREFIXPIN: how long it holds */
    const store_key *keys;   /* PREFIX, PREFIXPIN */
    size_t nkeys;
    const uint64_t *ids;     /* UNPIN: the pins released, in turn */
    size_t nids;
    int rc;                  /* STORE_OK; else errstr (STORE_REFUSED: errstr is the whole reply) */
    uint64_t count;          /* keys counted from the first (PREFIX, PREFIXPIN); keys the pins held (UNPIN) */
    char errstr[STORE_ERRSTR];
} store_pinq;

typedef struct store_ops {
    int (*put_start)(store *s, const void *key, size_t keylen, uint64_t size,
                     void **dst, store_put **out);
    /* Optional (NULL: put_start): put_start for a value that is its
     * command's last argument and arrives from a socket, so the store may
     * move it on while it arrives (the cluster: to the nodes, a few
     * slices at a time) and give the memory of what moved back. The
     * reader may then write *dst only up to what put_progress returns,
     * and resume(ctx) runs (on the loop) when that mark moves while the
     * value is not whole yet. */
    int (*put_start_streamed)(store *s, const void *key, size_t keylen, uint64_t size, void **dst,
                              store_put **out, void (*resume)(void *ctx), void *ctx);
    /* Optional (NULL: no limit): networking reports that the first
     * `landed` bytes of *dst have arrived; returns how many bytes from the
     * start of *dst may be written now (the size when there is no limit). */
    uint64_t (*put_progress)(store *s, store_put *p, uint64_t landed);
    int (*put_end)(store *s, store_put *p);
    void (*put_abort)(store *s, store_put *p);
    /* A COMPLETE value: *data stays valid until release(*pin). PENDING
     * objects are STORE_NOTFOUND. The checksum is verified on the way.
     * Optional for a store with its own get_async and checksum_of (the
     * cluster: every read of it completes through get_async). */
    int (*get)(store *s, const void *key, size_t keylen, const void **data,
               uint64_t *len, store_pin **pin);
    void (*release)(store *s, store_pin *pin);
    /* Optional: get without the whole-value check for a value that keeps
     * per-slice checksums; *sl says how to check each slice, and the
     * reader must check a slice before any of its bytes leave (a large
     * GET then checks slice k+1 while slice k is being sent). Values
     * without them are checked here as get does (sl->count 0). */
    int (*get_sliced)(store *s, const void *key, size_t keylen, const void **data,
                      uint64_t *len, store_pin **pin, store_slices *sl);
    /* keys[0..n) into got[0..n), then done(ctx) on the loop, once all are
     * in: before returning for a store that holds its values, later for
     * one that asks elsewhere. keys stay valid until done ran; the caller
     * releases each STORE_OK pin (or stream) it took. */
    void (*get_async)(store *s, const store_key *keys, size_t n, int flags, store_got *got,
                      store_got_fn *done, void *ctx);
    /* Optional: a reader found slice i of a pinned value wrong. */
    void (*slice_corrupt)(store *s, store_pin *pin, uint32_t i);
    int (*remove)(store *s, const void *key, size_t keylen);   /* 1 removed, 0 not */
    int (*exists)(store *s, const void *key, size_t keylen);   /* COMPLETE only */
    int (*size_of)(store *s, const void *key, size_t keylen, uint64_t *len);
    /* Optional (NULL: t_object compares the bytes): size and CRC32C of a
     * COMPLETE value without reading it, for a store where reading is
     * costly (the cluster). */
    int (*checksum_of)(store *s, const void *key, size_t keylen, uint64_t *len, uint32_t *crc);
    /* The keyspace questions of DBSIZE, KEYS, INFO (stat_async), SCAN
     * (scan_async) and FLUSHALL (flush_async) complete through done(ctx)
     * as get_async does: before returning for a store that holds its keys
     * (store_stat_inline, store_scan_inline, store_flush_inline over
     * count, scan and remove), on the loop once the master answered for
     * the cluster's. */
    void (*stat_async)(store *s, store_stat *st, store_got_fn *done, void *ctx);
    void (*scan_async)(store *s, uint64_t cursor, long count, store_page *pg, store_got_fn *done, void *ctx);
    void (*flush_async)(store *s, store_flushed *f, store_got_fn *done, void *ctx);
    /* Optional (a store that answers at once): what the inline forms ask. */
    uint64_t (*count)(store *s);                                /* COMPLETE objects */
    uint64_t (*scan)(store *s, uint64_t cursor, long count, store_scan_fn *fn, void *ctx);
    /* Append INFO sections in Redis format ("# Memory\r\nused_memory:...\r\n");
     * st is the store's stat_async answer, or NULL when not asked. */
    void (*info)(store *s, const store_stat *st, resp_buf *out, const char *section);
    void (*destroy)(store *s);
    /* Optional (NULL if the store cannot tell): free bytes and the largest
     * free extent, so a NOSPACE reply can say why the value did not fit. */
    void (*space)(store *s, uint64_t *free_bytes, uint64_t *largest_free);
    /* Optional (NULL: no expiry hints, SET EX/PX is refused): a COMPLETE
     * key becomes a preferred victim of garbage collection ttl_ms from
     * now. STORE_ERR (reason in errstr) when the store collects nothing. */
    int (*set_expiry)(store *s, const void *key, size_t keylen, uint64_t ttl_ms);
    /* ms left of a COMPLETE key's hint in *ttl_ms: -1 none, 0 once passed
     * (the value stays readable until collected); STORE_NOTFOUND. */
    int (*ttl)(store *s, const void *key, size_t keylen, int64_t *ttl_ms);
    /* Optional: a hint that commands on these keys come next (a read
     * brought in a pipelined batch), so the store can start the memory
     * loads their look-ups will need, all at once instead of one miss
     * after another. Changes nothing. */
    void (*prefetch)(store *s, const store_key *keys, size_t n);
    /* Optional: keys garbage collection removed so far (store_stat_inline's
     * evicted, INFO stats' evicted_keys); -1 when it cannot be told. */
    long long (*evicted)(store *s);
    /* Optional (NULL: exists key by key): how many keys from the first on
     * are COMPLETE, in *hit; STORE_ERR or STORE_REFUSED (errstr). */
    int (*prefix)(store *s, const store_key *keys, size_t n, size_t *hit);
    /* Optional (NULL: the server keeps no pins): prefix's count, the keys
     * it counted pinned under id for ms (MOON.PREFIXPIN, proto/pins.h). */
    int (*prefix_pin)(store *s, uint64_t id, uint32_t ms, const store_key *keys, size_t n, size_t *hit);
    /* With prefix_pin: pin id released, in *keys how many keys it held
     * (0: no such pin, or it ran out). */
    int (*unpin)(store *s, uint64_t id, size_t *keys);
    /* Optional (NULL: store_pin_inline over prefix, prefix_pin, unpin and
     * exists): q answered, then done(ctx), as get_async: on the loop once
     * the master answered for the cluster's. A store with it keeps pins. */
    void (*pin_async)(store *s, store_pinq *q, store_got_fn *done, void *ctx);
} store_ops;

struct store {
    const store_ops *ops;
    char errstr[STORE_ERRSTR];
    void *priv;
};

const char *store_strerror(int code);
/* get_async for a store whose get (or get_sliced) answers at once: each
 * key in turn, done(ctx) before it returns. */
void store_get_inline(store *s, const store_key *keys, size_t n, int flags, store_got *got,
                      store_got_fn *done, void *ctx);
/* stat_async, scan_async and flush_async for a store with count, scan
 * (and evicted) that answer at once: done(ctx) before they return. A
 * flush walks scan and removes each key. */
void store_stat_inline(store *s, store_stat *st, store_got_fn *done, void *ctx);
void store_scan_inline(store *s, uint64_t cursor, long count, store_page *pg, store_got_fn *done, void *ctx);
void store_flush_inline(store *s, store_flushed *f, store_got_fn *done, void *ctx);
/* q through the store's pin_async, or for one without, answered at once
 * by its prefix (or exists key by key), prefix_pin and unpin: done(ctx)
 * before it returns. Whether the store keeps pins (MOON.PREFIXPIN). */
void store_pin_ask(store *s, store_pinq *q, store_got_fn *done, void *ctx);
int store_keeps_pins(const store *s);

#endif
