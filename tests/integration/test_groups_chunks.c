/* tests/integration/test_groups_chunks.c - how a node shared by master
 * groups hands out its segment (docs/SCALE.md "Nodes shared by groups"):
 * an etcd (SKIP without it), group a (--slots 0-8191) and group b
 * (8192-12287), each one master with a slow heartbeat (3 s), and one
 * node --shared-groups map of 16 MB (16 chunks of 1 MiB). A libmoonkv
 * client over the groups.
 *
 * - A put that finds its group's chunks full makes the node ask for
 *   chunks at once (the master tells it on its holdings pull) and waits
 *   for them: group a puts 10 MiB one object after another, from one
 *   chunk, and no put is answered NOSPACE, although a heartbeat (after
 *   which chunks used to grow) comes only every 3 s.
 * - A group added to the slot map while the node runs (group c, master
 *   started with --slots 12288-16383) is joined by the node (it started
 *   with --shared-groups map when the map named a and b): c's master
 *   lists it alive, gives it chunks, and c's puts land on it and read
 *   back byte-exact.
 * Ports from h_free_ports. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "core/util.h"
#include "etcd_harness.h"
#include "groups_harness.h"
#include "proto/slots.h"
#include "test.h"

static int port0;
/* etcd on port0 + 0 and + 1 (h_groups_begin) */
#define NODE_PORT    (port0 + 2)    /* its data plane on + 1 */
#define MASTER(g)    (port0 + 4 + (g))   /* a, b, c */
#define CLUSTER      "shared-chunks"
#define SECRET       "shared-chunks-secret"
#define LEASE_S      2
#define OBJ          (256 << 10)
#define A_KEYS       40             /* 10 MiB of 16 */
#define C_KEYS       8
#define HEARTBEAT_MS 3000
#define WAIT_MS      30000
#define TIME_LIMIT_S 240

static h_etcd etcd;
static mkv_client *mc;
static char *src, *dst;

static void cleanup(void) {
    h_kill_all();
    h_etcd_remove(&etcd);
}

static const char *const slots_of[] = {"--slots=0-8191", "--slots=8192-12287", "--slots=12288-16383"};
static const char *const group_of[] = {"--group=a", "--group=b", "--group=c"};

static pid_t start_master(int g) {
    char hb[32];
    snprintf(hb, sizeof hb, "%d", HEARTBEAT_MS);
    const char *extra[] = {group_of[g], slots_of[g], "--cluster-secret", SECRET, "--heartbeat-ms", hb,
                           "--node-timeout-ms", "15000", "--put-wait-ms", "20000", NULL};
    return h_start_etcd_role("master", MASTER(g), etcd.url, CLUSTER, LEASE_S, extra);
}

static pid_t start_node(void) {
    char data[48];
    snprintf(data, sizeof data, "--data-addrs=127.0.0.1:%d", NODE_PORT + 1);
    const char *extra[] = {"--shared-groups=map", "--segment-size", "16MB", "--prefault", "no", data,
                           "--cluster-secret", SECRET, NULL};
    return h_start_etcd_role("node", NODE_PORT, etcd.url, CLUSTER, LEASE_S, extra);
}

/* The node's INFO line of group g ("id=..,state=..,...,chunks=N,..."), "" if none. */
static void group_line(char g, char *out, size_t len) {
    out[0] = 0;
    redisContext *c = h_redis(NODE_PORT);
    redisReply *r = c ? redisCommand(c, "INFO node") : NULL;
    char field[16];
    snprintf(field, sizeof field, "group_%c:", g);
    const char *f = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, field) : NULL;
    if (f) snprintf(out, len, "%.*s", (int)strcspn(f + strlen(field), "\r\n"), f + strlen(field));
    freeReplyObject(r);
    if (c) redisFree(c);
}

static long long chunks_of(char g) {
    char line[2048];
    group_line(g, line, sizeof line);
    const char *p = strstr(line, "chunks=");
    return p ? strtoll(p + 7, NULL, 10) : -1;
}

/* Key i of group g (a slot of its range), object i's bytes in src. */
static void key_of(int g, int i, char *out, size_t len) {
    static const int lo[] = {0, 8192, 12288}, hi[] = {8191, 12287, 16383};
    for (int next = i * 1000;; next++) {
        snprintf(out, len, "%c-%d", "abc"[g], next);
        int s = proto_key_slot(out, strlen(out));
        if (s >= lo[g] && s <= hi[g]) return;
    }
}

static void fill_obj(int g, int i) { h_fill(src, OBJ, (uint64_t)(g * 1000 + i + 1)); }

static int get_exact(int g, int i) {
    char key[32];
    key_of(g, i, key, sizeof key);
    fill_obj(g, i);
    size_t got = 0;
    int rc = mkv_get(mc, key, strlen(key), dst, OBJ, &got);
    return rc == MKV_OK && got == OBJ && memcmp(src, dst, OBJ) == 0 ? 0 : rc ? rc : -100;
}

static void test_put_asks_for_chunks(void) {
    long long c0 = chunks_of('a'), waited0 = h_port_info(MASTER(0), "cluster", "puts_waited");
    ASSERT(c0 >= 1 && c0 <= 2);   /* one at registration (a heartbeat's exchange may have asked one more) */
    uint64_t t0 = mono_ms();
    for (int i = 0; i < A_KEYS; i++) {
        char key[32];
        key_of(0, i, key, sizeof key);
        fill_obj(0, i);
        int rc = mkv_put(mc, key, strlen(key), src, OBJ, 1);   /* once: no retry */
        ASSERT_MSG(rc == MKV_OK, "put %d (%s) of group a: %d %.200s (chunks of a %lld)", i, key, rc, mkv_last_error(mc),
                   chunks_of('a'));
    }
    uint64_t ms = mono_ms() - t0;
    long long c1 = chunks_of('a'), waited = h_port_info(MASTER(0), "cluster", "puts_waited") - waited0;
    printf("# group a: %d MiB put in %llu ms (heartbeat %d ms), chunks %lld -> %lld, %lld puts waited for room\n",
           A_KEYS * OBJ >> 20, (unsigned long long)ms, HEARTBEAT_MS, c0, c1, waited);
    ASSERT(c1 >= (long long)A_KEYS * OBJ / (1 << 20));
    ASSERT(waited > 0);   /* the puts found the chunks full and waited for more */
    for (int i = 0; i < A_KEYS; i++) ASSERT_MSG(get_exact(0, i) == 0, "get %d of group a", i);
}

static void test_group_added_to_map(void) {
    char line[2048];
    ASSERT_EQ(h_port_info(NODE_PORT, "node", "groups"), 2);
    group_line('c', line, sizeof line);
    ASSERT_MSG(line[0] == 0, "the node serves c before it exists: %.300s", line);
    uint64_t t0 = mono_ms();
    ASSERT(start_master(2) > 0);
    ASSERT_EQ(h_wait_role(MASTER(2), "leader", WAIT_MS), 0);
    ASSERT_EQ(h_wait_nodes(MASTER(2), "alive", 1, WAIT_MS), 0);
    uint64_t t_alive = mono_ms() - t0;
    /* the master lists it as it answers the registration: the node takes the answer a moment later */
    uint64_t end = mono_ms() + WAIT_MS;
    do group_line('c', line, sizeof line);
    while (!strstr(line, "state=member") && mono_ms() < end && usleep(20000) == 0);
    ASSERT_MSG(strstr(line, "state=member") != NULL, "group c on the node: %.300s", line);
    ASSERT_EQ(h_port_info(NODE_PORT, "node", "groups"), 3);
    for (int i = 0; i < C_KEYS; i++) {
        char key[32];
        key_of(2, i, key, sizeof key);
        fill_obj(2, i);
        int rc;
        uint64_t end = mono_ms() + WAIT_MS;   /* the router learns c's slots (TRYAGAIN, MOVED meanwhile) */
        while ((rc = mkv_put(mc, key, strlen(key), src, OBJ, 1)) != MKV_OK && mono_ms() < end) usleep(50000);
        ASSERT_MSG(rc == MKV_OK, "put %s of group c: %d %.200s", key, rc, mkv_last_error(mc));
    }
    for (int i = 0; i < C_KEYS; i++) ASSERT_MSG(get_exact(2, i) == 0, "get %d of group c", i);
    ASSERT_EQ(h_port_info(MASTER(2), "cluster", "objects_complete"), C_KEYS);
    ASSERT(chunks_of('c') >= 1);
    printf("# group c: the node alive in it %llu ms after its master started; %lld chunks for its %d objects\n",
           (unsigned long long)t_alive, chunks_of('c'), C_KEYS);
    for (int i = 0; i < A_KEYS; i++) ASSERT_MSG(get_exact(0, i) == 0, "get %d of group a", i);
}

static int setup(void) {
    char step[160] = "";
    for (int g = 0; g < 2 && !step[0]; g++)
        if (start_master(g) < 0 || h_wait_role(MASTER(g), "leader", WAIT_MS) != 0)
            snprintf(step, sizeof step, "master of group %c on %d", "ab"[g], MASTER(g));
    uint64_t end = mono_ms() + WAIT_MS;   /* the map names a and b before the node reads it */
    while (!step[0] && (h_port_info(MASTER(0), "cluster", "slots_owned") != 8192 ||
                        h_port_info(MASTER(1), "cluster", "slots_owned") != 4096))
        if (mono_ms() >= end) snprintf(step, sizeof step, "each master owns its slots");
        else usleep(50000);
    if (!step[0] && start_node() < 0) snprintf(step, sizeof step, "node on %d", NODE_PORT);
    for (int g = 0; g < 2 && !step[0]; g++)
        if (h_wait_nodes(MASTER(g), "alive", 1, WAIT_MS) != 0) snprintf(step, sizeof step, "the node alive in %c", "ab"[g]);
    if (!step[0] && h_groups_client_ms(&mc, &etcd, CLUSTER, SECRET, NULL, 30000) != MKV_OK)
        snprintf(step, sizeof step, "client over groups: %.100s", mkv_last_error(NULL));
    if (!step[0] && (mkv_register_buffer(mc, src, OBJ) != MKV_OK || mkv_register_buffer(mc, dst, OBJ) != MKV_OK))
        snprintf(step, sizeof step, "register buffers: %.100s", mkv_last_error(mc));
    if (!step[0]) return 0;
    printf("not ok - groups_chunks/setup: %s\n", step);
    return -1;
}

int main(void) {
    int rc = h_groups_begin("test_groups_chunks", TIME_LIMIT_S, cleanup, 7, &port0, &etcd, 0);
    if (rc) return rc > 0 ? 0 : 1;
    src = aligned_alloc(4096, OBJ);
    dst = aligned_alloc(4096, OBJ);
    if (setup() != 0) {
        cleanup();
        return 1;
    }
    RUN_TEST(test_put_asks_for_chunks);
    RUN_TEST(test_group_added_to_map);
    mkv_close(mc);
    cleanup();
    free(src);
    free(dst);
    TEST_EXIT();
}
