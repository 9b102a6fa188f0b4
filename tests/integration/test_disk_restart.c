/* test_disk_restart - the disk tier across restarts (issue 29,
 * docs/SSD_TIER.md "Restart"): a node's disk records are reported to the
 * master as its segment's objects are, so nothing offloaded is lost.
 * A master (watermarks 60/30, heartbeat 100 ms) and one node (16 MB
 * segment kept in a file, 64 MB disk), 48 objects of 256 KiB put with
 * replicas 1, some of them offloaded; then:
 * - the node killed -9 and started again with the same flags: its scan
 *   finds every record (disk_recovered, none dropped), the master keeps
 *   the disk replicas (restore_kept covers every object, none lost), and
 *   every key reads back byte-exact (the disk ones through a load);
 * - the same with --disk-io plain (pread/pwrite);
 * - the master killed -9 and started again: it rebuilds the disk
 *   replicas from the node's report (rebuild_recovered covers every
 *   object), every key reads back byte-exact;
 * - a byte of one record's value flipped while the node was down: the
 *   scan drops that record (disk_dropped 1), the master drops the replica
 *   (replicas 1: the object is lost) and its get is a miss, never wrong
 *   bytes; every other key reads back byte-exact;
 * - the node's disk directory on a small file system that another process
 *   fills after the node made its file (a tmpfs in a private mount
 *   namespace, `unshare -rm`; skipped where that is not allowed): puts
 *   past both tiers get a clean NOSPACE, the node keeps serving, every
 *   key acknowledged reads back byte-exact;
 * - objects striped over two nodes: each node offloads its own share,
 *   gets load both shares back byte-exact, a node killed -9 and
 *   restarted keeps its shares, so does a master killed -9 and restarted
 *   (it joins the shares into the objects again); with one share's node
 *   gone at the master's restart no such object is served, and the
 *   leftover shares are freed; a share damaged while its node was down
 *   makes its object a miss (replicas 1), its other share freed; a
 *   drain pushes shares to a third node.
 * Ports from h_free_ports; files in a directory under $TMPDIR. */
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

#define TIME_LIMIT_S 300
#define KIB 1024u
#define OBJ (256 * KIB)
#define NOBJ 48              /* 12 MB: 75 % of the segment */
#define SEG_BYTES (16ll << 20)
#define WAIT_MS 30000

static char dir[256];
static char *src, *dst;

#define MAX_NODES 3

typedef struct cluster {
    int port;              /* master; node i port+1+2i, its data plane the next */
    char master[32];
    char sub[300];         /* the cluster's files; node i's in sub/n<i> */
    const char *io;        /* --disk-io */
    const char *const *mflags;
    int full;              /* node 0's disk directory: a small tmpfs another process fills */
    int replicas;          /* of each put (0: 1) */
    int nodes;
    pid_t master_pid, node_pid, node1_pid, node2_pid;
} cluster;

/* test_full_directory's file system: room for the tier's file and a
 * little more, which dd takes once the file is made. */
#define FULL_FS "40m"
#define FULL_DISK "24MB"

/* The node's argv in a private mount namespace (unshare -rm) with a tmpfs
 * of FULL_FS on disk; a subshell fills it once the node made its file
 * and touches marker (outside it). */
static void full_prefix(h_args *a, const char *disk, const char *marker, char *script, size_t len) {
    snprintf(script, len,
             "mount -t tmpfs -o size=" FULL_FS " none '%s' || exit 1; "
             "(while [ -z \"$(ls '%s')\" ]; do sleep 0.1; done; sleep 0.5; "
             "dd if=/dev/zero of='%s/fill' bs=1M >/dev/null 2>&1; touch '%s') & exec \"$@\"",
             disk, disk, disk, marker);
    const char *pre[] = {"unshare", "-rm", "sh", "-c", script, "sh", NULL};
    h_argv(a, pre);
}

static const char *const master_flags[] = {"--disk-high-watermark", "60", "--disk-low-watermark", "30",
                                           "--heartbeat-ms", "100", "--node-timeout-ms", "15000",
                                           "--rejoin-grace-ms", "0", NULL};

static long long master_field(const cluster *cl, const char *f) { return h_port_info(cl->port, "cluster", f); }
static long long node_field(const cluster *cl, const char *f) { return h_port_info(cl->port + 1, "node", f); }
static long long node_i_field(const cluster *cl, int i, const char *f) {
    return h_port_info(cl->port + 1 + 2 * i, "node", f);
}

static int wait_master_at_least(const cluster *cl, const char *f, long long want) {
    uint64_t end = mono_ms() + WAIT_MS;
    while (master_field(cl, f) < want && mono_ms() < end) usleep(50 * 1000);
    return master_field(cl, f) >= want ? 0 : -1;
}

/* Node i, the same flags every time. */
static pid_t start_node_i(cluster *cl, int i) {
    h_args a = {0};
    char seg[400], disk[400], log[400], marker[400], script[2048];
    snprintf(seg, sizeof seg, "%s/n%d/node.seg", cl->sub, i);
    snprintf(disk, sizeof disk, "%s/n%d/disk", cl->sub, i);
    snprintf(log, sizeof log, "%s/n%d/node.log", cl->sub, i);
    snprintf(marker, sizeof marker, "%s/n%d/filled", cl->sub, i);
    int full = cl->full && i == 0;
    if (full) {
        mkdir(disk, 0700);
        full_prefix(&a, disk, marker, script, sizeof script);
    }
    h_node_argv(&a, cl->master, "127.0.0.1", cl->port + 1 + 2 * i, cl->port + 2 + 2 * i, "16MB");
    const char *more[] = {"--segment-file", seg, "--disk-dir", disk, "--disk-size", full ? FULL_DISK : "64MB",
                          "--disk-io", cl->io, "--log-level", "notice", NULL};
    h_argv(&a, more);
    return h_ready(h_spawn_ex(a.v, log, log), "127.0.0.1", cl->port + 1 + 2 * i, NULL, 30000);
}

static pid_t start_node(cluster *cl) { return start_node_i(cl, 0); }

/* A master (mflags, or master_flags) and nodes nodes. */
static int start_n(cluster *cl, const char *name, const char *io, int nodes, const char *const *mflags) {
    cluster keep = *cl;
    memset(cl, 0, sizeof *cl);
    cl->full = keep.full;
    cl->replicas = keep.replicas;
    cl->nodes = nodes;
    cl->port = h_free_ports(1 + 2 * MAX_NODES);
    cl->io = io;
    cl->mflags = mflags ? mflags : master_flags;
    snprintf(cl->master, sizeof cl->master, "127.0.0.1:%d", cl->port);
    snprintf(cl->sub, sizeof cl->sub, "%s/%s", dir, name);
    if (mkdir(cl->sub, 0700) != 0) return -1;
    for (int i = 0; i < nodes; i++) {
        char d[400];
        snprintf(d, sizeof d, "%s/n%d", cl->sub, i);
        if (mkdir(d, 0700) != 0) return -1;
    }
    if ((cl->master_pid = h_start_master(cl->port, cl->mflags)) <= 0) return -1;
    if ((cl->node_pid = start_node(cl)) <= 0 || (nodes > 1 && (cl->node1_pid = start_node_i(cl, 1)) <= 0) ||
        (nodes > 2 && (cl->node2_pid = start_node_i(cl, 2)) <= 0))
        return -1;
    if (h_wait_nodes(cl->port, "alive", nodes, 20000) != 0) return -1;
    for (int i = 0; i < nodes; i++)
        if (h_wait_node_registered(cl->port + 1 + 2 * i, 20000) != 0) return -1;
    return 0;
}

static int start(cluster *cl, const char *name, const char *io) { return start_n(cl, name, io, 1, NULL); }

static int connect_client(const cluster *cl, mkv_client **c) {
    /* tcp: what this test is about is the disk, not the transport
     * (test_client_shm restarts a node under an shm client) */
    if (h_mkv_connect_ms(c, cl->master, "tcp", 1, 30000) != MKV_OK) return -1;   /* generous: SAN, load */
    return mkv_register_buffer(*c, src, OBJ) == MKV_OK && mkv_register_buffer(*c, dst, OBJ) == MKV_OK ? 0 : -1;
}

static void key_of(int i, char *key, size_t len) { snprintf(key, len, "dkey-%04d", i); }

/* Puts keys [from, to): how many were stored (stops at the first
 * NOSPACE when stop_full, else at any error). */
static int put_range(const cluster *cl, mkv_client *c, int from, int to, int stop_full) {
    char key[32];
    for (int i = from; i < to; i++) {
        key_of(i, key, sizeof key);
        h_fill(src, OBJ, (uint64_t)i + 1);
        int rc = mkv_put(c, key, strlen(key), src, OBJ, cl->replicas ? cl->replicas : 1);
        if (rc == MKV_ENOSPACE && stop_full) return i - from;
        if (rc != MKV_OK) {
            printf("# put %s: %d %s\n", key, rc, mkv_last_error(c));
            return -1;
        }
    }
    return to - from;
}

/* Until the master's segment use is under the high watermark (offloads
 * made room): 0, or -1. */
static int wait_offloaded(const cluster *cl) {
    uint64_t end = mono_ms() + WAIT_MS;
    long long used, high = SEG_BYTES * cl->nodes * 60 / 100;
    while ((used = master_field(cl, "bytes_used")) > high && mono_ms() < end) usleep(50 * 1000);
    if (used < 0 || used > high) printf("# bytes_used %lld > %lld\n", used, high);
    return used >= 0 && used <= high && master_field(cl, "disk_offloads") > 0 ? 0 : -1;
}

/* Each key of [0, n) with ok[i] set reads back byte-exact (TRYAGAIN while
 * loaded from disk, tried again for up to 60 s), each with ok[i] 0 as a
 * miss. -1 at the first wrong answer. */
static int check_keys(mkv_client *c, int n, const uint8_t *ok) {
    char key[32];
    int left = n;
    uint8_t *done = calloc((size_t)n, 1);
    for (uint64_t end = mono_ms() + 60000; left > 0 && mono_ms() < end; usleep(20 * 1000)) {
        for (int i = 0; i < n; i++) {
            if (done[i]) continue;
            key_of(i, key, sizeof key);
            size_t got = 0;
            int rc = mkv_get(c, key, strlen(key), dst, OBJ, &got);
            if (rc == MKV_ETRYAGAIN || rc == MKV_ECONN) continue;   /* loading; or the master's restart */
            h_fill(src, OBJ, (uint64_t)i + 1);
            int right = ok[i] ? rc == MKV_OK && got == OBJ && memcmp(src, dst, OBJ) == 0 : rc == MKV_ENOTFOUND;
            if (!right) {
                printf("# get %s: %d (%zu bytes) %s, expected %s\n", key, rc, got, mkv_last_error(c),
                       ok[i] ? "its bytes" : "a miss");
                free(done);
                return -1;
            }
            done[i] = 1;
            left--;
        }
    }
    free(done);
    if (left) printf("# %d keys not read after 60 s\n", left);
    return left == 0 ? 0 : -1;
}

static int check_all(mkv_client *c, int n) {
    uint8_t ok[NOBJ * 4];
    memset(ok, 1, sizeof ok);
    return check_keys(c, n, ok);
}

/* A cluster with NOBJ objects, some offloaded, no task in flight: how
 * many are on disk. */
static long long fill(cluster *cl, mkv_client **c) {
    if (connect_client(cl, c) != 0 || put_range(cl, *c, 0, NOBJ, 0) != NOBJ || wait_offloaded(cl) != 0) return -1;
    uint64_t end = mono_ms() + WAIT_MS;
    while (master_field(cl, "tasks_pending") != 0 && mono_ms() < end) usleep(50 * 1000);
    if (master_field(cl, "tasks_pending") != 0) return -1;
    long long off = node_field(cl, "disk_objects");
    printf("# %d objects put, %lld on disk\n", NOBJ, off);
    return off;
}

/* The node killed -9, while_down run, the node started again with the
 * same flags; 0 once the master ended its restore (node_restores moved
 * and every object kept or dropped). */
static int restart_node(cluster *cl, void (*while_down)(const cluster *)) {
    long long restores = master_field(cl, "node_restores");
    h_kill(cl->node_pid);
    if (while_down) while_down(cl);
    if ((cl->node_pid = start_node(cl)) <= 0 || h_wait_node_registered(cl->port + 1, 20000) != 0) {
        printf("# the node did not come back: see %s/n0/node.log\n", cl->sub);
        return -1;
    }
    if (wait_master_at_least(cl, "node_restores", restores + 1) != 0) {
        printf("# no restore: node_restores %lld\n", master_field(cl, "node_restores"));
        return -1;
    }
    uint64_t end = mono_ms() + WAIT_MS;   /* the restore ends at the node's MOON.REPORTDONE */
    while (master_field(cl, "restore_kept") + master_field(cl, "restore_dropped") < NOBJ && mono_ms() < end)
        usleep(50 * 1000);
    return master_field(cl, "restore_kept") + master_field(cl, "restore_dropped") >= NOBJ ? 0 : -1;
}

static void node_restart_keeps(const char *name, const char *io) {
    cluster cl = {0};
    mkv_client *c = NULL;
    ASSERT_EQ(start(&cl, name, io), 0);
    long long off = fill(&cl, &c);
    ASSERT(off > 0);
    ASSERT_EQ(restart_node(&cl, NULL), 0);
    ASSERT_EQ(node_field(&cl, "disk_recovered"), off);
    ASSERT_EQ(node_field(&cl, "disk_dropped"), 0);
    ASSERT_EQ(master_field(&cl, "restore_kept"), NOBJ);   /* the disk replicas too */
    ASSERT_EQ(master_field(&cl, "restore_dropped"), 0);
    ASSERT_EQ(master_field(&cl, "objects_lost"), 0);
    long long promotes = master_field(&cl, "disk_promotes");
    ASSERT_EQ(check_all(c, NOBJ), 0);
    ASSERT(master_field(&cl, "disk_promotes") >= promotes + off);   /* each read from its disk record */
    ASSERT_EQ(node_field(&cl, "disk_checksum_errors"), 0);
    mkv_close(c);
    h_kill_all();
}

static void test_node_restart(void) { node_restart_keeps("restart", "auto"); }
static void test_node_restart_plain(void) { node_restart_keeps("plain", "plain"); }

static void test_master_restart(void) {
    cluster cl = {0};
    mkv_client *c = NULL;
    ASSERT_EQ(start(&cl, "master", "auto"), 0);
    long long off = fill(&cl, &c);
    ASSERT(off > 0);
    h_kill(cl.master_pid);
    ASSERT((cl.master_pid = h_start_master(cl.port, cl.mflags)) > 0);
    ASSERT_EQ(h_wait_rebuilt(cl.port, NULL, WAIT_MS), 0);
    ASSERT_EQ(master_field(&cl, "rebuild_recovered"), NOBJ);
    ASSERT_EQ(node_field(&cl, "disk_objects"), off);   /* not forgotten */
    ASSERT_EQ(check_all(c, NOBJ), 0);
    ASSERT(master_field(&cl, "disk_promotes") >= off);
    mkv_close(c);
    h_kill_all();
}

/* The first record in the disk file (a header block: its magic, then a
 * key of ours in it) has its value's 1000th byte flipped (the header is
 * one 4 KiB block for short keys); damaged_key says whose, or -1. */
static int damaged_key;

static int key_in(const char *block) {
    char key[32];
    for (int i = 0; i < NOBJ; i++) {
        key_of(i, key, sizeof key);
        if (memmem(block, 4096, key, strlen(key))) return i;
    }
    return -1;
}

static void flip_record(const cluster *cl) {
    char path[512];
    snprintf(path, sizeof path, "%s/n0/disk/moonkv-moonkv-%d.disk", cl->sub, cl->port + 1);
    damaged_key = -1;
    int fd = open(path, O_RDWR);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        printf("# cannot open %s\n", path);
        damaged_key = -1;
        return;
    }
    char *block = malloc(4096);
    off_t at = -1;
    for (off_t b = 4096; b < st.st_size && at < 0; b += 4096) {
        if (pread(fd, block, 4096, b) != 4096) break;
        if (memcmp(block, "MKVDREC1", 8) == 0 && (damaged_key = key_in(block)) >= 0) at = b + 4096 + 1000;
    }
    uint8_t byte;
    if (at < 0 || pread(fd, &byte, 1, at) != 1 || (byte ^= 0x5a, pwrite(fd, &byte, 1, at)) != 1) {
        printf("# no record found in %s\n", path);
        damaged_key = -1;
    }
    free(block);
    close(fd);
}

static void test_damaged_record_dropped(void) {
    cluster cl = {0};
    mkv_client *c = NULL;
    ASSERT_EQ(start(&cl, "damage", "auto"), 0);
    long long off = fill(&cl, &c);
    ASSERT(off > 0);
    uint8_t ok[NOBJ];
    memset(ok, 1, sizeof ok);
    ASSERT_EQ(restart_node(&cl, flip_record), 0);
    ASSERT(damaged_key >= 0);
    ok[damaged_key] = 0;
    printf("# record of key %d damaged\n", damaged_key);
    ASSERT_EQ(node_field(&cl, "disk_dropped"), 1);
    ASSERT_EQ(node_field(&cl, "disk_recovered"), off - 1);
    ASSERT_EQ(master_field(&cl, "restore_dropped"), 1);
    ASSERT_EQ(master_field(&cl, "objects_lost"), 1);
    ASSERT_EQ(check_keys(c, NOBJ, ok), 0);
    mkv_close(c);
    h_kill_all();
}

/* Replicas 2 on two nodes, both offloading their replicas; a byte of the
 * first record on node 0's disk flipped while it was down: the scan drops
 * it, the master drops that replica and repairs it from node 1's (from
 * its segment, or its disk through a push), nothing is lost, every key
 * reads back byte-exact, the damaged one also with node 1 gone. */
static void test_damaged_record_repaired(void) {
    cluster cl = {.replicas = 2};
    mkv_client *c = NULL;
    ASSERT_EQ(start_n(&cl, "damage2", "auto", 2, NULL), 0);
    long long off = fill(&cl, &c);
    ASSERT(off > 0);
    ASSERT_EQ(master_field(&cl, "under_replicated"), 0);
    long long copies = master_field(&cl, "tasks_done");
    ASSERT_EQ(restart_node(&cl, flip_record), 0);
    ASSERT(damaged_key >= 0);
    printf("# record of key %d damaged on node 0 (%lld on its disk)\n", damaged_key, off);
    ASSERT_EQ(node_field(&cl, "disk_dropped"), 1);
    ASSERT_EQ(master_field(&cl, "restore_dropped"), 1);
    uint64_t end = mono_ms() + WAIT_MS;
    while ((master_field(&cl, "under_replicated") != 0 || master_field(&cl, "tasks_pending") != 0) && mono_ms() < end)
        usleep(50 * 1000);
    ASSERT_EQ(master_field(&cl, "under_replicated"), 0);
    ASSERT(master_field(&cl, "tasks_done") > copies);   /* the repair's copy */
    ASSERT_EQ(master_field(&cl, "objects_lost"), 0);
    ASSERT_EQ(check_all(c, NOBJ), 0);
    h_kill(cl.node1_pid);   /* the damaged key from node 0's new copy alone */
    char key[32];
    key_of(damaged_key, key, sizeof key);
    size_t got = 0;
    int rc = MKV_ETRYAGAIN;
    for (end = mono_ms() + WAIT_MS; (rc == MKV_ETRYAGAIN || rc == MKV_EIO || rc == MKV_ECONN) && mono_ms() < end;
         usleep(50 * 1000))
        rc = mkv_get(c, key, strlen(key), dst, OBJ, &got);
    h_fill(src, OBJ, (uint64_t)damaged_key + 1);
    ASSERT_MSG(rc == MKV_OK && got == OBJ && memcmp(src, dst, OBJ) == 0, "get %s: %d (%zu bytes)", key, rc, got);
    mkv_close(c);
    h_kill_all();
}

/* A node drained while objects whose only replica is its disk record
 * lie there: repair has the node send each record to the other node
 * (disk_repair_pushes), nothing is lost, everything reads back. */
static void drain_pushes(const char *name, int nodes, const char *const *flags) {
    cluster cl = {0};
    mkv_client *c = NULL;
    ASSERT_EQ(start_n(&cl, name, "auto", nodes, flags), 0);
    ASSERT_EQ(connect_client(&cl, &c), 0);
    int n = 40;   /* 10 MB over two 16 MB segments: each past 20 % */
    ASSERT_EQ(put_range(&cl, c, 0, n, 0), n);
    uint64_t end = mono_ms() + WAIT_MS;
    while (node_i_field(&cl, 0, "disk_objects") <= 0 && mono_ms() < end) usleep(50 * 1000);
    long long on_disk = node_i_field(&cl, 0, "disk_objects");
    ASSERT(on_disk > 0);
    uint32_t id = (uint32_t)node_i_field(&cl, 0, "node_id");
    redisContext *adm = h_proven(h_redis(cl.port), "");
    ASSERT(adm != NULL);
    redisReply *r = redisCommand(adm, "MOON.DRAIN %u", id);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    redisFree(adm);
    ASSERT(ok);
    end = mono_ms() + 60000;
    while (master_field(&cl, "nodes_dead") != 1 && mono_ms() < end) usleep(100 * 1000);   /* drained */
    printf("# node %u drained: %lld records on its disk, %lld pushed\n", id, on_disk,
           master_field(&cl, "disk_repair_pushes"));
    ASSERT_EQ(master_field(&cl, "nodes_dead"), 1);
    ASSERT(master_field(&cl, "disk_repair_pushes") >= on_disk);
    ASSERT_EQ(master_field(&cl, "objects_lost"), 0);
    ASSERT_EQ(check_all(c, n), 0);
    mkv_close(c);
    h_kill_all();
}

static void test_drain_pushes_disk_records(void) {
    const char *flags[] = {"--disk-high-watermark", "20", "--disk-low-watermark", "10", "--heartbeat-ms", "100",
                           "--rejoin-grace-ms", "0", NULL};
    drain_pushes("drain", 2, flags);
}

/* The same with objects striped over two of three nodes (4 extents of
 * 64 KiB, 2 on each): the drained node's offloaded objects have their
 * one replica as two shares on disk, and each share's node pushes its
 * bytes into the new replica's pieces on the third node. */
static void test_drain_pushes_striped_shares(void) {
    const char *flags[] = {"--disk-high-watermark", "20", "--disk-low-watermark", "10", "--heartbeat-ms", "100",
                           "--rejoin-grace-ms", "0", "--stripe-threshold", "128KB", "--stripe-unit", "64KB",
                           "--stripe-width", "2", NULL};
    drain_pushes("drain-striped", 3, flags);
}

/* One pass over the keys [0, n) stored (ok[i]): a key reads back
 * byte-exact (read[i] set: from DRAM, or straight from the disk when its
 * load finds no DRAM room while both tiers are full), or a key on disk
 * answers TRYAGAIN (DRAM room found for its load, which then runs),
 * nothing else; a key not stored is a miss. 0, or -1 at a wrong answer. */
static int read_pass(mkv_client *c, int n, const uint8_t *ok, uint8_t *read) {
    char key[32];
    for (int i = 0; i < n; i++) {
        key_of(i, key, sizeof key);
        size_t got = 0;
        int rc = mkv_get(c, key, strlen(key), dst, OBJ, &got);
        h_fill(src, OBJ, (uint64_t)i + 1);
        if (ok[i] && rc == MKV_OK && got == OBJ && memcmp(src, dst, OBJ) == 0) read[i] = 1;
        else if (!(ok[i] ? rc == MKV_ETRYAGAIN : rc == MKV_ENOTFOUND)) {
            printf("# get %s: %d (%zu bytes) %s\n", key, rc, got, mkv_last_error(c));
            return -1;
        }
    }
    return 0;
}

/* Node 0's disk directory is a small file system that another process
 * fills once the node made its file (its space was allocated whole, so
 * the tier keeps working): puts past DRAM and disk get a clean NOSPACE,
 * the node keeps serving, every key acknowledged reads back byte-exact
 * (those on disk straight from it while no DRAM room is left for their
 * loads: disk_reads_direct; any left once removes made room). */
static void test_full_directory(void) {
    if (system("unshare -rm true >/dev/null 2>&1") != 0) {
        printf("ok - test_full_directory # SKIP unshare -rm (a private mount namespace) is not allowed here\n");
        return;
    }
    cluster cl = {.full = 1};
    mkv_client *c = NULL;
    /* a get of a key that cannot load answers TRYAGAIN at once, not after 3 s */
    const char *flags[] = {"--disk-high-watermark", "60", "--disk-low-watermark", "30", "--heartbeat-ms", "100",
                           "--get-wait-ms", "0", NULL};
    ASSERT_EQ(start_n(&cl, "full", "auto", 1, flags), 0);
    char marker[400];
    snprintf(marker, sizeof marker, "%s/n0/filled", cl.sub);
    uint64_t end = mono_ms() + WAIT_MS;
    while (access(marker, F_OK) != 0 && mono_ms() < end) usleep(50 * 1000);
    ASSERT_MSG(access(marker, F_OK) == 0, "the directory was not filled (%s/n0/node.log)", cl.sub);
    ASSERT_EQ(connect_client(&cl, &c), 0);
    /* 16 MB of DRAM and 24 MB of disk: 200 objects of 256 KiB (50 MB) do not fit */
    enum { N = 200 };
    uint8_t ok[N], read[N] = {0};
    int stored = 0, full = 0;
    char key[32];
    for (int i = 0; i < N; i++) {
        key_of(i, key, sizeof key);
        h_fill(src, OBJ, (uint64_t)i + 1);
        int rc = MKV_ETRYAGAIN;
        for (uint64_t until = mono_ms() + 20000; rc == MKV_ETRYAGAIN && mono_ms() < until;)
            if ((rc = mkv_put(c, key, strlen(key), src, OBJ, 1)) == MKV_ETRYAGAIN) usleep(20 * 1000);
        ASSERT_MSG(rc == MKV_OK || rc == MKV_ENOSPACE, "put %s: %d %s", key, rc, mkv_last_error(c));
        ok[i] = rc == MKV_OK;
        stored += ok[i];
        full += rc == MKV_ENOSPACE;
        if (rc == MKV_ENOSPACE) usleep(20 * 1000);   /* the next offload pass may make room */
    }
    printf("# %d of %d puts stored, %d NOSPACE; node disk_objects %lld, disk_nospace %lld, io errors %lld\n",
           stored, N, full, node_field(&cl, "disk_objects"), node_field(&cl, "disk_nospace"),
           node_field(&cl, "disk_io_errors"));
    ASSERT(full > 0);
    ASSERT(node_field(&cl, "disk_objects") > 0);   /* the disk took some */
    ASSERT_EQ(node_field(&cl, "disk_io_errors"), 0);
    ASSERT_EQ(h_wait_ping("127.0.0.1", cl.port + 1, cl.node_pid, 1000), 0);
    ASSERT_EQ(read_pass(c, N, ok, read), 0);
    int in_dram = 0;
    for (int i = 0; i < N; i++)   /* those read leave room for the rest to load */
        if (read[i]) {
            key_of(i, key, sizeof key);
            ASSERT_EQ(mkv_remove(c, key, strlen(key)), MKV_OK);
            ok[i] = 0, in_dram++;
        }
    printf("# %d read at once (%lld straight from the disk), removed; the %d others after\n", in_dram,
           master_field(&cl, "disk_reads_direct"), stored - in_dram);
    ASSERT(master_field(&cl, "disk_reads_direct") > 0);   /* both tiers full: no load, read from the disk */
    ASSERT_EQ(check_keys(c, N, ok), 0);
    mkv_close(c);
    h_kill_all();
}

/* Objects striped over both nodes (a stripe unit of 64 KiB: each 256 KiB
 * object is 4 extents, 2 on each node): each node offloads its own share
 * of an object as one record, the master keeps the layout as a disk
 * replica, and a get has both nodes load their shares back; all of it
 * byte-exact, again after node 0 is killed -9 and restarted (its
 * shares reported piece by piece, checked against the layout and kept),
 * and after the master is killed -9 and restarted (every node's pieces
 * joined into the objects again, each replica in its tier). */
static const char *const striped_flags[] = {"--disk-high-watermark", "60", "--disk-low-watermark", "30",
                                            "--heartbeat-ms", "100", "--node-timeout-ms", "15000",
                                            "--rejoin-grace-ms", "0", "--stripe-threshold", "128KB",
                                            "--stripe-unit", "64KB", "--stripe-width", "2", NULL};

/* No task in flight and every holdings note (a promoted object's drop
 * of its disk records) taken by the nodes: their disk counts are final. */
static int wait_no_tasks(const cluster *cl) {
    /* One look answers: a second look could meet the next sweep's offloads
     * (the reads before promoted objects past the high watermark). */
    long long tasks, notes;
    for (uint64_t end = mono_ms() + WAIT_MS;; usleep(50 * 1000)) {
        tasks = master_field(cl, "tasks_pending"), notes = master_field(cl, "holdings_pending");
        if ((tasks == 0 && notes == 0) || mono_ms() >= end) break;
    }
    if (tasks || notes) printf("# tasks_pending %lld, holdings_pending %lld\n", tasks, notes);
    return tasks == 0 && notes == 0 ? 0 : -1;
}

/* A cluster of two nodes at striped_flags (sub-directory name) with n
 * striped objects put, some offloaded, no task or note in flight: 0. */
static int striped_fill(cluster *cl, const char *name, mkv_client **c, int n) {
    if (start_n(cl, name, "auto", 2, striped_flags) != 0 || connect_client(cl, c) != 0 ||
        put_range(cl, *c, 0, n, 0) != n)
        return -1;
    return wait_offloaded(cl) == 0 && wait_no_tasks(cl) == 0 ? 0 : -1;
}

static void test_striped_over_nodes(void) {
    cluster cl = {0};
    mkv_client *c = NULL;
    const int n = 2 * NOBJ;   /* 24 MB: 75 % of the two segments */
    ASSERT_EQ(striped_fill(&cl, "striped", &c, n), 0);
    long long off = master_field(&cl, "disk_offloads");
    long long d0 = node_i_field(&cl, 0, "disk_objects"), d1 = node_i_field(&cl, 1, "disk_objects");
    printf("# %d striped objects put: %lld offloaded, disk records %lld + %lld\n", n, off, d0, d1);
    ASSERT(off > 0);
    ASSERT_EQ(d0, off);   /* one record per node per object: its share */
    ASSERT_EQ(d1, off);
    ASSERT_EQ(master_field(&cl, "disk_offload_bytes"), off * OBJ);
    ASSERT_EQ(node_i_field(&cl, 0, "disk_write_bytes"), off * OBJ / 2);   /* half of each object */
    ASSERT_EQ(node_i_field(&cl, 1, "disk_write_bytes"), off * OBJ / 2);
    long long promotes = master_field(&cl, "disk_promotes");
    ASSERT_EQ(check_all(c, n), 0);
    ASSERT(master_field(&cl, "disk_promotes") >= promotes + off);   /* each from both nodes' shares */
    /* Read back into DRAM, they go to disk again; then node 0 restarts. */
    ASSERT_EQ(wait_offloaded(&cl), 0);
    ASSERT_EQ(wait_no_tasks(&cl), 0);
    long long on_disk = node_i_field(&cl, 0, "disk_objects");
    ASSERT(on_disk > 0);
    ASSERT_EQ(node_i_field(&cl, 1, "disk_objects"), on_disk);
    ASSERT_EQ(restart_node(&cl, NULL), 0);
    uint64_t end;
    printf("# node 0 restarted: %lld records recovered, %lld objects kept\n", node_field(&cl, "disk_recovered"),
           master_field(&cl, "restore_kept"));
    ASSERT_EQ(node_field(&cl, "disk_recovered"), on_disk);
    ASSERT_EQ(node_field(&cl, "disk_dropped"), 0);
    ASSERT_EQ(master_field(&cl, "restore_kept"), n);   /* its shares on disk too */
    ASSERT_EQ(master_field(&cl, "restore_dropped"), 0);
    ASSERT_EQ(master_field(&cl, "objects_lost"), 0);
    ASSERT_EQ(check_all(c, n), 0);
    for (int i = 0; i < 2; i++) ASSERT_EQ(node_i_field(&cl, i, "disk_checksum_errors"), 0);
    /* The master killed -9 and started again: it joins each object's
     * shares (every node's pieces, where each lies in the object) into
     * its disk replica again, the DRAM ones as before. */
    ASSERT_EQ(wait_offloaded(&cl), 0);
    ASSERT_EQ(wait_no_tasks(&cl), 0);
    on_disk = node_i_field(&cl, 0, "disk_objects");
    ASSERT(on_disk > 0);
    ASSERT_EQ(node_i_field(&cl, 1, "disk_objects"), on_disk);
    /* the disk replicas hold no segment bytes (once the extents offloads
     * gave back are out of their read leases: held_extents) */
    long long used = (n - on_disk) * OBJ;
    end = mono_ms() + WAIT_MS;
    while (master_field(&cl, "bytes_used") != used && mono_ms() < end) usleep(50 * 1000);
    ASSERT_MSG(master_field(&cl, "bytes_used") == used, "bytes_used %lld, held extents %lld",
               master_field(&cl, "bytes_used"), master_field(&cl, "held_extents"));
    h_kill(cl.master_pid);
    ASSERT((cl.master_pid = h_start_master(cl.port, cl.mflags)) > 0);
    ASSERT_EQ(h_wait_rebuilt(cl.port, NULL, WAIT_MS), 0);
    printf("# master restarted: %lld objects rebuilt (%lld on disk), %lld incomplete, %lld extents refused\n",
           master_field(&cl, "rebuild_recovered"), on_disk, master_field(&cl, "rebuild_incomplete"),
           master_field(&cl, "rebuild_extents_refused"));
    ASSERT_EQ(master_field(&cl, "rebuild_recovered"), n);
    ASSERT_EQ(master_field(&cl, "rebuild_incomplete"), 0);
    ASSERT_EQ(master_field(&cl, "rebuild_extents_refused"), 0);
    ASSERT_EQ(master_field(&cl, "bytes_used"), used);   /* each replica in its tier */
    for (int i = 0; i < 2; i++) ASSERT_EQ(node_i_field(&cl, i, "disk_objects"), on_disk);   /* not forgotten */
    ASSERT_EQ(check_all(c, n), 0);
    ASSERT(master_field(&cl, "disk_promotes") >= on_disk);   /* each through loads of both shares */
    for (int i = 0; i < 2; i++) ASSERT_EQ(node_i_field(&cl, i, "disk_checksum_errors"), 0);
    /* Removes free both nodes' shares (TRYAGAIN while the restarted
     * master's repin grace holds rebuilt objects: PROTO_REPIN_GRACE_MS). */
    ASSERT_EQ(wait_no_tasks(&cl), 0);
    char key[32];
    end = mono_ms() + WAIT_MS;
    for (int i = 0; i < n; i++) {
        key_of(i, key, sizeof key);
        int rc;
        while ((rc = mkv_remove(c, key, strlen(key))) == MKV_ETRYAGAIN && mono_ms() < end) usleep(100 * 1000);
        ASSERT_MSG(rc == MKV_OK, "remove %s: %d %s", key, rc, mkv_last_error(c));
    }
    end = mono_ms() + WAIT_MS;
    while ((node_i_field(&cl, 0, "disk_objects") || node_i_field(&cl, 1, "disk_objects")) && mono_ms() < end)
        usleep(50 * 1000);
    ASSERT_EQ(node_i_field(&cl, 0, "disk_objects"), 0);
    ASSERT_EQ(node_i_field(&cl, 1, "disk_objects"), 0);
    mkv_close(c);
    h_kill_all();
}

/* Objects striped over both nodes, some with their shares on disk; node
 * 1 and the master killed -9 together, the master started again and its
 * window closed with node 0's report alone (MOON.REBUILD: node 1 is
 * named but gone): no object is whole without node 1's shares, so none
 * is served (every key a miss, never partial bytes), and node 0 frees
 * its leftovers (its disk records and segment extents). Node 1 started
 * again later reports its shares: unknown now, its records go too. */
static void test_striped_share_node_gone(void) {
    cluster cl = {0};
    mkv_client *c = NULL;
    const int n = 2 * NOBJ;
    ASSERT_EQ(striped_fill(&cl, "striped-gone", &c, n), 0);
    long long on_disk = node_i_field(&cl, 0, "disk_objects");
    ASSERT(on_disk > 0);
    h_kill(cl.node1_pid);
    h_kill(cl.master_pid);
    ASSERT((cl.master_pid = h_start_master(cl.port, cl.mflags)) > 0);
    uint64_t end = mono_ms() + WAIT_MS;
    while (master_field(&cl, "rebuild_nodes_reported") < 1 && mono_ms() < end) usleep(50 * 1000);
    ASSERT_EQ(master_field(&cl, "rebuild_nodes_reported"), 1);
    redisContext *adm = h_proven(h_redis(cl.port), "");
    ASSERT(adm != NULL);
    redisReply *r = redisCommand(adm, "MOON.REBUILD");
    int ok = r && r->type == REDIS_REPLY_ARRAY;
    if (r) freeReplyObject(r);
    redisFree(adm);
    ASSERT(ok);
    ASSERT_EQ(h_wait_rebuilt(cl.port, NULL, WAIT_MS), 0);
    printf("# node 1 gone, master restarted: %lld objects rebuilt, %lld incomplete, %lld extents refused; "
           "node 0 had %lld records\n", master_field(&cl, "rebuild_recovered"),
           master_field(&cl, "rebuild_incomplete"), master_field(&cl, "rebuild_extents_refused"), on_disk);
    ASSERT_EQ(master_field(&cl, "rebuild_recovered"), 0);
    ASSERT_EQ(master_field(&cl, "rebuild_incomplete"), n);
    ASSERT_EQ(master_field(&cl, "bytes_used"), 0);
    end = mono_ms() + WAIT_MS;   /* the drop notes reach node 0 */
    while (node_i_field(&cl, 0, "disk_objects") != 0 && mono_ms() < end) usleep(50 * 1000);
    ASSERT_EQ(node_i_field(&cl, 0, "disk_objects"), 0);
    uint8_t none[NOBJ * 4] = {0};
    ASSERT_EQ(check_keys(c, n, none), 0);
    /* node 1 back with the same flags: its shares are no object's now */
    ASSERT((cl.node1_pid = start_node_i(&cl, 1)) > 0);
    ASSERT_EQ(h_wait_node_registered(cl.port + 3, 20000), 0);
    end = mono_ms() + WAIT_MS;
    while (node_i_field(&cl, 1, "disk_objects") != 0 && mono_ms() < end) usleep(50 * 1000);
    printf("# node 1 back: %lld records recovered, %lld left\n", node_i_field(&cl, 1, "disk_recovered"),
           node_i_field(&cl, 1, "disk_objects"));
    ASSERT_EQ(node_i_field(&cl, 1, "disk_recovered"), on_disk);
    ASSERT_EQ(node_i_field(&cl, 1, "disk_objects"), 0);
    ASSERT_EQ(check_keys(c, n, none), 0);
    ASSERT_EQ(master_field(&cl, "bytes_used"), 0);
    mkv_close(c);
    h_kill_all();
}

/* A byte of one of node 0's share records flipped while it was down:
 * its scan drops the record, the master drops that object's disk
 * replica (its other share, on node 1, goes too: a drop note) and, with
 * replicas 1, the object is lost: a miss, never bytes half from disk;
 * every other object byte-exact. */
static void test_striped_share_damaged(void) {
    cluster cl = {0};
    mkv_client *c = NULL;
    const int n = 2 * NOBJ;
    ASSERT_EQ(striped_fill(&cl, "striped-damage", &c, n), 0);
    long long on_disk = node_i_field(&cl, 1, "disk_objects");
    ASSERT(on_disk > 0);
    ASSERT_EQ(restart_node(&cl, flip_record), 0);
    ASSERT(damaged_key >= 0);
    printf("# share of key %d damaged on node 0 (%lld shares on each disk)\n", damaged_key, on_disk);
    ASSERT_EQ(node_field(&cl, "disk_dropped"), 1);
    ASSERT_EQ(node_field(&cl, "disk_recovered"), on_disk - 1);
    ASSERT_EQ(master_field(&cl, "restore_dropped"), 1);
    ASSERT_EQ(master_field(&cl, "objects_lost"), 1);
    uint64_t end = mono_ms() + WAIT_MS;   /* node 1's share of it goes with the replica */
    while (node_i_field(&cl, 1, "disk_objects") != on_disk - 1 && mono_ms() < end) usleep(50 * 1000);
    ASSERT_EQ(node_i_field(&cl, 1, "disk_objects"), on_disk - 1);
    uint8_t ok[NOBJ * 4];
    memset(ok, 1, sizeof ok);
    ok[damaged_key] = 0;
    ASSERT_EQ(check_keys(c, n, ok), 0);
    for (int i = 0; i < 2; i++) ASSERT_EQ(node_i_field(&cl, i, "disk_checksum_errors"), 0);
    mkv_close(c);
    h_kill_all();
}

static void cleanup(void) {
    h_kill_all();
    if (getenv("KEEP")) return;
    h_temp_dir_remove(dir, "disk-restart");
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_cleanup_hook = cleanup;
    if (h_temp_dir(dir, sizeof dir, "disk-restart") != 0) return 1;
    src = aligned_alloc(4096, OBJ);
    dst = aligned_alloc(4096, OBJ);
    if (!src || !dst) return 1;
    const char *only = getenv("MKV_CASE");   /* a developer's run of one case: its name's part */
#define CASE(fn) do { if (!only || strstr(#fn, only)) RUN_TEST(fn); } while (0)
    CASE(test_node_restart);
    CASE(test_node_restart_plain);
    CASE(test_master_restart);
    CASE(test_damaged_record_dropped);
    CASE(test_damaged_record_repaired);
    CASE(test_drain_pushes_disk_records);
    CASE(test_drain_pushes_striped_shares);
    CASE(test_full_directory);
    CASE(test_striped_over_nodes);
    CASE(test_striped_share_node_gone);
    CASE(test_striped_share_damaged);
    cleanup();
    free(src);
    free(dst);
    TEST_EXIT();
}
