/* test_term_fencing - with --etcd a node serves no master of a term older
 * than one it served (issue 13's fencing): a node registered with the
 * leader of term T loses it (kill -9), and etcd's leader key then names a
 * stand-in master (this test, answering MOON.CHALLENGE and MOON.REGISTER)
 * that claims term T-1, as a deposed leader that woke up would. The node
 * must refuse it however often it retries: no new registration, still
 * term T. Once the stand-in claims a newer term the same node registers
 * with it at once, so the refusal was the term's doing. Ports (etcd's
 * too): one block of h_free_ports (below the kernel's ephemeral range: a
 * client's TIME-WAIT on a port there blocks a listener). */
#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster_harness.h"
#include "core/util.h"
#include "etcd/etcd.h"
#include "etcd_harness.h"
#include "proto/limits.h"
#include "test.h"

static int port0;
#define ETCD_PORT    (port0 + 10)
#define ETCD_PEER    (port0 + 11)
#define MASTER_PORT  (port0 + 0)
#define NODE_PORT    (port0 + 2)   /* data plane on NODE_PORT + 1 */
#define FAKE_PORT    (port0 + 5)
#define CLUSTER      "term-test"
#define LEASE_S      2
#define TIME_LIMIT_S 90

static h_etcd etcd;
static pid_t master, node;

/* The stand-in master: the term it claims, the REGISTERs it answered. */
static struct {
    int fd, stop;
    long long term, registers;
    pthread_t th;
} fake;

static void remove_datadir(void) { h_etcd_remove(&etcd); }

static long long node_field(const char *field) { return h_port_info(NODE_PORT, "node", field); }

static void fake_answer(int fd, const redisReply *cmd) {
    char out[256];
    int n;
    const char *name = cmd->type == REDIS_REPLY_ARRAY && cmd->elements > 0 ? cmd->element[0]->str : "";
    if (strcasecmp(name, "MOON.CHALLENGE") == 0) {
        n = snprintf(out, sizeof out, "$%d\r\n%0*d\r\n", PROTO_NONCE_LEN, PROTO_NONCE_LEN, 7);
    } else if (strcasecmp(name, "MOON.PROVE") == 0) {   /* every connection proves first */
        n = snprintf(out, sizeof out, "+OK\r\n");
    } else if (strcasecmp(name, "MOON.REGISTER") == 0) {
        __atomic_add_fetch(&fake.registers, 1, __ATOMIC_SEQ_CST);
        n = snprintf(out, sizeof out, "*5\r\n:7\r\n$32\r\n%032d\r\n:200\r\n:%lld\r\n:0\r\n", 5,
                     __atomic_load_n(&fake.term, __ATOMIC_SEQ_CST));
    } else {
        n = snprintf(out, sizeof out, "-ERR not a real master\r\n");
    }
    if (write(fd, out, (size_t)n) != n) return;
}

/* One connection at a time, until stop. */
static void *fake_main(void *arg) {
    while (!__atomic_load_n(&fake.stop, __ATOMIC_SEQ_CST)) {
        struct pollfd p = {fake.fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        int fd = accept(fake.fd, NULL, NULL);
        if (fd < 0) continue;
        redisReader *rd = redisReaderCreate();
        char buf[4096];
        for (;;) {
            struct pollfd q = {fd, POLLIN, 0};
            if (__atomic_load_n(&fake.stop, __ATOMIC_SEQ_CST) || poll(&q, 1, 100) < 0) break;
            if (!(q.revents & (POLLIN | POLLHUP))) continue;
            ssize_t got = read(fd, buf, sizeof buf);
            if (got <= 0) break;
            redisReaderFeed(rd, buf, (size_t)got);
            void *r = NULL;
            while (redisReaderGetReply(rd, &r) == REDIS_OK && r) {
                fake_answer(fd, r);
                freeReplyObject(r);
                r = NULL;
            }
        }
        redisReaderFree(rd);
        close(fd);
    }
    return arg;
}

static int fake_start(long long term) {
    fake.term = term;
    fake.fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fake.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(FAKE_PORT)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fake.fd < 0 || bind(fake.fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fake.fd, 8) != 0) return -1;
    return pthread_create(&fake.th, NULL, fake_main, NULL) == 0 ? 0 : -1;
}

static void fake_stop(void) {
    __atomic_store_n(&fake.stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(fake.th, NULL);
    close(fake.fd);
}

/* etcd's leader key names the stand-in (no lease: it stays). */
static int point_leader_at_fake(void) {
    char err[ETCD_ERR_LEN], key[128], val[32];
    etcd_client *ec = etcd_create(etcd.url, 2000, err, sizeof err);
    if (!ec || etcd_leader_key(CLUSTER, key, sizeof key) != 0) {
        etcd_free(ec);
        return -1;
    }
    snprintf(val, sizeof val, "127.0.0.1:%d", FAKE_PORT);
    int rc = etcd_put(ec, key, val, 0, err, sizeof err);
    etcd_free(ec);
    return rc;
}

static void test_node_refuses_an_older_term(void) {
    ASSERT(h_wait_node_registered(NODE_PORT, 15000) == 0);
    long long term = node_field("master_term"), regs = node_field("registrations");
    ASSERT(term > 1 && regs >= 1);
    ASSERT(fake_start(term - 1) == 0);
    h_kill(master);
    ASSERT(point_leader_at_fake() == 0);
    /* the node keeps finding the stand-in and keeps refusing it */
    uint64_t end = mono_ms() + 20000;
    while (__atomic_load_n(&fake.registers, __ATOMIC_SEQ_CST) < 3 && mono_ms() < end) usleep(50 * 1000);
    ASSERT(__atomic_load_n(&fake.registers, __ATOMIC_SEQ_CST) >= 3);
    ASSERT_EQ(node_field("registrations"), regs);
    ASSERT_EQ(node_field("master_term"), term);
    /* a newer term is served at once */
    __atomic_store_n(&fake.term, term + 10, __ATOMIC_SEQ_CST);
    end = mono_ms() + 10000;
    while (node_field("registrations") == regs && mono_ms() < end) usleep(50 * 1000);
    ASSERT(node_field("registrations") > regs);
    ASSERT_EQ(node_field("master_term"), term + 10);
    printf("# term %lld refused %lld times, term %lld served\n", term - 1,
           __atomic_load_n(&fake.registers, __ATOMIC_SEQ_CST) - 1, term + 10);
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_cleanup_hook = remove_datadir;
    h_setup_or_exit(port0 = h_free_ports(12), "free ports");
    if (h_etcd_up(&etcd, ETCD_PORT, ETCD_PEER) != 0) return 1;
    master = h_start_etcd_role("master", MASTER_PORT, etcd.url, CLUSTER, LEASE_S, NULL);
    char data[48];
    snprintf(data, sizeof data, "--data-addrs=127.0.0.1:%d", NODE_PORT + 1);
    const char *extra[] = {"--segment-size", "16MB", data, "--prefault", "no", NULL};
    if (master > 0 && h_wait_role(MASTER_PORT, "leader", 10000) == 0)
        node = h_start_etcd_role("node", NODE_PORT, etcd.url, CLUSTER, LEASE_S, extra);
    h_setup_or_exit(master > 0 && node > 0 ? 0 : -1, "term-fencing/setup");
    RUN_TEST(test_node_refuses_an_older_term);
    fake_stop();
    h_stop_all();
    TEST_EXIT();
}
