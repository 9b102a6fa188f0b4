/* moonkv_async.h - libmoonkv's asynchronous face.
 *
 * Submit an operation (put, get, batch put/get, exists, exists batch,
 * remove, remove batch, stat) and go on; it completes later, on the same mkv_client as the
 * blocking calls of moonkv.h (one core: see there). Each completion is
 * told one of two ways, chosen at open:
 *
 * - queued (default): completed operations wait in a queue and the
 *   queue's fd (an eventfd) becomes readable; an event loop watches
 *   mkv_async_fd and, when it is readable, calls mkv_async_drain, which
 *   runs each operation's done callback on the loop's thread.
 * - MKV_ASYNC_INLINE: done runs on a library thread of the face as soon
 *   as the operation finished (no fd, no drain); keep it short.
 *
 * How it runs: an operation's master requests (exists, remove, the
 * placing and publishing of a put, the locating of a get) go out on the
 * client's one pipelined master connection, and their replies complete
 * them by callback. The first goes out from mkv_async_submit itself
 * while that connection is up and takes it at once (submit never waits
 * for a connect or the master), else one I/O thread of the face sends
 * it; either way in submit order. The I/O thread reads the replies for
 * all of them (with MKV_ASYNC_DRAIN_READS the caller's drain does).
 * An inline face's done never runs inside the caller's submit (over a
 * router, an operation refused before any group is asked does). No thread waits for the
 * master: any number of operations are in flight at once (a stopped
 * master times them all out together after timeout_ms; without etcd,
 * when no master can be reached, what the face sends in the next second
 * fails at once).
 * The transfers (the data leg of a put or get) run on the face's
 * `threads` other threads, each taking the legs queued meanwhile as one
 * engine batch.
 * Batches go in chunks of 4096 keys, all at once; a batch's status is
 * the first chunk's failure. Under etcd a send that found no leader, or
 * a READONLY one, goes again until timeout_ms, as the blocking calls do.
 * Over master groups (a router, mkv_options.groups) the face has no
 * threads of its own: each operation's keys go to their groups' faces,
 * the parts at once, and it completes when every part did (route.h).
 * Not here (yet): slice checksums with a put's publish (a reader checks
 * the object whole).
 *
 * The caller keeps an operation, its key and its buffers alive and
 * untouched until its done ran. Buffers are registered ones, as for the
 * blocking calls. */
#ifndef MOONKV_ASYNC_H
#define MOONKV_ASYNC_H

#include <stddef.h>

#include "moonkv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mkv_op_kind {
    MKV_OP_PUT,           /* key, buf, len, replicas */
    MKV_OP_GET,           /* key, buf, len (room in, object size out) */
    MKV_OP_PUT_BATCH,     /* objs, n, replicas: each obj's status */
    MKV_OP_GET_BATCH,     /* objs, n */
    MKV_OP_EXISTS,        /* key: status 1, 0 or an error (mkv_exists) */
    MKV_OP_EXISTS_BATCH,  /* objs, n, results */
    MKV_OP_REMOVE,        /* key */
    MKV_OP_REMOVE_BATCH,  /* objs, n: each obj's status (mkv_remove_batch) */
    MKV_OP_STAT           /* key: len the object's size, crc its CRC32C (mkv_stat); no bytes read */
} mkv_op_kind;

typedef struct mkv_op mkv_op;
typedef void mkv_op_done_fn(mkv_op *op);

struct mkv_op {
    mkv_op_kind kind;
    const void *key;
    size_t keylen;
    void *buf;
    size_t len;
    mkv_obj *objs;
    size_t n;
    int *results;
    int replicas;         /* 0: the client's default */
    int status;           /* out: what the blocking call returns */
    uint32_t crc;         /* out, MKV_OP_STAT: the object's CRC32C */
    /* MKV_OP_GET_BATCH when an object's size is not known ahead: once it
     * is located, place(obj.buf, size) (obj.buf going in is place's ctx)
     * returns registered memory of at least size bytes, which becomes
     * obj.buf, and obj.len the size; NULL fails the object (MKV_ENOMEM),
     * nothing read. Runs on a library thread, once per object. */
    mkv_place_fn *place;
    mkv_op_done_fn *done; /* may be NULL */
    void *ctx;            /* the caller's */
    mkv_op *next;         /* the library's while the operation is in its hands */
};

typedef struct mkv_async mkv_async;

#define MKV_ASYNC_INLINE 1   /* run done on the library's thread, no queue */
/* Queued mode for a loop that watches mkv_async_fd at all times: the fd
 * is also readable when the master's replies to the face's operations
 * came, and mkv_async_drain reads them on the caller's thread, so a reply
 * reaches its done with no thread hand-off (the face's I/O thread then
 * only starts what the link was down for, repeats and times out). */
#define MKV_ASYNC_DRAIN_READS 2

/* An async face over c (which must outlive it): its I/O thread and
 * `threads` threads for transfers (0: as many as c has lanes). */
int mkv_async_open(mkv_async **out, mkv_client *c, int threads, int flags);
/* Readable while completed operations (with MKV_ASYNC_DRAIN_READS, or
 * replies) wait for mkv_async_drain; -1 with MKV_ASYNC_INLINE. */
int mkv_async_fd(const mkv_async *a);
/* Queue op (MKV_OK), or MKV_EINVAL for a bad kind or a closing face. */
int mkv_async_submit(mkv_async *a, mkv_op *op);
/* Run done for every completed operation, on this thread; how many. */
size_t mkv_async_drain(mkv_async *a);
/* Operations submitted and not yet drained (or, inline, not yet done). */
size_t mkv_async_pending(mkv_async *a);
/* Waits until every submitted operation completed, drains (queued
 * mode), stops the threads and frees a. */
void mkv_async_close(mkv_async *a);

/* Run op now on this thread through the blocking calls: op->status
 * set, done not called. */
int mkv_op_run(mkv_client *c, mkv_op *op);

#ifdef __cplusplus
}
#endif
#endif
