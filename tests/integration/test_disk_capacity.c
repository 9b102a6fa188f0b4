/* test_disk_capacity - issue 29's capacity test (docs/SSD_TIER.md):
 * two nodes with 64 MB segments and 512 MB disk tiers, replicas 1; a
 * master offloading past 80 % down to 50 %, --disk-promote-after 2.
 * - 600 MB of objects of 256 KiB to 4 MiB (sizes and bytes from a seed)
 *   are put one by one with 0 NOSPACE: puts that find no room wait while
 *   the nodes shed to disk (puts_waited moves, puts_waited_nospace 0);
 * - everything reads back byte-exact twice, in batches (mkv_get_batch:
 *   MOON.MGETPACKED, parked until the loads landed): the first read goes
 *   through temporary copies (disk_reads_unpromoted moves, records stay),
 *   the second promotes (disk_promotes moves) and offloads go on
 *   (disk_offloads grows again); no checksum error on either node.
 * Ports from h_free_ports; the disks (1 GB, allocated whole) under $TMPDIR. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

#define TIME_LIMIT_S 400
#define KIB 1024u
#define MIB (1024u * 1024u)
#define TOTAL_MB 600
#define MAX_OBJS 2048
#define BATCH 12            /* keys per batch get: at most 48 MiB */

static char dir[256];
static uint8_t *src, *big;
static uint64_t sizes[MAX_OBJS];
static int nobj;

typedef struct cluster {
    int port;   /* master; node i at port+1+2i, its data plane port+2+2i */
    char master[32];
} cluster;

static long long master_field(const cluster *cl, const char *f) { return h_port_info(cl->port, "cluster", f); }
static long long node_field(const cluster *cl, int i, const char *f) {
    return h_port_info(cl->port + 1 + 2 * i, "node", f);
}

static void start(cluster *cl) {
    cl->port = h_free_ports(5);
    snprintf(cl->master, sizeof cl->master, "127.0.0.1:%d", cl->port);
    const char *flags[] = {"--disk-high-watermark", "80", "--disk-low-watermark", "50", "--heartbeat-ms", "50",
                           "--disk-promote-after", "2", "--put-wait-ms", "30000", "--get-wait-ms", "30000",
                           NULL};
    ASSERT(h_start_master(cl->port, flags) > 0);
    for (int i = 0; i < 2; i++) {
        char disk[320];
        snprintf(disk, sizeof disk, "%s/n%d", dir, i);
        h_args a = {0};
        h_node_argv(&a, cl->master, "127.0.0.1", cl->port + 1 + 2 * i, cl->port + 2 + 2 * i, "64MB");
        const char *more[] = {"--segment-persist", "no", "--disk-dir", disk, "--disk-size", "512MB", NULL};
        h_argv(&a, more);
        ASSERT(h_spawn(a.v) > 0);
    }
    ASSERT_EQ(h_wait_nodes(cl->port, "alive", 2, 20000), 0);
}

/* Sizes from 256 KiB to 4 MiB (any byte count) summing to TOTAL_MB. */
static void plan(void) {
    uint64_t x = 0x9e3779b97f4a7c15ull, sum = 0;
    for (nobj = 0; nobj < MAX_OBJS && sum < (uint64_t)TOTAL_MB * MIB; nobj++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        sizes[nobj] = 256 * KIB + x % (4 * MIB - 256 * KIB + 1);
        sum += sizes[nobj];
    }
}

static int put_all(cluster *cl, mkv_client *c) {
    char key[32];
    for (int i = 0; i < nobj; i++) {
        snprintf(key, sizeof key, "cap%d", i);
        h_fill(src, sizes[i], (uint64_t)i + 7);
        int rc = mkv_put(c, key, strlen(key), src, sizes[i], 1);
        if (rc != MKV_OK) {
            printf("# put %s (%llu bytes): %d %s; bytes_used %lld, disk_offloads %lld\n", key,
                   (unsigned long long)sizes[i], rc, mkv_last_error(c), master_field(cl, "bytes_used"),
                   master_field(cl, "disk_offloads"));
            return -1;
        }
    }
    return 0;
}

/* Every object in batches of BATCH, byte-exact. */
static int read_all(mkv_client *c) {
    mkv_obj objs[BATCH];
    char keys[BATCH][32];
    for (int at = 0; at < nobj; at += BATCH) {
        int k = nobj - at < BATCH ? nobj - at : BATCH;
        for (int j = 0; j < k; j++) {
            snprintf(keys[j], sizeof keys[j], "cap%d", at + j);
            objs[j] = (mkv_obj){keys[j], strlen(keys[j]), big + (size_t)j * 4 * MIB, 4 * MIB, 0};
        }
        int rc = mkv_get_batch(c, objs, (size_t)k);
        if (rc != MKV_OK) {
            printf("# batch get at %d: %d %s\n", at, rc, mkv_last_error(c));
            return -1;
        }
        for (int j = 0; j < k; j++) {
            uint64_t n = sizes[at + j];
            h_fill(src, n, (uint64_t)(at + j) + 7);
            if (objs[j].status != MKV_OK || objs[j].len != n || memcmp(src, big + (size_t)j * 4 * MIB, n) != 0) {
                printf("# get %s: %d (%zu of %llu bytes)\n", keys[j], objs[j].status, objs[j].len,
                       (unsigned long long)n);
                return -1;
            }
        }
    }
    return 0;
}

static void report(const cluster *cl, const char *when, uint64_t t0) {
    printf("# %s after %.1f s: offloads %lld (%lld MB), unpromoted reads %lld, promotes %lld, puts waited %lld "
           "(NOSPACE %lld), gets waited %lld (timed out %lld, relooked %lld), DRAM %lld MB, disk objects %lld + %lld\n",
           when, (double)(mono_ms() - t0) / 1000.0, master_field(cl, "disk_offloads"),
           master_field(cl, "disk_offload_bytes") >> 20, master_field(cl, "disk_reads_unpromoted"),
           master_field(cl, "disk_promotes"), master_field(cl, "puts_waited"),
           master_field(cl, "puts_waited_nospace"), master_field(cl, "gets_waited"),
           master_field(cl, "gets_waited_timeout"), master_field(cl, "gets_waited_relooked"),
           master_field(cl, "bytes_used") >> 20,
           node_field(cl, 0, "disk_objects"), node_field(cl, 1, "disk_objects"));
}

static void test_capacity(void) {
    cluster cl;
    start(&cl);
    plan();
    mkv_client *c = NULL;
    ASSERT_EQ(h_mkv_connect_ms(&c, cl.master, NULL, 1, 60000), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, src, 4 * MIB), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, big, (size_t)BATCH * 4 * MIB), MKV_OK);
    uint64_t t0 = mono_ms();
    ASSERT_EQ(put_all(&cl, c), 0);
    report(&cl, "put", t0);
    printf("# %d objects, %d MB on 2 x 64 MB of DRAM\n", nobj, TOTAL_MB);
    long long off = master_field(&cl, "disk_offloads");
    ASSERT(off > 0);
    ASSERT(master_field(&cl, "disk_offload_bytes") >= (long long)(TOTAL_MB - 128) * MIB);
    ASSERT_EQ(master_field(&cl, "puts_waited_nospace"), 0);
    ASSERT(master_field(&cl, "puts_waited") > 0);
    ASSERT_EQ(master_field(&cl, "objects_complete"), nobj);

    ASSERT_EQ(read_all(c), 0);
    report(&cl, "first read", t0);
    long long kept = master_field(&cl, "disk_reads_unpromoted");
    ASSERT(kept > 0);   /* read once: through temporary copies */
    ASSERT_EQ(read_all(c), 0);
    report(&cl, "second read", t0);
    ASSERT(master_field(&cl, "disk_promotes") > 0);   /* read twice: promoted */
    ASSERT(master_field(&cl, "disk_offloads") > off);   /* and cold ones went down again */
    ASSERT_EQ(master_field(&cl, "gets_waited_timeout"), 0);
    ASSERT_EQ(master_field(&cl, "objects_complete"), nobj);
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(node_field(&cl, i, "disk_checksum_errors"), 0);
        ASSERT_EQ(node_field(&cl, i, "disk_io_errors"), 0);
    }
    mkv_close(c);
    h_kill_all();
}

static void cleanup(void) {
    h_kill_all();
    h_temp_dir_remove(dir, "disk-capacity");
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_cleanup_hook = cleanup;
    if (h_temp_dir(dir, sizeof dir, "disk-capacity") != 0) return 1;
    src = aligned_alloc(4096, 4 * MIB);
    big = aligned_alloc(4096, (size_t)BATCH * 4 * MIB);
    if (!src || !big) return 1;
    RUN_TEST(test_capacity);
    cleanup();
    free(src);
    free(big);
    TEST_EXIT();
}
