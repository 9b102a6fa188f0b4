/* proto/replies.h - the MOON.* replies no other proto/ module decodes.
 *
 * The packed blobs have their own modules (placed.h: MPUTSTART PACKED,
 * located.h: MGETPACKED, ended.h: MPUTEND PACKED, notes.h: HOLDINGS,
 * report.h: REPORT, extents.h: the array forms of PUTSTART and GET).
 * Here are the small shapes around them: counts, flags, SCAN's page,
 * OBJECT's map, HOLDINGS' envelope, the nonce, REGISTER's answer and a
 * line of MOON.NODES. Each decoder takes a hiredis reply (or a line),
 * bounds every number and count, and returns 0, or -1 on any other
 * shape (an error reply included: the caller says what it meant).
 *
 * proto_reply_read turns bytes into a reply as the wire would, bounded
 * by reply_bound.h: a reply cut anywhere reads as incomplete. */
#ifndef MKV_PROTO_REPLIES_H
#define MKV_PROTO_REPLIES_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cap.h"
#include "backend/engine.h"

enum { PROTO_REPLY_BAD = -1, PROTO_REPLY_INCOMPLETE = 0, PROTO_REPLY_WHOLE = 1 };

/* The first reply in buf[0..len): PROTO_REPLY_WHOLE with *out (free with
 * freeReplyObject) and *used its bytes, PROTO_REPLY_INCOMPLETE (more bytes
 * needed), or PROTO_REPLY_BAD (not RESP, or past a bound). */
int proto_reply_read(const void *buf, size_t len, redisReply **out, size_t *used);

/* An integer in [min, max] (EXISTS, REMOVE, PREFIX, FLUSH). */
int proto_dec_int(const redisReply *r, long long min, long long max, long long *out);
/* MOON.MEXISTS: n integers, out[i] 1 if key i exists. */
int proto_dec_flags(const redisReply *r, size_t n, int *out);
/* MOON.MREMOVE: n elements, out[i] 1 removed, 0 no such key, or -1 for
 * key i's refusal (an error element: r->element[i]->str says why). */
int proto_dec_removed(const redisReply *r, size_t n, int *out);
/* A status reply (+OK and the like). */
int proto_dec_ok(const redisReply *r);
/* MOON.CHALLENGE: the nonce (PROTO_NONCE_LEN bytes), or NULL. */
const uint8_t *proto_dec_nonce(const redisReply *r);

/* MOON.SCAN: [next cursor, [key ...]]; *keys the key array, every
 * element a bulk string of 1..PROTO_MAX_KEY_LEN bytes. */
int proto_dec_scan(const redisReply *r, uint64_t *next, const redisReply **keys);

/* MOON.OBJECT's map (flat in RESP2): 1 a complete object with *size and
 * *crc, 0 none (nil, or still being written), -1 another shape. */
int proto_dec_object(const redisReply *r, uint64_t *size, uint32_t *crc);

/* MOON.HOLDINGS: [acked, notes blob] (the blob: notes.h), or with TASKS
 * [acked, blob, [task ...]] or [acked, blob, [task ...], 1] (ask for
 * chunks now: a node shared by groups). */
int proto_dec_holdings(const redisReply *r, uint64_t *acked, const uint8_t **blob, size_t *len);
/* The tasks of a MOON.HOLDINGS ... TASKS reply that proto_dec_holdings
 * took (an array, as a heartbeat's reply: node/task.h parses it), or
 * NULL if it has none. */
const redisReply *proto_holdings_tasks(const redisReply *r);
/* 1 if such a reply asks the node to send MOON.CHUNKS now. */
int proto_holdings_ask_chunks(const redisReply *r);

/* MOON.REGISTER: [id, cap key as hex, heartbeat ms, term, reconcile]. */
typedef struct proto_registered {
    uint32_t id;
    uint8_t cap_key[TE_CAP_KEY_LEN];
    int heartbeat_ms;
    uint64_t term;
    int reconcile;     /* 0..PROTO_REG_RECONCILE (register.h) */
} proto_registered;
int proto_dec_registered(const redisReply *r, proto_registered *out);

/* One entry of MOON.TOPOLOGY: [id, state, [addr ...]], id 1..PROTO_MAX_NODES,
 * state alive|draining|dead, up to TE_MAX_PATHS addresses of 1 to
 * TE_ADDR_LEN - 1 bytes (pointed to in the reply, NUL-terminated). */
typedef enum { PROTO_NODE_ALIVE, PROTO_NODE_DRAINING, PROTO_NODE_DEAD } proto_node_state;
typedef struct proto_topo_node {
    uint32_t id;
    proto_node_state state;
    int naddrs;
    const char *addrs[TE_MAX_PATHS];
    size_t addrlen[TE_MAX_PATHS];
} proto_topo_node;
int proto_dec_topo_node(const redisReply *r, proto_topo_node *out);

/* One line of MOON.NODES: "<id> <addr> <state> <segment_size> <used>". */
typedef struct proto_node_line {
    uint32_t id;
    char state[16];
    uint64_t segment_size, used;
} proto_node_line;
int proto_dec_node_line(const char *line, proto_node_line *out);

#endif
