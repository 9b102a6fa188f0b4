/* test_disk_offload - the master moves objects to a node's disk tier
 * (issue 29, docs/SSD_TIER.md "Offload"):
 * - a master with --disk-high-watermark 60 --disk-low-watermark 30 and one
 *   node (16 MB segment, 64 MB disk): 12 MB of 256 KiB objects put (75 %
 *   of the segment) bring the master's segment use back under the high
 *   watermark without a remove; the master counts disk_offloads, the node
 *   holds as many records (disk_objects), and the bytes it wrote;
 * - every key reads byte-exact: one only on disk answers TRYAGAIN while
 *   the master has the node load it into a new segment extent (CRC checked
 *   by the disk read), then its bytes; each offloaded key was loaded, and
 *   disk_promotes / disk_promote_bytes count them;
 * - rounds of puts, each waiting for the offloads, store twice the segment;
 *   everything reads back byte-exact twice, with loads;
 * - removing every key empties the disk tier too (disk_objects 0: the
 *   master's drop notes reach the node) and the segment (bytes_used 0);
 * - without --disk-high-watermark nothing moves (a node with a disk tier,
 *   the segment past 60 %: disk_offloads stays 0).
 * Ports from h_free_ports; the disk file in a directory under $TMPDIR. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

#define TIME_LIMIT_S 180
#define KIB 1024u
#define OBJ (256 * KIB)
#define SEG_MB 16
#define MAX_KEYS 256

static char dir[256];
static char *src, *dst;

typedef struct cluster {
    int port;   /* master; node port+1, its data plane port+2 */
    char master[32];
} cluster;

static void start(cluster *cl, const char *const *master_flags, const char *sub) {
    cl->port = h_free_ports(3);
    snprintf(cl->master, sizeof cl->master, "127.0.0.1:%d", cl->port);
    ASSERT(h_start_master(cl->port, master_flags) > 0);
    char disk[320];
    snprintf(disk, sizeof disk, "%s/%s", dir, sub);
    h_args a = {0};
    h_node_argv(&a, cl->master, "127.0.0.1", cl->port + 1, cl->port + 2, "16MB");
    const char *more[] = {"--segment-persist", "no", "--disk-dir", disk, "--disk-size", "64MB", NULL};
    h_argv(&a, more);
    ASSERT(h_spawn(a.v) > 0);
    ASSERT_EQ(h_wait_nodes(cl->port, "alive", 1, 20000), 0);
}

static long long master_field(const cluster *cl, const char *f) { return h_port_info(cl->port, "cluster", f); }
static long long node_field(const cluster *cl, const char *f) { return h_port_info(cl->port + 1, "node", f); }

static int put_range(mkv_client *c, int from, int to) {
    char key[32];
    for (int i = from; i < to; i++) {
        snprintf(key, sizeof key, "k%d", i);
        h_fill(src, OBJ, (uint64_t)i + 1);
        int rc = mkv_put(c, key, strlen(key), src, OBJ, 1);
        if (rc != MKV_OK) {
            printf("# put %s: %d %s\n", key, rc, mkv_last_error(c));
            return -1;
        }
    }
    return 0;
}

/* Waits until the master's segment use is at most limit bytes. */
static int wait_used_below(const cluster *cl, long long limit) {
    uint64_t end = mono_ms() + 30000;
    long long used;
    while ((used = master_field(cl, "bytes_used")) > limit && mono_ms() < end) usleep(50 * 1000);
    if (used > limit)
        printf("# bytes_used %lld > %lld: disk_offloads %lld, node disk_objects %lld, tasks failed %lld\n", used,
               limit, master_field(cl, "disk_offloads"), node_field(cl, "disk_objects"),
               master_field(cl, "tasks_failed"));
    return used >= 0 && used <= limit ? 0 : -1;
}

/* Every key in [0, n) byte-exact: a key only on disk answers TRYAGAIN
 * while the master loads it (tried again for up to 30 s); how many
 * answered TRYAGAIN first (-1: a miss, wrong bytes or an error). */
static int check_all(mkv_client *c, int n) {
    int loaded = 0, left = n;
    char key[32];
    uint8_t *done = calloc((size_t)n, 1);
    /* Passes over the keys not read yet: the loads of one pass go out together. */
    for (uint64_t end = mono_ms() + 60000; left > 0 && mono_ms() < end; usleep(20 * 1000)) {
        for (int i = 0; i < n; i++) {
            if (done[i] == 1) continue;
            snprintf(key, sizeof key, "k%d", i);
            size_t got = 0;
            int rc = mkv_get(c, key, strlen(key), dst, OBJ, &got);
            if (rc == MKV_ETRYAGAIN) {
                loaded += done[i] == 0;
                done[i] = 2;   /* counted */
                continue;
            }
            h_fill(src, OBJ, (uint64_t)i + 1);
            if (rc != MKV_OK || got != OBJ || memcmp(src, dst, OBJ) != 0) {
                printf("# get %s: %d (%zu bytes) %s\n", key, rc, got, mkv_last_error(c));
                free(done);
                return -1;
            }
            done[i] = 1;
            left--;
        }
    }
    free(done);
    if (left) printf("# %d keys not read after 60 s\n", left);
    return left == 0 ? loaded : -1;
}

static void test_offload_past_high_watermark(void) {
    cluster cl;
    const char *flags[] = {"--disk-high-watermark", "60", "--disk-low-watermark", "30", "--heartbeat-ms", "100",
                           NULL};
    start(&cl, flags, "a");
    mkv_client *c = NULL;
    ASSERT_EQ(h_mkv_connect(&c, cl.master, NULL, 1), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, src, OBJ), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, dst, OBJ), MKV_OK);
    const long long seg = (long long)SEG_MB << 20;
    int n = 48;   /* 12 MB: 75 % */
    ASSERT_EQ(put_range(c, 0, n), 0);
    ASSERT_EQ(wait_used_below(&cl, seg * 60 / 100), 0);
    long long off = master_field(&cl, "disk_offloads");
    ASSERT(off > 0);
    ASSERT_EQ(master_field(&cl, "disk_offload_bytes"), off * OBJ);
    ASSERT_EQ(node_field(&cl, "disk_objects"), off);
    ASSERT(node_field(&cl, "disk_write_bytes") >= off * OBJ);
    int loads = check_all(c, n);
    printf("# read back: %d loads, %lld offloaded, %lld promoted\n", loads, off, master_field(&cl, "disk_promotes"));
    ASSERT(loads >= off);   /* each offloaded one loaded (some others went to disk meanwhile) */
    long long promoted = master_field(&cl, "disk_promotes");
    ASSERT(promoted >= loads);
    ASSERT_EQ(master_field(&cl, "disk_promote_bytes"), promoted * OBJ);
    /* Rounds of 4 MB, each once the offloads made room: twice the segment. */
    for (; n < 128; n += 16) {
        ASSERT_EQ(put_range(c, n, n + 16), 0);
        ASSERT_EQ(wait_used_below(&cl, seg * 60 / 100), 0);
    }
    off = master_field(&cl, "disk_offloads");
    printf("# %d objects of 256 KiB put on a 16 MB segment: %lld offloaded, %lld bytes used, "
           "node disk_objects %lld\n", n, off, master_field(&cl, "bytes_used"),
           node_field(&cl, "disk_objects"));
    ASSERT(off * OBJ >= (long long)n * OBJ - seg);
    ASSERT_EQ(node_field(&cl, "disk_objects"), off - master_field(&cl, "disk_promotes"));
    ASSERT_EQ(node_field(&cl, "disk_checksum_errors"), 0);
    promoted = master_field(&cl, "disk_promotes");
    loads = check_all(c, n);
    ASSERT(loads > 0);
    ASSERT_EQ(check_all(c, n) >= 0, 1);   /* twice */
    ASSERT(master_field(&cl, "disk_promotes") >= promoted + loads);
    off = master_field(&cl, "disk_offloads") - master_field(&cl, "disk_promotes");   /* on disk now */
    ASSERT(off >= 0);
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ASSERT_EQ(mkv_remove(c, key, strlen(key)), MKV_OK);
    }
    uint64_t end = mono_ms() + 30000;
    while ((node_field(&cl, "disk_objects") != 0 || master_field(&cl, "bytes_used") != 0) && mono_ms() < end)
        usleep(50 * 1000);
    ASSERT_EQ(node_field(&cl, "disk_objects"), 0);
    ASSERT_EQ(node_field(&cl, "disk_removes"), master_field(&cl, "disk_offloads"));   /* promoted or removed */
    ASSERT_EQ(master_field(&cl, "bytes_used"), 0);
    mkv_close(c);
    h_kill_all();
}

static void test_off_without_watermark(void) {
    cluster cl;
    start(&cl, NULL, "b");
    mkv_client *c = NULL;
    ASSERT_EQ(h_mkv_connect(&c, cl.master, NULL, 1), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, src, OBJ), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, dst, OBJ), MKV_OK);
    ASSERT_EQ(put_range(c, 0, 48), 0);
    usleep(1500 * 1000);   /* several sweeps */
    ASSERT_EQ(master_field(&cl, "disk_offloads"), 0);
    ASSERT_EQ(node_field(&cl, "disk_objects"), 0);
    ASSERT_EQ(check_all(c, 48), 0);
    mkv_close(c);
    h_kill_all();
}

static void cleanup(void) {
    h_kill_all();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (dir[0] && strstr(dir, "moonkv-disk-offload-") && system(cmd) != 0) printf("# cannot remove %s\n", dir);
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_cleanup_hook = cleanup;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/moonkv-disk-offload-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return 1;
    src = aligned_alloc(4096, OBJ);
    dst = aligned_alloc(4096, OBJ);
    if (!src || !dst) return 1;
    RUN_TEST(test_offload_past_high_watermark);
    RUN_TEST(test_off_without_watermark);
    cleanup();
    free(src);
    free(dst);
    TEST_EXIT();
}
