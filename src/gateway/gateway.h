/* gateway/gateway.h - the gateway role: the standalone server's RESP
 * commands with values kept in the cluster.
 *
 * The command code (t_object.c) is shared; the gateway gives it a store
 * (store_cluster.c) that moves values through libmoonkv: a SET's value
 * streams from the socket into registered staging memory and is put to
 * the nodes when complete (a large one is written to the nodes slice by
 * slice while it arrives, put_stream.h); a GET reads the value from the nodes into
 * staging memory and replies from there without another copy. GET, MGET
 * and SET are batched per loop iteration: one pipelined master command
 * over an asynchronous connection (master_async.c) and one engine batch
 * on a worker thread (read_batch.c, put_batch.c, gateway_async.c), while
 * the loop serves others.
 * gateway_role_main is the role's entry (src/main/roles.c). */
#ifndef MKV_GATEWAY_H
#define MKV_GATEWAY_H

#include <stddef.h>
#include <stdint.h>

#include "core/loop.h"
#include "resp/resp_writer.h"
#include "server/config.h"
#include "server/store.h"

/* Connects to cfg->master (libmoonkv for data, a plain connection for
 * INFO) and maps a staging pool of cfg->segment_size bytes; values up to
 * cfg->proto_max_bulk_len are accepted. NULL with a message in err. */
store *cluster_store_create(event_loop *loop, const mkv_config *cfg, char *err, size_t errlen);
/* The "# Gateway" INFO fields of a cluster store. */
void cluster_store_info(store *s, resp_buf *out);

struct server;
/* Replace the object commands that reach the master (GET, MGET, SET,
 * DEL, EXISTS, STRLEN, TYPE, TTL, DBSIZE, SCAN, KEYS, FLUSHALL, and INFO)
 * with forms that hold the client's reply while the master and the nodes
 * answer (gateway_async.c). srv->store must be a cluster store. */
void gateway_async_register(struct server *srv);

/* The gateway role on an initialised server; the process exit code. */
int gateway_role_main(struct server *srv);

#endif
