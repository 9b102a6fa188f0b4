/* gateway/cluster_call.h - one key's call to the cluster on a given
 * client, and what its outcome means to the RESP side (internal to
 * src/gateway).
 *
 * The bottom of the gateway's store: the batchers (read_batch.c,
 * put_batch.c, put_stream.c, get_stream.c) and the store
 * (store_cluster.c) all build on it, and it calls none of them, so the
 * gateway's files call each other as a tree: store_cluster.c over the
 * batchers over this. A fetch or a ship is a blocking library call: on a
 * worker, or on the loop only where the store counts it
 * (loop_blocking_calls). */
#ifndef MKV_GATEWAY_CLUSTER_CALL_H
#define MKV_GATEWAY_CLUSTER_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "client/moonkv.h"
#include "client/moonkv_async.h"
#include "gateway/staging.h"
#include "gateway/workers.h"
#include "server/store.h"

/* One key read ahead. */
typedef struct gw_fetch {
    const char *key;
    size_t keylen;
    int rc;                   /* STORE_* */
    staging_buf buf;          /* the value when rc == STORE_OK */
    uint64_t len;
    char errstr[STORE_ERRSTR];
    int may_stream;           /* a GET's reply may stream (get_stream.h) */
    struct mkv_located *stream;   /* located, to be streamed: rc STORE_OK, no buf */
    uint64_t stream_epoch;    /* the master connection that located it */
    const char *via;          /* the path that answered it (named when it answers wrong) */
} gw_fetch;

/* A SET's value on its way: put_end reports ship_rc once shipped. */
struct store_put {
    staging_buf buf;
    struct put_stream *stream;  /* moving on while it arrives (put_stream.h) */
    int shipped;                /* put to the cluster: ship_rc is the outcome */
    int ship_rc;
    char errstr[STORE_ERRSTR];
    struct store_put *next_free;   /* in the store's spare puts (store_cluster.c) */
    size_t keylen;
    char key[];
};

/* MKV_* to STORE_* as the gateway replies it (text in errstr). */
int cluster_store_code(int rc, mkv_client *mc, char *errstr, size_t len);
/* STORE_REFUSED, "TRYAGAIN ..." in errstr: the master connection was
 * lost before the outcome came back. */
int cluster_store_lost(char *errstr, size_t len);
/* A key the cluster could hold (else it is not found, without asking). */
int cluster_key_ok(size_t keylen);

/* A command's blocking library call on a worker, which waits there for
 * the master (a fallback, etcd's and groups' path): counted for INFO
 * gateway worker_master_waits, process-wide. Not counted: a worker's
 * node-table reads (once per master connection, or a second). */
void cluster_master_wait(void);
uint64_t cluster_master_waits(void);

/* One MOON.GET with mc: the size it tells gets memory from pool, then
 * the bytes are read (checksum verified by the library). */
void cluster_fetch(staging *pool, mkv_client *mc, gw_fetch *f);
/* cluster_fetch for n keys in one library batch (mkv_get_batch_placed:
 * one master round trip, or over groups one per group, the groups' parts
 * at once): each size told gets memory from pool. */
void cluster_fetch_batch(staging *pool, mkv_client *mc, gw_fetch **f, size_t n);
/* One operation for an async face with room for n objects: each one's
 * place in the caller's order (idx), an exists batch's flag (res) and
 * extra_each bytes of the caller's (extra), in one allocation (free()
 * it). op is first, so the completion's op is the block; op.objs and
 * op.results point into it, op.n is 0 (the caller counts what it adds). */
typedef struct gw_face_op {
    mkv_op op;
    void *owner;              /* the caller's */
    void (*then)(void *ctx);  /* the caller's next step, if it keeps one */
    void *ctx;
    size_t *idx;
    int *res;
    void *extra;
    mkv_obj objs[];
} gw_face_op;
gw_face_op *cluster_face_op(mkv_op_kind kind, size_t n, size_t extra_each, mkv_op_done_fn *done);
/* An object's status in an async face's operation as the gateway
 * replies it, the words from the code (on the loop no thread's last error
 * tells why). Set CLUSTER_UNTOLD before submitting: an object the face
 * never reached takes the operation's failure. */
#define CLUSTER_UNTOLD 1
int cluster_face_code(const mkv_op *op, int st, char *errstr, size_t len);
/* cluster_fetch_batch as one operation on an async face of mc (over
 * groups the router's: split by group there, the parts at once), so no
 * thread waits for a master: each size told gets memory from pool on a
 * library thread, and done(ctx) runs where the face is drained (the
 * loop) once every fetch has its outcome. */
struct mkv_async;
void cluster_fetch_face(struct mkv_async *face, staging *pool, mkv_client *mc, gw_fetch **f, size_t n,
                        void (*done)(void *ctx), void *ctx);
/* p's value put with mc to replicas nodes; the outcome in p (shipped). */
void cluster_ship(mkv_client *mc, store_put *p, int replicas);

/* On a worker of w, before it moves bytes placed over the loop's master
 * connection of this epoch (master_async_epoch): a connection not seen
 * before may reach another master, so the client learns the node table
 * afresh (once per epoch, whichever worker comes first). 1 if this call
 * relearnt it. */
int cluster_worker_topology(workers *w, mkv_client *mc, uint64_t epoch);

#endif
