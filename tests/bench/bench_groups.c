/* bench_groups.c - metadata pairs per second over 1..MAXGROUPS master
 * groups (docs/SCALE.md "Master groups").
 *
 *   bench_groups PORTS MAXGROUPS COUNT NODE_SIM
 *
 * PORTS: 2 + MAXGROUPS free ports, comma-separated (etcd client and
 * peer, one master per group). For G = 1..MAXGROUPS: a cluster of its
 * own in one etcd, G masters (--group gI, the 16,384 slots cut in G even
 * ranges), one simulated node each (NODE_SIM: tests/sim/node_sim, no
 * segment is touched), then COUNT put-start/put-end pairs of 64-byte
 * objects (replicas 1), every key sent to its slot's group: one thread
 * and connection per group, MOON.MPUTSTART/MPUTEND batches of 1000, 4 in
 * flight. Results: groups.wall.G (pairs per second of wall time, all
 * groups together) and groups.cpu.G (pairs per second of the masters'
 * summed CPU time). The server is $MOONKV_SERVER, etcd is etcd from
 * PATH. Output: bench.h. */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "integration/cluster_harness.h"
#include "integration/etcd_harness.h"
#include "link/master_link.h"
#include "proto/slots.h"

#define MAX_GROUPS 8
#define BATCH      1000
#define WINDOW     4
#define KEYLEN     15
#define LEASE_S    2

typedef struct group_run {
    int port;
    pid_t master, sim;
    char name[16];   /* "g" and an int: room for any i the compiler can see */
    char (*keys)[KEYLEN + 1];   /* this group's keys, in batches of BATCH */
    size_t nkeys;
    double cpu0;
    const char *err;            /* set if the load failed */
    pthread_t th;
} group_run;

static void die(const char *what) {
    fprintf(stderr, "bench_groups: %s\n", what);
    h_kill_all();
    bench_skip("groups.wall", "%s", what);
    exit(0);
}

/* Each key's group: the G even ranges of the slots. */
static int group_of(const char *key, int g) {
    int slot = proto_key_slot(key, strlen(key)), i = 0;
    while ((i + 1) * PROTO_SLOTS / g <= slot) i++;   /* slots_of's ranges */
    return i;
}

static void slots_of(int i, int g, char *out, size_t len) {
    snprintf(out, len, "%d-%d", i * PROTO_SLOTS / g, (i + 1) * PROTO_SLOTS / g - 1);
}

/* COUNT keys dealt to their groups (each gets a whole number of batches). */
static void deal_keys(group_run *gr, int g, size_t count, int round) {
    for (int i = 0; i < g; i++) {
        gr[i].keys = xcalloc(count, sizeof *gr[i].keys);
        gr[i].nkeys = 0;
    }
    char key[KEYLEN + 1];
    for (size_t k = 0, dealt = 0; dealt < count; k++) {
        snprintf(key, sizeof key, "r%d:%011zu", round, k);
        group_run *to = &gr[group_of(key, g)];
        if (to->nkeys >= count / (size_t)g) continue;   /* that group is full */
        memcpy(to->keys[to->nkeys++], key, sizeof key);
        dealt++;
    }
}

/* MPUTSTART then MPUTEND of keys[0..BATCH), appended. */
static void append_pair(redisContext *rc, char (*keys)[KEYLEN + 1], const char **argv, size_t *lens) {
    int n = 3;
    argv[0] = "MOON.MPUTSTART", argv[1] = "REPLICAS", argv[2] = "1";
    for (int i = 0; i < BATCH; i++) argv[n] = keys[i], argv[n + 1] = "64", n += 2;
    for (int i = 0; i < n; i++) lens[i] = strlen(argv[i]);
    redisAppendCommandArgv(rc, n, argv, lens);
    argv[2] = "MOON.MPUTEND", lens[2] = strlen(argv[2]);
    for (int i = 4; i < n; i += 2) argv[i] = "0", lens[i] = 1;
    redisAppendCommandArgv(rc, n - 2, argv + 2, lens + 2);
}

static int reply_ok(redisContext *rc) {
    void *v = NULL;
    if (redisGetReply(rc, &v) != REDIS_OK || !v) return 0;
    redisReply *r = v;
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements == BATCH;
    for (size_t i = 0; ok && i < r->elements; i++) ok = r->element[i]->type != REDIS_REPLY_ERROR;
    if (!ok) fprintf(stderr, "bench_groups: %s\n", r->type == REDIS_REPLY_ERROR ? r->str : "a batch failed");
    freeReplyObject(r);
    return ok;
}

static void *load(void *arg) {
    group_run *g = arg;
    char err[256] = "";
    struct timeval tv = {60, 0};
    redisContext *rc = redisConnectWithTimeout("127.0.0.1", g->port, tv);
    if (!rc || rc->err || proto_master_prove(rc, bench_secret(), err, sizeof err) != PROTO_LINK_OK) {
        g->err = "cannot prove to a master";
        if (rc) redisFree(rc);
        return NULL;
    }
    redisSetTimeout(rc, tv);
    const char **argv = xcalloc(3 + 2 * BATCH, sizeof *argv);
    size_t *lens = xcalloc(3 + 2 * BATCH, sizeof *lens), batches = g->nkeys / BATCH, sent = 0, got = 0;
    while (got < batches && !g->err) {
        for (; sent < batches && sent - got < WINDOW; sent++) append_pair(rc, g->keys + sent * BATCH, argv, lens);
        if (!reply_ok(rc) || !reply_ok(rc)) g->err = "a batch failed";
        got++;
    }
    free(argv);
    free(lens);
    redisFree(rc);
    return NULL;
}

/* G masters and their simulated nodes, each owning its slots: 0 or -1. */
static int start_groups(group_run *gr, int g, const h_etcd *etcd, const char *cluster, const char *sim) {
    for (int i = 0; i < g; i++) {
        char grp[32], slots[48], master[32];
        snprintf(gr[i].name, sizeof gr[i].name, "g%d", i);
        snprintf(grp, sizeof grp, "--group=%s", gr[i].name);
        slots_of(i, g, slots + 8, sizeof slots - 8);
        memcpy(slots, "--slots=", 8);
        const char *extra[] = {grp, slots, "--rejoin-grace-ms", "0", NULL};
        gr[i].master = h_start_etcd_role("master", gr[i].port, etcd->url, cluster, LEASE_S, extra);
        if (gr[i].master < 0 || h_wait_role(gr[i].port, "leader", 30000) != 0) return -1;
        snprintf(master, sizeof master, "127.0.0.1:%d", gr[i].port);
        const char *sargv[] = {sim, "--master", master, "--nodes", "1", "--holdings-ms", "20", NULL};
        if ((gr[i].sim = h_spawn(sargv)) < 0) return -1;
        if (h_wait_nodes(gr[i].port, "alive", 1, 30000) != 0) return -1;
    }
    for (int i = 0; i < g; i++) {
        uint64_t end = mono_ms() + 30000;
        int want = (i + 1) * PROTO_SLOTS / g - i * PROTO_SLOTS / g;
        while (h_port_info(gr[i].port, "cluster", "slots_owned") != want)
            if (mono_ms() >= end) return -1;
            else usleep(50000);
    }
    return 0;
}

static void measure(group_run *gr, int g, size_t count, int round) {
    deal_keys(gr, g, count, round);
    for (int i = 0; i < g; i++) gr[i].cpu0 = h_cpu_s(gr[i].master), gr[i].err = NULL;
    uint64_t t0 = mono_us();
    for (int i = 0; i < g; i++) pthread_create(&gr[i].th, NULL, load, &gr[i]);
    size_t pairs = 0;
    double cpu = 0;
    for (int i = 0; i < g; i++) {
        pthread_join(gr[i].th, NULL);
        if (gr[i].err) die(gr[i].err);
        pairs += gr[i].nkeys / BATCH * BATCH;
        cpu += h_cpu_s(gr[i].master) - gr[i].cpu0;
    }
    double wall = (double)(mono_us() - t0) / 1e6;
    char name[32];
    snprintf(name, sizeof name, "groups.wall.%d", g);
    bench_result(name, (double)pairs / wall, "pairs/s");
    snprintf(name, sizeof name, "groups.cpu.%d", g);
    if (cpu > 0) bench_result(name, (double)pairs / cpu, "pairs/cpu-s");
    fprintf(stderr, "bench_groups: %d groups: %zu pairs in %.2f s wall, %.2f s of master CPU\n", g, pairs, wall, cpu);
    for (int i = 0; i < g; i++) free(gr[i].keys);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: bench_groups PORTS MAXGROUPS COUNT NODE_SIM\n");
        return 2;
    }
    int maxg = atoi(argv[2]), ports[2 + MAX_GROUPS], n = 0;
    size_t count = strtoull(argv[3], NULL, 10);
    for (char *p = argv[1]; *p && n < 2 + MAX_GROUPS; p += strcspn(p, ","), p += *p == ',') ports[n++] = atoi(p);
    if (maxg < 1 || maxg > MAX_GROUPS || n != 2 + maxg || count < BATCH * (size_t)maxg || count > 100000000) {
        fprintf(stderr, "bad arguments (MAXGROUPS 1..%d, 2 + MAXGROUPS ports, COUNT >= 1000 per group)\n", MAX_GROUPS);
        return 2;
    }
    h_etcd etcd;
    if (h_etcd_start(&etcd, ports[0], ports[1]) != 0) die("etcd did not start (package etcd-server)");
    group_run gr[MAX_GROUPS];
    for (int g = 1; g <= maxg; g++) {
        char cluster[32];
        snprintf(cluster, sizeof cluster, "bench-groups-%d", g);
        memset(gr, 0, sizeof gr);
        for (int i = 0; i < g; i++) gr[i].port = ports[2 + i];
        if (start_groups(gr, g, &etcd, cluster, argv[4]) != 0) die("a group's master or node did not come up");
        measure(gr, g, count, g);
        for (int i = 0; i < g; i++) {
            h_kill(gr[i].sim);
            h_kill(gr[i].master);
        }
    }
    h_kill(etcd.pid);
    h_etcd_remove(&etcd);
    return 0;
}
