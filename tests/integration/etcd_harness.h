/* tests/integration/etcd_harness.h - an etcd from the Debian package
 * (etcd-server) as a child process on fixed loopback ports with its data
 * in a temporary directory, and moonkv-server roles that find their
 * leader through it (test_failover, the bench's failover step). */
#ifndef MKV_ETCD_HARNESS_H
#define MKV_ETCD_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/util.h"
#include "etcd/etcd.h"
#include "support/harness.h"

typedef struct h_etcd {
    char url[64];                         /* http://127.0.0.1:<client port> */
    char dir[40];                         /* data dir and etcd.log, removed by h_etcd_remove */
    int peer_port;
    int starts;                           /* the first log is etcd.log, a restart's etcd.log.N */
    pid_t pid;
} h_etcd;

/* etcd answers a range request within timeout_ms. */
static inline int h_etcd_wait(const char *url, int timeout_ms) {
    char err[ETCD_ERR_LEN], val[64];
    etcd_client *ec = etcd_create(url, 500, err, sizeof err);
    if (!ec) return -1;
    int found, rc = -1;
    int64_t rev;
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    while (mono_ms() < end && rc != 0) {
        rc = etcd_get(ec, "/moonkv/probe", &found, val, sizeof val, &rev, err, sizeof err);
        if (rc != 0) usleep(100000);
    }
    etcd_free(ec);
    return rc;
}

/* etcd on e's ports and data dir (fresh, or the one it had before it
 * was killed), once it answers: 0, or -1 (the log stays in e->dir). */
static inline int h_etcd_spawn(h_etcd *e) {
    char out[96];
    if (e->starts++) snprintf(out, sizeof out, "%s/etcd.log.%d", e->dir, e->starts);   /* a restart's */
    else snprintf(out, sizeof out, "%s/etcd.log", e->dir);
    h_args a = {0};
    h_arg(&a, "etcd");
    h_arg(&a, "--data-dir");
    h_argf(&a, "%s/data", e->dir);
    h_argf(&a, "--listen-client-urls=%s", e->url);
    h_argf(&a, "--advertise-client-urls=%s", e->url);
    h_argf(&a, "--listen-peer-urls=http://127.0.0.1:%d", e->peer_port);
    h_argf(&a, "--initial-advertise-peer-urls=http://127.0.0.1:%d", e->peer_port);
    h_argf(&a, "--initial-cluster=default=http://127.0.0.1:%d", e->peer_port);
    e->pid = h_spawn_ex(a.v, out, out);
    if (e->pid > 0 && h_etcd_wait(e->url, 15000) != 0) {
        h_kill(e->pid);
        e->pid = -1;
    }
    return e->pid > 0 ? 0 : -1;
}

/* etcd on 127.0.0.1:client_port (peers on peer_port) with a fresh data
 * dir, once it answers: 0, or -1 (the log stays in e->dir). */
static inline int h_etcd_start(h_etcd *e, int client_port, int peer_port) {
    snprintf(e->dir, sizeof e->dir, "/tmp/moonkv-etcd-XXXXXX");
    snprintf(e->url, sizeof e->url, "http://127.0.0.1:%d", client_port);
    e->peer_port = peer_port;
    e->starts = 0;
    e->pid = -1;
    if (!mkdtemp(e->dir)) return -1;
    return h_etcd_spawn(e);
}

/* h_etcd_start, saying why in a "not ok" line if it fails. */
static inline int h_etcd_up(h_etcd *e, int client_port, int peer_port) {
    if (h_etcd_start(e, client_port, peer_port) == 0) return 0;
    printf("not ok - etcd: cannot start etcd (package etcd-server; see %s/etcd.log)\n", e->dir);
    return -1;
}

static inline void h_etcd_remove(const h_etcd *e) {
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", e->dir);
    if (e->dir[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", e->dir);
}

/* A moonkv-server of role with --etcd url, --cluster-name cluster, a
 * lease of lease_s and extra flags (NULL-terminated), once it answers. */
static inline pid_t h_start_etcd_role(const char *role, int port, const char *url, const char *cluster,
                                      int lease_s, const char *const *extra) {
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_arg(&a, "--role");
    h_arg(&a, role);
    h_argf(&a, "--port=%d", port);
    h_argf(&a, "--etcd=%s", url);
    h_arg(&a, "--cluster-name");
    h_arg(&a, cluster);
    h_argf(&a, "--etcd-lease-ttl=%d", lease_s);
    h_arg(&a, "--log-level");
    h_arg(&a, "warning");
    h_argv(&a, extra);
    return h_ready(h_spawn(a.v), "127.0.0.1", port, NULL, 20000);
}

/* The ha_role field of a master's INFO cluster ("leader", "standby"), or "". */
static inline void h_ha_role(int port, char *out, size_t len) {
    out[0] = '\0';
    redisContext *c = h_redis_ms("127.0.0.1", port, 1000);
    if (!c) return;
    redisReply *r = redisCommand(c, "INFO cluster");
    const char *f = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "ha_role:") : NULL;
    if (f) snprintf(out, len, "%.*s", (int)strcspn(f + 8, "\r\n"), f + 8);
    freeReplyObject(r);
    redisFree(c);
}

/* Until the master on port has ha_role want: 0, or -1 after timeout_ms. */
static inline int h_wait_role(int port, const char *want, int timeout_ms) {
    char role[32];
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    do {
        h_ha_role(port, role, sizeof role);
        if (strcmp(role, want) == 0) return 0;
        usleep(20000);
    } while (mono_ms() < end);
    return -1;
}

#endif
