/* tests/integration/cluster_harness.h - starting a master and memory
 * nodes as child processes for the libmoonkv tests (test_client,
 * test_cluster, test_netns), on top of the generic child harness in
 * tests/support/harness.h (which kills every child on every exit path). */
#ifndef MKV_CLUSTER_HARNESS_H
#define MKV_CLUSTER_HARNESS_H

/* the system headers its users have come to rely on it for */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "core/util.h"
#include "proto/pins.h"
#include "support/harness.h"

/* Master on bind:port; extra: NULL-terminated flags appended. */
static inline pid_t h_start_master_on(const char *bind, int port, const char *const *extra) {
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_arg(&a, "--role");
    h_arg(&a, "master");
    h_arg(&a, "--bind");
    h_arg(&a, bind);
    h_argf(&a, "--port=%d", port);
    h_arg(&a, "--log-level");
    h_arg(&a, "warning");
    h_argv(&a, extra);
    return h_ready(h_spawn(a.v), bind, port, NULL, 20000);
}

static inline pid_t h_start_master(int port, const char *const *extra) {
    return h_start_master_on("127.0.0.1", port, extra);
}

/* The arguments of a node of master (host:port): RESP on bind:port, data
 * plane on bind:data_port; callers may append more before spawning. */
static inline void h_node_argv(h_args *a, const char *master, const char *bind, int port, int data_port,
                               const char *segment) {
    h_arg(a, h_server_bin());
    h_arg(a, "--role");
    h_arg(a, "node");
    h_arg(a, "--master");
    h_arg(a, master);
    h_arg(a, "--bind");
    h_arg(a, bind);
    h_argf(a, "--port=%d", port);
    h_arg(a, "--segment-size");
    h_arg(a, segment);
    h_argf(a, "--data-addrs=%s:%d", bind, data_port);
    h_arg(a, "--prefault");
    h_arg(a, "no");
    h_arg(a, "--log-level");
    h_arg(a, "warning");
}

/* Starts argv, a server on port that either comes up or refuses to
 * (exits): 0 once it answers PING (left running with its pid in *pidp,
 * or killed when pidp is NULL), its wait status once it exited, -1 if
 * neither within timeout_ms. What it wrote to log is read into out. */
static inline int h_run_or_refused(const char *const *argv, int port, const char *log, char *out, size_t outlen,
                                   pid_t *pidp, int timeout_ms) {
    pid_t pid = h_spawn_ex(argv, log, log);
    int status = -1;
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    while (mono_ms() < end) {
        if (waitpid(pid, &status, WNOHANG) == pid) {   /* refused: it exited */
            h_forget(pid);
            break;
        }
        if (h_wait_ping("127.0.0.1", port, 0, 50) == 0) {
            status = 0;
            if (pidp) *pidp = pid;
            else h_kill(pid);
            break;
        }
    }
    FILE *f = fopen(log, "r");
    size_t n = f ? fread(out, 1, outlen - 1, f) : 0;
    out[n] = 0;
    if (f) fclose(f);
    return status;
}

/* A node of master_port: RESP on port, data plane on data_port. prefix
 * (NULL-terminated, may be NULL) runs it under e.g. "ip netns exec NS". */
static inline pid_t h_start_node_ex(const char *const *prefix, const char *master, const char *bind,
                             int port, int data_port, const char *segment) {
    h_args a = {0};
    h_argv(&a, prefix);
    h_node_argv(&a, master, bind, port, data_port, segment);
    return h_spawn(a.v);
}

/* The arguments of a gateway of the master on 127.0.0.1:master_port,
 * RESP on 127.0.0.1:port, replicas 2. */
static inline void h_gateway_argv(h_args *a, int master_port, int port) {
    h_arg(a, h_server_bin());
    h_arg(a, "--role");
    h_arg(a, "gateway");
    h_argf(a, "--master=127.0.0.1:%d", master_port);
    h_arg(a, "--bind");
    h_arg(a, "127.0.0.1");
    h_argf(a, "--port=%d", port);
    h_arg(a, "--replicas");
    h_arg(a, "2");
    h_arg(a, "--log-level");
    h_arg(a, "warning");
}

/* A gateway (see h_gateway_argv) plus extra flags (NULL-terminated, may
 * be NULL), its output to log (NULL: ours), once it answers PING. */
static inline pid_t h_start_gateway(int master_port, int port, const char *const *extra, const char *log) {
    h_args a = {0};
    h_gateway_argv(&a, master_port, port);
    h_argv(&a, extra);
    return h_ready(h_spawn_ex(a.v, log, log), "127.0.0.1", port, NULL, 20000);
}

static inline pid_t h_start_node(int master_port, int port, int data_port, const char *segment) {
    char master[32];
    snprintf(master, sizeof master, "127.0.0.1:%d", master_port);
    return h_start_node_ex(NULL, master, "127.0.0.1", port, data_port, segment);
}

/* A node as h_start_node, with its background scrub off: bytes a test
 * flips in its segment are left for the readers to find. */
static inline pid_t h_start_node_unscrubbed(int master_port, int port, int data_port, const char *segment) {
    char master[32];
    snprintf(master, sizeof master, "127.0.0.1:%d", master_port);
    h_args a = {0};
    h_node_argv(&a, master, "127.0.0.1", port, data_port, segment);
    h_arg(&a, "--scrub-mb-per-s");
    h_arg(&a, "0");
    return h_spawn(a.v);
}

/* A gateway of master_port on port with the default replicas and 16 MiB
 * staging, once it answers PING; extra: NULL-terminated flags appended.
 * -1 if it did not come up. */
static inline pid_t h_start_gateway_staged(int master_port, int port, const char *const *extra) {
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_arg(&a, "--role");
    h_arg(&a, "gateway");
    h_argf(&a, "--master=127.0.0.1:%d", master_port);
    h_argf(&a, "--port=%d", port);
    h_arg(&a, "--segment-size");
    h_arg(&a, "16MB");
    h_arg(&a, "--log-level");
    h_arg(&a, "warning");
    h_argv(&a, extra);
    return h_ready(h_spawn(a.v), "127.0.0.1", port, NULL, 20000);
}

/* Nodes in state ("alive", "dead", ...) in MOON.TOPOLOGY; -1 on error. */
static inline int h_count_nodes(redisContext *m, const char *state) {
    redisReply *r = redisCommand(m, "MOON.TOPOLOGY");
    int n = -1;
    if (r && r->type == REDIS_REPLY_ARRAY) {
        n = 0;
        for (size_t i = 0; i < r->elements; i++) {
            redisReply *e = r->element[i];
            if (e->type == REDIS_REPLY_ARRAY && e->elements == 3 &&
                e->element[1]->type == REDIS_REPLY_STRING && strcmp(e->element[1]->str, state) == 0)
                n++;
        }
    }
    if (r) freeReplyObject(r);
    return n;
}

/* Until the master lists at least n nodes in state, bounded. */
static inline int h_wait_nodes_on(const char *host, int master_port, const char *state, int n,
                                  int timeout_ms) {
    redisContext *m = h_redis_host(host, master_port);
    if (!m) return -1;
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    int got = -1;
    while (mono_ms() < end && (got = h_count_nodes(m, state)) < n) usleep(50 * 1000);
    redisFree(m);
    return got >= n ? 0 : -1;
}

static inline int h_wait_nodes(int master_port, const char *state, int n, int timeout_ms) {
    return h_wait_nodes_on("127.0.0.1", master_port, state, n, timeout_ms);
}

/* hiredis to 127.0.0.1:port, after AUTH password unless it is NULL;
 * NULL if either fails. */
static inline redisContext *h_redis_auth(int port, const char *password) {
    redisContext *c = h_redis(port);
    if (c && password) {
        redisReply *r = redisCommand(c, "AUTH %s", password);
        int ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        if (!ok) {
            redisFree(c);
            return NULL;
        }
    }
    return c;
}

/* The same of the server on 127.0.0.1:port; -1 if it does not answer. */
static inline long long h_port_info(int port, const char *section, const char *field) {
    redisContext *c = h_redis(port);
    long long v = c ? h_info_field(c, section, field) : -1;
    if (c) redisFree(c);
    return v;
}

/* MOON.REMOVE key on the master at port by another (proven) connection:
 * 1 if it removed the key; its reply text into text. */
static inline int h_remove_other(int port, const char *key, char *text, size_t len) {
    redisContext *c = h_proven(h_redis_ms("127.0.0.1", port, 2000), "");
    redisReply *r = c ? redisCommand(c, "MOON.REMOVE %s", key) : NULL;
    int removed = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    snprintf(text, len, "%s", !r ? "(no reply)" : r->str ? r->str : removed ? "removed" : "(integer)");
    freeReplyObject(r);
    if (c) redisFree(c);
    return removed;
}

/* A pinned key watched on a new leader or a restarted master whose term
 * began at since_ms (mono): another connection's removes every 50 ms
 * until one is refused for the pin itself once the new term's grace
 * (PROTO_REPIN_GRACE_MS) is over, or one removes the key, or bound_ms.
 * Says what it saw after "# <what>: "; 1 if the key was held all along
 * and the pin itself held it after the grace. */
typedef struct h_pin_watch {
    int removed, by_grace, by_pin;   /* refused for the new term's grace / for the pin */
    uint64_t first_pin_ms;           /* mono ms of the first refusal for the pin */
    char last[256];                  /* the last reply */
} h_pin_watch;

static inline int h_watch_pinned(int port, const char *key, uint64_t since_ms, int bound_ms, const char *what,
                                 h_pin_watch *w) {
    uint64_t after = since_ms + PROTO_REPIN_GRACE_MS + 500;
    memset(w, 0, sizeof *w);
    for (uint64_t t0 = mono_ms(); !w->removed && mono_ms() - t0 < (uint64_t)bound_ms; usleep(50 * 1000)) {
        w->removed = h_remove_other(port, key, w->last, sizeof w->last);
        int again = strstr(w->last, "TRYAGAIN") != NULL;
        int pin = again && strstr(w->last, "pinned by a prefix lookup for up to");
        w->by_grace += again && strstr(w->last, "pin again") != NULL;
        w->by_pin += pin;
        if (pin && !w->first_pin_ms) w->first_pin_ms = mono_ms();
        if (pin && mono_ms() > after) break;
    }
    printf("# %s: the pin held %lld ms after the term began; %d removes refused by the grace, %d by the pin; "
           "last: %s\n", what, w->first_pin_ms ? (long long)(w->first_pin_ms - since_ms) : -1LL, w->by_grace,
           w->by_pin, w->last);
    return !w->removed && w->by_pin && mono_ms() > since_ms + PROTO_REPIN_GRACE_MS;
}

/* Until h_port_info(port, section, field) is want, at most timeout_ms
 * (a background step: a sweep, a report, a heartbeat): 0, or -1. */
static inline int h_wait_port_info(int port, const char *section, const char *field, long long want,
                                   int timeout_ms) {
    /* The look that saw want answers: a second look may already see the
     * next change (a restore's drop after a moment at 0), and failed so. */
    for (uint64_t end = mono_ms() + (uint64_t)timeout_ms;; usleep(50 * 1000)) {
        if (h_port_info(port, section, field) == want) return 0;
        if (mono_ms() >= end) return -1;
    }
}

/* Until the node on port has registered (INFO node registrations >= 1):
 * only then does its data plane hold the capability key, a moment after
 * the master lists it alive. 0, or -1 after timeout_ms. */
static inline int h_wait_node_registered(int port, int timeout_ms) {
    redisContext *c = h_redis(port);
    if (!c) return -1;
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    long long n;
    while ((n = h_info_field(c, "node", "registrations")) < 1 && mono_ms() < end) usleep(20 * 1000);
    redisFree(c);
    return n >= 1 ? 0 : -1;
}

/* Until the master lists n nodes alive and each node i (RESP on
 * port0 + 2 * i) has registered: their ids into ids. 0, or -1 after
 * the bounds (a master may hold new nodes for its rejoin grace). */
static inline int h_wait_members(int master_port, int port0, uint32_t *ids, int n) {
    if (h_wait_nodes(master_port, "alive", n, 20000) != 0) return -1;
    for (int i = 0; i < n; i++) {
        if (h_wait_node_registered(port0 + 2 * i, 10000) != 0) return -1;
        ids[i] = (uint32_t)h_port_info(port0 + 2 * i, "node", "node_id");
    }
    return 0;
}

/* Until the master on 127.0.0.1:port (AUTH password unless NULL) has
 * rebuilt its table from the nodes' reports after a restart (INFO cluster
 * rebuild_state:done). 0, or -1 after timeout_ms. */
static inline int h_wait_rebuilt(int port, const char *password, int timeout_ms) {
    redisContext *c = h_redis_auth(port, password);
    if (!c) return -1;
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    int done = 0;
    while (!done && mono_ms() < end) {
        redisReply *r = redisCommand(c, "INFO cluster");
        done = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "rebuild_state:done");
        if (r) freeReplyObject(r);
        if (!done) usleep(20 * 1000);
    }
    redisFree(c);
    return done ? 0 : -1;
}

/* The server binary with role, master and port, a 16MB segment not
 * prefaulted, log level warning (a later --log-level wins); the caller
 * adds what else it wants. */
static inline void h_role_args(h_args *a, const char *role, const char *master, int port) {
    h_arg(a, h_server_bin());
    h_arg(a, "--role");
    h_arg(a, role);
    h_argf(a, "--master=%s", master);
    h_argf(a, "--port=%d", port);
    h_arg(a, "--segment-size");
    h_arg(a, "16MB");
    h_arg(a, "--prefault");
    h_arg(a, "no");
    h_arg(a, "--log-level");
    h_arg(a, "warning");
}

/* mkv_connect to master (host:port) over transport (NULL: the default),
 * replicas per put and timeout_ms when > 0 (else the client's defaults):
 * its result. */
static inline int h_mkv_connect_ms(mkv_client **mc, const char *master, const char *transport, int replicas,
                                   int timeout_ms) {
    mkv_options o;
    mkv_options_init(&o);
    o.master = master;
    if (transport) o.transport = transport;
    if (replicas > 0) o.replicas = replicas;
    if (timeout_ms > 0) o.timeout_ms = timeout_ms;
    return mkv_connect(mc, &o);
}

static inline int h_mkv_connect(mkv_client **mc, const char *master, const char *transport, int replicas) {
    return h_mkv_connect_ms(mc, master, transport, replicas, 0);
}

#define H_BATCH_MAX 1000

/* Objects [first, first+n) of len bytes each, keys "<prefix><i>", batch
 * (at most H_BATCH_MAX) at a time through mc: put from vals + i * len
 * with replicas when back is NULL, else got into back and compared with
 * vals. How many failed to put, or came back missing or not byte-exact
 * (the first three printed). */
static inline int h_batches(mkv_client *mc, const char *prefix, int first, int n, int batch, size_t len,
                            char *vals, char *back, int replicas) {
    if (batch < 1 || batch > H_BATCH_MAX) {
        printf("# h_batches: batch %d outside 1..%d\n", batch, H_BATCH_MAX);
        return n;
    }
    int bad = 0;
    for (int b = first; b < first + n; b += batch) {
        mkv_obj objs[H_BATCH_MAX];
        char keys[H_BATCH_MAX][24];
        int k = first + n - b < batch ? first + n - b : batch;
        char *base = back ? back : vals + (size_t)b * len;
        if (back) memset(back, 0, (size_t)k * len);
        for (int i = 0; i < k; i++) {
            snprintf(keys[i], sizeof keys[i], "%s%d", prefix, b + i);
            objs[i] = (mkv_obj){keys[i], strlen(keys[i]), base + (size_t)i * len, len, 0};
        }
        int rc = back ? mkv_get_batch(mc, objs, (size_t)k) : mkv_put_batch(mc, objs, (size_t)k, replicas);
        for (int i = 0; i < k; i++) {
            int ok = rc == MKV_OK && objs[i].status == MKV_OK &&
                     (!back || (objs[i].len == len &&
                                memcmp(back + (size_t)i * len, vals + (size_t)(b + i) * len, len) == 0));
            if (!ok && back && bad < 3) printf("# %s: rc %d status %d\n", keys[i], rc, objs[i].status);
            bad += !ok;
        }
    }
    return bad;
}

/* $name as a number when it is set and at least min, else dflt (a
 * test's size or length overridden by hand). */
static inline uint64_t h_env_at_least(const char *name, int min, uint64_t dflt) {
    const char *e = getenv(name);
    return e && atoi(e) >= min ? (uint64_t)atoi(e) : dflt;
}

/* Fill buf with a pseudo-random pattern of seed, 8 bytes per step. */
static inline void h_fill(void *buf, size_t len, uint64_t seed) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
    unsigned char *p = buf;
    for (size_t i = 0; i < len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, len - i < 8 ? len - i : 8);
    }
}

/* Flip the byte at off of node process pid's segment through its memfd,
 * opened from /proc as a stray writer would (tests of checksums). */
static inline int h_flip_segment_byte(pid_t pid, uint64_t off) {
    char dir[64], path[320], link[256];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    int done = -1;
    for (struct dirent *de; d && done != 0 && (de = readdir(d));) {
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n <= 0) continue;
        link[n] = '\0';
        if (!strstr(link, "moonkv-segment")) continue;
        int fd = open(path, O_RDWR);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0 || (uint64_t)st.st_size <= off) {
            if (fd >= 0) close(fd);
            continue;
        }
        uint8_t *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (p == MAP_FAILED) continue;
        p[off] ^= 0x5a;
        munmap(p, (size_t)st.st_size);
        done = 0;
    }
    if (d) closedir(d);
    return done;
}

/* ids[k] = the id the master gave the node whose first data address is
 * 127.0.0.1:data_port0 + k, for k < n. 0 when all were found. */
static inline int h_node_ids(int master_port, int data_port0, uint32_t *ids, int n) {
    redisContext *m = h_redis(master_port);
    redisReply *r = m ? redisCommand(m, "MOON.TOPOLOGY") : NULL;
    int found = 0;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *node = r->element[i];
        for (int k = 0; k < n; k++) {
            char want[32];
            snprintf(want, sizeof want, "127.0.0.1:%d", data_port0 + k);
            if (strcmp(node->element[2]->element[0]->str, want) == 0) {
                ids[k] = (uint32_t)node->element[0]->integer;
                found++;
            }
        }
    }
    if (r) freeReplyObject(r);
    if (m) redisFree(m);
    return found == n ? 0 : -1;
}

/* Where byte at of key's replica rep lives (MOON.GET): the index k of
 * its node in ids[0..n) and its segment offset. 0 when found. */
static inline int h_locate_byte(int master_port, const char *key, int rep, uint64_t at, const uint32_t *ids,
                                int n, int *node, uint64_t *seg_off) {
    redisContext *m = h_redis(master_port);
    redisReply *r = m ? redisCommand(m, "MOON.GET %s", key) : NULL;
    int ok = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 && (int)r->element[2]->elements > rep) {
        const redisReply *exts = r->element[2]->element[rep];
        uint64_t pos = 0;
        for (size_t i = 0; i < exts->elements && ok != 0; i++) {
            const redisReply *e = exts->element[i];
            uint64_t len = (uint64_t)e->element[2]->integer;
            if (at >= pos && at < pos + len) {
                for (int k = 0; k < n; k++)
                    if (ids[k] == (uint32_t)e->element[0]->integer) *node = k;
                *seg_off = (uint64_t)e->element[1]->integer + (at - pos);
                ok = 0;
            }
            pos += len;
        }
    }
    if (r) freeReplyObject(r);
    if (m) redisFree(m);
    return ok;
}

#endif
