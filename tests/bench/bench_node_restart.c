/* bench_node_restart.c - how long a node restart takes when the node
 * keeps its segment and index in a file (src/node/persist.h): a master
 * and one node holding COUNT objects of 4 KiB (replicas 1), the node
 * killed -9 and started again with the same flags; from the kill, the
 * time until its objects are served again (the master confirmed them:
 * INFO cluster restore_kept), split into the CRC32C proof (INFO node
 * segment_proof_ms) and the rest (process start, mapping, reading the
 * index log, registering, the reconcile), and the proof's GB/s next to
 * crc32c and memcpy of memory measured in this run (one thread, and
 * crc32c on as many threads as the node proves with).
 *
 *   bench_node_restart PORTS COUNT SEGMENT [DIR]
 *
 * PORTS: 3 free ports, comma-separated (master, node, its data plane).
 * The segment file goes to a directory of its own in DIR (default
 * /dev/shm; failover.sh passes a tmpfs with huge pages when it can
 * mount one), removed at the end. Objects are placed with MOON.MPUTSTART/MPUTEND and no
 * bytes written: the prefaulted file is zeros, so each is 4 KiB of
 * zeros with that CRC32C, which the restarted node proves byte by byte.
 * Output: bench.h, names node_restart.*. */
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "core/crc32c.h"
#include "core/workpool.h"
#include "integration/cluster_harness.h"

#define OBJ_SIZE 4096
#define BATCH    4096
#define REF_BYTES (512u << 20)
#define LIMIT_MS 180000

static const char *const NAMES[] = {"node_restart.serving", "node_restart.proof", "node_restart.rest",
                                    "node_restart.proof_gbps", NULL};
static int port_master, port_node, port_data;
static char dir[96], seg_file[128], segment[32];

static void skip_all(const char *why) {
    for (int i = 0; NAMES[i]; i++) bench_skip(NAMES[i], "%s", why);
}

/* ---- references: what memory does on this machine now ---- */

/* Each over as many bytes as the proof reads (total bytes / total time,
 * not the best of short rounds: on a shared machine a long pass gets the
 * share of the CPU the proof gets). */
static void references(uint64_t bytes) {
    unsigned char *a = bench_buffer(REF_BYTES, 7), *b = bench_buffer(REF_BYTES, 9);
    uint64_t us_crc = 0, us_par = 0, us_cpy = 0, done = 0;
    int helpers = workpool_helpers_for_cores(7);   /* as the node's proof (persist.c) */
    workpool *wp = helpers > 0 ? workpool_start(helpers) : NULL;
    volatile uint32_t sink = 0;
    for (; done < bytes; done += REF_BYTES) {
        uint64_t t0 = mono_us();
        sink ^= crc32c(0, a, REF_BYTES);
        uint64_t t1 = mono_us();
        sink ^= crc32c_parallel(wp, a, REF_BYTES);
        uint64_t t2 = mono_us();
        memcpy(b, a, REF_BYTES);
        uint64_t t3 = mono_us();
        us_crc += t1 - t0, us_par += t2 - t1, us_cpy += t3 - t2;
    }
    (void)sink;
    bench_result("node_restart.ref_crc_gbps", bench_gbps((double)done, us_crc), "GB/s");
    bench_result("node_restart.ref_crc_par_gbps", bench_gbps((double)done, us_par), "GB/s");
    bench_result("node_restart.ref_memcpy_gbps", bench_gbps((double)done, us_cpy), "GB/s");
    fprintf(stderr, "references over %.1f GB: crc32c %.2f GB/s (1 thread), %.2f GB/s (%d threads), memcpy %.2f GB/s\n",
            (double)done / 1e9, bench_gbps((double)done, us_crc), bench_gbps((double)done, us_par),
            workpool_width(wp), bench_gbps((double)done, us_cpy));
    workpool_stop(wp);
    free(a);
    free(b);
}

static double loadavg(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f && fscanf(f, "%lf", &l) != 1) l = -1;
    if (f) fclose(f);
    return l;
}

/* ---- the cluster ---- */

static pid_t start_node(void) {
    h_args a = {0};
    char master[32], log[128];
    snprintf(master, sizeof master, "127.0.0.1:%d", port_master);
    h_node_argv(&a, master, "127.0.0.1", port_node, port_data, segment);
    h_argf(&a, "--segment-file=%s", seg_file);
    h_arg(&a, "--prefault");   /* every page of the file real, as a node's in use are */
    h_arg(&a, "yes");
    h_arg(&a, "--log-level");
    h_arg(&a, "notice");
    snprintf(log, sizeof log, "%s/node.log", dir);
    return h_spawn_ex(a.v, log, log);
}

static long long info(int port, const char *section, const char *field) { return h_port_info(port, section, field); }

static int wait_info(int port, const char *section, const char *field, long long want, int timeout_ms) {
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    while (info(port, section, field) < want && mono_ms() < end) usleep(20 * 1000);
    return info(port, section, field) >= want ? 0 : -1;
}

/* MPUTSTART then MPUTEND for keys [first, first+n): 0 or -1. */
static int fill_batch(redisContext *rc, long first, int n, const char *crc) {
    static const char *argv[3 + 2 * BATCH];
    static size_t lens[3 + 2 * BATCH];
    static char keys[BATCH][32];
    argv[0] = "MOON.MPUTSTART", argv[1] = "REPLICAS", argv[2] = "1";
    for (int i = 0; i < n; i++) {
        lens[3 + 2 * i] = (size_t)snprintf(keys[i], sizeof keys[i], "nr:%ld", first + i);
        argv[3 + 2 * i] = keys[i];
    }
    for (int pass = 0; pass < 2; pass++) {
        const char **av = pass ? argv + 2 : argv;   /* MPUTEND key crc ...: one argument earlier */
        size_t *lv = pass ? lens + 2 : lens;
        if (pass) argv[2] = "MOON.MPUTEND";
        for (int i = 0; i < n; i++) argv[4 + 2 * i] = pass ? crc : "4096";
        for (int i = 0; i < 3; i++) lens[i] = strlen(argv[i]);
        for (int i = 0; i < n; i++) lens[4 + 2 * i] = strlen(argv[4 + 2 * i]);
        redisReply *r = redisCommandArgv(rc, 3 - 2 * pass + 2 * n, av, lv);
        int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)n;
        for (size_t i = 0; ok && i < r->elements; i++) ok = r->element[i]->type != REDIS_REPLY_ERROR;
        if (!ok) fprintf(stderr, "fill: %s: %s\n", av[0], !r ? rc->errstr : r->type == REDIS_REPLY_ERROR ? r->str : "an element failed");
        if (r) freeReplyObject(r);
        if (!ok) return -1;
    }
    return 0;
}

static int fill(long count) {
    static unsigned char zeros[OBJ_SIZE];
    char crc[16];
    snprintf(crc, sizeof crc, "%u", crc32c(0, zeros, sizeof zeros));
    redisContext *rc = h_proven(h_redis_ms("127.0.0.1", port_master, 30000), "");   /* places as a client */
    if (!rc) return -1;
    uint64_t t0 = mono_us();
    int bad = 0;
    for (long k = 0; k < count && !bad; k += BATCH) bad = fill_batch(rc, k, (int)(count - k < BATCH ? count - k : BATCH), crc);
    redisFree(rc);
    if (bad) return -1;
    fprintf(stderr, "filled %ld objects in %.1f s\n", count, (double)(mono_us() - t0) / 1e6);
    /* the node indexed (and logged) every one */
    return wait_info(port_node, "node", "index_objects", count, LIMIT_MS);
}

/* A sample of gets through libmoonkv: all there, all zeros. */
static int sample_gets(long count) {
    mkv_client *mc = NULL;
    char master[32];
    snprintf(master, sizeof master, "127.0.0.1:%d", port_master);
    if (h_mkv_connect(&mc, master, "tcp", 1) != MKV_OK) return -1;
    char *buf = calloc(1, OBJ_SIZE);
    int bad = !buf || mkv_register_buffer(mc, buf, OBJ_SIZE) != MKV_OK;
    for (int i = 0; i < 1000 && !bad; i++) {
        char key[32];
        snprintf(key, sizeof key, "nr:%ld", (long)((uint64_t)i * 7919 % (uint64_t)count));
        size_t got = 0;
        memset(buf, 1, OBJ_SIZE);
        bad = mkv_get(mc, key, strlen(key), buf, OBJ_SIZE, &got) != MKV_OK || got != OBJ_SIZE || buf[0] || buf[OBJ_SIZE - 1] ||
              memcmp(buf, buf + 1, OBJ_SIZE - 1) != 0;
    }
    mkv_close(mc);
    free(buf);
    return bad ? -1 : 0;
}

#define FAIL(what) do { fprintf(stderr, "bench_node_restart: %s\n", what); return -1; } while (0)

static int restart(long count) {
    pid_t node = h_ready(start_node(), "127.0.0.1", port_node, NULL, 60000);
    if (node < 0 || h_wait_node_registered(port_node, 30000) != 0) FAIL("the node did not register");
    if (fill(count) != 0) FAIL("the fill failed or the node did not index it");
    uint64_t t0 = mono_ms();
    h_kill(node);
    node = start_node();
    if (node < 0) FAIL("the node did not start again");
    uint64_t end = t0 + LIMIT_MS, up = 0, reg = 0;
    while (mono_ms() < end && !up) up = h_wait_ping("127.0.0.1", port_node, node, 20) == 0 ? mono_ms() : 0;
    while (mono_ms() < end && !reg) reg = info(port_node, "node", "registrations") >= 1 ? mono_ms() : (usleep(10000), 0);
    if (!up || !reg) FAIL("the restarted node did not answer or register");
    if (wait_info(port_master, "cluster", "restore_kept", count, LIMIT_MS) != 0) FAIL("the master did not keep its objects");
    uint64_t serving = mono_ms();
    int gets = sample_gets(count);
    uint64_t first_gets = mono_ms();
    long long proof_ms = info(port_node, "node", "segment_proof_ms"), bytes = info(port_node, "node", "segment_proof_bytes");
    long long map_ms = info(port_node, "node", "segment_prefault_ms"), replay_ms = info(port_node, "node", "segment_replay_ms");
    long long tasks = info(port_master, "cluster", "tasks_done"), failed = info(port_node, "node", "segment_proof_failed");
    fprintf(stderr, "restart of a node with %ld objects (%lld bytes proved): listening %llu ms after the kill, "
            "registered %llu ms, its objects confirmed %llu ms; the node mapped its file in %lld ms, read its index "
            "log in %lld ms, proved in %lld ms (%lld failed); 1000 gets %s in %llu ms after; copy tasks run: %lld\n",
            count, bytes, (unsigned long long)(up - t0), (unsigned long long)(reg - t0), (unsigned long long)(serving - t0),
            map_ms, replay_ms, proof_ms, failed, gets ? "FAILED" : "byte-exact", (unsigned long long)(first_gets - serving),
            tasks);
    if (gets != 0 || tasks != 0 || failed != 0) return -1;
    double s = (double)(serving - t0) / 1e3, proof = (double)proof_ms / 1e3;
    bench_result("node_restart.objects", (double)count, "count");
    bench_result("node_restart.serving", s, "s");
    bench_result("node_restart.proof", proof, "s");
    bench_result("node_restart.rest", s - proof, "s");
    bench_result("node_restart.map", (double)map_ms / 1e3, "s");
    bench_result("node_restart.replay", (double)replay_ms / 1e3, "s");
    bench_result("node_restart.proof_gbps", bench_gbps((double)bytes, (uint64_t)(proof_ms ? proof_ms : 1) * 1000), "GB/s");
    bench_result("node_restart.loadavg_end", loadavg(), "load");
    return 0;
}

static void cleanup(void) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "tail -n 12 '%s/node.log' >&2", dir);
    if (dir[0] && system(cmd) != 0) fprintf(stderr, "no node log\n");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (dir[0] && strstr(dir, "moonkv-bench-restart-") && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

int main(int argc, char **argv) {
    long count = argc == 4 || argc == 5 ? atol(argv[2]) : 0;
    if ((argc != 4 && argc != 5) || sscanf(argv[1], "%d,%d,%d", &port_master, &port_node, &port_data) != 3 || count < 1 ||
        count > 100000000) {
        fprintf(stderr, "usage: bench_node_restart MASTER_PORT,NODE_PORT,DATA_PORT COUNT SEGMENT [DIR]\n");
        return 2;
    }
    snprintf(segment, sizeof segment, "%s", argv[3]);
    references((uint64_t)count * OBJ_SIZE);
    bench_result("node_restart.loadavg_start", loadavg(), "load");
    h_init(900);
    h_cleanup_hook = cleanup;
    snprintf(dir, sizeof dir, "%.40s/moonkv-bench-restart-XXXXXX", argc == 5 ? argv[4] : "/dev/shm");
    if (!mkdtemp(dir)) {
        skip_all("cannot make a directory for the segment file");
        return 0;
    }
    snprintf(seg_file, sizeof seg_file, "%s/node.seg", dir);
    const char *flags[] = {"--replicas", "1", "--node-timeout-ms", "30000", "--heartbeat-ms", "500",
                           "--rejoin-grace-ms", "0", "--log-level", "notice", NULL};
    if (h_start_master(port_master, flags) < 0) skip_all("the master did not start");
    else if (restart(count) != 0) skip_all("the node did not come back with its objects: see the run log");
    h_stop_all();   /* the cleanup hook removes the directory */
    return 0;
}
