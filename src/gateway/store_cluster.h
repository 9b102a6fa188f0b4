/* gateway/store_cluster.h - what the gateway's async commands need from
 * the cluster store (internal to src/gateway).
 *
 * Reads complete through store_ops.get_async: the keys join the loop
 * iteration's read batch (read_batch.h) and the caller's callback gets
 * the outcomes when the batch is back; gateway_async.c writes the reply
 * from them. DBSIZE, SCAN, KEYS, INFO and FLUSHALL complete the same way
 * (stat_async, scan_async, flush_async: master_ask.h). A SET's put is
 * shipped ahead and its put_end reports how the ship went; DEL, EXISTS,
 * STRLEN, TYPE and TTL ask the master themselves (gateway_async.c). */
#ifndef MKV_GATEWAY_STORE_CLUSTER_H
#define MKV_GATEWAY_STORE_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "client/moonkv.h"
#include "gateway/cluster_call.h"
#include "gateway/staging.h"
#include "gateway/workers.h"
#include "server/networking.h"
#include "server/store.h"

workers *cluster_store_workers(store *s);
/* Large GETs sent on while they arrive (get_stream.h). */
struct get_streamer *cluster_store_gets(store *s);
/* The batchers of the store's reads and writes (read_batch.h, put_batch.h). */
struct read_batcher *cluster_store_reads(store *s);
struct put_batcher *cluster_store_puts(store *s);

/* The gateway's per-server command state (gateway_async.c), owned by the
 * store from here on: free_fn(ga) runs when the store is destroyed,
 * after the workers finished every job. */
struct gw_async;
void cluster_store_set_async(store *s, struct gw_async *ga, void (*free_fn)(struct gw_async *ga));
struct gw_async *cluster_store_async(store *s);

/* The whole value of a SET is in: 1 when its stream publishes it (w->done
 * runs then), 0 when it has none or the stream could not start: ship it
 * with the put batcher. */
struct gw_write;
int cluster_stream_finish(store *s, struct gw_write *w);

/* A value get_async located to stream (got->stream, STORE_GET_STREAM):
 * sent into c's slot as get_stream_start says (the stream is taken). */
struct get_stream *cluster_stream_send(store *s, store_got *g, client *c, reply_slot *slot, int keep_slot,
                                       const char *key, size_t keylen, void (*done)(void *ctx), void *ctx);
/* A read outcome that will not be replied: its pin or stream goes. */
void cluster_got_forget(store *s, store_got *g);

/* A key's DEL, EXISTS or STRLEN outcome, asked over the asynchronous
 * master connection ahead of the command (gateway_async.c). */
typedef struct gw_answer {
    const char *key;
    size_t keylen;
    int answered;             /* 0: no reply came; the command asks itself */
    int failed;               /* asked and failed: the command takes "no" (as a failed call) */
    int taken;
    long long n;              /* removed / exists: 0 or 1; size, -1 none */
    uint32_t crc;             /* with a size: the object's CRC32C */
} gw_answer;
/* n keys were removed by answers asked ahead (INFO's count). */
void cluster_store_removed(store *s, uint64_t n);
/* On a worker, with its client: the answers of a[] that have none yet,
 * by the blocking call verb names (MOON.REMOVE, MOON.EXISTS or
 * MOON.OBJECT), as the store's remove, exists and stat ask; several keys
 * of a REMOVE or EXISTS as one batch call (one MOON.MREMOVE or
 * MOON.MEXISTS per group); a call that fails marks its answer failed. */
void cluster_answer(mkv_client *mc, const char *verb, gw_answer *a, size_t n);
/* The asynchronous master connection (through etcd the client's:
 * master_async_over); NULL without one (master groups). */
struct master_async *cluster_store_master(store *s);
/* The process's client's async face for this loop, completed on the
 * loop (over groups the router's: each operation's keys to their groups,
 * the parts at once; else the asynchronous connection's); NULL if none
 * could be opened. */
struct mkv_async *cluster_store_face(store *s);

#endif
