/* gateway/staging.h - registered memory for values passing through the
 * gateway.
 *
 * The transfer engine moves bytes only to and from registered memory, so
 * a SET's value lands from the socket straight into a staging buffer and
 * a GET's value is read from the nodes into one and sent from there. One
 * pool, registered once and carved by the offset allocator, bounds the
 * memory in normal use; a value larger than what the pool has free gets
 * a dedicated mapping, of which only a few may exist at once, each at
 * most max_value bytes and all together at most max(pool, max_value). Thread-safe: the loop allocates, workers transfer.
 *
 * The pool's pages become resident as values use them, and go back to the
 * system when the pool has been idle a while (staging_trim), so an idle
 * gateway does not hold its whole pool.
 *
 * The pool is registered once with the process's mkv_client
 * (staging_register). A dedicated mapping is registered only around each
 * transfer of it (staging_bind/unbind), by the thread moving its bytes. */
#ifndef MKV_GATEWAY_STAGING_H
#define MKV_GATEWAY_STAGING_H

#include <stddef.h>
#include <stdint.h>

#include "client/moonkv.h"

/* Dedicated mappings alive at once (each costs a registered region). */
#define STAGING_MAX_DEDICATED 8
/* Sparse mappings (streamed values) alive at once. */
#define STAGING_MAX_SPARSE 64

typedef struct staging staging;

typedef struct staging_slab staging_slab;

typedef struct staging_buf {
    void *ptr;
    uint64_t len;        /* what was asked for */
    uint64_t off;        /* pool offset, unless dedicated */
    uint64_t map_len;    /* dedicated mapping size, 0 for pool memory */
    int sparse;          /* a staging_get_sparse mapping */
    staging_slab *slab;  /* a staging_get_shared piece: the slab it is part of */
} staging_buf;

typedef struct staging_stats {
    uint64_t pool_size, pool_used;
    uint64_t pool_hot;                     /* pool bytes used since the last trim (an RSS bound) */
    uint64_t dedicated, dedicated_bytes;   /* live dedicated mappings */
    uint64_t sparse;                       /* live sparse mappings */
    uint64_t refused;                      /* requests that got STORE_NOSPACE */
} staging_stats;

/* Maps pool_size bytes. NULL with a message in err. */
staging *staging_create(uint64_t pool_size, uint64_t max_value, char *err, size_t errlen);
/* Register the pool with mc / drop that registration (before the client goes). */
int staging_register(staging *sp, mkv_client *mc);
void staging_unregister(staging *sp, mkv_client *mc);
/* Around one transfer of b by mc: MKV_OK or the registration error. */
int staging_bind(mkv_client *mc, const staging_buf *b);
void staging_unbind(mkv_client *mc, const staging_buf *b);
/* STORE_OK, STORE_TOOBIG (len 0 or above max_value) or STORE_NOSPACE. */
int staging_get(staging *sp, uint64_t len, staging_buf *out);
/* n buffers of lens[i] bytes (each 1..max_value) carved from one pool
 * range: one lock and one allocator call for a batch of small values.
 * The range goes back when the last of them is put (from any thread).
 * STORE_NOSPACE when the pool has no such range free (get them one by
 * one then). */
int staging_get_shared(staging *sp, const uint64_t *lens, size_t n, staging_buf *out);
/* Address space for a streamed value of len bytes, backed only where
 * written (the streamer gives pages back as their bytes move on): not
 * counted in the dedicated bytes. STORE_TOOBIG or STORE_NOSPACE (too
 * many at once) as staging_get. */
int staging_get_sparse(staging *sp, uint64_t len, staging_buf *out);
/* Any buffer of staging_get, staging_get_shared or staging_get_sparse;
 * ptr NULL is a no-op. */
void staging_put(staging *sp, staging_buf *b);
/* When no pool memory is in use and none was got or put back for idle_ms
 * (counted from the first trim call that saw no get or put since the one
 * before: call it every fraction of idle_ms), gives the pool's pages back
 * to the system (they read zero when used again); the bytes given back,
 * else 0. Cheap when there is nothing to do. */
uint64_t staging_trim(staging *sp, uint64_t idle_ms);
void staging_get_stats(staging *sp, staging_stats *st);
/* Every buffer must have been put back. */
void staging_destroy(staging *sp);

#endif
