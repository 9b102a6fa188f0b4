/* tests/integration/test_groups_shared.c - memory nodes shared by master
 * groups (docs/SCALE.md "Nodes shared by groups"): an etcd (the Debian
 * package etcd-server; SKIP without it), group a (--slots 0-8191, a leader
 * and a standby) and group b (--slots 8192-16383), two nodes with --shared-groups a,b and a
 * libmoonkv client over the groups.
 *
 * Each node takes one id from etcd and has it in both groups; it gives
 * each group chunks of its segment on request. Group a's puts fill most
 * of both nodes (it holds far more chunks than an even split would give
 * it) while group b still gets room; everything reads back byte-exact.
 * Group a's leader killed -9: its standby rebuilds from the nodes'
 * reports of a's chunks and every object of both groups reads back.
 * A capability genuinely signed by one group's master key (the test
 * registers a fake node with the secret to learn both keys) is refused on
 * the other group's chunks and served on its own. Removed objects give
 * their chunks back; a node drained (SIGTERM) leaves both groups with
 * every object readable elsewhere; a node that found its groups in the
 * slot map (--shared-groups map), killed -9, is declared dead by both
 * masters. A slot moved from a to b with its objects is served by b and
 * gives a its space back (MOON.LENT); a move undone brings the objects
 * back to a; a move whose two leaders are killed -9 loses nothing and
 * ends (docs/SCALE.md "Between groups sharing nodes"). Ports (etcd's
 * too): one block of h_free_ports. */
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cap.h"
#include "backend/tcp_transport.h"
#include "client/moonkv.h"
#include "cluster_harness.h"
#include "core/util.h"
#include "etcd_harness.h"
#include "groups_harness.h"
#include "proto/register.h"
#include "proto/slots.h"
#include "test.h"

static int port0;
#define MASTER_A1    (port0 + 0)
#define MASTER_B1    (port0 + 1)
#define MASTER_B     port_b         /* group b's leader */
#define MASTER_B2    (port0 + 5 + 2 * NODES)   /* group b's standby, started for the last case */
#define ETCD_PORT    (port0 + 2)    /* and its peers on + 3 */
#define MASTER_A2    (port0 + 4)    /* group a's standby */
#define NODE_PORT    (port0 + 5)    /* + 2 i; data plane on + 1 */
#define MASTER_A     port_a         /* group a's leader */
#define NODES        3              /* 0 and 1 at the start; 2 joins to be killed */
#define CLUSTER      "shared-test"
#define SECRET       "shared-secret"
#define LEASE_S      2
#define SEGMENT      (32ULL << 20)  /* 32 chunks of 1 MiB each */
#define CHUNK        (1ULL << 20)
#define WAIT_MS      30000
#define TIME_LIMIT_S 600   /* two leaders killed -9 in the last case, under SAN at load 20 */
#define VAL          (256 << 10)
#define A_KEYS       176            /* 44 MiB of group a: more than one node, 69 % of both */
#define B_KEYS       8

static h_etcd etcd;
static int port_a, port_b;
static pid_t master_a;
static pid_t node_pid[NODES];
static mkv_client *mc;
static char *src, *dst;
static char a_keys[A_KEYS][32], b_keys[B_KEYS][32];
static int a_left = A_KEYS;         /* a_keys[0..a_left) still stored */

static void remove_datadir(void) { h_etcd_remove(&etcd); }

static pid_t start_master(int port, const char *group, const char *slots) {
    char g[48], s[48];
    snprintf(g, sizeof g, "--group=%s", group);
    snprintf(s, sizeof s, "--slots=%s", slots);
    const char *extra[] = {g, s, "--cluster-secret", SECRET, "--heartbeat-ms", "200", "--node-timeout-ms", "3000",
                           NULL};
    return h_start_etcd_role("master", port, etcd.url, CLUSTER, LEASE_S, extra);
}

static pid_t start_node(int i) {
    char data[48];
    snprintf(data, sizeof data, "--data-addrs=127.0.0.1:%d", NODE_PORT + 2 * i + 1);
    /* the third node finds its groups in the slot map */
    const char *extra[] = {i < 2 ? "--shared-groups=a,b" : "--shared-groups=map", "--segment-size", "32MB", data,
                           "--prefault", "no",
                           "--cluster-secret", SECRET, NULL};
    return h_start_etcd_role("node", NODE_PORT + 2 * i, etcd.url, CLUSTER, LEASE_S, extra);
}

/* Node i's INFO line of group g: "id=..,state=..,...,chunks=N,...,map=HEX". */
static int group_line(int i, const char *g, char *out, size_t len) {
    out[0] = 0;
    redisContext *c = h_redis(NODE_PORT + 2 * i);
    redisReply *r = c ? redisCommand(c, "INFO node") : NULL;
    char field[16];
    snprintf(field, sizeof field, "group_%s:", g);
    const char *f = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, field) : NULL;
    if (f) snprintf(out, len, "%.*s", (int)strcspn(f + strlen(field), "\r\n"), f + strlen(field));
    freeReplyObject(r);
    if (c) redisFree(c);
    return f ? 0 : -1;
}

static long long line_num(const char *line, const char *name) {
    const char *p = strstr(line, name);
    return p ? strtoll(p + strlen(name), NULL, 10) : -1;
}

static int chunks_of(int i, const char *g) {
    char line[2048];
    return group_line(i, g, line, sizeof line) == 0 ? (int)line_num(line, "chunks=") : -1;
}

/* The first chunk of group g on node i (bit k of hex digit d: chunk 4d+k), or -1. */
static int first_chunk(int i, const char *g) {
    char line[2048];
    if (group_line(i, g, line, sizeof line) != 0) return -1;
    const char *m = strstr(line, "map=");
    for (int d = 0; m && m[4 + d] && m[4 + d] != ','; d++) {
        char ch = m[4 + d];
        int v = ch >= 'a' ? ch - 'a' + 10 : ch - '0';
        for (int k = 0; k < 4; k++)
            if (v >> k & 1) return 4 * d + k;
    }
    return -1;
}

static size_t fill(char *buf, int i) {
    size_t n = VAL - (size_t)(i % 7) * 64;
    for (size_t j = 0; j < n; j++) buf[j] = (char)(i * 131 + j * 7 + (j >> 9));
    return n;
}

/* A key of group g (its slot's owner), the next after *next. */
static void key_of(char *out, size_t len, const char *g, int *next) {
    do snprintf(out, len, "%s-%d", g, (*next)++);
    while ((proto_key_slot(out, strlen(out)) < 8192) != (g[0] == 'a'));
}

/* A put of src's first n bytes retried while the group's room grows
 * (NOSPACE until a node gave it chunks), up to WAIT_MS. */
static int put_n_retry(const char *key, size_t n) {
    uint64_t end = mono_ms() + WAIT_MS;
    int rc;
    while ((rc = mkv_put(mc, key, strlen(key), src, n, 1)) == MKV_ENOSPACE && mono_ms() < end) usleep(20000);
    return rc;
}

static int put_retry(const char *key, int i) { return put_n_retry(key, fill(src, i)); }

static int get_exact(const char *key, int i) {
    size_t got = 0, n = fill(src, i);
    int rc = mkv_get(mc, key, strlen(key), dst, VAL, &got);
    return rc == MKV_OK && got == n && memcmp(dst, src, n) == 0 ? 0 : rc ? rc : -100;
}

/* The ids of the alive nodes in MOON.NODES of a master, as text. */
static void alive_ids(int port, char *out, size_t len) {
    out[0] = 0;
    redisContext *c = h_redis(port);
    redisReply *r = c ? redisCommand(c, "MOON.NODES") : NULL;
    size_t at = 0;
    for (const char *l = r && r->str ? r->str : ""; *l;) {
        unsigned id;
        char addr[64], state[16];
        if (sscanf(l, "%u %63s %15s", &id, addr, state) == 3 && strcmp(state, "alive") == 0 && at + 12 < len)
            at += (size_t)snprintf(out + at, len - at, "%u ", id);
        l = strchr(l, '\n');
        if (!l) break;
        l++;
    }
    freeReplyObject(r);
    if (c) redisFree(c);
}

/* 1 if node id is alive in MOON.NODES of the master on port. */
static int is_alive(int port, long long id) {
    char ids[256], want[24];
    alive_ids(port, ids + 1, sizeof ids - 1);
    ids[0] = ' ';
    snprintf(want, sizeof want, " %lld ", id);
    return strstr(ids, want) != NULL;
}

/* Group a's leader's INFO cluster field. */
static long long a_info(const char *field) { return h_port_info(MASTER_A, "cluster", field); }

/* Until a's field is at least (above 1) or at most (above 0) v, up to WAIT_MS: its value. */
static long long wait_a_info(const char *field, long long v, int above) {
    uint64_t end = mono_ms() + WAIT_MS;
    long long got;
    while ((above ? (got = a_info(field)) < v : (got = a_info(field)) > v) && mono_ms() < end) usleep(50000);
    return got;
}

/* Until node id is alive (or not) in both groups. */
static int wait_alive(long long id, int alive, int timeout_ms) {
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    while (is_alive(MASTER_A, id) != alive || is_alive(MASTER_B, id) != alive)
        if (mono_ms() >= end) return -1;
        else usleep(20000);
    return 0;
}

/* Until node i's INFO line for group g names id, up to WAIT_MS: a master
 * lists the node alive once it registered, a moment before the node has
 * applied the reply. */
static int wait_group_id(int i, const char *g, long long id) {
    char line[2048];
    for (uint64_t end = mono_ms() + WAIT_MS;; usleep(20000)) {
        if (group_line(i, g, line, sizeof line) == 0 && line_num(line, "id=") == id) return 0;
        if (mono_ms() >= end) return -1;
    }
}

/* ---- cases ---- */

static void test_one_id_in_both_groups(void) {
    char a[128], b[128], line[2048];
    alive_ids(MASTER_A, a, sizeof a);
    alive_ids(MASTER_B, b, sizeof b);
    ASSERT_MSG(strcmp(a, b) == 0, "group a has nodes %s, group b %s", a, b);
    for (int i = 0; i < 2; i++) {
        long long id = h_port_info(NODE_PORT + 2 * i, "node", "node_id");
        ASSERT(group_line(i, "a", line, sizeof line) == 0);
        ASSERT_EQ(line_num(line, "id="), id);
        ASSERT(strstr(line, "state=member"));
        ASSERT(group_line(i, "b", line, sizeof line) == 0);
        ASSERT_EQ(line_num(line, "id="), id);
        ASSERT(chunks_of(i, "a") >= 1 && chunks_of(i, "b") >= 1);
    }
    printf("# nodes %s in both groups\n", a);
}

static void test_uneven_fill(void) {
    int next = 0;
    uint64_t t0 = mono_ms();
    for (int i = 0; i < A_KEYS; i++) {
        key_of(a_keys[i], sizeof a_keys[i], "a", &next);
        int rc = put_retry(a_keys[i], i);
        ASSERT_MSG(rc == MKV_OK, "put %.31s (%d of group a): %d %s", a_keys[i], i, rc, mkv_last_error(mc));
    }
    uint64_t fill_ms = mono_ms() - t0;
    next = 0;
    for (int i = 0; i < B_KEYS; i++) {
        key_of(b_keys[i], sizeof b_keys[i], "b", &next);
        int rc = put_retry(b_keys[i], 1000 + i);
        ASSERT_MSG(rc == MKV_OK, "put %.31s (group b): %d %s", b_keys[i], rc, mkv_last_error(mc));
    }
    int ca = chunks_of(0, "a") + chunks_of(1, "a"), cb = chunks_of(0, "b") + chunks_of(1, "b");
    int total = (int)(2 * SEGMENT / CHUNK);
    /* a holds its data's chunks, far more than an even split would have
     * given it, and b got room too */
    ASSERT_MSG(ca >= (int)((uint64_t)A_KEYS * VAL / CHUNK) && ca > total / 2 + 8, "group a holds %d of %d chunks", ca,
               total);
    ASSERT_MSG(cb >= 2 && ca + cb <= total, "group b holds %d chunks, a %d, of %d", cb, ca, total);
    for (int i = 0; i < A_KEYS; i++) {
        int rc = get_exact(a_keys[i], i);
        ASSERT_MSG(rc == 0, "get %.31s: %d %s", a_keys[i], rc, mkv_last_error(mc));
    }
    for (int i = 0; i < B_KEYS; i++) ASSERT_MSG(get_exact(b_keys[i], 1000 + i) == 0, "get %.31s", b_keys[i]);
    printf("# group a: %d MiB in %llu ms, holds %d of %d chunks; group b holds %d\n", A_KEYS * VAL >> 20,
           (unsigned long long)fill_ms, ca, total, cb);
}

/* ---- a capability of one group on the other's chunks ---- */

typedef struct group_key {
    uint8_t key[TE_CAP_KEY_LEN];
    uint64_t term;
    redisContext *c;   /* the fake node's connection (kept open while the test uses it) */
} group_key;

/* Register a fake node (proving the secret, given no chunk, so nothing is
 * placed on it) with the master on port: its capability key and term. */
static int learn_key(int port, group_key *gk) {
    gk->c = h_redis(port);
    redisReply *r = gk->c ? redisCommand(gk->c, "MOON.CHALLENGE") : NULL;
    if (!r || r->type != REDIS_REPLY_STRING || r->len != PROTO_NONCE_LEN) {
        freeReplyObject(r);
        return -1;
    }
    uint8_t rk[PROTO_REG_KEY_LEN], proof[PROTO_PROOF_LEN];
    char hex[2 * PROTO_PROOF_LEN + 1];
    proto_reg_key(SECRET, rk);
    proto_reg_proof(rk, (const uint8_t *)r->str, proof);
    freeReplyObject(r);
    hex_encode(proof, sizeof proof, hex);
    /* an id far above the ones shared nodes take from etcd (a node of one
     * master that takes the master's next id could meet a shared node's) */
    r = redisCommand(gk->c, "MOON.REGISTER %s %llu 127.0.0.1:1 ID 1000 CHUNKS 1048576:-", hex,
                     (unsigned long long)CHUNK);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 5 && r->element[1]->type == REDIS_REPLY_STRING &&
             hex_decode(r->element[1]->str, r->element[1]->len, gk->key, TE_CAP_KEY_LEN) == 0;
    if (ok) gk->term = (uint64_t)r->element[3]->integer;
    if (!ok) printf("# register on %d: %s\n", port, r && r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* One request to node i's data plane under cap: its status. */
static int dp_request(int i, te_op op, const te_cap *cap, void *buf) {
    te_config tc;
    memset(&tc, 0, sizeof tc);
    snprintf(tc.secret, sizeof tc.secret, "%s", SECRET);
    tc.timeout_ms = 5000;
    char err[256], addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", NODE_PORT + 2 * i + 1);
    te_transport *t = te_tcp_create(&tc, err, sizeof err);
    te_mr *mr = NULL;
    te_path *p = NULL;
    int st = TE_EIO;
    if (t && t->ops->reg_mem(t, buf, cap->length, &mr, err, sizeof err) == 0 &&
        te_connect(t, NULL, addr, &p, err, sizeof err) == 0) {
        te_req rq = {.op = op, .local = buf, .remote_off = cap->offset, .len = cap->length, .cap = cap, .cookie = 9};
        uint64_t end = mono_ms() + 5000;
        te_cqe cqe;
        if (te_submit(t, p, &rq, 1) == 1)
            while (mono_ms() < end)
                if (te_poll(t, &cqe, 1, 100) == 1) {
                    st = cqe.status;
                    break;
                }
    } else {
        printf("# data plane of node %d: %s\n", i, err);
    }
    if (p) t->ops->close(p);
    if (mr) t->ops->dereg_mem(t, mr);
    if (t) t->ops->destroy(t);
    return st;
}

/* A capability for 4 KiB at the start of chunk k of node i, signed with gk. */
static te_cap forge(const group_key *gk, uint32_t node, int k, uint32_t rights) {
    te_cap cap = {.node_id = node, .rights = rights, .offset = (uint64_t)k * CHUNK, .length = 4096,
                  .expiry_ms = wall_ms() + 60000, .term = gk->term, .issued_us = wall_ms() * 1000};
    te_cap_sign(&cap, gk->key);
    return cap;
}

static void test_other_group_refused(void) {
    group_key ka = {0}, kb = {0};
    ASSERT(learn_key(MASTER_A, &ka) == 0 && learn_key(MASTER_B, &kb) == 0);
    ASSERT(ka.term != kb.term);
    uint32_t node = (uint32_t)h_port_info(NODE_PORT, "node", "node_id");
    int ca = first_chunk(0, "a"), cb = first_chunk(0, "b");
    ASSERT_MSG(ca >= 0 && cb >= 0 && ca != cb, "chunks of a %d, of b %d", ca, cb);
    static char buf[4096];
    /* each group's key on its own chunk: served (the forgery is sound) */
    te_cap cap = forge(&ka, node, ca, TE_CAP_READ);
    ASSERT_EQ(dp_request(0, TE_READ, &cap, buf), TE_OK);
    cap = forge(&kb, node, cb, TE_CAP_READ);
    ASSERT_EQ(dp_request(0, TE_READ, &cap, buf), TE_OK);
    /* on the other group's chunk: refused, reads and writes */
    cap = forge(&kb, node, ca, TE_CAP_READ);
    int st = dp_request(0, TE_READ, &cap, buf);
    ASSERT_MSG(st == TE_ERANGE, "b read a's chunk: %d", st);
    cap = forge(&ka, node, cb, TE_CAP_READ | TE_CAP_WRITE);
    memset(buf, 0x5a, sizeof buf);
    st = dp_request(0, TE_WRITE, &cap, buf);
    ASSERT_MSG(st == TE_ERANGE, "a wrote b's chunk: %d", st);
    /* a term no group of the node has: refused */
    group_key kx = ka;
    kx.term = ka.term + kb.term;
    cap = forge(&kx, node, ca, TE_CAP_READ);
    ASSERT_EQ(dp_request(0, TE_READ, &cap, buf), TE_EAUTH);
    redisFree(ka.c);
    redisFree(kb.c);
    /* b's objects, in b's chunks, are intact after a's refused write */
    for (int i = 0; i < B_KEYS; i++) ASSERT_MSG(get_exact(b_keys[i], 1000 + i) == 0, "get %.31s", b_keys[i]);
}

/* Group a's leader killed -9: its standby rebuilds the table from what
 * each node reports of a's chunks (nothing of b's), and both groups read
 * every object back. */
static void test_group_failover(void) {
    uint64_t t0 = mono_ms();
    h_kill(master_a);
    master_a = -1;
    ASSERT(h_wait_role(MASTER_A2, "leader", 35000) == 0);
    port_a = MASTER_A2;
    int first = -1;
    while (first < 0 && mono_ms() - t0 < 60000)
        if (get_exact(a_keys[0], 0) == 0) first = (int)(mono_ms() - t0);
        else usleep(50000);
    ASSERT_MSG(first >= 0, "group a's new leader served no get within 60 s: %s", mkv_last_error(mc));
    for (int i = 0; i < A_KEYS; i++) {
        int rc = get_exact(a_keys[i], i);
        ASSERT_MSG(rc == 0, "get %.31s after the failover: %d %s", a_keys[i], rc, mkv_last_error(mc));
    }
    for (int i = 0; i < B_KEYS; i++) ASSERT_MSG(get_exact(b_keys[i], 1000 + i) == 0, "get %.31s", b_keys[i]);
    printf("# group a's leader killed -9: the standby served its first get %d ms later, all %d objects byte-exact\n",
           first, A_KEYS);
}

static void test_chunks_given_back(void) {
    int before = chunks_of(0, "a") + chunks_of(1, "a");
    a_left = A_KEYS / 4;
    for (int i = a_left; i < A_KEYS; i++)
        ASSERT_MSG(mkv_remove(mc, a_keys[i], strlen(a_keys[i])) == MKV_OK, "remove %.31s", a_keys[i]);
    uint64_t end = mono_ms() + WAIT_MS;
    int now = before;
    while ((now = chunks_of(0, "a") + chunks_of(1, "a")) > before / 2 && mono_ms() < end) usleep(100000);
    ASSERT_MSG(now <= before / 2, "group a still holds %d chunks (had %d)", now, before);
    for (int i = 0; i < a_left; i++) ASSERT_MSG(get_exact(a_keys[i], i) == 0, "get %.31s", a_keys[i]);
    printf("# group a gave back %d of its %d chunks after 3/4 of its objects went\n", before - now, before);
}

static void test_drain_both_groups(void) {
    long long id = h_port_info(NODE_PORT + 2, "node", "node_id");
    kill(node_pid[1], SIGTERM);
    int status;
    ASSERT_MSG(h_wait_exit(node_pid[1], 60000, &status) == 0, "node 1 did not leave within 60 s");
    h_forget(node_pid[1]);
    node_pid[1] = -1;
    ASSERT(wait_alive(id, 0, WAIT_MS) == 0);
    for (int i = 0; i < a_left; i++) ASSERT_MSG(get_exact(a_keys[i], i) == 0, "get %.31s after the drain", a_keys[i]);
    for (int i = 0; i < B_KEYS; i++)
        ASSERT_MSG(get_exact(b_keys[i], 1000 + i) == 0, "get %.31s after the drain", b_keys[i]);
}

static void test_kill9_seen_by_both(void) {
    node_pid[2] = start_node(2);
    ASSERT(node_pid[2] > 0);
    long long id = 0;   /* 0 until it registered */
    for (uint64_t end = mono_ms() + WAIT_MS; id <= 0 && mono_ms() < end; usleep(20000))
        id = h_port_info(NODE_PORT + 4, "node", "node_id");
    ASSERT(id > 0 && wait_alive(id, 1, WAIT_MS) == 0);
    ASSERT(wait_group_id(2, "a", id) == 0);
    ASSERT(wait_group_id(2, "b", id) == 0);
    uint64_t t0 = mono_ms();
    h_kill(node_pid[2]);
    node_pid[2] = -1;
    long long ta = -1, tb = -1;
    while ((ta < 0 || tb < 0) && mono_ms() - t0 < WAIT_MS) {
        if (ta < 0 && !is_alive(MASTER_A, id)) ta = (long long)(mono_ms() - t0);
        if (tb < 0 && !is_alive(MASTER_B, id)) tb = (long long)(mono_ms() - t0);
        usleep(20000);
    }
    ASSERT_MSG(ta >= 0 && tb >= 0, "node %lld still alive: in a %lld, in b %lld", id, ta, tb);
    /* both still place on the node left */
    int next = 5000;
    char key[32];
    key_of(key, sizeof key, "a", &next);
    ASSERT_EQ(put_retry(key, 1), MKV_OK);
    key_of(key, sizeof key, "b", &next);
    ASSERT_EQ(put_retry(key, 2), MKV_OK);
    printf("# a node killed -9: dead in group a after %lld ms, in group b after %lld ms (timeout 3000)\n", ta, tb);
}

/* ---- a slot moved between groups sharing the nodes ---- */

#define MOVE_KEYS 24
#define MOVE_MAX  (MOVE_KEYS + 64)   /* with the puts made during the move */

/* The operator's tool on our etcd: its exit code; what it said into out (may be NULL). */
static int slots_tool(const char *args, char *out, size_t len) { return h_slots_tool(&etcd, CLUSTER, args, out, len); }

/* A slot of group a's objects (placed in a's chunks of both nodes) moved
 * to group b by its metadata while a client puts and gets (a bounded
 * load: puts into the moving slot, gets of its keys, puts, gets and
 * removes of other slots): the move ends (b clears the mark), every
 * acknowledged key of the slot reads back byte-exact from b (its bytes
 * where a put them, served under b's capabilities: the nodes lent b the
 * ranges), and removes on b free b's space. */
static void test_slot_move_served_by_b(void) {
    static char key[MOVE_MAX][32];
    int val[MOVE_MAX], acked = 0, slot = -1, rc;
    char tag[16], args[64], first_err[256] = "";
    /* last: the objects given away stay reserved in a's allocators (docs/SCALE.md, "a's reservation"),
     * so a has less room left for a drain; a second shared node (node 1 left with the drain) */
    if (node_pid[1] < 0) {
        node_pid[1] = start_node(1);
        ASSERT(node_pid[1] > 0);
        long long id = 0;   /* 0 until it registered */
        for (uint64_t end = mono_ms() + WAIT_MS; id <= 0 && mono_ms() < end; usleep(20000))
            id = h_port_info(NODE_PORT + 2, "node", "node_id");
        ASSERT(id > 0 && wait_alive(id, 1, WAIT_MS) == 0);
    }
    for (int t = 0; slot < 0; t++) {   /* a slot of a's that no object of a's left lies in */
        snprintf(tag, sizeof tag, "mv%d", t);
        slot = proto_key_slot(tag, strlen(tag));
        for (int i = 0; i < a_left && slot >= 0; i++)
            if (slot >= 8192 || proto_key_slot(a_keys[i], strlen(a_keys[i])) == slot) slot = -1;
    }
    for (; acked < MOVE_KEYS; acked++) {
        snprintf(key[acked], sizeof key[acked], "{%s}:%d", tag, acked);
        val[acked] = 1000 + acked;
        ASSERT_MSG((rc = put_retry(key[acked], val[acked])) == MKV_OK, "put %.31s: %d %.200s", key[acked], rc,
                   mkv_last_error(mc));
    }
    long long adopted0 = h_port_info(MASTER_B, "cluster", "slots_adopted_objects");
    long long lent0 = a_info("slots_lent_bytes"), away0 = a_info("slots_lent_away_bytes"),
              back0 = a_info("slots_lent_back_bytes"), used_a0 = a_info("bytes_used");
    snprintf(args, sizeof args, "move %d b", slot);
    ASSERT_EQ(slots_tool(args, NULL, 0), 0);
    int tried = 0, served = 0, moved_gets = 0, moved_ok = 0, next = 0;
    uint64_t t0 = mono_ms();
    while (mono_ms() - t0 < 60000 &&
           (mono_ms() - t0 < 3000 || h_port_info(MASTER_B, "cluster", "slots_moving") != 0)) {
        if (acked < MOVE_MAX) {   /* into the moving slot: acknowledged or not */
            snprintf(key[acked], sizeof key[acked], "{%s}:%d", tag, acked);
            val[acked] = 1000 + acked;
            size_t n = fill(src, val[acked]);
            if (mkv_put(mc, key[acked], strlen(key[acked]), src, n, 1) == MKV_OK) acked++;
        }
        moved_gets++;
        moved_ok += get_exact(key[tried % acked], val[tried % acked]) == 0;
        char k[32];   /* a fresh key of another slot, of either group */
        do snprintf(k, sizeof k, "ld-%d", next++);
        while (proto_key_slot(k, strlen(k)) == slot);
        size_t n = 1 + fill(src, tried) % 4096, got = 0;   /* small, and removed */
        tried++;
        int p = put_n_retry(k, n), g = p ? -1 : mkv_get(mc, k, strlen(k), dst, VAL, &got);   /* b's room grows */
        int ok = g == MKV_OK && got == n && memcmp(src, dst, n) == 0 && mkv_remove(mc, k, strlen(k)) == MKV_OK;
        if (!ok && !first_err[0])
            snprintf(first_err, sizeof first_err, "%.31s (slot %d): put %d get %d: %.150s", k,
                     proto_key_slot(k, strlen(k)), p, g, mkv_last_error(mc));
        served += ok;
    }
    ASSERT_MSG(h_port_info(MASTER_B, "cluster", "slots_moving") == 0,
               "the move did not end in 60 s: b adopted %lld, waits for %lld, refused %lld",
               h_port_info(MASTER_B, "cluster", "slots_adopted_objects") - adopted0,
               h_port_info(MASTER_B, "cluster", "slots_adopt_waiting"),
               h_port_info(MASTER_B, "cluster", "slots_adopt_refused"));
    ASSERT_MSG(served == tried, "%d of %d puts, gets and removes of other slots served during the move: %s",
               served, tried, first_err);
    ASSERT(h_port_info(MASTER_B, "cluster", "slots_adopted_objects") - adopted0 >= MOVE_KEYS);
    for (int i = 0; i < acked; i++)
        ASSERT_MSG((rc = get_exact(key[i], val[i])) == 0, "get %.31s from b after the move: %d %.200s", key[i], rc,
                   mkv_last_error(mc));
    /* over TCP too: the node checks b's capability on each request (a
     * same-host client over shm maps the segment) */
    mkv_client *tc = NULL;
    ASSERT_MSG(h_groups_client(&tc, &etcd, CLUSTER, SECRET, "tcp") == MKV_OK, "TCP client: %.200s", mkv_last_error(NULL));
    ASSERT(mkv_register_buffer(tc, dst, VAL) == MKV_OK);
    for (int i = 0; i < acked; i++) {
        size_t got = 0, n = fill(src, val[i]);
        rc = mkv_get(tc, key[i], strlen(key[i]), dst, VAL, &got);
        ASSERT_MSG(rc == MKV_OK && got == n && memcmp(src, dst, n) == 0, "get %.31s from b over TCP: %d %.200s",
                   key[i], rc, mkv_last_error(tc));
    }
    mkv_close(tc);
    uint64_t t_moved = mono_ms() - t0;
    /* a gave the slot's objects away; the nodes lent their ranges to b and
     * told a (MOON.LENT): a holds them as withheld, no longer as used */
    long long moved = a_info("slots_lent_bytes") - lent0, pre = 0;   /* pre: the objects put before used_a0 */
    for (int i = 0; i < MOVE_KEYS; i++) pre += (long long)fill(src, val[i]);
    ASSERT_MSG(moved >= pre, "group a gave %lld bytes away, %lld of them put before the move", moved, pre);
    ASSERT_MSG(wait_a_info("slots_lent_away_bytes", away0 + moved, 1) >= away0 + moved,
               "the nodes told group a of %lld of the %lld bytes lent to b", a_info("slots_lent_away_bytes") - away0,
               moved);
    ASSERT_MSG(wait_a_info("bytes_used", used_a0 - pre, 0) <= used_a0 - pre,
               "group a still uses %lld bytes (%lld before the move, %lld put before it given away)",
               a_info("bytes_used"), used_a0, pre);
    char a[200], want[64];
    redisContext *c = h_redis(MASTER_A);
    redisReply *r = c ? redisCommand(c, "MOON.EXISTS %s", key[0]) : NULL;
    snprintf(a, sizeof a, "%s", r && r->type == REDIS_REPLY_ERROR ? r->str : "?");
    freeReplyObject(r);
    if (c) redisFree(c);
    snprintf(want, sizeof want, "MOVED %d b", slot);
    ASSERT_MSG(strcmp(a, want) == 0, "group a answered EXISTS %.31s: %.100s", key[0], a);
    /* removed on b: b's space is free again (the lease of a's readers passed),
     * and the nodes give the ranges back to a: a's free room grows by them
     * (counting the chunks a took or gave back meanwhile) */
    long long used0 = h_port_info(MASTER_B, "cluster", "bytes_used"), gone = 0;
    long long free_a0 = a_info("bytes_total") - a_info("bytes_used"), chunks_a0 = chunks_of(0, "a") + chunks_of(1, "a");
    for (int i = 0; i < acked; i++) {
        ASSERT_MSG(mkv_remove(mc, key[i], strlen(key[i])) == MKV_OK, "remove %.31s on b", key[i]);
        gone += (long long)fill(src, val[i]);
    }
    uint64_t end = mono_ms() + WAIT_MS;
    long long used = used0;
    while ((used = h_port_info(MASTER_B, "cluster", "bytes_used")) > used0 - gone && mono_ms() < end) usleep(100000);
    ASSERT_MSG(used <= used0 - gone, "group b uses %lld bytes after removing %lld of %lld (%d objects; b has %lld objects, "
               "adopted %lld, a gave %lld bytes)", used, gone, used0, acked, h_port_info(MASTER_B, "cluster", "objects_complete"),
               h_port_info(MASTER_B, "cluster", "slots_adopted_objects") - adopted0, a_info("slots_lent_bytes") - lent0);
    ASSERT_MSG(wait_a_info("slots_lent_back_bytes", back0 + moved, 1) >= back0 + moved,
               "group a got %lld of the %lld bytes back", a_info("slots_lent_back_bytes") - back0, moved);
    ASSERT_EQ(a_info("slots_lent_away_bytes"), away0);
    long long free_a, grown;   /* free a lease time after they came back (b's readers may still read them) */
    for (uint64_t until = mono_ms() + WAIT_MS;; usleep(100000)) {
        free_a = a_info("bytes_total") - a_info("bytes_used");
        grown = (long long)(chunks_of(0, "a") + chunks_of(1, "a") - chunks_a0) * (long long)CHUNK;
        if (free_a - grown >= free_a0 + moved || mono_ms() >= until) break;
    }
    ASSERT_MSG(free_a - grown >= free_a0 + moved, "group a's free bytes: %lld before b's removes, %lld after (%lld "
               "bytes of chunks taken since), %lld given back", free_a0, free_a, grown, moved);
    printf("# slot %d moved to group b with %d objects (%d acknowledged in all, %d during the move), read back in %llu ms; "
           "%d of %d gets of its keys during the move byte-exact, %d other puts/gets/removes; all read from b "
           "byte-exact; removed on b: %lld bytes freed\n",
           slot, MOVE_KEYS, acked, acked - MOVE_KEYS, (unsigned long long)t_moved, moved_ok, moved_gets,
           tried, used0 - used);
    printf("# group a: %lld bytes given away, withheld as lent once the move settled (used %lld -> %lld), "
           "free %lld -> %lld once b removed them\n", moved, used_a0, a_info("bytes_used"), free_a0, free_a - grown);
}

/* ---- a move undone; a move whose leaders are killed -9 ---- */

#define MOVE2_KEYS 16

/* A slot of group a's no object so far lies in, tagged prefix<t>: the tag. */
static int fresh_slot(const char *prefix, char *tag, size_t len) {
    int slot = -1;
    for (int t = 0; slot < 0; t++) {
        snprintf(tag, len, "%s%d", prefix, t);
        slot = proto_key_slot(tag, strlen(tag));
        for (int i = 0; i < a_left && slot >= 0; i++)
            if (slot >= 8192 || proto_key_slot(a_keys[i], strlen(a_keys[i])) == slot) slot = -1;
    }
    return slot;
}

/* A get of key byte-exact through c, retried up to WAIT_MS (a leader
 * elected, a range lent a moment after its adoption): 0, or the last error. */
static int get_retry(mkv_client *c, const char *key, int val) {
    uint64_t end = mono_ms() + WAIT_MS;
    int rc;
    do {
        size_t got = 0, n = fill(src, val);
        rc = mkv_get(c, key, strlen(key), dst, VAL, &got);
        if (rc == MKV_OK && got == n && memcmp(src, dst, n) == 0) return 0;
        if (rc == MKV_OK) rc = -100;
        usleep(50000);
    } while (mono_ms() < end);
    return rc;
}

/* What the master on port answers MOON.EXISTS key: "1", "0" or the error. */
static void exists_on(int port, const char *key, char *out, size_t len) {
    redisContext *c = h_redis(port);
    redisReply *r = c ? redisCommand(c, "MOON.EXISTS %s", key) : NULL;
    snprintf(out, len, "%s", !r ? "?" : r->type == REDIS_REPLY_INTEGER ? (r->integer ? "1" : "0") : r->str ? r->str : "?");
    freeReplyObject(r);
    if (c) redisFree(c);
}

/* Every key read back byte-exact from group owner only: through the
 * client (shm) and over TCP (the node checks owner's capability on each
 * request), owner's leader has it and the other's answers MOVED. */
static void exactly_one_group(char (*key)[32], const int *val, int n, int slot, const char *owner) {
    int own = owner[0] == 'a' ? MASTER_A : MASTER_B, other = owner[0] == 'a' ? MASTER_B : MASTER_A;
    char want[32], got[200];
    snprintf(want, sizeof want, "MOVED %d %s", slot, owner);
    mkv_client *tc = NULL;
    ASSERT_MSG(h_groups_client(&tc, &etcd, CLUSTER, SECRET, "tcp") == MKV_OK, "TCP client: %.200s", mkv_last_error(NULL));
    ASSERT(mkv_register_buffer(tc, dst, VAL) == MKV_OK);
    for (int i = 0; i < n; i++) {
        int rc = get_retry(mc, key[i], val[i]);
        ASSERT_MSG(rc == 0, "get %.31s from %s: %d %.200s", key[i], owner, rc, mkv_last_error(mc));
        rc = get_retry(tc, key[i], val[i]);
        ASSERT_MSG(rc == 0, "get %.31s from %s over TCP: %d %.200s", key[i], owner, rc, mkv_last_error(tc));
        exists_on(own, key[i], got, sizeof got);
        ASSERT_MSG(strcmp(got, "1") == 0, "group %s answered EXISTS %.31s: %.100s", owner, key[i], got);
        exists_on(other, key[i], got, sizeof got);
        ASSERT_MSG(strcmp(got, want) == 0, "the other group answered EXISTS %.31s: %.100s", key[i], got);
    }
    mkv_close(tc);
}

/* Until neither group's leader has a slot moving: 0, or -1 after ms. */
static int wait_settled(int ms) {
    uint64_t end = mono_ms() + (uint64_t)ms;
    while (h_port_info(MASTER_A, "cluster", "slots_moving") != 0 || h_port_info(MASTER_B, "cluster", "slots_moving") != 0)
        if (mono_ms() >= end) return -1;
        else usleep(100000);
    return 0;
}

static void put_slot(const char *tag, char (*key)[32], int *val, int n, int base) {
    for (int i = 0; i < n; i++) {
        snprintf(key[i], sizeof key[i], "{%s}:%d", tag, i);
        val[i] = base + i;
        int rc = put_retry(key[i], val[i]);
        ASSERT_MSG(rc == MKV_OK, "put %.31s: %d %.200s", key[i], rc, mkv_last_error(mc));
    }
}

/* Undoing a move (a move back once the move ended: while it is marked the
 * tool refuses, test_groups test_slot_move_waits_for_shared_nodes): the
 * objects come back to group a where they lie: a claims its ranges lent
 * to b again, the nodes give them back to a, and b's hold of them goes
 * (its used bytes back to where they were). */
static void test_move_undone(void) {
    char tag[16], key[MOVE2_KEYS][32], args[64];
    int val[MOVE2_KEYS], slot = fresh_slot("un", tag, sizeof tag);
    ASSERT_STEP(put_slot(tag, key, val, MOVE2_KEYS, 3000));
    long long away0 = a_info("slots_lent_away_bytes"), used_a0 = a_info("bytes_used"),
              used_b0 = h_port_info(MASTER_B, "cluster", "bytes_used"), moved = 0;
    for (int i = 0; i < MOVE2_KEYS; i++) moved += (long long)fill(src, val[i]);
    snprintf(args, sizeof args, "move %d b", slot);
    ASSERT_EQ(slots_tool(args, NULL, 0), 0);
    ASSERT_MSG(wait_settled(60000) == 0, "the move to b did not end in 60 s");
    ASSERT_STEP(exactly_one_group(key, val, MOVE2_KEYS, slot, "b"));
    ASSERT_MSG(wait_a_info("slots_lent_away_bytes", away0 + moved, 1) >= away0 + moved,
               "the nodes told a of %lld of %lld bytes lent", a_info("slots_lent_away_bytes") - away0, moved);
    long long used_b1 = h_port_info(MASTER_B, "cluster", "bytes_used");
    snprintf(args, sizeof args, "move %d a", slot);
    uint64_t t0 = mono_ms();
    ASSERT_EQ(slots_tool(args, NULL, 0), 0);
    ASSERT_MSG(wait_settled(60000) == 0, "the move back to a did not end in 60 s");
    uint64_t t_back = mono_ms() - t0;
    ASSERT_STEP(exactly_one_group(key, val, MOVE2_KEYS, slot, "a"));
    ASSERT_MSG(wait_a_info("slots_lent_away_bytes", away0, 0) <= away0, "a still holds %lld bytes as lent away",
               a_info("slots_lent_away_bytes") - away0);
    ASSERT_EQ(a_info("bytes_used"), used_a0);
    long long used_b = h_port_info(MASTER_B, "cluster", "bytes_used");
    ASSERT_MSG(used_b <= used_b0, "group b uses %lld bytes, %lld before", used_b, used_b0);
    for (int i = 0; i < MOVE2_KEYS; i++) ASSERT_EQ(mkv_remove(mc, key[i], strlen(key[i])), MKV_OK);
    printf("# slot %d moved to b (b's used bytes %lld -> %lld) and back to a with %d objects (%lld bytes) in %llu ms; "
           "all read byte-exact from a only, a's used bytes as before (%lld), b's %lld\n",
           slot, used_b0, used_b1, MOVE2_KEYS, moved, (unsigned long long)t_back, used_a0, used_b);
}

/* Kill -9 of group g's leader on port (its pid from INFO): after it, the
 * standby on other leads (up to 40 s). */
static int kill_leader(int port, int other) {
    pid_t pid = (pid_t)h_port_info(port, "server", "process_id");
    if (pid <= 0) return -1;
    h_kill(pid);
    return h_wait_role(other, "leader", 40000);
}

/* A move interrupted by kill -9 of the giver's leader (right after the
 * tool marked the slot: its outbox is lost, a new leader rebuilds from the
 * nodes' reports and gives again) and of the adopter's leader (once it
 * adopted: its new leader rebuilds from what the nodes report of b's
 * chunks and ranges lent to b, and pulls what is left). Nothing
 * acknowledged is lost, every key reads back byte-exact from b and b
 * only, the move ends, and new puts into the slot land on b. */
static void test_move_leaders_killed(void) {
    char tag[16], key[MOVE2_KEYS + 4][32];
    int val[MOVE2_KEYS + 4], slot = fresh_slot("kl", tag, sizeof tag);
    int standby_a = port_a == MASTER_A1 ? MASTER_A2 : MASTER_A1;
    ASSERT(start_master(standby_a, "a", "0-8191") > 0 && h_wait_role(standby_a, "standby", WAIT_MS) == 0);
    ASSERT(start_master(MASTER_B2, "b", "8192-16383") > 0 && h_wait_role(MASTER_B2, "standby", WAIT_MS) == 0);
    ASSERT_STEP(put_slot(tag, key, val, MOVE2_KEYS, 4000));
    long long adopted0 = h_port_info(MASTER_B, "cluster", "slots_adopted_objects");
    char args[64];
    snprintf(args, sizeof args, "move %d b", slot);
    ASSERT_EQ(slots_tool(args, NULL, 0), 0);
    uint64_t t0 = mono_ms();
    ASSERT_MSG(kill_leader(MASTER_A, standby_a) == 0, "group a's standby did not lead within 40 s");
    port_a = standby_a;
    uint64_t ta = mono_ms() - t0;
    /* b adopts from a's new leader; its leader killed once it adopted some */
    long long adopted = -1;
    uint64_t end = mono_ms() + 60000;
    while ((adopted = h_port_info(MASTER_B, "cluster", "slots_adopted_objects")) <= adopted0 && mono_ms() < end)
        usleep(2000);   /* adopted, acknowledged and settled are milliseconds apart */
    ASSERT_MSG(adopted > adopted0, "group b adopted nothing within 60 s of a's failover");
    int settled_before = h_port_info(MASTER_B, "cluster", "slots_moving") == 0;
    ASSERT_MSG(kill_leader(MASTER_B, MASTER_B2) == 0, "group b's standby did not lead within 40 s");
    port_b = MASTER_B2;
    uint64_t tb = mono_ms() - t0;
    ASSERT_MSG(wait_settled(90000) == 0, "the move did not end within 90 s of b's failover (b adopted %lld, waits %lld)",
               h_port_info(MASTER_B, "cluster", "slots_adopted_objects"),
               h_port_info(MASTER_B, "cluster", "slots_adopt_waiting"));
    uint64_t tend = mono_ms() - t0;
    ASSERT_STEP(exactly_one_group(key, val, MOVE2_KEYS, slot, "b"));
    for (int i = MOVE2_KEYS; i < MOVE2_KEYS + 4; i++) {   /* the slot is b's: new keys land there */
        snprintf(key[i], sizeof key[i], "{%s}:%d", tag, i);
        val[i] = 4000 + i;
        int rc = put_retry(key[i], val[i]);
        ASSERT_MSG(rc == MKV_OK, "put %.31s after the move: %d %.200s", key[i], rc, mkv_last_error(mc));
    }
    ASSERT_STEP(exactly_one_group(key + MOVE2_KEYS, val + MOVE2_KEYS, 4, slot, "b"));
    printf("# slot %d (%d objects) moved to b: a's leader killed -9 at once (standby led after %llu ms), b's once it "
           "adopted %lld (at %llu ms, the move %s); the move ended %llu ms after the tool, every key byte-exact "
           "from b only\n", slot, MOVE2_KEYS, (unsigned long long)ta, adopted - adopted0, (unsigned long long)tb,
           settled_before ? "had ended" : "not ended yet", (unsigned long long)tend);
}

/* ---- setup ---- */

static int setup(void) {
    char step[160] = "";
    port_a = MASTER_A1;
    port_b = MASTER_B1;
    if ((master_a = start_master(MASTER_A1, "a", "0-8191")) < 0 || h_wait_role(MASTER_A1, "leader", WAIT_MS) != 0)
        snprintf(step, sizeof step, "master of group a on %d", MASTER_A1);
    else if (start_master(MASTER_A2, "a", "0-8191") < 0)
        snprintf(step, sizeof step, "standby of group a on %d", MASTER_A2);
    else if (start_master(MASTER_B1, "b", "8192-16383") < 0 || h_wait_role(MASTER_B1, "leader", WAIT_MS) != 0)
        snprintf(step, sizeof step, "master of group b on %d", MASTER_B);
    for (int i = 0; i < 2 && !step[0]; i++)
        if ((node_pid[i] = start_node(i)) < 0) snprintf(step, sizeof step, "node %d on %d", i, NODE_PORT + 2 * i);
    if (!step[0] && (h_wait_nodes(MASTER_A, "alive", 2, WAIT_MS) != 0 || h_wait_nodes(MASTER_B, "alive", 2, WAIT_MS) != 0))
        snprintf(step, sizeof step, "both nodes alive in both groups");
    uint64_t end = mono_ms() + WAIT_MS;
    while (!step[0] && (h_port_info(MASTER_A, "cluster", "slots_owned") != 8192 ||
                        h_port_info(MASTER_B, "cluster", "slots_owned") != 8192))
        if (mono_ms() >= end) snprintf(step, sizeof step, "each master owns its 8192 slots");
        else usleep(50000);
    if (!step[0] && h_groups_client(&mc, &etcd, CLUSTER, SECRET, NULL) != MKV_OK)
        snprintf(step, sizeof step, "client over groups: %.100s", mkv_last_error(NULL));
    src = malloc(VAL);
    dst = malloc(VAL);
    if (!step[0] && (mkv_register_buffer(mc, src, VAL) != MKV_OK || mkv_register_buffer(mc, dst, VAL) != MKV_OK))
        snprintf(step, sizeof step, "register buffers: %.100s", mkv_last_error(mc));
    if (!step[0]) return 0;
    printf("not ok - groups_shared/setup: %s\n", step);
    return -1;
}

int main(void) {
    int begun = h_groups_begin("test_groups_shared", TIME_LIMIT_S, remove_datadir, 6 + 2 * NODES, &port0, &etcd,
                               ETCD_PORT - port0);
    if (begun != 0) return begun > 0 ? 0 : 1;
    if (setup() != 0) {
        h_stop_all();
        return 1;
    }
    RUN_TEST(test_one_id_in_both_groups);
    RUN_TEST(test_uneven_fill);
    RUN_TEST(test_group_failover);
    RUN_TEST(test_other_group_refused);
    RUN_TEST(test_chunks_given_back);
    RUN_TEST(test_drain_both_groups);
    RUN_TEST(test_kill9_seen_by_both);
    RUN_TEST(test_slot_move_served_by_b);
    RUN_TEST(test_move_undone);
    RUN_TEST(test_move_leaders_killed);
    mkv_close(mc);
    free(src);
    free(dst);
    h_stop_all();
    TEST_EXIT();
}
