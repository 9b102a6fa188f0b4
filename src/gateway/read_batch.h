/* gateway/read_batch.h - the reads (GET, MGET) of one loop iteration, over
 * all clients, as one batch (internal to src/gateway).
 *
 * Before the loop sleeps, the keys of every read added since go to the
 * master as one MOON.MGETPACKED (chunks of PROTO_MAX_BATCH, pipelined)
 * over the asynchronous master connection; its reply (one bulk string of
 * records, proto/located.h) places each value in staging
 * memory, and one worker job moves all of them with one engine batch
 * (checksums verified there). Back on the loop every read's done runs,
 * in the order the reads were added, and the read leases go back ahead
 * of the loop's next master command, in its write (master_async_release:
 * no command, write or reply wake-up of their own; by themselves when
 * none goes within a few ms). No thread waits for the master on this path.
 *
 * Values read on the loop (a same-host node's mapping) go a step per
 * loop iteration, about RB_STEP_BYTES each: the reads whose values are
 * in are done (their replies leave with that iteration's flush) before
 * the loop copies the next ones, so a batch of 50 GETs of 4 MiB holds a
 * value or two of staging memory at a time, not 200 MiB (each first
 * touch of a page cost the gateway more than the copy did), and the
 * first reply does not wait for the last value.
 *
 * Without the asynchronous connection (over master groups, or the master
 * unreachable now), the batch's keys are fetched by one library batch on
 * a worker instead (mkv_get_batch_placed: over groups split by group,
 * the parts at once), with the same results. */
#ifndef MKV_GATEWAY_READ_BATCH_H
#define MKV_GATEWAY_READ_BATCH_H

#include <stddef.h>

#include "client/moonkv.h"
#include "core/loop.h"
#include "gateway/master_async.h"
#include "gateway/cluster_call.h"
#include "gateway/workers.h"

typedef struct gw_read gw_read;
struct gw_read {
    gw_fetch *fetch;          /* the keys; the results land here */
    size_t nfetch;
    /* fetched: fetch[] holds every key's result (their buffers are the
     * reader's now); 0: nothing was read (shutdown). */
    void (*done)(gw_read *r, int fetched);
    gw_read *next;            /* the batcher's */
    size_t nbatched;          /* the batcher's: its keys in the batch */
};

typedef struct read_batcher read_batcher;

/* ma may be NULL: without it (master groups) a batch is one batch get on
 * face (the router's), or with no face the blocking path on a worker. mc
 * is the process's client (the pool registered with it). inline_reads:
 * the loop reads with it the values that need no waiting (a same-host
 * node's warm mapping), so a batch of those needs no worker at all (only
 * with ma). */
struct mkv_async;
read_batcher *read_batcher_create(event_loop *loop, master_async *ma, struct mkv_async *face, workers *w,
                                  staging *pool, mkv_client *mc, int inline_reads);
/* The client for another batcher's work on the loop (the put batches'
 * writes that need no waiting), or NULL without inline reads. */
mkv_client *read_batcher_inline_client(read_batcher *b);
/* Something could not go through inline: the same-host paths
 * are dialed again soon (at most once a second). */
void read_batcher_inline_missed(read_batcher *b);
/* Values read on the loop so far. */
uint64_t read_batcher_inline(const read_batcher *b);
/* Loop iterations that read their RB_STEP_BYTES and left the rest of a
 * batch for the next one. */
uint64_t read_batcher_deferred(const read_batcher *b);
/* Batches fetched as one library batch on a worker (no MOON.MGETPACKED
 * answer: over master groups, split by group there). */
uint64_t read_batcher_fetched(const read_batcher *b);
void read_batcher_add(read_batcher *b, gw_read *r);
/* Reads still queued finish with fetched 0; batches then waiting for the
 * master finish so when its connection is freed. Then free. */
void read_batcher_close(read_batcher *b);
void read_batcher_free(read_batcher *b);

#endif
