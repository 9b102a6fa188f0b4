/* Slice CRCs kept across a master rebuild (docs/PROTOCOL.md: MOON.HOLDINGS
 * ... PACKED SLICES, MOON.REPORT flags 1): a value of three 4 MiB slices
 * put through libmoonkv with replicas 2 (each replica striped over two
 * nodes), the master killed (-9) and started again; once it rebuilt its
 * table from the nodes' reports, MOON.GET returns the same slice size
 * and CRCs as before, and the gateway streams a GET of the value slice
 * by slice (INFO gateway cluster_streamed_gets), byte-exact. Ports: one
 * block of h_free_ports, taken first in main(). */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

static int port0;
static char master_addr[32];   /* 127.0.0.1:PORT_MASTER */
#define PORT_MASTER  (port0 + 0)
#define PORT_NODE    (port0 + 1)   /* + i; data plane on PORT_NODE + 10 + i */
#define PORT_GATEWAY (port0 + 19)
#define NODES 4
#define MiB (1024ull * 1024)
#define LEN (10 * MiB + 5)   /* three 4 MiB slices, the last short */
#define KEY "rs:big"

static pid_t master_pid;
static const char *mflags[] = {"--replicas", "2", NULL};
static char *val;

/* MOON.GET KEY's slice size and packed CRCs (*crcs fresh); 0 if it has them. */
static int slices_of(long long *size, char **crcs, size_t *len) {
    redisContext *m = h_proven(h_redis(PORT_MASTER), "");
    redisReply *r = m ? redisCommand(m, "MOON.GET %s", KEY) : NULL;
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 5 && r->element[3]->type == REDIS_REPLY_INTEGER &&
             r->element[4]->type == REDIS_REPLY_STRING;
    if (ok) {
        *size = r->element[3]->integer;
        *len = r->element[4]->len;
        *crcs = malloc(*len);
        memcpy(*crcs, r->element[4]->str, *len);
    }
    if (r) freeReplyObject(r);
    if (m) redisFree(m);
    return ok ? 0 : -1;
}

static int rebuilt(void) {
    redisContext *m = h_proven(h_redis(PORT_MASTER), "");
    redisReply *r = m ? redisCommand(m, "INFO cluster") : NULL;
    int done = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "rebuild_state:done") != NULL;
    if (r) freeReplyObject(r);
    if (m) redisFree(m);
    return done;
}

/* A GET of KEY through the gateway: 1 if it returned the value byte-exact. */
static int gateway_get_exact(void) {
    redisContext *g = h_redis(PORT_GATEWAY);
    redisReply *r = g ? redisCommand(g, "GET %s", KEY) : NULL;
    int ok = r && r->type == REDIS_REPLY_STRING && r->len == LEN && memcmp(r->str, val, LEN) == 0;
    if (r) freeReplyObject(r);
    if (g) redisFree(g);
    return ok;
}

static void test_slices_survive_master_restart(void) {
    mkv_client *mc;
    ASSERT_EQ(h_mkv_connect(&mc, master_addr, "tcp", 2), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(mc, val, LEN), MKV_OK);
    ASSERT_EQ(mkv_put(mc, KEY, strlen(KEY), val, LEN, 2), MKV_OK);
    mkv_close(mc);
    long long size0 = 0, size1 = 0;
    char *crcs0 = NULL, *crcs1 = NULL;
    size_t len0 = 0, len1 = 0;
    ASSERT_EQ(slices_of(&size0, &crcs0, &len0), 0);
    ASSERT_EQ(size0, (long long)(4 * MiB));
    ASSERT_EQ(len0, 12);
    /* every node took its holdings (the slice CRCs with them) */
    uint64_t end = mono_ms() + 10000;
    while (h_port_info(PORT_MASTER, "cluster", "holdings_pending") != 0 && mono_ms() < end) usleep(50 * 1000);
    ASSERT_EQ(h_port_info(PORT_MASTER, "cluster", "holdings_pending"), 0);
    ASSERT(gateway_get_exact());
    long long streamed = h_port_info(PORT_GATEWAY, "gateway", "cluster_streamed_gets");

    h_kill(master_pid);
    master_pid = h_start_master(PORT_MASTER, mflags);
    ASSERT(master_pid > 0);
    end = mono_ms() + 30000;
    while (!rebuilt() && mono_ms() < end) usleep(50 * 1000);
    ASSERT(rebuilt());
    ASSERT_EQ(h_port_info(PORT_MASTER, "cluster", "rebuild_recovered"), 1);
    ASSERT_MSG(slices_of(&size1, &crcs1, &len1) == 0, "the rebuilt object has no slice CRCs");
    ASSERT_EQ(size1, size0);
    ASSERT_EQ(len1, len0);
    ASSERT_MEMEQ(crcs1, crcs0, len0);
    ASSERT(h_port_info(PORT_MASTER, "cluster", "slice_crc_bytes") >= 12);

    /* the gateway finds the new master and streams the value again */
    int ok = 0;
    end = mono_ms() + 15000;
    while (!(ok = gateway_get_exact()) && mono_ms() < end) usleep(100 * 1000);
    ASSERT(ok);
    ASSERT(h_port_info(PORT_GATEWAY, "gateway", "cluster_streamed_gets") > streamed);
    free(crcs0);
    free(crcs1);
}

int main(void) {
    h_init(120);
    h_setup_or_exit(port0 = h_free_ports(20), "free ports");
    snprintf(master_addr, sizeof master_addr, "127.0.0.1:%d", PORT_MASTER);
    val = malloc(LEN);
    if (!val) return 1;
    h_fill(val, LEN, 0x5eb1d);
    master_pid = h_start_master(PORT_MASTER, mflags);
    h_setup_or_exit(master_pid, "master did not start");
    for (int i = 0; i < NODES; i++) h_start_node(PORT_MASTER, PORT_NODE + i, PORT_NODE + 10 + i, "64MB");
    const char *gw_extra[] = {"--segment-size", "16MB", "--transport", "tcp", NULL};
    h_setup_or_exit(h_wait_nodes(PORT_MASTER, "alive", NODES, 20000) != 0 ? -1
                    : h_start_gateway(PORT_MASTER, PORT_GATEWAY, gw_extra, NULL),
                    "cluster did not start");
    RUN_TEST(test_slices_survive_master_restart);
    h_kill_all();
    free(val);
    TEST_EXIT();
}
