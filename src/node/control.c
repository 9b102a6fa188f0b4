/* node/control.c - see control.h. */
#include "node/control.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/util.h"
#include "etcd/etcd.h"
#include "node/copier.h"
#include "node/reply.h"
#include "proto/master_link.h"
#include "proto/register.h"
#include "proto/status.h"

#define CTL_CONNECT_MS      2000
/* One master round trip. A timeout costs the connection and so our
 * registration: be patient with a master that stalls (a huge request,
 * a sanitizer build) rather than quick to re-register. */
#define CTL_IO_TIMEOUT_MS   5000
#define CTL_RETRY_MIN_MS    200    /* between attempts to join, doubling */
#define CTL_RETRY_MAX_MS    5000
#define CTL_ETCD_RETRY_MS   100    /* with etcd: a new leader is expected within a lease */
#define CTL_ETCD_TIMEOUT_MS 1000
#define CTL_REFRESH_MS      1000   /* MOON.NODES for INFO */
#define CTL_MAX_RESULTS     1024   /* COPYDONEs waiting to be sent */

typedef struct task_result {
    uint64_t gen, id;
    int ok;
} task_result;

struct node_control {
    node *n;
    pthread_t th;
    pthread_cond_t wake;        /* with n->mu */
    int stop, leave_wanted, leave_sent;
    int joined;                 /* the thread is gone */
    task_result results[CTL_MAX_RESULTS];
    int nresults;
    /* Control thread only. */
    redisContext *rc;
    uint64_t gen;               /* registrations so far (= status.registrations): tags tasks */
    uint8_t cap_key[TE_CAP_KEY_LEN];   /* of the current registration */
    uint64_t term;              /* its master's term; the newest we have seen */
    int heartbeat_ms;
    uint64_t next_refresh_ms;
    char host[CONFIG_STR_MAX];
    int port;
    etcd_client *etcd;          /* --etcd: the master is whoever leads */
};

/* ---- helpers ---- */

static void set_phase(node_control *c, node_phase p) {
    pthread_mutex_lock(&c->n->mu);
    c->n->status.phase = p;
    pthread_mutex_unlock(&c->n->mu);
}

static void disconnect(node_control *c) {
    if (c->rc) redisFree(c->rc);
    c->rc = NULL;
}

/* --etcd: host:port of the current leader. */
static int leader_lookup(node_control *c) {
    char addr[CONFIG_STR_MAX], err[ETCD_ERR_LEN];
    int found = 0;
    int64_t term = 0;
    if (etcd_leader_lookup(c->etcd, c->n->srv->cfg.cluster_name, &found, addr, sizeof addr, &term, err,
                           sizeof err) != 0) {
        log_info("node: %s", err);
        return -1;
    }
    if (!found || parse_hostport(addr, c->host, sizeof c->host, &c->port) != 0) {
        log_info("node: no usable leader in etcd yet");
        return -1;
    }
    return 0;
}

/* Every (re)connection AUTHs when master_auth is set. A refused password
 * is a warning: the node cannot join until its configuration changes. */
static int master_connect(node_control *c) {
    const mkv_config *cfg = &c->n->srv->cfg;
    char addr[CONFIG_STR_MAX], err[512];
    if (c->etcd && leader_lookup(c) != 0) return -1;
    snprintf(addr, sizeof addr, "%.200s:%d", c->host, c->port);
    pthread_mutex_lock(&c->n->mu);
    snprintf(c->n->status.master, sizeof c->n->status.master, "%s", addr);
    pthread_mutex_unlock(&c->n->mu);
    int rc = proto_master_open(&c->rc, addr, cfg->master_auth, CTL_CONNECT_MS,
                              CTL_IO_TIMEOUT_MS, err, sizeof err);
    if (rc == PROTO_LINK_EAUTH) log_warning("node: %s", err);
    else if (rc != PROTO_LINK_OK) log_info("node: %s", err);
    return rc == PROTO_LINK_OK ? 0 : -1;
}

/* A reply, or NULL after dropping a broken connection. */
static redisReply *master_cmd_argv(node_control *c, int argc, const char **argv, const size_t *lens) {
    redisReply *r = redisCommandArgv(c->rc, argc, argv, lens);
    if (!r) {
        log_warning("node: master connection lost: %s", c->rc->errstr);
        disconnect(c);
    }
    return r;
}

static redisReply *master_cmd(node_control *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c->rc, fmt, ap);
    va_end(ap);
    if (!r) {
        log_warning("node: master connection lost: %s", c->rc->errstr);
        disconnect(c);
    }
    return r;
}

/* ---- registration ---- */

/* CHALLENGE, REGISTER; on success the data plane serves as the new id. */
static int do_register(node_control *c) {
    node *n = c->n;
    /* Write grants the master made before we asked are not ours to honour. */
    uint64_t asked_ms = wall_ms();
    redisReply *r = master_cmd(c, "MOON.CHALLENGE");
    if (!r) return -1;
    if (r->type != REDIS_REPLY_STRING || r->len != PROTO_NONCE_LEN) {
        if (r->type == REDIS_REPLY_ERROR)
            log_warning("node: the master refused MOON.CHALLENGE: %s%s", r->str,
                        proto_master_hint(r->str));
        else
            log_warning("node: bad MOON.CHALLENGE reply from the master");
        freeReplyObject(r);
        disconnect(c);
        return -1;
    }
    uint8_t reg_key[PROTO_REG_KEY_LEN], proof[PROTO_PROOF_LEN];
    char proof_hex[2 * PROTO_PROOF_LEN + 1], seg[24];
    proto_reg_key(n->srv->cfg.cluster_secret, reg_key);
    proto_reg_proof(reg_key, (const uint8_t *)r->str, proof);
    freeReplyObject(r);
    hex_encode(proof, sizeof proof, proof_hex);
    snprintf(seg, sizeof seg, "%llu", (unsigned long long)n->seg.size);

    char addrs[TE_MAX_PATHS][TE_ADDR_LEN];
    int naddrs = node_data_addrs(n->data, addrs, TE_MAX_PATHS);
    const char *argv[3 + TE_MAX_PATHS] = {"MOON.REGISTER", proof_hex, seg};
    size_t lens[3 + TE_MAX_PATHS] = {13, 2 * PROTO_PROOF_LEN, strlen(seg)};
    for (int i = 0; i < naddrs; i++) {
        argv[3 + i] = addrs[i];
        lens[3 + i] = strlen(addrs[i]);
    }
    r = master_cmd_argv(c, 3 + naddrs, argv, lens);
    if (!r) return -1;
    uint8_t key[TE_CAP_KEY_LEN];
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
             reply_int_in(r->element[0], 1, UINT32_MAX) && r->element[1]->type == REDIS_REPLY_STRING &&
             hex_decode(r->element[1]->str, r->element[1]->len, key, sizeof key) == 0 &&
             reply_int_in(r->element[2], 1, 3600 * 1000) && reply_int_in(r->element[3], 1, INT64_MAX);
    if (!ok) {
        log_warning("node: registration refused: %s",
                    r->type == REDIS_REPLY_ERROR ? r->str : "malformed reply");
        freeReplyObject(r);
        disconnect(c);
        return -1;
    }
    uint32_t id = (uint32_t)r->element[0]->integer;
    uint64_t term = (uint64_t)r->element[3]->integer;
    c->heartbeat_ms = (int)r->element[2]->integer;
    freeReplyObject(r);
    /* With etcd terms only grow: a master of an older one was deposed
     * (and is not to be served), whatever it still believes. */
    if (c->etcd && term < c->term) {
        log_warning("node: the master %s:%d is of term %llu, older than %llu: not serving it",
                    c->host, c->port, (unsigned long long)term, (unsigned long long)c->term);
        disconnect(c);
        return -1;
    }

    char err[256];
    if (node_data_set_identity(n->data, id, key, term, asked_ms, err, sizeof err) != 0) {
        log_warning("node: data plane cannot serve as node %u: %s", id, err);
        disconnect(c);   /* the id dies by timeout; try again later */
        return -1;
    }
    c->gen++;
    memcpy(c->cap_key, key, sizeof key);
    c->term = term;
    c->leave_sent = 0;
    c->next_refresh_ms = 0;
    pthread_mutex_lock(&n->mu);
    n->status.id = id;
    n->status.registrations++;
    n->status.master_term = term;
    n->status.phase = NODE_MEMBER;
    pthread_mutex_unlock(&n->mu);
    log_notice("node: registered as node %u with the master %s:%d (heartbeat %d ms)", id, c->host,
               c->port, c->heartbeat_ms);
    return 0;
}

/* ---- tasks ---- */

static void queue_result(node_control *c, uint64_t gen, uint64_t id, int ok) {
    if (c->nresults == CTL_MAX_RESULTS) return;   /* the master fails it by deadline */
    c->results[c->nresults++] = (task_result){gen, id, ok};
}

static void take_tasks(node_control *c, const redisReply *r) {
    node *n = c->n;
    pthread_mutex_lock(&n->mu);
    uint32_t id = n->status.id;
    n->status.tasks_received += r->elements;
    pthread_mutex_unlock(&n->mu);
    for (size_t i = 0; i < r->elements; i++) {
        uint64_t task_id;
        node_task *t = node_task_parse(r->element[i], &task_id);
        if (!t) {
            log_warning("node: malformed copy task %llu from the master", (unsigned long long)task_id);
            if (task_id) {
                pthread_mutex_lock(&n->mu);
                queue_result(c, c->gen, task_id, 0);
                pthread_mutex_unlock(&n->mu);
            }
            continue;
        }
        t->gen = c->gen;
        t->node_id = id;
        memcpy(t->cap_key, c->cap_key, sizeof t->cap_key);
        t->cap_term = c->term;
        node_copier_submit(n->copier, t);
    }
}

/* COPYDONE for every finished task of the current registration. */
static void report_results(node_control *c) {
    task_result res[CTL_MAX_RESULTS];
    pthread_mutex_lock(&c->n->mu);
    int nres = c->nresults;
    memcpy(res, c->results, (size_t)nres * sizeof *res);
    c->nresults = 0;
    pthread_mutex_unlock(&c->n->mu);
    for (int i = 0; i < nres && c->rc; i++) {
        if (res[i].gen != c->gen) continue;   /* for an id that is gone */
        redisReply *r = master_cmd(c, "MOON.COPYDONE %llu %s", (unsigned long long)res[i].id,
                                res[i].ok ? "OK" : "FAIL");
        if (!r) return;
        if (r->type == REDIS_REPLY_ERROR)
            log_info("node: COPYDONE %llu: %s", (unsigned long long)res[i].id, r->str);
        freeReplyObject(r);
    }
}

/* ---- heartbeat, leave, refresh ---- */

static int flag(node_control *c, const int *f) {
    pthread_mutex_lock(&c->n->mu);
    int v = *f;
    pthread_mutex_unlock(&c->n->mu);
    return v;
}

/* A NODEDEAD answer: drained means we are done, anything else re-registers. */
static void node_dead(node_control *c, const char *msg) {
    int drained = strstr(msg, "(drained") != NULL;
    log_notice("node: master says: %s", msg);
    if (drained || flag(c, &c->leave_wanted)) {
        set_phase(c, NODE_GONE);
        return;
    }
    set_phase(c, NODE_JOINING);
    if (do_register(c) != 0) disconnect(c);
}

static int is_nodedead(const redisReply *r) {
    return r->type == REDIS_REPLY_ERROR && proto_status_of_reply(r->str, r->len) == PROTO_NODEDEAD;
}

static int is_readonly(const redisReply *r) {
    return r->type == REDIS_REPLY_ERROR && proto_status_of_reply(r->str, r->len) == PROTO_READONLY;
}

static uint32_t my_id(node_control *c) {
    pthread_mutex_lock(&c->n->mu);
    uint32_t id = c->n->status.id;
    pthread_mutex_unlock(&c->n->mu);
    return id;
}

static void heartbeat(node_control *c) {
    node *n = c->n;
    /* Clients write with the master's caps, so only the master knows what
     * is allocated here: we echo its last figure. */
    pthread_mutex_lock(&n->mu);
    uint64_t used = n->status.master_used;
    pthread_mutex_unlock(&n->mu);
    redisReply *r = master_cmd(c, "MOON.HEARTBEAT %u %llu", my_id(c), (unsigned long long)used);
    if (!r) return;
    pthread_mutex_lock(&n->mu);
    if (r->type == REDIS_REPLY_ARRAY) n->status.heartbeats++;
    else n->status.heartbeat_errors++;
    pthread_mutex_unlock(&n->mu);
    if (r->type == REDIS_REPLY_ARRAY) take_tasks(c, r);
    else if (is_nodedead(r)) node_dead(c, r->str);
    else if (is_readonly(r)) {
        log_notice("node: master %s:%d is not the leader: %s", c->host, c->port, r->str);
        disconnect(c);   /* etcd names the new one */
    }
    else log_warning("node: heartbeat refused: %s", r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
    freeReplyObject(r);
}

static void send_leave(node_control *c) {
    redisReply *r = master_cmd(c, "MOON.LEAVE %u", my_id(c));
    if (!r) return;
    c->leave_sent = 1;   /* asked once per registration; refused: the bounded wait ends it */
    if (r->type == REDIS_REPLY_STATUS) {
        set_phase(c, NODE_LEAVING);
        log_notice("node: leaving: the master is moving our objects away");
    } else if (is_nodedead(r)) {
        set_phase(c, NODE_GONE);
    } else {
        log_warning("node: MOON.LEAVE refused: %s", r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
    }
    freeReplyObject(r);
}

/* Our line of MOON.NODES: "<id> <addr> <state> <segment_size> <used>". */
static void refresh_view(node_control *c) {
    uint32_t id = my_id(c);
    redisReply *r = master_cmd(c, "MOON.NODES");
    if (!r) return;
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        for (const char *line = r->str; line && *line;) {
            unsigned lid;
            char state[16];
            unsigned long long seg, used;
            if (sscanf(line, "%u %*s %15s %llu %llu", &lid, state, &seg, &used) == 4 && lid == id) {
                pthread_mutex_lock(&c->n->mu);
                memcpy(c->n->status.master_state, state, sizeof state);
                c->n->status.master_segment = seg;
                c->n->status.master_used = used;
                pthread_mutex_unlock(&c->n->mu);
                break;
            }
            line = strchr(line, '\n');
            if (line) line++;
        }
    }
    freeReplyObject(r);
}

/* ---- the thread ---- */

/* Sleep up to ms, waking for stop, a leave to send and (when there is a
 * connection to send them on) finished tasks. */
static void wait_ms(node_control *c, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&c->n->mu);
    while (!c->stop && !(c->leave_wanted && !c->leave_sent) && !(c->rc && c->nresults > 0))
        if (pthread_cond_timedwait(&c->wake, &c->n->mu, &ts) == ETIMEDOUT) break;
    pthread_mutex_unlock(&c->n->mu);
}

static void gone(node_control *c) {
    set_phase(c, NODE_GONE);
    loop_wake_send(c->n->gone);
}

static void *control_main(void *arg) {
    node_control *c = arg;
    uint64_t next_beat = 0;
    int retry_ms = CTL_RETRY_MIN_MS;
    while (!flag(c, &c->stop)) {
        int leaving = flag(c, &c->leave_wanted);
        if (!c->rc) {
            set_phase(c, NODE_JOINING);
            if (leaving) break;   /* nobody to hand our objects to */
            if (master_connect(c) != 0 || do_register(c) != 0) {
                wait_ms(c, retry_ms);
                retry_ms = retry_ms * 2 < CTL_RETRY_MAX_MS ? retry_ms * 2 : CTL_RETRY_MAX_MS;
                if (c->etcd) retry_ms = CTL_ETCD_RETRY_MS;
                continue;
            }
            retry_ms = CTL_RETRY_MIN_MS;
            next_beat = 0;
        }
        report_results(c);
        if (c->rc && leaving && !c->leave_sent) send_leave(c);
        uint64_t now = mono_ms();
        if (c->rc && now >= next_beat) {
            heartbeat(c);
            next_beat = now + (uint64_t)c->heartbeat_ms;
        }
        if (c->rc && now >= c->next_refresh_ms) {
            refresh_view(c);
            c->next_refresh_ms = now + CTL_REFRESH_MS;
        }
        pthread_mutex_lock(&c->n->mu);
        node_phase p = c->n->status.phase;
        pthread_mutex_unlock(&c->n->mu);
        if (p == NODE_GONE) break;
        now = mono_ms();
        if (c->rc && next_beat > now) wait_ms(c, (int)(next_beat - now));
    }
    if (!flag(c, &c->stop)) gone(c);
    disconnect(c);
    return NULL;
}

node_control *node_control_start(node *n) {
    node_control *c = xcalloc(1, sizeof *c);
    c->n = n;
    c->heartbeat_ms = n->srv->cfg.heartbeat_ms > 0 ? n->srv->cfg.heartbeat_ms : 1000;
    char err[ETCD_ERR_LEN];
    if (n->srv->cfg.etcd[0]) {
        if (!(c->etcd = etcd_create(n->srv->cfg.etcd, CTL_ETCD_TIMEOUT_MS, err, sizeof err))) {
            log_warning("node: %s", err);
            free(c);
            return NULL;
        }
    } else if (parse_hostport(n->srv->cfg.master, c->host, sizeof c->host, &c->port) != 0) {
        log_warning("node: bad master address '%s' (want host:port)", n->srv->cfg.master);
        free(c);
        return NULL;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_create(&c->th, NULL, control_main, c);
    return c;
}

static void poke(node_control *c, int *f) {
    pthread_mutex_lock(&c->n->mu);
    *f = 1;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->n->mu);
}

void node_control_request_leave(node_control *c) { poke(c, &c->leave_wanted); }

void node_control_task_done(node_control *c, uint64_t gen, uint64_t task_id, int ok) {
    pthread_mutex_lock(&c->n->mu);
    queue_result(c, gen, task_id, ok);
    if (ok) c->n->status.tasks_ok++;
    else c->n->status.tasks_failed++;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->n->mu);
}

void node_control_stop(node_control *c) {
    if (!c || c->joined) return;
    poke(c, &c->stop);
    pthread_join(c->th, NULL);
    c->joined = 1;
}

void node_control_free(node_control *c) {
    if (!c) return;
    node_control_stop(c);
    pthread_cond_destroy(&c->wake);
    etcd_free(c->etcd);
    free(c);
}
