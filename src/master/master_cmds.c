/* master/master_cmds.c - the MOON.* commands of the master (docs/PROTOCOL.md).
 *
 * Every command parses and bounds its arguments, calls the metadata, and
 * encodes the answer; all policy lives in meta. Capabilities are signed
 * here, at the moment they are sent. Node-only commands (HEARTBEAT,
 * COPYDONE, LEAVE) are accepted only on the connection that registered
 * that node, so a client cannot speak for a node. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/evict.h"
#include "core/siphash.h"
#include "core/util.h"
#include "master/master.h"
#include "proto/ended.h"
#include "proto/extents.h"
#include "proto/located.h"
#include "proto/pins.h"
#include "proto/placed.h"
#include "proto/register.h"
#include "proto/slices.h"
#include "proto/verbs.h"
#include "server/commands.h"
#include "server/glob.h"
#include "server/info.h"
#include "server/networking.h"

/* Per-connection state: an outstanding challenge, whether the connection
 * proved the cluster secret, the node it speaks for. */
typedef struct conn_state {
    uint8_t nonce[PROTO_NONCE_LEN];
    int has_nonce;
    int member;       /* proved the secret (MOON.PROVE, or MOON.REGISTER's proof) */
    uint32_t node;    /* 0: not a node */
    /* MOON.HOLDLINK: the node whose holdings this connection pulls, as
     * long as that node's registration is the one of link_conn. */
    uint32_t link_node;
    uint64_t link_conn;
} conn_state;

static master *master_of(client *c) { return c->srv->role; }
static master_meta *meta_of(client *c) { return master_of(c)->meta; }
static uint64_t now(void) { return wall_ms(); }   /* caps expire on wall time */

static void conn_state_free(client *c, void *ctx) {
    conn_state *cs = ctx;
    master *m = master_of(c);
    if (m && m->waits) put_wait_forget(m->waits, c);
    if (m && m->gets) get_wait_forget(m->gets, c);
    if (m) members_forget(m->members, c);
    if (m) holdings_wait_forget(m->pulls, c);
    if (m) acks_forget(m->acks, c);
    /* Its node no longer holds its id on a connection: a new process of
     * it may take the id over (MOON.REGISTER CLAIM). */
    mm_node *n = m && cs->node ? mm_node_get(m->meta, cs->node) : NULL;
    if (n && n->conn_id == c->id) n->conn_id = 0;
}

static conn_state *conn_of(client *c) {
    return client_role_ctx(c, sizeof(conn_state), conn_state_free);
}

/* "-WORD message": the word is st's (proto/status.h), never typed here. */
void master_reply_fail(client *c, proto_status st, const char *fmt, ...) {
    char msg[PROTO_ERR_LEN], text[PROTO_ERR_LEN + 16];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    proto_error_text(st, msg, text, sizeof text);
    reply_error(c, text);
}

/* ---- argument parsing ---- */

int master_arg_u64(client *c, int i, uint64_t min, uint64_t max, uint64_t *out) {
    long long v;
    if (arg_to_ll(&c->argv[i], (long long)min, (long long)max, &v) != 0) {
        master_reply_fail(c, PROTO_ERR, "value is not an integer or out of range");
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static int arg_u32(client *c, int i, uint32_t min, uint32_t max, uint32_t *out) {
    uint64_t v;
    if (master_arg_u64(c, i, min, max, &v) != 0) return -1;
    *out = (uint32_t)v;
    return 0;
}

#define MAX_SIZE ((1ULL << 50))   /* larger than any segment: NOSPACE, not overflow */

/* A metadata outcome: +OK or its error. */
static void reply_status(client *c, proto_status st, const char *err) {
    if (st == PROTO_OK) reply_ok(c);
    else master_reply_fail(c, st, "%s", err);
}

/* ---- encoding placements ---- */

/* The master's scratch buffer, emptied, for proto's encoders. */
static resp_buf *wire_of(client *c) {
    resp_buf *b = &master_of(c)->wire;
    resp_buf_clear(b);
    return b;
}

static void reply_wire(client *c, const resp_buf *b) { reply_raw(c, b->data, b->len); }

/* What o's caps grant, signed now. */
static proto_grant grant_of(client *c, const object *o, uint32_t rights, uint64_t expiry) {
    return (proto_grant){rights, expiry, master_of(c)->cap_key,
                         rights == TE_CAP_WRITE ? mm_obj_issued(o) : 0,
                         master_term(master_of(c))};
}

/* Per replica an array of extents. */
static void reply_replicas(client *c, const object *o, uint32_t rights, uint64_t expiry) {
    proto_grant g = grant_of(c, o, rights, expiry);
    resp_buf *b = wire_of(c);
    proto_replicas_encode(b, o, &g);
    reply_wire(c, b);
}

/* GET's answer for one key: [size, crc, replicas], and when the object
 * keeps per-slice CRCs [..., slice_size, packed CRCs]. */
static void reply_located(client *c, const object *o, uint64_t lease_until) {
    const proto_slices *sl = mm_obj_slices(o);
    reply_array(c, sl->count ? 5 : 3);
    reply_integer(c, (long long)o->size);
    reply_integer(c, o->crc);
    reply_replicas(c, o, TE_CAP_READ, lease_until);
    if (!sl->count) return;
    reply_integer(c, (long long)sl->size);
    uint8_t *packed = xmalloc((size_t)sl->count * 4);
    proto_slices_pack(sl, packed);
    reply_bulk(c, packed, (size_t)sl->count * 4);
    free(packed);
}

/* ---- node membership ---- */

static void challenge_command(client *c) {
    conn_state *cs = conn_of(c);
    if (random_bytes(cs->nonce, sizeof cs->nonce) != 0) {
        master_reply_fail(c, PROTO_ERR, "no randomness available");
        return;
    }
    cs->has_nonce = 1;
    reply_bulk(c, cs->nonce, sizeof cs->nonce);
}

/* argv[1] proves the secret for the outstanding nonce, as MOON.REGISTER's
 * (member 0) or MOON.PROVE's (member 1) proof. */
static int proof_ok(client *c, conn_state *cs, int member) {
    if (!cs->has_nonce) return 0;
    cs->has_nonce = 0;   /* one attempt per challenge */
    const uint8_t *key = master_of(c)->reg_key;
    const resp_arg *a = &c->argv[1];
    return member ? proto_member_proof_ok(key, cs->nonce, a->ptr, a->len)
                  : proto_reg_proof_ok(key, cs->nonce, a->ptr, a->len);
}

/* MOON.PROVE proof: the connection becomes a member's (master_conn_member). */
static void prove_command(client *c) {
    conn_state *cs = conn_of(c);
    if (!proof_ok(c, cs, 1)) {
        master_reply_fail(c, PROTO_NOAUTH, "bad or missing proof: send " PROTO_VERB_CHALLENGE " first");
        return;
    }
    cs->member = 1;
    reply_ok(c);
}

int master_conn_member(client *c) {
    const conn_state *cs = c->role_ctx;
    return cs && cs->member;
}

/* The node this connection registered, unless the node registered again
 * on another connection since (a node speaks on its newest one). */
static mm_node *conn_node(client *c) {
    conn_state *cs = c->role_ctx;
    mm_node *n = cs && cs->node ? mm_node_get(meta_of(c), cs->node) : NULL;
    return n && n->conn_id == c->id ? n : NULL;
}

/* The data addresses of MOON.REGISTER (every form has a ':'), into j. */
static int register_addrs(client *c, master_join *j) {
    j->naddrs = 0;
    for (int i = 3; i < c->argc && memchr(c->argv[i].ptr, ':', c->argv[i].len); i++) {
        const resp_arg *a = &c->argv[i];
        if (j->naddrs == TE_MAX_PATHS) {
            master_reply_fail(c, PROTO_ERR, "at most %d data addresses", TE_MAX_PATHS);
            return -1;
        }
        if (a->len >= TE_ADDR_LEN || memchr(a->ptr, 0, a->len)) {
            master_reply_fail(c, PROTO_ERR, "data address %d must be 1 to %d bytes", j->naddrs + 1,
                              TE_ADDR_LEN - 1);
            return -1;
        }
        memcpy(j->addrs[j->naddrs], a->ptr, a->len);
        j->addrs[j->naddrs++][a->len] = 0;
    }
    return 0;
}

/* ID n or CLAIM n, INSTANCE hex, SEEN n after the addresses. */
static int register_options(client *c, int i, master_join *j) {
    mm_node_claim *claim = &j->claim;
    for (; i < c->argc; i += 2) {
        const resp_arg *o = &c->argv[i];
        uint8_t tok[8];
        if (i + 1 >= c->argc) {
            reply_syntax_error(c);
            return -1;
        }
        int restarted = strieq_len(o->ptr, o->len, "claim");
        if (restarted || strieq_len(o->ptr, o->len, "id")) {
            if (arg_u32(c, i + 1, 1, PROTO_MAX_NODES, &claim->id) != 0) return -1;
            claim->restarted = restarted;
        } else if (strieq_len(o->ptr, o->len, "kept")) {   /* KEPT 1: restarted with its segment */
            claim->kept = c->argv[i + 1].len == 1 && c->argv[i + 1].ptr[0] == '1';
        } else if (strieq_len(o->ptr, o->len, "seen")) {
            if (arg_u32(c, i + 1, 0, PROTO_MAX_NODES, &claim->seen_max) != 0) return -1;
        } else if (strieq_len(o->ptr, o->len, "instance") &&
                   hex_decode(c->argv[i + 1].ptr, c->argv[i + 1].len, tok, sizeof tok) == 0) {
            memcpy(&claim->instance, tok, sizeof tok);
        } else if (strieq_len(o->ptr, o->len, "chunks")) {   /* a node shared by groups: ours */
            if (proto_chunks_parse(c->argv[i + 1].ptr, c->argv[i + 1].len, j->segment_size, &j->chunks) != 0) {
                master_reply_fail(c, PROTO_ERR, "bad chunks");
                return -1;
            }
            j->shared = 1;
        } else {
            reply_syntax_error(c);
            return -1;
        }
    }
    return 0;
}

/* MOON.REGISTER proof segment_size addr [addr ...] [ID|CLAIM n] [INSTANCE hex] [SEEN n]
 * With etcd the node is recorded there first (members.c), then registered. */
static void register_command(client *c) {
    conn_state *cs = conn_of(c);
    if (!proof_ok(c, cs, 0)) {
        master_reply_fail(c, PROTO_NOAUTH, "bad or missing proof: send " PROTO_VERB_CHALLENGE " first");
        return;
    }
    cs->member = 1;
    /* A node declared dead may register again on the same connection. */
    const mm_node *prev = conn_node(c);
    if (prev && prev->state != NODE_DEAD) {
        master_reply_fail(c, PROTO_ERR, "this connection is already node %u", cs->node);
        return;
    }
    master_join j = {0};
    if (master_arg_u64(c, 2, 1, MAX_SIZE, &j.segment_size) != 0 || register_addrs(c, &j) != 0 ||
        register_options(c, 3 + j.naddrs, &j) != 0)
        return;
    /* a table being rebuilt is not one to confirm replicas against */
    if (master_rebuild_busy(master_of(c))) j.claim.kept = 0;
    /* A node the last leader recorded but never answered: it is that id,
     * which the rebuild window waits for, so it is not held either. */
    if (!j.claim.id) j.claim.assign = members_recorded_as(master_of(c)->members, j.claim.instance);
    if (master_rebuild_holds_join(c, j.claim.id ? j.claim.id : j.claim.assign) ||
        members_park(master_of(c)->members, c, &j))
        return;
    master_register_join(c, &j);
}

void master_register_join(client *c, const master_join *j) {
    conn_state *cs = conn_of(c);
    const char *ptrs[TE_MAX_PATHS];
    for (int i = 0; i < j->naddrs; i++) ptrs[i] = j->addrs[i];
    char err[PROTO_ERR_LEN];
    uint32_t id;
    mm_reg_kind kind;
    proto_status st = mm_node_register_as(meta_of(c), &j->claim, j->segment_size, ptrs, j->naddrs,
                                          now(), &id, &kind, err, sizeof err);
    if (st != PROTO_OK) {
        master_reply_fail(c, st, "%s", err);
        return;
    }
    if (j->shared && (st = mm_node_share(meta_of(c), id, &j->chunks, err, sizeof err)) != PROTO_OK) {
        master_reply_fail(c, st, "%s", err);
        return;
    }
    cs->node = id;
    mm_node_get(meta_of(c), id)->conn_id = c->id;
    /* A claimed id that went to another node: we know nothing it held. */
    int report = j->claim.id && kind == MM_REG_NEW ? MASTER_REG_FORGET
                                                   : master_rebuild_joined(master_of(c), id, kind);
    char key[2 * TE_CAP_KEY_LEN + 1];
    hex_encode(master_of(c)->cap_key, TE_CAP_KEY_LEN, key);
    reply_array(c, 5);
    reply_integer(c, id);
    reply_bulk_cstr(c, key);
    reply_integer(c, c->srv->cfg.heartbeat_ms);
    reply_integer(c, (long long)master_term(master_of(c)));
    reply_integer(c, report);
}

uint32_t master_conn_node(client *c) {
    const mm_node *n = conn_node(c);
    return n ? n->id : 0;
}

/* The node id in argv[i], which must be the one this connection registered. */
int master_own_node(client *c, int i, uint32_t *id) {
    if (arg_u32(c, i, 1, PROTO_MAX_NODES, id) != 0) return -1;
    conn_state *cs = c->role_ctx;
    if (!cs || cs->node != *id) {
        master_reply_fail(c, PROTO_ERR, "this connection did not register node %u", *id);
        return -1;
    }
    /* A node that registered again speaks on its newest connection only. */
    if (!conn_node(c)) {
        master_reply_fail(c, PROTO_NODEDEAD, "node %u registered again on another "
                          "connection: this one no longer speaks for it", *id);
        return -1;
    }
    return 0;
}

int master_holdings_node(client *c, int i, uint32_t *id) {
    conn_state *cs = c->role_ctx;
    if (!cs || !cs->link_node) return master_own_node(c, i, id);
    if (arg_u32(c, i, 1, PROTO_MAX_NODES, id) != 0) return -1;
    const mm_node *n = mm_node_get(meta_of(c), *id);
    if (*id != cs->link_node || !n || n->state == NODE_DEAD || n->conn_id != cs->link_conn) {
        master_reply_fail(c, PROTO_NODEDEAD, "node %u registered again since this link was made: link again", *id);
        return -1;
    }
    return 0;
}

/* MOON.HOLDLINK proof id instance: after MOON.CHALLENGE, a node's second
 * connection, the one it pulls its holdings on (a pull may wait there,
 * so its control connection stays free), speaks for node id while the
 * registration of that node process (its INSTANCE token) lasts. */
static void holdlink_command(client *c) {
    conn_state *cs = conn_of(c);
    uint32_t id;
    uint8_t tok[8];
    uint64_t instance;
    if (!proof_ok(c, cs, 0)) {
        master_reply_fail(c, PROTO_NOAUTH, "bad or missing proof: send " PROTO_VERB_CHALLENGE " first");
        return;
    }
    cs->member = 1;
    if (arg_u32(c, 2, 1, PROTO_MAX_NODES, &id) != 0) return;
    if (hex_decode(c->argv[3].ptr, c->argv[3].len, tok, sizeof tok) != 0) {
        master_reply_fail(c, PROTO_ERR, "bad instance token");
        return;
    }
    memcpy(&instance, tok, sizeof tok);
    mm_node *n = mm_node_get(meta_of(c), id);
    if (!n || n->state == NODE_DEAD || !n->joined || n->instance != instance) {
        master_reply_fail(c, PROTO_NODEDEAD, "node %u is not registered by this process", id);
        return;
    }
    cs->link_node = id;
    cs->link_conn = n->conn_id;
    n->acks_awaited = 1;   /* its acks come as soon as it has the notes */
    reply_ok(c);
}

/* [task_id, key, size, [[node, off, len, rcap]...], [[off, len, wcap]...]];
 * an offload [.., [[node, off, len, rcap]...], DISK, crc(, [obj_off...] of a share)], a load
 * [.., [[off, len, wcap]...], LOAD, crc], a push of a disk record to
 * other nodes [.., [[node, off, len, wcap]...], PUSH, crc] (docs/SSD_TIER.md). */
static void reply_task(client *c, const mm_task *t) {
    uint64_t exp = mm_task_expiry(t);
    uint64_t term = master_term(master_of(c));
    proto_grant rd = {TE_CAP_READ, exp, master_of(c)->cap_key, 0, term};
    proto_grant wr = {TE_CAP_WRITE, exp, master_of(c)->cap_key, t->issued_us, term};
    uint64_t *places = t->to_disk == MM_TASK_OFFLOAD && t->nsrc ? xmalloc(t->nsrc * sizeof *places) : NULL;
    uint32_t nplaces = places ? mm_task_share_places(t, places) : 0;
    reply_array(c, nplaces ? 7 : t->to_disk ? 6 : 5);
    reply_integer(c, (long long)t->id);
    reply_bulk(c, t->obj->key, t->obj->keylen);
    reply_integer(c, (long long)t->obj->size);
    resp_buf *b = wire_of(c);
    if (t->to_disk == MM_TASK_PUSH) proto_extents_encode(b, PROTO_EXT_REMOTE, t->dst, t->ndst, &wr);
    if (!t->to_disk || t->to_disk == MM_TASK_OFFLOAD) proto_extents_encode(b, PROTO_EXT_REMOTE, t->src, t->nsrc, &rd);
    if (!t->to_disk || t->to_disk == MM_TASK_LOAD) proto_extents_encode(b, PROTO_EXT_LOCAL, t->dst, t->ndst, &wr);
    reply_wire(c, b);
    if (!t->to_disk) return;
    reply_bulk_cstr(c, t->to_disk == MM_TASK_LOAD   ? PROTO_TASK_LOAD
                       : t->to_disk == MM_TASK_PUSH ? PROTO_TASK_PUSH
                                                    : PROTO_TASK_DISK);
    reply_integer(c, t->obj->crc);
    if (nplaces) {   /* a share: where each extent lies in the object (the node's record keeps it) */
        reply_array(c, nplaces);
        for (uint32_t i = 0; i < nplaces; i++) reply_integer(c, (long long)places[i]);
    }
    free(places);
}

void master_reply_tasks(client *c, uint32_t id) {
    mm_task *tasks[PROTO_MAX_TASKS];
    size_t n = mm_node_tasks(meta_of(c), id, tasks, PROTO_MAX_TASKS);
    reply_array(c, (long long)n);
    for (size_t i = 0; i < n; i++) reply_task(c, tasks[i]);
}

/* MOON.HEARTBEAT id used [field value ...] */
static void heartbeat_command(client *c) {
    uint32_t id;
    uint64_t used;
    if (master_own_node(c, 1, &id) != 0 || master_arg_u64(c, 2, 0, MAX_SIZE, &used) != 0) return;
    if ((c->argc - 3) % 2) {
        reply_syntax_error(c);
        return;
    }
    char err[PROTO_ERR_LEN];
    proto_status st = mm_node_heartbeat(meta_of(c), id, used, now(), err, sizeof err);
    if (st != PROTO_OK) {
        master_reply_fail(c, st, "%s", err);
        return;
    }
    long long disk_free = 0;   /* absent or bad: no disk tier */
    for (int i = 3; i + 1 < c->argc; i += 2)
        if (strieq_len(c->argv[i].ptr, c->argv[i].len, PROTO_HB_DISK_FREE) &&
            arg_to_ll(&c->argv[i + 1], 0, INT64_MAX, &disk_free) != 0)
            disk_free = 0;
    mm_node_disk(meta_of(c), id, (uint64_t)disk_free);
    master_reply_tasks(c, id);
}

/* MOON.CHUNKS id chunks [FREE n]: a shared node's chunks for our group
 * (all it gave us so far) and how many it has that no group holds; the
 * reply [want, chunks given back] (proto/chunks.h). */
static void chunks_command(client *c) {
    uint32_t id;
    long long free_chunks = UINT32_MAX;
    if (c->argc != 3 && !(c->argc == 5 && strieq_len(c->argv[3].ptr, c->argv[3].len, "free"))) {
        reply_syntax_error(c);
        return;
    }
    if (master_own_node(c, 1, &id) != 0) return;
    if (c->argc == 5 && arg_to_ll(&c->argv[4], 0, PROTO_MAX_CHUNKS, &free_chunks) != 0) {
        master_reply_fail(c, PROTO_ERR, "bad free chunk count");
        return;
    }
    mm_node *n = mm_node_get(meta_of(c), id);
    proto_chunks given, back;
    char err[PROTO_ERR_LEN];
    if (proto_chunks_parse(c->argv[2].ptr, c->argv[2].len, n->segment_size, &given) != 0) {
        master_reply_fail(c, PROTO_ERR, "bad chunks");
        return;
    }
    mm_node_chunks_free(meta_of(c), id, (uint32_t)free_chunks);
    proto_status st = mm_node_share(meta_of(c), id, &given, err, sizeof err);
    if (st != PROTO_OK) {
        master_reply_fail(c, st, "%s", err);
        return;
    }
    uint32_t want;
    /* nothing given back while the table may not know every object yet */
    int settled = !master_rebuild_busy(master_of(c)) && !master_rebuild_awaits_nodes(master_of(c));
    mm_node_chunks_advise(meta_of(c), id, settled, &want, &back);
    char text[PROTO_CHUNKS_TEXT];
    proto_chunks_format(&back, text, sizeof text);
    reply_array(c, 2);
    reply_integer(c, want);
    reply_bulk_cstr(c, text);
}

/* One outcome of MOON.COPYDONE: argv[at] the task id, argv[at+1] OK|FAIL
 * (*any_ok set when OK). */
static proto_status copy_outcome(client *c, uint32_t node, int at, int *any_ok, char *err, size_t errlen) {
    const resp_arg *r = &c->argv[at + 1];
    long long task;
    if (arg_to_ll(&c->argv[at], 1, INT64_MAX, &task) != 0) {
        snprintf(err, errlen, "value is not an integer or out of range");
        return PROTO_ERR;
    }
    int ok = strieq_len(r->ptr, r->len, "ok");
    if (!ok && !strieq_len(r->ptr, r->len, "fail")) {
        snprintf(err, errlen, "result must be OK or FAIL");
        return PROTO_ERR;
    }
    *any_ok |= ok;
    return mm_copy_done(meta_of(c), node, (uint64_t)task, ok, now(), err, errlen);
}

/* MOON.COPYDONE task_id OK|FAIL [task_id OK|FAIL ...]: one pair answers
 * +OK or its error, as ever; more answer an array of those, in order. */
static void copydone_command(client *c) {
    conn_state *cs = c->role_ctx;
    if (!cs || !cs->node) {
        master_reply_fail(c, PROTO_ERR, "only a registered node reports copies");
        return;
    }
    int pairs = (c->argc - 1) / 2;
    if ((c->argc - 1) % 2 || pairs > PROTO_MAX_COPYDONE) {
        master_reply_fail(c, PROTO_ERR, "want 1 to %d pairs of task_id OK|FAIL", PROTO_MAX_COPYDONE);
        return;
    }
    char err[PROTO_ERR_LEN];
    int any_ok = 0;
    if (pairs > 1) reply_array(c, pairs);
    for (int i = 0; i < pairs; i++)
        reply_status(c, copy_outcome(c, cs->node, 1 + 2 * i, &any_ok, err, sizeof err), err);
    /* Only progress starts the next pass at once: copies that only fail
     * are placed again at the sweep's pace, not as fast as a node can
     * fail them (each failed placement holds its space until its caps end). */
    if (any_ok) mm_repair_kick(meta_of(c), now());
}

/* The drain's copies are scheduled at once, not at the next sweep. */
static void drain_node(client *c, uint32_t id) {
    char err[PROTO_ERR_LEN];
    proto_status st = mm_node_drain(meta_of(c), id, now(), err, sizeof err);
    reply_status(c, st, err);
    if (st == PROTO_OK) mm_repair(meta_of(c), now());
}

/* MOON.LEAVE id: the node announces it goes; same as a drain. */
static void leave_command(client *c) {
    uint32_t id;
    if (master_own_node(c, 1, &id) == 0) drain_node(c, id);
}

/* MOON.DRAIN id (admin) */
static void drain_command(client *c) {
    uint32_t id;
    if (arg_u32(c, 1, 1, PROTO_MAX_NODES, &id) == 0) drain_node(c, id);
}

/* MOON.SUSPECT id [id ...]: a client could not reach these nodes; the
 * master places nothing new on them while failure detection runs. */
static void suspect_command(client *c) {
    uint32_t ids[PROTO_MAX_SUSPECTS];
    int n = c->argc - 1;
    char err[PROTO_ERR_LEN];
    if (n > PROTO_MAX_SUSPECTS) {
        snprintf(err, sizeof err, "at most %d nodes per " PROTO_VERB_SUSPECT, PROTO_MAX_SUSPECTS);
        reply_status(c, PROTO_ERR, err);
        return;
    }
    for (int i = 0; i < n; i++)
        if (arg_u32(c, 1 + i, 1, PROTO_MAX_NODES, &ids[i]) != 0) return;
    for (int i = 0; i < n; i++) {
        proto_status st = mm_node_suspect(meta_of(c), ids[i], now(), err, sizeof err);
        if (st != PROTO_OK) {
            reply_status(c, st, err);
            return;
        }
    }
    reply_status(c, PROTO_OK, NULL);
}

/* ---- objects ---- */

static uint32_t default_replicas(client *c) { return master_of(c)->default_replicas; }

/* A refused item's text in a packed record: the array form's element. */
#define REFUSAL_LEN (PROTO_ERR_LEN + 16)
static const char *refusal_text(const mm_item *it, char (*text)[REFUSAL_LEN]) {
    proto_error_text(it->status, it->err, *text, sizeof *text);
    return *text;
}

/* MPUTSTART PACKED: every item's record in one bulk string. */
static void reply_puts_packed(client *c, const mm_item *it, size_t n) {
    resp_buf *b = wire_of(c);
    char text[REFUSAL_LEN];
    for (size_t i = 0; i < n; i++) {
        if (it[i].status != PROTO_OK) {
            proto_placed_put_error(b, refusal_text(&it[i], &text));
            continue;
        }
        proto_grant g = grant_of(c, it[i].obj, TE_CAP_WRITE, mm_write_expiry(meta_of(c), it[i].obj));
        proto_placed_put(b, it[i].obj, &g);
    }
    reply_bulk(c, b->data, b->len);
}

void master_reply_puts(client *c, const mm_item *it, size_t n, int form) {
    if (form == MASTER_PUTS_PACKED) {
        reply_puts_packed(c, it, n);
        return;
    }
    if (form == MASTER_PUTS_ARRAY) reply_array(c, (long long)n);
    for (size_t i = 0; i < n; i++) {
        if (it[i].status != PROTO_OK) master_reply_fail(c, it[i].status, "%s", it[i].err);
        else reply_replicas(c, it[i].obj, TE_CAP_WRITE, mm_write_expiry(meta_of(c), it[i].obj));
    }
}

/* Place the items; those that found no room may wait for quarantined
 * space (put_wait.c), and then the reply comes from there. */
static void put_items(client *c, mm_item *it, size_t n, uint32_t reps, int form) {
    uint64_t t = now();
    conn_of(c);   /* its on-free hook drops a parked request */
    mm_put_start_batch(meta_of(c), it, n, reps, t);
    master_rebuild_soften(master_of(c), it, n);
    if (!put_wait_park(master_of(c)->waits, c, it, n, reps, form, t))
        master_reply_puts(c, it, n, form);
}

/* MOON.PUTSTART key size [REPLICAS n] */
static void putstart_command(client *c) {
    if (master_rebuild_refuses(c)) return;
    uint64_t size;
    uint32_t reps = default_replicas(c);
    if (master_arg_u64(c, 2, 0, MAX_SIZE, &size) != 0) return;
    if (c->argc == 5 && strieq_len(c->argv[3].ptr, c->argv[3].len, "replicas")) {
        if (arg_u32(c, 4, 1, PROTO_MAX_REPLICAS, &reps) != 0) return;
    } else if (c->argc != 3) {
        reply_syntax_error(c);
        return;
    }
    mm_item it = {.key = c->argv[1].ptr, .keylen = c->argv[1].len, .size = size};
    put_items(c, &it, 1, reps, MASTER_PUTS_ONE);
}

static int arg_crc(client *c, int i, uint32_t *crc) {
    return arg_u32(c, i, 0, UINT32_MAX, crc);
}

/* argv[i] (slice size) and argv[i+1] (packed CRCs) into sl; -1 after
 * replying the reason. */
static int arg_slices(client *c, int i, proto_slices *sl) {
    char err[PROTO_ERR_LEN];
    if (proto_slices_parse(c->argv[i].ptr, c->argv[i].len, c->argv[i + 1].ptr, c->argv[i + 1].len, sl,
                           err, sizeof err) == 0)
        return 0;
    master_reply_fail(c, PROTO_ERR, "%s", err);
    return -1;
}

/* The reply of the command about to run waits for the nodes it tells
 * (acks.c); conn_state's on-free hook forgets it if the client goes. */
static void acked_begin(client *c) {
    conn_of(c);
    acks_begin(c);
}

/* MOON.PUTEND key crc [SLICES slice_size crcs] */
static void putend_command(client *c) {
    uint32_t crc;
    proto_slices sl = {0};
    if (c->argc != 3 && (c->argc != 6 || !strieq_len(c->argv[3].ptr, c->argv[3].len, "slices"))) {
        reply_syntax_error(c);
        return;
    }
    if (arg_crc(c, 2, &crc) != 0) return;
    if (c->argc == 6 && arg_slices(c, 4, &sl) != 0) return;
    char err[PROTO_ERR_LEN];
    acked_begin(c);
    reply_status(c, mm_put_end(meta_of(c), c->argv[1].ptr, c->argv[1].len, crc, &sl, now(), err,
                               sizeof err), err);
    acks_end(c);
    proto_slices_free(&sl);
}

static void putrevoke_command(client *c) {
    char err[PROTO_ERR_LEN];
    reply_status(c, mm_put_revoke(meta_of(c), c->argv[1].ptr, c->argv[1].len, now(), err,
                                  sizeof err), err);
}

/* Keys loading from disk may wait for their loads (get_wait.c), and
 * then the reply comes from there. */
static void get_items(client *c, mm_item *it, size_t n, int form) {
    uint64_t t = now();
    conn_of(c);   /* its on-free hook drops a parked request */
    mm_get_batch(meta_of(c), it, n, t);
    if (!get_wait_park(master_of(c)->gets, c, it, n, form, t)) master_reply_gets(c, it, n, form);
}

static void get_command(client *c) {
    mm_item it = {.key = c->argv[1].ptr, .keylen = c->argv[1].len};
    get_items(c, &it, 1, MASTER_GETS_ONE);
}

static void remove_command(client *c) {
    char err[PROTO_ERR_LEN];
    master_of(c)->remove_requests++;
    acked_begin(c);
    proto_status st = mm_remove(meta_of(c), c->argv[1].ptr, c->argv[1].len, now(), err, sizeof err);
    if (st == PROTO_OK || st == PROTO_NOTFOUND) reply_integer(c, st == PROTO_OK);
    else master_reply_fail(c, st, "%s", err);
    acks_end(c);
}

static void exists_command(client *c) {
    reply_integer(c, mm_exists(meta_of(c), c->argv[1].ptr, c->argv[1].len));
}

/* ---- batch forms ---- */

/* Items for argv[first..] in groups of `stride` arguments (key first),
 * in the master's scratch: a batch of small puts would otherwise cost a
 * fresh, zeroed array of a few hundred KiB per command. */
static mm_item *batch_items(client *c, int first, int stride, size_t *n) {
    int args = c->argc - first;
    if (args <= 0 || args % stride) {
        reply_syntax_error(c);
        return NULL;
    }
    *n = (size_t)(args / stride);
    if (*n > PROTO_MAX_BATCH) {
        master_reply_fail(c, PROTO_ERR, "at most %d keys per batch", PROTO_MAX_BATCH);
        return NULL;
    }
    master *m = master_of(c);
    if (m->items_cap < *n) {
        free(m->items);
        m->items_cap = *n > m->items_cap * 2 ? *n : m->items_cap * 2;
        m->items = xmalloc(m->items_cap * sizeof *m->items);
    }
    mm_item *it = m->items;
    for (size_t i = 0; i < *n; i++) {
        /* err stays as it is: it is written before it is read */
        it[i].key = c->argv[first + (int)i * stride].ptr;
        it[i].keylen = c->argv[first + (int)i * stride].len;
        it[i].size = it[i].lease_until = 0;
        it[i].crc = 0;
        it[i].slices = (proto_slices){0};
        it[i].status = PROTO_OK;
        it[i].obj = NULL;
    }
    return it;
}

/* The second argument of each pair as a number; -1 after replying. */
static int batch_numbers(client *c, int first, mm_item *it, size_t n, uint64_t max, int is_crc) {
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        if (master_arg_u64(c, first + 2 * (int)i + 1, 0, max, &v) != 0) return -1;
        if (is_crc) it[i].crc = (uint32_t)v;
        else it[i].size = v;
    }
    return 0;
}

/* MOON.MPUTSTART REPLICAS n [PACKED] key size [key size ...]
 * (pairs follow: PACKED is told from a key by the argument count). */
static void mputstart_command(client *c) {
    if (master_rebuild_refuses(c)) return;
    uint32_t reps;
    if (!strieq_len(c->argv[1].ptr, c->argv[1].len, "replicas")) {
        reply_syntax_error(c);
        return;
    }
    if (arg_u32(c, 2, 1, PROTO_MAX_REPLICAS, &reps) != 0) return;
    int packed = c->argc % 2 == 0 && strieq_len(c->argv[3].ptr, c->argv[3].len, "packed");
    size_t n;
    mm_item *it = batch_items(c, packed ? 4 : 3, 2, &n);
    if (!it) return;
    if (batch_numbers(c, packed ? 4 : 3, it, n, MAX_SIZE, 0) == 0)
        put_items(c, it, n, reps, packed ? MASTER_PUTS_PACKED : MASTER_PUTS_ARRAY);
}

/* MOON.MPUTEND SLICES's groups: crc, slice size, packed CRCs per key. */
static int batch_slices(client *c, mm_item *it, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int at = 2 + 4 * (int)i;
        if (arg_crc(c, at + 1, &it[i].crc) != 0 || arg_slices(c, at + 2, &it[i].slices) != 0) return -1;
    }
    return 0;
}

/* MPUTEND PACKED: every item's record in one bulk string. */
static void reply_ended_packed(client *c, const mm_item *it, size_t n) {
    resp_buf *b = wire_of(c);
    char text[REFUSAL_LEN];
    for (size_t i = 0; i < n; i++) {
        if (it[i].status != PROTO_OK) proto_ended_put_error(b, refusal_text(&it[i], &text));
        else proto_ended_put_ok(b);
    }
    reply_bulk(c, b->data, b->len);
}

/* MOON.MPUTEND [PACKED] key crc [key crc ...]
 * MOON.MPUTEND SLICES key crc slice_size crcs [key crc slice_size crcs ...]
 * (a word then pairs or groups of four: an even argument count; without
 * one, the first argument is a key) */
static void mputend_command(client *c) {
    int worded = c->argc % 2 == 0;
    int sliced = worded && strieq_len(c->argv[1].ptr, c->argv[1].len, "slices");
    int packed = worded && strieq_len(c->argv[1].ptr, c->argv[1].len, "packed");
    size_t n;
    mm_item *it = batch_items(c, sliced || packed ? 2 : 1, sliced ? 4 : 2, &n);
    if (!it) return;
    if (sliced ? batch_slices(c, it, n) == 0 : batch_numbers(c, packed ? 2 : 1, it, n, UINT32_MAX, 1) == 0) {
        acked_begin(c);
        mm_put_end_batch(meta_of(c), it, n, now());
        if (packed) {
            reply_ended_packed(c, it, n);
        } else {
            reply_array(c, (long long)n);
            for (size_t i = 0; i < n; i++) reply_status(c, it[i].status, it[i].err);
        }
        acks_end(c);
    }
    for (size_t i = 0; i < n; i++) proto_slices_free(&it[i].slices);
}

/* MOON.RELEASE key lease_until [key lease_until ...]: readers done with
 * these leases (lease_until as their read caps' expiry). :n returned. */
static void release_command(client *c) {
    size_t n;
    mm_item *it = batch_items(c, 1, 2, &n);
    if (!it) return;
    if (batch_numbers(c, 1, it, n, UINT64_MAX >> 1, 0) == 0) {
        for (size_t i = 0; i < n; i++) it[i].lease_until = it[i].size;
        reply_integer(c, (long long)mm_lease_return_batch(meta_of(c), it, n, now()));
    }
}

/* MOON.MRELEASE lease_until key [key ...]: MOON.RELEASE for leases of
 * one expiry (a MOON.MGETPACKED's keys share theirs): no number per key
 * to write, send and parse. :n returned. */
static void mrelease_command(client *c) {
    uint64_t lease;
    if (master_arg_u64(c, 1, 0, UINT64_MAX >> 1, &lease) != 0) return;
    size_t n;
    mm_item *it = batch_items(c, 2, 1, &n);
    if (!it) return;
    for (size_t i = 0; i < n; i++) it[i].lease_until = lease;
    reply_integer(c, (long long)mm_lease_return_batch(meta_of(c), it, n, now()));
}

static void mget_command(client *c) {
    size_t n;
    mm_item *it = batch_items(c, 1, 1, &n);
    if (it) get_items(c, it, n, MASTER_GETS_ARRAY);
}

/* MOON.MGETPACKED key [key ...]: MOON.MGET's answers as one bulk string
 * of records (proto/located.h). */
#define EXTENTS_AHEAD 8   /* records encoded while a later one's extents come into the cache */

static void prefetch_extents(const mm_item *x) {
    if (x->status != PROTO_OK) return;
    const object *o = x->obj;
    if (!o->rep_list) return;   /* words: in the object itself */
    for (uint32_t r = 0; r < o->nreplicas; r++) __builtin_prefetch(o->rep.list[r].extents);
}

static void reply_gets_packed(client *c, const mm_item *it, size_t n) {
    resp_buf *b = wire_of(c);
    for (size_t i = 0; i < n && i < EXTENTS_AHEAD; i++) prefetch_extents(&it[i]);
    for (size_t i = 0; i < n; i++) {
        if (i + EXTENTS_AHEAD < n) prefetch_extents(&it[i + EXTENTS_AHEAD]);
        if (it[i].status != PROTO_OK) {
            proto_located_put_missing(b);
            continue;
        }
        proto_grant g = grant_of(c, it[i].obj, TE_CAP_READ, it[i].lease_until);
        proto_located_put(b, it[i].obj, mm_obj_slices(it[i].obj), &g);
    }
    reply_bulk(c, b->data, b->len);
}

static void mgetpacked_command(client *c) {
    size_t n;
    mm_item *it = batch_items(c, 1, 1, &n);
    if (it) get_items(c, it, n, MASTER_GETS_PACKED);
}

void master_reply_gets(client *c, const mm_item *it, size_t n, int form) {
    if (form == MASTER_GETS_PACKED) {
        reply_gets_packed(c, it, n);
        return;
    }
    if (form == MASTER_GETS_ARRAY) reply_array(c, (long long)n);
    for (size_t i = 0; i < n; i++) {
        if (it[i].status == PROTO_OK) reply_located(c, it[i].obj, it[i].lease_until);
        else if (it[i].status == PROTO_TRYAGAIN && form == MASTER_GETS_ONE) master_reply_fail(c, it[i].status, "%s", it[i].err);
        else reply_null(c);
    }
}

/* MOON.MREMOVE key [key ...]: MOON.REMOVE of each key in order, one
 * element per key (:1, :0 or its refusal); acknowledged as one. */
static void mremove_command(client *c) {
    size_t n;
    mm_item *it = batch_items(c, 1, 1, &n);
    if (!it) return;
    char err[PROTO_ERR_LEN];
    uint64_t t = now();
    master_of(c)->remove_requests++;
    acked_begin(c);
    reply_array(c, (long long)n);
    for (size_t i = 0; i < n; i++) {
        proto_status st = mm_remove(meta_of(c), it[i].key, it[i].keylen, t, err, sizeof err);
        if (st == PROTO_OK || st == PROTO_NOTFOUND) reply_integer(c, st == PROTO_OK);
        else master_reply_fail(c, st, "%s", err);
    }
    acks_end(c);
}

static void mexists_command(client *c) {
    size_t n;
    mm_item *it = batch_items(c, 1, 1, &n);
    if (!it) return;
    mm_exists_batch(meta_of(c), it, n);
    reply_array(c, (long long)n);
    for (size_t i = 0; i < n; i++) reply_integer(c, it[i].status == PROTO_OK);
}

/* MOON.PREFIX key [key ...]: how many keys, from the first on, name
 * complete objects (an engine's prefix lookup); stops at the first miss. */
static void prefix_command(client *c) {
    size_t n = (size_t)(c->argc - 1);
    if (n > PROTO_MAX_BATCH) {
        master_reply_fail(c, PROTO_ERR, "at most %d keys per batch", PROTO_MAX_BATCH);
        return;
    }
    master_meta *m = meta_of(c);
    size_t hit = 0;
    while (hit < n && mm_exists(m, c->argv[1 + hit].ptr, c->argv[1 + hit].len)) hit++;
    reply_integer(c, (long long)hit);
}

#define PIN_ID_MAX (UINT64_MAX >> 1)   /* ids are 1 to 2^63-1 (a signed integer's range) */

/* id ms key [key ...] of PREFIXPIN and REPIN: the keys, or NULL after
 * the error reply. */
static mm_item *pin_args(client *c, uint64_t *id, uint64_t *ms, size_t *n) {
    long long v;
    if (master_arg_u64(c, 1, 1, PIN_ID_MAX, id) != 0) return NULL;
    if (arg_to_ll(&c->argv[2], 1, PROTO_PIN_MAX_MS, &v) != 0) {
        master_reply_fail(c, PROTO_ERR, "pin time must be 1 to %u ms", PROTO_PIN_MAX_MS);
        return NULL;
    }
    *ms = (uint64_t)v;
    return batch_items(c, 3, 1, n);
}

/* Pin it[0..n) under id for ms, counted against this connection, and
 * answer :n. A bound passed pins nothing: the error says which. */
static void pin_reply(client *c, uint64_t id, uint64_t ms, const mm_item *it, size_t n) {
    pin_key *pk = xmalloc((n ? n : 1) * sizeof *pk);
    for (size_t i = 0; i < n; i++) pk[i] = (pin_key){it[i].key, it[i].keylen};
    char err[PROTO_ERR_LEN];
    uint64_t t = now();
    int rc = pinset_add(mm_pins_of(meta_of(c)), id, c->id, pk, n, t + ms, t, err, sizeof err);
    free(pk);
    if (rc != 0) master_reply_fail(c, PROTO_ERR, "%s", err);
    else reply_integer(c, (long long)n);
}

/* MOON.PREFIXPIN id ms key [key ...]: MOON.PREFIX's count, the keys it
 * counted pinned under id for ms (proto/pins.h). */
static void prefixpin_command(client *c) {
    uint64_t id, ms;
    size_t n, hit = 0;
    mm_item *it = pin_args(c, &id, &ms, &n);
    if (!it) return;
    while (hit < n && mm_exists(meta_of(c), it[hit].key, it[hit].keylen)) hit++;
    pin_reply(c, id, ms, it, hit);
}

/* MOON.REPIN id ms key [key ...]: every key pinned under id for ms,
 * stored or not: a client re-establishes its pins on a new leader, which
 * may not have the keys from the nodes' reports yet (a key pinned before
 * it comes is held once it does). */
static void repin_command(client *c) {
    uint64_t id, ms;
    size_t n;
    mm_item *it = pin_args(c, &id, &ms, &n);
    if (it) pin_reply(c, id, ms, it, n);
}

/* MOON.UNPIN id [id ...]: those pins released; how many keys they held. */
static void unpin_command(client *c) {
    if (c->argc - 1 > PROTO_MAX_UNPIN) {
        master_reply_fail(c, PROTO_ERR, "at most %d ids per " PROTO_VERB_UNPIN, PROTO_MAX_UNPIN);
        return;
    }
    uint64_t ids[PROTO_MAX_UNPIN];
    for (int i = 1; i < c->argc; i++)
        if (master_arg_u64(c, i, 1, PIN_ID_MAX, &ids[i - 1]) != 0) return;   /* all or none */
    size_t keys = 0;
    for (int i = 1; i < c->argc; i++) keys += pinset_release(mm_pins_of(meta_of(c)), ids[i - 1], now());
    reply_integer(c, (long long)keys);
}

/* ---- introspection ---- */

/* [[id, state, [addr ...]] ...] */
static void topology_command(client *c) {
    master_meta *mm = meta_of(c);
    uint32_t n = mm_node_count(mm);
    reply_array(c, n);
    for (uint32_t id = 1; id <= n; id++) {
        const mm_node *node = mm_node_view(mm, id);
        reply_array(c, 3);
        reply_integer(c, id);
        reply_bulk_cstr(c, mm_node_state_name(node->state));
        reply_array(c, node->naddrs);
        for (int i = 0; i < node->naddrs; i++) reply_bulk_cstr(c, node->addrs[i]);
    }
}

static uint64_t node_used(const mm_node *n) {
    if (!n->alloc) return 0;
    seg_alloc_stats st;
    seg_alloc_get_stats(n->alloc, &st);
    return st.used;
}

/* One line per node: "<id> <addr> <state> <segment_size> <used>\n" */
static void nodes_command(client *c) {
    master_meta *mm = meta_of(c);
    int expected = c->argc == 2 && c->argv[1].len == 8 && strncasecmp(c->argv[1].ptr, "expected", 8) == 0;
    if (c->argc > 1 && !expected) {
        reply_syntax_error(c);
        return;
    }
    resp_buf out;
    resp_buf_init(&out);
    for (uint32_t id = 1; id <= mm_node_count(mm); id++) {
        const mm_node *node = mm_node_view(mm, id);
        char line[TE_ADDR_LEN + 96];
        int len = snprintf(line, sizeof line, "%u %s %s %llu %llu\n", id, node->addrs[0],
                           mm_node_state_name(node->state),
                           (unsigned long long)node->segment_size,
                           (unsigned long long)node_used(node));
        resp_buf_append(&out, line, (size_t)len);
    }
    if (expected) master_rebuild_expected(master_of(c), &out);
    reply_verbatim(c, out.data ? out.data : "", out.len);
    resp_buf_free(&out);
}

/* MOON.OBJECT key: state, size, crc, created, replicas [[node, off, len] ...] */
static void object_command(client *c) {
    object *o = mm_find(meta_of(c), c->argv[1].ptr, c->argv[1].len);
    if (!o) {
        reply_null(c);
        return;
    }
    reply_map(c, 5);
    reply_bulk_cstr(c, "state");
    reply_bulk_cstr(c, o->state == OBJ_COMPLETE ? "complete" : "pending");
    reply_bulk_cstr(c, "size");
    reply_integer(c, (long long)o->size);
    reply_bulk_cstr(c, "crc");
    reply_integer(c, o->crc);
    reply_bulk_cstr(c, "created_ms");
    reply_integer(c, (long long)o->created_ms);
    reply_bulk_cstr(c, "replicas");
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    reply_array(c, o->nreplicas);
    for (uint32_t r = 0; r < o->nreplicas; r++) {
        reply_array(c, reps[r].nextents);
        for (uint32_t i = 0; i < reps[r].nextents; i++) {
            const obj_extent *e = &reps[r].extents[i];
            reply_array(c, 3);
            reply_integer(c, e->node);
            reply_integer(c, (long long)e->offset);
            reply_integer(c, (long long)e->length);
        }
    }
}

/* The "# Cluster" fields below, as metrics. */
static const metrics_field master_metrics[] = {
    {"nodes_alive", "moonkv_nodes", METRIC_GAUGE, "state=\"alive\"", "Memory nodes, by state."},
    {"nodes_draining", "moonkv_nodes", METRIC_GAUGE, "state=\"draining\"", "Memory nodes, by state."},
    {"nodes_dead", "moonkv_nodes", METRIC_GAUGE, "state=\"dead\"", "Memory nodes, by state."},
    {"objects_complete", "moonkv_objects", METRIC_GAUGE, "state=\"complete\"", "Objects, by state."},
    {"objects_pending", "moonkv_objects", METRIC_GAUGE, "state=\"pending\"", "Objects, by state."},
    {"objects_lost", "moonkv_objects", METRIC_GAUGE, "state=\"lost\"", "Objects, by state."},
    {"replicas_corrupt", "moonkv_replicas_corrupt_total", METRIC_COUNTER, NULL,
     "Replicas dropped because a node's scrub found their bytes rotten."},
    {"under_replicated", "moonkv_objects_under_replicated", METRIC_GAUGE, NULL,
     "Complete objects with fewer replicas than asked for."},
    {"tasks_pending", "moonkv_repair_tasks_pending", METRIC_GAUGE, NULL, "Copy tasks not finished."},
    {"tasks_done", "moonkv_repair_tasks_total", METRIC_COUNTER, "result=\"done\"",
     "Copy tasks finished, by result."},
    {"tasks_failed", "moonkv_repair_tasks_total", METRIC_COUNTER, "result=\"failed\"",
     "Copy tasks finished, by result."},
    {"puts_timed_out", "moonkv_put_timeouts_total", METRIC_COUNTER, NULL,
     "Puts dropped unfinished after put_timeout_ms."},
    {"puts_revoked", "moonkv_puts_revoked_total", METRIC_COUNTER, NULL, "Puts abandoned by their client."},
    {"held_extents", "moonkv_lease_held_extents", METRIC_GAUGE, NULL,
     "Extents of removed objects kept until their read leases expire."},
    {"bytes_used", "moonkv_cluster_used_bytes", METRIC_GAUGE, NULL, "Segment bytes in use, all nodes."},
    {"bytes_total", "moonkv_cluster_capacity_bytes", METRIC_GAUGE, NULL, "Segment bytes, all nodes."},
    {"fragmentation_max", "moonkv_segment_fragmentation_max_ratio", METRIC_GAUGE, NULL,
     "The most fragmented node segment: 1 - largest free extent / free bytes."},
    {"evicted_keys", "moonkv_evicted_keys_total", METRIC_COUNTER, NULL,
     "Objects collected by the maxmemory policy."},
    {"evicted_expired_keys", "moonkv_evicted_expired_keys_total", METRIC_COUNTER, NULL,
     "Of those, objects collected because their EX/PX hint passed."},
    {"disk_offloads", "moonkv_disk_offloads_total", METRIC_COUNTER, NULL,
     "Objects moved from a node's DRAM to its disk tier."},
    {"disk_offload_bytes", "moonkv_disk_offload_bytes_total", METRIC_COUNTER, NULL,
     "Bytes of those objects."},
    {"disk_promotes", "moonkv_disk_promotes_total", METRIC_COUNTER, NULL,
     "Objects loaded back from a node's disk tier into its DRAM."},
    {"disk_promote_bytes", "moonkv_disk_promote_bytes_total", METRIC_COUNTER, NULL,
     "Bytes of those objects."},
    {"disk_reads_unpromoted", "moonkv_disk_reads_unpromoted_total", METRIC_COUNTER, NULL,
     "Reads of objects left on a disk tier (disk_promote_after): straight from the disk or a temporary copy."},
    {"disk_reads_unpromoted_bytes", "moonkv_disk_reads_unpromoted_bytes_total", METRIC_COUNTER, NULL,
     "Bytes of those reads."},
    {"disk_reads_direct", "moonkv_disk_reads_direct_total", METRIC_COUNTER, NULL,
     "Of those, gets answered with a disk record, read by the reader straight from the node's disk."},
    {"disk_reads_direct_bytes", "moonkv_disk_reads_direct_bytes_total", METRIC_COUNTER, NULL,
     "Bytes of those gets."},
    {"disk_offloading_bytes", "moonkv_disk_offloading_bytes", METRIC_GAUGE, NULL,
     "Bytes of objects whose offload to a disk tier is in flight."},
    {"disk_offload_orphans", "moonkv_disk_offload_orphans_total", METRIC_COUNTER, NULL,
     "Disk records written for offloads that failed meanwhile (a remove), dropped."},
    {"disk_repair_pushes", "moonkv_disk_repair_pushes_total", METRIC_COUNTER, NULL,
     "Repairs whose only source was a disk record (its node sends it)."},
    {"holdings_pending", "moonkv_holdings_pending", METRIC_GAUGE, NULL,
     "Changes of what nodes hold that the nodes have not taken yet (" PROTO_VERB_HOLDINGS ")."},
    {"acks_waiting", "moonkv_acks_waiting", METRIC_GAUGE, NULL,
     "Answers waiting until their nodes acknowledged the holdings notes."},
    {"acks_by_nodes", "moonkv_acks_released_total", METRIC_COUNTER, "by=\"nodes\"",
     "Answers released, by why: every node acknowledged, a node's notes were reset, the 2 s bound."},
    {"acks_unconfirmed", "moonkv_acks_released_total", METRIC_COUNTER, "by=\"reset\"",
     "Answers released, by why: every node acknowledged, a node's notes were reset, the 2 s bound."},
    {"acks_by_bound", "moonkv_acks_released_total", METRIC_COUNTER, "by=\"bound\"",
     "Answers released, by why: every node acknowledged, a node's notes were reset, the 2 s bound."},
    {"rebuild_recovered", "moonkv_rebuild_objects_total", METRIC_COUNTER, "result=\"recovered\"",
     "Objects of a rebuild after a master restart, by result."},
    {"rebuild_incomplete", "moonkv_rebuild_objects_total", METRIC_COUNTER, "result=\"incomplete\"",
     "Objects of a rebuild after a master restart, by result."},
    {"rebuild_lost", "moonkv_rebuild_objects_total", METRIC_COUNTER, "result=\"lost\"",
     "Objects of a rebuild after a master restart, by result."},
};

void master_register_metrics(server *srv) { METRICS_ADD_TABLE(srv, master_metrics); }

void master_info(server *srv, resp_buf *out, const char *section) {
    if (!info_wants(section, "cluster", 1)) return;
    master *m = srv->role;
    mm_stats st;
    /* INFO is polled while a rebuild fills the table: walking it each time
     * took the most of the build's time */
    mm_get_stats(m->meta, &st);
    info_section(out, "Cluster");
    master_leader_info(m, out);
    info_field(out, "nodes_alive", "%u", st.nodes_alive);
    info_field(out, "nodes_draining", "%u", st.nodes_draining);
    info_field(out, "nodes_dead", "%u", st.nodes_dead);
    info_field(out, "nodes_suspect", "%u", st.nodes_suspect);
    info_field(out, "suspicions", "%llu", (unsigned long long)st.suspicions);
    info_field(out, "objects_complete", "%llu", (unsigned long long)st.objects_complete);
    info_field(out, "objects_pending", "%llu", (unsigned long long)st.objects_pending);
    info_field(out, "objects_lost", "%llu", (unsigned long long)st.objects_lost);
    info_field(out, "replicas_corrupt", "%llu", (unsigned long long)st.replicas_corrupt);
    info_field(out, "under_replicated", "%llu", (unsigned long long)st.under_replicated);
    info_field(out, "tasks_pending", "%llu", (unsigned long long)st.tasks_pending);
    info_field(out, "tasks_done", "%llu", (unsigned long long)st.tasks_done);
    info_field(out, "tasks_failed", "%llu", (unsigned long long)st.tasks_failed);
    info_field(out, "puts_timed_out", "%llu", (unsigned long long)st.puts_timed_out);
    info_field(out, "puts_revoked", "%llu", (unsigned long long)st.puts_revoked);
    info_field(out, "remove_requests", "%llu", (unsigned long long)m->remove_requests);
    info_field(out, "held_extents", "%llu", (unsigned long long)st.held_extents);
    put_wait_info(m->waits, out);
    get_wait_info(m->gets, out);
    acks_info(m->acks, out);
    holdings_wait_info(m->pulls, out);
    info_field(out, "bytes_used", "%llu", (unsigned long long)st.bytes_used);
    info_field(out, "bytes_total", "%llu", (unsigned long long)st.bytes_total);
    info_field(out, "free_extents", "%llu", (unsigned long long)st.free_extents);
    info_field(out, "fragmentation_max", "%.4f", st.fragmentation_max);
    info_field(out, "maxmemory_policy", "%s", evict_policy_name((evict_policy)mm_get_config(m->meta)->gc_policy));
    info_field(out, "evicted_keys", "%llu", (unsigned long long)st.evicted_keys);
    info_field(out, "evicted_expired_keys", "%llu", (unsigned long long)st.evicted_expired_keys);
    info_field(out, "holdings_pending", "%llu", (unsigned long long)st.holdings_pending);
    info_field(out, "slice_crc_bytes", "%llu", (unsigned long long)st.slice_crc_bytes);
    info_field(out, "disk_offloads", "%llu", (unsigned long long)st.offloads);
    info_field(out, "disk_offload_bytes", "%llu", (unsigned long long)st.offload_bytes);
    info_field(out, "disk_promotes", "%llu", (unsigned long long)st.promotes);
    info_field(out, "disk_promote_bytes", "%llu", (unsigned long long)st.promote_bytes);
    info_field(out, "disk_reads_unpromoted", "%llu", (unsigned long long)st.disk_reads);
    info_field(out, "disk_reads_unpromoted_bytes", "%llu", (unsigned long long)st.disk_read_bytes);
    info_field(out, "disk_reads_direct", "%llu", (unsigned long long)st.disk_direct);
    info_field(out, "disk_reads_direct_bytes", "%llu", (unsigned long long)st.disk_direct_bytes);
    info_field(out, "disk_offloading_bytes", "%llu", (unsigned long long)st.offloading_bytes);
    info_field(out, "disk_offload_orphans", "%llu", (unsigned long long)st.offload_orphans);
    info_field(out, "disk_repair_pushes", "%llu", (unsigned long long)st.disk_pushes);
    master_rebuild_info(m, out);
    master_restore_info(m, out);
}

#define KEY1 1, 1, 1
#define NOKEY 0, 0, 0
/* ---- MOON.SCAN ---- */

typedef struct scan_reply {
    const resp_arg *match;    /* NULL: every key */
    object **objs;
    size_t n, cap;
} scan_reply;

static void scan_take(object *o, void *ctx) {
    scan_reply *sr = ctx;
    if (sr->match && !glob_match(sr->match->ptr, sr->match->len, o->key, o->keylen, 0)) return;
    if (sr->n == sr->cap) {
        sr->cap = sr->cap ? sr->cap * 2 : 32;
        sr->objs = xrealloc(sr->objs, sr->cap * sizeof *sr->objs);
    }
    sr->objs[sr->n++] = o;
}

/* MOON.SCAN cursor [COUNT n] [MATCH pattern]: [next cursor, [key ...]]. */
static void scan_command(client *c) {
    uint64_t cursor, count = PROTO_SCAN_COUNT_DEFAULT;
    scan_reply sr = {0};
    if (arg_to_u64(&c->argv[1], &cursor) != 0) {
        master_reply_fail(c, PROTO_ERR, "invalid cursor");
        return;
    }
    for (int i = 2; i < c->argc; i += 2) {
        const resp_arg *opt = &c->argv[i];
        if (i + 1 >= c->argc) {
            master_reply_fail(c, PROTO_ERR, "syntax error");
            return;
        }
        if (strieq_len(opt->ptr, opt->len, "MATCH")) {
            sr.match = &c->argv[i + 1];
        } else if (strieq_len(opt->ptr, opt->len, "COUNT")) {
            if (master_arg_u64(c, i + 1, 1, UINT64_MAX >> 1, &count) != 0) return;
            if (count > PROTO_MAX_SCAN_COUNT) count = PROTO_MAX_SCAN_COUNT;
        } else {
            master_reply_fail(c, PROTO_ERR, "syntax error");
            return;
        }
    }
    uint64_t next = mm_scan(meta_of(c), cursor, (long)count, scan_take, &sr);
    char cur[24];
    int n = snprintf(cur, sizeof cur, "%llu", (unsigned long long)next);
    reply_array(c, 2);
    reply_bulk(c, cur, (size_t)n);
    reply_array(c, (long long)sr.n);
    for (size_t i = 0; i < sr.n; i++) reply_bulk(c, sr.objs[i]->key, sr.objs[i]->keylen);
    free(sr.objs);
}

/* ---- MOON.FLUSH ---- */

/* MOON.FLUSH: remove every COMPLETE object (a gateway's FLUSHALL); how
 * many. Batches of a scan, each removed before the next (the cursor stays
 * valid as the table shrinks); puts in flight finish as usual. */
static void flush_command(client *c) {
    if (master_rebuild_refuses(c)) return;
    acked_begin(c);
    master_meta *m = meta_of(c);
    scan_reply sr = {0};
    uint64_t cursor = 0, removed = 0;
    char err[PROTO_ERR_LEN];
    do {
        sr.n = 0;
        cursor = mm_scan(m, cursor, 1000, scan_take, &sr);
        for (size_t i = 0; i < sr.n; i++)
            removed += mm_remove(m, sr.objs[i]->key, sr.objs[i]->keylen, now(), err, sizeof err) == PROTO_OK;
    } while (cursor != 0);
    free(sr.objs);
    reply_integer(c, (long long)removed);
    acks_end(c);
}

static const command master_commands[] = {
    {"moon.challenge", challenge_command, 1, CMD_FAST | CMD_STALE, NOKEY, 0, "moonkv", "0.1.0",
     "Get a nonce to prove the cluster secret with", ""},
    {"moon.prove", prove_command, 2, CMD_FAST | CMD_STALE, NOKEY, 0, "moonkv", "0.5.0",
     "Prove the cluster secret for the last nonce: the connection may change the cluster", "proof"},
    {"moon.register", register_command, -4, CMD_WRITE, NOKEY, 0, "moonkv", "0.1.0",
     "Join a memory node", "proof segment-size addr [addr ...] [ID id] [INSTANCE hex] [SEEN id]"},
    {"moon.holdlink", holdlink_command, 4, CMD_WRITE, NOKEY, 0, "moonkv", "0.5.0",
     "A node's connection for its holdings pulls", "proof id instance"},
    {"moon.chunks", chunks_command, -3, CMD_FAST | CMD_MEMBER, NOKEY, 0, "moonkv", "0.1.0",
     "A memory node shared by master groups: the chunks of its segment it gave this group; "
     "answers how many more it wants and the ones it gives back", "id chunks [FREE n]"},
    {"moon.heartbeat", heartbeat_command, -3, CMD_FAST | CMD_MEMBER, NOKEY, 0, "moonkv", "0.1.0",
     "Node liveness; returns copy tasks", "id used [field value ...]"},
    {"moon.copydone", copydone_command, -3, CMD_FAST | CMD_MEMBER, NOKEY, 0, "moonkv", "0.1.0",
     "Node reports a copy task's outcome", "task-id OK|FAIL"},
    {"moon.leave", leave_command, 2, CMD_WRITE | CMD_MEMBER, NOKEY, 0, "moonkv", "0.1.0",
     "Node announces it leaves (drain)", "id"},
    {"moon.drain", drain_command, 2, CMD_WRITE | CMD_ADMIN | CMD_MEMBER, NOKEY, 0, "moonkv", "0.1.0",
     "Move every object off a node, then drop it", "id"},
    {"moon.suspect", suspect_command, -2, CMD_WRITE | CMD_FAST | CMD_MEMBER, NOKEY, 0, "moonkv", "0.1.0",
     "Report nodes a client cannot reach: nothing new is placed on them", "id [id ...]"},
    {"moon.putstart", putstart_command, -3, CMD_WRITE | CMD_MEMBER, KEY1, 0, "moonkv", "0.1.0",
     "Place an object; returns write capabilities", "key size [REPLICAS n]"},
    {"moon.putend", putend_command, -3, CMD_WRITE | CMD_FAST | CMD_MEMBER, KEY1, 0, "moonkv", "0.1.0",
     "Make a written object visible", "key crc [SLICES slice_size crcs]"},
    {"moon.putrevoke", putrevoke_command, 2, CMD_WRITE | CMD_FAST | CMD_MEMBER, KEY1, 0, "moonkv", "0.1.0",
     "Abandon a put", "key"},
    {"moon.get", get_command, 2, CMD_READONLY | CMD_FAST, KEY1, 0, "moonkv", "0.1.0",
     "Replicas of an object with read capabilities", "key"},
    {"moon.remove", remove_command, 2, CMD_WRITE | CMD_FAST | CMD_MEMBER, KEY1, 0, "moonkv", "0.1.0",
     "Remove an object", "key"},
    {"moon.mremove", mremove_command, -2, CMD_WRITE | CMD_MEMBER, 1, -1, 1, 0, "moonkv", "0.8.0",
     "REMOVE for many keys", "key [key ...]"},
    {"moon.exists", exists_command, 2, CMD_READONLY | CMD_FAST, KEY1, 0, "moonkv", "0.1.0",
     "1 if a complete object has the key", "key"},
    {"moon.mputstart", mputstart_command, -5, CMD_WRITE | CMD_MEMBER, 3, -1, 2, 0, "moonkv", "0.1.0",
     "PUTSTART for many keys", "REPLICAS n [PACKED] key size [key size ...]"},
    {"moon.mputend", mputend_command, -3, CMD_WRITE | CMD_MEMBER, 1, -1, 2, 0, "moonkv", "0.1.0",
     "PUTEND for many keys", "[SLICES] key crc [slice_size crcs] [key crc ...]"},
    {"moon.mget", mget_command, -2, CMD_READONLY, 1, -1, 1, 0, "moonkv", "0.1.0",
     "GET for many keys", "key [key ...]"},
    {"moon.mgetpacked", mgetpacked_command, -2, CMD_READONLY, 1, -1, 1, 0, "moonkv", "0.2.0",
     "GET for many keys, the answers packed in one bulk string", "key [key ...]"},
    {"moon.release", release_command, -3, CMD_READONLY | CMD_FAST | CMD_MEMBER, 1, -1, 2, 0, "moonkv", "0.1.0",
     "Give back read leases", "key lease_until [key lease_until ...]"},
    {"moon.mrelease", mrelease_command, -3, CMD_READONLY | CMD_FAST | CMD_MEMBER, 2, -1, 1, 0, "moonkv", "0.2.0",
     "Give back read leases of one expiry", "lease_until key [key ...]"},
    {"moon.mexists", mexists_command, -2, CMD_READONLY | CMD_FAST, 1, -1, 1, 0, "moonkv", "0.1.0",
     "EXISTS for many keys", "key [key ...]"},
    {"moon.prefix", prefix_command, -2, CMD_READONLY | CMD_FAST, 1, -1, 1, 0, "moonkv", "0.3.0",
     "How many leading keys name complete objects", "key [key ...]"},
    {"moon.prefixpin", prefixpin_command, -4, CMD_READONLY | CMD_FAST | CMD_MEMBER, 3, -1, 1, 0, "moonkv", "0.6.0",
     "PREFIX, its hits pinned under id for ms (no remove, no collection) until UNPIN",
     "id ms key [key ...]"},
    {"moon.repin", repin_command, -4, CMD_READONLY | CMD_FAST | CMD_MEMBER, 3, -1, 1, 0, "moonkv", "0.7.0",
     "Pin keys under id for ms whether stored or not (a client's pins again on a new leader)",
     "id ms key [key ...]"},
    {"moon.unpin", unpin_command, -2, CMD_READONLY | CMD_FAST | CMD_MEMBER, NOKEY, 0, "moonkv", "0.6.0",
     "Release pins of PREFIXPIN; how many keys they held", "id [id ...]"},
    {"moon.topology", topology_command, 1, CMD_READONLY, NOKEY, 0, "moonkv", "0.1.0",
     "Every node with state and data addresses", ""},
    {"moon.nodes", nodes_command, -1, CMD_READONLY, NOKEY, 0, "moonkv", "0.1.0",
     "One text line per node (EXPECTED: and per node a rebuild waits for)", "[EXPECTED]"},
    {"moon.flush", flush_command, 1, CMD_WRITE | CMD_MEMBER, NOKEY, 0, "moonkv", "0.2.0",
     "Remove every object (FLUSHALL through a gateway); how many", ""},
    {"moon.scan", scan_command, -2, CMD_READONLY, NOKEY, 0, "moonkv", "0.2.0",
     "Iterate the keys of complete objects", "cursor [COUNT count] [MATCH pattern]"},
    {"moon.object", object_command, 2, CMD_READONLY, KEY1, 0, "moonkv", "0.1.0",
     "An object's metadata and extents", "key"},
};

void master_register_commands(server *srv) {
    commands_register(srv, master_commands, sizeof master_commands / sizeof master_commands[0]);
}
