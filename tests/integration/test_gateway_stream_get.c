/* Large GETs streamed by the gateway (src/gateway/get_stream.h): a value
 * with slice CRCs goes to the client slice by slice as the slices arrive
 * and verify, so the gateway's resident memory stays a few slices above
 * idle while 64 MiB values are read (and its 16 MiB staging pool could
 * not hold one); a slice rotten on one replica is served from the other;
 * a node killed -9 in the middle of a GET with replicas 2 costs nothing
 * (the reply completes from the other replica, byte-exact); with
 * replicas 1 the client's connection is closed before the value is
 * complete, and every byte it got before is right; clients that leave
 * mid-GET leave nothing behind; a client slower than the read lease
 * gets the whole value (the lease is renewed). MGET's large values and
 * large GETs inside EXEC stream too.
 *
 * The values are put by libmoonkv (TCP, so with slice CRCs), with 2 and
 * 1 replicas, on three nodes, each replica on one node; the gateway uses TCP too (with shm it maps
 * the nodes' segments, whose pages would count in its VmRSS).
 * Ports: one block of h_free_ports (below the ephemeral range). */
#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

static int port0;
static char master_addr[32];   /* 127.0.0.1:PORT_MASTER */
#define PORT_MASTER  (port0 + 0)
#define PORT_NODE    (port0 + 1)   /* + i; data plane on PORT_NODE + 10 + i */
#define PORT_GATEWAY (port0 + 5)
#define NODES 3
#define MiB (1024ull * 1024)
#define LEN (64 * MiB + 12345)
#define SLICE (4 * MiB)
#define PIECE (256 * 1024)
#define RSS_BOUND_KB (32 * 1024)

static pid_t gateway_pid, node_pid[NODES];
static uint32_t node_id[NODES];
static char *val, *val1;   /* the replicas-2 and replicas-1 values */
static char *buf;
static unsigned slow_us;   /* a pause per piece read: a client slower than the read lease */

/* A streamed GET of key, read piece by piece and compared with want as
 * it arrives. at_mid (if set) runs once mid bytes of the value are in.
 * Returns the value bytes that arrived right (all of them, then the
 * CRLF: len + 2), the largest gateway VmRSS seen in *peak. *eof: the
 * connection ended before len + 2 bytes. */
typedef struct get_run {
    uint64_t right;           /* value bytes that matched, in order */
    int wrong;                /* a byte differed */
    int complete;             /* the whole value and its CRLF */
    long peak;
} get_run;

/* A slow reader's connection (the socket holds little); -1 on failure. */
static int slow_connect(void) {
    int fd = h_raw_connect(PORT_GATEWAY, 256 * 1024);
    struct timeval tv = {.tv_sec = 30};
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* A reply's header line ("$len", "*n"), byte by byte up to its LF. */
static const char *header_line(int fd) {
    static char line[64];
    size_t got = 0;
    while (got < sizeof line - 1 && (got == 0 || line[got - 1] != '\n') && h_recv_all(fd, line + got, 1) == 1) got++;
    line[got] = '\0';
    return line;
}

/* One bulk reply of len bytes, read piece by piece and compared with
 * want as it arrives, into *gr (see get_run). */
static void read_bulk(int fd, const char *want, uint64_t len, uint64_t mid, void (*at_mid)(void), get_run *gr) {
    const char *line = header_line(fd);
    if (line[0] != '$' || strtoull(line + 1, NULL, 10) != len) {
        printf("# header '%s'\n", line);
        return;
    }
    for (uint64_t off = 0; off < len && !gr->wrong;) {
        if (at_mid && off >= mid) {
            at_mid();
            at_mid = NULL;
        }
        size_t k = len - off < PIECE ? (size_t)(len - off) : PIECE;
        if (slow_us) usleep(slow_us);
        size_t r = h_recv_all(fd, buf, k);
        gr->wrong = memcmp(buf, want + off, r) != 0;
        if (!gr->wrong) gr->right += r;
        off += r;
        long rss = h_rss_kb(gateway_pid);
        if (rss > gr->peak) gr->peak = rss;
        if (r < k) break;   /* cut off */
    }
    char crlf[2];
    gr->complete = gr->right == len && h_recv_all(fd, crlf, 2) == 2 && memcmp(crlf, "\r\n", 2) == 0;
}

static get_run stream_get(const char *key, const char *want, uint64_t len, uint64_t mid, void (*at_mid)(void)) {
    get_run gr = {0};
    int fd = slow_connect();
    char cmd[64];
    int n = snprintf(cmd, sizeof cmd, "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", strlen(key), key);
    if (fd >= 0 && send(fd, cmd, (size_t)n, MSG_NOSIGNAL) == n) read_bulk(fd, want, len, mid, at_mid, &gr);
    if (fd >= 0) close(fd);
    return gr;
}

static long long gateway_field(const char *field) { return h_port_info(PORT_GATEWAY, "gateway", field); }

static void test_stream_get_bounded_rss(void) {
    long long streamed = gateway_field("cluster_streamed_gets");
    long idle = h_rss_kb(gateway_pid), peak = 0;
    for (int i = 0; i < 3; i++) {
        get_run gr = stream_get("big:2", val, LEN, 0, NULL);
        ASSERT_MSG(gr.complete, "run %d: %llu bytes right, wrong %d", i, (unsigned long long)gr.right, gr.wrong);
        if (gr.peak > peak) peak = gr.peak;
    }
    printf("# 3 GETs of 64 MiB: gateway VmRSS idle %ld kB, peak seen %ld kB (+%ld)\n", idle, peak, peak - idle);
    ASSERT_MSG(peak - idle < RSS_BOUND_KB, "VmRSS rose %ld kB above idle", peak - idle);
    ASSERT_EQ(gateway_field("cluster_streamed_gets"), streamed + 3);
    /* redis-cli's kind of client: the whole reply at once */
    redisContext *g = h_redis(PORT_GATEWAY);
    ASSERT(g);
    h_redis_room(g, LEN + 64);
    redisReply *r = redisCommand(g, "GET big:2");
    ASSERT(r && r->type == REDIS_REPLY_STRING && r->len == LEN && memcmp(r->str, val, LEN) == 0);
    freeReplyObject(r);
    r = redisCommand(g, "PING");   /* the connection goes on after a streamed reply */
    ASSERT(r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0);
    freeReplyObject(r);
    redisFree(g);
}

/* Pipelined: GET big, GET small, GET big on one connection answer in order. */
static void test_stream_get_pipelined(void) {
    redisContext *g = h_redis(PORT_GATEWAY);
    ASSERT(g);
    h_redis_room(g, LEN + 64);
    redisReply *r = redisCommand(g, "SET small:1 hello");
    ASSERT(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisAppendCommand(g, "GET big:2");
    redisAppendCommand(g, "GET small:1");
    redisAppendCommand(g, "GET big:1");
    void *v;
    ASSERT_EQ(redisGetReply(g, &v), REDIS_OK);
    r = v;
    ASSERT(r->type == REDIS_REPLY_STRING && r->len == LEN && memcmp(r->str, val, LEN) == 0);
    freeReplyObject(r);
    ASSERT_EQ(redisGetReply(g, &v), REDIS_OK);
    r = v;
    ASSERT(r->type == REDIS_REPLY_STRING && strcmp(r->str, "hello") == 0);
    freeReplyObject(r);
    ASSERT_EQ(redisGetReply(g, &v), REDIS_OK);
    r = v;
    ASSERT(r->type == REDIS_REPLY_STRING && r->len == LEN && memcmp(r->str, val1, LEN) == 0);
    freeReplyObject(r);
    redisFree(g);
}

/* MGET big:2 small:1 big:1 nokey read as slowly: the large values stream
 * into the array one after the other (the gateway's memory stays a few
 * slices above idle, where reading them whole would hold 128 MiB), and
 * the small one and the missing one are the shared command's bytes. */
static void test_stream_mget_bounded_rss(void) {
    long long streamed = gateway_field("cluster_streamed_gets");
    long idle = h_rss_kb(gateway_pid);
    int fd = slow_connect();
    ASSERT(fd >= 0);
    static const char cmd[] = "*5\r\n$4\r\nMGET\r\n$5\r\nbig:2\r\n$7\r\nsmall:1\r\n$5\r\nbig:1\r\n$5\r\nnokey\r\n";
    ASSERT(send(fd, cmd, sizeof cmd - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof cmd - 1));
    get_run a = {0}, b = {0};
    int head = strcmp(header_line(fd), "*4\r\n") == 0;
    if (head) read_bulk(fd, val, LEN, 0, NULL, &a);
    char small[32] = "", nokey[8] = "";
    if (a.complete) h_recv_all(fd, small, 11);   /* $5 hello */
    if (a.complete) read_bulk(fd, val1, LEN, 0, NULL, &b);
    if (b.complete) h_recv_all(fd, nokey, 5);
    close(fd);
    ASSERT(head);
    ASSERT_MSG(a.complete && b.complete, "big:2 %llu bytes right, big:1 %llu", (unsigned long long)a.right,
               (unsigned long long)b.right);
    ASSERT(memcmp(small, "$5\r\nhello\r\n", 11) == 0);
    ASSERT(memcmp(nokey, "$-1\r\n", 5) == 0);
    long peak = a.peak > b.peak ? a.peak : b.peak;
    printf("# MGET of two 64 MiB values: gateway VmRSS idle %ld kB, peak seen %ld kB (+%ld)\n", idle, peak, peak - idle);
    ASSERT_MSG(peak - idle < RSS_BOUND_KB, "VmRSS rose %ld kB above idle", peak - idle);
    ASSERT_EQ(gateway_field("cluster_streamed_gets"), streamed + 2);
}

/* Inside EXEC too: GET and MGET of large values stream (the transaction
 * goes on behind them), and the replies are in order, byte-exact. */
static void test_stream_exec(void) {
    long long streamed = gateway_field("cluster_streamed_gets");
    redisContext *g = h_redis(PORT_GATEWAY);
    ASSERT(g);
    h_redis_room(g, LEN + 64);
    redisAppendCommand(g, "MULTI");
    redisAppendCommand(g, "GET big:1");
    redisAppendCommand(g, "GET small:1");
    redisAppendCommand(g, "MGET small:1 big:2");
    redisAppendCommand(g, "EXEC");
    redisAppendCommand(g, "PING");
    void *v;
    for (int i = 0; i < 4; i++) {   /* OK, QUEUED x3 */
        ASSERT_EQ(redisGetReply(g, &v), REDIS_OK);
        freeReplyObject(v);
    }
    ASSERT_EQ(redisGetReply(g, &v), REDIS_OK);
    redisReply *r = v, **e = r->element;
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements == 3 && e[0]->type == REDIS_REPLY_STRING && e[0]->len == LEN &&
             memcmp(e[0]->str, val1, LEN) == 0 && e[1]->type == REDIS_REPLY_STRING && strcmp(e[1]->str, "hello") == 0 &&
             e[2]->type == REDIS_REPLY_ARRAY && e[2]->elements == 2 && strcmp(e[2]->element[0]->str, "hello") == 0 &&
             e[2]->element[1]->len == LEN && memcmp(e[2]->element[1]->str, val, LEN) == 0;
    freeReplyObject(r);
    ASSERT_MSG(ok, "EXEC's replies are not GET's, GET's and MGET's");
    ASSERT_EQ(redisGetReply(g, &v), REDIS_OK);
    r = v;
    ASSERT(r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0);
    freeReplyObject(r);
    redisFree(g);
    ASSERT_EQ(gateway_field("cluster_streamed_gets"), streamed + 2);
}

static void vanish_mid(const char *cmd) {
    int fd = h_raw_connect(PORT_GATEWAY, 0);
    if (fd < 0) return;
    if (send(fd, cmd, strlen(cmd), MSG_NOSIGNAL) == (ssize_t)strlen(cmd)) h_recv_all(fd, buf, PIECE);
    close(fd);
}

/* Clients that go mid-GET or mid-MGET leave nothing behind: the streams
 * end (an MGET's later values never start), and the gateway serves the
 * next GETs whole. */
static void test_stream_get_client_vanishes(void) {
    long long streamed = gateway_field("cluster_streamed_gets");
    for (int i = 0; i < 4; i++) vanish_mid("*2\r\n$3\r\nGET\r\n$5\r\nbig:2\r\n");
    for (int i = 0; i < 2; i++) vanish_mid("*4\r\n$4\r\nMGET\r\n$5\r\nbig:2\r\n$7\r\nsmall:1\r\n$5\r\nbig:1\r\n");
    get_run gr = stream_get("big:2", val, LEN, 0, NULL);
    ASSERT(gr.complete);
    ASSERT_EQ(gateway_field("cluster_streamed_gets"), streamed + 7);
}

/* A client that takes 3 leases' time (2 s each here) to read the value:
 * the gateway renews the read lease as it runs out, and the reply is whole. */
static void test_stream_get_slow_client(void) {
    slow_us = 25 * 1000;   /* 256 KiB per 25 ms: about 6.5 s */
    uint64_t t0 = mono_ms();
    get_run gr = stream_get("big:2", val, LEN, 0, NULL);
    slow_us = 0;
    printf("# slow client: %llu ms for 64 MiB\n", (unsigned long long)(mono_ms() - t0));
    ASSERT_MSG(gr.complete, "%llu bytes right, wrong %d", (unsigned long long)gr.right, gr.wrong);
}

/* Nodes holding some of key (a bit per node index). */
static unsigned nodes_of(const char *key) {
    redisContext *m = h_redis(PORT_MASTER);
    redisReply *r = m ? redisCommand(m, "MOON.GET %s", key) : NULL;
    unsigned set = 0;
    for (size_t rep = 0; r && r->type == REDIS_REPLY_ARRAY && rep < r->element[2]->elements; rep++) {
        const redisReply *exts = r->element[2]->element[rep];
        for (size_t i = 0; i < exts->elements; i++)
            for (int k = 0; k < NODES; k++)
                if (node_id[k] == (uint32_t)exts->element[i]->element[0]->integer) set |= 1u << k;
    }
    if (r) freeReplyObject(r);
    if (m) redisFree(m);
    return set;
}

/* Replica 0 rotten in slice 3, replica 1 in slice 9: every slice has a
 * good copy somewhere, and the reply is byte-exact. */
static void test_stream_get_rotten_slices(void) {
    int node[2] = {-1, -1};
    uint64_t off[2];
    for (int rep = 0; rep < 2; rep++) {
        ASSERT(h_locate_byte(PORT_MASTER, "big:2", rep, (rep ? 9 : 3) * SLICE + 4321, node_id, NODES, &node[rep], &off[rep]) == 0 && node[rep] >= 0);
        ASSERT(h_flip_segment_byte(node_pid[node[rep]], off[rep]) == 0);
    }
    get_run gr = stream_get("big:2", val, LEN, 0, NULL);
    for (int rep = 0; rep < 2; rep++) ASSERT(h_flip_segment_byte(node_pid[node[rep]], off[rep]) == 0);
    ASSERT_MSG(gr.complete, "%llu bytes right, wrong %d", (unsigned long long)gr.right, gr.wrong);
}

static int victim = -1;
static void kill_victim(void) {
    printf("# killing node %d (id %u) mid-GET\n", victim, node_id[victim]);
    h_kill(node_pid[victim]);
}

/* kill -9 of a node holding one replica of big:2 once 8 MiB arrived. */
static void test_stream_get_node_killed_replicas2(void) {
    unsigned both = nodes_of("big:2"), one = nodes_of("big:1");
    for (int i = 0; i < NODES && victim < 0; i++)
        if ((both >> i & 1) && !(one >> i & 1)) victim = i;   /* big:1 stays for the next test */
    ASSERT_MSG(victim >= 0, "nodes of big:2 %#x, of big:1 %#x", both, one);
    get_run gr = stream_get("big:2", val, LEN, 8 * MiB, kill_victim);
    ASSERT_MSG(gr.complete, "%llu bytes right, wrong %d", (unsigned long long)gr.right, gr.wrong);
    gr = stream_get("big:2", val, LEN, 0, NULL);   /* and again, with the node gone */
    ASSERT(gr.complete);
}

/* big:1 has one replica; its node dies mid-GET: cut off, never complete,
 * never a wrong byte; the gateway serves on. */
static void test_stream_get_replicas1_node_killed(void) {
    unsigned one = nodes_of("big:1");
    victim = -1;
    for (int i = 0; i < NODES && victim < 0; i++)
        if (one >> i & 1) victim = i;
    ASSERT(victim >= 0);
    long long cut = gateway_field("cluster_streamed_gets_cut");
    get_run gr = stream_get("big:1", val1, LEN, 8 * MiB, kill_victim);
    printf("# replicas 1, node killed: %llu of %llu bytes arrived before the cut\n", (unsigned long long)gr.right,
           (unsigned long long)LEN);
    ASSERT(!gr.complete);
    ASSERT(!gr.wrong);
    ASSERT(gr.right >= 8 * MiB && gr.right < LEN);   /* cut after the kill, before the end */
    ASSERT_EQ(gateway_field("cluster_streamed_gets_cut"), cut + 1);
    redisContext *g = h_redis(PORT_GATEWAY);
    ASSERT(g);
    redisReply *r = redisCommand(g, "GET small:1");
    ASSERT(r && r->type == REDIS_REPLY_STRING && strcmp(r->str, "hello") == 0);
    freeReplyObject(r);
    redisFree(g);
}

/* The two values, put by libmoonkv over TCP (with slice CRCs). */
static int put_values(void) {
    mkv_client *mc;
    if (h_mkv_connect(&mc, master_addr, "tcp", 0) != MKV_OK) return -1;
    int rc = mkv_register_buffer(mc, val, LEN);
    if (rc == MKV_OK) rc = mkv_register_buffer(mc, val1, LEN);
    if (rc == MKV_OK) rc = mkv_put(mc, "big:2", 5, val, LEN, 2);
    if (rc == MKV_OK) rc = mkv_put(mc, "big:1", 5, val1, LEN, 1);
    if (rc != MKV_OK) printf("# put: %s\n", mkv_last_error(mc));
    mkv_close(mc);
    return rc == MKV_OK ? 0 : -1;
}

int main(void) {
    h_init(300);
    h_setup_or_exit(port0 = h_free_ports(11 + NODES), "free ports");
    snprintf(master_addr, sizeof master_addr, "127.0.0.1:%d", PORT_MASTER);
    val = malloc(LEN);
    val1 = malloc(LEN);
    buf = malloc(PIECE);
    if (!val || !val1 || !buf) return 1;
    h_fill(val, LEN, 0x6e7);
    h_fill(val1, LEN, 0x6e8);
    const char *mflags[] = {"--stripe-width", "1", "--lease-ms", "2000", NULL};   /* a replica on one node: the kills hit one */
    if (h_start_master(PORT_MASTER, mflags) < 0) {
        printf("not ok - master did not start\n");
        return 1;
    }
    for (int i = 0; i < NODES; i++)
        node_pid[i] = h_start_node_unscrubbed(PORT_MASTER, PORT_NODE + i, PORT_NODE + 10 + i, "256MB");
    const char *extra[] = {"--segment-size", "16MB", "--transport", "tcp", NULL};
    if (h_wait_nodes(PORT_MASTER, "alive", NODES, 20000) != 0 || h_node_ids(PORT_MASTER, PORT_NODE + 10, node_id, NODES) != 0 || put_values() != 0 ||
        (gateway_pid = h_start_gateway(PORT_MASTER, PORT_GATEWAY, extra, NULL)) < 0) {
        printf("not ok - cluster did not start\n");
        return 1;
    }
    RUN_TEST(test_stream_get_bounded_rss);
    RUN_TEST(test_stream_get_pipelined);
    RUN_TEST(test_stream_mget_bounded_rss);
    RUN_TEST(test_stream_exec);
    RUN_TEST(test_stream_get_rotten_slices);
    RUN_TEST(test_stream_get_client_vanishes);
    RUN_TEST(test_stream_get_slow_client);
    RUN_TEST(test_stream_get_node_killed_replicas2);
    RUN_TEST(test_stream_get_replicas1_node_killed);
    h_kill_all();
    free(val);
    free(val1);
    free(buf);
    TEST_EXIT();
}
