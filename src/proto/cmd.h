/* proto/cmd.h - the MOON.* commands as binary-safe argument vectors.
 *
 * Each encoder fills a proto_cmd (argv / lens, as redisCommandArgv and
 * redisAsyncCommandArgv take them); the caller sends it however it talks
 * to the master and frees it. No I/O here. Keys and other byte strings
 * are pointed to, not copied: they must outlive the send. Numbers are
 * kept in the command itself, so a proto_cmd is not copied or moved
 * while in use. Commands of up to PROTO_CMD_INLINE arguments allocate
 * nothing.
 *
 * The "_begin" encoders write the verb and its fixed arguments for n
 * items; the caller adds each item with the matching "_add" (or
 * proto_cmd_bin for a plain key list). Going past the room they made is
 * a bug and aborts. */
#ifndef MKV_PROTO_CMD_H
#define MKV_PROTO_CMD_H

#include <stddef.h>
#include <stdint.h>

#include "proto/verbs.h"
#include "resp/resp_writer.h"

#define PROTO_CMD_INLINE 8
#define PROTO_NUM_LEN    24     /* room of one decimal argument */

typedef struct proto_cmd {
    int argc, cap;
    const char **argv;
    size_t *lens;
    char (*nums)[PROTO_NUM_LEN];
    const char *argv_in[PROTO_CMD_INLINE];
    size_t lens_in[PROTO_CMD_INLINE];
    char nums_in[PROTO_CMD_INLINE][PROTO_NUM_LEN];
} proto_cmd;

/* ---- the vector ---- */

/* Room for maxargs arguments, none yet. */
void proto_cmd_init(proto_cmd *cmd, int maxargs);
void proto_cmd_free(proto_cmd *cmd);
void proto_cmd_bin(proto_cmd *cmd, const void *p, size_t len);
void proto_cmd_str(proto_cmd *cmd, const char *s);
void proto_cmd_u64(proto_cmd *cmd, uint64_t v);
void proto_cmd_i64(proto_cmd *cmd, int64_t v);
/* cmd as the RESP array a client sends (what hiredis would write). */
void proto_cmd_resp(const proto_cmd *cmd, resp_buf *out);

/* ---- verbs without arguments, or with one key ---- */

/* MOON.CHALLENGE, MOON.TOPOLOGY, MOON.FLUSH: verb is one of them. */
void proto_cmd_bare(proto_cmd *cmd, const char *verb);
/* MOON.GET, MOON.EXISTS, MOON.REMOVE, MOON.OBJECT, MOON.PUTREVOKE key. */
void proto_cmd_key(proto_cmd *cmd, const char *verb, const void *key, size_t keylen);
/* MOON.MGET, MOON.MGETPACKED, MOON.MEXISTS, MOON.PREFIX key [key ...]:
 * room for n keys, added with proto_cmd_bin. */
void proto_cmd_keys_begin(proto_cmd *cmd, const char *verb, size_t n);

/* ---- membership and auth ---- */

void proto_cmd_prove(proto_cmd *cmd, const char *proof_hex);
/* MOON.HOLDLINK proof id instance */
void proto_cmd_holdlink(proto_cmd *cmd, const char *proof_hex, uint32_t id, const char *instance);

/* MOON.REGISTER proof segment_size addr [addr ...] [ID|CLAIM id] [KEPT 1]
 * INSTANCE hex SEEN id [CHUNKS text]; claim_id 0: none, claim_again: "ID" (an id this
 * process had) rather than "CLAIM" (one a new process takes over). */
typedef struct proto_register_args {
    const char *proof_hex;
    uint64_t segment_size;
    const char *const *addrs;
    int naddrs;
    uint32_t claim_id;
    int claim_again;
    int kept;
    const char *instance_hex;
    uint32_t seen_max;
    const char *chunks;           /* a shared node's chunks for this group (proto/chunks.h), or NULL */
} proto_register_args;
void proto_cmd_register(proto_cmd *cmd, const proto_register_args *a);

/* MOON.CHUNKS id chunks [FREE n]: a shared node's chunks for the master's
 * group, and (free_chunks >= 0) how many chunks no group holds. */
void proto_cmd_chunks(proto_cmd *cmd, uint32_t id, const char *chunks, long free_chunks);
/* MOON.SLOTEXPORT group version epoch offset max: a group's pull of the
 * records another group gives it (master/slot_move.c). */
void proto_cmd_slotexport(proto_cmd *cmd, const char *group, uint64_t version, uint64_t epoch, uint64_t offset,
                          uint32_t max);
/* MOON.LENT id L|B off len ...: ranges of the master's group's chunks a
 * shared node lent to another group (L) or got back (B); begin with how
 * many, then each (master/shares.c). */
#define PROTO_LENT_MAX 256   /* ranges per command */
void proto_cmd_lent_begin(proto_cmd *cmd, uint32_t id, size_t n);
void proto_cmd_lent_add(proto_cmd *cmd, int back, uint64_t off, uint64_t len);
/* MOON.HEARTBEAT id used [disk_free N]: disk_free only from a node with
 * a disk tier (PROTO_HB_DISK_FREE; 0 sends none). */
void proto_cmd_heartbeat(proto_cmd *cmd, uint32_t id, uint64_t used, uint64_t disk_free);
/* MOON.LEAVE id, MOON.DRAIN id (verb one of them) */
void proto_cmd_node(proto_cmd *cmd, const char *verb, uint32_t id);
/* MOON.NODES [EXPECTED] */
void proto_cmd_nodes(proto_cmd *cmd, int expected);
/* MOON.SUSPECT id [id ...]: room for n ids (at most PROTO_MAX_SUSPECTS),
 * added with proto_cmd_u64. */
void proto_cmd_suspect_begin(proto_cmd *cmd, size_t n);
/* MOON.GATEWAY addr */
void proto_cmd_gateway(proto_cmd *cmd, const char *addr);

/* ---- holdings, copies, reports ---- */

/* MOON.HOLDINGS id acked PACKED [SLICES] [TASKS] [WAIT ms]: wait_ms 0
 * answers at once; flags: PROTO_HOLDINGS_SLICES (not for a master that
 * keeps no slice CRCs), PROTO_HOLDINGS_TASKS (the node's tasks come in
 * the reply too, proto_holdings_tasks). */
#define PROTO_HOLDINGS_SLICES 1
#define PROTO_HOLDINGS_TASKS  2
void proto_cmd_holdings(proto_cmd *cmd, uint32_t id, uint64_t acked, int flags, int wait_ms);
/* MOON.COPYDONE task OK|FAIL [...]: room for n outcomes. */
void proto_cmd_copydone_begin(proto_cmd *cmd, size_t n);
void proto_cmd_copydone_add(proto_cmd *cmd, uint64_t task_id, int ok);
/* MOON.BADREPLICA id key seg_offset [...]: room for n replicas. */
void proto_cmd_badreplica_begin(proto_cmd *cmd, uint32_t id, size_t n);
void proto_cmd_badreplica_add(proto_cmd *cmd, const void *key, size_t keylen, uint64_t seg_off);
/* The same for key's record on the node's disk tier (seg_offset DISK). */
void proto_cmd_badreplica_add_disk(proto_cmd *cmd, const void *key, size_t keylen);
/* MOON.REPORTDONE [peer ...]: room for n peer ids (proto_cmd_u64). */
void proto_cmd_reportdone_begin(proto_cmd *cmd, size_t n);
/* The RESP head of MOON.REPORT PACKED blob for a blob of bloblen bytes,
 * into out (room bytes, PROTO_REPORT_HEAD_MAX is enough): the blob and
 * "\r\n" follow it on the wire. Returns the head's length. */
#define PROTO_REPORT_HEAD_MAX 64
size_t proto_report_head(char *out, size_t room, size_t bloblen);

/* ---- put ---- */

/* MOON.PUTSTART key size REPLICAS n */
void proto_cmd_putstart(proto_cmd *cmd, const void *key, size_t keylen, uint64_t size, int replicas);
/* MOON.MPUTSTART REPLICAS n PACKED key size [...]: room for n keys. */
void proto_cmd_mputstart_begin(proto_cmd *cmd, int replicas, size_t n);
void proto_cmd_mputstart_add(proto_cmd *cmd, const void *key, size_t keylen, uint64_t size);

/* The fixed heads of MOON.MPUTSTART REPLICAS n PACKED and MOON.MPUTEND
 * PACKED alone, for a caller that cuts one batch into several pipelined
 * commands with its own item writer (the gateway's batcher). replicas is
 * the count as text; the strings are static or the caller's. */
#define PROTO_MPUTSTART_HEAD 4
#define PROTO_MPUTEND_HEAD 2
size_t proto_mputstart_head(const char *head[PROTO_MPUTSTART_HEAD], const char *replicas);
size_t proto_mputend_head(const char *head[PROTO_MPUTEND_HEAD]);
/* An object's slice CRCs as PUTEND sends them: the slice size and the
 * packed list (proto_slices_pack). size 0: none. */
typedef struct proto_slices_arg {
    uint64_t size;
    const void *packed;
    size_t len;
} proto_slices_arg;
/* MOON.PUTEND key crc [SLICES slice_size crcs] (sl NULL or size 0: none) */
void proto_cmd_putend(proto_cmd *cmd, const void *key, size_t keylen, uint32_t crc, const proto_slices_arg *sl);
/* MOON.MPUTEND PACKED key crc [...], or with sliced MOON.MPUTEND SLICES
 * key crc slice_size crcs [...] (the two forms exclude each other): room
 * for n keys. Add each with its slices when sliced (size 0: "0" and an
 * empty list), else sl is ignored. */
void proto_cmd_mputend_begin(proto_cmd *cmd, int sliced, size_t n);
void proto_cmd_mputend_add(proto_cmd *cmd, const void *key, size_t keylen, uint32_t crc,
                           const proto_slices_arg *sl);

/* ---- leases ---- */

/* MOON.RELEASE key lease_until [...]: room for n leases. */
void proto_cmd_release_begin(proto_cmd *cmd, size_t n);
void proto_cmd_release_add(proto_cmd *cmd, const void *key, size_t keylen, uint64_t until);
/* MOON.MRELEASE lease_until key [...]: room for n keys (proto_cmd_bin). */
void proto_cmd_mrelease_begin(proto_cmd *cmd, uint64_t until, size_t n);

/* ---- keys ---- */

/* MOON.SCAN cursor COUNT count */
void proto_cmd_scan(proto_cmd *cmd, uint64_t cursor, long count);
/* MOON.PREFIXPIN id ms key [key ...]: room for n keys (proto_cmd_bin). */
void proto_cmd_prefixpin_begin(proto_cmd *cmd, uint64_t id, uint32_t ms, size_t n);
/* MOON.REPIN id ms key [key ...]: room for n keys (proto_cmd_bin). */
void proto_cmd_repin_begin(proto_cmd *cmd, uint64_t id, uint32_t ms, size_t n);
/* MOON.UNPIN id */
void proto_cmd_unpin(proto_cmd *cmd, uint64_t id);

#endif
