/* gateway/store_cluster.h - what the gateway's async commands need from
 * the cluster store (internal to src/gateway).
 *
 * The store interface is synchronous: get returns the bytes, put_end the
 * outcome. So the slow part runs ahead on a worker (cluster_fetch,
 * cluster_ship) and the shared command code then runs on the loop and
 * finds the result waiting: a shipped put's put_end reports how the ship
 * went, and get returns an offered fetch instead of asking the cluster. */
#ifndef MKV_GATEWAY_STORE_CLUSTER_H
#define MKV_GATEWAY_STORE_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "client/moonkv.h"
#include "gateway/staging.h"
#include "gateway/workers.h"
#include "server/networking.h"
#include "server/store.h"

/* One key read ahead. */
typedef struct gw_fetch {
    const char *key;
    size_t keylen;
    int rc;                   /* STORE_* */
    staging_buf buf;          /* the value when rc == STORE_OK */
    uint64_t len;
    char errstr[sizeof ((store *)0)->errstr];
    int may_stream;           /* a GET's reply may stream (get_stream.h) */
    struct mkv_located *stream;   /* located, to be streamed: rc STORE_OK, no buf */
    uint64_t stream_epoch;    /* the master connection that located it */
} gw_fetch;

/* A SET's value on its way: put_end reports ship_rc once shipped. */
struct store_put {
    staging_buf buf;
    struct put_stream *stream;  /* moving on while it arrives (put_stream.h) */
    int shipped;                /* put to the cluster: ship_rc is the outcome */
    int ship_rc;
    char errstr[sizeof ((store *)0)->errstr];
    struct store_put *next_free;   /* in the store's spare puts (store_cluster.c) */
    size_t keylen;
    char key[];
};

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

/* MKV_* to STORE_* as the gateway replies it (text in errstr). */
int cluster_store_code(int rc, mkv_client *mc, char *errstr, size_t len);
/* STORE_REFUSED, "TRYAGAIN ..." in errstr: the master connection was
 * lost before the outcome came back. */
int cluster_store_lost(char *errstr, size_t len);
/* A key the cluster could hold (else it is not found, without asking). */
int cluster_key_ok(size_t keylen);

/* The whole value of a SET is in: 1 when its stream publishes it (w->done
 * runs then), 0 when it has none or the stream could not start: ship it
 * with the put batcher. */
struct gw_write;
int cluster_stream_finish(store *s, struct gw_write *w);

/* On any thread, with that thread's client. */
void cluster_fetch(store *s, mkv_client *mc, gw_fetch *f);
void cluster_ship(store *s, mkv_client *mc, store_put *p);

/* On a worker, before it moves bytes placed over the master connection
 * of this epoch (master_async_epoch): a connection it has not seen may
 * reach another master, so its client learns the node table afresh. */
void cluster_worker_topology(mkv_client *mc, uint64_t epoch);

/* A value get_async located to stream (got->stream, STORE_GET_STREAM):
 * sent into c's slot as get_stream_start says (the stream is taken). */
struct get_stream *cluster_stream_send(store *s, store_got *g, client *c, reply_slot *slot, int keep_slot,
                                       const char *key, size_t keylen, void (*done)(void *ctx), void *ctx);
/* A read outcome that will not be replied: its pin or stream goes. */
void cluster_got_forget(store *s, store_got *g);
/* The answers offered (cluster_offer_answers, cluster_offer_said) are
 * not taken from now on. */
void cluster_withdraw(store *s);

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
/* On the loop: remove, exists, size_of and checksum_of take their
 * answers from a[] (each answer once, in order), until cluster_withdraw. */
void cluster_offer_answers(store *s, gw_answer *a, size_t n);
/* On the loop: count, scan, flush and info take the master's answers
 * from said (master_said.h) instead of asking, until cluster_withdraw. */
struct gw_said;
void cluster_offer_said(store *s, const struct gw_said *said);
/* On a worker, with its client: the answers of a[] that have none yet,
 * by the blocking call verb names (MOON.REMOVE, MOON.EXISTS or
 * MOON.OBJECT), as the store's remove, exists and stat ask; a call that
 * fails marks its answer failed. */
void cluster_answer(mkv_client *mc, const char *verb, gw_answer *a, size_t n);
/* The asynchronous master connection; NULL without one (etcd). */
struct master_async *cluster_store_master(store *s);

#endif
