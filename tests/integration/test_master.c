/* Integration test of the master role: a real `moonkv-server --role master`
 * driven with hiredis, this test playing the memory nodes itself (it
 * speaks the node side of docs/PROTOCOL.md). Ports: one block of
 * h_free_ports, taken first in main() (the masters, then etcd's and the
 * masters with etcd); the gap tests take a block of their own. */
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cap.h"
#include "backend/le.h"
#include "core/crc32c.h"
#include "core/siphash.h"
#include "core/util.h"
#include "proto/ended.h"
#include "proto/limits.h"
#include "proto/located.h"
#include "proto/notes.h"
#include "proto/placed.h"
#include "proto/register.h"
#include "proto/report.h"
#include "etcd_harness.h"
#include "support/harness.h"
#include "test.h"

#define SECRET "it-secret"
#define MASTER_PORTS 24   /* the masters started one after another, each on a port of its own */

static int port0;

static pid_t master_pid = -1;
static int port;

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void stop_master(void) {
    h_kill(master_pid);
    master_pid = -1;
}

static int clean_exit;
static void test_clean_shutdown(void) { ASSERT_EQ(clean_exit, 0); }

/* Connections that play a node or a client prove the secret, as those do. */
static redisContext *connect_master(void) { return h_proven(h_redis_ms("127.0.0.1", port, 2000), SECRET); }

static const char *rejoin_grace_ms = "1500";   /* the next master's */

/* A master's command line on port with the given timeouts. */
static void master_args(h_args *a, int at, int put_timeout_ms, int node_timeout_ms, int lease_ms) {
    h_arg(a, h_server_bin());
    h_arg(a, "--role");
    h_arg(a, "master");
    h_arg(a, "--bind");
    h_arg(a, "127.0.0.1");
    h_arg(a, "--port");
    h_argf(a, "%d", at);
    h_arg(a, "--cluster-secret");
    h_arg(a, SECRET);
    h_arg(a, "--put-timeout-ms");
    h_argf(a, "%d", put_timeout_ms);
    h_arg(a, "--node-timeout-ms");
    h_argf(a, "%d", node_timeout_ms);
    h_arg(a, "--lease-ms");
    h_argf(a, "%d", lease_ms);
    static const char *const fixed[] = {"--heartbeat-ms", "50", "--stripe-threshold", "4KB",
                                        "--stripe-unit", "4KB", "--stripe-width", "2", NULL};
    h_argv(a, fixed);
    h_arg(a, "--rejoin-grace-ms");
    h_arg(a, rejoin_grace_ms);
}

/* Start a master with the given timeouts; 0 once it answers PING. */
static int start_master(int put_timeout_ms, int node_timeout_ms, int lease_ms) {
    static int next = 0;
    port = port0 + (next++ % MASTER_PORTS);
    h_args a = {0};
    master_args(&a, port, put_timeout_ms, node_timeout_ms, lease_ms);
    master_pid = h_start(a.v, port, "/dev/null", NULL, 5000);
    return master_pid > 0 ? 0 : -1;
}

/* The next cases' master: the last one stopped, this one started; a
 * master that does not come up ends the binary (a "not ok" line, exit 1). */
static void restart_master(int put_timeout_ms, int node_timeout_ms, int lease_ms) {
    stop_master();
    if (start_master(put_timeout_ms, node_timeout_ms, lease_ms) != 0) {
        printf("not ok - restart master\n");
        exit(1);
    }
}

/* ---- playing a node ---- */

typedef struct fake_node {
    redisContext *c;
    long long id;
    uint8_t cap_key[TE_CAP_KEY_LEN];
    uint64_t term;                /* the master's, from the registration */
} fake_node;

static int unhex(const char *s, uint8_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
        out[i] = (uint8_t)v;
    }
    return 0;
}

static void hex(const uint8_t *p, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", p[i]);
}

/* Challenge, prove the secret, MOON.REGISTER a segment on n's
 * connection, claiming id unless it is 0 (as process instance, 16 hex
 * digits, unless NULL): the reply. */
static redisReply *register_as(fake_node *n, const char *secret, unsigned long long seg, const char *addr,
                               unsigned id, const char *instance) {
    redisReply *r = redisCommand(n->c, "MOON.CHALLENGE");
    if (!r || r->type != REDIS_REPLY_STRING || r->len != PROTO_NONCE_LEN) {
        freeReplyObject(r);
        return NULL;
    }
    uint8_t key[16], proof[16];
    char proof_hex[33], segs[24], ids[16];
    proto_reg_key(secret, key);
    proto_reg_proof(key, (const uint8_t *)r->str, proof);
    freeReplyObject(r);
    hex(proof, 16, proof_hex);
    snprintf(segs, sizeof segs, "%llu", seg);
    snprintf(ids, sizeof ids, "%u", id);
    const char *argv[8] = {"MOON.REGISTER", proof_hex, segs, addr};
    int argc = 4;
    if (id) argv[argc++] = "ID", argv[argc++] = ids;
    if (instance) argv[argc++] = "INSTANCE", argv[argc++] = instance;
    return redisCommandArgv(n->c, argc, argv, NULL);
}

static int is_error(const redisReply *r, const char *prefix) {
    return r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, prefix, strlen(prefix)) == 0;
}

/* Register as a new node; a master just started holds new nodes for its
 * rejoin grace (TRYAGAIN): retry as a node does, bounded. */
static int node_register(fake_node *n, const char *secret, unsigned long long seg, const char *addr) {
    redisReply *r;
    uint64_t end = mono_ms() + 10000;
    while (is_error(r = register_as(n, secret, seg, addr, 0, NULL), "TRYAGAIN") && mono_ms() < end) {
        freeReplyObject(r);
        sleep_ms(50);
    }
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 5 &&
             r->element[1]->type == REDIS_REPLY_STRING && r->element[1]->len == 32 &&
             r->element[3]->type == REDIS_REPLY_INTEGER && r->element[3]->integer > 0;
    if (ok) {
        n->id = r->element[0]->integer;
        unhex(r->element[1]->str, n->cap_key, TE_CAP_KEY_LEN);
        n->term = (uint64_t)r->element[3]->integer;
    }
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Connect and register. 0 on success. */
static int node_join(fake_node *n, const char *secret, unsigned long long seg, const char *addr) {
    n->c = connect_master();
    return n->c ? node_register(n, secret, seg, addr) : -1;
}

static void node_leave(fake_node *n) {
    if (n->c) redisFree(n->c);
    n->c = NULL;
}

static redisReply *heartbeat(fake_node *n) {
    return redisCommand(n->c, "MOON.HEARTBEAT %lld 0", n->id);
}

/* A [node, off, len, cap] element whose cap is genuine for the op. */
static int extent_ok(const redisReply *e, const fake_node *n, te_op op) {
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 4) return 0;
    if (e->element[3]->type != REDIS_REPLY_STRING || e->element[3]->len != TE_CAP_WIRE_LEN) return 0;
    te_cap cap;
    if (te_cap_decode(&cap, (const uint8_t *)e->element[3]->str, e->element[3]->len) != 0) return 0;
    uint64_t now = (uint64_t)time(NULL) * 1000;
    return te_cap_check(&cap, n->cap_key, n->term, (uint32_t)e->element[0]->integer, op,
                        (uint64_t)e->element[1]->integer, (uint64_t)e->element[2]->integer,
                        now) == TE_OK;
}

/* ---- tests ---- */

static void test_register_needs_secret(void) {
    fake_node bad = {0};
    ASSERT(node_join(&bad, "wrong-secret", 1 << 20, "127.0.0.1:1") != 0);
    node_leave(&bad);
    redisContext *c = connect_master();
    ASSERT(c);
    ASSERT(h_command_is(c, is_error, "NOAUTH",
                        "MOON.REGISTER 00112233445566778899aabbccddeeff 1024 a:1"));
    /* node commands from a connection that is not that node */
    ASSERT(h_command_is(c, is_error, "ERR this connection did not register", "MOON.HEARTBEAT 1 0"));
    redisFree(c);
}

/* A batch longer than the master's lookup groups and its encoder's
 * look-ahead: b1, nope and k1 in turn, 70 keys; every record in order. */
static void mgetpacked_long(redisContext *c) {
    enum { N = 70 };
    const char *argv[N + 1] = {"MOON.MGETPACKED"}, *keys[3] = {"b1", "nope", "k1"};
    for (int i = 0; i < N; i++) argv[i + 1] = keys[i % 3];
    redisReply *r = redisCommandArgv(c, N + 1, argv, NULL);
    ASSERT(r && r->type == REDIS_REPLY_STRING);
    const uint8_t *at = (const uint8_t *)r->str, *end = at + r->len;
    proto_extbuf buf = {0};
    int bad = -1;
    for (int i = 0; i < N && bad < 0; i++) {
        proto_located l;
        if (proto_located_next(&at, end, &buf, &l) != 0) {
            bad = i;
            break;
        }
        int want_found = i % 3 != 1;
        uint64_t size = i % 3 == 0 ? 10 : 1000;
        uint32_t crc = i % 3 == 0 ? 1 : 12345, reps = i % 3 == 0 ? 1 : 2;
        if (l.found != want_found || (want_found && (l.size != size || l.crc != crc || l.rep.nreplicas != reps)))
            bad = i;
        proto_located_free(&l);
    }
    proto_extbuf_free(&buf);
    ASSERT_MSG(bad < 0 && at == end, "record %d of %d wrong (%zu bytes)", bad, N, r->len);
    freeReplyObject(r);
}

/* MOON.MGETPACKED b1 nope k1 after the batch forms above (b1: 10 bytes,
 * CRC 1; k1: 1000 bytes, CRC 12345, two replicas): the records in order,
 * read caps under a real lease (MOON.MRELEASE finds it outstanding), and
 * the batch form's limits. */
static void mgetpacked_checks(redisContext *c) {
    redisReply *r = redisCommand(c, "MOON.MGETPACKED b1 nope k1");
    ASSERT(r && r->type == REDIS_REPLY_STRING);
    const uint8_t *at = (const uint8_t *)r->str, *end = at + r->len;
    proto_located l[3];
    proto_extbuf buf[3] = {{0}};   /* a buffer each: the records are kept side by side */
    int ok = 1;
    for (int i = 0; i < 3; i++) ok = ok && proto_located_next(&at, end, &buf[i], &l[i]) == 0;
    ASSERT_MSG(ok && at == end, "records of %zu bytes", r->len);
    freeReplyObject(r);
    ok = l[0].found && l[0].size == 10 && l[0].crc == 1 && l[0].rep.nreplicas == 1 && !l[1].found &&
         l[2].found && l[2].size == 1000 && l[2].crc == 12345 && l[2].rep.nreplicas == 2 &&
         l[2].slices.count == 0 && (l[2].rep.ext[0][0].cap.rights & TE_CAP_WRITE) == 0;
    uint64_t lease = ok ? l[2].rep.ext[0][0].cap.expiry_ms : 0;
    for (int i = 0; i < 3; i++) {
        proto_located_free(&l[i]);
        proto_extbuf_free(&buf[i]);
    }
    ASSERT(ok);
    /* b1's and k1's leases share the expiry (one batch): one MOON.MRELEASE
     * gives both back; the missing key has none. (An earlier read granted
     * in the same millisecond may hold the same expiry: no second return
     * is asserted to find nothing.) */
    r = redisCommand(c, "MOON.MRELEASE %llu k1 nope b1", (unsigned long long)lease);
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 2);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.MRELEASE %llu nope", (unsigned long long)lease);
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0);
    freeReplyObject(r);
    ASSERT(h_command_is(c, is_error, "ERR wrong number of arguments for 'moon.mrelease' command",
                        "MOON.MRELEASE 5"));
    ASSERT(h_command_is(c, is_error, "ERR value is not an integer or out of range", "MOON.MRELEASE x k1"));
    mgetpacked_long(c);
    ASSERT(h_command_is(c, is_error, "ERR wrong number of arguments for 'moon.mgetpacked' command",
                        "MOON.MGETPACKED"));
    enum { OVER = PROTO_MAX_BATCH + 1 };
    const char **argv = xcalloc(OVER + 1, sizeof *argv);
    argv[0] = "MOON.MGETPACKED";
    for (int i = 1; i <= OVER; i++) argv[i] = "k1";
    r = redisCommandArgv(c, OVER + 1, argv, NULL);
    free(argv);
    ASSERT(r && r->type == REDIS_REPLY_ERROR);
    ASSERT_STREQ(r->str, "ERR at most 4096 keys per batch");
    freeReplyObject(r);
}

/* MOON.MPUTEND PACKED: a record per key in order, a refusal with the
 * array form's exact text (nope_text, what it answered for a key with no
 * put in progress); a word followed by no pairs is a key in the array
 * form, or a syntax error. */
static void mputend_packed_checks(redisContext *c, const char *nope_text) {
    redisReply *r = redisCommand(c, "MOON.MPUTSTART REPLICAS 1 e1 10 e2 20");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.MPUTEND PACKED e1 1 nope 3 e2 2");
    ASSERT(r && r->type == REDIS_REPLY_STRING);
    const uint8_t *at = (const uint8_t *)r->str, *end = at + r->len;
    proto_ended rec[3];
    int ok = 1;
    for (int i = 0; i < 3; i++) ok = ok && proto_ended_next(&at, end, &rec[i]) == 0;
    ASSERT_MSG(ok && at == end, "records of %zu bytes", r->len);
    ASSERT(rec[0].err == NULL && rec[2].err == NULL);
    ASSERT(rec[1].err && rec[1].errlen == strlen(nope_text) && memcmp(rec[1].err, nope_text, rec[1].errlen) == 0);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.MGET e1 e2");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT(r->element[0]->type == REDIS_REPLY_ARRAY && r->element[1]->type == REDIS_REPLY_ARRAY);
    ASSERT_EQ(r->element[0]->element[1]->integer, 1);
    ASSERT_EQ(r->element[1]->element[1]->integer, 2);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.MPUTEND PACKED 7");   /* a key named PACKED */
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    ASSERT_STREQ(r->element[0]->str, nope_text);
    freeReplyObject(r);
    ASSERT(h_command_is(c, is_error, "ERR wrong number of arguments for 'moon.mputend' command",
                        "MOON.MPUTEND PACKED"));
    ASSERT(h_command_is(c, is_error, "ERR value is not an integer", "MOON.MPUTEND PACKED e1 x"));
    for (int i = 0; i < 2; i++) {
        r = redisCommand(c, "MOON.REMOVE e%d", i + 1);
        ASSERT(r && r->integer == 1);
        freeReplyObject(r);
    }
}

static void test_placement_and_lifecycle(void) {
    fake_node n[3] = {{0}};
    ASSERT(node_join(&n[0], SECRET, 1 << 20, "127.0.0.1:7001") == 0);
    ASSERT(node_join(&n[1], SECRET, 1 << 20, "127.0.0.1:7002") == 0);
    ASSERT(node_join(&n[2], SECRET, 1 << 20, "127.0.0.1:7003") == 0);
    ASSERT(n[0].id != n[1].id && n[1].id != n[2].id);
    redisContext *c = connect_master();
    ASSERT(c);

    redisReply *r = redisCommand(c, "MOON.PUTSTART k1 1000 REPLICAS 2");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    long long nodes[2];
    for (int i = 0; i < 2; i++) {
        redisReply *rep = r->element[i];
        ASSERT(rep->type == REDIS_REPLY_ARRAY && rep->elements == 1);
        ASSERT(extent_ok(rep->element[0], &n[0], TE_WRITE));
        ASSERT_EQ(rep->element[0]->element[2]->integer, 1000);
        nodes[i] = rep->element[0]->element[0]->integer;
    }
    ASSERT(nodes[0] != nodes[1]);
    freeReplyObject(r);

    ASSERT(h_command_is(c, is_error, "EXISTS", "MOON.PUTSTART k1 1000"));
    r = redisCommand(c, "MOON.EXISTS k1");
    ASSERT(r && r->integer == 0);   /* in flight is not visible */
    freeReplyObject(r);
    r = redisCommand(c, "MOON.GET k1");
    ASSERT(r && r->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.PUTEND k1 12345");
    ASSERT(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.GET k1");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    ASSERT_EQ(r->element[0]->integer, 1000);
    ASSERT_EQ(r->element[1]->integer, 12345);
    ASSERT_EQ(r->element[2]->elements, 2);
    ASSERT(extent_ok(r->element[2]->element[0]->element[0], &n[0], TE_READ));
    ASSERT(!extent_ok(r->element[2]->element[0]->element[0], &n[0], TE_WRITE));
    freeReplyObject(r);

    /* striped: 10000 bytes > 4KB threshold, 4KB slices, width 1 with 3 nodes x 2 replicas */
    r = redisCommand(c, "MOON.PUTSTART big 10000 REPLICAS 1");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    ASSERT_EQ(r->element[0]->elements, 3);
    ASSERT(r->element[0]->element[0]->element[0]->integer !=
           r->element[0]->element[1]->element[0]->integer);
    ASSERT_EQ(r->element[0]->element[2]->element[2]->integer, 10000 - 8192);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.PUTREVOKE big");
    ASSERT(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);

    /* errors */
    ASSERT(h_command_is(c, is_error, "ERR", "MOON.PUTSTART z 0"));
    ASSERT(h_command_is(c, is_error, "NOREPLICAS", "MOON.PUTSTART z 100 REPLICAS 4"));
    r = redisCommand(c, "MOON.PUTSTART z 4096");   /* at the threshold: not striped */
    ASSERT(r && r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    ASSERT(h_command_is(c, is_error, "NOSPACE", "MOON.PUTSTART huge 4000000 REPLICAS 3"));
    ASSERT(h_command_is(c, is_error, "ERR value is not an integer", "MOON.PUTSTART q notanumber"));

    /* batch forms */
    r = redisCommand(c, "MOON.MPUTSTART REPLICAS 1 b1 10 b2 20 k1 5");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    ASSERT(r->element[0]->type == REDIS_REPLY_ARRAY && r->element[1]->type == REDIS_REPLY_ARRAY);
    ASSERT(is_error(r->element[2], "EXISTS"));
    freeReplyObject(r);
    r = redisCommand(c, "MOON.MPUTEND b1 1 b2 2 nope 3");
    ASSERT(r && r->elements == 3 && r->element[0]->type == REDIS_REPLY_STATUS);
    ASSERT(is_error(r->element[2], "NOTFOUND no put in progress"));
    mputend_packed_checks(c, r->element[2]->str);
    freeReplyObject(r);
    /* PACKED: one bulk string of records (proto/placed.h); a key named
     * PACKED in the array form is a key */
    r = redisCommand(c, "MOON.MPUTSTART REPLICAS 1 PACKED p1 10 k1 5");
    ASSERT(r && r->type == REDIS_REPLY_STRING);
    const uint8_t *at = (const uint8_t *)r->str, *end = at + r->len;
    proto_placed pl;
    proto_extbuf buf = {0};
    ASSERT_EQ(proto_placed_next(&at, end, 10, TE_CAP_WRITE, &buf, &pl), 0);
    int placed = pl.nreplicas == 1 && pl.next[0] == 1 && pl.ext[0][0].length == 10;
    proto_extbuf_free(&buf);
    ASSERT(placed);
    ASSERT_EQ(proto_placed_next(&at, end, 5, TE_CAP_WRITE, NULL, &pl), 0);   /* a refusal needs no buffer */
    ASSERT(pl.err && pl.errlen > 7 && memcmp(pl.err, "EXISTS ", 7) == 0 && at == end);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.MPUTSTART REPLICAS 1 PACKED 7");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    for (int i = 0; i < 2; i++) {
        r = redisCommand(c, "MOON.PUTREVOKE %s", i ? "PACKED" : "p1");
        ASSERT(r && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    r = redisCommand(c, "MOON.MGET b1 nope b2");
    ASSERT(r && r->elements == 3 && r->element[1]->type == REDIS_REPLY_NIL);
    ASSERT_EQ(r->element[2]->element[0]->integer, 20);
    freeReplyObject(r);
    mgetpacked_checks(c);
    r = redisCommand(c, "MOON.MEXISTS b1 nope k1");
    ASSERT(r && r->elements == 3);
    ASSERT_EQ(r->element[0]->integer + r->element[1]->integer * 10 + r->element[2]->integer * 100, 101);
    freeReplyObject(r);

    /* introspection */
    r = redisCommand(c, "MOON.OBJECT k1");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 10);
    ASSERT_STREQ(r->element[1]->str, "complete");
    ASSERT_EQ(r->element[5]->integer, 12345);
    ASSERT_EQ(r->element[9]->elements, 2);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.NODES");
    ASSERT(r && r->type == REDIS_REPLY_STRING);
    char line[128];
    snprintf(line, sizeof line, "%lld 127.0.0.1:7002 alive 1048576 ", n[1].id);
    ASSERT(strstr(r->str, line));
    freeReplyObject(r);
    r = redisCommand(c, "MOON.TOPOLOGY");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3);
    freeReplyObject(r);
    r = redisCommand(c, "INFO cluster");
    ASSERT(r && r->type == REDIS_REPLY_STRING && strstr(r->str, "nodes_alive:3"));
    freeReplyObject(r);

    r = redisCommand(c, "MOON.REMOVE k1");
    ASSERT(r && r->integer == 1);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.REMOVE k1");
    ASSERT(r && r->integer == 0);
    freeReplyObject(r);
    redisFree(c);
    for (int i = 0; i < 3; i++) node_leave(&n[i]);
}

static void test_put_timeout_and_node_death(void) {
    fake_node a = {0}, b = {0};
    ASSERT(node_join(&a, SECRET, 64 * 1024, "127.0.0.1:7101") == 0);
    ASSERT(node_join(&b, SECRET, 64 * 1024, "127.0.0.1:7102") == 0);
    redisContext *c = connect_master();
    ASSERT(c);
    redisReply *r = redisCommand(c, "MOON.PUTSTART slow 100 REPLICAS 2");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.PUTSTART solo 100 REPLICAS 1");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY);
    long long solo_node = r->element[0]->element[0]->element[0]->integer;
    freeReplyObject(r);
    r = redisCommand(c, "MOON.PUTEND solo 9");
    freeReplyObject(r);
    /* put timeout 300 ms: "slow" is revoked and the key is free again;
     * b keeps heartbeating, a goes silent and dies after 600 ms */
    fake_node *live = solo_node == a.id ? &b : &a;
    /* until the master's sweep has done both, by time (16 beats of 50 ms
     * left 200 ms for it past the node timeout) */
    for (uint64_t end = mono_ms() + 20000; mono_ms() < end;) {
        freeReplyObject(heartbeat(live));
        sleep_ms(50);
        r = redisCommand(c, "INFO cluster");
        int swept = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "objects_lost:1") &&
                    strstr(r->str, "nodes_dead:1") &&
                    strstr(r->str, "puts_timed_out:1");
        freeReplyObject(r);
        if (swept) break;
    }
    r = redisCommand(c, "MOON.OBJECT slow");
    ASSERT(r && r->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.EXISTS solo");
    ASSERT(r && r->integer == 0);   /* its only node died: lost */
    freeReplyObject(r);
    r = redisCommand(c, "INFO cluster");
    ASSERT(r && strstr(r->str, "objects_lost:1") && strstr(r->str, "nodes_dead:1") &&
           strstr(r->str, "puts_timed_out:1"));
    freeReplyObject(r);
    r = redisCommand(c, "MOON.NODES");
    ASSERT(r && strstr(r->str, " dead "));
    freeReplyObject(r);
    fake_node *dead = live == &a ? &b : &a;
    r = heartbeat(dead);
    ASSERT(is_error(r, "NODEDEAD"));
    freeReplyObject(r);
    /* the dead node comes back on the same connection with a new id */
    long long old_id = dead->id;
    ASSERT(node_register(dead, SECRET, 64 * 1024, "127.0.0.1:7103") == 0);
    ASSERT(dead->id > old_id);
    r = heartbeat(dead);
    ASSERT(r && r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    redisFree(c);
    node_leave(&a);
    node_leave(&b);
}

static void test_drain_copy_task(void) {
    fake_node a = {0}, b = {0};
    ASSERT(node_join(&a, SECRET, 64 * 1024, "127.0.0.1:7201") == 0);
    redisContext *c = connect_master();
    ASSERT(c);
    redisReply *r = redisCommand(c, "MOON.PUTSTART moved 100");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    freeReplyObject(redisCommand(c, "MOON.PUTEND moved 7"));
    r = redisCommand(c, "MOON.PUTSTART moved2 50");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    freeReplyObject(redisCommand(c, "MOON.PUTEND moved2 9"));
    ASSERT(node_join(&b, SECRET, 64 * 1024, "127.0.0.1:7202") == 0);
    r = redisCommand(a.c, "MOON.LEAVE %lld", a.id);
    ASSERT(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    /* the task reaches b in a heartbeat reply once the sweep placed it */
    redisReply *tasks = NULL;
    for (uint64_t end = mono_ms() + 20000; mono_ms() < end;) {
        freeReplyObject(heartbeat(&a));
        tasks = heartbeat(&b);
        if (tasks && tasks->type == REDIS_REPLY_ARRAY && tasks->elements > 0) break;
        freeReplyObject(tasks);
        tasks = NULL;
        sleep_ms(25);
    }
    ASSERT(tasks);
    ASSERT_EQ(tasks->elements, 2);   /* both objects' tasks in one reply */
    if (strcmp(tasks->element[0]->element[1]->str, "moved") != 0) {
        redisReply *x = tasks->element[0];
        tasks->element[0] = tasks->element[1];
        tasks->element[1] = x;
    }
    redisReply *t = tasks->element[0];
    ASSERT(t->type == REDIS_REPLY_ARRAY && t->elements == 5);
    ASSERT_STREQ(t->element[1]->str, "moved");
    ASSERT_EQ(t->element[2]->integer, 100);
    ASSERT_STREQ(tasks->element[1]->element[1]->str, "moved2");
    long long task2 = tasks->element[1]->element[0]->integer;
    ASSERT(extent_ok(t->element[3]->element[0], &a, TE_READ));
    ASSERT_EQ(t->element[3]->element[0]->element[0]->integer, a.id);
    ASSERT_EQ(t->element[4]->element[0]->elements, 3);
    long long task_id = t->element[0]->integer;
    freeReplyObject(tasks);
    ASSERT(h_command_is(a.c, is_error, "ERR task", "MOON.COPYDONE %lld OK", task_id));   /* not a's task */
    ASSERT(h_command_is(b.c, is_error, "ERR want 1 to", "MOON.COPYDONE %lld OK %lld", task_id, task2));
    /* many outcomes in one command: one answer each, in order */
    r = redisCommand(b.c, "MOON.COPYDONE %lld OK %lld OK %lld FAIL", task_id, task2, task2 + 1000);
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    ASSERT(r->element[0]->type == REDIS_REPLY_STATUS && r->element[1]->type == REDIS_REPLY_STATUS);
    ASSERT(r->element[2]->type == REDIS_REPLY_ERROR && strncmp(r->element[2]->str, "NOTFOUND", 8) == 0);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.GET moved");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->element[2]->elements == 1);
    ASSERT_EQ(r->element[2]->element[0]->element[0]->element[0]->integer, b.id);
    freeReplyObject(r);
    /* the drained node leaves (waited for by time: 80 beats were once
     * the bound, which a loaded machine can outrun) */
    int gone = 0;
    for (uint64_t end = mono_ms() + 20000; !gone && mono_ms() < end;) {
        r = heartbeat(&a);
        gone = is_error(r, "NODEDEAD");
        freeReplyObject(r);
        freeReplyObject(heartbeat(&b));
        sleep_ms(25);
    }
    ASSERT(gone);
    redisFree(c);
    node_leave(&a);
    node_leave(&b);
}

static void test_report_and_rebuild(void) {
    fake_node a = {0}, b = {0};
    ASSERT(node_join(&a, SECRET, 64 * 1024, "127.0.0.1:7301") == 0);
    ASSERT(node_join(&b, SECRET, 64 * 1024, "127.0.0.1:7302") == 0);
    redisContext *c = connect_master();
    ASSERT(c);
    ASSERT(h_command_is(c, is_error, "ERR only a registered node", "MOON.REPORT rb 100 5 2 0 4096 100"));
    redisReply *r = redisCommand(a.c, "MOON.REPORT rb 100 5 2 0 4096 100 junk 10 1 1 0 65536 10");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 2);
    freeReplyObject(r);
    r = redisCommand(b.c, "MOON.REPORT rb 100 5 2 0 0 100");
    ASSERT(r && r->integer == 3);
    freeReplyObject(r);
    ASSERT(h_command_is(b.c, is_error, "ERR", "MOON.REPORT rb 100 5 2 0 0 1 2"));
    r = redisCommand(c, "MOON.REBUILD");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 4);
    ASSERT_EQ(r->element[0]->integer, 1);   /* objects */
    ASSERT_EQ(r->element[1]->integer, 2);   /* replicas */
    ASSERT_EQ(r->element[2]->integer, 2);   /* extents */
    ASSERT_EQ(r->element[3]->integer, 1);   /* rejected: outside the segment */
    freeReplyObject(r);
    r = redisCommand(c, "MOON.GET rb");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->element[2]->elements == 2);
    ASSERT_EQ(r->element[1]->integer, 5);
    ASSERT(extent_ok(r->element[2]->element[0]->element[0], &a, TE_READ));
    freeReplyObject(r);
    redisFree(c);
    node_leave(&a);
    node_leave(&b);
}

/* MOON.REPORT PACKED with the blob [p, p+len): the reply. */
static redisReply *report_packed(redisContext *c, const uint8_t *p, size_t len) {
    const char *argv[3] = {"MOON.REPORT", "PACKED", (const char *)p};
    size_t lens[3] = {11, 6, len};
    return redisCommandArgv(c, 3, argv, lens);
}

/* Whether r is an error starting with prefix; frees it. */
static int refused(redisReply *r, const char *prefix) {
    int ok = is_error(r, prefix);
    if (r) freeReplyObject(r);
    return ok;
}

/* The packed form: whole blobs are kept or refused (a cut-off record, a
 * zero key length, flags, an offset past the bound), and the connection
 * keeps serving after a refusal. */
static void test_packed_report(void) {
    fake_node a = {0}, b = {0};
    ASSERT(node_join(&a, SECRET, 64 * 1024, "127.0.0.1:7303") == 0);
    ASSERT(node_join(&b, SECRET, 64 * 1024, "127.0.0.1:7304") == 0);
    redisContext *c = connect_master();
    ASSERT(c);
    uint8_t blob[2 * (PROTO_REPORT_HDR + 8)];
    /* two extents of "pk" (300 bytes) on a, the whole object on b */
    proto_report_rec r1 = {"pk", 2, 300, 77, 2, 0, 8192, 200, {0, 0, NULL}}, r2 = {"pk", 2, 300, 77, 2, 200, 12288, 100, {0, 0, NULL}};
    size_t len = proto_report_put(blob, &r1);
    len += proto_report_put(blob + len, &r2);
    redisReply *r = report_packed(a.c, blob, len);
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 2);
    freeReplyObject(r);
    ASSERT(refused(report_packed(a.c, blob, len - 1), "ERR malformed packed report record 1"));
    uint8_t bad[PROTO_REPORT_HDR + 2];
    proto_report_rec whole = {"pk", 2, 300, 77, 2, 0, 16384, 300, {0, 0, NULL}};
    size_t one = proto_report_put(bad, &whole);
    bad[3] = 2;   /* flags */
    ASSERT(refused(report_packed(b.c, bad, one), "ERR malformed packed report record 0"));
    bad[3] = 1;   /* slice CRCs said to follow the key: none do */
    ASSERT(refused(report_packed(b.c, bad, one), "ERR malformed packed report record 0"));
    bad[3] = 0;
    bad[0] = bad[1] = 0;   /* key length 0 */
    ASSERT(refused(report_packed(b.c, bad, one), "ERR malformed packed report record 0"));
    proto_report_rec far = whole;
    far.seg_off = PROTO_MAX_SEGMENT + 1;
    proto_report_put(bad, &far);
    ASSERT(refused(report_packed(b.c, bad, one), "ERR malformed packed report record 0"));
    proto_report_put(bad, &whole);
    r = report_packed(b.c, bad, one);
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 3);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.REBUILD");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 4);
    ASSERT_EQ(r->element[0]->integer, 1);   /* objects */
    ASSERT_EQ(r->element[1]->integer, 2);   /* replicas */
    ASSERT_EQ(r->element[2]->integer, 3);   /* extents */
    ASSERT_EQ(r->element[3]->integer, 0);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.GET pk");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->element[2]->elements == 2);
    ASSERT_EQ(r->element[1]->integer, 77);   /* its crc */
    freeReplyObject(r);
    redisFree(c);
    node_leave(&a);
    node_leave(&b);
}

static int not_error(const redisReply *r, const char *unused) {
    return r && r->type != REDIS_REPLY_ERROR;
}

/* MOON.HOLDINGS id ack PACKED: [next_ack, blob] of the notes the array
 * form lists (holds with the node's extents, then drops), acknowledged
 * the same way; a bad flag is a syntax error. */
static void test_holdings_packed(void) {
    fake_node a = {0};
    ASSERT(node_join(&a, SECRET, 64 * 1024, "127.0.0.1:7305") == 0);
    redisContext *c = connect_master();
    ASSERT(c);
    static const char *const keys[] = {"h1", "h2"};
    for (int i = 0; i < 2; i++) {
        redisReply *r = redisCommand(c, "MOON.PUTSTART %s %d REPLICAS 1", keys[i], 100 * (i + 1));
        ASSERT(r && r->type == REDIS_REPLY_ARRAY);
        freeReplyObject(r);
        ASSERT(h_command_is(c, not_error, NULL, "MOON.PUTEND %s %d", keys[i], 40 + i));
    }
    redisReply *r = redisCommand(a.c, "MOON.HOLDINGS %lld 0", a.id);
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->integer == 2 &&
           r->element[1]->elements == 2);
    freeReplyObject(r);
    r = redisCommand(a.c, "MOON.HOLDINGS %lld 0 packed", a.id);
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->integer == 2 &&
           r->element[1]->type == REDIS_REPLY_STRING);
    obj_extent *ext = xcalloc(PROTO_MAX_EXTENTS, sizeof *ext);
    const uint8_t *p = (const uint8_t *)r->element[1]->str, *end = p + r->element[1]->len;
    for (int i = 0; i < 2; i++) {
        proto_note n;
        ASSERT_EQ(proto_note_next(&p, end, ext, &n), 0);
        ASSERT(!n.drop && n.keylen == 2 && memcmp(n.key, keys[i], 2) == 0);
        ASSERT(n.size == (uint64_t)(100 * (i + 1)) && n.crc == (uint32_t)(40 + i) && n.want == 1);
        ASSERT(n.rep.nextents == 1 && n.rep.extents[0].node == (uint32_t)a.id &&
               n.rep.extents[0].length == n.size);
    }
    ASSERT(p == end);
    freeReplyObject(r);
    ASSERT(h_command_is(c, not_error, NULL, "MOON.REMOVE h1"));
    r = redisCommand(a.c, "MOON.HOLDINGS %lld 2 PACKED", a.id);   /* the holds taken: the drop follows */
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->integer == 3);
    p = (const uint8_t *)r->element[1]->str;
    end = p + r->element[1]->len;
    proto_note n;
    ASSERT(proto_note_next(&p, end, ext, &n) == 0 && n.drop && n.keylen == 2 && memcmp(n.key, "h1", 2) == 0);
    ASSERT(p == end);
    freeReplyObject(r);
    r = redisCommand(a.c, "MOON.HOLDINGS %lld 3 PACKED", a.id);
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 3 && r->element[1]->len == 0);
    freeReplyObject(r);
    ASSERT(h_command_is(a.c, is_error, "ERR syntax error", "MOON.HOLDINGS %lld 3 PACKET", a.id));
    ASSERT(h_command_is(a.c, is_error, "ERR syntax error", "MOON.HOLDINGS %lld 3 PACKED 1", a.id));
    free(ext);
    redisFree(c);
    node_leave(&a);
}

/* ---- slice CRCs across a rebuild ---- */

#define SL_LEN 150000   /* three slices of 64 KiB, the last short */

/* SL_LEN pseudo-random bytes' CRC and their slice CRCs, packed. */
static uint32_t sl_value(uint8_t packed[12]) {
    uint8_t *v = xmalloc(SL_LEN);
    for (size_t i = 0; i < SL_LEN; i++) v[i] = (uint8_t)(i * 2654435761u >> 11);
    for (int i = 0; i < 3; i++) le_put32(packed + 4 * i, crc32c(0, v + i * 65536, i < 2 ? 65536 : SL_LEN - 131072));
    uint32_t crc = crc32c(0, v, SL_LEN);
    free(v);
    return crc;
}

/* MOON.GET key: 1 if it keeps slice CRCs equal to packed, 0 if none, -1 otherwise. */
static int get_slices(redisContext *c, const char *key, const uint8_t packed[12]) {
    redisReply *r = redisCommand(c, "MOON.GET %s", key);
    int rc = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 3) rc = 0;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 5 && r->element[3]->integer == 65536 &&
        r->element[4]->len == 12 && memcmp(r->element[4]->str, packed, 12) == 0)
        rc = 1;
    if (r) freeReplyObject(r);
    return rc;
}

/* A put's slice CRCs go to its node with MOON.HOLDINGS ... PACKED
 * SLICES (not without SLICES); reports carrying them (flags 1) give
 * them back to the rebuilt object when every report agrees and they
 * combine to its CRC, and none otherwise. */
static void test_slices_holdings_and_reports(void) {
    uint8_t packed[12], other[12];
    uint32_t crc = sl_value(packed);
    memcpy(other, packed, 12);
    other[5] ^= 1;   /* the second slice's CRC, wrong */
    /* one slice of 64 KiB (placed whole on d, whatever other nodes remain) */
    uint8_t one[4], small[1000];
    for (size_t i = 0; i < sizeof small; i++) small[i] = (uint8_t)(i * 7);
    uint32_t small_crc = crc32c(0, small, sizeof small);
    le_put32(one, small_crc);
    fake_node d = {0};
    ASSERT(node_join(&d, SECRET, 64 * 1024, "127.0.0.1:7306") == 0);
    redisContext *c = connect_master();
    ASSERT(c);
    redisReply *r = redisCommand(c, "MOON.PUTSTART sk 1000 REPLICAS 1");
    ASSERT_MSG(r && r->type == REDIS_REPLY_ARRAY, "PUTSTART: %s", r && r->str ? r->str : "?");
    freeReplyObject(r);
    r = redisCommand(c, "MOON.PUTEND sk %u SLICES 65536 %b", small_crc, one, (size_t)4);
    ASSERT(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    obj_extent *ext = xcalloc(PROTO_MAX_EXTENTS, sizeof *ext);
    for (int sliced = 1; sliced >= 0; sliced--) {
        r = sliced ? redisCommand(d.c, "MOON.HOLDINGS %lld 0 PACKED SLICES", d.id)
                   : redisCommand(d.c, "MOON.HOLDINGS %lld 0 packed", d.id);
        ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING);
        const uint8_t *p = (const uint8_t *)r->element[1]->str, *end = p + r->element[1]->len;
        proto_note n;
        ASSERT_EQ(proto_note_next(&p, end, ext, &n), 0);
        ASSERT(!n.drop && n.keylen == 2 && memcmp(n.key, "sk", 2) == 0 && n.size == 1000 && n.crc == small_crc &&
               p == end);
        proto_slices_ref want = {65536, 1, one};
        ASSERT_MSG(sliced ? proto_slices_ref_eq(&n.slices, &want) : n.slices.count == 0, "sliced %d", sliced);
        freeReplyObject(r);
    }
    ASSERT(h_command_is(d.c, is_error, "ERR syntax error", "MOON.HOLDINGS %lld 0 PACKED SLICEZ", d.id));
    ASSERT(h_command_is(d.c, is_error, "ERR syntax error", "MOON.HOLDINGS %lld 0 SLICES", d.id));
    free(ext);
    node_leave(&d);

    fake_node e = {0}, f = {0};
    ASSERT(node_join(&e, SECRET, 1024 * 1024, "127.0.0.1:7307") == 0);
    ASSERT(node_join(&f, SECRET, 1024 * 1024, "127.0.0.1:7308") == 0);
    /* rk1: both agree; rk2: they disagree; rk3: the one list does not combine to the CRC */
    static const char *const keys[] = {"rk1", "rk2", "rk3"};
    const uint8_t *lists[3][2] = {{packed, packed}, {packed, other}, {other, NULL}};
    for (int side = 0; side < 2; side++) {
        uint8_t blob[3 * (PROTO_REPORT_HDR + 3 + PROTO_SLICES_REF_HDR + 12)];
        size_t len = 0;
        for (int k = 0; k < 3; k++) {
            proto_report_rec rec = {keys[k], 3, SL_LEN, crc, 2, 0, 262144 * (uint64_t)k, SL_LEN, {0, 0, NULL}};
            if (lists[k][side]) rec.slices = (proto_slices_ref){65536, 3, lists[k][side]};
            len += proto_report_put(blob + len, &rec);
        }
        r = report_packed(side ? f.c : e.c, blob, len);
        ASSERT(r && r->type == REDIS_REPLY_INTEGER);
        freeReplyObject(r);
    }
    r = redisCommand(c, "MOON.REBUILD");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 4);
    ASSERT_EQ(r->element[0]->integer, 3);   /* objects */
    ASSERT_EQ(r->element[1]->integer, 6);   /* replicas */
    freeReplyObject(r);
    ASSERT_EQ(get_slices(c, "rk1", packed), 1);
    ASSERT_EQ(get_slices(c, "rk2", packed), 0);
    ASSERT_EQ(get_slices(c, "rk3", packed), 0);
    redisFree(c);
    node_leave(&e);
    node_leave(&f);
}

/* The lease in a GET reply: the expiry of its first read cap. */
static uint64_t lease_of(const redisReply *r) {
    const redisReply *e = r->element[2]->element[0]->element[0];
    te_cap cap;
    if (te_cap_decode(&cap, (const uint8_t *)e->element[3]->str, e->element[3]->len) != 0) return 0;
    return cap.expiry_ms;
}

/* Store key (size bytes, one replica), read it (a lease) and remove it:
 * its space is held for that read. The lease, 0 on failure. */
static uint64_t stored_read_removed(redisContext *c, const char *key, int size) {
    redisReply *r = redisCommand(c, "MOON.PUTSTART %s %d REPLICAS 1", key, size);
    int ok = r && r->type == REDIS_REPLY_ARRAY;
    freeReplyObject(r);
    if (!ok || !h_command_is(c, not_error, "", "MOON.PUTEND %s 1", key)) return 0;
    r = redisCommand(c, "MOON.GET %s", key);
    uint64_t lease = r && r->type == REDIS_REPLY_ARRAY ? lease_of(r) : 0;
    freeReplyObject(r);
    r = redisCommand(c, "MOON.REMOVE %s", key);
    ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return ok ? lease : 0;
}

static long long waited_ms(uint64_t since) { return (long long)(mono_ms() - since); }

/* A put that finds no room while a read holds removed space waits for
 * the reader (bounded by put_wait_ms, 1 s by default), then NOSPACE. */
static void test_put_waits_for_held_space(void) {
    fake_node n = {0};
    ASSERT(node_join(&n, SECRET, 64 << 10, "127.0.0.1:7101") == 0);
    redisContext *a = connect_master(), *b = connect_master();
    ASSERT(a && b);
    uint64_t lease = stored_read_removed(a, "w1", 64 << 10);
    ASSERT(lease > 0);
    /* nothing held could make room for twice the segment: NOSPACE at once */
    uint64_t t0 = mono_ms();
    ASSERT(h_command_is(b, is_error, "NOSPACE", "MOON.PUTSTART big %d REPLICAS 1", 128 << 10));
    ASSERT(waited_ms(t0) < 500);
    /* the reader gives its lease back 300 ms later: the put is placed then */
    redisAppendCommand(b, "MOON.PUTSTART w2 %d REPLICAS 1", 64 << 10);
    redisReply *r = NULL;
    t0 = mono_ms();
    ASSERT(redisBufferWrite(b, &(int){0}) == REDIS_OK);
    sleep_ms(300);
    ASSERT(h_command_is(a, not_error, "", "MOON.RELEASE w1 %llu", (unsigned long long)lease));
    ASSERT(redisGetReply(b, (void **)&r) == REDIS_OK);
    long long ms = waited_ms(t0);
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    freeReplyObject(r);
    printf("# placed after the lease came back: %lld ms\n", ms);
    ASSERT(ms >= 250 && ms < 1000);
    /* nobody gives the lease back: NOSPACE once the bound has passed */
    ASSERT(h_command_is(b, not_error, "", "MOON.PUTEND w2 1"));
    r = redisCommand(b, "MOON.GET w2");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY);
    lease = lease_of(r);
    freeReplyObject(r);
    ASSERT(h_command_is(b, not_error, "", "MOON.REMOVE w2"));
    t0 = mono_ms();
    ASSERT(h_command_is(a, is_error, "NOSPACE", "MOON.PUTSTART w3 %d REPLICAS 1", 64 << 10));
    ms = waited_ms(t0);
    printf("# NOSPACE after %lld ms\n", ms);
    ASSERT(ms >= 900 && ms < 1800);
    ASSERT(h_command_is(b, not_error, "", "MOON.RELEASE w2 %llu", (unsigned long long)lease));
    r = redisCommand(a, "INFO cluster");
    ASSERT(r && r->type == REDIS_REPLY_STRING);
    ASSERT(strstr(r->str, "puts_waiting:0\r\n") && strstr(r->str, "puts_waited:2\r\n") &&
           strstr(r->str, "puts_waited_nospace:1\r\n") && strstr(r->str, "held_extents:0\r\n"));
    freeReplyObject(r);
    redisFree(a);
    redisFree(b);
    node_leave(&n);
}

/* A reply [id, key, heartbeat, term, index]: the id, if index is as wanted. */
static long long registered_id(const redisReply *r, long long index) {
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 5 && r->element[4]->integer == index;
    return ok ? r->element[0]->integer : -1;
}

/* On a master just started, a node that claims no id waits (TRYAGAIN)
 * until the nodes of the cluster's past have claimed theirs and reported:
 * it then gets an id above every one they hold or named, never one of
 * theirs. A node claiming an id that went to another is told to forget
 * what it holds. */
static void test_new_nodes_wait_for_old_claims(void) {
    fake_node fresh = {0}, old = {0}, late = {0};
    fresh.c = connect_master(), old.c = connect_master(), late.c = connect_master();
    ASSERT(fresh.c && old.c && late.c);
    redisReply *r = register_as(&fresh, SECRET, 1 << 20, "127.0.0.1:7101", 0, NULL);
    ASSERT(is_error(r, "TRYAGAIN"));
    freeReplyObject(r);
    /* an old node claims id 7: it reports (index 1), the window opens */
    r = register_as(&old, SECRET, 1 << 20, "127.0.0.1:7107", 7, "00000000000000a7");
    ASSERT_EQ(registered_id(r, 1), 7);
    freeReplyObject(r);
    r = register_as(&fresh, SECRET, 1 << 20, "127.0.0.1:7101", 0, NULL);
    ASSERT(is_error(r, "TRYAGAIN"));
    freeReplyObject(r);
    /* it knew node 9 as a member: 9 may come back and claim it */
    ASSERT(h_command_is(old.c, not_error, "", "MOON.REPORTDONE 9"));
    /* 9 is listed as expected (nodes keep it in their view of members) */
    r = redisCommand(old.c, "MOON.NODES EXPECTED");
    ASSERT(r && r->type != REDIS_REPLY_ERROR && r->str && strstr(r->str, "\n9 - expected 0 0\n"));
    freeReplyObject(r);
    r = redisCommand(old.c, "MOON.NODES");
    ASSERT(r && r->type != REDIS_REPLY_ERROR && r->str && !strstr(r->str, "expected"));
    freeReplyObject(r);
    r = register_as(&fresh, SECRET, 1 << 20, "127.0.0.1:7101", 0, NULL);
    ASSERT(is_error(r, "TRYAGAIN"));
    freeReplyObject(r);
    redisContext *c = connect_master();
    ASSERT(c);
    ASSERT(h_command_is(c, not_error, "", "MOON.REBUILD"));   /* the window closes */
    r = register_as(&fresh, SECRET, 1 << 20, "127.0.0.1:7101", 0, "00000000000000f1");
    ASSERT_EQ(registered_id(r, 0), 10);
    freeReplyObject(r);
    r = redisCommand(c, "INFO cluster");
    ASSERT(r && r->type == REDIS_REPLY_STRING && strstr(r->str, "rebuild_joins_held:3\r\n"));
    freeReplyObject(r);
    /* id 10 is taken: a process that claims it from memory gets another
     * id, and forgets (index 2) what it held as 10 */
    r = register_as(&late, SECRET, 1 << 20, "127.0.0.1:7110", 10, "00000000000000b0");
    ASSERT_EQ(registered_id(r, 2), 11);
    freeReplyObject(r);
    redisFree(c);
    node_leave(&fresh);
    node_leave(&old);
    node_leave(&late);
}

/* INFO cluster's field (a number), or -1. */
static long long info_field(redisContext *c, const char *name) {
    redisReply *r = redisCommand(c, "INFO cluster");
    const char *at = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, name) : NULL;
    long long v = at ? atoll(at + strlen(name)) : -1;
    freeReplyObject(r);
    return v;
}

static int has_state(const redisReply *r, const char *state) {
    char want[32];
    snprintf(want, sizeof want, "rebuild_state:%s\r\n", state);
    return r && r->type == REDIS_REPLY_STRING && strstr(r->str, want) != NULL;
}

/* The old node claiming id, reporting one extent of key (64 B at
 * seg_off 0, replicas 1) and saying MOON.REPORTDONE, naming no peer. */
static int claim_and_report(fake_node *n, unsigned id, const char *instance, const char *key) {
    redisReply *r = register_as(n, SECRET, 1 << 20, id == 1 ? "127.0.0.1:7201" : "127.0.0.1:7202", id, instance);
    int ok = registered_id(r, 1) == id;
    freeReplyObject(r);
    n->id = id;
    return ok && h_command_is(n->c, not_error, "", "MOON.REPORT %s 64 7 1 0 0 64", key) &&
           h_command_is(n->c, not_error, "", "MOON.REPORTDONE") ? 0 : -1;
}

/* A node that joined the last master just before it died may be missing
 * from every other node's view (views are refreshed, not pushed), so
 * their MOON.REPORTDONEs do not name it: the window stays open for the
 * rejoin grace, in which every live old node claims its id. Before, the
 * first node's REPORTDONE closed it, and a put of a key the late node
 * held was taken while its report was still coming. */
static void test_window_waits_for_the_grace(void) {
    fake_node a = {0}, b = {0};
    a.c = connect_master(), b.c = connect_master();
    redisContext *c = connect_master();
    ASSERT(a.c && b.c && c);
    uint64_t t0 = mono_ms();
    ASSERT(claim_and_report(&a, 1, "00000000000000a1", "gr:a") == 0);
    ASSERT(h_command_is(c, has_state, "collecting", "INFO cluster"));
    ASSERT(h_command_is(c, is_error, "TRYAGAIN", "MOON.PUTSTART gr:b 64"));
    ASSERT(claim_and_report(&b, 2, "00000000000000b2", "gr:b") == 0);
    ASSERT(mono_ms() - t0 < 2500);   /* all of it within the grace (3 s from the start) */
    ASSERT(h_command_is(c, has_state, "collecting", "INFO cluster"));
    uint64_t end = mono_ms() + 10000;
    while (!h_command_is(c, has_state, "done", "INFO cluster") && mono_ms() < end) sleep_ms(20);
    ASSERT_EQ(info_field(c, "\r\nrebuild_recovered:"), 2);
    ASSERT_EQ(info_field(c, "\r\nrebuild_extents_refused:"), 0);
    ASSERT(h_command_is(c, is_error, "EXISTS", "MOON.PUTSTART gr:b 64"));
    redisFree(c);
    node_leave(&a);
    node_leave(&b);
}

/* A master that has just started waits for the nodes of the cluster's
 * past (the rejoin grace): a put it cannot place yet is -TRYAGAIN, not
 * NOREPLICAS (the nodes are on their way). Once the grace is over with
 * no node, the cluster truly lacks them: NOREPLICAS. */
static void test_no_nodes_yet_is_tryagain(void) {
    uint64_t t0 = mono_ms();
    redisContext *c = connect_master();
    ASSERT(c);
    ASSERT(h_command_is(c, is_error, "TRYAGAIN the master is waiting for its nodes", "MOON.PUTSTART nn:1 64"));
    redisReply *r = redisCommand(c, "MOON.MPUTSTART REPLICAS 1 nn:2 64 nn:3 64");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT(is_error(r->element[0], "TRYAGAIN") && is_error(r->element[1], "TRYAGAIN"));
    freeReplyObject(r);
    uint64_t end = mono_ms() + 20000;
    while (h_command_is(c, is_error, "TRYAGAIN", "MOON.PUTSTART nn:1 64") && mono_ms() < end) sleep_ms(50);
    long long took = (long long)(mono_ms() - t0);
    ASSERT(h_command_is(c, is_error, "NOREPLICAS", "MOON.PUTSTART nn:1 64"));
    ASSERT_MSG(took >= 2000, "NOREPLICAS after %lld ms, within the 3 s grace", took);
    redisFree(c);
}

/* ---- with etcd: the member records (members.c) ---- */

#define ETCD_PORT (port0 + MASTER_PORTS)
#define ETCD_PEER (port0 + MASTER_PORTS + 1)
#define LEADER_A  (port0 + MASTER_PORTS + 2)
#define LEADER_B  (port0 + MASTER_PORTS + 3)
#define CLUSTER   "members-test"

static h_etcd etcd;
static etcd_client *ec;              /* the test's own look at the records */
static fake_node ma, mb;             /* members of the first leader */

static void remove_etcd_dir(void) { h_etcd_remove(&etcd); }

/* A master on at with --etcd, a lease of 4 s (etcd stopped for half a
 * second in test_join_waits_for_etcd is far from costing it the lease)
 * and a rejoin grace of 30 s (far longer than any wait below: a window
 * closing within the test did not wait for it). */
static int etcd_node_timeout_ms = 5000;   /* the next etcd master's */

static pid_t start_etcd_master_of(int at, const char *cluster) {
    h_args a = {0};
    master_args(&a, at, 5000, etcd_node_timeout_ms, 2000);
    h_argf(&a, "--etcd=%s", etcd.url);
    h_arg(&a, "--cluster-name");
    h_arg(&a, cluster);
    h_arg(&a, "--etcd-lease-ttl=4");
    return h_start(a.v, at, "/dev/null", NULL, 5000);
}

static pid_t start_etcd_master(int at) { return start_etcd_master_of(at, CLUSTER); }

/* 1 if etcd holds the record of node id in cluster. */
static int recorded_in(const char *cluster, long long id) {
    char key[ETCD_KEY_MAX], val[64], err[ETCD_ERR_LEN];
    int found = 0;
    int64_t rev;
    snprintf(key, sizeof key, "/moonkv/%s/nodes/%lld", cluster, id);
    return etcd_get(ec, key, &found, val, sizeof val, &rev, err, sizeof err) == 0 && found;
}

static int recorded(long long id) { return recorded_in(CLUSTER, id); }

/* Until the leader on c read the member records (bounded): 1 once it has. */
static int members_known(redisContext *c) {
    uint64_t end = mono_ms() + 5000;
    while (info_field(c, "\r\nrebuild_members_known:") != 1 && mono_ms() < end) sleep_ms(10);
    return info_field(c, "\r\nrebuild_members_known:") == 1;
}

/* A fresh cluster's leader holds no new node for the rejoin grace: it
 * read from etcd that no member exists. Each node's record is in etcd
 * by the time its MOON.REGISTER is answered. */
static void test_members_recorded_before_the_reply(void) {
    port = LEADER_A;
    redisContext *c = connect_master();
    ASSERT(c);
    ASSERT(members_known(c));
    ma.c = connect_master(), mb.c = connect_master();
    ASSERT(ma.c && mb.c);
    redisReply *r = register_as(&ma, SECRET, 1 << 20, "127.0.0.1:7201", 0, "00000000000000a1");
    ma.id = registered_id(r, 0);
    freeReplyObject(r);
    ASSERT_EQ(ma.id, 1);
    ASSERT(recorded(ma.id));
    r = register_as(&mb, SECRET, 1 << 20, "127.0.0.1:7202", 0, "00000000000000b2");
    mb.id = registered_id(r, 0);
    freeReplyObject(r);
    ASSERT_EQ(mb.id, 2);
    ASSERT(recorded(mb.id));
    ASSERT_EQ(info_field(c, "\r\nrebuild_joins_held:"), 0);
    ASSERT_EQ(info_field(c, "\r\nmembers_recorded:"), 2);
    redisFree(c);
}

/* Node 2 joined just before the leader died: node 1's view lacks it, so
 * its MOON.REPORTDONE names nobody. The new leader expects node 2 anyway
 * (its record), keeps the window open until it reported, and closes it
 * then, long before the 30 s grace (rebuild_closed_by says why). */
static void test_new_leader_expects_recorded_members(void) {
    h_kill(master_pid);
    master_pid = -1;
    ASSERT(h_wait_role(LEADER_B, "leader", 10000) == 0);
    port = LEADER_B;
    redisContext *c = connect_master();
    ASSERT(c);
    ASSERT(members_known(c));
    /* the window is open before any node came back: two members are recorded */
    ASSERT(h_command_is(c, has_state, "collecting", "INFO cluster"));
    node_leave(&ma);
    node_leave(&mb);
    ma.c = connect_master(), mb.c = connect_master();
    ASSERT(claim_and_report(&ma, 1, "00000000000000a1", "mr:a") == 0);
    ASSERT(h_command_is(c, has_state, "collecting", "INFO cluster"));
    ASSERT(h_command_is(c, is_error, "TRYAGAIN", "MOON.PUTSTART mr:b 64"));
    redisReply *r = redisCommand(c, "MOON.NODES EXPECTED");
    ASSERT(r && r->type != REDIS_REPLY_ERROR && r->str && strstr(r->str, "\n2 - expected 0 0\n"));
    freeReplyObject(r);
    ASSERT(claim_and_report(&mb, 2, "00000000000000b2", "mr:b") == 0);
    uint64_t end = mono_ms() + 10000;
    while (!h_command_is(c, has_state, "done", "INFO cluster") && mono_ms() < end) sleep_ms(20);
    r = redisCommand(c, "INFO cluster");
    ASSERT(r && r->type == REDIS_REPLY_STRING);
    ASSERT_MSG(strstr(r->str, "rebuild_state:done\r\n") && strstr(r->str, "rebuild_closed_by:members_reported\r\n"),
               "%s", r->str);
    freeReplyObject(r);
    ASSERT_EQ(info_field(c, "\r\nrebuild_recovered:"), 2);
    ASSERT(h_command_is(c, is_error, "EXISTS", "MOON.PUTSTART mr:b 64"));
    redisFree(c);
}

/* A member that died is no longer recorded (a later leader does not wait
 * for it); a new node joins at once, above every recorded id, recorded
 * before its reply. */
static void test_dead_members_leave_etcd(void) {
    redisContext *c = connect_master();
    ASSERT(c);
    node_leave(&mb);   /* no more heartbeats: dead after the node timeout (5 s) */
    uint64_t end = mono_ms() + 15000;
    while (recorded(2) && mono_ms() < end) {
        freeReplyObject(heartbeat(&ma));
        sleep_ms(200);
    }
    ASSERT(!recorded(2));
    ASSERT(recorded(1));
    ASSERT(info_field(c, "\r\nmembers_records_deleted:") >= 1);
    long long held = info_field(c, "\r\nrebuild_joins_held:");
    fake_node n = {0};
    n.c = connect_master();
    redisReply *r = register_as(&n, SECRET, 1 << 20, "127.0.0.1:7203", 0, NULL);
    n.id = registered_id(r, 0);
    freeReplyObject(r);
    ASSERT_EQ(n.id, 3);
    ASSERT(recorded(n.id));
    ASSERT_EQ(info_field(c, "\r\nrebuild_joins_held:"), held);
    node_leave(&n);
    redisFree(c);
}

/* etcd does not answer: a join is refused with TRYAGAIN (within the
 * client's bound), never answered unrecorded; once etcd is back it goes
 * through. */
static void test_join_waits_for_etcd(void) {
    redisContext *c = connect_master();
    ASSERT(c);
    long long failures = info_field(c, "\r\nmembers_etcd_failures:");
    fake_node n = {0};
    /* The reply comes once the master's etcd calls queued before ours
     * (500 ms each while etcd is stopped) timed out: more than the usual
     * 2 s under load, and how long is not what this test checks. */
    n.c = h_proven(h_redis_ms("127.0.0.1", port, 20000), SECRET);
    ASSERT(n.c);
    ASSERT(h_sigstop(etcd.pid) == 0);   /* stopped, not only signalled */
    redisReply *r = register_as(&n, SECRET, 1 << 20, "127.0.0.1:7204", 0, NULL);
    ASSERT(kill(etcd.pid, SIGCONT) == 0);
    ASSERT_MSG(is_error(r, "TRYAGAIN"), "%s", r && r->str ? r->str : n.c->err ? n.c->errstr : "(no error)");
    freeReplyObject(r);
    ASSERT(info_field(c, "\r\nmembers_etcd_failures:") > failures);
    uint64_t end = mono_ms() + 10000;
    while (is_error(r = register_as(&n, SECRET, 1 << 20, "127.0.0.1:7204", 0, NULL), "TRYAGAIN") &&
           mono_ms() < end) {
        freeReplyObject(r);
        sleep_ms(100);
    }
    n.id = registered_id(r, 0);
    freeReplyObject(r);
    ASSERT(n.id > 3);
    ASSERT(recorded(n.id));
    /* etcd, continued, ran the puts it had received while stopped, which
     * the master had given up on (TRYAGAIN): ids 4 .. n.id - 1 joined
     * nobody, and their records must not stay (the next leader would
     * wait for them). The sweep deletes them. */
    for (long long id = 4; id < n.id; id++) {
        end = mono_ms() + 15000;
        while (recorded(id) && mono_ms() < end) sleep_ms(100);
        ASSERT_MSG(!recorded(id), "the record of id %lld stays in etcd: its join was refused", id);
    }
    node_leave(&n);
    redisFree(c);
}

/* ---- the rebuild window's two gaps (with etcd) ---- */

#define GAPS "gaps-test"
static int gap_port[2];
static pid_t gap_pid[2];
static int gap_lead;                 /* index of the leader */
static fake_node gp, gq;             /* P: a member throughout; Q: recorded, never answered */

/* Until the master on c closed its window (bounded 20 s): the ms it took
 * from t0, and rebuild_closed_by into by. */
static long long window_closed(redisContext *c, uint64_t t0, char *by, size_t len) {
    uint64_t end = mono_ms() + 20000;
    while (!h_command_is(c, has_state, "done", "INFO cluster") && mono_ms() < end) sleep_ms(20);
    long long took = (long long)(mono_ms() - t0);
    redisReply *r = redisCommand(c, "INFO cluster");
    const char *f = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "rebuild_closed_by:") : NULL;
    snprintf(by, len, "%.*s", f ? (int)strcspn(f + 18, "\r\n") : 0, f ? f + 18 : "");
    freeReplyObject(r);
    return took;
}

/* The leader dies (kill -9); the other master leads: a connection to it
 * once it read the member records, and when it was elected into *t0. */
static redisContext *fail_over(uint64_t *t0) {
    h_kill(gap_pid[gap_lead]);
    gap_pid[gap_lead] = -1;
    gap_lead = !gap_lead;
    if (h_wait_role(gap_port[gap_lead], "leader", 15000) != 0) return NULL;
    *t0 = mono_ms();
    port = gap_port[gap_lead];
    redisContext *c = connect_master();
    if (c && !members_known(c)) redisFree(c), c = NULL;
    return c;
}

/* Gap 1: node Q's MOON.REGISTER was recorded in etcd but its reply never
 * reached it (the leader died first). Q, alive, registers again without
 * an id; the new leader gives it the recorded id at once (its process
 * token is in the record) and the window closes as soon as P reported,
 * long before its deadline (10 s) or the grace (3 s). Before, Q was held
 * with TRYAGAIN while the window waited for "node 2" until the deadline. */
static void test_unanswered_member_gets_its_id(void) {
    port = gap_port[gap_lead];
    gp.c = connect_master(), gq.c = connect_master();
    ASSERT(gp.c && gq.c);
    ASSERT(members_known(gp.c));
    redisReply *r = register_as(&gp, SECRET, 1 << 20, "127.0.0.1:7301", 0, "00000000000000c1");
    gp.id = registered_id(r, 0);
    freeReplyObject(r);
    ASSERT_EQ(gp.id, 1);
    /* Q's registration: recorded, and its reply never read. */
    r = redisCommand(gq.c, "MOON.CHALLENGE");
    ASSERT(r && r->type == REDIS_REPLY_STRING && r->len == PROTO_NONCE_LEN);
    uint8_t key[16], proof[16];
    char proof_hex[33];
    proto_reg_key(SECRET, key);
    proto_reg_proof(key, (const uint8_t *)r->str, proof);
    freeReplyObject(r);
    hex(proof, 16, proof_hex);
    redisAppendCommand(gq.c, "MOON.REGISTER %s 1048576 127.0.0.1:7302 INSTANCE 00000000000000c2", proof_hex);
    int done = 0;
    while (!done && redisBufferWrite(gq.c, &done) == REDIS_OK) {}
    uint64_t end = mono_ms() + 10000;
    while (!recorded_in(GAPS, 2) && mono_ms() < end) sleep_ms(10);
    ASSERT(recorded_in(GAPS, 2));
    node_leave(&gq);
    uint64_t t0;
    redisContext *c = fail_over(&t0);
    ASSERT(c);
    ASSERT(h_command_is(c, has_state, "collecting", "INFO cluster"));
    node_leave(&gp);
    port = gap_port[gap_lead];
    gp.c = connect_master(), gq.c = connect_master();
    ASSERT(claim_and_report(&gp, 1, "00000000000000c1", "gap:p") == 0);
    r = register_as(&gq, SECRET, 1 << 20, "127.0.0.1:7302", 0, "00000000000000c2");
    gq.id = registered_id(r, 0);
    ASSERT_MSG(gq.id == 2, "Q's registration: %s", r && r->str ? r->str : "(an array)");
    freeReplyObject(r);
    char by[32];
    long long took = window_closed(c, t0, by, sizeof by);
    printf("# a recorded node that never had its reply: the window closed %lld ms after the election (%s)\n",
           took, by);
    ASSERT_STREQ(by, "members_reported");
    ASSERT_EQ(info_field(c, "\r\nrebuild_recovered:"), 1);
    redisFree(c);
}

/* Gap 2: a dead node's id. Q dies and the leader dies before it could
 * delete Q's record (the node timeout: 60 s here); P's view names a node 7 that
 * died earlier (its record is gone: a stale view, or the EXPECTED list of
 * a window that waited for it). The next leader does not wait for 7 at
 * all and waits for Q's record, which nobody names, only for the grace
 * (3 s): closed by grace_over, not by the deadline (10 s). Before, both
 * held the window to its deadline. */
static void test_dead_member_does_not_hold_the_window(void) {
    gap_pid[!gap_lead] = start_etcd_master_of(gap_port[!gap_lead], GAPS);
    ASSERT(gap_pid[!gap_lead] > 0 && h_wait_role(gap_port[!gap_lead], "standby", 10000) == 0);
    node_leave(&gq);   /* Q dies; its record stays */
    ASSERT(recorded_in(GAPS, 2));
    uint64_t t0;
    redisContext *c = fail_over(&t0);
    ASSERT(c);
    node_leave(&gp);
    gp.c = connect_master();
    redisReply *r = register_as(&gp, SECRET, 1 << 20, "127.0.0.1:7301", 1, "00000000000000c1");
    ASSERT_EQ(registered_id(r, 1), 1);
    freeReplyObject(r);
    ASSERT(h_command_is(gp.c, not_error, "", "MOON.REPORT gap:p 64 7 1 0 0 64"));
    ASSERT(h_command_is(gp.c, not_error, "", "MOON.REPORTDONE 7"));
    r = redisCommand(c, "MOON.NODES EXPECTED");
    ASSERT(r && r->type != REDIS_REPLY_ERROR && r->str && !strstr(r->str, "\n7 - expected"));
    freeReplyObject(r);
    char by[32];
    long long took = window_closed(c, t0, by, sizeof by);
    printf("# a dead node's record and a dead id named by a stale view: the window closed %lld ms after the "
           "election (%s)\n", took, by);
    ASSERT_STREQ(by, "grace_over");
    ASSERT_EQ(info_field(c, "\r\nrebuild_recovered:"), 1);
    redisFree(c);
    node_leave(&gp);
}

static void run_gap_tests(void) {
    int at = h_free_ports(2);
    if (at < 0) {
        printf("not ok - gaps/setup: no free ports\n");
        return;
    }
    gap_port[0] = at, gap_port[1] = at + 1;
    const char *grace = rejoin_grace_ms;
    rejoin_grace_ms = "3000";
    /* Q never heartbeats: with 5 s of node timeout a loaded machine's
     * slow standby start let the leader declare Q dead and delete its
     * record before the kill, and the next window closed by
     * members_reported, not by the grace the test is about. */
    etcd_node_timeout_ms = 60000;
    gap_pid[0] = start_etcd_master_of(gap_port[0], GAPS);
    if (gap_pid[0] > 0 && h_wait_role(gap_port[0], "leader", 10000) == 0) gap_pid[1] = start_etcd_master_of(gap_port[1], GAPS);
    if (gap_pid[1] <= 0 || h_wait_role(gap_port[1], "standby", 10000) != 0) {
        printf("not ok - gaps/setup\n");
        return;
    }
    gap_lead = 0;
    RUN_TEST(test_unanswered_member_gets_its_id);
    RUN_TEST(test_dead_member_does_not_hold_the_window);
    for (int i = 0; i < 2; i++) h_kill(gap_pid[i]);
    rejoin_grace_ms = grace;
    etcd_node_timeout_ms = 5000;
}

static void run_etcd_tests(void) {
    char err[ETCD_ERR_LEN];
    h_cleanup_hook = remove_etcd_dir;
    rejoin_grace_ms = "30000";
    if (h_etcd_up(&etcd, ETCD_PORT, ETCD_PEER) != 0) return;
    ec = etcd_create(etcd.url, 1000, err, sizeof err);
    master_pid = start_etcd_master(LEADER_A);
    pid_t standby = -1;
    if (master_pid > 0 && h_wait_role(LEADER_A, "leader", 10000) == 0) standby = start_etcd_master(LEADER_B);
    if (!ec || standby < 0 || h_wait_role(LEADER_B, "standby", 5000) != 0) {
        printf("not ok - members/setup\n");
        return;
    }
    RUN_TEST(test_members_recorded_before_the_reply);
    RUN_TEST(test_new_leader_expects_recorded_members);
    RUN_TEST(test_dead_members_leave_etcd);
    RUN_TEST(test_join_waits_for_etcd);
    run_gap_tests();
    node_leave(&ma);
    clean_exit = h_stop_status(standby, 10000);   /* the leader now: its etcd thread stops too */
    RUN_TEST(test_clean_shutdown);
    h_kill(etcd.pid);
    etcd_free(ec);
}

int main(void) {
    h_init(120);
    h_setup_or_exit(port0 = h_free_ports(MASTER_PORTS + 4), "free ports");
    if (start_master(5000, 5000, 2000) != 0) {
        printf("not ok - start master\n");
        return 1;
    }
    RUN_TEST(test_register_needs_secret);
    RUN_TEST(test_placement_and_lifecycle);
    RUN_TEST(test_report_and_rebuild);
    RUN_TEST(test_packed_report);
    restart_master(5000, 5000, 5000);
    RUN_TEST(test_put_waits_for_held_space);
    restart_master(5000, 5000, 2000);
    RUN_TEST(test_holdings_packed);
    RUN_TEST(test_slices_holdings_and_reports);
    restart_master(5000, 5000, 400);   /* sweeps every 100 ms */
    RUN_TEST(test_drain_copy_task);
    restart_master(300, 600, 2000);
    RUN_TEST(test_put_timeout_and_node_death);
    rejoin_grace_ms = "3000";
    restart_master(5000, 5000, 2000);
    RUN_TEST(test_no_nodes_yet_is_tryagain);
    restart_master(5000, 5000, 2000);
    RUN_TEST(test_window_waits_for_the_grace);
    rejoin_grace_ms = "60000";   /* held for as long as the test needs */
    restart_master(5000, 5000, 2000);
    RUN_TEST(test_new_nodes_wait_for_old_claims);
    /* SIGTERM and wait up to 10 s: the exit code (ASan's leak check shows here) */
    clean_exit = h_stop_status(master_pid, 10000);
    master_pid = -1;
    RUN_TEST(test_clean_shutdown);
    run_etcd_tests();
    TEST_EXIT();
}
