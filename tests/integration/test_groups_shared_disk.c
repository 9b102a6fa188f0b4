/* tests/integration/test_groups_shared_disk.c - a node shared by master
 * groups with its segment in a file and a disk tier (docs/SCALE.md "Nodes
 * shared by groups"): an etcd (SKIP without it), group a (--slots
 * 0-8191) and group b (8192-16383), each one master with disk watermarks
 * 60/30, and one node --shared-groups a,b of 16 MB kept in a file
 * (--segment-file) with a 64 MB disk tier. A libmoonkv client over the
 * groups (TCP).
 *
 * - Both groups put 256 KiB objects, taking turns, past the node's
 *   segment: each group offloads some of its own to the disk tier (the
 *   records are kept per group) and every key of both reads back
 *   byte-exact (the disk ones read straight from the node's disk the
 *   first time, --disk-promote-after 2, loaded the second).
 * - The node killed -9 and started with the same flags: it keeps its id
 *   (the segment file's), gives each group back the chunks it had (the
 *   chunks' file beside the segment), and each master keeps exactly its
 *   own objects (restore_kept), disk records included; all read back.
 * - Both masters killed -9 and started again: each rebuilds from the
 *   node's report of its own chunks and its own disk records exactly its
 *   own objects (rebuild_recovered), never the other group's; all read
 *   back byte-exact.
 * Ports from h_free_ports; files in a directory under $TMPDIR. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "core/util.h"
#include "etcd_harness.h"
#include "groups_harness.h"
#include "proto/slots.h"
#include "test.h"

static int port0;
#define MASTER_A     (port0 + 0)
#define MASTER_B     (port0 + 1)
/* etcd on port0 + 2 and + 3 (h_groups_begin) */
#define NODE_PORT    (port0 + 4)    /* its data plane on + 1 */
#define CLUSTER      "shared-disk"
#define SECRET       "shared-disk-secret"
#define LEASE_S      2
#define OBJ          (256 << 10)
#define PER_GROUP    40             /* 2 x 10 MiB on a 16 MiB segment */
#define WAIT_MS      30000
#define TIME_LIMIT_S 300

static h_etcd etcd;
static char dir[256];
static pid_t master_pid[2], node_pid;
static mkv_client *mc;
static char *src, *dst;
static char keys[2][PER_GROUP][32];
static int mport(int g) { return g ? MASTER_B : MASTER_A; }

static void cleanup(void) {
    h_kill_all();
    h_etcd_remove(&etcd);
    if (!getenv("KEEP")) h_temp_dir_remove(dir, "groups-shared-disk");
}

static pid_t start_master(int g) {
    const char *extra[] = {g ? "--group=b" : "--group=a", g ? "--slots=8192-16383" : "--slots=0-8191",
                           "--cluster-secret", SECRET, "--heartbeat-ms", "100", "--node-timeout-ms", "15000",
                           "--disk-high-watermark", "60", "--disk-low-watermark", "30", "--disk-promote-after", "2",
                           NULL};
    return h_start_etcd_role("master", mport(g), etcd.url, CLUSTER, LEASE_S, extra);
}

/* The node, the same flags every time (its log in dir/node.log). */
static pid_t start_node(void) {
    char data[48], seg[300], disk[300], log[300];
    snprintf(data, sizeof data, "--data-addrs=127.0.0.1:%d", NODE_PORT + 1);
    snprintf(seg, sizeof seg, "%s/node.seg", dir);
    snprintf(disk, sizeof disk, "%s/disk", dir);
    snprintf(log, sizeof log, "%s/node.log", dir);
    h_args a = {0};
    h_arg(&a, h_server_bin());
    const char *argv[] = {"--role", "node", "--etcd", etcd.url, "--cluster-name", CLUSTER, "--etcd-lease-ttl", "2",
                          "--shared-groups=a,b", "--segment-size", "16MB", "--prefault", "no", "--segment-file", seg,
                          "--disk-dir", disk, "--disk-size", "64MB", "--cluster-secret", SECRET, data,
                          "--log-level", "notice", NULL};
    h_argv(&a, argv);
    h_argf(&a, "--port=%d", NODE_PORT);
    return h_ready(h_spawn_ex(a.v, log, log), "127.0.0.1", NODE_PORT, NULL, 30000);
}

static long long mfield(int g, const char *f) { return h_port_info(mport(g), "cluster", f); }
static long long nfield(const char *f) { return h_port_info(NODE_PORT, "node", f); }

static void fill_obj(int g, int i) { h_fill(src, OBJ, (uint64_t)(g * 1000 + i + 1)); }

/* Key i of group g: one whose slot group g owns. */
static void make_keys(void) {
    for (int g = 0; g < 2; g++)
        for (int i = 0, next = 0; i < PER_GROUP; i++)
            do snprintf(keys[g][i], sizeof keys[g][i], "%c-%d", "ab"[g], next++);
            while ((proto_key_slot(keys[g][i], strlen(keys[g][i])) < 8192) != (g == 0));
}

/* A put retried while room is made (NOSPACE, TRYAGAIN), up to WAIT_MS. */
static int put_retry(int g, int i) {
    fill_obj(g, i);
    uint64_t end = mono_ms() + WAIT_MS;
    int rc;
    while (((rc = mkv_put(mc, keys[g][i], strlen(keys[g][i]), src, OBJ, 1)) == MKV_ENOSPACE ||
            rc == MKV_ETRYAGAIN) && mono_ms() < end)
        usleep(20000);
    return rc;
}

/* Every key of both groups byte-exact (TRYAGAIN while loaded from disk
 * or while a master rebuilds: again, up to 60 s). -1 at a wrong answer. */
static int check_all(void) {
    int left = 2 * PER_GROUP;
    uint8_t done[2][PER_GROUP] = {{0}};
    for (uint64_t end = mono_ms() + 60000; left > 0 && mono_ms() < end; usleep(20000)) {
        for (int g = 0; g < 2; g++)
            for (int i = 0; i < PER_GROUP; i++) {
                if (done[g][i]) continue;
                size_t got = 0;
                int rc = mkv_get(mc, keys[g][i], strlen(keys[g][i]), dst, OBJ, &got);
                if (rc == MKV_ETRYAGAIN || rc == MKV_ECONN || rc == MKV_ETIMEDOUT) continue;
                fill_obj(g, i);
                if (rc != MKV_OK || got != OBJ || memcmp(src, dst, OBJ) != 0) {
                    printf("# get %s: %d (%zu bytes) %s\n", keys[g][i], rc, got, mkv_last_error(mc));
                    return -1;
                }
                done[g][i] = 1;
                left--;
            }
    }
    if (left) printf("# %d keys not read back in 60 s\n", left);
    return left ? -1 : 0;
}

/* Until both masters have no task in flight. */
static int wait_tasks_landed(void) {
    uint64_t end = mono_ms() + WAIT_MS;
    while ((mfield(0, "tasks_pending") != 0 || mfield(1, "tasks_pending") != 0) && mono_ms() < end) usleep(50000);
    return mfield(0, "tasks_pending") == 0 && mfield(1, "tasks_pending") == 0 ? 0 : -1;
}

static long long node_id0;

static void test_offload_both_groups(void) {
    for (int i = 0; i < PER_GROUP; i++)
        for (int g = 0; g < 2; g++) {
            int rc = put_retry(g, i);
            ASSERT_MSG(rc == MKV_OK, "put %.31s: %d %.200s", keys[g][i], rc, mkv_last_error(mc));
        }
    uint64_t end = mono_ms() + WAIT_MS;
    while ((mfield(0, "disk_offloads") <= 0 || mfield(1, "disk_offloads") <= 0) && mono_ms() < end) usleep(50000);
    ASSERT_MSG(mfield(0, "disk_offloads") > 0 && mfield(1, "disk_offloads") > 0, "offloads: a %lld, b %lld",
               mfield(0, "disk_offloads"), mfield(1, "disk_offloads"));
    ASSERT_EQ(wait_tasks_landed(), 0);
    long long disk = nfield("disk_objects");
    printf("# offloads: group a %lld, group b %lld; %lld records on the node's disk\n", mfield(0, "disk_offloads"),
           mfield(1, "disk_offloads"), disk);
    ASSERT(disk > 0);
    ASSERT_EQ(check_all(), 0);
    /* the first read of an offloaded object: straight from the node's disk, by its group's record */
    printf("# read straight from disk: group a %lld, group b %lld\n", mfield(0, "disk_reads_direct"),
           mfield(1, "disk_reads_direct"));
    ASSERT(mfield(0, "disk_reads_direct") > 0);
    ASSERT(mfield(1, "disk_reads_direct") > 0);
    ASSERT_EQ(nfield("data_rejected"), 0);   /* each found its record (by the tag of the client's key) */
    ASSERT_EQ(nfield("disk_checksum_errors"), 0);
    ASSERT_EQ(mfield(0, "objects_complete"), PER_GROUP);
    ASSERT_EQ(mfield(1, "objects_complete"), PER_GROUP);
    node_id0 = nfield("node_id");
}

/* Until master g ended a restore of the node (node_restores past before
 * and every object kept or dropped). */
static int wait_restored(int g, long long before) {
    uint64_t end = mono_ms() + WAIT_MS;
    while ((mfield(g, "node_restores") <= before ||
            mfield(g, "restore_kept") + mfield(g, "restore_dropped") < PER_GROUP) && mono_ms() < end)
        usleep(50000);
    return mfield(g, "node_restores") > before ? 0 : -1;
}

static void test_node_restart(void) {
    ASSERT_EQ(wait_tasks_landed(), 0);
    long long disk = nfield("disk_objects"), ra = mfield(0, "node_restores"), rb = mfield(1, "node_restores");
    h_kill(node_pid);
    ASSERT((node_pid = start_node()) > 0);
    ASSERT_EQ(h_wait_node_registered(NODE_PORT, WAIT_MS), 0);
    ASSERT_EQ(nfield("node_id"), node_id0);   /* the segment file's id */
    ASSERT_EQ(wait_restored(0, ra), 0);
    ASSERT_EQ(wait_restored(1, rb), 0);
    ASSERT_EQ(nfield("disk_recovered"), disk);
    ASSERT_EQ(nfield("disk_dropped"), 0);
    for (int g = 0; g < 2; g++) {
        printf("# group %c: restore_kept %lld, dropped %lld\n", "ab"[g], mfield(g, "restore_kept"),
               mfield(g, "restore_dropped"));
        ASSERT_EQ(mfield(g, "restore_kept"), PER_GROUP);   /* its own, disk records too */
        ASSERT_EQ(mfield(g, "restore_dropped"), 0);
        ASSERT_EQ(mfield(g, "objects_lost"), 0);
    }
    ASSERT_EQ(check_all(), 0);
}

static void test_masters_rebuild(void) {
    ASSERT_EQ(wait_tasks_landed(), 0);
    for (int g = 0; g < 2; g++) h_kill(master_pid[g]);
    for (int g = 0; g < 2; g++) {
        ASSERT((master_pid[g] = start_master(g)) > 0);
        ASSERT_EQ(h_wait_role(mport(g), "leader", WAIT_MS), 0);
    }
    for (int g = 0; g < 2; g++) {
        ASSERT_EQ(h_wait_rebuilt(mport(g), NULL, WAIT_MS), 0);
        /* a report that came after the window closed is built on its own */
        uint64_t end = mono_ms() + WAIT_MS;
        while (mfield(g, "rebuild_recovered") < PER_GROUP && mono_ms() < end) usleep(50000);
        printf("# group %c rebuilt %lld objects\n", "ab"[g], mfield(g, "rebuild_recovered"));
        ASSERT_EQ(mfield(g, "rebuild_recovered"), PER_GROUP);   /* its own only */
        ASSERT_EQ(mfield(g, "objects_complete"), PER_GROUP);
    }
    ASSERT_EQ(check_all(), 0);
}

static int setup(void) {
    char step[160] = "";
    for (int g = 0; g < 2 && !step[0]; g++)
        if ((master_pid[g] = start_master(g)) < 0 || h_wait_role(mport(g), "leader", WAIT_MS) != 0)
            snprintf(step, sizeof step, "master of group %c on %d", "ab"[g], mport(g));
    if (!step[0] && (node_pid = start_node()) < 0) snprintf(step, sizeof step, "node on %d", NODE_PORT);
    if (!step[0] && (h_wait_nodes(MASTER_A, "alive", 1, WAIT_MS) != 0 || h_wait_nodes(MASTER_B, "alive", 1, WAIT_MS) != 0))
        snprintf(step, sizeof step, "the node alive in both groups");
    uint64_t end = mono_ms() + WAIT_MS;
    while (!step[0] && (mfield(0, "slots_owned") != 8192 || mfield(1, "slots_owned") != 8192))
        if (mono_ms() >= end) snprintf(step, sizeof step, "each master owns its 8192 slots");
        else usleep(50000);
    if (!step[0] && h_groups_client_ms(&mc, &etcd, CLUSTER, SECRET, "tcp", 30000) != MKV_OK)
        snprintf(step, sizeof step, "client over groups: %.100s", mkv_last_error(NULL));
    if (!step[0] && (mkv_register_buffer(mc, src, OBJ) != MKV_OK || mkv_register_buffer(mc, dst, OBJ) != MKV_OK))
        snprintf(step, sizeof step, "register buffers: %.100s", mkv_last_error(mc));
    if (!step[0]) return 0;
    printf("not ok - groups_shared_disk/setup: %s (logs in %s)\n", step, dir);
    return -1;
}

int main(void) {
    int rc = h_groups_begin("test_groups_shared_disk", TIME_LIMIT_S, cleanup, 6, &port0, &etcd, 2);
    if (rc) return rc > 0 ? 0 : 1;
    if (h_temp_dir(dir, sizeof dir, "groups-shared-disk") != 0) return 1;
    src = aligned_alloc(4096, OBJ);
    dst = aligned_alloc(4096, OBJ);
    make_keys();
    if (setup() != 0) {
        cleanup();
        return 1;
    }
    RUN_TEST(test_offload_both_groups);
    RUN_TEST(test_node_restart);
    RUN_TEST(test_masters_rebuild);
    mkv_close(mc);
    cleanup();
    free(src);
    free(dst);
    TEST_EXIT();
}
