/* tests/integration/cluster_harness.h - starting a master and memory
 * nodes as child processes for the libmoonkv tests (test_client,
 * test_cluster, test_netns). Every child is recorded so that every exit
 * path - normal return, failed ASSERT, a signal, the global alarm -
 * kills it: nothing outlives the test binary. */
#ifndef MKV_CLUSTER_HARNESS_H
#define MKV_CLUSTER_HARNESS_H

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/util.h"

#define H_MAX_CHILDREN 32
#define H_MAX_ARGS     48

static pid_t h_children[H_MAX_CHILDREN];

static inline void h_forget(pid_t pid) {
    for (int i = 0; i < H_MAX_CHILDREN; i++)
        if (h_children[i] == pid) h_children[i] = 0;
}

/* SIGKILL and reap one child. */
static inline void h_kill(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    h_forget(pid);
}

/* SIGTERM, then SIGKILL if it has not gone within a second. */
static inline void h_stop(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            h_forget(pid);
            return;
        }
        usleep(10 * 1000);
    }
    h_kill(pid);
}

static inline void h_kill_all(void) {
    for (int i = 0; i < H_MAX_CHILDREN; i++) h_kill(h_children[i]);
}

/* Runs after the children are gone, on exit and on fatal signals (where
 * it need not be async-signal-safe: the process is going away and what
 * it removes, such as a network namespace, would outlive it). */
static void (*h_cleanup_hook)(void);

static inline void h_cleanup(void) {
    h_kill_all();
    if (h_cleanup_hook) h_cleanup_hook();
    h_cleanup_hook = NULL;
}

static inline void h_on_signal(int sig) {
    /* async-signal-safe: kill only, the kernel reaps after _exit */
    for (int i = 0; i < H_MAX_CHILDREN; i++)
        if (h_children[i] > 0) kill(h_children[i], SIGKILL);
    if (sig == SIGALRM) {
        static const char msg[] = "not ok - time limit of the test binary reached\n";
        ssize_t w = write(1, msg, sizeof msg - 1);
        (void)w;
    }
    if (h_cleanup_hook) h_cleanup_hook();
    _exit(128 + sig);
}

/* Kill children on exit and on fatal signals; bound the whole binary. */
static inline void h_init(unsigned limit_s) {
    atexit(h_cleanup);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGALRM, SIGSEGV, SIGABRT, SIGBUS};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], h_on_signal);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(limit_s);
}

static inline const char *h_server_bin(void) {
    const char *bin = getenv("MOONKV_SERVER");
    return bin ? bin : "build/rel/moonkv-server";
}

/* Fork and exec argv (argv[0] is the program); NULL-terminated. A
 * non-NULL prefix (e.g. "ip netns exec NS") is put in front. */
static inline pid_t h_spawn(const char *const *argv) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < H_MAX_CHILDREN; i++)
        if (h_children[i] == 0) {
            h_children[i] = pid;
            return pid;
        }
    h_kill(pid);   /* more children than we can track: refuse */
    return -1;
}

static inline redisContext *h_redis_host(const char *host, int port) {
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout(host, port, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    if (c) redisSetTimeout(c, tv);
    return c;
}

static inline redisContext *h_redis(int port) { return h_redis_host("127.0.0.1", port); }

/* 1 if the server on c is process pid (INFO's process_id): a server
 * left over from another run on the same port must not pass for ours. */
static inline int h_is_process(redisContext *c, pid_t pid) {
    redisReply *r = redisCommand(c, "INFO server");
    const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "process_id:") : NULL;
    int yes = p && atol(p + 11) == (long)pid;
    if (r) freeReplyObject(r);
    return yes;
}

/* Until our child pid (or, pid 0, anything) answers PING at host:port,
 * or it died; bounded. */
static inline int h_wait_ping(const char *host, int port, pid_t pid, int timeout_ms) {
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    while (mono_ms() < end) {
        redisContext *c = h_redis_host(host, port);
        if (c) {
            redisReply *r = redisCommand(c, "PING");
            int ok = r && r->type == REDIS_REPLY_STATUS && (pid <= 0 || h_is_process(c, pid));
            if (r) freeReplyObject(r);
            redisFree(c);
            if (ok) return 0;
        }
        if (pid > 0 && waitpid(pid, NULL, WNOHANG) == pid) {
            h_forget(pid);
            return -1;
        }
        usleep(50 * 1000);
    }
    return -1;
}

/* argv builder */
typedef struct h_args {
    int n;
    const char *v[H_MAX_ARGS + 1];
    char num[H_MAX_ARGS][64];
} h_args;

static inline void h_arg(h_args *a, const char *s) {
    if (a->n < H_MAX_ARGS) a->v[a->n++] = s;
    a->v[a->n] = NULL;
}

static inline void h_argf(h_args *a, const char *fmt, ...) {
    if (a->n >= H_MAX_ARGS) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->num[a->n], sizeof a->num[0], fmt, ap);
    va_end(ap);
    h_arg(a, a->num[a->n]);
}

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
    for (int i = 0; extra && extra[i]; i++) h_arg(&a, extra[i]);
    pid_t pid = h_spawn(a.v);
    if (pid < 0) return -1;
    if (h_wait_ping(bind, port, pid, 20000) != 0) {
        h_kill(pid);
        return -1;
    }
    return pid;
}

static inline pid_t h_start_master(int port, const char *const *extra) {
    return h_start_master_on("127.0.0.1", port, extra);
}

/* A node of master_port: RESP on port, data plane on data_port. prefix
 * (NULL-terminated, may be NULL) runs it under e.g. "ip netns exec NS". */
static inline pid_t h_start_node_ex(const char *const *prefix, const char *master, const char *bind,
                             int port, int data_port, const char *segment) {
    h_args a = {0};
    for (int i = 0; prefix && prefix[i]; i++) h_arg(&a, prefix[i]);
    h_arg(&a, h_server_bin());
    h_arg(&a, "--role");
    h_arg(&a, "node");
    h_arg(&a, "--master");
    h_arg(&a, master);
    h_arg(&a, "--bind");
    h_arg(&a, bind);
    h_argf(&a, "--port=%d", port);
    h_arg(&a, "--segment-size");
    h_arg(&a, segment);
    h_argf(&a, "--data-addrs=%s:%d", bind, data_port);
    h_arg(&a, "--prefault");
    h_arg(&a, "no");
    h_arg(&a, "--log-level");
    h_arg(&a, "warning");
    return h_spawn(a.v);
}

static inline pid_t h_start_node(int master_port, int port, int data_port, const char *segment) {
    char master[32];
    snprintf(master, sizeof master, "127.0.0.1:%d", master_port);
    return h_start_node_ex(NULL, master, "127.0.0.1", port, data_port, segment);
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

#endif
