/* test_disk_tier - a node's disk tier flags (issue 29, docs/SSD_TIER.md):
 * - --disk-dir DIR --disk-size SIZE: the node makes its file in DIR
 *   (moonkv-<cluster>-<port>.disk, allocated whole) and INFO node says
 *   disk_tier:on with its bytes, I/O backend and counters;
 * - --disk-io plain: pread/pwrite, said in INFO;
 * - restarted on the same file with the same flags it opens it again;
 *   another --disk-size or another cluster secret is refused with an
 *   error naming the file; a file in use by a live node is refused;
 * - --disk-dir without --disk-size is refused;
 * - a disk with no room for the file: the node runs without the tier
 *   (disk_tier:off) and says why in its log, it does not crash.
 * No master: a node opens its tier before it registers. The files go in
 * a directory under $TMPDIR (or /tmp), removed at the end. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_harness.h"
#include "test.h"

#define TIME_LIMIT_S 120

static char dir[256];

/* A node on port (and port+1: data; 0: free ones) with flags: 0 if it
 * ran (stopped by us unless keep: then left running, its pid in *pidp),
 * the wait status if it exited; its log in out, its port in *portp. */
static int run_node(int port, const char *const *flags, char *out, size_t outlen, int keep, pid_t *pidp,
                    int *portp) {
    static int runs;
    char log[320];
    snprintf(log, sizeof log, "%s/node%d.log", dir, runs++);
    if (port == 0) port = h_free_ports(2);
    if (portp) *portp = port;
    h_args a = {0};
    h_node_argv(&a, "127.0.0.1:1", "127.0.0.1", port, port + 1, "16MB");
    h_arg(&a, "--segment-persist");
    h_arg(&a, "no");
    h_argv(&a, flags);
    return h_run_or_refused(a.v, port, log, out, outlen, keep ? pidp : NULL, 30000);
}

static int info_says(int port, const char *field, const char *value) {
    redisContext *c = h_redis(port);
    redisReply *r = c ? redisCommand(c, "INFO node") : NULL;
    char want[300];
    snprintf(want, sizeof want, "\r\n%s:%s\r\n", field, value);
    int ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, want);
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return ok;
}

static void test_tier_on(void) {
    char sub[300], out[8192];
    snprintf(sub, sizeof sub, "%s/a", dir);
    const char *flags[] = {"--disk-dir", sub, "--disk-size", "64MB", "--cluster-secret", "s1", NULL};
    pid_t pid;
    int port;
    ASSERT_EQ(run_node(0, flags, out, sizeof out, 1, &pid, &port), 0);
    ASSERT(info_says(port, "disk_tier", "on"));
    ASSERT(info_says(port, "disk_bytes_total", "67104768"));   /* 64 MB less its header block */
    ASSERT(info_says(port, "disk_bytes_used", "0"));
    ASSERT(info_says(port, "disk_objects", "0"));
    ASSERT(info_says(port, "disk_io", "uring") || info_says(port, "disk_io", "plain"));
    char file[400];
    snprintf(file, sizeof file, "%s/moonkv-moonkv-%d.disk", sub, port);
    struct stat st;
    ASSERT_MSG(stat(file, &st) == 0 && st.st_size == 64 << 20, "%s", file);
    ASSERT((uint64_t)st.st_blocks * 512 >= 64u << 20);   /* allocated, not sparse */
    ASSERT(info_says(port, "disk_file", file));
    h_kill(pid);
}

/* The file is named after the port: the same port, the same file. In
 * use by a live node, of another size or cluster secret: refused,
 * naming it; the same flags open it again. */
static void test_other_owner_refused(void) {
    char sub[300], out[8192], file[400];
    snprintf(sub, sizeof sub, "%s/c", dir);
    const char *mine[] = {"--disk-dir", sub, "--disk-size", "32MB", "--cluster-secret", "s1", NULL};
    pid_t pid;
    int port;
    ASSERT_EQ(run_node(0, mine, out, sizeof out, 1, &pid, &port), 0);
    snprintf(file, sizeof file, "%s/moonkv-moonkv-%d.disk", sub, port);
    /* Another node reaching the same file (a link named for its port). */
    char sub2[300], link[400];
    int port2 = h_free_ports(2);
    snprintf(sub2, sizeof sub2, "%s/c2", dir);
    snprintf(link, sizeof link, "%s/moonkv-moonkv-%d.disk", sub2, port2);
    ASSERT(mkdir(sub2, 0700) == 0 && symlink(file, link) == 0);
    const char *other[] = {"--disk-dir", sub2, "--disk-size", "32MB", "--cluster-secret", "s1", NULL};
    int st = run_node(port2, other, out, sizeof out, 0, NULL, NULL);
    ASSERT(st > 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
    ASSERT_MSG(strstr(out, "in use by another process") && strstr(out, link), "%.400s", out);
    h_kill(pid);
    const char *size[] = {"--disk-dir", sub, "--disk-size", "64MB", "--cluster-secret", "s1", NULL};
    st = run_node(port, size, out, sizeof out, 0, NULL, NULL);
    ASSERT(st > 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
    ASSERT_MSG(strstr(out, "holds 33554432 bytes") && strstr(out, file), "%.400s", out);
    const char *secret[] = {"--disk-dir", sub, "--disk-size", "32MB", "--cluster-secret", "s2", NULL};
    st = run_node(port, secret, out, sizeof out, 0, NULL, NULL);
    ASSERT(st > 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
    ASSERT_MSG(strstr(out, "belongs to another cluster") && strstr(out, file), "%.400s", out);
    ASSERT_EQ(run_node(port, mine, out, sizeof out, 1, &pid, NULL), 0);
    ASSERT(info_says(port, "disk_tier", "on"));
    ASSERT(info_says(port, "disk_dropped", "0"));
    h_kill(pid);
}

static void test_no_size_refused(void) {
    char out[8192];
    const char *flags[] = {"--disk-dir", dir, NULL};
    int st = run_node(0, flags, out, sizeof out, 0, NULL, NULL);
    ASSERT(st > 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
    ASSERT_MSG(strstr(out, "--disk-dir needs --disk-size"), "%.400s", out);
}

/* No room for the file: the node runs, without its tier. */
static void test_no_room_runs_without(void) {
    char sub[300], out[8192];
    snprintf(sub, sizeof sub, "%s/d", dir);
    const char *flags[] = {"--disk-dir", sub, "--disk-size", "1000TB", NULL};
    pid_t pid;
    int port;
    ASSERT_EQ(run_node(0, flags, out, sizeof out, 1, &pid, &port), 0);
    ASSERT(info_says(port, "disk_tier", "off"));
    ASSERT(h_wait_ping("127.0.0.1", port, 0, 1000) == 0);
    h_kill(pid);
    ASSERT_MSG(strstr(out, "runs without its disk tier"), "%.400s", out);
}

static void test_plain_io(void) {
    char sub[300], out[8192];
    snprintf(sub, sizeof sub, "%s/e", dir);
    const char *flags[] = {"--disk-dir", sub, "--disk-size", "16MB", "--disk-io", "plain", NULL};
    pid_t pid;
    int port;
    ASSERT_EQ(run_node(0, flags, out, sizeof out, 1, &pid, &port), 0);
    ASSERT(info_says(port, "disk_tier", "on"));
    ASSERT(info_says(port, "disk_io", "plain"));
    h_kill(pid);
}

static void cleanup(void) {
    h_kill_all();
    h_temp_dir_remove(dir, "disk-tier");
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_cleanup_hook = cleanup;
    if (h_temp_dir(dir, sizeof dir, "disk-tier") != 0) return 1;
    RUN_TEST(test_tier_on);
    RUN_TEST(test_other_owner_refused);
    RUN_TEST(test_no_size_refused);
    RUN_TEST(test_no_room_runs_without);
    RUN_TEST(test_plain_io);
    cleanup();
    TEST_EXIT();
}
