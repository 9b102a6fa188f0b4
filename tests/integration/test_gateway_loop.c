/* tests/integration/test_gateway_loop.c - the gateway's loop never waits
 * for the master: SCAN, KEYS, INFO, DBSIZE, TYPE, TTL, EXISTS, STRLEN,
 * DEL, FLUSHALL, MOON.PREFIX, MOON.PREFIXPIN and MOON.UNPIN ask it over
 * the asynchronous connection, so
 *  - while the master is stopped (SIGSTOP) with such a command pending,
 *    another client's PING is answered and the pending command is not
 *    (it answers, correctly, once the master runs again);
 *  - INFO's loop_blocking_calls (store calls that waited for the master
 *    on the loop) stays 0 through all of them, in and out of MULTI, and
 *    through /metrics scrapes (whose INFO asks the master too).
 * A master, one node and a gateway (--replicas 1). Ports: one block of
 * h_free_ports, taken first in main(). */
#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "cluster_harness.h"

static int port0;
#define MASTER_PORT  (port0 + 0)
#define GATEWAY_PORT (port0 + 1)
#define METRICS_PORT (port0 + 2)
#define NODE_PORT    (port0 + 10)   /* data plane on NODE_PORT + 10 */
#define TIME_LIMIT_S 120
#define NKEYS        20

static redisContext *gw;
static pid_t master_pid;

static int start_cluster(void) {
    master_pid = h_start_master(MASTER_PORT, NULL);
    if (master_pid < 0) return -1;
    if (h_start_node(MASTER_PORT, NODE_PORT, NODE_PORT + 10, "128MB") < 0) return -1;
    if (h_wait_nodes(MASTER_PORT, "alive", 1, 20000) != 0) return -1;
    char metrics[16];
    snprintf(metrics, sizeof metrics, "%d", METRICS_PORT);
    const char *const flags[] = {"--replicas", "1", "--metrics-port", metrics, NULL};
    if (h_start_gateway_staged(MASTER_PORT, GATEWAY_PORT, flags) < 0) return -1;
    gw = h_redis(GATEWAY_PORT);
    return gw ? 0 : -1;
}

static int set_keys(void) {
    for (int i = 0; i < NKEYS; i++) {
        redisReply *r = redisCommand(gw, "SET loop:%d value-%d", i, i);
        int ok = r && r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (!ok) return -1;
    }
    return 0;
}

static int is_int(const redisReply *r, long long n) { return r && r->type == REDIS_REPLY_INTEGER && r->integer == n; }

static int is_status(const redisReply *r, const char *s) {
    return r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, s) == 0;
}

/* SCAN 0 COUNT 1000 or KEYS loop:*: every key, once. */
static int is_all_keys(const redisReply *r) {
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_ARRAY)
        r = r->element[1];
    return r && r->type == REDIS_REPLY_ARRAY && r->elements == NKEYS;
}

static int is_info(const redisReply *r) {
    return r && r->type == REDIS_REPLY_STRING &&
           strstr(r->str, "db0:keys=20,") != NULL;
}

typedef struct stalled {
    const char *cmd;          /* the command line */
    const char *row;          /* its name in CLIENT LIST (cmd=) */
    int (*ok)(const redisReply *r);
} stalled;

static int ok_scan(const redisReply *r) { return is_all_keys(r) && strcmp(r->element[0]->str, "0") == 0; }
static int ok_keys(const redisReply *r) { return is_all_keys(r); }
static int ok_dbsize(const redisReply *r) { return is_int(r, NKEYS); }
static int ok_type(const redisReply *r) { return is_status(r, "string"); }
static int ok_ttl(const redisReply *r) { return is_int(r, -1); }
static int ok_one(const redisReply *r) { return is_int(r, 1); }
static int ok_strlen(const redisReply *r) { return is_int(r, 7); }
static int ok_two(const redisReply *r) { return is_int(r, 2); }

/* Whether CLIENT LIST shows the client named "stalled" with row as its
 * command: the gateway has read it and started it. */
static int started(redisContext *c, const char *row) {
    redisReply *r = redisCommand(c, "CLIENT LIST");
    int found = 0;
    if (r && r->type == REDIS_REPLY_STRING) {
        char want[64];
        snprintf(want, sizeof want, " cmd=%s ", row);
        for (char *line = strtok(r->str, "\n"); line && !found; line = strtok(NULL, "\n"))
            found = strstr(line, " name=stalled ") && strstr(line, want);
    }
    freeReplyObject(r);
    return found;
}

static int readable(redisContext *c) {
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* With the master stopped, one client's cmd is pending while another's
 * PING is answered; the pending one answers right once it runs again. */
static void stall_one(const stalled *s) {
    redisContext *a = h_redis(GATEWAY_PORT), *b = h_redis(GATEWAY_PORT);
    ASSERT(a && b);
    redisReply *r = redisCommand(a, "CLIENT SETNAME stalled");
    ASSERT(is_status(r, "OK"));
    freeReplyObject(r);
    ASSERT_EQ(h_sigstop(master_pid), 0);
    redisAppendCommand(a, s->cmd);
    int done = 0;
    while (!done && redisBufferWrite(a, &done) == REDIS_OK) {}
    int seen = 0;
    for (int i = 0; i < 10000 && !(seen = started(b, s->row)); i++) usleep(1000);
    r = redisCommand(b, "PING");
    int pong = is_status(r, "PONG"), early = readable(a);
    freeReplyObject(r);
    kill(master_pid, SIGCONT);
    ASSERT_MSG(seen, "%s never showed in CLIENT LIST", s->cmd);
    ASSERT_MSG(pong, "PING unanswered while %s waited for the master", s->cmd);
    ASSERT_MSG(!early, "%s answered while the master was stopped: the loop waited for it", s->cmd);
    r = NULL;
    ASSERT(redisGetReply(a, (void **)&r) == REDIS_OK);
    int right = s->ok(r);
    if (!right) printf("# %s answered type %d %s\n", s->cmd, r ? r->type : -1, r && r->str ? r->str : "");
    freeReplyObject(r);
    ASSERT_MSG(right, "%s: wrong reply after the master came back", s->cmd);
    redisFree(a);
    redisFree(b);
}

static const stalled stalls[] = {
    {"SCAN 0 COUNT 1000", "scan", ok_scan},
    {"KEYS loop:*", "keys", ok_keys},
    {"INFO", "info", is_info},
    {"INFO keyspace", "info", is_info},
    {"DBSIZE", "dbsize", ok_dbsize},
    {"TYPE loop:3", "type", ok_type},
    {"TTL loop:3", "ttl", ok_ttl},
    {"EXISTS loop:3", "exists", ok_one},
    {"STRLEN loop:3", "strlen", ok_strlen},
    {"MOON.PREFIX loop:3 loop:4 loop:none loop:5", "moon.prefix", ok_two},
    {"MOON.PREFIXPIN 77 60000 loop:3 loop:none", "moon.prefixpin", ok_one},
    {"MOON.UNPIN 77", "moon.unpin", ok_one},   /* the key it held: FLUSHALL below removes it */
};

static void test_stopped_master_stalls_no_one(void) {
    ASSERT_EQ(set_keys(), 0);
    for (size_t i = 0; i < sizeof stalls / sizeof stalls[0]; i++) ASSERT_STEP(stall_one(&stalls[i]));
}

static long long blocking_calls(void) { return h_info_field(gw, "gateway", "loop_blocking_calls"); }

/* Every command that reads the master's answers, in and out of MULTI:
 * right replies and not one call that waited on the loop. */
static void test_no_blocking_call_on_the_loop(void) {
    ASSERT_EQ(blocking_calls(), 0);
    static const stalled plain[] = {
        {"SCAN 0 COUNT 1000 MATCH loop:*", NULL, ok_scan}, {"KEYS *", NULL, ok_keys},
        {"INFO everything", NULL, is_info},             {"DBSIZE", NULL, ok_dbsize},
        {"TYPE loop:1", NULL, ok_type},                 {"PTTL loop:1", NULL, ok_ttl},
        {"SET loop:1 value-1", NULL, NULL},             {"DEL loop:1", NULL, ok_one},
        {"MOON.PREFIX loop:2 loop:3", NULL, ok_two},    {"MOON.PREFIXPIN 78 60000 loop:2", NULL, ok_one},
        {"MOON.UNPIN 78", NULL, ok_one},
    };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        redisReply *r = redisCommand(gw, plain[i].cmd);
        int right = plain[i].ok ? plain[i].ok(r) : r && r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        ASSERT_MSG(right, "%s: wrong reply", plain[i].cmd);
    }
    redisReply *r = redisCommand(gw, "SET loop:1 value-1");
    freeReplyObject(r);
    /* the same inside a transaction: each runs as its turn comes */
    redisAppendCommand(gw, "MULTI");
    for (size_t i = 0; i < 6; i++) redisAppendCommand(gw, plain[i].cmd);
    redisAppendCommand(gw, "EXEC");
    for (size_t i = 0; i < 7; i++) {
        ASSERT(redisGetReply(gw, (void **)&r) == REDIS_OK);
        freeReplyObject(r);
    }
    ASSERT(redisGetReply(gw, (void **)&r) == REDIS_OK);
    int all = r && r->type == REDIS_REPLY_ARRAY && r->elements == 6;
    for (size_t i = 0; all && i < 6; i++) all = plain[i].ok(r->element[i]);
    freeReplyObject(r);
    ASSERT_MSG(all, "EXEC's replies differ from the commands' own");
    r = redisCommand(gw, "FLUSHALL");
    ASSERT(is_status(r, "OK"));
    freeReplyObject(r);
    r = redisCommand(gw, "DBSIZE");
    ASSERT(is_int(r, 0));
    freeReplyObject(r);
    ASSERT_EQ(blocking_calls(), 0);
}

static void test_metrics_scrape_does_not_block(void) {
    for (int i = 0; i < 3; i++) {
        char *body = h_metrics(METRICS_PORT);
        int ok = body && strncmp(body, "HTTP/1.1 200", 12) == 0 && strstr(body, "moonkv_gateway_jobs_inflight") &&
                 strstr(body, "\nmoonkv_gateway_loop_blocking_calls_total 0\n");
        free(body);
        ASSERT_MSG(ok, "scrape %d failed", i);
    }
    ASSERT_EQ(blocking_calls(), 0);
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_setup_or_exit(port0 = h_free_ports(21), "free ports");
    h_setup_or_exit(start_cluster(), "start_cluster: master, node and gateway");
    RUN_TEST(test_stopped_master_stalls_no_one);
    RUN_TEST(test_no_blocking_call_on_the_loop);
    RUN_TEST(test_metrics_scrape_does_not_block);
    redisFree(gw);
    TEST_EXIT();
}
