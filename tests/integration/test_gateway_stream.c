/* Large values streamed through the gateway (src/gateway/put_stream.h):
 * a 256 MiB SET moves on to the nodes while it arrives, so the gateway's
 * resident memory stays within 64 MiB of idle (VmRSS sampled while the
 * value is sent, and VmHWM after), and reads back byte-exact; a SET of
 * the same bytes again is an idempotent OK and other bytes -EXISTS; a
 * client that vanishes mid-value leaves no key and no space held on the
 * master; a node killed mid-value fails the SET cleanly.
 *
 * Ports: one block of h_free_ports, below the ephemeral range
 * (32768-60999), where a client's TIME-WAIT could hold a port a listener
 * needs.
 *
 * The gateway uses the TCP transport here: with shm it maps the nodes'
 * segments, whose pages would count in its VmRSS. */
#include <netinet/in.h>
#include <sys/socket.h>

#include "cluster_harness.h"
#include "test.h"

static int port0;
#define PORT_MASTER  (port0 + 0)
#define PORT_NODE    (port0 + 1)   /* + i; data plane on PORT_NODE + 10 + i */
#define PORT_GATEWAY (port0 + 5)
#define NODES 2
#define MiB (1024ull * 1024)
#define BIG (256 * MiB)
#define PIECE MiB
#define RSS_BOUND_KB (64 * 1024)

static pid_t gateway_pid, node_pid[NODES];
static char *big;   /* BIG bytes of pattern */

/* "*3 $3 SET $keylen key $len" of a SET whose value follows. */
static int send_set_header(int fd, const char *key, uint64_t len) {
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr, "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%llu\r\n", strlen(key), key,
                     (unsigned long long)len);
    return h_send_all(fd, hdr, (size_t)n);
}

/* Reads exactly n bytes (bounded by the socket's timeout); 0 or -1. */
static int recv_all(int fd, char *p, size_t n) {
    while (n) {
        ssize_t k = recv(fd, p, n, 0);
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* GET key compared with want[0, len) piece by piece as it arrives (a
 * client library would gather the whole reply first). 1 if byte-exact. */
static int get_matches(const char *key, const char *want, uint64_t len) {
    int fd = h_raw_connect(PORT_GATEWAY, 0);
    char line[64], *buf = malloc(PIECE);
    struct timeval tv = {.tv_sec = 60};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int n = snprintf(line, sizeof line, "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", strlen(key), key);
    int ok = fd >= 0 && buf && h_send_all(fd, line, (size_t)n) == 0;
    size_t got = 0;   /* the header, byte by byte up to its LF */
    while (ok && got < sizeof line - 1 && (got == 0 || line[got - 1] != '\n')) ok = recv_all(fd, line + got++, 1) == 0;
    line[got] = '\0';
    ok = ok && line[0] == '$' && strtoull(line + 1, NULL, 10) == len;
    for (uint64_t off = 0; ok && off < len; off += PIECE) {
        size_t k = len - off < PIECE ? (size_t)(len - off) : PIECE;
        ok = recv_all(fd, buf, k) == 0 && memcmp(buf, want + off, k) == 0;
    }
    ok = ok && recv_all(fd, line, 2) == 0 && memcmp(line, "\r\n", 2) == 0;
    if (fd >= 0) close(fd);
    free(buf);
    return ok;
}

static long long gateway_field(redisContext *g, const char *field) { return h_info_field(g, "gateway", field); }

/* Sends BIG bytes as key's value piece by piece, the largest VmRSS seen
 * (kB) in *peak; the reply line in reply. */
static int stream_set(const char *key, long *peak, char *reply, size_t len) {
    int fd = h_raw_connect(PORT_GATEWAY, 0);
    if (fd < 0 || send_set_header(fd, key, BIG) != 0) return -1;
    *peak = 0;
    for (uint64_t off = 0; off < BIG; off += PIECE) {
        if (h_send_all(fd, big + off, PIECE) != 0) return -1;
        long rss = h_rss_kb(gateway_pid);
        if (rss > *peak) *peak = rss;
    }
    if (h_send_all(fd, "\r\n", 2) != 0) return -1;
    ssize_t n = recv(fd, reply, len - 1, 0);
    close(fd);
    if (n <= 0) return -1;
    reply[n] = '\0';
    return 0;
}

static void test_stream_set_bounded_rss(void) {
    redisContext *g = h_redis(PORT_GATEWAY);
    ASSERT(g);
    long long streamed = gateway_field(g, "cluster_streamed_puts");
    long idle = h_rss_kb(gateway_pid), hwm_before = h_status_kb(gateway_pid, "VmHWM");
    ASSERT(idle > 0 && hwm_before > 0);
    long peak;
    char reply[128];
    ASSERT(stream_set("stream:big", &peak, reply, sizeof reply) == 0);
    ASSERT_STREQ(reply, "+OK\r\n");
    long hwm = h_status_kb(gateway_pid, "VmHWM");
    printf("# 256 MiB SET: gateway VmRSS idle %ld kB, peak seen %ld kB (+%ld), VmHWM %ld -> %ld kB\n", idle,
           peak, peak - idle, hwm_before, hwm);
    ASSERT_MSG(peak - idle < RSS_BOUND_KB, "VmRSS rose %ld kB above idle", peak - idle);
    long base = hwm_before > idle ? hwm_before : idle;
    ASSERT_MSG(hwm - base < RSS_BOUND_KB, "VmHWM rose %ld kB", hwm - base);
    ASSERT_EQ(gateway_field(g, "cluster_streamed_puts"), streamed + 1);
    ASSERT(get_matches("stream:big", big, BIG));
    redisFree(g);
}

/* Again with the same bytes: OK (nothing written); other bytes: EXISTS,
 * and the value stays. */
static void test_stream_set_again(void) {
    redisContext *g = h_redis(PORT_GATEWAY);
    ASSERT(g);
    long peak;
    char reply[128];
    ASSERT(stream_set("stream:big", &peak, reply, sizeof reply) == 0);
    ASSERT_STREQ(reply, "+OK\r\n");
    big[BIG / 2] ^= 1;
    int rc = stream_set("stream:big", &peak, reply, sizeof reply);
    big[BIG / 2] ^= 1;
    ASSERT(rc == 0);
    ASSERT_MSG(strncmp(reply, "-EXISTS", 7) == 0, "reply %s", reply);
    ASSERT(get_matches("stream:big", big, BIG));
    redisFree(g);
}

/* The client sends 48 of 128 MiB and goes: no key, nothing pending or
 * held on the master, and the key takes a new SET. */
static void test_stream_set_vanished_client(void) {
    redisContext *g = h_redis(PORT_GATEWAY), *m = h_redis(PORT_MASTER);
    ASSERT(g && m);
    long long used = h_info_field(m, "cluster", "bytes_used");
    int fd = h_raw_connect(PORT_GATEWAY, 0);
    ASSERT(fd >= 0);
    ASSERT(send_set_header(fd, "stream:gone", 128 * MiB) == 0);
    ASSERT(h_send_all(fd, big, 48 * MiB) == 0);
    close(fd);
    uint64_t end = mono_ms() + 10000;
    long long pending = -1, now = -1;
    while (mono_ms() < end) {
        pending = h_info_field(m, "cluster", "objects_pending");
        now = h_info_field(m, "cluster", "bytes_used");
        if (pending == 0 && now == used) break;
        usleep(20 * 1000);
    }
    printf("# vanished mid-SET: bytes_used %lld before, %lld after; objects_pending %lld\n", used, now, pending);
    ASSERT_EQ(pending, 0);
    ASSERT_EQ(now, used);
    redisReply *r = redisCommand(g, "EXISTS stream:gone");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0);
    freeReplyObject(r);
    r = redisCommand(g, "SET stream:gone %b", big, (size_t)(32 * MiB));
    ASSERT(r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0);
    freeReplyObject(r);
    r = redisCommand(g, "STRLEN stream:gone");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == (long long)(32 * MiB));
    freeReplyObject(r);
    redisFree(g);
    redisFree(m);
}

/* A node dies (kill -9) while a streamed SET is under way: the bytes
 * written before cannot be placed again, so the SET fails with a reply
 * that says so, the key stays free, and the gateway serves on (reads of
 * values with a replica on the other node). Last: the cluster is down
 * to one node after it. */
static void test_stream_set_node_killed(void) {
    redisContext *g = h_redis(PORT_GATEWAY);
    ASSERT(g);
    int fd = h_raw_connect(PORT_GATEWAY, 0);
    ASSERT(fd >= 0);
    ASSERT(send_set_header(fd, "stream:killed", BIG) == 0);
    ASSERT(h_send_all(fd, big, 64 * MiB) == 0);
    h_kill(node_pid[1]);
    uint64_t off = 64 * MiB;
    while (off < BIG && h_send_all(fd, big + off, PIECE) == 0) off += PIECE;
    char reply[256] = "";
    if (off == BIG) h_send_all(fd, "\r\n", 2);
    ssize_t n = recv(fd, reply, sizeof reply - 1, 0);
    close(fd);
    if (n > 0) reply[n] = '\0';
    printf("# node killed mid-SET after 64 MiB: %llu MiB sent, reply %s", (unsigned long long)(off / MiB), reply);
    ASSERT_MSG(strncmp(reply, "-ERR ", 5) == 0 && strstr(reply, "streamed write of bytes "), "reply '%s'", reply);
    redisReply *r = redisCommand(g, "EXISTS stream:killed");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0);
    freeReplyObject(r);
    ASSERT(get_matches("stream:big", big, BIG));   /* its other replica */
    redisFree(g);
}

int main(void) {
    h_init(300);
    h_setup_or_exit(port0 = h_free_ports(11 + NODES), "free ports");
    big = malloc(BIG);
    if (!big) return 1;
    h_fill(big, BIG, 0x5eed);
    if (h_start_master(PORT_MASTER, NULL) < 0) {
        printf("not ok - master did not start\n");
        return 1;
    }
    for (int i = 0; i < NODES; i++)
        if ((node_pid[i] = h_start_node(PORT_MASTER, PORT_NODE + i, PORT_NODE + 10 + i, "768MB")) < 0) {
            printf("not ok - node did not start\n");
            return 1;
        }
    const char *extra[] = {"--segment-size", "16MB", "--transport", "tcp", NULL};
    if (h_wait_nodes(PORT_MASTER, "alive", NODES, 20000) != 0 ||
        (gateway_pid = h_start_gateway(PORT_MASTER, PORT_GATEWAY, extra, NULL)) < 0) {
        printf("not ok - cluster did not start\n");
        return 1;
    }
    RUN_TEST(test_stream_set_bounded_rss);
    RUN_TEST(test_stream_set_again);
    RUN_TEST(test_stream_set_vanished_client);
    RUN_TEST(test_stream_set_node_killed);
    free(big);
    TEST_EXIT();
}
