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
 * - loads (and offloads) reach the node at once on its holdings pull, not
 *   with its next heartbeat (heartbeats of 5 s: the tasks came on pulls,
 *   the loads took far less than a heartbeat each);
 * - a batch key found while its offload was in flight, the get parked for
 *   another key's load, is looked up again when the offload ends, not
 *   answered as a miss (gets_waited_relooked);
 * - removes racing offloads in flight leave no record behind, also with
 *   objects striped over two nodes (an offload a task per node's share:
 *   a share written while the other was not is dropped with the job);
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

#define TIME_LIMIT_S 240
#define KIB 1024u
#define OBJ (256 * KIB)
#define SEG_MB 16
#define MAX_KEYS 256

static char dir[256];
static char *src, *dst;

typedef struct cluster {
    int port;   /* master; node i at port+1+2i, its data plane port+2+2i */
    char master[32];
} cluster;

static void start_nodes(cluster *cl, const char *const *master_flags, const char *sub, int nodes) {
    cl->port = h_free_ports(1 + 2 * nodes);
    snprintf(cl->master, sizeof cl->master, "127.0.0.1:%d", cl->port);
    ASSERT(h_start_master(cl->port, master_flags) > 0);
    for (int i = 0; i < nodes; i++) {
        char disk[320];
        snprintf(disk, sizeof disk, "%s/%s%d", dir, sub, i);
        h_args a = {0};
        h_node_argv(&a, cl->master, "127.0.0.1", cl->port + 1 + 2 * i, cl->port + 2 + 2 * i, "16MB");
        const char *more[] = {"--segment-persist", "no", "--disk-dir", disk, "--disk-size", "64MB", NULL};
        h_argv(&a, more);
        ASSERT(h_spawn(a.v) > 0);
    }
    ASSERT_EQ(h_wait_nodes(cl->port, "alive", nodes, 20000), 0);
}

static void start(cluster *cl, const char *const *master_flags, const char *sub) {
    start_nodes(cl, master_flags, sub, 1);
}

static long long master_field(const cluster *cl, const char *f) { return h_port_info(cl->port, "cluster", f); }
static long long node_i_field(const cluster *cl, int i, const char *f) {
    return h_port_info(cl->port + 1 + 2 * i, "node", f);
}
static long long node_field(const cluster *cl, const char *f) { return node_i_field(cl, 0, f); }

static int put_range_r(mkv_client *c, int from, int to, int replicas) {
    char key[32];
    for (int i = from; i < to; i++) {
        snprintf(key, sizeof key, "k%d", i);
        h_fill(src, OBJ, (uint64_t)i + 1);
        int rc = mkv_put(c, key, strlen(key), src, OBJ, replicas);
        if (rc != MKV_OK) {
            printf("# put %s: %d %s\n", key, rc, mkv_last_error(c));
            return -1;
        }
    }
    return 0;
}

static int put_range(mkv_client *c, int from, int to) { return put_range_r(c, from, to, 1); }

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

/* Waits until no disk job is in flight: no offload, and no load a get
 * started (a read straight from the disk may still start one). A remove
 * racing an offload leaves its record behind (docs/SSD_TIER.md "What is
 * left"), and one racing a load holds the load's target range until the
 * load's write caps expire (put_timeout_ms, 30 s): the node may still be
 * writing there. */
static int wait_disk_jobs_landed(const cluster *cl) {
    uint64_t end = mono_ms() + 30000;
    while ((master_field(cl, "disk_offloading_bytes") != 0 || master_field(cl, "tasks_pending") != 0) &&
           mono_ms() < end)
        usleep(50 * 1000);
    return master_field(cl, "disk_offloading_bytes") == 0 && master_field(cl, "tasks_pending") == 0 ? 0 : -1;
}

static int disks_empty(const cluster *cl, int nodes) {
    for (int i = 0; i < nodes; i++)
        if (node_i_field(cl, i, "disk_objects") != 0) return 0;
    return master_field(cl, "bytes_used") == 0;
}

/* Once the disk jobs in flight landed, removes keys [0, n): the disk
 * tiers of every node and the segments empty (drop notes reach the
 * nodes), within 45 s. An offload may still start meanwhile (a load that
 * found no room makes the master shed for lease_ms, 10 s, down to the
 * low watermark): a remove racing it holds the object's DRAM until the
 * task's caps expire (put_timeout_ms, 30 s), and the record the node
 * wrote is an orphan the master drops (disk_offload_orphans). */
static int remove_all(const cluster *cl, mkv_client *c, int n, int nodes) {
    if (wait_disk_jobs_landed(cl) != 0) {
        printf("# disk jobs still in flight after 30 s: %lld bytes, %lld tasks pending\n",
               master_field(cl, "disk_offloading_bytes"), master_field(cl, "tasks_pending"));
        return -1;
    }
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "k%d", i);
        int rc = mkv_remove(c, key, strlen(key));
        if (rc != MKV_OK) {
            printf("# remove %s: %d %s\n", key, rc, mkv_last_error(c));
            return -1;
        }
    }
    for (uint64_t end = mono_ms() + 45000; !disks_empty(cl, nodes) && mono_ms() < end;) usleep(50 * 1000);
    if (disks_empty(cl, nodes)) return 0;
    for (int i = 0; i < nodes; i++)
        printf("# node %d: disk_objects %lld, disk_removes %lld\n", i, node_i_field(cl, i, "disk_objects"),
               node_i_field(cl, i, "disk_removes"));
    printf("# master: bytes_used %lld, disk_offloads %lld, disk_promotes %lld, tasks_pending %lld\n",
           master_field(cl, "bytes_used"), master_field(cl, "disk_offloads"), master_field(cl, "disk_promotes"),
           master_field(cl, "tasks_pending"));
    return -1;
}

/* Every key in [0, n) byte-exact: a get of a key only on disk waits for
 * its load (up to get_wait_ms; TRYAGAIN after that, tried again for up
 * to 60 s); how many answered TRYAGAIN first (-1: a miss, wrong bytes or
 * an error). */
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
    long long p0 = master_field(&cl, "disk_promotes"), w0 = master_field(&cl, "gets_waited");
    int retried = check_all(c, n);
    long long promoted = master_field(&cl, "disk_promotes");
    printf("# read back: %lld promoted (%lld offloaded), %lld gets waited, %d answered TRYAGAIN\n",
           promoted - p0, off, master_field(&cl, "gets_waited") - w0, retried);
    ASSERT(retried >= 0);
    ASSERT(promoted - p0 >= off);   /* each offloaded one loaded (some others went to disk meanwhile) */
    ASSERT(master_field(&cl, "gets_waited") - w0 > 0);   /* parked, not refused */
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
    long long on_disk = node_field(&cl, "disk_objects"), direct = master_field(&cl, "disk_reads_direct");
    ASSERT(check_all(c, n) >= 0);
    ASSERT(check_all(c, n) >= 0);   /* twice */
    /* Each object on disk was read from it: loaded, or, when its load
     * found the segment full (the loads outran the offloads making room:
     * slow disk writes under load), read straight from the disk. */
    long long loads = master_field(&cl, "disk_promotes") - promoted;
    long long straight = master_field(&cl, "disk_reads_direct") - direct;
    printf("# read back twice (%lld objects on disk): %lld loads, %lld reads straight from the disk\n", on_disk,
           loads, straight);
    ASSERT(loads > 0);
    ASSERT(loads + straight >= on_disk);
    ASSERT_EQ(remove_all(&cl, c, n, 1), 0);
    /* each record promoted or removed, or an orphan of a remove racing its offload */
    ASSERT_EQ(node_field(&cl, "disk_removes"),
              master_field(&cl, "disk_offloads") + master_field(&cl, "disk_offload_orphans"));
    ASSERT_EQ(master_field(&cl, "bytes_used"), 0);
    mkv_close(c);
    h_kill_all();
}

/* Reads every key with one batch get (MOON.MGETPACKED) into big: all
 * byte-exact, none a miss. */
static int batch_all(mkv_client *c, int n, uint8_t *big) {
    mkv_obj objs[MAX_KEYS];
    char keys[MAX_KEYS][32];
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        objs[i] = (mkv_obj){keys[i], strlen(keys[i]), big + (size_t)i * OBJ, OBJ, 0};
    }
    int rc = mkv_get_batch(c, objs, (size_t)n);
    if (rc != MKV_OK) {
        printf("# batch get: %d %s\n", rc, mkv_last_error(c));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        h_fill(src, OBJ, (uint64_t)i + 1);
        if (objs[i].status != MKV_OK || objs[i].len != OBJ || memcmp(src, big + (size_t)i * OBJ, OBJ) != 0) {
            printf("# batch get %s: %d (%zu bytes)\n", keys[i], objs[i].status, objs[i].len);
            return -1;
        }
    }
    return 0;
}

/* Waits until no temporary copy is left: segment use back to at most limit. */
static int wait_copies_dropped(const cluster *cl, long long limit) {
    uint64_t end = mono_ms() + 30000;
    while (master_field(cl, "bytes_used") > limit && mono_ms() < end) usleep(50 * 1000);
    return master_field(cl, "bytes_used") <= limit ? 0 : -1;
}

/* --disk-promote-after 3: a batch get of keys on disk is answered whole
 * (parked until the loads landed, no miss); the first two reads go
 * through temporary copies (the records stay, nothing promoted, the
 * copies dropped after the read), the third promotes. */
static void test_batch_get_and_promote_after(void) {
    cluster cl;
    const char *flags[] = {"--disk-high-watermark", "60", "--disk-low-watermark", "30", "--heartbeat-ms", "100",
                           "--disk-promote-after", "3", NULL};
    start(&cl, flags, "p");
    mkv_client *c = NULL;
    const int n = 40;   /* 10 MB: 62 % of the segment */
    uint8_t *big = aligned_alloc(4096, (size_t)n * OBJ);
    ASSERT(big != NULL);
    ASSERT_EQ(h_mkv_connect(&c, cl.master, NULL, 1), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, src, OBJ), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, big, (size_t)n * OBJ), MKV_OK);
    const long long seg = (long long)SEG_MB << 20;
    ASSERT_EQ(put_range(c, 0, n), 0);
    ASSERT_EQ(wait_used_below(&cl, seg * 60 / 100), 0);
    long long off = master_field(&cl, "disk_offloads"), used = master_field(&cl, "bytes_used");
    ASSERT(off > 0);
    for (int round = 1; round <= 2; round++) {
        ASSERT_EQ(batch_all(c, n, big), 0);
        long long temp = master_field(&cl, "disk_reads_unpromoted");
        printf("# read %d: %lld loads kept on disk, %lld promoted, node disk_objects %lld\n", round, temp,
               master_field(&cl, "disk_promotes"), node_field(&cl, "disk_objects"));
        ASSERT_EQ(temp, off * round);
        ASSERT_EQ(master_field(&cl, "disk_reads_unpromoted_bytes"), temp * OBJ);
        ASSERT_EQ(master_field(&cl, "disk_promotes"), 0);
        ASSERT_EQ(node_field(&cl, "disk_objects"), off);   /* the records stay */
        ASSERT_EQ(wait_copies_dropped(&cl, used), 0);
    }
    ASSERT_EQ(batch_all(c, n, big), 0);   /* the third read promotes */
    ASSERT_EQ(master_field(&cl, "disk_promotes"), off);
    ASSERT_EQ(master_field(&cl, "disk_reads_unpromoted"), off * 2);
    ASSERT_EQ(node_field(&cl, "disk_checksum_errors"), 0);
    ASSERT_EQ(master_field(&cl, "gets_waited_timeout"), 0);
    mkv_close(c);
    free(big);
    h_kill_all();
}

/* A batch get of [k0 (on disk), k2 (in DRAM, the coldest there)] on a
 * full segment: k0's load finds no room and offloads at once (k2 among
 * what goes). k0 is then read straight from the node's disk (no room to
 * load it: disk_reads_direct), so the get need not park; before direct
 * reads it parked for k0, and k2, found while its offload was in flight
 * and offloaded during the wait, was looked up again (loaded), not
 * answered as a miss (test_disk_capacity saw NOTFOUND for such a key).
 * Either way both keys read byte-exact. A high watermark of 100 sheds
 * only for waiting puts and loads, so the segment stays full. */
static void test_batch_key_offloaded_while_parked(void) {
    cluster cl;
    const char *flags[] = {"--disk-high-watermark", "100", "--disk-low-watermark", "99", "--heartbeat-ms", "100",
                           "--put-wait-ms", "30000", "--get-wait-ms", "30000", NULL};
    start(&cl, flags, "w");
    mkv_client *c = NULL;
    const int n = SEG_MB * 4 + 2;   /* the segment's 64 objects, then 2 puts that wait: k0 and k1 go */
    uint8_t *big = aligned_alloc(4096, 2 * OBJ);
    ASSERT(big != NULL);
    ASSERT_EQ(h_mkv_connect(&c, cl.master, NULL, 1), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, src, OBJ), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, big, 2 * OBJ), MKV_OK);
    ASSERT_EQ(put_range(c, 0, n), 0);
    ASSERT_EQ(wait_disk_jobs_landed(&cl), 0);
    long long off = master_field(&cl, "disk_offloads"), used = master_field(&cl, "bytes_used");
    printf("# %d objects put: %lld offloaded, %lld of %d MB used\n", n, off, used, SEG_MB);
    ASSERT_EQ(used, (long long)SEG_MB << 20);   /* full: k0's load finds no room */
    const char *keys[2] = {"k0", "k2"};
    const int idx[2] = {0, 2};
    mkv_obj objs[2];
    for (int i = 0; i < 2; i++) objs[i] = (mkv_obj){keys[i], strlen(keys[i]), big + (size_t)i * OBJ, OBJ, 0};
    ASSERT_EQ(mkv_get_batch(c, objs, 2), MKV_OK);
    long long relooked = master_field(&cl, "gets_waited_relooked");
    printf("# batch get [k0, k2]: %d, %d; offloads %lld, gets waited %lld, relooked %lld\n", objs[0].status,
           objs[1].status, master_field(&cl, "disk_offloads"), master_field(&cl, "gets_waited"), relooked);
    for (int i = 0; i < 2; i++) {
        h_fill(src, OBJ, (uint64_t)idx[i] + 1);
        ASSERT_EQ(objs[i].status, MKV_OK);
        ASSERT_EQ(objs[i].len, OBJ);
        ASSERT(memcmp(src, big + (size_t)i * OBJ, OBJ) == 0);
    }
    long long direct = master_field(&cl, "disk_reads_direct");
    printf("# read straight from the disk: %lld\n", direct);
    ASSERT(relooked > 0 || direct > 0);   /* k0 from the disk at once, or k2 looked up again after its offload */
    ASSERT_EQ(master_field(&cl, "gets_waited_timeout"), 0);
    mkv_close(c);
    free(big);
    h_kill_all();
}

/* Loads go to the node at once, not with its next heartbeat: a master
 * with heartbeats of 5 s hands the node its tasks on the holdings pull it
 * parks (MOON.HOLDINGS ... TASKS WAIT). Every key read back one at a
 * time, byte-exact (a heartbeat each would outlast the client's timeout);
 * tasks came that way (tasks_pulled), and the loads took far less than a
 * heartbeat each. */
static void test_loads_pushed_at_once(void) {
    cluster cl;
    const int hb_ms = 5000;
    const char *flags[] = {"--disk-high-watermark", "60", "--disk-low-watermark", "30", "--heartbeat-ms", "5000",
                           "--node-timeout-ms", "30000", "--get-wait-ms", "30000", NULL};
    start(&cl, flags, "h");
    mkv_client *c = NULL;
    ASSERT_EQ(h_mkv_connect(&c, cl.master, NULL, 1), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, src, OBJ), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, dst, OBJ), MKV_OK);
    const long long seg = (long long)SEG_MB << 20;
    const int n = 48;
    ASSERT_EQ(put_range(c, 0, n), 0);
    ASSERT_EQ(wait_used_below(&cl, seg * 60 / 100), 0);
    ASSERT_EQ(wait_disk_jobs_landed(&cl), 0);
    long long off = master_field(&cl, "disk_offloads"), p0 = master_field(&cl, "disk_promotes");
    long long r0 = node_field(&cl, "tasks_received"), q0 = node_field(&cl, "tasks_pulled");
    ASSERT(off > 0);
    ASSERT(q0 > 0);   /* the offloads came on the pulls too */
    uint64_t t0 = mono_ms();
    ASSERT_EQ(check_all(c, n), 0);   /* each get waited for its load: no TRYAGAIN */
    uint64_t ms = mono_ms() - t0;
    long long loads = master_field(&cl, "disk_promotes") - p0;
    long long took = node_field(&cl, "tasks_received") - r0, pulled = node_field(&cl, "tasks_pulled") - q0;
    printf("# %d keys read one at a time in %llu ms: %lld loads, %lld tasks taken, %lld on pulls, heartbeat %d ms\n",
           n, (unsigned long long)ms, loads, took, pulled, hb_ms);
    ASSERT(loads >= off);
    ASSERT(took >= loads);
    /* The node heartbeats right after each COPYDONE too: that one takes
     * the next load when it comes first. */
    ASSERT(pulled > 0);
    ASSERT((long long)ms < loads * hb_ms / 4);   /* a heartbeat each would take about loads * hb_ms */
    mkv_close(c);
    h_kill_all();
}

/* Replicas 2 on two nodes: each node offloads its own replicas; the
 * objects read back byte-exact (from DRAM where one replica is left
 * there, else through a load); removes empty both disks. */
static void test_two_replicas(void) {
    cluster cl;
    const char *flags[] = {"--disk-high-watermark", "60", "--disk-low-watermark", "30", "--heartbeat-ms", "100",
                           NULL};
    start_nodes(&cl, flags, "r", 2);
    mkv_client *c = NULL;
    ASSERT_EQ(h_mkv_connect(&c, cl.master, NULL, 2), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, src, OBJ), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, dst, OBJ), MKV_OK);
    const long long seg = (long long)SEG_MB << 20;
    int n = 48;   /* 12 MB on each node: 75 % */
    ASSERT_EQ(put_range_r(c, 0, n, 2), 0);
    ASSERT_EQ(wait_used_below(&cl, 2 * seg * 60 / 100), 0);
    ASSERT_EQ(wait_disk_jobs_landed(&cl), 0);
    long long off = master_field(&cl, "disk_offloads");
    long long d0 = node_i_field(&cl, 0, "disk_objects"), d1 = node_i_field(&cl, 1, "disk_objects");
    printf("# replicas 2: %lld offloads, disk_objects %lld + %lld, under_replicated %lld\n", off, d0, d1,
           master_field(&cl, "under_replicated"));
    ASSERT(d0 > 0 && d1 > 0);
    ASSERT_EQ(d0 + d1, off);
    ASSERT_EQ(master_field(&cl, "under_replicated"), 0);   /* a disk replica counts */
    ASSERT(check_all(c, n) >= 0);
    ASSERT_EQ(remove_all(&cl, c, n, 2), 0);
    mkv_close(c);
    h_kill_all();
}

/* Removes racing offloads in flight: a record the node writes for an
 * object removed meanwhile is dropped once the node answers (no record
 * is left behind, disk_offload_orphans counts them). The source extents
 * of a task handed out are held until its read caps end: a put timeout
 * of 5 s. Striped over two nodes (flags), an offload is a task per
 * node's share: a remove that finds one share written and the other
 * not drops the written one too. */
static void remove_during_offload(const char *const *flags, const char *sub, int nodes) {
    cluster cl;
    start_nodes(&cl, flags, sub, nodes);
    mkv_client *c = NULL;
    ASSERT_EQ(h_mkv_connect(&c, cl.master, NULL, 1), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, src, OBJ), MKV_OK);
    const int n = 48 * nodes;
    ASSERT_EQ(put_range(c, 0, n), 0);
    uint64_t end = mono_ms() + 20000;
    while (master_field(&cl, "disk_offloading_bytes") == 0 && master_field(&cl, "disk_offloads") == 0 &&
           mono_ms() < end)
        usleep(2 * 1000);
    usleep(120 * 1000);   /* about a heartbeat: some tasks handed out, maybe written */
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ASSERT_EQ(mkv_remove(c, key, strlen(key)), MKV_OK);
    }
    for (end = mono_ms() + 30000; !disks_empty(&cl, nodes) && mono_ms() < end;) usleep(50 * 1000);
    printf("# %d node(s): %lld offloads landed, %lld orphan records dropped, %lld + %lld records left\n", nodes,
           master_field(&cl, "disk_offloads"), master_field(&cl, "disk_offload_orphans"),
           node_i_field(&cl, 0, "disk_objects"), nodes > 1 ? node_i_field(&cl, 1, "disk_objects") : 0);
    for (int i = 0; i < nodes; i++) ASSERT_EQ(node_i_field(&cl, i, "disk_objects"), 0);
    ASSERT_EQ(master_field(&cl, "bytes_used"), 0);
    mkv_close(c);
    h_kill_all();
}

static void test_remove_during_offload(void) {
    const char *flags[] = {"--disk-high-watermark", "60", "--disk-low-watermark", "30", "--heartbeat-ms", "100",
                           "--put-timeout-ms", "5000", NULL};
    remove_during_offload(flags, "o", 1);
}

static void test_remove_during_striped_offload(void) {
    const char *flags[] = {"--disk-high-watermark", "60", "--disk-low-watermark", "30", "--heartbeat-ms", "100",
                           "--put-timeout-ms", "5000", "--stripe-threshold", "128KB", "--stripe-unit", "64KB",
                           "--stripe-width", "2", NULL};
    remove_during_offload(flags, "os", 2);
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
    h_temp_dir_remove(dir, "disk-offload");
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_cleanup_hook = cleanup;
    if (h_temp_dir(dir, sizeof dir, "disk-offload") != 0) return 1;
    src = aligned_alloc(4096, OBJ);
    dst = aligned_alloc(4096, OBJ);
    if (!src || !dst) return 1;
    RUN_TEST(test_offload_past_high_watermark);
    RUN_TEST(test_batch_get_and_promote_after);
    RUN_TEST(test_batch_key_offloaded_while_parked);
    RUN_TEST(test_loads_pushed_at_once);
    RUN_TEST(test_two_replicas);
    RUN_TEST(test_remove_during_offload);
    RUN_TEST(test_remove_during_striped_offload);
    RUN_TEST(test_off_without_watermark);
    cleanup();
    free(src);
    free(dst);
    TEST_EXIT();
}
