/* Per-slice checksums in the cluster (proto/slices.h, docs/PROTOCOL.md): a
 * libmoonkv put of a value of several slices ends with its slice CRCs,
 * the master returns them with MOON.GET (each the CRC32C of its slice of
 * the value), refuses a put-end whose list is malformed with its exact
 * text, and a get that meets a rotten slice on one replica (a byte
 * flipped through the node's memfd) returns the value byte-exact from
 * the other. Ports: one block of h_free_ports (below the ephemeral range). */
#include <sys/mman.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "core/crc32c.h"
#include "test.h"

static int port0;
static char master_addr[32];   /* 127.0.0.1:PORT_MASTER */
#define PORT_MASTER  (port0 + 0)
#define PORT_NODE    (port0 + 1)   /* + i; data plane on PORT_NODE + 10 + i */
#define NODES 2
#define MiB (1024ull * 1024)
#define LEN (10 * MiB + 5)   /* three 4 MiB slices, the last short */
#define SLICE (4 * MiB)

static pid_t node_pid[NODES];
static uint32_t node_id[NODES];   /* by index */
static mkv_client *mc;
static char *val, *back;

static redisReply *master_cmd(const char *fmt, const char *key) {
    redisContext *m = h_proven(h_redis(PORT_MASTER), "");
    redisReply *r = m ? redisCommand(m, fmt, key) : NULL;
    if (m) redisFree(m);
    return r;
}

/* The master keeps key's three slice CRCs, each val's slice's own. */
static int slices_are_vals(const char *key) {
    redisReply *r = master_cmd("MOON.GET %s", key);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 5 && r->element[3]->integer == (long long)SLICE &&
             r->element[4]->len == 12;
    for (int i = 0; ok && i < 3; i++) {
        uint64_t off = (uint64_t)i * SLICE, n = LEN - off < SLICE ? LEN - off : SLICE;
        const uint8_t *p = (const uint8_t *)r->element[4]->str + 4 * i;
        uint32_t got = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        ok = got == crc32c(0, val + off, n);
    }
    freeReplyObject(r);
    return ok;
}

/* A get of key gives val back byte-exact. */
static int reads_back(const char *key) {
    memset(back, 0, LEN);
    size_t n = 0;
    return mkv_get(mc, key, strlen(key), back, LEN, &n) == MKV_OK && n == LEN && memcmp(back, val, LEN) == 0;
}

/* TCP sums what it sends (the transport, right after the kernel's copy);
 * the slices come from the units' sums, so a put keeps them with no pass
 * of its own. */
static void test_put_end_keeps_slices(void) {
    ASSERT_EQ(mkv_put(mc, "sl:a", 4, val, LEN, 2), MKV_OK);
    ASSERT(slices_are_vals("sl:a"));
    ASSERT(reads_back("sl:a"));
    /* a small value keeps none: the old three-element answer */
    ASSERT_EQ(mkv_put(mc, "sl:small", 8, val, 1000, 2), MKV_OK);
    redisReply *r = master_cmd("MOON.GET %s", "sl:small");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    freeReplyObject(r);
    ASSERT(h_port_info(PORT_MASTER, "cluster", "slice_crc_bytes") >= 12);
}

/* The same value in pieces far apart (an engine's layers), striped over
 * both nodes, one replica: byte-exact, its slice CRCs its bytes'. */
static void test_pieces_striped_keep_slices(void) {
    enum { PIECE = (16 << 10) + 3 };
    size_t np = (LEN + PIECE - 1) / PIECE, alen = 2 * (size_t)LEN + PIECE;
    char *arena = malloc(alen);
    mkv_iov *iov = calloc(np, sizeof *iov);
    ASSERT(arena && iov && mkv_register_buffer(mc, arena, alen) == MKV_OK);
    for (size_t i = 0; i < np; i++) {
        size_t off = i * PIECE, len = LEN - off < PIECE ? LEN - off : PIECE;
        iov[i] = (mkv_iov){arena + 2 * off, len};
        memcpy(iov[i].buf, val + off, len);
    }
    mkv_objv o = {.key = "sl:v", .keylen = 4, .iov = iov, .niov = np};
    ASSERT_EQ(mkv_put_batchv(mc, &o, 1, 1), MKV_OK);
    ASSERT_EQ(o.status, MKV_OK);
    int first = -1, second = -1;
    uint64_t off;
    ASSERT(h_locate_byte(PORT_MASTER, "sl:v", 0, 0, node_id, NODES, &first, &off) == 0);
    ASSERT(h_locate_byte(PORT_MASTER, "sl:v", 0, 1 * MiB, node_id, NODES, &second, &off) == 0);
    ASSERT_MSG(first >= 0 && second >= 0 && first != second, "striped: bytes 0 and 1 MiB on nodes %d, %d", first,
               second);
    ASSERT(slices_are_vals("sl:v"));
    ASSERT(reads_back("sl:v"));
    mkv_unregister_buffer(mc, arena);
    free(iov);
    free(arena);
}

static void test_put_end_refusals(void) {
    redisContext *m = h_proven(h_redis(PORT_MASTER), "");
    ASSERT(m);
    redisReply *r = redisCommand(m, "MOON.PUTSTART sl:bad %llu", (unsigned long long)LEN);
    ASSERT(r && r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    static const struct { const char *size; size_t len; const char *err; } cases[] = {
        {"4194304", 7, "ERR slice CRCs must be 4 bytes each, got 7 bytes"},
        {"4194305", 12, "ERR slice size must be 0 or a power of two from 65536 to 1099511627776"},
        {"18446744073709551617", 12, "ERR slice size must be 0 or a power of two from 65536 to 1099511627776"},
        {"4194304", 8, "ERR 2 slice CRCs for 3 slices of 4194304 bytes"},
        {"4194304", 12, "ERR slice CRCs do not combine to the object's CRC 7"},
        {"4194304", 4 * 4097, "ERR at most 4096 slice CRCs"},
    };
    static char zeros[4 * 4097];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        r = redisCommand(m, "MOON.PUTEND sl:bad 7 SLICES %s %b", cases[i].size, zeros, cases[i].len);
        ASSERT_MSG(r && r->type == REDIS_REPLY_ERROR, "case %zu: type %d", i, r ? r->type : -1);
        ASSERT_STREQ(r->str, cases[i].err);
        freeReplyObject(r);
    }
    r = redisCommand(m, "MOON.PUTEND sl:bad 7 SLICE 4194304 %b", zeros, (size_t)12);
    ASSERT(r && r->type == REDIS_REPLY_ERROR && strcmp(r->str, "ERR syntax error") == 0);
    freeReplyObject(r);
    /* a list that does not fit its object is that key's error element */
    r = redisCommand(m, "MOON.MPUTEND SLICES sl:bad 7 4194304 %b", zeros, (size_t)8);
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_ERROR);
    ASSERT_STREQ(r->element[0]->str, "ERR 2 slice CRCs for 3 slices of 4194304 bytes");
    freeReplyObject(r);
    r = redisCommand(m, "MOON.MPUTEND SLICES sl:bad 7 4194304 %b", zeros, (size_t)9);
    ASSERT(r && r->type == REDIS_REPLY_ERROR);
    ASSERT_STREQ(r->str, "ERR slice CRCs must be 4 bytes each, got 9 bytes");
    freeReplyObject(r);
    r = redisCommand(m, "MOON.PUTREVOKE sl:bad");
    ASSERT(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(m);
}

/* Each replica rotten in turn, in another slice: the get finds the bad
 * slice and reads the other replica. */
static void test_rotten_slice_read_from_other_replica(void) {
    ASSERT_EQ(mkv_put(mc, "sl:rot", 6, val, LEN, 2), MKV_OK);
    for (int rep = 0; rep < 2; rep++) {
        int node = -1;
        uint64_t off = 0, at = (uint64_t)(rep + 1) * SLICE + 77;
        ASSERT(h_locate_byte(PORT_MASTER, "sl:rot", rep, at, node_id, NODES, &node, &off) == 0 && node >= 0);
        ASSERT(h_flip_segment_byte(node_pid[node], off) == 0);
        memset(back, 0, LEN);
        size_t n = 0;
        ASSERT_EQ(mkv_get(mc, "sl:rot", 6, back, LEN, &n), MKV_OK);
        ASSERT_MEMEQ(back, val, LEN);
        ASSERT(h_flip_segment_byte(node_pid[node], off) == 0);   /* healed for the next round */
    }
}

int main(void) {
    h_init(180);
    h_setup_or_exit(port0 = h_free_ports(11 + NODES), "free ports");
    snprintf(master_addr, sizeof master_addr, "127.0.0.1:%d", PORT_MASTER);
    val = malloc(LEN);
    back = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!val || back == MAP_FAILED) return 1;
    h_fill(val, LEN, 0x511ce);
    const char *mflags[] = {"--replicas", "2", NULL};
    if (h_start_master(PORT_MASTER, mflags) < 0) {
        printf("not ok - master did not start\n");
        return 1;
    }
    for (int i = 0; i < NODES; i++)
        node_pid[i] = h_start_node_unscrubbed(PORT_MASTER, PORT_NODE + i, PORT_NODE + 10 + i, "128MB");
    mkv_options opt;
    mkv_options_init(&opt);
    opt.master = master_addr;
    opt.transport = "tcp";   /* summed in the transport, slices and all */
    if (h_wait_nodes(PORT_MASTER, "alive", NODES, 20000) != 0 || h_node_ids(PORT_MASTER, PORT_NODE + 10, node_id, NODES) != 0 ||
        mkv_connect(&mc, &opt) != MKV_OK || mkv_register_buffer(mc, val, LEN) != MKV_OK ||
        mkv_register_buffer(mc, back, LEN) != MKV_OK) {
        printf("not ok - cluster did not start\n");
        return 1;
    }
    RUN_TEST(test_put_end_keeps_slices);
    RUN_TEST(test_pieces_striped_keep_slices);
    RUN_TEST(test_put_end_refusals);
    RUN_TEST(test_rotten_slice_read_from_other_replica);
    mkv_close(mc);
    h_kill_all();
    free(val);
    TEST_EXIT();
}
