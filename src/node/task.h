/* node/task.h - a copy task from the master (re-replication, drain).
 *
 * MOON.HEARTBEAT replies carry tasks (docs/PROTOCOL.md):
 *   [task_id, key, object_size,
 *    [[src_node, offset, length, read_cap] ...], [[offset, length, write_cap] ...]]
 * meaning: read the source byte stream, in order, and write it, in order,
 * into the destination extents of this node's segment. When the new
 * replica is striped over nodes, each node's task carries only its share
 * of the object (source and destination lengths agree, and are at most
 * object_size). The task is decoded by proto/task.c (its extents by
 * proto/extents.c), which refuses a bad reply whole and bounds what one
 * can make us allocate by PROTO_MAX_EXTENTS.
 *
 * An offload to the disk tier (docs/SSD_TIER.md) is
 *   [task_id, key, object_size, [[this_node, offset, length, read_cap] ...], DISK, crc(, [obj_off ...])]
 * : the whole object, lying in this node's segment, goes to the disk
 * store under key, checked against crc; or this node's share of an
 * object striped over nodes, with where each extent lies in the object
 * (kept in the record). A load from the disk tier is
 *   [task_id, key, object_size, [[offset, length, write_cap] ...], LOAD, crc]
 * : the record of key (its CRC checked on the read) into the
 * destination extents. A push of the record to other nodes (a repair
 * whose only source is this disk) is
 *   [task_id, key, object_size, [[node, offset, length, write_cap] ...], PUSH, crc]
 * : the record read (CRC checked) and written to those extents. */
#ifndef MKV_NODE_TASK_H
#define MKV_NODE_TASK_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "backend/cap.h"
#include "backend/engine.h"
#include "core/jobqueue.h"
#include "proto/limits.h"

#define NODE_TASK_OFFLOAD 1   /* PROTO_OFFLOAD_TASK (proto/task.h) */
#define NODE_TASK_LOAD    2   /* PROTO_LOAD_TASK */
#define NODE_TASK_PUSH    3   /* PROTO_PUSH_TASK */
typedef struct node_task {
    uint64_t id;
    struct node_control *ctl;      /* the group's control thread that took it */
    uint64_t gen;                  /* registration it belongs to (of ctl) */
    uint32_t node_id;              /* our id then, and the key to check caps */
    uint8_t cap_key[TE_CAP_KEY_LEN];
    uint64_t cap_term;             /* the master's term then */
    uint64_t size;                 /* the object's */
    uint64_t len;                  /* the bytes this task moves (its share) */
    int nsrc, ndst;
    te_extent *src;
    te_extent *dst;                /* on this node: node_id from the write caps (a push's: any node) */
    uint64_t expiry_ms;            /* the earliest of dst's write caps: no byte lands after it */
    int failed;                    /* the copier gave up on it */
    int to_disk;                   /* NODE_TASK_OFFLOAD: src (ours) to the disk store;
                                      NODE_TASK_LOAD: the disk record into dst;
                                      NODE_TASK_PUSH: the disk record sent to dst */
    uint32_t crc;                  /* to_disk: the object's CRC32C */
    char *key;                     /* to_disk: the object's key */
    uint64_t *obj_off;             /* an offload of a share: where each src extent lies in the object, or NULL */
    size_t keylen;
    struct node_task *next;        /* the rest of its batch */
    jq_job job;                    /* the copier's queue (the batch's first task) */
} node_task;

/* The task in r, or NULL if malformed; *id is its id when that much
 * could be read (so it can be reported failed), else 0. */
node_task *node_task_parse(const redisReply *r, uint64_t *id);
/* The tasks of a heartbeat reply r (an array of tasks), linked by next
 * in order; NULL if none. What one reply can make us allocate is bounded:
 * at most PROTO_MAX_TASKS tasks, carrying at most PROTO_MAX_TASK_EXTENTS
 * extents together (the first task excepted); the tasks refused (malformed
 * or beyond the bounds) whose id could be read go to refused (room for
 * PROTO_MAX_TASKS; ids beyond that are dropped: their tasks fail by
 * deadline), *nrefused of them. */
node_task *node_tasks_parse(const redisReply *r, uint64_t *refused, size_t *nrefused);
/* The source extents carrying object bytes [pos, pos+len), trimmed to
 * it, into out (room for t->nsrc); how many. */
int node_task_src_range(const node_task *t, uint64_t pos, uint64_t len, te_extent *out);
void node_task_free(node_task *t);

#endif
