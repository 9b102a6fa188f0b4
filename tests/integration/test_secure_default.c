/* test_secure_default - issue 26's secure default for the control plane
 * and node identity (docs/SECURITY.md), on a master without requirepass:
 * - a stranger on the master: a connection that did not prove the
 *   cluster secret is refused every command the master's table flags
 *   "member" (the list comes from COMMAND, and must hold every command
 *   that changes objects or membership); nothing changed after (objects,
 *   node states, suspicions); a wrong proof, a replayed one and a
 *   registration proof do not open the gate; a proven connection places;
 * - identity: a node process started with the --node-id of a live node is
 *   refused (IDINUSE, in its log and the master's), the live node keeps
 *   its index and every object reads back byte-exact; once the live node
 *   is gone (kill -9) the claimant gets the id at its normal join pace. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "core/util.h"
#include "proto/register.h"
#include "test.h"

#define SECRET       "gate-secret"
#define OBJS         200
#define OBJ_LEN      4096
#define BATCH        100
#define TIME_LIMIT_S 180
#define LOG_MASTER   "/tmp/moonkv-test-secure-master.log"
#define LOG_CLAIMANT "/tmp/moonkv-test-secure-claimant.log"

static int port_master, port_node[3];   /* node i: RESP, data plane +1 */
static pid_t master_pid, node_pid[3];
static char master_addr[32];
static uint32_t node_id[2];
static mkv_client *mc;
static char *vals, *back;

/* ---- helpers ---- */

static long long master_field(const char *f) { return h_port_info(port_master, "cluster", f); }
static long long node_field(int i, const char *f) { return h_port_info(port_node[i], "node", f); }

static pid_t spawn_node(int i, uint32_t claim, const char *log) {
    h_args a = {0};
    h_node_argv(&a, master_addr, "127.0.0.1", port_node[i], port_node[i] + 1, "16MB");
    h_arg(&a, "--cluster-secret");
    h_arg(&a, SECRET);
    h_arg(&a, "--heartbeat-ms");
    h_arg(&a, "100");
    if (claim) h_argf(&a, "--node-id=%u", claim);
    return h_ready(h_spawn_ex(a.v, log, log), "127.0.0.1", port_node[i], NULL, 20000);
}

/* Objects missing or not byte-exact. */
static int check_all(void) { return h_batches(mc, "sec:", 0, OBJS, BATCH, OBJ_LEN, vals, back, 0); }

/* What a stranger could change: objects, nodes and their states. */
typedef struct cluster_view {
    long long complete, pending, alive, suspicions, tasks_done;
    char nodes[200];   /* MOON.TOPOLOGY: "id state;" per node */
} cluster_view;

static void view(cluster_view *v) {
    v->complete = master_field("objects_complete");
    v->pending = master_field("objects_pending");
    v->alive = master_field("nodes_alive");
    v->suspicions = master_field("suspicions");
    v->tasks_done = master_field("tasks_done");
    v->nodes[0] = '\0';
    redisContext *c = h_redis(port_master);
    redisReply *r = c ? redisCommand(c, "MOON.TOPOLOGY") : NULL;
    size_t at = 0;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type == REDIS_REPLY_ARRAY && e->elements == 3)
            at += (size_t)snprintf(v->nodes + at, sizeof v->nodes - at, "%lld %s;", e->element[0]->integer,
                                   e->element[1]->str);
        if (at >= sizeof v->nodes) break;
    }
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
}

/* ---- a stranger on the master ---- */

/* The commands COMMAND flags "member", lower case, into names. */
static size_t member_commands(redisContext *c, char names[][32], size_t max) {
    redisReply *r = redisCommand(c, "COMMAND");
    size_t n = 0;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements && n < max; i++) {
        const redisReply *row = r->element[i];
        if (row->type != REDIS_REPLY_ARRAY || row->elements < 3) continue;
        const redisReply *flags = row->element[2];
        for (size_t k = 0; k < flags->elements; k++)
            if (flags->element[k]->str && strcmp(flags->element[k]->str, "member") == 0)
                snprintf(names[n++], 32, "%s", row->element[0]->str);
    }
    if (r) freeReplyObject(r);
    return n;
}

static int listed(char names[][32], size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return 1;
    return 0;
}

/* Arguments that would do damage if the command ran (an existing key,
 * a live node); a command not named here gets "1"s up to its arity. */
static const struct {
    const char *name, *args;
} harmful[] = {
    {"moon.remove", "sec:0"},
    {"moon.flush", ""},
    {"moon.drain", "1"},
    {"moon.suspect", "1 2"},
    {"moon.putstart", "sec:new 4096 REPLICAS 1"},
    {"moon.putend", "sec:1 12345"},
    {"moon.putrevoke", "sec:2"},
    {"moon.mputstart", "REPLICAS 1 sec:new2 4096"},
    {"moon.mputend", "sec:3 12345"},
    {"moon.rebuild", ""},
    {"moon.gateway", "10.9.9.9:6379"},
    {"moon.copydone", "1 OK"},
    {"moon.badreplica", "1 sec:4 0"},
    {"moon.leave", "1"},
    {"moon.heartbeat", "1 0"},
    {"moon.holdings", "1 0"},
    {"moon.report", "sec:5 4096 0 1 0 0 4096"},
    {"moon.reportdone", ""},
    {"moon.release", "sec:6 0"},
    {"moon.mrelease", "0 sec:6"},
};
#define NHARMFUL (sizeof harmful / sizeof harmful[0])

/* The commands that may stay open (read-only inspection, the proof
 * itself, and MOON.REGISTER and MOON.HOLDLINK, which carry their own). */
static const char *const open_cmds[] = {"moon.challenge", "moon.prove", "moon.register", "moon.holdlink",
                                         "moon.get", "moon.mget", "moon.mgetpacked", "moon.exists",
                                         "moon.mexists", "moon.prefix",
                                         "moon.topology", "moon.nodes", "moon.scan", "moon.object"};

static int is_open(const char *name) {
    for (size_t i = 0; i < sizeof open_cmds / sizeof open_cmds[0]; i++)
        if (strcmp(open_cmds[i], name) == 0) return 1;
    return 0;
}

/* 1 if name with args is refused for want of the proof. */
static int refused(redisContext *c, const char *name, const char *args) {
    char line[256];
    snprintf(line, sizeof line, "%s %s", name, args);
    redisReply *r = redisCommand(c, line);
    int ok = r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0 &&
             strstr(r->str, "MOON.PROVE") != NULL;
    if (!ok) printf("# %s answered %s\n", line, r && r->str ? r->str : r ? "a non-error" : c->errstr);
    if (r) freeReplyObject(r);
    return ok;
}

/* A command not in harmful[] gets as many "1"s as its arity asks (the
 * arity is checked before the proof, so a wrong count is not a refusal). */
static const char *args_of(redisContext *c, const char *name) {
    for (size_t i = 0; i < NHARMFUL; i++)
        if (strcmp(harmful[i].name, name) == 0) return harmful[i].args;
    static char ones[64];
    long long arity = -7;
    redisReply *r = redisCommand(c, "COMMAND INFO %s", name);
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY &&
        r->element[0]->elements > 1 && r->element[0]->element[1]->type == REDIS_REPLY_INTEGER)
        arity = r->element[0]->element[1]->integer;
    if (r) freeReplyObject(r);
    long long n = (arity < 0 ? -arity : arity) - 1;
    if (n > 20) n = 20;
    ones[0] = '\0';
    for (long long i = 0; i < n; i++) strcat(ones, i ? " 1" : "1");
    return ones;
}

static void test_stranger_is_refused_every_member_command(void) {
    redisContext *c = h_redis(port_master);
    ASSERT(c);
    static char names[128][32];
    size_t n = member_commands(c, names, 128);
    printf("# %zu commands need the proof\n", n);
    /* everything that changes objects or membership is flagged ... */
    for (size_t i = 0; i < NHARMFUL; i++) ASSERT_MSG(listed(names, n, harmful[i].name), "%s is open", harmful[i].name);
    /* ... and every MOON.* command left open is one that may be */
    redisReply *all = redisCommand(c, "COMMAND LIST");
    ASSERT(all && all->type == REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < all->elements; i++) {
        const char *cmd = all->element[i]->str;
        if (strncmp(cmd, "moon.", 5) == 0 && !listed(names, n, cmd))
            ASSERT_MSG(is_open(cmd), "%s is neither gated nor meant to be open", cmd);
    }
    freeReplyObject(all);

    cluster_view before, after;
    view(&before);
    for (size_t i = 0; i < n; i++) ASSERT_MSG(refused(c, names[i], args_of(c, names[i])), "%s ran", names[i]);
    /* repeated, as an attacker would (SUSPECT over and over) */
    for (int k = 0; k < 20; k++) ASSERT(refused(c, "moon.suspect", "1 2"));
    view(&after);
    ASSERT_EQ(after.complete, before.complete);
    ASSERT_EQ(after.complete, OBJS);
    ASSERT_EQ(after.pending, before.pending);
    ASSERT_EQ(after.alive, before.alive);
    ASSERT_EQ(after.suspicions, before.suspicions);
    ASSERT_STREQ(after.nodes, before.nodes);
    ASSERT_EQ(master_field("nodes_suspect"), 0);
    ASSERT_EQ(check_all(), 0);
    /* the inspection commands stay open */
    redisReply *r = redisCommand(c, "MOON.OBJECT sec:0");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY);   /* a map, in RESP2 */
    freeReplyObject(r);
    redisFree(c);
}

/* MOON.CHALLENGE's nonce on c, into nonce; 0 or -1. */
static int challenge(redisContext *c, uint8_t nonce[PROTO_NONCE_LEN]) {
    redisReply *r = redisCommand(c, "MOON.CHALLENGE");
    int ok = r && r->type == REDIS_REPLY_STRING && r->len == PROTO_NONCE_LEN;
    if (ok) memcpy(nonce, r->str, PROTO_NONCE_LEN);
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

static int prove_with(redisContext *c, const char *hex) {
    redisReply *r = redisCommand(c, "MOON.PROVE %s", hex);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok;
}

static void test_wrong_or_replayed_proofs_are_refused(void) {
    redisContext *c = h_redis(port_master), *d = h_redis(port_master);
    ASSERT(c && d);
    uint8_t nonce[PROTO_NONCE_LEN], key[PROTO_REG_KEY_LEN], proof[PROTO_PROOF_LEN];
    char hex[2 * PROTO_PROOF_LEN + 1];
    /* no challenge first */
    ASSERT(!prove_with(c, "00112233445566778899aabbccddeeff"));
    /* the proof of another secret */
    ASSERT(challenge(c, nonce) == 0);
    ASSERT(proto_member_proof_hex("not-" SECRET, nonce, sizeof nonce, hex) == 0);
    ASSERT(!prove_with(c, hex));
    ASSERT(refused(c, "moon.remove", "sec:0"));
    /* a registration proof of the right secret is not a member proof */
    ASSERT(challenge(c, nonce) == 0);
    proto_reg_key(SECRET, key);
    proto_reg_proof(key, nonce, proof);
    hex_encode(proof, sizeof proof, hex);
    ASSERT(!prove_with(c, hex));
    ASSERT(refused(c, "moon.drain", "1"));
    /* a good proof, then the same one on another connection (replay) and
     * again on the first (one attempt per challenge) */
    ASSERT(challenge(c, nonce) == 0);
    ASSERT(proto_member_proof_hex(SECRET, nonce, sizeof nonce, hex) == 0);
    uint8_t other[PROTO_NONCE_LEN];
    ASSERT(challenge(d, other) == 0);
    ASSERT(!prove_with(d, hex));
    ASSERT(refused(d, "moon.flush", ""));
    ASSERT(prove_with(c, hex));
    ASSERT(!prove_with(c, hex));
    ASSERT_EQ(master_field("objects_complete"), OBJS);
    redisFree(c);
    redisFree(d);
}

static void test_proven_connection_is_accepted(void) {
    redisContext *c = h_proven(h_redis(port_master), SECRET);
    ASSERT(c);
    redisReply *r = redisCommand(c, "MOON.PUTSTART sec:proven 4096 REPLICAS 1");
    ASSERT_MSG(r && r->type == REDIS_REPLY_ARRAY, "PUTSTART: %s", r && r->str ? r->str : "(not an array)");
    freeReplyObject(r);
    r = redisCommand(c, "MOON.PUTREVOKE sec:proven");
    ASSERT(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    r = redisCommand(c, "MOON.SUSPECT 999");   /* runs: the node is unknown */
    ASSERT_MSG(r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOTFOUND", 8) == 0, "%s",
               r && r->str ? r->str : "(no error)");
    freeReplyObject(r);
    r = redisCommand(c, "MOON.REMOVE sec:%d", OBJS - 1);
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
    freeReplyObject(r);
    ASSERT_EQ(master_field("objects_complete"), OBJS - 1);
    /* put it back for the next cases */
    ASSERT_EQ(h_batches(mc, "sec:", OBJS - 1, 1, 1, OBJ_LEN, vals, NULL, 2), 0);
    redisFree(c);
}

/* ---- node identity ---- */

static void wait_index(int i, long long want) { h_wait_port_info(port_node[i], "node", "index_objects", want, 20000); }

static void test_claim_of_a_live_id_is_refused(void) {
    wait_index(0, OBJS);
    long long index_before = node_field(0, "index_objects");
    long long regs_before = node_field(0, "registrations");
    ASSERT_EQ(index_before, OBJS);
    unlink(LOG_CLAIMANT);
    node_pid[2] = spawn_node(2, node_id[0], LOG_CLAIMANT);
    ASSERT(node_pid[2] > 0);
    ASSERT_MSG(h_wait_file_has(LOG_CLAIMANT, "IDINUSE", 10000), "the claimant's log does not say IDINUSE");
    ASSERT(h_wait_file_has(LOG_MASTER, "claims its id while it is alive", 5000));
    /* several of its retries, at its join pace: still refused each time */
    usleep(1500 * 1000);
    ASSERT_EQ(node_field(2, "registrations"), 0);
    ASSERT_EQ(node_field(0, "registrations"), regs_before);   /* never told to join again */
    ASSERT_EQ(node_field(0, "node_id"), node_id[0]);
    ASSERT_EQ(node_field(0, "index_objects"), index_before);
    ASSERT_EQ(master_field("nodes_alive"), 2);
    ASSERT_EQ(master_field("objects_complete"), OBJS);
    ASSERT_EQ(master_field("under_replicated"), 0);
    ASSERT_EQ(check_all(), 0);
}

/* The live node dies for real (kill -9: its connection closes): the
 * claimant, still retrying, takes the id over, and the objects are
 * copied back from the other replica. */
static void test_claimant_joins_once_the_live_node_is_gone(void) {
    ASSERT(node_pid[2] > 0);
    h_kill(node_pid[0]);
    node_pid[0] = -1;
    ASSERT_MSG(h_wait_node_registered(port_node[2], 15000) == 0, "the claimant did not get in");
    ASSERT_EQ(node_field(2, "node_id"), node_id[0]);
    uint64_t end = mono_ms() + 30000;
    while (master_field("under_replicated") != 0 && mono_ms() < end) usleep(100 * 1000);
    ASSERT_EQ(master_field("under_replicated"), 0);
    ASSERT_EQ(master_field("objects_complete"), OBJS);
    ASSERT_EQ(check_all(), 0);
}

int main(void) {
    h_init(TIME_LIMIT_S);
    int base = h_free_ports(8);
    h_setup_or_exit(base, "free ports");
    port_master = base;
    for (int i = 0; i < 3; i++) port_node[i] = base + 2 + 2 * i;
    snprintf(master_addr, sizeof master_addr, "127.0.0.1:%d", port_master);
    h_args a = {0};
    h_arg(&a, h_server_bin());
    const char *const mflags[] = {"--role", "master", "--bind", "127.0.0.1", "--cluster-secret", SECRET,
                                  "--replicas", "2", "--heartbeat-ms", "100", "--node-timeout-ms", "3000",
                                  "--log-level", "notice", NULL};
    h_argv(&a, mflags);
    h_argf(&a, "--port=%d", port_master);
    unlink(LOG_MASTER);
    master_pid = h_start(a.v, port_master, LOG_MASTER, LOG_MASTER, 20000);
    h_setup_or_exit(master_pid > 0 ? 0 : -1, "start the master");
    for (int i = 0; i < 2; i++) {
        node_pid[i] = spawn_node(i, 0, NULL);
        h_setup_or_exit(node_pid[i] > 0 && h_wait_node_registered(port_node[i], 15000) == 0 ? 0 : -1,
                        "start the nodes");
        node_id[i] = (uint32_t)node_field(i, "node_id");
    }
    mkv_options o;
    mkv_options_init(&o);
    o.master = master_addr;
    o.cluster_secret = SECRET;
    o.transport = "tcp";
    o.replicas = 2;
    h_setup_or_exit(mkv_connect(&mc, &o), "connect the client");
    vals = xmalloc((size_t)OBJS * OBJ_LEN);
    back = xmalloc((size_t)OBJS * OBJ_LEN);
    for (int i = 0; i < OBJS; i++) h_fill(vals + (size_t)i * OBJ_LEN, OBJ_LEN, (uint32_t)i + 1);
    h_setup_or_exit(mkv_register_buffer(mc, vals, (size_t)OBJS * OBJ_LEN), "register vals");
    h_setup_or_exit(mkv_register_buffer(mc, back, (size_t)OBJS * OBJ_LEN), "register back");
    int failed = h_batches(mc, "sec:", 0, OBJS, BATCH, OBJ_LEN, vals, NULL, 2);
    if (failed) printf("# %d puts failed: %s\n", failed, mkv_last_error(mc));
    h_setup_or_exit(failed ? -1 : 0, "put");

    RUN_TEST(test_stranger_is_refused_every_member_command);
    RUN_TEST(test_wrong_or_replayed_proofs_are_refused);
    RUN_TEST(test_proven_connection_is_accepted);
    RUN_TEST(test_claim_of_a_live_id_is_refused);
    RUN_TEST(test_claimant_joins_once_the_live_node_is_gone);

    mkv_close(mc);
    free(vals);
    free(back);
    h_stop_all();
    unlink(LOG_MASTER);
    unlink(LOG_CLAIMANT);
    TEST_EXIT();
}
