/* tests/integration/test_gateway_io_threads.c - a gateway with
 * --io-threads 2: connections are spread over both event loops (INFO
 * says which loop a connection is on), and every loop serves one store:
 * what is SET through a connection on one loop reads back byte-exact
 * through connections on the other; the whole process opens one master
 * connection (one shared client, whose async face is every loop's
 * asynchronous connection too), and SET, GET, MGET, EXISTS and DEL go
 * over it with no thread waiting for the master. A master, one node and
 * the gateway (--master, no etcd);
 * ports: one block of h_free_ports (below the ephemeral range, where a
 * client's TIME-WAIT socket would make a listener's bind fail). */
#include <dirent.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util.h"
#include "test.h"
#include "cluster_harness.h"

static int port0;
#define MASTER_PORT  (port0 + 0)
#define GATEWAY_PORT (port0 + 1)
#define NODE_PORT    (port0 + 2)   /* data plane on NODE_PORT + 10 */
#define SA_PORT      (port0 + 3)   /* a standalone that must refuse --io-threads */
#define MASTER_METRICS (port0 + 4) /* the master's /metrics: its commands, counted by name */
#define TIME_LIMIT_S 120
#define NCONN        8
#define BIG          (1024 * 1024 + 17)

static pid_t gw_pid;
static redisContext *conns[NCONN];
static redisContext *master;          /* the test's own, opened after the gateway started */
static long long master_clients_before;   /* connected_clients before the gateway came (the test's own one of them) */

static int start_cluster(void) {
    char metrics[16];
    snprintf(metrics, sizeof metrics, "%d", MASTER_METRICS);
    const char *const mflags[] = {"--metrics-port", metrics, NULL};
    if (h_start_master(MASTER_PORT, mflags) < 0) return -1;
    if (h_start_node(MASTER_PORT, NODE_PORT, NODE_PORT + 10, "256MB") < 0) return -1;
    if (h_wait_nodes(MASTER_PORT, "alive", 1, 20000) != 0) return -1;
    redisContext *m = h_redis(MASTER_PORT);   /* closed before the gateway forks: it would inherit it */
    if (!m) return -1;
    master_clients_before = h_info_field(m, "clients", "connected_clients");
    redisFree(m);
    static const char *const flags[] = {"--replicas", "1", "--io-threads", "2", NULL};
    gw_pid = h_start_gateway_staged(MASTER_PORT, GATEWAY_PORT, flags);
    if (gw_pid < 0) return -1;
    for (int i = 0; i < NCONN; i++)
        if (!(conns[i] = h_redis(GATEWAY_PORT))) return -1;
    return (master = h_redis(MASTER_PORT)) ? 0 : -1;
}

/* Consecutive connections alternate between the loops. */
static void test_connections_spread_over_loops(void) {
    int seen[2] = {0, 0};
    for (int i = 0; i < NCONN; i++) {
        ASSERT_EQ(h_info_field(conns[i], "server", "io_threads"), 2);
        long long loop = h_info_field(conns[i], "server", "io_thread");
        ASSERT(loop == 0 || loop == 1);
        seen[loop]++;
    }
    printf("# connections per loop: %d, %d\n", seen[0], seen[1]);
    ASSERT_EQ(seen[0], NCONN / 2);
    ASSERT_EQ(seen[1], NCONN / 2);
}

static int get_is(redisContext *c, const char *key, const void *want, size_t n) {
    redisReply *r = redisCommand(c, "GET %s", key);
    int ok = r && r->type == REDIS_REPLY_STRING && (size_t)r->len == n && memcmp(r->str, want, n) == 0;
    if (!ok) printf("# GET %s: %s\n", key, r && r->type == REDIS_REPLY_ERROR ? r->str : "other bytes or nil");
    freeReplyObject(r);
    return ok;
}

/* Each connection SETs its own small key and one of them a 1 MiB value;
 * every connection then reads every key, whichever loop stored it. */
static void test_one_store_for_every_loop(void) {
    char key[32], val[64];
    unsigned char *big = malloc(BIG);
    ASSERT(big != NULL);
    for (size_t i = 0; i < BIG; i++) big[i] = (unsigned char)(i * 131 + 7);
    for (int i = 0; i < NCONN; i++) {
        snprintf(key, sizeof key, "iot:%d", i);
        snprintf(val, sizeof val, "value of connection %d", i);
        redisReply *r = redisCommand(conns[i], "SET %s %s", key, val);
        if (!r || r->type != REDIS_REPLY_STATUS) printf("# SET %s: %s\n", key, r ? r->str : conns[i]->errstr);
        ASSERT(r && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    redisReply *r = redisCommand(conns[1], "SET iot:big %b", big, (size_t)BIG);
    ASSERT(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    int good = 0;
    for (int c = 0; c < NCONN; c++) {
        for (int i = 0; i < NCONN; i++) {
            snprintf(key, sizeof key, "iot:%d", i);
            snprintf(val, sizeof val, "value of connection %d", i);
            good += get_is(conns[c], key, val, strlen(val));
        }
        good += get_is(conns[c], "iot:big", big, BIG);
    }
    free(big);
    ASSERT_EQ(good, NCONN * (NCONN + 1));
    /* A key stored through loop 1 exists for loop 0 too. */
    r = redisCommand(conns[0], "EXISTS iot:big iot:1 iot:none");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER);
    ASSERT_EQ(r->integer, 2);
    freeReplyObject(r);
}

/* The loops share the master connection, each watching its fd while it
 * owes replies; a loop that owes none is not woken by the other's (INFO
 * gateway master_wakeups, per loop). Before, every reply woke both: 100
 * GETs on one loop woke the idle one ~100 times for nothing. It may wake
 * once to stop watching, and for its own heartbeat (MOON.GATEWAY, once a
 * second) and whatever wakes it once after that. */
static void test_idle_loop_not_woken(void) {
    enum { N = 100 };
    redisContext *busy = NULL, *idle = NULL;
    for (int i = 0; i < NCONN; i++) {
        long long loop = h_info_field(conns[i], "server", "io_thread");
        if (loop == 0 && !busy) busy = conns[i];
        if (loop == 1 && !idle) idle = conns[i];
    }
    ASSERT(busy && idle);
    ASSERT(get_is(idle, "iot:1", "value of connection 1", strlen("value of connection 1")));   /* it watches */
    usleep(50 * 1000);   /* its lease went back by itself: nothing owed */
    long long w0 = h_info_field(idle, "gateway", "master_wakeups");
    long long b0 = h_info_field(busy, "gateway", "master_wakeups");
    uint64_t t0 = mono_ms();
    for (int i = 0; i < N; i++) ASSERT(get_is(busy, "iot:0", "value of connection 0", strlen("value of connection 0")));
    long long w1 = h_info_field(idle, "gateway", "master_wakeups");
    long long b1 = h_info_field(busy, "gateway", "master_wakeups");
    long long beats = (long long)((mono_ms() - t0) / 1000) + 1;
    printf("# %d GETs on loop 0: loop 0 woken %lld times, loop 1 (idle) %lld\n", N, b1 - b0, w1 - w0);
    ASSERT(b1 - b0 >= N / 2);   /* the busy loop's own replies woke it */
    ASSERT(w1 - w0 <= 1 + 3 * beats);
}

#define MAX_SOCKETS 1024

/* The socket inodes among pid's open files into ino; how many. */
static int socket_inodes(pid_t pid, unsigned long *ino, int max) {
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && n < max && (e = readdir(d));) {
        char link[320], target[64];
        snprintf(link, sizeof link, "%s/%s", dir, e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len <= 0) continue;
        target[len] = '\0';
        if (sscanf(target, "socket:[%lu]", &ino[n]) == 1) n++;
    }
    if (d) closedir(d);
    return n;
}

/* Established TCP connections process pid holds to port: its sockets
 * that /proc/net/tcp lists with that remote port. -1 if unreadable. */
static int conns_to(pid_t pid, int port) {
    unsigned long ino[MAX_SOCKETS];
    int n = socket_inodes(pid, ino, MAX_SOCKETS), count = 0;
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f) return -1;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        unsigned rport, st;
        unsigned long inode;
        if (sscanf(line, " %*d: %*x:%*x %*x:%x %x %*s %*s %*s %*d %*d %lu", &rport, &st, &inode) != 3) continue;
        if ((int)rport != port || st != 1) continue;   /* 01: ESTABLISHED */
        for (int i = 0; i < n; i++) count += ino[i] == inode;
    }
    fclose(f);
    return count;
}

/* The gateway's connections to the master, once both loops have served:
 * the process's one client's (its one pipelined master connection, whose
 * async face each loop sends its commands by), 1 whatever the loops.
 * Before the loops and workers shared a client it was 2 x (4 clients + 1)
 * = 10; before the loops used the client's face with --master, 1 + 2 (a
 * hiredis connection per loop). Counted in the gateway process (its
 * sockets to the master's port); the master's connected_clients beside
 * the node's and the test's own is printed. */
static void test_one_master_connection_per_process(void) {
    int now = -1, want = 1;
    uint64_t until = mono_ms() + 20000;
    do {
        if (now >= 0) usleep(100 * 1000);
        now = conns_to(gw_pid, MASTER_PORT);
    } while (now != want && mono_ms() < until);
    printf("# master connections of the gateway (2 loops): %d; master connected_clients %lld before the "
           "gateway, %lld now\n", now, master_clients_before, h_info_field(master, "clients", "connected_clients"));
    ASSERT_EQ(now, want);
}

static long long reply_int(redisContext *c, const char *fmt, const char *a, const char *b, const char *d) {
    redisReply *r = redisCommand(c, fmt, a, b, d);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

/* Through each loop, over the client's face: SET, GET, MGET, EXISTS and
 * DEL of three keys answer byte-exact, every master question asked over
 * the face (the DEL as one MOON.MREMOVE: the master's remove_requests
 * grows by 1; no worker's blocking call: worker_master_waits unchanged, no
 * call on a loop: loop_blocking_calls 0), and the gateway still holds one
 * master connection afterwards. */
static void test_commands_over_the_face(void) {
    long long waits0 = h_info_field(conns[0], "gateway", "worker_master_waits");
    ASSERT(waits0 >= 0);
    for (int l = 0; l < 2; l++) {
        redisContext *c = conns[l];   /* consecutive connections: one on each loop */
        char k[3][32], v[3][48];
        for (int i = 0; i < 3; i++) {
            snprintf(k[i], sizeof k[i], "face:%d:%d", l, i);
            snprintf(v[i], sizeof v[i], "value %d of loop %d \x01\x02", i, l);
            redisReply *r = redisCommand(c, "SET %s %s", k[i], v[i]);
            ASSERT(r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0);
            freeReplyObject(r);
            ASSERT(get_is(conns[1 - l], k[i], v[i], strlen(v[i])));   /* the other loop reads it */
        }
        redisReply *r = redisCommand(c, "MGET %s face:none %s %s", k[0], k[1], k[2]);
        ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 4);
        if (r && r->elements == 4) {
            ASSERT(r->element[1]->type == REDIS_REPLY_NIL);
            for (int i = 0; i < 3; i++) {
                redisReply *e = r->element[i ? i + 1 : 0];
                ASSERT(e->type == REDIS_REPLY_STRING && (size_t)e->len == strlen(v[i]) && memcmp(e->str, v[i], e->len) == 0);
            }
        }
        freeReplyObject(r);
        ASSERT_EQ(reply_int(c, "EXISTS %s %s %s", k[0], k[1], k[2]), 3);
        long long asked = h_info_field(master, "cluster", "remove_requests");
        ASSERT_EQ(reply_int(c, "DEL %s %s %s", k[0], k[2], "face:none"), 2);
        ASSERT_EQ(h_info_field(master, "cluster", "remove_requests") - asked, 1);   /* one MOON.MREMOVE */
        ASSERT_EQ(reply_int(conns[1 - l], "EXISTS %s %s %s", k[0], k[1], k[2]), 1);
        ASSERT_EQ(h_info_field(c, "gateway", "loop_blocking_calls"), 0);
    }
    long long waits1 = h_info_field(conns[1], "gateway", "worker_master_waits");
    printf("# worker_master_waits %lld before, %lld after\n", waits0, waits1);
    ASSERT_EQ(waits1, waits0);
    ASSERT_EQ(conns_to(gw_pid, MASTER_PORT), 1);
}

/* The master's count of the commands named (their sum), -1 if unknown. */
static long long master_calls(const char *const *names) {
    long long sum = 0;
    for (; *names; names++) {
        long long n = h_command_calls(MASTER_METRICS, *names);
        if (n < 0) return -1;
        sum += n;
    }
    return sum;
}

/* DEL and EXISTS of many keys each send one command to the master (one
 * MOON.MREMOVE, one MOON.MEXISTS: the face's batches), not one per key;
 * EXISTS counts a key named twice twice, DEL removes it once, as
 * redis-server does; TYPE, TTL and STRLEN are one command each (STRLEN
 * the face's stat, one MOON.OBJECT). */
static void test_keys_one_master_command(void) {
    static const char *const exists[] = {"moon.exists", "moon.mexists", NULL};
    static const char *const removes[] = {"moon.remove", "moon.mremove", NULL};
    enum { N = 40 };
    redisContext *c = conns[2];
    char keys[N][24];
    const char *argv[2 * N + 4];
    size_t lens[2 * N + 4];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "many:%d", i);
        if (i % 2) continue;   /* half of them stored */
        redisReply *r = redisCommand(c, "SET %s v%d", keys[i], i);
        ASSERT(r && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    /* EXISTS many:0 .. many:39 many:0 many:1: 20 stored, many:0 twice */
    int argc = 0;
    argv[argc++] = "EXISTS";
    for (int i = 0; i < N + 2; i++) argv[argc++] = keys[i % N];
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    long long e0 = master_calls(exists), r0 = master_calls(removes);
    ASSERT(e0 >= 0 && r0 >= 0);
    redisReply *r = redisCommandArgv(c, argc, argv, lens);
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == N / 2 + 1);
    freeReplyObject(r);
    long long e1 = master_calls(exists);
    printf("# EXISTS of %d keys: %lld master commands\n", N + 2, e1 - e0);
    ASSERT_EQ(e1 - e0, 1);
    argv[0] = "DEL";   /* the same keys: many:0 is removed once */
    lens[0] = 3;
    r = redisCommandArgv(c, argc, argv, lens);
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == N / 2);
    freeReplyObject(r);
    long long r1 = master_calls(removes);
    printf("# DEL of %d keys: %lld master commands\n", N + 2, r1 - r0);
    ASSERT_EQ(r1 - r0, 1);
    ASSERT_EQ(reply_int(c, "EXISTS %s %s", keys[0], keys[2], NULL), 0);
    ASSERT_EQ(reply_int(c, "DEL %s", keys[0], NULL, NULL), 0);
    r = redisCommand(c, "TYPE %s", keys[4]);
    ASSERT(r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "none") == 0);
    freeReplyObject(r);
    ASSERT_EQ(reply_int(c, "TTL %s", keys[4], NULL, NULL), -2);
    ASSERT_EQ(master_calls(exists) - e1, 3);   /* EXISTS, TYPE, TTL */
    static const char *const stats[] = {"moon.object", NULL};
    long long o0 = master_calls(stats);
    r = redisCommand(c, "SET %s hello", keys[1]);
    ASSERT(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    ASSERT_EQ(reply_int(c, "STRLEN %s", keys[1], NULL, NULL), 5);
    ASSERT_EQ(reply_int(c, "STRLEN %s", keys[4], NULL, NULL), 0);
    ASSERT_EQ(master_calls(stats) - o0, 2);   /* one MOON.OBJECT each */
    ASSERT_EQ(master_calls(removes) - r1, 1);
    ASSERT_EQ(h_info_field(c, "gateway", "loop_blocking_calls"), 0);
}

/* SIGTERM stops every loop and the process exits cleanly (under ASan:
 * without leaks) while clients are still connected to both. */
static void test_clean_stop(void) {
    ASSERT_EQ(h_stop_status(gw_pid, 20000), 0);
    gw_pid = -1;
}

/* The standalone store belongs to one loop: the flag is refused. */
static void test_standalone_refuses(void) {
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_arg(&a, "--role");
    h_arg(&a, "standalone");
    h_argf(&a, "--port=%d", SA_PORT);
    h_arg(&a, "--io-threads");
    h_arg(&a, "2");
    pid_t pid = h_spawn(a.v);
    ASSERT(pid > 0);
    int status = 0;
    ASSERT_EQ(h_wait_exit(pid, 10000, &status), 0);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 1);
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_setup_or_exit(port0 = h_free_ports(13), "free ports");
    if (start_cluster() != 0) {
        printf("not ok - start_cluster: master, node and gateway did not come up\n");
        return 1;
    }
    RUN_TEST(test_connections_spread_over_loops);
    RUN_TEST(test_one_store_for_every_loop);
    RUN_TEST(test_one_master_connection_per_process);
    RUN_TEST(test_idle_loop_not_woken);
    RUN_TEST(test_commands_over_the_face);
    RUN_TEST(test_keys_one_master_command);
    RUN_TEST(test_clean_stop);
    RUN_TEST(test_standalone_refuses);
    for (int i = 0; i < NCONN; i++) redisFree(conns[i]);
    if (master) redisFree(master);
    TEST_EXIT();
}
