/* node/copier.h - copy tasks: re-replication and drain.
 *
 * A task (from a heartbeat reply) names source extents on other nodes,
 * with read caps, and destination extents in this node's segment, with
 * write caps. The copier thread checks the destinations, then reads each
 * destination's share of the source byte stream through the transfer
 * engine straight into the segment, and reports the outcome. Tasks come
 * in batches (one heartbeat reply's) and are read in engine batches. */
#ifndef MKV_NODE_COPIER_H
#define MKV_NODE_COPIER_H

#include <stdint.h>

#include "node/node.h"
#include "node/task.h"

typedef struct node_copier node_copier;

node_copier *node_copier_start(node *n);
/* Takes ownership of the batch: tasks of one registration linked by
 * next, run and reported together (node_control_tasks_done). */
void node_copier_submit(node_copier *c, node_task *batch);
/* Half its queue of batches is taken: a holdings pull then leaves tasks
 * for later (each pull's tasks are a batch of their own, and a full queue
 * fails what comes). Any thread. */
int node_copier_busy(node_copier *c);
void node_copier_stop(node_copier *c);

#endif
