/* bench_failover.c - master failover time: etcd, a leader and a standby
 * master, three nodes, a gateway and a libmoonkv client, all finding the
 * leader through etcd. Each round kills the leader (-9) and times, from
 * the kill, the standby's election and the first successful put and get
 * through libmoonkv and through the gateway (each probe retried every
 * 20 ms with a fresh key; libmoonkv first, so the gateway's times include
 * the wait for libmoonkv's). The killed master then comes back as the
 * new standby. Medians of ROUNDS rounds.
 *
 *   bench_failover PORTS LEASE_S ROUNDS
 *
 * PORTS: 12 free ports, comma-separated (etcd client and peer, two
 * masters, three nodes and their data planes, the gateway). The server is
 * $MOONKV_SERVER, etcd is etcd from PATH. Output: bench.h, names
 * failover.{elect,lib_put,lib_get,gw_put,gw_get} in seconds. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "integration/cluster_harness.h"
#include "integration/etcd_harness.h"
#include "integration/probe_harness.h"

#define NPORTS  12
#define NODES   3
#define MAX_ROUNDS 20
#define PROBE_LIMIT_MS 20000
#define CLUSTER "bench-failover"

enum { P_ETCD, P_PEER, P_MASTER0, P_MASTER1, P_NODE0, P_DATA0 = P_NODE0 + NODES, P_GATEWAY = P_DATA0 + NODES };

typedef struct fo_bench {
    int port[NPORTS];
    int lease_s;
    h_etcd etcd;
    pid_t master[2];
    h_probe probe;
} fo_bench;

enum { M_ELECT, M_LIB_PUT, M_LIB_GET, M_GW_PUT, M_GW_GET, M_COUNT };
static const char *const NAMES[M_COUNT] = {"failover.elect", "failover.lib_put", "failover.lib_get",
                                           "failover.gw_put", "failover.gw_get"};

static void skip_all(const char *why) {
    for (int i = 0; i < M_COUNT; i++) bench_skip(NAMES[i], "%s", why);
}

static pid_t start_master(fo_bench *b, int i) {
    return h_start_etcd_role("master", b->port[P_MASTER0 + i], b->etcd.url, CLUSTER, b->lease_s, NULL);
}

static int start_cluster(fo_bench *b) {
    if (h_etcd_start(&b->etcd, b->port[P_ETCD], b->port[P_PEER]) != 0) return -1;
    b->master[0] = start_master(b, 0);
    if (b->master[0] < 0 || h_wait_role(b->port[P_MASTER0], "leader", 10000) != 0) return -1;
    if ((b->master[1] = start_master(b, 1)) < 0) return -1;
    for (int i = 0; i < NODES; i++) {
        char data[48];
        snprintf(data, sizeof data, "--data-addrs=127.0.0.1:%d", b->port[P_DATA0 + i]);
        const char *extra[] = {"--segment-size", "32MB", data, "--prefault", "no", NULL};
        if (h_start_etcd_role("node", b->port[P_NODE0 + i], b->etcd.url, CLUSTER, b->lease_s, extra) < 0)
            return -1;
    }
    const char *gw_extra[] = {"--segment-size", "16MB", NULL};
    if (h_start_etcd_role("gateway", b->port[P_GATEWAY], b->etcd.url, CLUSTER, b->lease_s, gw_extra) < 0)
        return -1;
    if (h_wait_nodes(b->port[P_MASTER0], "alive", NODES, 20000) != 0) return -1;
    mkv_options opt;
    mkv_options_init(&opt);
    opt.etcd = b->etcd.url;
    opt.cluster_name = CLUSTER;
    opt.timeout_ms = 3000;
    return h_probe_open(&b->probe, b->port[P_GATEWAY], &opt);
}

/* One kill of the leader (master[lead]); ms per measurement, -1 if it
 * never happened within the limit. */
static int one_round(fo_bench *b, int round, int lead, long long ms[M_COUNT]) {
    int standby = b->port[P_MASTER0 + !lead];
    char key[M_COUNT][48];
    for (int i = 0; i < M_COUNT; i++) snprintf(key[i], sizeof key[i], "fo-%d-%d-%d", (int)getpid(), round, i);
    h_kill(b->master[lead]);
    uint64_t t0 = mono_ms();
    ms[M_ELECT] = h_wait_role(standby, "leader", PROBE_LIMIT_MS) == 0 ? (long long)(mono_ms() - t0) : -1;
    ms[M_LIB_PUT] = h_until(h_lib_put, &b->probe, key[M_LIB_PUT], "v", t0, PROBE_LIMIT_MS);
    ms[M_LIB_GET] = h_until(h_lib_get_is, &b->probe, key[M_LIB_PUT], "v", t0, PROBE_LIMIT_MS);
    ms[M_GW_PUT] = h_until(h_gw_set, &b->probe, key[M_GW_PUT], "v", t0, PROBE_LIMIT_MS);
    ms[M_GW_GET] = h_until(h_gw_get_is, &b->probe, key[M_GW_PUT], "v", t0, PROBE_LIMIT_MS);
    fprintf(stderr, "round %d: elect %lld ms, libmoonkv put %lld get %lld, gateway put %lld get %lld\n",
            round, ms[M_ELECT], ms[M_LIB_PUT], ms[M_LIB_GET], ms[M_GW_PUT], ms[M_GW_GET]);
    /* Back as the standby, and every node with the new leader. */
    b->master[lead] = start_master(b, lead);
    if (b->master[lead] < 0 || h_wait_role(b->port[P_MASTER0 + lead], "standby", 10000) != 0) return -1;
    return h_wait_nodes(standby, "alive", NODES, 20000);
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The median of measurement m over the rounds; -1 with the first round
 * where it did not happen in *failed. */
static long long median(long long ms[][M_COUNT], int rounds, int m, int *failed) {
    long long v[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        if (ms[r][m] < 0) {
            *failed = r + 1;
            return -1;
        }
        v[r] = ms[r][m];
    }
    qsort(v, (size_t)rounds, sizeof v[0], cmp_ll);
    return v[rounds / 2];
}

static void report(long long ms[][M_COUNT], int rounds) {
    for (int m = 0; m < M_COUNT; m++) {
        int failed = 0;
        long long med = median(ms, rounds, m, &failed);
        if (med < 0) bench_skip(NAMES[m], "round %d: not within %d ms of the kill", failed, PROBE_LIMIT_MS);
        else bench_result(NAMES[m], (double)med / 1000.0, "s");
    }
}

static int parse_ports(const char *s, int *port) {
    for (int i = 0; i < NPORTS; i++) {
        char *end;
        long v = strtol(s, &end, 10);
        if (v < 1 || v > 65535 || (i < NPORTS - 1 ? *end != ',' : *end != '\0')) return -1;
        port[i] = (int)v;
        s = end + 1;
    }
    return 0;
}

static fo_bench bench;

static void cleanup(void) { h_etcd_remove(&bench.etcd); }

int main(int argc, char **argv) {
    int rounds = argc == 4 ? atoi(argv[3]) : 0;
    if (argc != 4 || parse_ports(argv[1], bench.port) != 0 || (bench.lease_s = atoi(argv[2])) < 1 ||
        rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: bench_failover PORT,...(%d) LEASE_S ROUNDS(1..%d)\n", NPORTS, MAX_ROUNDS);
        return 2;
    }
    h_init(600);
    h_cleanup_hook = cleanup;
    if (start_cluster(&bench) != 0) {
        skip_all("the cluster did not come up (etcd, masters, nodes, gateway): see the run log");
        h_stop_all();
        return 0;
    }
    long long ms[MAX_ROUNDS][M_COUNT];
    int lead = 0, done = 0;
    while (done < rounds) {
        int rc = one_round(&bench, done + 1, lead, ms[done]);
        done++;
        lead = !lead;
        if (rc != 0) break;
    }
    if (done < rounds) skip_all("the cluster did not recover between rounds: see the run log");
    else report(ms, rounds);
    h_probe_close(&bench.probe);
    h_stop_all();
    return 0;
}
