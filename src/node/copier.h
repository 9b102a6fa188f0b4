/* node/copier.h - copy tasks: re-replication and drain.
 *
 * A task (from a heartbeat reply) names source extents on other nodes,
 * with read caps, and destination extents in this node's segment, with
 * write caps. The copier thread checks the destinations, then reads each
 * destination's share of the source byte stream through the transfer
 * engine straight into the segment, and reports the outcome. */
#ifndef MKV_NODE_COPIER_H
#define MKV_NODE_COPIER_H

#include <stdint.h>

#include "backend/engine.h"
#include "node/node.h"

#define NODE_TASK_MAX_EXTENTS TE_ENGINE_MAX_EXTENTS

typedef struct node_dst {
    uint64_t offset, length;
    te_cap cap;
} node_dst;

typedef struct node_task {
    uint64_t id;
    uint64_t gen;                  /* registration it belongs to */
    uint32_t node_id;              /* our id then, and the key to check caps */
    uint8_t cap_key[TE_CAP_KEY_LEN];
    uint64_t size;
    int nsrc, ndst;
    te_extent *src;
    node_dst *dst;
    struct node_task *next;
} node_task;

typedef struct node_copier node_copier;

node_copier *node_copier_start(node *n);
/* Takes ownership of t. */
void node_copier_submit(node_copier *c, node_task *t);
void node_task_free(node_task *t);
void node_copier_stop(node_copier *c);

#endif
