/* client/moonkv_internal.h - libmoonkv's internal interface for the
 * gateway: the one header of src/client beyond moonkv.h and
 * moonkv_async.h that code outside src/client may include (the gateway
 * does; applications never should: it may change with the library).
 * It is the gateway's contract with the library:
 *
 * - located replicas: gets and puts in two halves, for a caller that asks
 *   the master itself over its own asynchronous connection. The caller
 *   sends MOON.MGET (or MOON.GET), hands each key's element of the reply
 *   to mkv_located_parse (or sends MOON.MGETPACKED and hands each decoded
 *   record to mkv_located_take), finds memory for the sizes it learns,
 *   and later, on any thread with that thread's client, moves the bytes
 *   with mkv_read_located: one engine batch for all keys, checksums
 *   verified, another replica read after a mismatch. The read leases stay
 *   the caller's to give back (MOON.RELEASE key lease_until, or
 *   mkv_async_lease: ahead of its face's next command). Puts split
 *   the same way: MOON.MPUTSTART by the caller, mkv_placed_parse (or its
 *   PACKED form's mkv_placed_take), the bytes by mkv_write_located,
 *   MOON.MPUTEND by the caller. The commands and their decoders are
 *   src/proto's (cmd.h, replies.h, located.h, placed.h, ended.h).
 * - staging memory: mkv_register_buffer_cold registers a pool that
 *   becomes resident only where it is used;
 * - one control command on a client's master connection, which follows
 *   the leader through etcd (mkv_command), for a caller without an
 *   asynchronous connection of its own; or the same on an async face
 *   (mkv_async_command), completed as the face's operations are: the
 *   gateway's master connection when the master is found through etcd. */
#ifndef MKV_CLIENT_MOONKV_INTERNAL_H
#define MKV_CLIENT_MOONKV_INTERNAL_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "client/moonkv.h"
#include "client/moonkv_async.h"
#include "proto/located.h"
#include "proto/placed.h"

typedef struct mkv_located mkv_located;
struct proto_slices;

/* One element of a MOON.MGET reply (or a MOON.GET reply): MKV_OK with
 * *out and the object's size, MKV_ENOTFOUND for nil, or the error the
 * master sent / MKV_EPROTO (message in mkv_last_error(c)). */
int mkv_located_parse(mkv_client *c, const redisReply *r, mkv_located **out, uint64_t *size);
/* One record of a MOON.MGETPACKED reply, decoded by the caller
 * (proto_located_next): MKV_OK with *out, which takes the record's
 * slices and copies its extents (the caller's buffer is free again),
 * and the object's size, or MKV_ENOTFOUND for a missing key. */
int mkv_located_take(mkv_client *c, proto_located *r, mkv_located **out, uint64_t *size);
/* The read lease's expiry, for MOON.RELEASE; 0 if it has none. */
uint64_t mkv_located_lease(const mkv_located *l);
void mkv_located_free(mkv_located *l);

/* Read objs[i] (buf registered, len at least the size) from loc[i]; sets
 * every objs[i].status and len. MKV_EAUTH for an object means its lease
 * ran out before the read: locate it again. MKV_OK when the batch ran. */
int mkv_read_located(mkv_client *c, mkv_obj *objs, mkv_located *const *loc, size_t n);

/* The objects that can be read without waiting (a same-host node's
 * mapping, warm: te_engine_read_now) read and verified at once:
 * objs[i].status MKV_OK and len; every other one another status, to be read
 * with mkv_read_located (its buffer may hold some bytes meanwhile). No
 * dial, no master or node round trip, no sleep: for an event loop, on a
 * client no other thread uses meanwhile. How many were read. */
size_t mkv_read_located_now(mkv_client *c, mkv_obj *objs, mkv_located *const *loc, size_t n);
/* Dial the same-host data paths (shm) to every node c knows, the ones
 * mkv_read_located_now can use (a thread that may wait); how many nodes
 * have one. */
int mkv_connect_paths(mkv_client *c);

/* Read bytes [off, off+len) of the object located by l into buf (just
 * those bytes; registered or not), from replica `replica` alone, or with
 * -1 from any (the engine fails over when a node fails). MKV_OK with
 * their CRC32C in *crc (the engine's from the way in, else a pass); a
 * reader verifying slices reads one slice per call. */
int mkv_read_located_range(mkv_client *c, const mkv_located *l, int replica, void *buf, uint64_t off,
                           uint64_t len, uint32_t *crc);
/* The object's replica count, and its slice CRCs (count 0: it keeps none). */
uint32_t mkv_located_replicas(const mkv_located *l);
const struct proto_slices *mkv_located_slices(const mkv_located *l);

/* One element of a MOON.MPUTSTART reply for an object of size bytes:
 * MKV_OK with *out (its write placement), or the master's refusal
 * (MKV_EEXISTS, MKV_ENOSPACE, MKV_ENOREPLICAS, ...) or MKV_EPROTO. */
int mkv_placed_parse(mkv_client *c, const redisReply *r, uint64_t size, mkv_located **out);
/* One record of a MOON.MPUTSTART PACKED reply, decoded by the caller
 * (proto_placed_next with TE_CAP_WRITE): MKV_OK with *out (its extents
 * copied: the caller's buffer is free again), or the master's refusal. */
int mkv_placed_take(mkv_client *c, const proto_placed *r, mkv_located **out);
/* A MOON.PUTEND reply, or one element of MOON.MPUTEND's array: MKV_OK or
 * the master's refusal. */
int mkv_ended_parse(mkv_client *c, const redisReply *r);
/* A refusal in a MOON.MPUTEND PACKED reply (proto/ended.h), its text
 * err: the MKV_E* code, with the text as c's last error. */
int mkv_ended_take(mkv_client *c, const char *err, size_t errlen);
/* Write objs[i] (buf registered, len its size) to every replica of
 * loc[i], all in one engine batch; sets every objs[i].status. crc[i]:
 * the value's CRC32C for MOON.MPUTEND when written; failed_node[i]: the
 * node whose fault failed it (0: none or another cause). */
int mkv_write_located(mkv_client *c, mkv_obj *objs, mkv_located *const *loc, size_t n,
                      uint32_t *crc, uint32_t *failed_node);
/* Write bytes [off, off+len) of the object placed by loc, taken from buf
 * (which holds just those bytes; registered or not: the engine registers
 * it for this call), to every replica: a value streamed to its nodes
 * piece by piece while it still arrives. MKV_OK with the pieces' CRC32C
 * in *crc; else the failure, with *failed_node as mkv_write_located's. */
/* mkv_write_located for the objects every replica of which can be
 * written at once (same-host nodes with warm mappings), as
 * mkv_read_located_now: no dial, no round trip, no sleep. Those written
 * get status MKV_OK and their CRC32C in crc[i] (computed as they were
 * copied); the others MKV_PENDING (some replicas may hold their bytes)
 * for mkv_write_located. How many were written. */
size_t mkv_write_located_now(mkv_client *c, mkv_obj *objs, mkv_located *const *loc, size_t n, uint32_t *crc);
int mkv_write_located_range(mkv_client *c, const mkv_located *loc, const void *buf, uint64_t off,
                            uint64_t len, uint32_t *crc, uint32_t *failed_node);
/* MOON.PUTREVOKE key on c's own master connection (best effort). */
void mkv_revoke(mkv_client *c, const void *key, size_t keylen);

/* Forget the node table and ask the master for it again (after the
 * caller's own master connection was reopened: a new master may number
 * nodes afresh, and the placements' term is then adopted with it). */
int mkv_topology_relearn(mkv_client *c);
/* Ask the master for the node table again, keeping the term: nodes that
 * joined since are learnt. */
int mkv_topology_refresh(mkv_client *c);

/* mkv_register_buffer without warming the pages for the kernel's copies
 * (which makes every page resident): for memory that should only become
 * resident where it is used, as the gateway's staging pool. */
int mkv_register_buffer_cold(mkv_client *c, void *addr, size_t len);

/* Send one command (binary-safe arguments, built by proto/cmd.h) and
 * wait for its reply; *code is MKV_OK, or MKV_ECONN/MKV_ETIMEDOUT when it
 * returns NULL. */
redisReply *mkv_command(mkv_client *c, int argc, const char **argv, const size_t *argvlen,
                        int *code);

/* mkv_command on one master group: the group at index *group of the
 * slot map, or the first after it whose master may hold objects (it owns
 * a slot, or a slot still moving away from it), *group set to that
 * index; NULL with *code MKV_ENOTFOUND once no group from *group on does.
 * A client that is not a router is group 0 alone. For questions every
 * group answers in part (keys, counts, a flush): the caller walks the
 * groups from 0. */
redisReply *mkv_command_group(mkv_client *c, int *group, int argc, const char **argv, const size_t *argvlen,
                              int *code);

/* A caller's own master command on an async face (mkv_async_command). */
typedef struct mkv_cmd_op {
    mkv_op op;                /* op.done, op.ctx: the caller's; op.status MKV_OK with a reply,
                                 else why none came (MKV_ECONN, MKV_ETIMEDOUT, ...) */
    redisReply *reply;        /* out: the master's reply, the caller's to free; NULL with none */
    mkv_async *face;          /* the library's while in flight */
    void *out;
} mkv_cmd_op;
/* Send one command (binary-safe arguments, built by proto/cmd.h) on the
 * client's shared master connection through a: under etcd to the leader,
 * sent again while there is none or it answers READONLY (until
 * timeout_ms), as the face's own operations are. Its reply completes op
 * as they complete (queued for mkv_async_drain, or inline). No thread
 * waits for it. MKV_OK, or MKV_EINVAL (a closing face; op not taken). */
int mkv_async_command(mkv_async *a, mkv_cmd_op *op, int argc, const char **argv, const size_t *lens);
/* A read's lease (mkv_located_lease) given back on a: MOON.RELEASE goes
 * ahead of a's next master command, in its write, so it costs no write,
 * master wake-up or reply read of its own. 0 is no lease. */
void mkv_async_lease(mkv_async *a, const void *key, size_t keylen, uint64_t until);
/* The leases given back on a that no command took yet, sent now as a
 * command of their own (its reply is dropped): for a caller that may
 * send nothing more for a while. 1 if one was sent, 0 if none waited. */
int mkv_async_lease_flush(mkv_async *a);
/* Master connections the client opened so far: a new one may reach a
 * new master (a new leader numbers nodes afresh). */
uint64_t mkv_master_epoch(mkv_client *c);
/* The local address of the client's master connection (the interface
 * the master is reached by, for a gateway's announced address): MKV_OK,
 * or MKV_ECONN while none is open. Opens none. */
struct sockaddr_storage;
int mkv_master_local_addr(mkv_client *c, struct sockaddr_storage *ss);

#endif
