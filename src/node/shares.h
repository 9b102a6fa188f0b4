/* node/shares.h - a memory node shared by master groups.
 *
 * With --shared-groups the node serves every listed master group (or every group
 * of the slot map in etcd): one control thread per group (control.h),
 * one node id for all of them (taken once from a counter in etcd, then
 * claimed from each group's leader, so a client's engine and every
 * capability name the node alike), and the segment cut into chunks
 * (proto/chunks.h) that it gives groups on request: a group's master
 * places only in its chunks and asks for more when it runs low
 * (MOON.CHUNKS), and gives back chunks it does not use. The data plane
 * serves a group's capabilities only inside its chunks
 * (backend/shares.h). Memory is not split in advance: a busy group
 * simply holds more chunks. With a segment file the chunks each group
 * holds are kept beside it (<file>.chunks) and the id is the file's, so a
 * restarted node gives each group back what it had; the disk tier keeps
 * each group's records apart (disk_tier.h). */
#ifndef MKV_NODE_SHARES_H
#define MKV_NODE_SHARES_H

#include <stddef.h>
#include <stdint.h>

#include "node/node.h"
#include "proto/chunks.h"

/* The groups the node serves into n->groups (one unnamed group without
 * --shared-groups); with --shared-groups also the chunk table, our id from etcd and
 * the data plane serving under them. 0, or -1 with a message. Before
 * the control threads start, after the data plane did. */
int node_shares_setup(node *n, char *err, size_t errlen);
void node_shares_free(node *n);
/* --shared-groups map: a thread reading the slot map every second that
 * joins each group it names that we do not serve yet (its control thread
 * registers with it and it gets a chunk), so a group added to a running
 * cluster gets room on the nodes without restarting them. A group gone
 * from the map is still served (its objects stay where they are). Start
 * after the first groups' control threads; stop before they end. */
void node_shares_follow_start(node *n);
void node_shares_follow_stop(node *n);
/* Group g's chunks now (proto/chunks.h text into out, PROTO_CHUNKS_TEXT; g -1: those no group holds). */
void node_shares_text(node *n, int g, char *out, size_t cap);
uint32_t node_shares_count(node *n, int g);
/* Up to k free chunks to group g: how many it got. */
uint32_t node_shares_grant(node *n, int g, uint32_t k);
/* Chunks g's master gave back (text): free again, their write claims
 * forgotten, unless a range of one is lent to another group (then it
 * stays g's). How many were freed. */
uint32_t node_shares_take_back(node *n, int g, const char *text, size_t len);
/* 1 if seg_off lies in a chunk of group g, clear of ranges lent away,
 * or in a range lent to g (always 1 without --shared-groups). */
int node_shares_mine(node *n, int g, uint64_t seg_off);
/* A note of group g's master (holdings_link.c), before the index takes
 * it. A hold of an object whose extents here lie in another group's
 * chunks, the index holding the same extents under the same key (that
 * group placed it, then gave it away with a moved slot and g adopted
 * it): the ranges are lent to g (backend/shares.h), so g's capabilities
 * are served there. A drop: ranges lent to g go back to their chunk's
 * group. Nothing without --shared-groups. */
void node_shares_noted(node *n, int g, const void *key, size_t keylen, const obj_replica *rep, int drop,
                       uint32_t self);
/* Forget the index entries in g's chunks (its master dropped them). */
void node_shares_forget_index(node *n, int g);

#endif
