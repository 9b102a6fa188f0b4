/* gateway/staging.h - registered memory for values passing through the
 * gateway.
 *
 * The transfer engine moves bytes only to and from registered memory, so
 * a SET's value lands from the socket straight into a staging buffer and
 * a GET's value is read from the nodes into one and sent from there. One
 * pool, registered once and carved by the offset allocator, bounds the
 * memory in normal use; a value larger than what the pool has free gets
 * a dedicated registered mapping, of which only a few may exist at once,
 * each at most max_value bytes. Not thread-safe: the loop owns it. */
#ifndef MKV_GATEWAY_STAGING_H
#define MKV_GATEWAY_STAGING_H

#include <stddef.h>
#include <stdint.h>

#include "client/moonkv.h"

/* Dedicated mappings alive at once (each costs a registered region). */
#define STAGING_MAX_DEDICATED 8

typedef struct staging staging;

typedef struct staging_buf {
    void *ptr;
    uint64_t len;        /* what was asked for */
    uint64_t off;        /* pool offset, unless dedicated */
    uint64_t map_len;    /* dedicated mapping size, 0 for pool memory */
} staging_buf;

typedef struct staging_stats {
    uint64_t pool_size, pool_used;
    uint64_t dedicated, dedicated_bytes;   /* live dedicated mappings */
    uint64_t refused;                      /* requests that got STORE_NOSPACE */
} staging_stats;

/* Maps and registers pool_size bytes with mc (which must outlive the
 * pool). NULL with a message in err. */
staging *staging_create(mkv_client *mc, uint64_t pool_size, uint64_t max_value, char *err,
                        size_t errlen);
/* STORE_OK, STORE_TOOBIG (len 0 or above max_value) or STORE_NOSPACE. */
int staging_get(staging *sp, uint64_t len, staging_buf *out);
void staging_put(staging *sp, staging_buf *b);
void staging_get_stats(const staging *sp, staging_stats *st);
/* Every buffer must have been put back. */
void staging_destroy(staging *sp);

#endif
