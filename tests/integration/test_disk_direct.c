/* test_disk_direct - a get of an object only on disk is read straight from
 * the node's disk into the reader's buffer (issue 29, docs/SSD_TIER.md
 * "Reads straight from the disk"): no load into DRAM, no parked get.
 * A master offloading past 60 % down to 30 % with --disk-promote-after 3,
 * nodes of 16 MB segments and 64 MB disks, 48 objects of 256 KiB:
 * - the first two reads of each offloaded key (one at a time, then one
 *   batch) are answered with its disk record and read byte-exact over
 *   TCP (the client's shm paths do not carry disk reads): none parked
 *   (gets_waited unmoved), no DRAM used (bytes_used unmoved), the master
 *   counts disk_reads_direct and the node's store disk_reads; the third
 *   read promotes every one (the threshold flag still works);
 * - the same with --disk-io plain (pread instead of io_uring);
 * - a record damaged on disk while the node runs (replicas 1): its get
 *   fails, never returns bytes; the node drops the record and tells the
 *   master (MOON.BADREPLICA ... DISK: replicas_corrupt), whose next get
 *   is a miss; the other keys read byte-exact;
 * - replicas 2 on two nodes, both replicas on disk, one record damaged:
 *   the get reads the other record byte-exact, the damaged replica is
 *   dropped and repaired (under_replicated back to 0);
 * - a gateway's GET of a 10 MiB object on disk, streamed slice by slice:
 *   each slice a part of the record read alone, byte-exact.
 * Ports from h_free_ports; the disk files in a directory under $TMPDIR. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

#define TIME_LIMIT_S 240
#define KIB 1024u
#define OBJ (256 * KIB)
#define NOBJ 48              /* 12 MB: 75 % of the segment */
#define SEG_BYTES (16ll << 20)
#define WAIT_MS 30000

static char dir[256];
static char *src, *dst, *big;

typedef struct cluster {
    int port;   /* master; node i at port+1+2i, its data plane port+2+2i */
    char master[32];
    char sub[300];
} cluster;

static void start(cluster *cl, const char *sub, const char *io, int nodes) {
    const char *flags[] = {"--disk-high-watermark", "60", "--disk-low-watermark", "30", "--heartbeat-ms", "100",
                           "--disk-promote-after", "3", NULL};
    cl->port = h_free_ports(1 + 2 * nodes);
    snprintf(cl->master, sizeof cl->master, "127.0.0.1:%d", cl->port);
    snprintf(cl->sub, sizeof cl->sub, "%s/%s", dir, sub);
    ASSERT(h_start_master(cl->port, flags) > 0);
    for (int i = 0; i < nodes; i++) {
        char disk[400];
        snprintf(disk, sizeof disk, "%s/n%d", cl->sub, i);
        h_args a = {0};
        h_node_argv(&a, cl->master, "127.0.0.1", cl->port + 1 + 2 * i, cl->port + 2 + 2 * i, "16MB");
        const char *more[] = {"--segment-persist", "no", "--disk-dir", disk, "--disk-size", "64MB",
                              "--disk-io", io, NULL};
        h_argv(&a, more);
        ASSERT(h_spawn(a.v) > 0);
    }
    ASSERT_EQ(h_wait_nodes(cl->port, "alive", nodes, 20000), 0);
}

static long long master_field(const cluster *cl, const char *f) { return h_port_info(cl->port, "cluster", f); }
static long long node_field(const cluster *cl, int i, const char *f) {
    return h_port_info(cl->port + 1 + 2 * i, "node", f);
}

static void key_of(int i, char *key, size_t len) { snprintf(key, len, "k%d", i); }

/* Puts NOBJ objects (replicas r), waits until the offloads brought the
 * segments under 60 % and none is in flight; how many went to disk. */
static long long fill(const cluster *cl, mkv_client *c, int r, int nodes) {
    char key[32];
    for (int i = 0; i < NOBJ; i++) {
        key_of(i, key, sizeof key);
        h_fill(src, OBJ, (uint64_t)i + 1);
        if (mkv_put(c, key, strlen(key), src, OBJ, r) != MKV_OK) {
            printf("# put %s: %s\n", key, mkv_last_error(c));
            return -1;
        }
    }
    long long limit = SEG_BYTES * nodes * 60 / 100;
    uint64_t end = mono_ms() + WAIT_MS;
    while ((master_field(cl, "bytes_used") > limit || master_field(cl, "disk_offloading_bytes") != 0) &&
           mono_ms() < end)
        usleep(50 * 1000);
    if (master_field(cl, "bytes_used") > limit) return -1;
    return master_field(cl, "disk_offloads");
}

/* Key i read with mkv_get into dst: 1 byte-exact, 0 anything else. */
static int get_exact(mkv_client *c, int i, int *rc) {
    char key[32];
    key_of(i, key, sizeof key);
    size_t got = 0;
    memset(dst, 0, OBJ);
    *rc = mkv_get(c, key, strlen(key), dst, OBJ, &got);
    h_fill(src, OBJ, (uint64_t)i + 1);
    return *rc == MKV_OK && got == OBJ && memcmp(src, dst, OBJ) == 0;
}

/* Every key read one at a time, byte-exact at the first try; -1 if not. */
static int read_each(mkv_client *c) {
    for (int i = 0; i < NOBJ; i++) {
        int rc;
        if (!get_exact(c, i, &rc)) {
            printf("# get k%d: %d %s\n", i, rc, mkv_last_error(c));
            return -1;
        }
    }
    return 0;
}

/* Every key in one batch (MOON.MGETPACKED), byte-exact; -1 if not. */
static int read_batch(mkv_client *c) {
    mkv_obj objs[NOBJ];
    char keys[NOBJ][32];
    for (int i = 0; i < NOBJ; i++) {
        key_of(i, keys[i], sizeof keys[i]);
        objs[i] = (mkv_obj){keys[i], strlen(keys[i]), big + (size_t)i * OBJ, OBJ, 0};
    }
    if (mkv_get_batch(c, objs, NOBJ) != MKV_OK) return -1;
    for (int i = 0; i < NOBJ; i++) {
        h_fill(src, OBJ, (uint64_t)i + 1);
        if (objs[i].status != MKV_OK || objs[i].len != OBJ || memcmp(src, big + (size_t)i * OBJ, OBJ) != 0) {
            printf("# batch get %s: %d\n", keys[i], objs[i].status);
            return -1;
        }
    }
    return 0;
}

static uint64_t tcp_bytes(mkv_client *c) {
    mkv_transfer_stats st;
    mkv_transfer_stats_get(c, &st);
    return st.bytes_tcp;
}

static void direct_reads(const char *io) {
    cluster cl;
    start(&cl, io, io, 1);
    mkv_client *c = NULL;
    ASSERT_EQ(h_mkv_connect(&c, cl.master, NULL, 1), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, src, OBJ), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, dst, OBJ), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, big, (size_t)NOBJ * OBJ), MKV_OK);
    long long off = fill(&cl, c, 1, 1);
    ASSERT(off > 0);
    long long used = master_field(&cl, "bytes_used"), waited = master_field(&cl, "gets_waited");
    long long reads = node_field(&cl, 0, "disk_reads");
    uint64_t tcp = tcp_bytes(c), t0 = mono_us();
    ASSERT_EQ(read_each(c), 0);
    uint64_t us = mono_us() - t0;
    long long direct = master_field(&cl, "disk_reads_direct");
    printf("# %s: %lld of %d keys on disk, read one at a time in %llu ms: %lld straight from the disk, "
           "node disk reads %lld, %llu bytes over tcp\n", io, off, NOBJ, (unsigned long long)us / 1000, direct,
           node_field(&cl, 0, "disk_reads") - reads, (unsigned long long)(tcp_bytes(c) - tcp));
    ASSERT_EQ(direct, off);
    ASSERT_EQ(master_field(&cl, "disk_reads_direct_bytes"), off * OBJ);
    ASSERT_EQ(node_field(&cl, 0, "disk_reads") - reads, off);
    ASSERT(tcp_bytes(c) - tcp >= (uint64_t)off * OBJ);   /* disk reads go over TCP, shm client or not */
    ASSERT_EQ(master_field(&cl, "gets_waited"), waited);   /* none parked for a load */
    ASSERT_EQ(master_field(&cl, "bytes_used"), used);      /* nor took DRAM */
    ASSERT_EQ(master_field(&cl, "disk_promotes"), 0);
    ASSERT_EQ(read_batch(c), 0);
    ASSERT_EQ(master_field(&cl, "disk_reads_direct"), 2 * off);
    ASSERT_EQ(master_field(&cl, "disk_reads_unpromoted"), 2 * off);
    ASSERT_EQ(master_field(&cl, "disk_promotes"), 0);
    ASSERT_EQ(node_field(&cl, 0, "disk_objects"), off);
    ASSERT_EQ(read_each(c), 0);   /* the third read of each promotes it */
    printf("# third read: %lld promoted\n", master_field(&cl, "disk_promotes"));
    ASSERT_EQ(master_field(&cl, "disk_promotes"), off);
    /* A promote that finds no DRAM room yet (the offloads making it still
     * under way, slow under load) is answered from the disk once more:
     * never more than one such read per key. */
    long long direct3 = master_field(&cl, "disk_reads_direct");
    ASSERT(direct3 >= 2 * off && direct3 <= 3 * off);
    ASSERT_EQ(node_field(&cl, 0, "disk_checksum_errors"), 0);
    mkv_close(c);
    h_kill_all();
}

static void test_direct_reads(void) { direct_reads("auto"); }
static void test_direct_reads_plain(void) { direct_reads("plain"); }

/* The records in node's disk file whose header names one of our keys:
 * has[i] set for key i, at[i] the record's header offset; or with flip
 * >= 0, key flip's record gets its value's 1000th byte flipped (the
 * header is one 4 KiB block for short keys). -1 if the file cannot be
 * read (or flip has no record), else 0. */
static int records(const cluster *cl, int node, uint8_t *has, int flip) {
    char path[600];
    snprintf(path, sizeof path, "%s/n%d/moonkv-moonkv-%d.disk", cl->sub, node, cl->port + 1 + 2 * node);
    int fd = open(path, O_RDWR), rc = flip >= 0 ? -1 : 0;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        printf("# cannot open %s\n", path);
        if (fd >= 0) close(fd);
        return -1;
    }
    char *block = malloc(4096), key[32];
    if (has) memset(has, 0, NOBJ);
    for (off_t b = 4096; b < st.st_size; b += 4096) {
        if (pread(fd, block, 4096, b) != 4096) break;
        if (memcmp(block, "MKVDREC1", 8) != 0) continue;
        for (int i = 0; i < NOBJ; i++) {
            key_of(i, key, sizeof key);
            /* the key right after the fixed header part, not a longer key's prefix */
            if (memcmp(block + 48, key, strlen(key)) != 0 || block[48 + strlen(key)] != 0) continue;
            if (has) has[i] = 1;
            uint8_t byte;
            off_t at = b + 4096 + 1000;
            if (i == flip && pread(fd, &byte, 1, at) == 1 && (byte ^= 0x5a, pwrite(fd, &byte, 1, at)) == 1) rc = 0;
        }
    }
    free(block);
    fsync(fd);
    close(fd);
    return rc;
}

/* The first key with a record on node's disk, that record damaged; -1 if none. */
static int damage_record(const cluster *cl, int node) {
    uint8_t has[NOBJ];
    if (records(cl, node, has, -1) != 0) return -1;
    for (int i = 0; i < NOBJ; i++)
        if (has[i]) return records(cl, node, NULL, i) == 0 ? i : -1;
    return -1;
}

/* A cluster of nodes (io auto) and a client putting replicas r, its
 * buffers registered, NOBJ objects put and offloaded (fill). */
static void start_filled(cluster *cl, const char *sub, int nodes, int r, mkv_client **c) {
    start(cl, sub, "auto", nodes);
    ASSERT_EQ(h_mkv_connect(c, cl->master, NULL, r), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(*c, src, OBJ), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(*c, dst, OBJ), MKV_OK);
    ASSERT(fill(cl, *c, r, nodes) > 0);
}

/* Waits until the master's field reaches want; its value. */
static long long wait_field(const cluster *cl, const char *f, long long want) {
    uint64_t end = mono_ms() + WAIT_MS;
    long long v;
    while ((v = master_field(cl, f)) < want && mono_ms() < end) usleep(50 * 1000);
    return v;
}

static void test_damaged_record_is_a_miss(void) {
    cluster cl;
    mkv_client *c = NULL;
    start_filled(&cl, "damage", 1, 1, &c);
    int bad = damage_record(&cl, 0), rc;
    ASSERT(bad >= 0);
    ASSERT(!get_exact(c, bad, &rc));
    printf("# k%d damaged on disk: its get %d (%s), node checksum errors %lld\n", bad, rc, mkv_last_error(c),
           node_field(&cl, 0, "disk_checksum_errors"));
    ASSERT(rc != MKV_OK);   /* never its bytes */
    ASSERT_EQ(node_field(&cl, 0, "disk_checksum_errors"), 1);
    ASSERT_EQ(wait_field(&cl, "replicas_corrupt", 1), 1);   /* the node told the master */
    ASSERT_EQ(wait_field(&cl, "objects_lost", 1), 1);
    ASSERT(!get_exact(c, bad, &rc));
    ASSERT_EQ(rc, MKV_ENOTFOUND);   /* a miss from now on */
    for (int i = 0; i < NOBJ; i++) {
        if (i == bad) continue;
        ASSERT_MSG(get_exact(c, i, &rc), "k%d: %d", i, rc);
    }
    mkv_close(c);
    h_kill_all();
}

static void test_damaged_record_read_from_the_other(void) {
    cluster cl;
    mkv_client *c = NULL;
    start_filled(&cl, "two", 2, 2, &c);
    /* More puts push the colder keys' DRAM replicas (one per object a
     * pass went first) to disk too. */
    char key[32];
    for (int i = 0; i < NOBJ; i++) {
        snprintf(key, sizeof key, "x%d", i);
        ASSERT_EQ(mkv_put(c, key, strlen(key), src, OBJ, 2), MKV_OK);
    }
    uint64_t until = mono_ms() + WAIT_MS;
    while ((master_field(&cl, "bytes_used") > SEG_BYTES * 2 * 60 / 100 ||
            master_field(&cl, "disk_offloading_bytes") != 0) && mono_ms() < until)
        usleep(50 * 1000);
    /* a key with both replicas on disk (a record on each node: a node
     * holds one replica of a key) */
    uint8_t on0[NOBJ], on1[NOBJ];
    int bad = -1, rc;
    ASSERT_EQ(records(&cl, 0, on0, -1), 0);
    ASSERT_EQ(records(&cl, 1, on1, -1), 0);
    for (int i = 0; i < NOBJ && bad < 0; i++)
        if (on0[i] && on1[i]) bad = i;
    ASSERT(bad >= 0);
    /* The first read says which record the reader takes; that one is
     * damaged, and the second read (direct still: promote after 3) finds
     * it rotten and reads the other. */
    long long r0 = node_field(&cl, 0, "disk_reads"), before = master_field(&cl, "disk_reads_direct");
    ASSERT_MSG(get_exact(c, bad, &rc), "k%d: %d %s", bad, rc, mkv_last_error(c));
    ASSERT(master_field(&cl, "disk_reads_direct") > before);
    int n = node_field(&cl, 0, "disk_reads") > r0 ? 0 : 1;
    ASSERT_EQ(records(&cl, n, NULL, bad), 0);
    ASSERT_MSG(get_exact(c, bad, &rc), "k%d: %d %s", bad, rc, mkv_last_error(c));
    printf("# k%d damaged on node %d read byte-exact from the other's record; checksum errors %lld\n", bad, n,
           node_field(&cl, n, "disk_checksum_errors"));
    ASSERT_EQ(node_field(&cl, n, "disk_checksum_errors"), 1);
    ASSERT(wait_field(&cl, "replicas_corrupt", 1) >= 1);
    uint64_t end = mono_ms() + WAIT_MS;
    while (master_field(&cl, "under_replicated") != 0 && mono_ms() < end) usleep(50 * 1000);
    ASSERT_EQ(master_field(&cl, "under_replicated"), 0);   /* repaired from the other record */
    ASSERT_EQ(master_field(&cl, "objects_lost"), 0);
    for (int i = 0; i < NOBJ; i++) ASSERT_MSG(get_exact(c, i, &rc), "k%d: %d", i, rc);
    mkv_close(c);
    h_kill_all();
}

/* A gateway's GET of a 10 MiB object on disk (libmoonkv kept its slice
 * CRCs: the gateway streams it slice by slice, each slice a part of the
 * record read straight from the node's disk and proved by its slice
 * CRC): byte-exact, one read from the disk as the master counts it, and
 * the node read about the object once, not once per slice. */
static void test_gateway_streams_from_disk(void) {
    enum { BIG = 10u << 20 };
    cluster cl;
    start(&cl, "gateway", "auto", 1);
    int gw = h_free_ports(1);
    ASSERT(h_start_gateway(cl.port, gw, NULL, NULL) > 0);
    mkv_client *c = NULL;
    ASSERT_EQ(h_mkv_connect(&c, cl.master, NULL, 1), MKV_OK);
    char *v = aligned_alloc(4096, BIG);
    ASSERT(v != NULL);
    h_fill(v, BIG, 77);
    ASSERT_EQ(mkv_register_buffer(c, v, BIG), MKV_OK);
    ASSERT_EQ(mkv_put(c, "big", 3, v, BIG, 1), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, src, OBJ), MKV_OK);
    char key[32];
    uint64_t end = mono_ms() + WAIT_MS;
    for (int i = 0; node_field(&cl, 0, "disk_objects") < 1 && mono_ms() < end; i++) {   /* colder: big goes */
        snprintf(key, sizeof key, "s%d", i);
        h_fill(src, OBJ, (uint64_t)i + 1);
        if (i < 20) ASSERT_EQ(mkv_put(c, key, strlen(key), src, OBJ, 1), MKV_OK);
        else usleep(50 * 1000);
    }
    while (master_field(&cl, "disk_offloading_bytes") != 0 && mono_ms() < end) usleep(50 * 1000);
    ASSERT(master_field(&cl, "disk_offload_bytes") >= BIG);   /* big went (20 small ones are 5 MiB) */
    long long direct = master_field(&cl, "disk_reads_direct"), reads = node_field(&cl, 0, "disk_reads");
    long long bytes = node_field(&cl, 0, "disk_read_bytes");
    redisContext *g = h_redis(gw);
    ASSERT(g != NULL);
    redisReply *r = redisCommand(g, "GET big");
    int ok = r && r->type == REDIS_REPLY_STRING && r->len == BIG && memcmp(r->str, v, BIG) == 0;
    printf("# GET big through the gateway: %s; node disk reads %lld, %lld bytes read for a %u-byte object\n",
           ok ? "byte-exact" : "wrong", node_field(&cl, 0, "disk_reads") - reads,
           node_field(&cl, 0, "disk_read_bytes") - bytes, BIG);
    if (r) freeReplyObject(r);
    redisFree(g);
    ASSERT(ok);
    ASSERT_EQ(master_field(&cl, "disk_reads_direct"), direct + 1);
    ASSERT(node_field(&cl, 0, "disk_reads") - reads >= 2);   /* slice by slice */
    ASSERT(node_field(&cl, 0, "disk_read_bytes") - bytes < 2ll * BIG);   /* each part alone, not the record each time */
    mkv_close(c);
    free(v);
    h_kill_all();
}

static void cleanup(void) {
    h_kill_all();
    h_temp_dir_remove(dir, "disk-direct");
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_cleanup_hook = cleanup;
    if (h_temp_dir(dir, sizeof dir, "disk-direct") != 0) return 1;
    src = aligned_alloc(4096, OBJ);
    dst = aligned_alloc(4096, OBJ);
    big = aligned_alloc(4096, (size_t)NOBJ * OBJ);
    if (!src || !dst || !big) return 1;
    RUN_TEST(test_direct_reads);
    RUN_TEST(test_direct_reads_plain);
    RUN_TEST(test_damaged_record_is_a_miss);
    RUN_TEST(test_damaged_record_read_from_the_other);
    RUN_TEST(test_gateway_streams_from_disk);
    cleanup();
    free(src);
    free(dst);
    free(big);
    TEST_EXIT();
}
