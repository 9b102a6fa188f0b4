/* node/control.h - the node's control plane towards the master.
 *
 * One thread, one hiredis connection (node commands are only accepted on
 * the connection that registered the node): MOON.CHALLENGE/REGISTER,
 * then MOON.HEARTBEAT every heartbeat_ms, handing tasks from the replies
 * (and from the holdings link's pulls, which the master answers as soon
 * as a task waits: holdings_link.h) to the copier and reporting their
 * outcome with MOON.COPYDONE (many per command). Data work never runs here, so heartbeats are never late because of it. A lost
 * connection or a NODEDEAD answer registers again; NODEDEAD after a
 * drain ends the node (node->gone is signalled). */
#ifndef MKV_NODE_CONTROL_H
#define MKV_NODE_CONTROL_H

#include <hiredis/hiredis.h>

#include "node/node.h"

typedef struct node_control node_control;

/* Starts the control thread of group g (node.h); n->groups[g].ctl (and
 * n->ctl for the first) is set before it runs, so the copier
 * (fed by that thread) always sees it. NULL on a bad configuration. */
node_control *node_control_start(node *n, int g);
/* Ask the master to drain us (SIGTERM, MOON.DRAIN on the node). */
void node_control_request_leave(node_control *c);
/* Our master asked (on the holdings link) for a MOON.CHUNKS now: a put
 * of its group found no room in its chunks of our segment. */
void node_control_ask_chunks(node_control *c);
/* A reply's tasks (an array: a heartbeat's, or a holdings pull's,
 * holdings_link.h) for registration gen to the copier as one batch,
 * tagged with that registration's id and caps key; the ones refused are
 * reported failed (node_tasks_parse bounds what a reply may make us
 * allocate). Tasks of a registration that is over are dropped. Any thread. */
void node_control_take_tasks(node_control *c, const redisReply *r, uint64_t gen);
/* The copier finished n tasks of registration gen (ids[i]: oks[i]). */
void node_control_tasks_done(node_control *c, uint64_t gen, const uint64_t *ids, const int *oks, int n);
/* 1 if gen is c's current registration (its tasks may still write). */
int node_control_current(node_control *c, uint64_t gen);
/* Ends the thread; node_control_tasks_done may still be called until node_control_free. */
/* The group c speaks for (node.groups[g]). */
int node_control_group(const node_control *c);
void node_control_stop(node_control *c);
void node_control_free(node_control *c);

#endif
