/* proto/task.h - a task in MOON.HEARTBEAT's reply (docs/PROTOCOL.md),
 * decoded with no I/O:
 *
 *   copy     [task_id, key, object_size,
 *             [[src_node, offset, length, read_cap] ...], [[offset, length, write_cap] ...]]
 *   offload  [task_id, key, object_size, [[this_node, offset, length, read_cap] ...], DISK, crc
 *             (, [obj_off ...])]
 *   load     [task_id, key, object_size, [[offset, length, write_cap] ...], LOAD, crc]
 *   push     [task_id, key, object_size, [[node, offset, length, write_cap] ...], PUSH, crc]
 *
 * A copy of a replica striped over nodes carries this node's share only:
 * source and destination lengths agree and are at most object_size. An
 * offload (this node's segment to its disk), a load (its disk record
 * into its segment) or a push (its disk record to other nodes' extents,
 * a repair whose only source is this disk) moves the whole object; for
 * an object striped over nodes, this node's share (its slices, in object
 * order: one disk record; a push's extents are the new replica's pieces
 * that hold those bytes). An offload of a share also says where each of
 * its extents lies in the object (the record keeps it: a master that
 * lost its table rebuilds the object from every node's pieces); a node
 * from before takes a task of 7 elements as malformed and fails it (the
 * object stays in DRAM). The extents are decoded by
 * extents.h, which refuses a bad task whole and bounds what one can make
 * us allocate by PROTO_MAX_EXTENTS. */
#ifndef MKV_PROTO_TASK_H
#define MKV_PROTO_TASK_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/engine.h"

enum { PROTO_COPY_TASK = 0, PROTO_OFFLOAD_TASK = 1, PROTO_LOAD_TASK = 2, PROTO_PUSH_TASK = 3 };

typedef struct proto_task {
    uint64_t id;                /* also set on -1 when it could be read (to report it failed), else 0 */
    int kind;                   /* PROTO_*_TASK */
    uint64_t size;              /* the object's */
    uint64_t len;               /* the bytes the task moves */
    te_extent *src, *dst;       /* fresh arrays (proto_task_free); an offload has no dst, a load
                                 * or a push no src (a push's dst are other nodes') */
    uint32_t nsrc, ndst;
    uint64_t expiry_ms;         /* the earliest cap of the extents written (an offload's: read) */
    const char *key;            /* offload, load, push: into the reply, keylen bytes (NUL after them) */
    size_t keylen;
    uint32_t crc;               /* offload, load, push: the object's CRC32C */
    uint64_t *obj_off;          /* an offload of a share: where each src extent lies in the object
                                 * (nsrc, increasing, the extents inside the object), fresh; or NULL */
} proto_task;

/* The task r: 0 with *out, or -1 (nothing to free). */
int proto_dec_task(const redisReply *r, proto_task *out);
void proto_task_free(proto_task *t);

#endif
