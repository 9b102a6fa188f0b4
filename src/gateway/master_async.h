/* gateway/master_async.h - the gateway's pipelined, non-blocking master
 * connection, driven by the event loop: the process's client's, used
 * through its async face.
 *
 * Each command goes on the client's one shared master connection by the
 * face (client/moonkv_internal.h mkv_async_command), which follows the
 * leader through etcd and sends again while there is none; replies come
 * back on the loop by the face's fd, in order, to each command's
 * callback, so a batch of MOON.MGETs costs one round trip and no thread
 * waits for one. The gateway has no master connection of its own beside
 * the client's, with --master as through etcd. A reply that does not
 * come within the client's timeout_ms, or a connection that fails,
 * gives the callback NULL and the caller takes its other path. */
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

/* The connection over the process's client (mc, which outlives it);
 * NULL if the face cannot be opened (mc a router: master groups). */
master_async *master_async_over(event_loop *loop, struct mkv_client *mc);

/* Queue one command (binary-safe arguments). 0: cb will be called
 * exactly once; -1: not sent (the face is closing), cb will not be called. */
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

/* A read lease (mkv_located_lease; 0: none) given back: MOON.RELEASE
 * goes ahead of the next command sent on m, in its write, or by itself
 * after a few ms when none was sent. A read's own MOON.MRELEASE was a
 * master command, a write and a reply's wake-up per batch. */
void master_async_release(master_async *m, const void *key, size_t keylen, uint64_t until);
/* How many times the leases waited for no command and went by themselves. */
uint64_t master_async_lease_flushes(const master_async *m);
/* How many times the loop was woken by the face's fd (its replies, or
 * completions queued by the face's threads): about one per master round
 * trip when nothing else rides on the connection. */
uint64_t master_async_wakeups(const master_async *m);

/* The face the commands go on (its completions drain on the loop): the
 * gateway submits the face's own operations there too (DEL, EXISTS). */
struct mkv_async *master_async_face(master_async *m);

/* The local address of the client's master connection (the interface
 * the master is reached by): 0, or -1 while it has none open. */
struct sockaddr_storage;
int master_async_local_addr(master_async *m, struct sockaddr_storage *ss);
/* Connections the client opened so far: a new one may reach a new master. */
uint64_t master_async_epoch(const master_async *m);
/* Waits for what is in flight (each within the client's timeout), whose
 * callbacks then get NULL. NULL is fine. */
void master_async_free(master_async *m);

#endif
