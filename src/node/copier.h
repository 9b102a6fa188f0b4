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

#include "node/node.h"
#include "node/task.h"

typedef struct node_copier node_copier;

node_copier *node_copier_start(node *n);
/* Takes ownership of t. */
void node_copier_submit(node_copier *c, node_task *t);
void node_copier_stop(node_copier *c);

#endif
