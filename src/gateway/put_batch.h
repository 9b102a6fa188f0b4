/* gateway/put_batch.h - the SETs of one loop iteration, over all
 * clients, as one batch (internal to src/gateway).
 *
 * Before the loop sleeps, the values added since are placed with one
 * MOON.MPUTSTART PACKED (chunks of PROTO_MAX_BATCH, pipelined) over the
 * asynchronous master connection; one worker job writes all of them to
 * their replicas in one engine batch and checksums them (those it can,
 * the loop writes itself first: see put_batcher_create); back on the
 * loop one MOON.MPUTEND publishes the written ones, and every write's
 * done runs in the order they were added, its outcome in its put
 * (shipped, ship_rc). No thread waits for the master on this path.
 *
 * A write that a node's fault failed is revoked and put again on the
 * worker, the blocking way (the library places it elsewhere); so is the
 * whole batch when the master could not be asked asynchronously: put by
 * put, or with routed (the client routes over master groups) as one
 * library batch, which splits by group and runs the parts at once. */
#ifndef MKV_GATEWAY_PUT_BATCH_H
#define MKV_GATEWAY_PUT_BATCH_H

#include "client/moonkv.h"
#include "core/loop.h"
#include "gateway/master_async.h"
#include "gateway/read_batch.h"
#include "gateway/cluster_call.h"

typedef struct gw_write gw_write;
struct gw_write {
    store_put *put;
    /* put->shipped set: put->ship_rc is the outcome; unset: nothing was
     * done (shutdown). */
    void (*done)(gw_write *w);
    gw_write *next;           /* the batcher's */
};

typedef struct put_batcher put_batcher;

/* ma may be NULL (always the blocking path); replicas per value. reads
 * (NULL: none) says whether the loop moves bytes itself
 * (read_batcher_inline_client): then the small values (up to 64 KiB)
 * whose every replica is on a same-host node with a warm mapping are
 * written on the loop (mkv_write_located_now), and a batch of only those
 * needs no worker. routed: the client routes over master groups (see
 * above). */
struct mkv_async;
put_batcher *put_batcher_create(event_loop *loop, master_async *ma, struct mkv_async *face, workers *w,
                                mkv_client *loop_mc, int replicas, read_batcher *reads, int routed);
/* Values written on the loop so far; batches put by one routed call. */
uint64_t put_batcher_inline(const put_batcher *b);
uint64_t put_batcher_routed(const put_batcher *b);
void put_batcher_add(put_batcher *b, gw_write *w);
/* Writes still queued finish unshipped; batches then waiting for the
 * master finish so when its connection is freed. Then free. */
void put_batcher_close(put_batcher *b);
void put_batcher_free(put_batcher *b);

#endif
