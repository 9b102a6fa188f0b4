/* test_node_restart - a node restart keeps its cache (issue 26): a
 * node's segment and index live in a file (--segment-file here, under the
 * test's own directory in /dev/shm), so a node killed -9 and started
 * again with the same flags comes back with its objects, proves them by
 * CRC32C, and the master keeps those replicas instead of copying them.
 * - kill -9 and restart: every object back (INFO node index_objects), no
 *   copy task runs (master tasks_done, node tasks_received), and reads
 *   are byte-exact even with the other replica's node killed;
 * - a byte flipped in the file while the node was down: that object is
 *   dropped there and repaired from the other replica;
 * - a file of another cluster name, secret or segment size is refused
 *   with an error naming the file;
 * - a damaged index log: the node drops the whole file, starts empty,
 *   and its replicas are copied again from the other node;
 * - a log whose last record a kill cut short: that record is cut off,
 *   the rest kept, the cluster whole again. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

#define NODES        2
#define OBJS         2000
#define OBJ_LEN      4096
#define BATCH        500
#define SEGMENT      "64MB"
#define TIME_LIMIT_S 240

static int port_master, port0;
#define PORT_NODE(i) (port0 + 2 * (i))
static pid_t master_pid, nodes[NODES];
static char master_addr[32], dir[64], seg_file[NODES][128];
static mkv_client *mc;
static char *vals, *back;

static const char *const master_flags[] = {"--replicas", "2", "--node-timeout-ms", "6000", "--heartbeat-ms",
                                           "200", "--rejoin-grace-ms", "0", NULL};

static long long master_field(const char *f) { return h_port_info(port_master, "cluster", f); }
static long long node_field(int i, const char *f) { return h_port_info(PORT_NODE(i), "node", f); }

static int wait_master_field(const char *f, long long want, int timeout_ms) {
    return h_wait_port_info(port_master, "cluster", f, want, timeout_ms);
}

static int wait_node_field(int i, const char *f, long long want, int timeout_ms) {
    return h_wait_port_info(PORT_NODE(i), "node", f, want, timeout_ms);
}

/* The node's INFO string field is value (e.g. segment_persist_state). */
static int node_says(int i, const char *field, const char *value) {
    redisContext *c = h_redis(PORT_NODE(i));
    redisReply *r = c ? redisCommand(c, "INFO node") : NULL;
    char want[96];
    snprintf(want, sizeof want, "\r\n%s:%s\r\n", field, value);
    int ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, want);
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return ok;
}

/* A node's flags: the same every time it starts. */
static void node_args(h_args *a, int i) {
    h_node_argv(a, master_addr, "127.0.0.1", PORT_NODE(i), PORT_NODE(i) + 1, SEGMENT);
    h_argf(a, "--segment-file=%s", seg_file[i]);
    h_arg(a, "--cluster-secret");
    h_arg(a, "restart-secret");
    h_arg(a, "--log-level");
    h_arg(a, "notice");
}

static pid_t start_node(int i) {
    h_args a = {0};
    node_args(&a, i);
    char log[128];
    snprintf(log, sizeof log, "%s/node%d.log", dir, i);
    return h_ready(h_spawn_ex(a.v, log, log), "127.0.0.1", PORT_NODE(i), NULL, 30000);
}

static int settled(int timeout_ms) {
    if (wait_master_field("under_replicated", 0, timeout_ms) == 0 &&
        wait_master_field("tasks_pending", 0, timeout_ms) == 0)
        return 0;
    printf("# not settled: under_replicated %lld, tasks_pending %lld, tasks_done %lld, tasks_failed %lld, "
           "nodes_alive %lld, node_restores %lld, restore_dropped %lld; node 1 index_objects %lld\n",
           master_field("under_replicated"), master_field("tasks_pending"), master_field("tasks_done"),
           master_field("tasks_failed"), master_field("nodes_alive"), master_field("node_restores"),
           master_field("restore_dropped"), node_field(1, "index_objects"));
    return -1;
}

static int check_all(void) {
    int bad = h_batches(mc, "obj:", 0, OBJS, BATCH, OBJ_LEN, vals, back, 0);
    if (bad) bad = h_batches(mc, "obj:", 0, OBJS, BATCH, OBJ_LEN, vals, back, 0);   /* a dead connection first */
    return bad;
}

/* kill -9 node i, then its restart with the same flags; 0 once it
 * registered and (restored) the master ended its restore number want. */
static int kill_and_restart(int i, void (*while_down)(int)) {
    h_kill(nodes[i]);
    if (while_down) while_down(i);
    nodes[i] = start_node(i);
    return nodes[i] > 0 && h_wait_node_registered(PORT_NODE(i), 20000) == 0 ? 0 : -1;
}

#define STEP(cond, what) do { if (!(cond)) { printf("# setup: %s failed\n", what); return -1; } } while (0)

static int start_all(void) {
    port_master = h_free_ports(1 + 2 * NODES);
    if (port_master < 0) return -1;
    port0 = port_master + 1;
    snprintf(master_addr, sizeof master_addr, "127.0.0.1:%d", port_master);
    snprintf(dir, sizeof dir, "%s/moonkv-node-restart-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(dir)) return -1;
    for (int i = 0; i < NODES; i++) snprintf(seg_file[i], sizeof seg_file[i], "%s/node%d.seg", dir, i);
    const char *flags[16];
    int k = 0;
    for (; master_flags[k]; k++) flags[k] = master_flags[k];
    flags[k++] = "--cluster-secret", flags[k++] = "restart-secret", flags[k] = NULL;
    STEP((master_pid = h_start_master(port_master, flags)) > 0, "master");
    for (int i = 0; i < NODES; i++) STEP((nodes[i] = start_node(i)) > 0, "a node");
    uint32_t ids[NODES];
    STEP(h_wait_members(port_master, port0, ids, NODES) == 0, "nodes registering");
    mkv_options o;
    mkv_options_init(&o);
    o.master = master_addr;
    o.transport = "tcp";
    o.replicas = 2;
    o.cluster_secret = "restart-secret";
    STEP(mkv_connect(&mc, &o) == MKV_OK, "client");
    vals = malloc((size_t)OBJS * OBJ_LEN);
    back = malloc((size_t)BATCH * OBJ_LEN);
    STEP(vals && back && mkv_register_buffer(mc, vals, (size_t)OBJS * OBJ_LEN) == MKV_OK &&
             mkv_register_buffer(mc, back, (size_t)BATCH * OBJ_LEN) == MKV_OK, "buffers");
    for (int i = 0; i < OBJS; i++) h_fill(vals + (size_t)i * OBJ_LEN, OBJ_LEN, (uint64_t)i + 1);
    int failed = h_batches(mc, "obj:", 0, OBJS, BATCH, OBJ_LEN, vals, NULL, 2);
    if (failed) printf("# %d puts failed: %s\n", failed, mkv_last_error(mc));
    STEP(failed == 0, "puts");
    /* both nodes learn what they hold (replicas 2 on 2 nodes: everything) */
    for (int i = 0; i < NODES; i++) STEP(wait_node_field(i, "index_objects", OBJS, 20000) == 0, "indexing");
    return 0;
}

/* ---- the cases ---- */

static void test_kill9_restart_keeps_every_object(void) {
    const int victim = 1;
    ASSERT(settled(20000) == 0);
    long long tasks = master_field("tasks_done");
    uint64_t t0 = mono_ms();
    ASSERT(kill_and_restart(victim, NULL) == 0);
    ASSERT(wait_master_field("node_restores", 1, 20000) == 0);
    ASSERT(wait_master_field("restore_kept", OBJS, 20000) == 0);
    printf("# node back and its %d objects confirmed %llu ms after the kill (proof %lld ms, %lld bytes)\n", OBJS,
           (unsigned long long)(mono_ms() - t0), node_field(victim, "segment_proof_ms"),
           node_field(victim, "segment_proof_bytes"));
    ASSERT(node_says(victim, "segment_persist_state", "restored"));
    ASSERT_EQ(node_field(victim, "segment_restored_objects"), OBJS);
    ASSERT_EQ(node_field(victim, "index_objects"), OBJS);
    ASSERT_EQ(node_field(victim, "checksum_errors"), 0);
    ASSERT_EQ(master_field("restore_dropped"), 0);
    ASSERT_EQ(master_field("under_replicated"), 0);
    /* no copy ran for them: none on the master, none received by the node */
    usleep(500 * 1000);
    ASSERT_EQ(master_field("tasks_pending"), 0);
    ASSERT_EQ(master_field("tasks_done"), tasks);
    ASSERT_EQ(node_field(victim, "tasks_received"), 0);
    ASSERT_EQ(master_field("objects_complete"), OBJS);
    ASSERT_EQ(check_all(), 0);
    /* the restarted node alone serves them: the other one is killed */
    h_kill(nodes[0]);
    ASSERT_EQ(check_all(), 0);
    /* and back (within the node timeout it restores too) */
    nodes[0] = start_node(0);
    ASSERT(nodes[0] > 0);
    ASSERT(wait_master_field("node_restores", 2, 20000) == 0);
    ASSERT(settled(30000) == 0);
    ASSERT_EQ(master_field("objects_complete"), OBJS);
    ASSERT_EQ(master_field("objects_lost"), 0);
}

/* The segment offset of key's extent on node id (MOON.OBJECT); -1 if none. */
static long long extent_of(const char *key, long long id) {
    redisContext *c = h_redis(port_master);
    redisReply *r = c ? redisCommand(c, "MOON.OBJECT %s", key) : NULL;
    long long off = -1;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
        if (r->element[i]->type != REDIS_REPLY_STRING || strcmp(r->element[i]->str, "replicas") != 0) continue;
        const redisReply *reps = r->element[i + 1];
        for (size_t k = 0; reps->type == REDIS_REPLY_ARRAY && k < reps->elements; k++)
            for (size_t e = 0; e < reps->element[k]->elements; e++) {
                const redisReply *x = reps->element[k]->element[e];
                if (x->elements == 3 && x->element[0]->integer == id) off = x->element[1]->integer;
            }
    }
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return off;
}

static long long flip_at;

static void flip_byte(int i) {
    int fd = open(seg_file[i], O_RDWR);
    unsigned char b = 0;
    if (fd < 0 || pread(fd, &b, 1, flip_at) != 1) return;
    b ^= 0x5a;
    if (pwrite(fd, &b, 1, flip_at) != 1) printf("# cannot flip the byte\n");
    close(fd);
}

static void test_flipped_byte_dropped_and_repaired(void) {
    const int victim = 1;
    ASSERT(settled(20000) == 0);
    long long id = node_field(victim, "node_id"), tasks = master_field("tasks_done");
    long long restores = master_field("node_restores"), dropped = master_field("restore_dropped");
    flip_at = extent_of("obj:77", id);
    ASSERT(flip_at >= 0);
    flip_at += 100;
    ASSERT(kill_and_restart(victim, flip_byte) == 0);
    ASSERT(wait_master_field("node_restores", restores + 1, 20000) == 0);
    ASSERT_EQ(node_field(victim, "segment_proof_failed"), 1);
    ASSERT_EQ(node_field(victim, "checksum_errors"), 1);
    ASSERT(wait_master_field("restore_dropped", dropped + 1, 20000) == 0);
    ASSERT(settled(30000) == 0);
    ASSERT_EQ(master_field("objects_lost"), 0);
    /* one copy repaired it, from the other replica */
    ASSERT(master_field("tasks_done") >= tasks + 1);
    ASSERT(wait_node_field(victim, "index_objects", OBJS, 20000) == 0);
    ASSERT(extent_of("obj:77", id) >= 0);
    ASSERT_EQ(check_all(), 0);
}

/* A node on file (its own port and a dead master): its exit status and
 * output within the bound, flags after the usual ones. */
static int run_on_file(const char *file, const char *const *flags, char *out, size_t outlen) {
    static int runs;
    char log[128];
    snprintf(log, sizeof log, "%s/other%d.log", dir, runs++);
    int port = h_free_port();
    h_args a = {0};
    h_node_argv(&a, "127.0.0.1:1", "127.0.0.1", port, port + 1, SEGMENT);
    h_argf(&a, "--segment-file=%s", file);
    h_argv(&a, flags);
    return h_run_or_refused(a.v, port, log, out, outlen, NULL, 20000);
}

static void test_file_of_another_cluster_refused(void) {
    char file[160], out[8192];
    snprintf(file, sizeof file, "%s/alpha.seg", dir);
    const char *alpha[] = {"--cluster-name", "alpha", "--cluster-secret", "s1", NULL};
    ASSERT_EQ(run_on_file(file, alpha, out, sizeof out), 0);   /* made the file, ran */
    const char *beta[] = {"--cluster-name", "beta", "--cluster-secret", "s1", NULL};
    int st = run_on_file(file, beta, out, sizeof out);
    ASSERT(st > 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
    ASSERT_MSG(strstr(out, "belongs to cluster 'alpha'") && strstr(out, file) && strstr(out, "rm -f"), "%.400s", out);
    const char *secret[] = {"--cluster-name", "alpha", "--cluster-secret", "s2", NULL};
    st = run_on_file(file, secret, out, sizeof out);
    ASSERT(st > 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
    ASSERT_MSG(strstr(out, "another cluster_secret") && strstr(out, file), "%.400s", out);
    const char *size[] = {"--cluster-name", "alpha", "--cluster-secret", "s1", "--segment-size", "32MB", NULL};
    st = run_on_file(file, size, out, sizeof out);
    ASSERT(st > 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
    ASSERT_MSG(strstr(out, "holds a segment of 67108864 bytes") && strstr(out, file), "%.400s", out);
    /* the one it belongs to still takes it */
    ASSERT_EQ(run_on_file(file, alpha, out, sizeof out), 0);
    /* and a live node's file is nobody else's */
    const char *same[] = {"--cluster-secret", "restart-secret", NULL};
    st = run_on_file(seg_file[0], same, out, sizeof out);
    ASSERT(st > 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
    ASSERT_MSG(strstr(out, "in use by another process"), "%.400s", out);
}

/* A byte of the index log's first record (after its 64-byte header and
 * the record's 12-byte frame), where a kill cannot have left it. */
static void damage_log(int i) {
    char log[160];
    snprintf(log, sizeof log, "%s.idx", seg_file[i]);
    int fd = open(log, O_RDWR);
    unsigned char b = 0;
    if (fd < 0 || pread(fd, &b, 1, 64 + 12 + 5) != 1) return;
    b ^= 0xff;
    if (pwrite(fd, &b, 1, 64 + 12 + 5) != 1) printf("# cannot damage the log\n");
    close(fd);
}

static void test_damaged_index_drops_the_file(void) {
    const int victim = 1;
    ASSERT(settled(20000) == 0);
    long long restores = master_field("node_restores"), tasks = master_field("tasks_done");
    ASSERT(kill_and_restart(victim, damage_log) == 0);
    ASSERT(node_says(victim, "segment_persist_state", "dropped"));
    ASSERT_EQ(node_field(victim, "segment_restored_objects"), 0);
    /* not a restore: the master drops its replicas and copies them again */
    ASSERT(settled(60000) == 0);
    ASSERT_EQ(master_field("node_restores"), restores);
    ASSERT(master_field("tasks_done") >= tasks + 1);
    ASSERT_EQ(master_field("objects_lost"), 0);
    ASSERT(wait_node_field(victim, "index_objects", OBJS, 20000) == 0);
    ASSERT_EQ(check_all(), 0);
    /* the new file is whole again: the next kill keeps everything */
    ASSERT(kill_and_restart(victim, NULL) == 0);
    ASSERT(wait_master_field("node_restores", restores + 1, 20000) == 0);
    ASSERT(node_says(victim, "segment_persist_state", "restored"));
    ASSERT_EQ(node_field(victim, "index_objects"), OBJS);
}

/* The log's last few bytes gone, as a kill in the middle of a write leaves it. */
static void tear_log(int i) {
    char log[160];
    snprintf(log, sizeof log, "%s.idx", seg_file[i]);
    struct stat sb;
    if (stat(log, &sb) != 0 || sb.st_size <= 64 + 20 || truncate(log, sb.st_size - 7) != 0)
        printf("# cannot tear the log\n");
}

/* Until the master ended a restore begun after kept0 and dropped0: it
 * judged every replica the node had (all OBJS: replicas 2 on 2 nodes). */
static int restore_ended(long long kept0, long long dropped0, int timeout_ms) {
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    long long judged;
    while ((judged = master_field("restore_kept") - kept0 + master_field("restore_dropped") - dropped0) < OBJS &&
           mono_ms() < end)
        usleep(50 * 1000);
    return judged >= OBJS ? 0 : -1;
}

static void test_torn_log_tail_is_cut(void) {
    const int victim = 1;
    ASSERT(settled(20000) == 0);
    long long restores = master_field("node_restores");
    long long kept = master_field("restore_kept"), dropped = master_field("restore_dropped");
    ASSERT(kill_and_restart(victim, tear_log) == 0);
    ASSERT(node_says(victim, "segment_persist_state", "restored"));
    ASSERT(node_field(victim, "segment_log_cut_bytes") > 0);
    ASSERT(wait_master_field("node_restores", restores + 1, 20000) == 0);
    /* What the cut record said is dropped or repaired, nothing is lost:
     * once the restore ended (under_replicated is 0 before it drops). */
    ASSERT(restore_ended(kept, dropped, 20000) == 0);
    ASSERT(settled(30000) == 0);
    ASSERT_EQ(master_field("objects_lost"), 0);
    ASSERT(wait_node_field(victim, "index_objects", OBJS, 20000) == 0);
    ASSERT_EQ(check_all(), 0);
}

static void cleanup(void) {
    h_kill_all();
    if (getenv("KEEP") && (test_failed_cases || test_case_failed)) return;   /* a failed run's logs, for a look */
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (dir[0] && strstr(dir, "moonkv-node-restart-") && system(cmd) != 0) printf("# cannot remove %s\n", dir);
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_cleanup_hook = cleanup;
    h_setup_or_exit(start_all(), "start master, nodes with segment files, client; put objects");
    RUN_TEST(test_kill9_restart_keeps_every_object);
    RUN_TEST(test_flipped_byte_dropped_and_repaired);
    RUN_TEST(test_file_of_another_cluster_refused);
    RUN_TEST(test_damaged_index_drops_the_file);
    RUN_TEST(test_torn_log_tail_is_cut);
    mkv_close(mc);
    cleanup();
    free(vals);
    free(back);
    TEST_EXIT();
}
