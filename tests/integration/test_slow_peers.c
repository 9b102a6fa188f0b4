/* test_slow_peers - peers that are slow, mute or gone without a word:
 *  - slowloris: connections dribbling a command one byte per 100 ms on
 *    every RESP port (standalone, master, node, gateway) and on a node's
 *    data plane; everyone else is still served at once, and the data
 *    plane drops the dribblers at its handshake deadline;
 *  - a client that pipelines GETs and never reads the replies is dropped
 *    at --client-output-limit (standalone and gateway), the server's RSS
 *    does not follow the queued replies;
 *  - a node stopped (SIGSTOP) in the middle of transfers: libmoonkv reads
 *    fail over to the other replica or time out, bounded, and so do GETs
 *    through the gateway;
 *  - half-open TCP: a node in a network namespace whose link is cut
 *    (`ip link set down`, no FIN, no RST): reads fail over, bounded, and
 *    the master declares the node dead (root only; skipped otherwise).
 * Ports: one block of h_free_ports, taken first in main(). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "netns_harness.h"
#include "test.h"

static int port0;
#define PORT_STANDALONE (port0 + 0)
#define PORT_MASTER     (port0 + 10)
#define PORT_GATEWAY    (port0 + 11)
#define PORT_NODE(i)    (port0 + 20 + 2 * (i))
#define PORT_DATA(i)    (port0 + 21 + 2 * (i))
#define NS_PORT_MASTER  (port0 + 1)
#define NS_PORT_NODE    (port0 + 2)
#define NS_PORT_DATA    (port0 + 3)
#define NODE_TIMEOUT_MS 1500
#define CLIENT_TIMEOUT  2000    /* libmoonkv per operation */
#define OUTPUT_LIMIT_MB 4
#define MIB (1024u * 1024u)

static pid_t standalone, master, gateway, nodes[2];

/* ---- raw sockets ---- */

/* 1 if the peer has closed fd (EOF or reset; pending bytes are drained). */
static int peer_closed(int fd) {
    char buf[65536];
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 0) <= 0) return 0;
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return 1;
        if (n < 0) return 0;
    }
}

static long long info_ll(int port, const char *field) {
    redisContext *c = h_redis(port);
    redisReply *r = c ? redisCommand(c, "INFO") : NULL;
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s:", field);
    const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, pat) : NULL;
    long long v = p ? atoll(p + strlen(pat)) : -1;
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return v;
}

/* ms a fresh connection takes for PING, or -1 if it failed. */
static long ping_ms(int port) {
    uint64_t t0 = mono_ms();
    redisContext *c = h_redis_ms("127.0.0.1", port, 3000);
    redisReply *r = c ? redisCommand(c, "PING") : NULL;
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return ok ? (long)(mono_ms() - t0) : -1;
}

/* ---- slowloris ---- */

#define NSLOW     16          /* dribblers per port */
#define DRIBBLE_S 3

static const char slow_cmd[] = "*3\r\n$3\r\nSET\r\n$4\r\nslow\r\n$16\r\n0123456789abcdef\r\n";

/* How long the probes took while dribblers ran: the median says whether
 * others were served at once (a server that waits on a dribbler holds
 * most probes, or fails them), the worst bounds a hiccup of a loaded
 * machine (one probe past 1.5 s under load 25 failed a bound on the
 * worst alone). */
typedef struct probe_times {
    long ms[DRIBBLE_S * 10 * 8];
    int n;
    long worst;
} probe_times;

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

static long median_ms(probe_times *t) {
    qsort(t->ms, (size_t)t->n, sizeof t->ms[0], cmp_long);
    return t->n ? t->ms[t->n / 2] : 100000;
}

/* Dribbles into NSLOW connections on each of ports[] (at most 8) one byte
 * per 100 ms for DRIBBLE_S, probing every port with a fresh client each
 * tick (a failed probe counts as 100 s) into *t. The number of dribblers
 * the servers closed is returned (-1 if a connection could not be
 * opened). */
static int dribble(const int *ports, int nports, const char *payload, size_t plen, probe_times *t,
                   int (*probe)(int port, void *arg), void *arg) {
    int fds[8][NSLOW];
    for (int p = 0; p < nports; p++)
        for (int i = 0; i < NSLOW; i++)
            if ((fds[p][i] = h_raw_connect(ports[p], 0)) < 0) return -1;
    t->n = 0;
    t->worst = 0;
    for (unsigned tick = 0; tick < DRIBBLE_S * 10; tick++) {
        for (int p = 0; p < nports; p++)
            for (int i = 0; i < NSLOW; i++)
                if (fds[p][i] >= 0 && send(fds[p][i], payload + tick % plen, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
                    errno != EAGAIN) {
                    close(fds[p][i]);   /* the server let it go */
                    fds[p][i] = -2;
                }
        for (int p = 0; p < nports; p++) {
            uint64_t t0 = mono_ms();
            int ok = probe(ports[p], arg);
            long ms = ok ? (long)(mono_ms() - t0) : 100000;
            if (ms > t->worst) t->worst = ms;
            t->ms[t->n++] = ms;
        }
        usleep(100 * 1000);
    }
    int closed = 0;
    for (int p = 0; p < nports; p++)
        for (int i = 0; i < NSLOW; i++) {
            if (fds[p][i] == -2 || peer_closed(fds[p][i])) closed++;
            if (fds[p][i] >= 0) close(fds[p][i]);
        }
    return closed;
}

static int probe_ping(int port, void *arg) { return ping_ms(port) >= 0; }

/* 16 dribblers each on the standalone, master, node and gateway RESP
 * ports: a fresh client's PING stays fast on all of them. */
static void test_slowloris_resp_ports(void) {
    int ports[] = {PORT_STANDALONE, PORT_MASTER, PORT_NODE(0), PORT_GATEWAY};
    probe_times t;
    int closed = dribble(ports, 4, slow_cmd, sizeof slow_cmd - 1, &t, probe_ping, NULL);
    long median = median_ms(&t);
    printf("# RESP slowloris: PING median %ld ms, slowest %ld ms of %d while %d connections dribbled, "
           "%d closed by servers\n", median, t.worst, t.n, 4 * NSLOW, closed);
    ASSERT(closed >= 0);
    ASSERT_MSG(median < 250, "PINGs took %ld ms (median)", median);
    ASSERT_MSG(t.worst < 2000, "a PING took %ld ms", t.worst);
    for (int i = 0; i < 4; i++) ASSERT(ping_ms(ports[i]) >= 0);
}

/* A fresh libmoonkv client puts and gets 64 KiB: 1 if exact. */
static int probe_client(int port, void *arg) {
    static unsigned n;
    unsigned char *buf = arg;
    mkv_options opt;
    mkv_options_init(&opt);
    char m[32], key[32];
    snprintf(m, sizeof m, "127.0.0.1:%d", PORT_MASTER);
    snprintf(key, sizeof key, "probe:%u", n++);
    opt.master = m;
    opt.transport = "tcp";
    opt.timeout_ms = CLIENT_TIMEOUT;
    mkv_client *c = NULL;
    size_t got = 0;
    h_fill(buf, 65536, n);
    int ok = mkv_connect(&c, &opt) == MKV_OK && mkv_register_buffer(c, buf, 2 * 65536) == MKV_OK &&
             mkv_put(c, key, strlen(key), buf, 65536, 2) == MKV_OK &&
             mkv_get(c, key, strlen(key), buf + 65536, 65536, &got) == MKV_OK && got == 65536 &&
             memcmp(buf, buf + 65536, 65536) == 0;
    if (!ok) printf("# probe %s: %s\n", key, c ? mkv_last_error(c) : mkv_last_error(NULL));
    if (c) mkv_close(c);
    return ok;
}

/* Dribblers on both data planes (bytes of a plausible hello): new clients
 * still connect, put and get, and the nodes drop every dribbler at the
 * handshake deadline (2 s) instead of waiting for it. */
static void test_slowloris_data_plane(void) {
    int ports[] = {PORT_DATA(0), PORT_DATA(1)};
    long long fails0 = info_ll(PORT_NODE(0), "data_auth_failures");
    unsigned char *buf = xmalloc(2 * 65536);
    probe_times t;
    static const char junk[] = "MKV1\0\0\0\x01hello, is anybody in there?";
    int closed = dribble(ports, 2, junk, sizeof junk - 1, &t, probe_client, buf);
    free(buf);
    long long fails1 = info_ll(PORT_NODE(0), "data_auth_failures");
    long median = median_ms(&t);
    printf("# data-plane slowloris: connect+put+get median %ld ms, slowest %ld ms of %d, %d of %d dribblers "
           "dropped, node 1 auth failures +%lld\n", median, t.worst, t.n, closed, 2 * NSLOW, fails1 - fails0);
    ASSERT(closed >= 0);
    /* a client held by the dribblers would wait for their handshake deadline (2 s) */
    ASSERT_MSG(median < 500, "clients took %ld ms (median)", median);
    ASSERT_MSG(t.worst < 4000, "a client took %ld ms", t.worst);
    ASSERT_EQ(closed, 2 * NSLOW);
    ASSERT(fails1 - fails0 >= NSLOW);
}

/* ---- a client that never reads ---- */

/* port holds key "big" (1 MiB); a client pipelines 400 GETs of it and
 * never reads. The server stops reading a client whose queued output
 * passes 1 MiB (networking.c NET_OUTPUT_SOFT) and drops one whose queue
 * passes --client-output-limit: either way its RSS grows by far less
 * than the 400 MiB of replies, and a second client is served meanwhile. */
static void unread_replies_on(int port, pid_t pid) {
    redisContext *c = h_redis(port);
    ASSERT(c);
    unsigned char *v = xmalloc(MIB);
    h_fill(v, MIB, 77);
    char key[32];
    snprintf(key, sizeof key, "big:%d", port);
    redisReply *r = redisCommand(c, "SET %s %b", key, v, (size_t)MIB);
    int set_ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    free(v);
    ASSERT(set_ok);
    /* Private memory only: a gateway's clients map the nodes' segments
     * (shm map mode), and those shared pages count in VmRSS. */
    long rss0 = h_status_kb(pid, "RssAnon");
    int fd = h_raw_connect(port, 0);
    ASSERT(fd >= 0);
    int rcvbuf = 64 * 1024;   /* keep the kernel from soaking up replies for us */
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    char get[64];
    int glen = snprintf(get, sizeof get, "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", strlen(key), key);
    int sent = 0, dropped = 0;
    long rss_peak = rss0;
    uint64_t end = mono_ms() + 5000;
    while (mono_ms() < end && !dropped) {
        if (sent < 400) {
            if (send(fd, get, (size_t)glen, MSG_NOSIGNAL | MSG_DONTWAIT) == glen) sent++;
            else if (errno != EAGAIN) dropped = 1;
        } else {
            usleep(20 * 1000);
        }
        struct pollfd p = {.fd = fd, .events = POLLRDHUP};
        if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) dropped = 1;
        long kb = h_status_kb(pid, "RssAnon");
        if (kb > rss_peak) rss_peak = kb;
    }
    r = redisCommand(c, "PING");   /* the well-behaved client, served meanwhile */
    int ping_ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    redisFree(c);
    close(fd);
    printf("# port %d: %d GETs pipelined unread in 5 s, %s, RSS %ld -> peak %ld kB\n", port, sent,
           dropped ? "client dropped" : "client kept, reading paused", rss0, rss_peak);
    ASSERT(ping_ok);
    /* A batch of GETs (NET_PREFETCH_KEYS, 16) is answered before the
     * pause is checked: up to 16 replies of 1 MiB past the 1 MiB soft
     * bound by design (a loaded run grew by exactly 16 MiB), against
     * 400 MiB if the replies were followed. */
    ASSERT_MSG(rss_peak - rss0 < 32 * 1024, "RSS grew by %ld kB", rss_peak - rss0);
}

static void test_unread_replies_standalone(void) { unread_replies_on(PORT_STANDALONE, standalone); }
static void test_unread_replies_gateway(void) { unread_replies_on(PORT_GATEWAY, gateway); }

/* ---- a node that stalls mid-transfer ---- */

#define STALL_OBJ   (3u * MIB)   /* below the stripe threshold: one node per replica */
#define STALL_KEYS  8

typedef struct reader {
    mkv_client *c;
    unsigned char *src, *dst;
    atomic_int stop;
    unsigned reads, ok, failed, wrong;
    uint64_t worst_ms;
} reader;

static void *reader_run(void *arg) {
    reader *rd = arg;
    while (!atomic_load(&rd->stop)) {
        unsigned k = rd->reads % STALL_KEYS;
        char key[32];
        snprintf(key, sizeof key, "stall:%u", k);
        size_t got = 0;
        uint64_t t0 = mono_ms();
        int rc = mkv_get(rd->c, key, strlen(key), rd->dst, STALL_OBJ, &got);
        uint64_t ms = mono_ms() - t0;
        if (ms > rd->worst_ms) rd->worst_ms = ms;
        rd->reads++;
        if (rc != MKV_OK) {
            if (rd->failed++ < 3) printf("# read %s after %llu ms: %s\n", key, (unsigned long long)ms, mkv_last_error(rd->c));
        } else if (got != STALL_OBJ || memcmp(rd->dst, rd->src + (size_t)k * STALL_OBJ, STALL_OBJ) != 0) {
            rd->wrong++;
        } else {
            rd->ok++;
        }
    }
    return NULL;
}

static int reader_open(reader *rd, const char *master) {
    memset(rd, 0, sizeof *rd);
    mkv_options opt;
    mkv_options_init(&opt);
    opt.master = master;
    opt.transport = "tcp";
    opt.timeout_ms = CLIENT_TIMEOUT;
    opt.replicas = 2;
    size_t len = (size_t)(STALL_KEYS + 1) * STALL_OBJ;
    rd->src = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (rd->src == MAP_FAILED || mkv_connect(&rd->c, &opt) != MKV_OK ||
        mkv_register_buffer(rd->c, rd->src, len) != MKV_OK)
        return -1;
    rd->dst = rd->src + (size_t)STALL_KEYS * STALL_OBJ;
    h_fill(rd->src, (size_t)STALL_KEYS * STALL_OBJ, 99);
    for (unsigned k = 0; k < STALL_KEYS; k++) {
        char key[32];
        snprintf(key, sizeof key, "stall:%u", k);
        if (mkv_put(rd->c, key, strlen(key), rd->src + (size_t)k * STALL_OBJ, STALL_OBJ, 2) != MKV_OK) {
            printf("# put %s: %s\n", key, mkv_last_error(rd->c));
            return -1;
        }
    }
    return 0;
}

static void reader_close(reader *rd) {
    if (rd->c) mkv_close(rd->c);
    if (rd->src && rd->src != MAP_FAILED) munmap(rd->src, (size_t)(STALL_KEYS + 1) * STALL_OBJ);
}

/* The gateway's GET of stall:k while a node is stopped: 1 if the answer
 * was the value; the ms it took in *ms (no reply: 60 s). */
static int gateway_get(const reader *rd, unsigned k, long *out_ms) {
    redisContext *g = h_redis_ms("127.0.0.1", PORT_GATEWAY, 60000);
    uint64_t t0 = mono_ms();
    redisReply *r = g ? redisCommand(g, "GET stall:%u", k) : NULL;
    long ms = (long)(mono_ms() - t0);
    int exact = r && r->type == REDIS_REPLY_STRING && r->len == STALL_OBJ &&
                memcmp(r->str, rd->src + (size_t)k * STALL_OBJ, STALL_OBJ) == 0;
    if (!exact) printf("# gateway GET stall:%u after %ld ms: %s\n", k, ms,
                       r && r->type == REDIS_REPLY_ERROR ? r->str : r ? "not the value" : "no reply");
    if (r) freeReplyObject(r);
    if (g) redisFree(g);
    *out_ms = ms;
    return exact;
}

/* Reads loop over replicas-2 objects; node 1 is SIGSTOPped in the middle
 * for longer than the node timeout, then continued. No read returns
 * wrong bytes, and every read is answered within the client timeout
 * plus 2 s and succeeds: the first timeout on the stopped node marks it
 * stalled and the read fails over to the other replica (with fresh
 * leases if the first ones expired meanwhile). Two GETs through the
 * gateway during the stall return the value within the gateway's own
 * libmoonkv timeout (the default 5 s) plus 2 s. */
#define GATEWAY_STALL_BOUND_MS (5000 + 2000)

static void test_node_stalls_mid_transfer(void) {
    reader rd;
    char m[32];
    snprintf(m, sizeof m, "127.0.0.1:%d", PORT_MASTER);
    ASSERT(reader_open(&rd, m) == 0);
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, reader_run, &rd) == 0);
    usleep(300 * 1000);
    h_sigstop(nodes[0]);
    uint64_t stopped = mono_ms();
    long gw_ms[2];
    int gw_ok = gateway_get(&rd, 0, &gw_ms[0]);
    gw_ok += gateway_get(&rd, 1, &gw_ms[1]);
    while (mono_ms() - stopped < NODE_TIMEOUT_MS + 2500) usleep(50 * 1000);
    unsigned ok_during = rd.ok;
    kill(nodes[0], SIGCONT);
    usleep(1000 * 1000);
    atomic_store(&rd.stop, 1);
    pthread_join(th, NULL);
    printf("# stall: %u reads (%u ok, %u failed, %u wrong), slowest %llu ms; gateway GETs %ld, %ld ms "
           "(%d of 2 exact)\n", rd.reads, rd.ok, rd.failed, rd.wrong, (unsigned long long)rd.worst_ms,
           gw_ms[0], gw_ms[1], gw_ok);
    reader_close(&rd);
    uint64_t bound = CLIENT_TIMEOUT + 2000;
    ASSERT_EQ(rd.wrong, 0);
    ASSERT(ok_during > 0);
    ASSERT_EQ(rd.failed, 0);
    ASSERT_MSG(rd.worst_ms < bound, "a read took %llu ms", (unsigned long long)rd.worst_ms);
    ASSERT_EQ(gw_ok, 2);
    ASSERT_MSG(gw_ms[0] < GATEWAY_STALL_BOUND_MS && gw_ms[1] < GATEWAY_STALL_BOUND_MS,
               "gateway GETs took %ld, %ld ms", gw_ms[0], gw_ms[1]);
}

/* ---- half-open TCP: a netns link cut ---- */

static int ns_node_dead(int master_port) {
    redisContext *m = h_redis_host("10.201.1.1", master_port);
    int dead = m ? h_count_nodes(m, "dead") : -1;
    if (m) redisFree(m);
    return dead;
}

/* Master here (10.201.1.1), node k in namespace k (10.201.k.2), replicas
 * 2. The link of namespace 1 goes down while reads loop: TCP connections
 * to that node neither close nor reset. Reads carry on from node 2,
 * each bounded by the client timeout, and the master declares node 1
 * dead. */
static void test_half_open_link_cut(void) {
    char master[32];
    snprintf(master, sizeof master, "10.201.1.1:%d", NS_PORT_MASTER);
    const char *mflags[] = {"--node-timeout-ms", "1500", "--heartbeat-ms", "200", NULL};
    ASSERT(h_start_master_on("10.201.1.1", NS_PORT_MASTER, mflags) > 0);
    for (int k = 1; k <= 2; k++) {
        char bind[32];
        snprintf(bind, sizeof bind, "10.201.%d.2", k);
        const char *prefix[] = {"ip", "netns", "exec", netns.name[k - 1], NULL};
        ASSERT(h_start_node_ex(prefix, master, bind, NS_PORT_NODE, NS_PORT_DATA, "64MB") > 0);
    }
    ASSERT(h_wait_nodes_on("10.201.1.1", NS_PORT_MASTER, "alive", 2, 20000) == 0);
    reader rd;
    ASSERT(reader_open(&rd, master) == 0);
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, reader_run, &rd) == 0);
    usleep(300 * 1000);
    ASSERT(netns_sh("ip link set %s down", netns.veth_host[0]) == 0);
    uint64_t cut = mono_ms(), dead_after = 0;
    while (mono_ms() - cut < NODE_TIMEOUT_MS + 4000) {
        if (!dead_after && ns_node_dead(NS_PORT_MASTER) >= 1) dead_after = mono_ms() - cut;
        usleep(100 * 1000);
    }
    unsigned ok_after = rd.ok;
    usleep(1000 * 1000);
    ok_after = rd.ok - ok_after;
    atomic_store(&rd.stop, 1);
    pthread_join(th, NULL);
    netns_sh("ip link set %s up", netns.veth_host[0]);
    printf("# link cut: %u reads (%u ok, %u failed, %u wrong), slowest %llu ms, node dead after %llu ms\n",
           rd.reads, rd.ok, rd.failed, rd.wrong, (unsigned long long)rd.worst_ms,
           (unsigned long long)dead_after);
    reader_close(&rd);
    ASSERT_EQ(rd.wrong, 0);
    ASSERT(ok_after > 0);
    /* one timeout on the cut node, then the other replica */
    ASSERT_MSG(rd.worst_ms < CLIENT_TIMEOUT + 1000, "a read took %llu ms", (unsigned long long)rd.worst_ms);
    ASSERT(dead_after > 0 && dead_after < NODE_TIMEOUT_MS + 3000);
}

/* ---- setup ---- */

static pid_t start_standalone(void) {
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_arg(&a, "--bind");
    h_arg(&a, "127.0.0.1");
    h_argf(&a, "--port=%d", PORT_STANDALONE);
    h_arg(&a, "--segment-size");
    h_arg(&a, "64MB");
    h_argf(&a, "--client-output-limit=%dMB", OUTPUT_LIMIT_MB);
    h_arg(&a, "--log-level");
    h_arg(&a, "warning");
    return h_ready(h_spawn(a.v), "127.0.0.1", PORT_STANDALONE, NULL, 20000);
}

static int start_all(void) {
    const char *mflags[] = {"--node-timeout-ms", "1500", "--heartbeat-ms", "200", NULL};
    if ((standalone = start_standalone()) < 0 || (master = h_start_master(PORT_MASTER, mflags)) < 0)
        return -1;
    for (int i = 0; i < 2; i++)
        if ((nodes[i] = h_start_node(PORT_MASTER, PORT_NODE(i), PORT_DATA(i), "128MB")) < 0) return -1;
    if (h_wait_nodes(PORT_MASTER, "alive", 2, 20000) != 0) return -1;
    char limit[32];
    snprintf(limit, sizeof limit, "--client-output-limit=%dMB", OUTPUT_LIMIT_MB);
    const char *extra[] = {limit, NULL};
    return (gateway = h_start_gateway(PORT_MASTER, PORT_GATEWAY, extra, NULL)) < 0 ? -1 : 0;
}

/* MKV_SLOW_ONLY=name runs that case alone (debugging). */
static int wanted(const char *name) {
    const char *only = getenv("MKV_SLOW_ONLY");
    return !only || strcmp(only, name) == 0;
}
#define RUN_IF(fn) do { if (wanted(#fn)) RUN_TEST(fn); } while (0)

int main(void) {
    h_init(170);
    h_cleanup_hook = netns_teardown;
    h_setup_or_exit(port0 = h_free_ports(24), "free ports");
    if (start_all() != 0) {
        printf("not ok - servers did not start\n");
        return 1;
    }
    RUN_IF(test_slowloris_resp_ports);
    RUN_IF(test_slowloris_data_plane);
    RUN_IF(test_unread_replies_standalone);
    RUN_IF(test_unread_replies_gateway);
    RUN_IF(test_node_stalls_mid_transfer);
    h_kill_all();
    if (!wanted("test_half_open_link_cut")) {}
    else if (netns_setup(2) != 0) printf("# half-open case skipped: %s\n", netns.why);
    else RUN_TEST(test_half_open_link_cut);
    h_kill_all();
    netns_teardown();
    TEST_EXIT();
}
