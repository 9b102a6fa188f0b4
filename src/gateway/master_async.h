/* gateway/master_async.h - the gateway's pipelined, non-blocking
 * connection to the master, driven by the event loop.
 *
 * Commands are sent at once (hiredis async over the loop's file events)
 * and their replies come back in order to each command's callback, so a
 * batch of MOON.MGETs costs one round trip and the loop never waits. The
 * connection is opened on the first send after a failure (AUTH first when
 * master_auth is set, then the proof of the cluster secret: commands sent
 * meanwhile wait for it), at most every MA_RETRY_MS. A reply that does not
 * come within timeout_ms drops the connection: every pending callback
 * then gets NULL and the caller takes its other path. */
#ifndef MKV_GATEWAY_MASTER_ASYNC_H
#define MKV_GATEWAY_MASTER_ASYNC_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "core/loop.h"

typedef struct master_async master_async;

/* r: the reply, valid during the call; NULL when the connection failed
 * before it came (the command may or may not have run). */
typedef void master_async_cb(const redisReply *r, void *ctx);

struct mkv_client;

/* hostport "host:port"; password NULL or "" for none; secret the
 * cluster's (NULL: ""). NULL if hostport does not parse. Nothing is
 * connected yet. */
master_async *master_async_create(event_loop *loop, const char *hostport, const char *password,
                                  const char *secret, int timeout_ms);
/* The same connection over the process's client (mc, which outlives
 * it) when the master is found through etcd: each command goes on the
 * client's shared master connection by its async face
 * (client/moonkv_internal.h mkv_async_command), which follows the leader
 * and sends again while there is none; replies come back on the loop by
 * the face's fd, in order. No thread waits for one. NULL if the face
 * cannot be opened. */
master_async *master_async_over(event_loop *loop, struct mkv_client *mc);
/* 1 for a connection made by master_async_over. */
int master_async_follows(const master_async *m);

/* Queue one command (binary-safe arguments). 0: cb will be called
 * exactly once; -1: not sent (no connection now), cb will not be called. */
int master_async_send(master_async *m, int argc, const char **argv, const size_t *lens,
                      master_async_cb *cb, void *ctx);
/* Batch commands (MOON.MGET, MOON.MPUTSTART, ...): n items sent as
 * commands of at most PROTO_MAX_BATCH items, pipelined. Each is head
 * (nhead arguments) then per_item arguments per item, which item()
 * fills for item i (num: room for one number's text per argument). One
 * chunk per command sent goes to cb as its ctx, naming its items; the
 * chunks array (*chunks, freed by the caller) has room for all. Returns
 * how many were sent; *failed is set when one could not be (the rest
 * then is not sent either). */
typedef struct ma_chunk {
    void *owner;
    size_t first, n;
} ma_chunk;
typedef void ma_item_fn(void *ctx, size_t i, const char **argv, size_t *lens, char (*num)[24]);
size_t master_async_send_batch(master_async *m, const char *const *head, int nhead, size_t n,
                               int per_item, ma_item_fn *item, void *owner, ma_chunk **chunks,
                               master_async_cb *cb, int *failed);

/* The connection's local address (the interface the master is reached
 * by), the connection opened first if there is none (as a send opens
 * it; the connect completes later). 0, or -1 without one (always over
 * the client: master_async_follows). */
struct sockaddr_storage;
int master_async_local_addr(master_async *m, struct sockaddr_storage *ss);
/* Connections opened so far: a new one may reach a new master. */
uint64_t master_async_epoch(const master_async *m);
/* Pending callbacks get NULL. NULL is fine. */
void master_async_free(master_async *m);

#endif
