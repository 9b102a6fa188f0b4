/* node/holdings_link.h - the node's index kept from the master's holdings
 * notes, on a connection and thread of their own.
 *
 * The master answers a put's end (a remove, a flush) only once every node
 * it gave a note to has acknowledged it (master/acks.c), so notes must
 * reach the index at once, not at the next poll. This thread links a
 * second master connection to the registration the control thread made
 * (MOON.CHALLENGE, MOON.HOLDLINK: node commands are taken only on the
 * connection that registered, and a pull that waits must not hold up
 * heartbeats), then loops MOON.HOLDINGS id ack PACKED SLICES WAIT ms: the
 * master answers at once when notes wait, else when the next one comes;
 * the notes go into the index and the next pull, carrying their ack,
 * leaves at once. The pulls take the node's tasks too (TASKS): the
 * master answers one as soon as a task waits for us (a load a get waits
 * for), and they go to the copier as a heartbeat's would
 * (node_control_take_tasks); a master without TASKS leaves them to the
 * heartbeats, and so does a pull while the copier has half its queue
 * of batches (node_copier_busy: each pull's tasks are a batch).
 *
 * Control drives it: pause when it loses the master or registers again
 * (no reply of the old registration is applied after pause returns),
 * resume once registered (the pulls start again from ack 0). A master
 * from before MOON.HOLDLINK is pulled from on control's own connection
 * every 100 ms instead (node_holdings_fallback). */
#ifndef MKV_NODE_HOLDINGS_LINK_H
#define MKV_NODE_HOLDINGS_LINK_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "node/node.h"

#define HOLDINGS_WAIT_MS 250   /* a pull waits this long for a note at most */

typedef struct node_holdings node_holdings;

/* The link of one group: ctl its control thread, st its status, cluster
 * its etcd prefix (node.h's node_group). */
node_holdings *node_holdings_start(node *n, struct node_control *ctl, int g, node_status *st, const char *cluster);
void node_holdings_free(node_holdings *h);   /* stops the thread */
void node_holdings_pause(node_holdings *h);
/* Registered as id (control's registration reg_gen) with the master at
 * host:port, the leader of term (as etcd named it; with --etcd the link
 * leaves it once etcd names another, etcd/leader_watch.h); instance_hex
 * is this process's token (MOON.REGISTER INSTANCE). */
void node_holdings_resume(node_holdings *h, uint32_t id, uint64_t reg_gen, const char *host, int port,
                          int64_t term, const char *instance_hex);
/* With a master that has no MOON.HOLDLINK: pull on control's connection
 * rc (every 100 ms). 0, or -1 if rc broke (drop it). */
int node_holdings_fallback(node_holdings *h, redisContext *rc, uint32_t self);
/* Pulls answered so far: the scrub confirms a mismatch only after a pull
 * sent after it saw it (node/scrub.h). */
uint64_t node_holdings_pulls(node_holdings *h);

#endif
