/* bench_route.c - what routing over master groups costs a libmoonkv call.
 *
 *   bench_route PORTS COUNT
 *
 * PORTS: 5 free ports, comma-separated (etcd client and peer, the master
 * of group a, a node and its data plane). One group owns every slot; the
 * same COUNT 4 KiB puts and gets run through a router client
 * (mkv_options.groups) and through a plain client of the group
 * (cluster name "<cluster>/g/a"), in turns of 200 so both see the same
 * load. Results: route.put, route.get and direct.put, direct.get (ops
 * per second). The server is $MOONKV_SERVER, etcd is etcd from PATH.
 * Output: bench.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "client/moonkv.h"
#include "integration/cluster_harness.h"
#include "integration/etcd_harness.h"

#define VAL    4096
#define TURN   200
#define CLUSTER "bench-route"

typedef struct side {
    mkv_client *c;
    const char *name;
    uint64_t put_us, get_us, n;
} side;

static void die(const char *what) {
    fprintf(stderr, "bench_route: %s\n", what);
    bench_skip("route.put", "%s", what);
    h_kill_all();
    exit(0);
}

/* One turn of TURN puts then TURN gets on s, keys from *next. */
static void turn(side *s, char *buf, uint64_t *next) {
    char key[32];
    uint64_t first = *next, t0 = mono_us();
    for (int i = 0; i < TURN; i++) {
        snprintf(key, sizeof key, "%s:%llu", s->name, (unsigned long long)(*next)++);
        if (mkv_put(s->c, key, strlen(key), buf, VAL, 1) != MKV_OK) die(mkv_last_error(s->c));
    }
    uint64_t t1 = mono_us();
    for (int i = 0; i < TURN; i++) {
        size_t got;
        snprintf(key, sizeof key, "%s:%llu", s->name, (unsigned long long)(first + (uint64_t)i));
        if (mkv_get(s->c, key, strlen(key), buf + VAL, VAL, &got) != MKV_OK) die(mkv_last_error(s->c));
    }
    s->put_us += t1 - t0;
    s->get_us += mono_us() - t1;
    s->n += TURN;
}

static mkv_client *client(const char *etcd, int groups) {
    mkv_options opt;
    mkv_options_init(&opt);
    opt.etcd = etcd;
    opt.cluster_name = groups ? CLUSTER : CLUSTER "/g/a";
    opt.groups = groups;
    mkv_client *c = NULL;
    uint64_t end = mono_ms() + 30000;
    while (mkv_connect(&c, &opt) != MKV_OK)
        if (mono_ms() >= end) die(mkv_last_error(NULL));
        else usleep(200000);
    return c;
}

int main(int argc, char **argv) {
    int p[5], n = 0;
    if (argc == 3)
        for (char *s = argv[1]; *s && n < 5; s += strcspn(s, ","), s += *s == ',') p[n++] = atoi(s);
    uint64_t count = argc == 3 ? strtoull(argv[2], NULL, 10) : 0;
    if (n != 5 || count < TURN) {
        fprintf(stderr, "usage: bench_route PORTS(5) COUNT (>= %d)\n", TURN);
        return 2;
    }
    h_etcd etcd;
    if (h_etcd_start(&etcd, p[0], p[1]) != 0) die("etcd did not start (package etcd-server)");
    const char *mextra[] = {"--group=a", "--slots=all", NULL};
    char data[48];
    snprintf(data, sizeof data, "--data-addrs=127.0.0.1:%d", p[4]);
    const char *nextra[] = {"--group=a", "--segment-size", "256MB", data, NULL};
    if (h_start_etcd_role("master", p[2], etcd.url, CLUSTER, 2, mextra) < 0 || h_wait_role(p[2], "leader", 30000) != 0 ||
        h_start_etcd_role("node", p[3], etcd.url, CLUSTER, 2, nextra) < 0 || h_wait_nodes(p[2], "alive", 1, 30000) != 0)
        die("the master or the node did not come up");
    uint64_t end = mono_ms() + 30000;
    while (h_port_info(p[2], "cluster", "slots_owned") != 16384)
        if (mono_ms() >= end) die("the master did not claim its slots");
        else usleep(50000);
    side s[2] = {{client(etcd.url, 1), "route", 0, 0, 0}, {client(etcd.url, 0), "direct", 0, 0, 0}};
    char *buf = aligned_alloc(4096, 2 * VAL);
    memset(buf, 'v', 2 * VAL);
    for (int i = 0; i < 2; i++)
        if (mkv_register_buffer(s[i].c, buf, 2 * VAL) != MKV_OK) die(mkv_last_error(s[i].c));
    uint64_t next = 0;
    for (int i = 0; i < 2; i++) turn(&s[i], buf, &next);   /* warm: connections, engines */
    for (int i = 0; i < 2; i++) s[i].put_us = s[i].get_us = s[i].n = 0;
    while (s[1].n < count)
        for (int i = 0; i < 2; i++) turn(&s[i], buf, &next);
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s.put", s[i].name);
        bench_result(name, (double)s[i].n * 1e6 / (double)s[i].put_us, "ops/s");
        snprintf(name, sizeof name, "%s.get", s[i].name);
        bench_result(name, (double)s[i].n * 1e6 / (double)s[i].get_us, "ops/s");
        mkv_close(s[i].c);
    }
    free(buf);
    h_kill_all();
    h_etcd_remove(&etcd);
    return 0;
}
