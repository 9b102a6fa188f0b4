/* backend/stream_server.h - the core the TCP and shm data servers share.
 *
 * Serves a node's segment on stream sockets: TCP listeners (one per data
 * address) and, when shm_path is set, the unix socket of the shm
 * hand-off. It runs in its own threads (an acceptor plus one thread per
 * connection, capped by max_conns) so data work never blocks the node's
 * event loop or heartbeat. Each connection authenticates with the
 * cluster secret before a single request is read, within auth_timeout_ms
 * and in a pool of unauthenticated connections apart from max_conns
 * (preauth_gate.h), so idle strangers cannot lock members out; each request is
 * bound-checked and its capability verified. On TCP its payload then
 * moves straight between the socket and the segment; on the unix socket
 * the client gets the segment fd (shm_handoff.h) and only the capability
 * checks cross the socket.
 *
 * The node runs it as two data servers (data_server.h), one instance
 * each: te_tcp_data_server and te_shm_data_server below; tests may run
 * one instance with both kinds of listener. */
#ifndef MKV_STREAM_SERVER_H
#define MKV_STREAM_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cap.h"
#include "backend/data_server.h"
#include "backend/transport.h"

typedef struct te_stream_server te_stream_server;

/* As data servers: TCP on listen[] (shm_path ignored), shm on the unix
 * socket shm_path ("@moonkv-node-<pid>" when unset; listen[] ignored). */
extern const te_data_server_ops te_tcp_data_server;
extern const te_data_server_ops te_shm_data_server;

/* Needs a segment and at least one listener (nlisten TCP addresses plus
 * the shm socket if shm_path is set). A "host:0" listener gets a port;
 * te_stream_server_addr gives it back with that port. */
te_stream_server *te_stream_server_start(const te_server_config *c, char *err, size_t errlen);
void te_stream_server_set_cap_key(te_stream_server *s, const uint8_t key[TE_CAP_KEY_LEN]);
/* Bound port of listener i (useful with port 0), -1 if out of range. */
int te_stream_server_port(const te_stream_server *s, int i);
/* TCP listener i as "host:port" with the bound port; -1 if out of range. */
int te_stream_server_addr(const te_stream_server *s, int i, char out[TE_ADDR_LEN]);
void te_stream_server_stats(const te_stream_server *s, te_server_stats *out);
/* Cut up to max (<= 0: all) connections that came in on listener i (-1:
 * any; index nlisten is the shm socket), as when a NIC goes down:
 * clients see those paths break and retry elsewhere. */
void te_stream_server_drop_conns(te_stream_server *s, int listener, int max);
/* pause: closes every connection and joins every thread, the listeners
 * left open (connects queue); resume: serves c's identity (node_id, cap
 * key and term, shares) from then on. A node changing its identity keeps
 * its listeners this way: no client is refused in between. */
void te_stream_server_pause(te_stream_server *s);
void te_stream_server_resume(te_stream_server *s, const te_server_config *c);
/* Closes listeners and connections, joins every thread. */
void te_stream_server_stop(te_stream_server *s);

#endif
