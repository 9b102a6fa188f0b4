/* Integration test of the memory node role: a real master and real
 * `moonkv-server --role node` processes; the master's view (MOON.NODES,
 * MOON.TOPOLOGY) is checked with hiredis and the node's data port is
 * driven with the backend's TCP transport. Each test takes a block of
 * h_free_ports: its master on the first port, its nodes on the next ones
 * (RESP, then data plane). */
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cap.h"
#include "backend/shm_transport.h"
#include "backend/tcp_transport.h"
#include "cluster_harness.h"
#include "core/crc32c.h"
#include "core/util.h"
#include "test.h"

#define SECRET          "node-it-secret"
#define NODE_TIMEOUT_MS 1500
#define ADDR_LEN        32

/* A test's first port (its master's); the next few are its nodes'. */
static int test_ports(void) { return h_free_ports(8); }

/* "127.0.0.1:port" in buf (ADDR_LEN bytes): a node's data address. */
static const char *addr_at(char *buf, int port) {
    snprintf(buf, ADDR_LEN, "127.0.0.1:%d", port);
    return buf;
}

/* ---- processes ---- */

static pid_t start_master(int port) {
    static const char *const extra[] = {
        "--cluster-secret", SECRET, "--heartbeat-ms", "100", "--node-timeout-ms", "1500",
        "--put-timeout-ms", "5000", "--lease-ms", "2000", NULL};
    return h_start_master(port, extra);
}

/* The arguments of a node of master_port on port with segment; data
 * addresses, secret and transport only when not NULL (a node without a
 * secret or on rdma is one that must fail). */
static void node_args(h_args *a, int master_port, int port, const char *segment, const char *data_addrs,
                      const char *secret, const char *transport) {
    h_arg(a, h_server_bin());
    h_arg(a, "--role");
    h_arg(a, "node");
    h_argf(a, "--master=127.0.0.1:%d", master_port);
    h_argf(a, "--port=%d", port);
    h_arg(a, "--segment-size");
    h_arg(a, segment);
    if (data_addrs) {
        h_arg(a, "--data-addrs");
        h_arg(a, data_addrs);
    }
    if (secret) {
        h_arg(a, "--cluster-secret");
        h_arg(a, secret);
    }
    if (transport) {
        h_arg(a, "--transport");
        h_arg(a, transport);
    }
    h_arg(a, "--log-level");
    h_arg(a, "warning");
}

/* A node with its RESP port, data addresses "a,b", segment size and
 * transport (NULL: the default, auto). */
static pid_t start_node_ex(int master_port, int port, const char *data_addrs, const char *segment,
                           const char *transport) {
    h_args a = {0};
    node_args(&a, master_port, port, segment, data_addrs, SECRET, transport);
    return h_ready(h_spawn(a.v), "127.0.0.1", port, NULL, 20000);
}

static pid_t start_node(int master_port, int port, const char *data_addrs, const char *segment) {
    return start_node_ex(master_port, port, data_addrs, segment, NULL);
}

static int node_info_wait_int(int port, const char *field, int want, int timeout_ms);

/* The start of most cases: a master on mp and one node (RESP on mp + 1,
 * data on data_addr), until the master lists the node alive and the node
 * has handled its registration; then a connection to the master into *c
 * unless c is NULL. The master lists the node alive before the node has
 * its identity, and the node restarts its data servers on it: a data
 * connection made in between is reset (queued on the old listener) or
 * refused, so the cases wait for the restart first. */
static void start_master_and_node(int mp, const char *data_addr, const char *transport, pid_t *m, pid_t *n,
                                  redisContext **c) {
    *m = start_master(mp);
    ASSERT(*m > 0);
    *n = start_node_ex(mp, mp + 1, data_addr, "4MB", transport);
    ASSERT(*n > 0);
    ASSERT_EQ(h_wait_nodes(mp, "alive", 1, 5000), 0);
    ASSERT_EQ(node_info_wait_int(mp + 1, "registrations", 1, 20000), 1);
    if (c) {
        *c = h_proven(h_redis(mp), SECRET);
        ASSERT(*c);
    }
}

/* Until the child exits (its exit status) or timeout (-1, still running). */
static int wait_exit(pid_t pid, int timeout_ms) {
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    while (mono_ms() < end) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            h_forget(pid);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(10 * 1000);
    }
    return -1;
}

/* ---- the master's view ---- */

/* Node id's line of MOON.NODES into line; 0 if found. */
static int nodes_line(redisContext *m, uint32_t id, char *line, size_t len) {
    redisReply *r = redisCommand(m, "MOON.NODES");
    int rc = -1;
    if (r && r->type == REDIS_REPLY_STRING) {
        for (char *s = r->str; s && *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL) {
            if ((uint32_t)strtoul(s, NULL, 10) != id) continue;
            size_t n = strcspn(s, "\n");
            snprintf(line, len, "%.*s", (int)n, s);
            rc = 0;
            break;
        }
    }
    if (r) freeReplyObject(r);
    return rc;
}

/* State of node id in MOON.TOPOLOGY ("" if unknown) and its addresses. */
static void node_state(redisContext *m, uint32_t id, char *state, size_t slen, char addrs[][64],
                       int *naddrs) {
    state[0] = 0;
    if (naddrs) *naddrs = 0;
    redisReply *r = redisCommand(m, "MOON.TOPOLOGY");
    if (!r || r->type != REDIS_REPLY_ARRAY || id == 0 || id > r->elements) goto out;
    redisReply *e = r->element[id - 1];
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 3) goto out;
    snprintf(state, slen, "%s", e->element[1]->str);
    for (size_t i = 0; naddrs && i < e->element[2]->elements && i < 8; i++)
        snprintf(addrs[(*naddrs)++], 64, "%s", e->element[2]->element[i]->str);
out:
    if (r) freeReplyObject(r);
}

/* Until node id is in state; ms it took, or -1 after timeout_ms. */
static long wait_state(redisContext *m, uint32_t id, const char *want, int timeout_ms) {
    uint64_t t0 = mono_ms(), end = t0 + (uint64_t)timeout_ms;
    char st[16];
    do {
        node_state(m, id, st, sizeof st, NULL, NULL);
        if (strcmp(st, want) == 0) return (long)(mono_ms() - t0);
        usleep(20 * 1000);
    } while (mono_ms() < end);
    return -1;
}

/* A field of the node's INFO, or "" */
static void node_info_field(int port, const char *field, char *out, size_t len) {
    out[0] = 0;
    redisContext *c = h_redis(port);
    if (!c) return;
    redisReply *r = redisCommand(c, "INFO node");
    if (r && r->type == REDIS_REPLY_STRING) {
        char key[64];
        snprintf(key, sizeof key, "\n%s:", field);
        const char *p = strstr(r->str, key);
        if (p) snprintf(out, len, "%.*s", (int)strcspn(p + strlen(key), "\r\n"), p + strlen(key));
    }
    if (r) freeReplyObject(r);
    redisFree(c);
}

/* The node counts a registration after the master's reply has been handled
 * on its control thread, a moment after the master lists it alive: wait for
 * the field to reach want (up to timeout_ms) instead of reading it once. */
static int node_info_wait_int(int port, const char *field, int want, int timeout_ms) {
    char v[64];
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    for (;;) {
        node_info_field(port, field, v, sizeof v);
        if (atoi(v) == want || mono_ms() >= end) return atoi(v);
        usleep(20 * 1000);
    }
}

/* ---- the data plane ---- */

typedef struct dp {
    te_transport *t;
    te_path *p;
    te_mr *mr;
} dp;

/* A path to addr over TCP, or shm for "unix:" addresses. */
static int dp_open(dp *d, const char *secret, const char *addr, void *buf, size_t len, char *err,
                   size_t errlen) {
    te_config tc;
    memset(&tc, 0, sizeof tc);
    snprintf(tc.secret, sizeof tc.secret, "%s", secret);
    tc.timeout_ms = 3000;
    memset(d, 0, sizeof *d);
    d->t = strncmp(addr, "unix:", 5) == 0 ? te_shm_create(&tc, err, errlen) : te_tcp_create(&tc, err, errlen);
    if (!d->t) return -1;
    if (d->t->ops->reg_mem(d->t, buf, len, &d->mr, err, errlen) != 0) return -1;
    /* The node restarts its data servers under the id the master gave it
     * (start_master_and_node waits for that); a refused connect is retried. */
    uint64_t until = mono_ms() + 3000;
    int rc;
    while ((rc = te_connect(d->t, NULL, addr, &d->p, err, errlen)) != 0 &&
           strstr(err, "refused") && mono_ms() < until)
        usleep(20 * 1000);
    return rc;
}

static void dp_close(dp *d) {
    if (!d->t) return;
    if (d->p) d->t->ops->close(d->p);
    if (d->mr) d->t->ops->dereg_mem(d->t, d->mr);
    d->t->ops->destroy(d->t);
    memset(d, 0, sizeof *d);
}

/* One request to completion: its status. */
static int dp_io(dp *d, te_op op, void *local, uint64_t off, uint64_t len, const te_cap *cap) {
    te_req rq = {.op = op, .local = local, .remote_off = off, .len = len, .cap = cap, .cookie = 7};
    if (te_submit(d->t, d->p, &rq, 1) != 1) return TE_EIO;
    uint64_t end = mono_ms() + 5000;
    while (mono_ms() < end) {
        te_cqe cqe;
        if (te_poll(d->t, &cqe, 1, 100) == 1) return cqe.cookie == 7 ? cqe.status : TE_EINVAL;
    }
    return TE_ETIMEDOUT;
}

/* The first extent of the first replica of a placement reply. */
static int first_extent(const redisReply *r, uint32_t *node, uint64_t *off, uint64_t *len, te_cap *cap) {
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1) return -1;
    const redisReply *rep = r->element[0];
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 1) return -1;
    const redisReply *e = rep->element[0];
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 4) return -1;
    *node = (uint32_t)e->element[0]->integer;
    *off = (uint64_t)e->element[1]->integer;
    *len = (uint64_t)e->element[2]->integer;
    return te_cap_decode(cap, (const uint8_t *)e->element[3]->str, e->element[3]->len);
}

/* MOON.PUTSTART key of len bytes: the first extent granted; 0 if one was. */
static int put_start(redisContext *c, const char *key, int len, uint32_t *node, uint64_t *off,
                     uint64_t *elen, te_cap *cap) {
    redisReply *r = redisCommand(c, "MOON.PUTSTART %s %d", key, len);
    int rc = first_extent(r, node, off, elen, cap);
    if (r) freeReplyObject(r);
    return rc;
}

/* MOON.PUTEND key with the crc of its bytes: 1 if the master took it. */
static int put_end(redisContext *c, const char *key, uint32_t crc) {
    redisReply *r = redisCommand(c, "MOON.PUTEND %s %u", key, crc);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok;
}

/* MOON.GET key: the first extent of its first replica; 0 if it has one. */
static int get_extent(redisContext *c, const char *key, uint32_t *node, uint64_t *off, uint64_t *len,
                      te_cap *cap) {
    redisReply *r = redisCommand(c, "MOON.GET %s", key);
    int rc = r && r->type == REDIS_REPLY_ARRAY && r->elements == 3 ? first_extent(r->element[2], node, off, len, cap)
                                                                   : -1;
    if (r) freeReplyObject(r);
    return rc;
}

/* One request of len bytes of buf at off, on a path to addr opened for it
 * (with our secret): its status into *st. */
static void dp_once(const char *addr, te_op op, void *buf, uint64_t off, uint64_t len, const te_cap *cap, int *st) {
    char err[256];
    dp d;
    ASSERT_MSG(dp_open(&d, SECRET, addr, buf, len, err, sizeof err) == 0, "%s", err);
    *st = dp_io(&d, op, buf, off, len, cap);
    dp_close(&d);
}

/* ---- tests ---- */

/* Two nodes register with their segment sizes and data addresses; the
 * node's INFO reports what the master knows. */
static void test_register(void) {
    int mp = test_ports();
    pid_t m = start_master(mp);
    ASSERT(m > 0);
    char da[ADDR_LEN], db[ADDR_LEN], da2[ADDR_LEN], both[2 * ADDR_LEN], want[96];
    snprintf(da2, sizeof da2, "127.0.0.2:%d", mp + 2);
    snprintf(both, sizeof both, "%s,%s", addr_at(da, mp + 2), da2);
    pid_t a = start_node(mp, mp + 1, both, "16MB");
    pid_t b = start_node(mp, mp + 3, addr_at(db, mp + 4), "8MB");
    ASSERT(a > 0 && b > 0);
    ASSERT_EQ(h_wait_nodes(mp, "alive", 2, 5000), 0);
    redisContext *c = h_proven(h_redis(mp), SECRET);
    ASSERT(c);
    char la[160] = "", lb[160] = "";
    ASSERT(nodes_line(c, 1, la, sizeof la) == 0 && nodes_line(c, 2, lb, sizeof lb) == 0);
    /* Registration order is not fixed: find each by its address. */
    const char *na = strstr(la, da) ? la : lb, *nb = na == la ? lb : la;
    snprintf(want, sizeof want, " %s alive 16777216 ", da);
    ASSERT_MSG(strstr(na, want) != NULL, "line: %s", na);
    snprintf(want, sizeof want, " %s alive 8388608 ", db);
    ASSERT_MSG(strstr(nb, want) != NULL, "line: %s", nb);

    uint32_t ida = na == la ? 1 : 2;
    char st[16], addrs[8][64];
    int naddrs;
    node_state(c, ida, st, sizeof st, addrs, &naddrs);
    ASSERT(naddrs >= 2);
    ASSERT_STREQ(addrs[0], da);
    ASSERT_STREQ(addrs[1], da2);
    redisFree(c);

    char v[64];
    /* The master lists the node alive before the node has handled its reply. */
    ASSERT_EQ(node_info_wait_int(mp + 1, "node_id", (int)ida, 3000), (int)ida);
    node_info_field(mp + 1, "state", v, sizeof v);
    ASSERT_STREQ(v, "member");
    node_info_field(mp + 1, "master_segment_size", v, sizeof v);
    uint64_t end = mono_ms() + 3000;   /* refreshed once a second */
    while (strcmp(v, "16777216") != 0 && mono_ms() < end) {
        usleep(100 * 1000);
        node_info_field(mp + 1, "master_segment_size", v, sizeof v);
    }
    ASSERT_STREQ(v, "16777216");
    h_kill(a);
    h_kill(b);
    h_kill(m);
}

/* A node with a wrong cluster secret is refused by the master. */
static void test_wrong_secret_not_registered(void) {
    int mp = test_ports();
    pid_t m = start_master(mp);
    ASSERT(m > 0);
    h_args a = {0};
    node_args(&a, mp, mp + 1, "4MB", NULL, "not-the-secret", NULL);
    pid_t n = h_spawn(a.v);
    ASSERT(n > 0);
    ASSERT_EQ(h_wait_ping("127.0.0.1", mp + 1, n, 20000), 0);
    usleep(500 * 1000);
    redisContext *c = h_proven(h_redis(mp), SECRET);
    ASSERT(c);
    ASSERT_EQ(h_count_nodes(c, "alive"), 0);
    redisFree(c);
    char v[64];
    node_info_field(mp + 1, "state", v, sizeof v);
    ASSERT_STREQ(v, "joining");
    h_kill(n);
    h_kill(m);
}

/* kill -9: dead within the node timeout (plus one sweep period). */
static void test_kill9_declared_dead(void) {
    int mp = test_ports();
    char d[ADDR_LEN];
    pid_t m, n;
    redisContext *c;
    ASSERT_STEP(start_master_and_node(mp, addr_at(d, mp + 2), "tcp", &m, &n, &c));
    /* --transport tcp: no shm export, so no unix: address. */
    char st[16], addrs[8][64];
    int naddrs;
    node_state(c, 1, st, sizeof st, addrs, &naddrs);
    ASSERT_EQ(naddrs, 1);
    ASSERT_STREQ(addrs[0], d);
    h_kill(n);
    long ms = wait_state(c, 1, "dead", NODE_TIMEOUT_MS + 1500);
    redisFree(c);
    ASSERT_MSG(ms >= 0, "not dead within %d ms", NODE_TIMEOUT_MS + 1500);
    ASSERT_MSG(ms >= NODE_TIMEOUT_MS / 2, "dead after %ld ms: too early for a timeout", ms);
    h_kill(m);
}

/* The data port: wrong secret refused; forged and out-of-range caps
 * refused; a write with a MOON.PUTSTART cap then a read are byte-exact. */
static void test_data_plane_caps(void) {
    int mp = test_ports();
    char daddr[ADDR_LEN];
    pid_t m, n;
    redisContext *c;
    ASSERT_STEP(start_master_and_node(mp, addr_at(daddr, mp + 2), NULL, &m, &n, &c));
    enum { SZ = 8192 };
    static char buf[2 * SZ];
    char *out = buf, *in = buf + SZ;
    h_fill(out, SZ, 42);

    uint32_t node;
    uint64_t off, len;
    te_cap cap;
    ASSERT(put_start(c, "caps-key", SZ, &node, &off, &len, &cap) == 0);
    ASSERT_EQ(node, 1);
    ASSERT_EQ(len, SZ);

    char err[256];
    dp d;
    /* Wrong secret: the connection is refused before any request. */
    int rc = dp_open(&d, "wrong-secret", daddr, buf, sizeof buf, err, sizeof err);
    dp_close(&d);
    ASSERT_MSG(rc != 0, "connected with a wrong secret");

    ASSERT_MSG(dp_open(&d, SECRET, daddr, buf, sizeof buf, err, sizeof err) == 0, "%s", err);
    /* Signed with a key that is not the master's. */
    te_cap forged = cap;
    uint8_t bad_key[TE_CAP_KEY_LEN] = {1, 2, 3};
    te_cap_sign(&forged, bad_key);
    int st_forged = dp_io(&d, TE_WRITE, out, off, SZ, &forged);
    /* Outside the granted range (genuine cap). */
    int st_range = dp_io(&d, TE_WRITE, out, off + SZ, 64, &cap);
    /* Widened by the holder: the MAC no longer matches. */
    te_cap wide = cap;
    wide.length = 4u << 20;
    int st_wide = dp_io(&d, TE_READ, in, 0, 4096, &wide);
    int st_write = dp_io(&d, TE_WRITE, out, off, SZ, &cap);
    memset(in, 0, SZ);
    int st_read_w = dp_io(&d, TE_READ, in, off, SZ, &cap);   /* write cap does not read */
    dp_close(&d);
    ASSERT_EQ(st_forged, TE_EAUTH);
    ASSERT_EQ(st_range, TE_ERANGE);
    ASSERT_EQ(st_wide, TE_EAUTH);
    ASSERT_EQ(st_write, TE_OK);
    ASSERT_EQ(st_read_w, TE_EAUTH);

    ASSERT(put_end(c, "caps-key", crc32c(0, out, SZ)));
    int ok = get_extent(c, "caps-key", &node, &off, &len, &cap) == 0;
    redisFree(c);
    ASSERT(ok);
    int st_read;
    ASSERT_STEP(dp_once(daddr, TE_READ, in, off, SZ, &cap, &st_read));
    ASSERT_EQ(st_read, TE_OK);
    ASSERT_MEMEQ(in, out, SZ);

    char v[64];
    node_info_field(mp + 1, "data_rejected", v, sizeof v);
    ASSERT(atoi(v) >= 4);
    h_kill(n);
    h_kill(m);
}

/* The segment is exported over shm too (transport auto): bytes written
 * through the unix socket's mapping are read back over TCP. */
static void test_shm_export(void) {
    int mp = test_ports();
    char d[ADDR_LEN];
    pid_t m, n;
    ASSERT_STEP(start_master_and_node(mp, addr_at(d, mp + 2), NULL, &m, &n, NULL));
    /* the master lists it a moment before its data plane has the key */
    ASSERT_EQ(h_wait_node_registered(mp + 1, 5000), 0);
    redisContext *c = h_proven(h_redis(mp), SECRET);
    ASSERT(c);
    char st[16], addrs[8][64];
    int naddrs;
    node_state(c, 1, st, sizeof st, addrs, &naddrs);
    ASSERT_EQ(naddrs, 2);
    ASSERT_STREQ(addrs[0], d);
    ASSERT(strncmp(addrs[1], "unix:@moonkv-node-", 18) == 0);

    enum { SZ = 65536 };
    static char out[SZ], in[SZ];
    h_fill(out, SZ, 99);
    uint32_t node;
    uint64_t off, len;
    te_cap cap;
    ASSERT(put_start(c, "shm-key", SZ, &node, &off, &len, &cap) == 0);
    int st_w;
    ASSERT_STEP(dp_once(addrs[1], TE_WRITE, out, off, SZ, &cap, &st_w));
    ASSERT_EQ(st_w, TE_OK);
    (void)put_end(c, "shm-key", crc32c(0, out, SZ));
    int ok = get_extent(c, "shm-key", &node, &off, &len, &cap) == 0;
    redisFree(c);
    ASSERT(ok);
    int st_r;
    ASSERT_STEP(dp_once(addrs[0], TE_READ, in, off, SZ, &cap, &st_r));
    ASSERT_EQ(st_r, TE_OK);
    ASSERT_MEMEQ(in, out, SZ);
    h_kill(n);
    h_kill(m);
}

/* SIGTERM: the node asks to be drained, its object is copied to the other
 * node (a copy task: the survivor reads it from the leaving node), then
 * the node exits 0 and the master reports it dead at once, not by timeout. */
static void test_sigterm_leaves_gracefully(void) {
    int mp = test_ports();
    char da[ADDR_LEN], db[ADDR_LEN];
    pid_t m, a;
    redisContext *c;
    ASSERT_STEP(start_master_and_node(mp, addr_at(da, mp + 2), NULL, &m, &a, &c));

    /* An object on node 1, the only node yet. */
    enum { SZ = 100000 };
    static char out[SZ], in[SZ];
    h_fill(out, SZ, 7);
    uint32_t node;
    uint64_t off, len;
    te_cap cap;
    ASSERT(put_start(c, "drain-key", SZ, &node, &off, &len, &cap) == 0);
    int st;
    ASSERT_STEP(dp_once(da, TE_WRITE, out, off, SZ, &cap, &st));
    ASSERT_EQ(st, TE_OK);
    ASSERT(put_end(c, "drain-key", crc32c(0, out, SZ)));

    pid_t b = start_node(mp, mp + 3, addr_at(db, mp + 4), "4MB");
    ASSERT(b > 0);
    ASSERT_EQ(h_wait_nodes(mp, "alive", 2, 5000), 0);

    kill(a, SIGTERM);
    int code = wait_exit(a, 8000);
    long dead_ms = wait_state(c, 1, "dead", 300);
    ASSERT_MSG(code == 0, "leaving node exit status %d", code);
    ASSERT_MSG(dead_ms >= 0, "node 1 not dead right after it exited");

    /* The object survived on node 2, byte for byte. */
    int ok = get_extent(c, "drain-key", &node, &off, &len, &cap) == 0;
    redisFree(c);
    ASSERT_MSG(ok, "drain-key lost with the leaving node");
    ASSERT_EQ(node, 2);
    ASSERT_STEP(dp_once(db, TE_READ, in, off, SZ, &cap, &st));
    ASSERT_EQ(st, TE_OK);
    ASSERT_MEMEQ(in, out, SZ);
    char v[64];
    node_info_field(mp + 3, "tasks_ok", v, sizeof v);
    ASSERT_EQ(atoi(v), 1);
    /* The last node leaves too (its object has nowhere to go): a clean
     * exit after a copy ran (under ASan: no leaks). */
    kill(b, SIGTERM);
    code = wait_exit(b, 8000);
    ASSERT_MSG(code == 0, "second node exit status %d", code);
    h_kill(m);
}

/* MOON.DRAIN on the node's own port leaves like SIGTERM. */
static void test_drain_command_leaves(void) {
    int mp = test_ports();
    char d[ADDR_LEN];
    pid_t m, n;
    ASSERT_STEP(start_master_and_node(mp, addr_at(d, mp + 2), NULL, &m, &n, NULL));
    redisContext *c = h_redis(mp + 1);
    ASSERT(c);
    redisReply *r = redisCommand(c, "MOON.DRAIN");
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    redisFree(c);
    ASSERT(ok);
    int code = wait_exit(n, 8000);
    ASSERT_MSG(code == 0, "exit status %d", code);
    c = h_proven(h_redis(mp), SECRET);
    ASSERT(c);
    long ms = wait_state(c, 1, "dead", 300);
    redisFree(c);
    ASSERT(ms >= 0);
    h_kill(m);
}

/* With no master to drain it, SIGTERM just exits (cleanly, promptly). */
static void test_sigterm_without_master(void) {
    int mp = test_ports();
    char d[ADDR_LEN];
    pid_t n = start_node(mp, mp + 1, addr_at(d, mp + 2), "4MB");
    ASSERT(n > 0);
    kill(n, SIGTERM);
    int code = wait_exit(n, 5000);
    ASSERT_MSG(code == 0, "exit status %d", code);
}

/* The master restarts: the node notices and registers with the new one,
 * and serves under the new identity on the listener it had: the data
 * plane's socket is never closed, so no client is refused meanwhile. */
static void test_reregister_after_master_restart(void) {
    int mp = test_ports();
    char d[ADDR_LEN];
    pid_t m, n;
    ASSERT_STEP(start_master_and_node(mp, addr_at(d, mp + 2), NULL, &m, &n, NULL));
    unsigned long listener = h_listen_inode(n, mp + 2);
    ASSERT(listener != 0);
    h_kill(m);
    m = start_master(mp);
    ASSERT(m > 0);
    ASSERT_EQ(h_wait_nodes(mp, "alive", 1, 5000), 0);
    ASSERT_EQ(node_info_wait_int(mp + 1, "registrations", 2, 3000), 2);
    ASSERT_EQ(h_listen_inode(n, mp + 2), listener);
    h_kill(n);
    h_kill(m);
}

/* A node frozen past the node timeout is declared dead; thawed, it hears
 * NODEDEAD on its next heartbeat and registers again under its own id
 * (an id means one node), starting empty. */
static void test_reregister_after_declared_dead(void) {
    int mp = test_ports();
    char d[ADDR_LEN];
    pid_t m, n;
    redisContext *c;
    ASSERT_STEP(start_master_and_node(mp, addr_at(d, mp + 2), NULL, &m, &n, &c));
    h_sigstop(n);
    long ms = wait_state(c, 1, "dead", NODE_TIMEOUT_MS + 1500);
    kill(n, SIGCONT);
    ASSERT(ms >= 0);
    ms = wait_state(c, 1, "alive", 5000);
    redisFree(c);
    ASSERT_MSG(ms >= 0, "no second registration");
    char v[64];
    node_info_field(mp + 1, "node_id", v, sizeof v);
    ASSERT_EQ(atoi(v), 1);
    ASSERT_EQ(node_info_wait_int(mp + 1, "registrations", 2, 3000), 2);
    h_kill(n);
    h_kill(m);
}

/* A bad start-up fails cleanly: RDMA asked for on a host without a device. */
static void test_rdma_without_device_fails(void) {
    int mp = test_ports();
    h_args a = {0};
    node_args(&a, mp, mp + 1, "4MB", NULL, NULL, "rdma");
    pid_t n = h_spawn(a.v);
    ASSERT(n > 0);
    int code = wait_exit(n, 10000);
    if (code < 0) h_kill(n);
    ASSERT_EQ(code, 1);
}

int main(void) {
    h_init(55);
    RUN_TEST(test_register);
    RUN_TEST(test_wrong_secret_not_registered);
    RUN_TEST(test_kill9_declared_dead);
    RUN_TEST(test_data_plane_caps);
    RUN_TEST(test_shm_export);
    RUN_TEST(test_sigterm_leaves_gracefully);
    RUN_TEST(test_reregister_after_master_restart);
    RUN_TEST(test_reregister_after_declared_dead);
    RUN_TEST(test_drain_command_leaves);
    RUN_TEST(test_sigterm_without_master);
    RUN_TEST(test_rdma_without_device_fails);
    h_kill_all();
    TEST_EXIT();
}
