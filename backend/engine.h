/* backend/engine.h - the transfer engine: objects to transfer units to paths.
 *
 * The engine knows memory nodes (id + data addresses), opens one path per
 * (local data address, node data address) pair on first use, cuts every
 * transfer into units (unit_size) and spreads them over every path of a node and
 * over every node of a placement at once. A unit that fails on a broken
 * path is retried on another path of the same node; a read whose node
 * fails (every path broken or timed out) or refuses moves to another
 * replica. Writes go to every replica and succeed only if all do.
 *
 * Calls are synchronous (they drive the transport's poll). Threads share
 * one engine: its transfers run on contexts (engine_ctx.h), each a set
 * of transports with their own paths to the nodes, one transfer at a
 * time on each; up to cfg.contexts of them are made as transfers meet
 * each other (with a maker, te_engine_set_maker), so that many run at
 * once and the rest wait for a free one. Nodes, registered buffers and
 * counters are the engine's, one for all its contexts. */
#ifndef MKV_ENGINE_H
#define MKV_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/transport.h"

#define TE_ENGINE_MAX_REPLICAS 8
#define TE_ENGINE_MAX_EXTENTS  4096   /* per replica */
#define TE_ENGINE_MAX_TRANSPORTS 3    /* shm, tcp, rdma */
#define TE_ENGINE_MAX_CONTEXTS 16

/* One piece of a replica: object bytes [sum of earlier lengths, +length)
 * live at node_id's segment offset `offset`, under `cap`. */
typedef struct te_extent {
    uint32_t node_id;
    uint64_t offset;
    uint64_t length;
    te_cap cap;
} te_extent;

typedef struct te_replica {
    const te_extent *ext;     /* in object order; lengths sum to the object's */
    int next;
} te_replica;

typedef struct te_object {
    void *buf;                /* local bytes (read into / written from) */
    uint64_t len;
    /* Optional: the local bytes are these niov segments in order (buf
     * unused), their lengths summing to len, each inside a registered
     * buffer. Every transport must take segments (te_engine_segments);
     * a request then carries up to TE_REQ_SEGS of them. */
    const struct iovec *iov;
    int niov;
    const te_replica *reps;
    int nrep;
    int status;               /* out: TE_OK or the TE_E* that failed it */
    uint32_t failed_node;     /* out: the node whose fault (unreachable, I/O, timeout)
                               * failed it, 0 if none or another cause */
    uint32_t unknown_node;    /* out: a node a replica names that the engine has no
                               * addresses for (the caller's table is stale), 0 if none */
    int crc_ok;               /* out: 1 when every unit's path checksummed it while copying */
    uint32_t crc;             /* out, when crc_ok: crc32c(0, buf, len), no second pass needed */
    /* Optional: with crc_ok, also the CRC32C of each slice_size bytes
     * (the last one shorter) into slice_crc[0 .. ceil(len / slice_size)):
     * no unit then crosses a slice's end, so the slices are the units'
     * sums combined. slices_ok (out) says they were filled. */
    uint64_t slice_size;
    uint32_t *slice_crc;
    int slices_ok;
} te_object;

typedef struct te_engine_config {
    uint64_t unit_size;       /* transfer unit: one request on one path (TE_UNIT_DEFAULT) */
    int nlocal;               /* 0: one path per node address, any local address */
    char local[TE_MAX_PATHS][TE_ADDR_LEN];
    int max_attempts;         /* tries per unit across paths (default 4) */
    int reconnect_ms;         /* after a failed connect, min gap before the next (1000) */
    int streams;              /* connections per network path (default 1, max TE_MAX_STREAMS):
                               * units spread over them, and over the node's threads */
    int contexts;             /* transfers at once, each on a context of its own (default 1,
                               * at most TE_ENGINE_MAX_CONTEXTS; more than 1 needs a maker) */
} te_engine_config;

#define TE_UNIT_DEFAULT (1ULL << 20)   /* unit_size when 0 */

#define TE_MAX_STREAMS 8

typedef struct te_engine_stats {
    uint64_t units, retries, failovers, bytes;
} te_engine_stats;

typedef struct te_engine te_engine;

/* Takes ownership of t (destroyed with the engine). cfg may be NULL. */
te_engine *te_engine_create(te_transport *t, const te_engine_config *cfg);
void te_engine_destroy(te_engine *e);

/* Makes the transports of a further context: the same kinds, in the same
 * order, as the engine's own (te_engine_create's and those added), into
 * out; how many (0 or fewer: none could be made). */
typedef int (*te_transports_fn)(void *arg, te_transport **out, int max, char *err, size_t errlen);
/* Lets e make up to cfg.contexts contexts with make(arg); free_arg(arg)
 * when e is destroyed (may be NULL). */
void te_engine_set_maker(te_engine *e, te_transports_fn make, void *arg, void (*free_arg)(void *arg));
/* Contexts made so far (1 until transfers met each other). */
int te_engine_contexts(te_engine *e);

/* One more transport (ownership passes to the engine, which destroys t
 * itself if it cannot take it). At most one of each kind. Addresses go to
 * transports by scheme (te_transport_ops.scheme: "unix:" to shm, "rdma:"
 * to RDMA), plain host:port to the transport that owns those (TCP), or
 * else to one with bare_fallback (RDMA) when the node names no address of
 * its scheme; addresses no transport takes are skipped. A node with
 * same-host paths (shm) uses them alone if one connects (the peer is on
 * this host), else its network paths. Buffers registered so far get
 * registered with t. */
int te_engine_add_transport(te_engine *e, te_transport *t, char *err, size_t errlen);

/* Adds or replaces a node's data addresses (replacing closes its paths).
 * TE_EINVAL if none suits a transport of the engine. */
int te_engine_add_node(te_engine *e, uint32_t node_id, const char *const *addrs, int naddrs,
                       char *err, size_t errlen);
void te_engine_remove_node(te_engine *e, uint32_t node_id);

/* Register long-lived buffers once, with every transport (RDMA pins
 * them); unregistered buffers
 * are registered for the duration of each call. */
int te_engine_register_buffer(te_engine *e, void *addr, size_t len, char *err, size_t errlen);
void te_engine_unregister_buffer(te_engine *e, void *addr);

/* TE_OK, or the first failure's TE_E* code with a message in err. Batch
 * forms move many objects in one pass and set every objs[i].status. */
int te_engine_write(te_engine *e, const void *buf, uint64_t len, const te_replica *reps, int nrep,
                    char *err, size_t errlen);
int te_engine_read(te_engine *e, void *buf, uint64_t len, const te_replica *reps, int nrep,
                   char *err, size_t errlen);
int te_engine_write_batch(te_engine *e, te_object *objs, int n, char *err, size_t errlen);
int te_engine_read_batch(te_engine *e, te_object *objs, int n, char *err, size_t errlen);

/* The objects that can be read without waiting for anything (no dial,
 * no exchange with a node, no sleep: a same-host path through a mapping
 * that is warm, transport read_now) read at once, whole, from the first
 * replica that can: status TE_OK, crc_ok 1 and crc set. The others get a
 * non-zero status and are to be read with te_engine_read_batch (their
 * buffers may hold some bytes meanwhile). Buffers must be registered.
 * Returns how many were read. */
int te_engine_read_now(te_engine *e, te_object *objs, int n);
/* The same for writes: the objects every replica of which can be written
 * at once (same-host, warm: transport write_now) written, status TE_OK,
 * crc_ok 1 and crc the checksum of their bytes; the others get a non-zero
 * status (some replicas may hold their bytes) and are to be written with
 * te_engine_write_batch. Returns how many were written. */
int te_engine_write_now(te_engine *e, te_object *objs, int n);
/* Dial every known node's missing same-host paths (the only ones
 * te_engine_read_now uses; a node held off after a stall is left alone);
 * how many nodes have a live one. Blocks as a transfer's dials do: for a
 * thread that may wait. */
int te_engine_connect_local(te_engine *e);

void te_engine_get_stats(te_engine *e, te_engine_stats *out);
/* 1 when every transport of e takes requests with local segments, so
 * objects may carry an iov (RDMA does not yet). */
int te_engine_segments(te_engine *e);
/* Bytes moved by the transport named "tcp", "shm" or "rdma" (0 if absent). */
uint64_t te_engine_bytes_via(te_engine *e, const char *transport);

#endif
