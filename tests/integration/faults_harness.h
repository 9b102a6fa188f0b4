/* tests/integration/faults_harness.h - a cluster to inject faults into:
 * three nodes and a gateway (replicas 2) behind one master (restarted in
 * place when killed), or behind two masters that find each other through
 * etcd (a leader and a standby). Every process logs into one directory,
 * kept when a case fails. The faults and what the cluster shows of them
 * (the leader's term, when a new one leads, when its table is rebuilt)
 * are here too; test_acked_faults and bench_acked drive them while a
 * stream of puts runs (stream_harness.h). */
#ifndef MKV_FAULTS_HARNESS_H
#define MKV_FAULTS_HARNESS_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_harness.h"
#include "core/util.h"
#include "etcd_harness.h"

#define FX_NODES   3
#define FX_WAIT_MS 30000   /* a start, an election, a rebuild: on a loaded 2-core machine */

enum { FX_P_ETCD, FX_P_PEER, FX_P_MASTER0, FX_P_MASTER1, FX_P_NODE0, FX_P_GATEWAY = FX_P_NODE0 + 2 * FX_NODES,
       FX_PORTS };

typedef struct fx_cluster {
    int with_etcd;
    int lease_s;               /* with etcd */
    const char *segment;       /* of each node */
    const char *cluster;       /* its name in etcd */
    int port0;                 /* FX_PORTS ports from here: h_free_ports */
    char logs[40];             /* the processes' logs */
    h_etcd etcd;
    pid_t master[2];           /* [1]: the second master, with etcd only */
    int lead;                  /* which master leads */
    pid_t node[FX_NODES], gateway;
    char master_addr[32];      /* without etcd */
} fx_cluster;

static inline int fx_port(const fx_cluster *c, int which) { return c->port0 + which; }
static inline int fx_master_port(const fx_cluster *c, int i) { return fx_port(c, FX_P_MASTER0 + i); }

/* The common flags of a role on port: --etcd or --master, notice logs. */
static inline void fx_role_args(const fx_cluster *c, h_args *a, const char *role, int port) {
    h_arg(a, h_server_bin());
    h_arg(a, "--role");
    h_arg(a, role);
    h_arg(a, "--bind");
    h_arg(a, "127.0.0.1");
    h_argf(a, "--port=%d", port);
    if (c->with_etcd) {
        h_argf(a, "--etcd=%s", c->etcd.url);
        h_arg(a, "--cluster-name");
        h_arg(a, c->cluster);
        h_argf(a, "--etcd-lease-ttl=%d", c->lease_s);
    } else if (strcmp(role, "master") != 0) {
        h_argf(a, "--master=%s", c->master_addr);
    }
    h_arg(a, "--log-level");
    h_arg(a, "notice");
}

/* Spawns a with its output in the role's log, once it answers PING. A
 * restarted process gets a log of its own (ROLE-PORT.N.log): the dead
 * one's stays to be read. */
static inline pid_t fx_spawn(const fx_cluster *c, h_args *a, const char *role, int port) {
    char log[128];
    snprintf(log, sizeof log, "%s/%s-%d.log", c->logs, role, port);
    for (int n = 2; access(log, F_OK) == 0 && n < 100; n++)
        snprintf(log, sizeof log, "%s/%s-%d.%d.log", c->logs, role, port, n);
    return h_ready(h_spawn_ex(a->v, log, log), "127.0.0.1", port, NULL, FX_WAIT_MS);
}

static inline pid_t fx_start_master(fx_cluster *c, int i) {
    h_args a = {0};
    fx_role_args(c, &a, "master", fx_master_port(c, i));
    return c->master[i] = fx_spawn(c, &a, "master", fx_master_port(c, i));
}

static inline pid_t fx_start_node(fx_cluster *c, int i) {
    int port = fx_port(c, FX_P_NODE0 + 2 * i);
    h_args a = {0};
    fx_role_args(c, &a, "node", port);
    h_arg(&a, "--segment-size");
    h_arg(&a, c->segment);
    h_argf(&a, "--data-addrs=127.0.0.1:%d", port + 1);
    h_arg(&a, "--prefault");
    h_arg(&a, "no");
    return c->node[i] = fx_spawn(c, &a, "node", port);
}

static inline pid_t fx_start_gateway(fx_cluster *c) {
    int port = fx_port(c, FX_P_GATEWAY);
    h_args a = {0};
    fx_role_args(c, &a, "gateway", port);
    h_arg(&a, "--replicas");
    h_arg(&a, "2");
    h_arg(&a, "--segment-size");
    h_arg(&a, "16MB");
    return c->gateway = fx_spawn(c, &a, "gateway", port);
}

/* A field of a master's INFO cluster as text into out ("" if it does not
 * answer within timeout_ms: a stopped master must not hold us). */
static inline void fx_master_field(const fx_cluster *c, int i, const char *field, char *out, size_t len,
                                   int timeout_ms) {
    out[0] = '\0';
    redisContext *r = h_redis_ms("127.0.0.1", fx_master_port(c, i), timeout_ms);
    redisReply *rep = r ? redisCommand(r, "INFO cluster") : NULL;
    char key[64];
    snprintf(key, sizeof key, "\r\n%s:", field);
    const char *f = rep && rep->type == REDIS_REPLY_STRING ? strstr(rep->str, key) : NULL;
    if (f) snprintf(out, len, "%.*s", (int)strcspn(f + strlen(key), "\r\n"), f + strlen(key));
    freeReplyObject(rep);
    if (r) redisFree(r);
}

/* The term master i leads, 0 if it does not lead (or does not answer). */
static inline long long fx_leads(const fx_cluster *c, int i, int timeout_ms) {
    char role[32], term[32];
    fx_master_field(c, i, "ha_role", role, sizeof role, timeout_ms);
    if (strcmp(role, "leader") != 0 && strcmp(role, "single") != 0) return 0;
    fx_master_field(c, i, "master_term", term, sizeof term, timeout_ms);
    return atoll(term);
}

/* Master i has rebuilt its table from the nodes' reports (a master that
 * starts, or starts to lead, collects them first). */
static inline int fx_rebuilt(const fx_cluster *c, int i) {
    char st[32];
    fx_master_field(c, i, "rebuild_state", st, sizeof st, 1000);
    return strcmp(st, "done") == 0;
}

/* ---- watching a fault: when a new term leads, and when it is ready ---- */

typedef struct fx_watch {
    long long term0;        /* the term before the fault */
    int skip;               /* a master not to ask (stopped), -1: none */
    uint64_t elected_ms;    /* first seen leading a newer term, 0: not yet */
    int leader;             /* who */
    long long term;
    uint64_t ready_ms;      /* when fx_wait_ready saw a leader ready */
} fx_watch;

static inline void fx_watch_begin(const fx_cluster *c, fx_watch *w) {
    memset(w, 0, sizeof *w);
    w->skip = -1;
    w->leader = c->lead;
    w->term0 = w->term = fx_leads(c, c->lead, 2000);
}

/* One look at every master that may answer. */
static inline void fx_watch_poll(const fx_cluster *c, fx_watch *w) {
    for (int i = 0; i < (c->with_etcd ? 2 : 1) && !w->elected_ms; i++) {
        if (i == w->skip || c->master[i] <= 0) continue;
        long long t = fx_leads(c, i, 300);
        if (t > 0 && t != w->term0) {
            w->elected_ms = mono_ms();
            w->leader = i;
            w->term = t;
        }
    }
}

/* Watches for ms. */
static inline void fx_watch_for(const fx_cluster *c, fx_watch *w, int ms) {
    uint64_t end = mono_ms() + (uint64_t)ms;
    while (mono_ms() < end) {
        fx_watch_poll(c, w);
        usleep(20 * 1000);
    }
}

/* Until some master leads with its table rebuilt (a newer term, when
 * newer is set): that master's index, or -1 after FX_WAIT_MS. */
static inline int fx_wait_ready(fx_cluster *c, fx_watch *w, int newer) {
    uint64_t end = mono_ms() + FX_WAIT_MS;
    while (mono_ms() < end) {
        fx_watch_poll(c, w);
        for (int i = 0; i < (c->with_etcd ? 2 : 1); i++) {
            if (i == w->skip || c->master[i] <= 0) continue;
            long long t = fx_leads(c, i, 300);
            if (t > 0 && (!newer || t != w->term0) && fx_rebuilt(c, i)) {
                w->ready_ms = mono_ms();
                c->lead = i;
                return i;
            }
        }
        usleep(20 * 1000);
    }
    return -1;
}

/* ---- the cluster ---- */

/* Ports, logs, etcd when asked, the master(s), the nodes and the gateway:
 * 0, or -1 with the step that failed in why. */
static inline int fx_start(fx_cluster *c, char *why, size_t len) {
    snprintf(c->logs, sizeof c->logs, "/tmp/moonkv-faults-XXXXXX");
    c->port0 = h_free_ports(FX_PORTS);
    c->lead = 0;
    snprintf(c->master_addr, sizeof c->master_addr, "127.0.0.1:%d", fx_master_port(c, 0));
    if (c->port0 < 0 || !mkdtemp(c->logs)) return snprintf(why, len, "no free ports or no log dir"), -1;
    if (c->with_etcd && h_etcd_start(&c->etcd, fx_port(c, FX_P_ETCD), fx_port(c, FX_P_PEER)) != 0)
        return snprintf(why, len, "etcd (package etcd-server) did not start: %s", c->etcd.dir), -1;
    if (fx_start_master(c, 0) < 0) return snprintf(why, len, "master 0 did not start"), -1;
    if (c->with_etcd && (h_wait_role(fx_master_port(c, 0), "leader", FX_WAIT_MS) != 0 || fx_start_master(c, 1) < 0 ||
                         h_wait_role(fx_master_port(c, 1), "standby", FX_WAIT_MS) != 0))
        return snprintf(why, len, "master 0 did not lead or master 1 did not stand by"), -1;
    for (int i = 0; i < FX_NODES; i++)
        if (fx_start_node(c, i) < 0) return snprintf(why, len, "node %d did not start", i), -1;
    if (h_wait_nodes(fx_master_port(c, 0), "alive", FX_NODES, FX_WAIT_MS) != 0)
        return snprintf(why, len, "the nodes did not register"), -1;
    for (int i = 0; i < FX_NODES; i++)
        if (h_wait_node_registered(fx_port(c, FX_P_NODE0 + 2 * i), FX_WAIT_MS) != 0)
            return snprintf(why, len, "node %d has no registration", i), -1;
    if (fx_start_gateway(c) < 0) return snprintf(why, len, "the gateway did not start"), -1;
    return 0;
}

/* How a libmoonkv client reaches the cluster (strings in c). */
static inline void fx_client_options(const fx_cluster *c, mkv_options *o) {
    mkv_options_init(o);
    if (c->with_etcd) {
        o->etcd = c->etcd.url;
        o->cluster_name = c->cluster;
    } else {
        o->master = c->master_addr;
    }
    o->timeout_ms = 5000;
}

/* Everything stopped; the logs and etcd's data removed unless keep. */
static inline void fx_stop(fx_cluster *c, int keep) {
    for (int i = 0; i < 2; i++) h_stop(c->master[i]);
    for (int i = 0; i < FX_NODES; i++) h_stop(c->node[i]);
    h_stop(c->gateway);
    if (c->with_etcd) h_stop(c->etcd.pid);
    char cmd[128];
    if (keep) {
        printf("# logs kept in %s%s%s\n", c->logs, c->with_etcd ? ", etcd's in " : "", c->with_etcd ? c->etcd.dir : "");
        return;
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", c->logs);
    if (c->logs[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", c->logs);
    if (c->with_etcd) h_etcd_remove(&c->etcd);
}

/* ---- faults ---- */

/* kill -9 of the master, started again at once with the same flags. */
static inline int fx_kill_restart(fx_cluster *c) {
    h_kill(c->master[0]);
    return fx_start_master(c, 0) > 0 ? 0 : -1;
}

/* kill -9 of the leader; the killed one is started again, as a standby,
 * once the other leads (w sees the election). 0, or -1. */
static inline int fx_kill_failover(fx_cluster *c, fx_watch *w) {
    int old = c->lead;
    h_kill(c->master[old]);
    c->master[old] = -1;
    w->skip = old;
    if (fx_wait_ready(c, w, 1) < 0) return -1;
    w->skip = -1;
    return fx_start_master(c, old) > 0 && h_wait_role(fx_master_port(c, old), "standby", FX_WAIT_MS) == 0 ? 0 : -1;
}

/* Whether master i, asked to place an object, refuses as a non-leader
 * (READONLY) or does not answer at all (it is gone): *said is its reply. */
static inline int fx_refuses_placement(const fx_cluster *c, int i, char *said, size_t len) {
    redisContext *r = h_redis_ms("127.0.0.1", fx_master_port(c, i), 2000);
    if (!r) {
        snprintf(said, len, "(no connection)");
        return 1;
    }
    /* As a member would: a stranger's placement is refused NOAUTH by any
     * master, which says nothing of fencing. A fenced leader may refuse the
     * proof too; the placement must then still be READONLY. */
    h_master_prove(r, "");
    redisReply *rep = redisCommand(r, "MOON.PUTSTART fx-fenced-%d 100", (int)getpid());
    int refused = !rep || (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "READONLY", 8) == 0);
    snprintf(said, len, "%s", rep && rep->str ? rep->str : rep ? "(not an error)" : r->errstr);
    freeReplyObject(rep);
    redisFree(r);
    return refused;
}

/* Whether our child pid has exited (reaped, and forgotten). */
static inline int fx_exited(pid_t pid, int *status) {
    if (pid <= 0) return 1;
    if (waitpid(pid, status, WNOHANG) != pid) return 0;
    h_forget(pid);
    return 1;
}

#endif
