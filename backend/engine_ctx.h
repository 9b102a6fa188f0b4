/* backend/engine_ctx.h - one transfer context of an engine (engine.h).
 *
 * A context is a set of transports with their own paths (connections,
 * mappings) to every node, and runs one transfer at a time under its
 * lock: a transport is driven by one thread at once. The engine keeps a
 * pool of them, all knowing the same nodes and holding the same
 * registered buffers, so transfers from several threads run at once,
 * each on a context of its own (engine.c). Counters are the engine's,
 * added to atomically from every context. */
#ifndef MKV_ENGINE_CTX_H
#define MKV_ENGINE_CTX_H

#include "backend/engine.h"

typedef struct ectx_counts {
    uint64_t units, retries, failovers, bytes;
    uint64_t bytes_via[TE_ENGINE_MAX_TRANSPORTS];   /* by the index of the context's transport */
} ectx_counts;

typedef struct ectx ectx;

/* Takes ownership of t; cfg may be NULL (defaults filled in). */
ectx *ectx_create(te_transport *t, const te_engine_config *cfg, ectx_counts *counts);
void ectx_destroy(ectx *x);
/* te_engine_add_transport, _add_node, _remove_node, _register_buffer,
 * _unregister_buffer, _connect_local and _segments for this context. */
int ectx_add_transport(ectx *x, te_transport *t, char *err, size_t errlen);
int ectx_add_node(ectx *x, uint32_t node_id, const char *const *addrs, int naddrs, char *err, size_t errlen);
void ectx_remove_node(ectx *x, uint32_t node_id);
int ectx_register(ectx *x, void *addr, size_t len, char *err, size_t errlen);
void ectx_unregister(ectx *x, void *addr);
int ectx_connect_local(ectx *x);
int ectx_segments(const ectx *x);
/* A batch read (writing 0) or write, as te_engine_read_batch. */
int ectx_transfer(ectx *x, te_object *objs, int n, int writing, char *err, size_t errlen);
/* te_engine_read_now (op TE_READ) or te_engine_write_now. */
int ectx_now(ectx *x, te_op op, te_object *objs, int n);
/* The ops of its transports in order (room for TE_ENGINE_MAX_TRANSPORTS): how many. */
int ectx_transport_kinds(const ectx *x, const te_transport_ops **ops);

#endif
