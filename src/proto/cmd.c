/* proto/cmd.c - see cmd.h. */
#include "proto/cmd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "proto/limits.h"

/* ---- the vector ---- */

void proto_cmd_init(proto_cmd *cmd, int maxargs) {
    cmd->argc = 0;
    cmd->cap = maxargs;
    if (maxargs <= PROTO_CMD_INLINE) {
        cmd->argv = cmd->argv_in;
        cmd->lens = cmd->lens_in;
        cmd->nums = cmd->nums_in;
        return;
    }
    cmd->argv = xcalloc((size_t)maxargs, sizeof *cmd->argv);
    cmd->lens = xcalloc((size_t)maxargs, sizeof *cmd->lens);
    cmd->nums = xcalloc((size_t)maxargs, sizeof *cmd->nums);
}

void proto_cmd_free(proto_cmd *cmd) {
    if (cmd->argv && cmd->argv != cmd->argv_in) {
        free(cmd->argv);
        free(cmd->lens);
        free(cmd->nums);
    }
    cmd->argv = NULL;
    cmd->lens = NULL;
    cmd->nums = NULL;
    cmd->argc = cmd->cap = 0;
}

void proto_cmd_bin(proto_cmd *cmd, const void *p, size_t len) {
    if (cmd->argc >= cmd->cap) abort();   /* the encoders size the vector exactly */
    cmd->argv[cmd->argc] = p;
    cmd->lens[cmd->argc++] = len;
}

void proto_cmd_str(proto_cmd *cmd, const char *s) { proto_cmd_bin(cmd, s, strlen(s)); }

/* A number in the slot of the argument it becomes. */
static char *num_slot(proto_cmd *cmd) {
    if (cmd->argc >= cmd->cap) abort();
    return cmd->nums[cmd->argc];
}

void proto_cmd_u64(proto_cmd *cmd, uint64_t v) {
    char *num = num_slot(cmd);
    int len = snprintf(num, PROTO_NUM_LEN, "%" PRIu64, v);
    proto_cmd_bin(cmd, num, (size_t)len);
}

void proto_cmd_i64(proto_cmd *cmd, int64_t v) {
    char *num = num_slot(cmd);
    int len = snprintf(num, PROTO_NUM_LEN, "%" PRId64, v);
    proto_cmd_bin(cmd, num, (size_t)len);
}

void proto_cmd_resp(const proto_cmd *cmd, resp_buf *out) {
    resp_add_array(out, cmd->argc);
    for (int i = 0; i < cmd->argc; i++) resp_add_bulk(out, cmd->argv[i], cmd->lens[i]);
}

/* The verb as the first of maxargs arguments. */
static void cmd_start(proto_cmd *cmd, const char *verb, size_t maxargs) {
    if (maxargs > INT32_MAX) abort();
    proto_cmd_init(cmd, (int)maxargs);
    proto_cmd_str(cmd, verb);
}

/* ---- verbs without arguments, or with one key ---- */

void proto_cmd_bare(proto_cmd *cmd, const char *verb) { cmd_start(cmd, verb, 1); }

void proto_cmd_key(proto_cmd *cmd, const char *verb, const void *key, size_t keylen) {
    cmd_start(cmd, verb, 2);
    proto_cmd_bin(cmd, key, keylen);
}

void proto_cmd_keys_begin(proto_cmd *cmd, const char *verb, size_t n) { cmd_start(cmd, verb, 1 + n); }

/* ---- membership and auth ---- */

void proto_cmd_prove(proto_cmd *cmd, const char *proof_hex) {
    cmd_start(cmd, PROTO_VERB_PROVE, 2);
    proto_cmd_str(cmd, proof_hex);
}

void proto_cmd_holdlink(proto_cmd *cmd, const char *proof_hex, uint32_t id, const char *instance) {
    cmd_start(cmd, PROTO_VERB_HOLDLINK, 4);
    proto_cmd_str(cmd, proof_hex);
    proto_cmd_u64(cmd, id);
    proto_cmd_str(cmd, instance);
}

void proto_cmd_register(proto_cmd *cmd, const proto_register_args *a) {
    cmd_start(cmd, PROTO_VERB_REGISTER, 13 + (size_t)a->naddrs);
    proto_cmd_str(cmd, a->proof_hex);
    proto_cmd_u64(cmd, a->segment_size);
    for (int i = 0; i < a->naddrs; i++) proto_cmd_str(cmd, a->addrs[i]);
    if (a->claim_id) {
        proto_cmd_str(cmd, a->claim_again ? "ID" : "CLAIM");
        proto_cmd_u64(cmd, a->claim_id);
    }
    if (a->kept) {
        proto_cmd_str(cmd, "KEPT");
        proto_cmd_str(cmd, "1");
    }
    proto_cmd_str(cmd, "INSTANCE");
    proto_cmd_str(cmd, a->instance_hex);
    proto_cmd_str(cmd, "SEEN");
    proto_cmd_u64(cmd, a->seen_max);
    if (!a->chunks) return;
    proto_cmd_str(cmd, "CHUNKS");
    proto_cmd_str(cmd, a->chunks);
}

void proto_cmd_chunks(proto_cmd *cmd, uint32_t id, const char *chunks, long free_chunks) {
    cmd_start(cmd, PROTO_VERB_CHUNKS, free_chunks >= 0 ? 5 : 3);
    proto_cmd_u64(cmd, id);
    proto_cmd_str(cmd, chunks);
    if (free_chunks < 0) return;
    proto_cmd_str(cmd, "FREE");
    proto_cmd_u64(cmd, (uint64_t)free_chunks);
}

void proto_cmd_lent_begin(proto_cmd *cmd, uint32_t id, size_t n) {
    cmd_start(cmd, PROTO_VERB_LENT, 2 + 3 * n);
    proto_cmd_u64(cmd, id);
}

void proto_cmd_lent_add(proto_cmd *cmd, int back, uint64_t off, uint64_t len) {
    proto_cmd_str(cmd, back ? "B" : "L");
    proto_cmd_u64(cmd, off);
    proto_cmd_u64(cmd, len);
}

void proto_cmd_slotexport(proto_cmd *cmd, const char *group, uint64_t version, uint64_t epoch, uint64_t offset,
                          uint32_t max) {
    cmd_start(cmd, PROTO_VERB_SLOTEXPORT, 6);
    proto_cmd_str(cmd, group);
    proto_cmd_u64(cmd, version);
    proto_cmd_u64(cmd, epoch);
    proto_cmd_u64(cmd, offset);
    proto_cmd_u64(cmd, max);
}

void proto_cmd_heartbeat(proto_cmd *cmd, uint32_t id, uint64_t used, uint64_t disk_free) {
    cmd_start(cmd, PROTO_VERB_HEARTBEAT, 5);
    proto_cmd_u64(cmd, id);
    proto_cmd_u64(cmd, used);
    if (!disk_free) return;
    proto_cmd_str(cmd, PROTO_HB_DISK_FREE);
    proto_cmd_u64(cmd, disk_free);
}

void proto_cmd_node(proto_cmd *cmd, const char *verb, uint32_t id) {
    cmd_start(cmd, verb, 2);
    proto_cmd_u64(cmd, id);
}

void proto_cmd_nodes(proto_cmd *cmd, int expected) {
    cmd_start(cmd, PROTO_VERB_NODES, 2);
    if (expected) proto_cmd_str(cmd, "EXPECTED");
}

void proto_cmd_suspect_begin(proto_cmd *cmd, size_t n) { cmd_start(cmd, PROTO_VERB_SUSPECT, 1 + n); }

void proto_cmd_gateway(proto_cmd *cmd, const char *addr) {
    cmd_start(cmd, PROTO_VERB_GATEWAY, 2);
    proto_cmd_str(cmd, addr);
}

/* ---- holdings, copies, reports ---- */

void proto_cmd_holdings(proto_cmd *cmd, uint32_t id, uint64_t acked, int flags, int wait_ms) {
    cmd_start(cmd, PROTO_VERB_HOLDINGS, 8);
    proto_cmd_u64(cmd, id);
    proto_cmd_u64(cmd, acked);
    proto_cmd_str(cmd, "PACKED");
    if (flags & PROTO_HOLDINGS_SLICES) proto_cmd_str(cmd, "SLICES");
    if (flags & PROTO_HOLDINGS_TASKS) proto_cmd_str(cmd, "TASKS");
    if (wait_ms > 0) {
        proto_cmd_str(cmd, "WAIT");
        proto_cmd_i64(cmd, wait_ms);
    }
}

void proto_cmd_copydone_begin(proto_cmd *cmd, size_t n) { cmd_start(cmd, PROTO_VERB_COPYDONE, 1 + 2 * n); }

void proto_cmd_copydone_add(proto_cmd *cmd, uint64_t task_id, int ok) {
    proto_cmd_u64(cmd, task_id);
    proto_cmd_str(cmd, ok ? "OK" : "FAIL");
}

void proto_cmd_badreplica_begin(proto_cmd *cmd, uint32_t id, size_t n) {
    cmd_start(cmd, PROTO_VERB_BADREPLICA, 2 + 2 * n);
    proto_cmd_u64(cmd, id);
}

void proto_cmd_badreplica_add(proto_cmd *cmd, const void *key, size_t keylen, uint64_t seg_off) {
    proto_cmd_bin(cmd, key, keylen);
    proto_cmd_u64(cmd, seg_off);
}

void proto_cmd_badreplica_add_disk(proto_cmd *cmd, const void *key, size_t keylen) {
    proto_cmd_bin(cmd, key, keylen);
    proto_cmd_bin(cmd, "DISK", 4);
}

void proto_cmd_reportdone_begin(proto_cmd *cmd, size_t n) { cmd_start(cmd, PROTO_VERB_REPORTDONE, 1 + n); }

size_t proto_report_head(char *out, size_t room, size_t bloblen) {
    static const char verb[] = PROTO_VERB_REPORT;
    int n = snprintf(out, room, "*3\r\n$%zu\r\n%s\r\n$6\r\nPACKED\r\n$%zu\r\n", sizeof verb - 1, verb, bloblen);
    if (n < 0 || (size_t)n >= room) abort();   /* PROTO_REPORT_HEAD_MAX fits any length */
    return (size_t)n;
}

/* ---- put ---- */

void proto_cmd_putstart(proto_cmd *cmd, const void *key, size_t keylen, uint64_t size, int replicas) {
    cmd_start(cmd, PROTO_VERB_PUTSTART, 5);
    proto_cmd_bin(cmd, key, keylen);
    proto_cmd_u64(cmd, size);
    proto_cmd_str(cmd, "REPLICAS");
    proto_cmd_i64(cmd, replicas);
}

static const char mputstart_replicas[] = "REPLICAS", packed[] = "PACKED";

void proto_cmd_mputstart_begin(proto_cmd *cmd, int replicas, size_t n) {
    cmd_start(cmd, PROTO_VERB_MPUTSTART, 4 + 2 * n);
    proto_cmd_str(cmd, mputstart_replicas);
    proto_cmd_i64(cmd, replicas);
    proto_cmd_str(cmd, packed);
}

size_t proto_mputstart_head(const char *head[PROTO_MPUTSTART_HEAD], const char *replicas) {
    head[0] = PROTO_VERB_MPUTSTART;
    head[1] = mputstart_replicas;
    head[2] = replicas;
    head[3] = packed;
    return PROTO_MPUTSTART_HEAD;
}

void proto_cmd_mputstart_add(proto_cmd *cmd, const void *key, size_t keylen, uint64_t size) {
    proto_cmd_bin(cmd, key, keylen);
    proto_cmd_u64(cmd, size);
}

static void slices_arg(proto_cmd *cmd, const proto_slices_arg *sl) {
    proto_cmd_u64(cmd, sl ? sl->size : 0);
    proto_cmd_bin(cmd, sl && sl->size ? sl->packed : "", sl && sl->size ? sl->len : 0);
}

void proto_cmd_putend(proto_cmd *cmd, const void *key, size_t keylen, uint32_t crc, const proto_slices_arg *sl) {
    cmd_start(cmd, PROTO_VERB_PUTEND, 6);
    proto_cmd_bin(cmd, key, keylen);
    proto_cmd_u64(cmd, crc);
    if (!sl || !sl->size) return;
    proto_cmd_str(cmd, "SLICES");
    slices_arg(cmd, sl);
}

/* MPUTEND's form word: the adds tell the forms apart by its address. */
static const char mputend_sliced[] = "SLICES";

void proto_cmd_mputend_begin(proto_cmd *cmd, int sliced, size_t n) {
    cmd_start(cmd, PROTO_VERB_MPUTEND, 2 + (sliced ? 4 : 2) * n);
    proto_cmd_str(cmd, sliced ? mputend_sliced : packed);
}

size_t proto_mputend_head(const char *head[PROTO_MPUTEND_HEAD]) {
    head[0] = PROTO_VERB_MPUTEND;
    head[1] = packed;
    return PROTO_MPUTEND_HEAD;
}

void proto_cmd_mputend_add(proto_cmd *cmd, const void *key, size_t keylen, uint32_t crc,
                           const proto_slices_arg *sl) {
    proto_cmd_bin(cmd, key, keylen);
    proto_cmd_u64(cmd, crc);
    if (cmd->argv[1] == mputend_sliced) slices_arg(cmd, sl);
}

/* ---- leases ---- */

void proto_cmd_release_begin(proto_cmd *cmd, size_t n) { cmd_start(cmd, PROTO_VERB_RELEASE, 1 + 2 * n); }

void proto_cmd_release_add(proto_cmd *cmd, const void *key, size_t keylen, uint64_t until) {
    proto_cmd_bin(cmd, key, keylen);
    proto_cmd_u64(cmd, until);
}

void proto_cmd_mrelease_begin(proto_cmd *cmd, uint64_t until, size_t n) {
    cmd_start(cmd, PROTO_VERB_MRELEASE, 2 + n);
    proto_cmd_u64(cmd, until);
}

/* ---- keys ---- */

void proto_cmd_scan(proto_cmd *cmd, uint64_t cursor, long count) {
    cmd_start(cmd, PROTO_VERB_SCAN, 4);
    proto_cmd_u64(cmd, cursor);
    proto_cmd_str(cmd, "COUNT");
    proto_cmd_i64(cmd, count);
}

static void pin_begin(proto_cmd *cmd, const char *verb, uint64_t id, uint32_t ms, size_t n) {
    cmd_start(cmd, verb, 3 + n);
    proto_cmd_u64(cmd, id);
    proto_cmd_u64(cmd, ms);
}

void proto_cmd_prefixpin_begin(proto_cmd *cmd, uint64_t id, uint32_t ms, size_t n) {
    pin_begin(cmd, PROTO_VERB_PREFIXPIN, id, ms, n);
}

void proto_cmd_repin_begin(proto_cmd *cmd, uint64_t id, uint32_t ms, size_t n) {
    pin_begin(cmd, PROTO_VERB_REPIN, id, ms, n);
}

void proto_cmd_unpin(proto_cmd *cmd, uint64_t id) {
    cmd_start(cmd, PROTO_VERB_UNPIN, 2);
    proto_cmd_u64(cmd, id);
}
