/* tests/support/harness.c - child processes of the integration tests;
 * see harness.h. */
#include "tests/support/harness.h"   /* support objects build without -Itests */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/sds.h>

#include "core/util.h"
#include "link/master_link.h"

static pid_t h_children[H_MAX_CHILDREN];

void (*h_cleanup_hook)(void);

void h_forget(pid_t pid) {
    for (int i = 0; i < H_MAX_CHILDREN; i++)
        if (h_children[i] == pid) h_children[i] = 0;
}

void h_kill(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    h_forget(pid);
}

void h_kill_all(void) {
    for (int i = 0; i < H_MAX_CHILDREN; i++) h_kill(h_children[i]);
}

/* Every thread of pid is stopped (or gone): 1, 0 if one still runs. */
static int all_threads_stopped(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return 0;
    int stopped = 1;
    struct dirent *e;
    while (stopped && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char stat[128], buf[512];
        snprintf(stat, sizeof stat, "%s/%.32s/stat", path, e->d_name);
        FILE *f = fopen(stat, "r");
        if (!f) continue;   /* the thread exited */
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *st = strrchr(buf, ')');   /* the name in () may hold anything */
        stopped = !st || st[1] != ' ' || strchr("TtZX", st[2]);
    }
    closedir(d);
    return stopped;
}

int h_sigstop(pid_t pid) {
    if (pid <= 0 || kill(pid, SIGSTOP) != 0) return -1;
    uint64_t end = mono_ms() + 10000;
    while (!all_threads_stopped(pid)) {
        if (mono_ms() >= end) return -1;
        usleep(1000);
    }
    return 0;
}

/* Whether pid holds socket inode ino among its fds. */
static int holds_socket(pid_t pid, unsigned long ino) {
    char path[64], want[48], link[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    snprintf(want, sizeof want, "socket:[%lu]", ino);
    DIR *d = opendir(path);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        char fd[300];
        snprintf(fd, sizeof fd, "%s/%.32s", path, e->d_name);
        ssize_t n = readlink(fd, link, sizeof link - 1);
        if (n > 0) {
            link[n] = '\0';
            found = !strcmp(link, want);
        }
    }
    closedir(d);
    return found;
}

unsigned long h_listen_inode(pid_t pid, int port) {
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f) return 0;
    char line[512];
    unsigned long found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned addr, lport, st;
        unsigned long ino;
        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line, " %*d: %8X:%4X %*8X:%*4X %2X %*8X:%*8X %*2X:%*8X %*8X %*u %*d %lu", &addr, &lport, &st,
                   &ino) != 4)
            continue;
        if (lport == (unsigned)port && st == 0x0A && addr == htonl(INADDR_LOOPBACK) && holds_socket(pid, ino))
            found = ino;
    }
    fclose(f);
    return found;
}

void h_stop_all(void) {
    for (int i = 0; i < H_MAX_CHILDREN; i++) h_stop(h_children[i]);
}

int h_raw_connect_to(int port, int rcvbuf, int timeout_s) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    if (timeout_s > 0) {
        struct timeval tv = {timeout_s, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int h_raw_connect(int port, int rcvbuf) { return h_raw_connect_to(port, rcvbuf, 0); }

char *h_metrics(int port) {
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    int fd = h_raw_connect_to(port, 0, 20);
    if (fd < 0 || h_send_all(fd, req, sizeof req - 1) != 0) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    size_t len = 0, cap = 1 << 16;
    char *out = malloc(cap);
    for (ssize_t n; out && (n = read(fd, out + len, cap - 1 - len)) > 0;) {
        len += (size_t)n;
        if (len == cap - 1) out = realloc(out, cap *= 2);
    }
    close(fd);
    if (out) out[len] = '\0';
    return out;
}

long long h_command_calls(int port, const char *name) {
    char *body = h_metrics(port), series[128];
    if (!body || strncmp(body, "HTTP/1.1 200", 12) != 0) {
        free(body);
        return -1;
    }
    snprintf(series, sizeof series, "\nmoonkv_commands_total{cmd=\"%s\"} ", name);
    const char *p = strstr(body, series);
    long long n = p ? atoll(p + strlen(series)) : 0;
    free(body);
    return n;
}

int h_send_all(int fd, const void *p, size_t n) {
    const char *s = p;
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

size_t h_recv_all(int fd, void *p, size_t n) {
    char *d = p;
    size_t got = 0;
    while (got < n) {
        ssize_t k = recv(fd, d + got, n - got, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    return got;
}

void h_setup_or_exit(int rc, const char *what) {
    if (rc >= 0) return;
    printf("not ok - %s\n", what);
    h_stop_all();
    exit(1);
}

int h_wait_exit(pid_t pid, int timeout_ms, int *status) {
    int st = 0;
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    do {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            h_forget(pid);
            if (status) *status = st;
            return 0;
        }
        usleep(10 * 1000);
    } while (mono_ms() < end);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    h_forget(pid);
    if (status) *status = st;
    return -1;
}

int h_stop_status(pid_t pid, int timeout_ms) {
    if (pid <= 0) return -1;
    int status;
    kill(pid, SIGTERM);
    if (h_wait_exit(pid, timeout_ms, &status) != 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void h_stop(pid_t pid) { (void)h_stop_status(pid, 1000); }

static void h_cleanup(void) {
    h_kill_all();
    if (h_cleanup_hook) h_cleanup_hook();
    h_cleanup_hook = NULL;
}

static void h_on_signal(int sig) {
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

void h_init(unsigned limit_s) {
    atexit(h_cleanup);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGALRM, SIGSEGV, SIGABRT, SIGBUS};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], h_on_signal);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(limit_s);
}

const char *h_server_bin(void) {
    const char *bin = getenv("MOONKV_SERVER");
    return bin && access(bin, X_OK) == 0 ? bin : "build/rel/moonkv-server";
}

/* In the child: fd onto path (created or truncated); NULL keeps it. */
static void h_redirect(int fd, const char *path) {
    if (!path) return;
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (f < 0) return;
    dup2(f, fd);
    close(f);
}

/* A node started by a test keeps no segment file unless the test names
 * one (--segment-file) or asks (--segment-persist): tests reuse ports
 * and kill nodes, and a file left in /dev/shm by one would be taken up
 * by the next node on that port (or fill /dev/shm). argv with
 * "--segment-persist no" appended when it is a node's, else argv. */
static const char *const *node_argv(const char *const *argv, const char **room, size_t cap) {
    int node = 0;
    size_t n = 0;
    for (; argv[n]; n++) {
        if (strstr(argv[n], "segment-persist") || strstr(argv[n], "segment-file")) return argv;
        node |= !strcmp(argv[n], "--role=node") || (!strcmp(argv[n], "--role") && argv[n + 1] && !strcmp(argv[n + 1], "node"));
    }
    if (!node || n + 3 > cap) return argv;
    memcpy(room, argv, n * sizeof *room);
    room[n] = "--segment-persist";
    room[n + 1] = "no";
    room[n + 2] = NULL;
    return room;
}

pid_t h_spawn_ex(const char *const *argv, const char *out, const char *err) {
    const char *room[256];
    argv = node_argv(argv, room, sizeof room / sizeof room[0]);
    int slot = 0;
    while (slot < H_MAX_CHILDREN && h_children[slot] != 0) slot++;
    if (slot == H_MAX_CHILDREN) return -1;   /* more than we can track: refuse */
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        /* the same file for both: open it once so the writes interleave */
        if (out && err && strcmp(out, err) == 0) {
            h_redirect(1, out);
            dup2(1, 2);
        } else {
            h_redirect(1, out);
            h_redirect(2, err);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    h_children[slot] = pid;
    return pid;
}

pid_t h_spawn(const char *const *argv) { return h_spawn_ex(argv, NULL, NULL); }

redisContext *h_redis_ms(const char *host, int port, int timeout_ms) {
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(host, port, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    if (c) redisSetTimeout(c, tv);
    return c;
}

void h_redis_room(redisContext *c, size_t bytes) {
    if (!c || !c->reader) return;
    sds buf = sdsMakeRoomFor(c->reader->buf, bytes);
    if (!buf) return;
    c->reader->buf = buf;
    c->reader->maxbuf = 0;   /* 0: never shrunk back when empty */
}

redisContext *h_redis_host(const char *host, int port) { return h_redis_ms(host, port, 5000); }

redisContext *h_redis(int port) { return h_redis_host("127.0.0.1", port); }

int h_master_prove(redisContext *c, const char *secret) {
    char err[256];
    if (!c) return -1;
    if (proto_master_prove(c, secret ? secret : "", err, sizeof err) == PROTO_LINK_OK) return 0;
    printf("# proving the cluster secret: %s\n", err);
    return -1;
}

redisContext *h_proven(redisContext *c, const char *secret) {
    if (c && h_master_prove(c, secret) != 0) {
        redisFree(c);
        return NULL;
    }
    return c;
}

int h_command_is(redisContext *c, int (*pred)(const redisReply *, const char *), const char *want,
                 const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    int yes = pred(r, want);
    if (r) freeReplyObject(r);
    return yes;
}

int h_is_process(redisContext *c, pid_t pid) { return h_info_field(c, "server", "process_id") == (long long)pid; }

/* 1 if c answers PING (after AUTH password, if any) as process pid. */
static int h_answers(redisContext *c, pid_t pid, const char *password) {
    if (password) {
        redisReply *a = redisCommand(c, "AUTH %s", password);
        int authed = a && a->type == REDIS_REPLY_STATUS;
        if (a) freeReplyObject(a);
        if (!authed) return 0;
    }
    redisReply *r = redisCommand(c, "PING");
    int ok = r && r->type == REDIS_REPLY_STATUS && (pid <= 0 || h_is_process(c, pid));
    if (r) freeReplyObject(r);
    return ok;
}

static int h_wait_ping_auth(const char *host, int port, pid_t pid, const char *password, int timeout_ms) {
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    while (mono_ms() < end) {
        redisContext *c = h_redis_host(host, port);
        if (c) {
            int ok = h_answers(c, pid, password);
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

int h_wait_ping(const char *host, int port, pid_t pid, int timeout_ms) {
    return h_wait_ping_auth(host, port, pid, NULL, timeout_ms);
}

pid_t h_ready(pid_t pid, const char *host, int port, const char *password, int timeout_ms) {
    if (pid < 0) return -1;
    if (h_wait_ping_auth(host, port, pid, password, timeout_ms) != 0) {
        h_kill(pid);
        return -1;
    }
    return pid;
}

pid_t h_start(const char *const *argv, int port, const char *out, const char *err, int timeout_ms) {
    return h_ready(h_spawn_ex(argv, out, err), "127.0.0.1", port, NULL, timeout_ms);
}

/* A command line the test cannot build as written: a child started
 * with it would run with other flags than the test meant. */
static void args_broken(const char *why, const char *arg) {
    printf("not ok - h_args: %s: %.80s...\n", why, arg);
    fflush(stdout);
    h_kill_all();
    exit(1);
}

void h_arg(h_args *a, const char *s) {
    if (a->n >= H_MAX_ARGS) args_broken("more than H_MAX_ARGS arguments", s);
    a->v[a->n++] = s;
    a->v[a->n] = NULL;
}

void h_argf(h_args *a, const char *fmt, ...) {
    if (a->n >= H_MAX_ARGS) args_broken("more than H_MAX_ARGS arguments", fmt);
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(a->num[a->n], sizeof a->num[0], fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof a->num[0]) args_broken("an argument of H_ARG_LEN bytes or more", a->num[a->n]);
    h_arg(a, a->num[a->n]);
}

void h_argv(h_args *a, const char *const *list) {
    for (int i = 0; list && list[i]; i++) h_arg(a, list[i]);
}

long h_status_kb(pid_t pid, const char *field) {
    char path[64], line[128];
    size_t n = strlen(field);
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') kb = atol(line + n + 1);
    if (f) fclose(f);
    return kb;
}

long h_rss_kb(pid_t pid) { return h_status_kb(pid, "VmRSS"); }

double h_cpu_s(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');   /* the command name may hold spaces */
    unsigned long long ut, st;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

long long h_info_field(redisContext *c, const char *section, const char *field) {
    redisReply *r = redisCommand(c, "INFO %s", section);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_STRING) {
        char key[64];
        snprintf(key, sizeof key, "\r\n%s:", field);
        const char *p = strstr(r->str, key);
        if (p) v = atoll(p + strlen(key));
    }
    if (r) freeReplyObject(r);
    return v;
}

int h_file_has(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    char line[4096];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
    if (f) fclose(f);
    return found;
}

int h_wait_file_has(const char *path, const char *needle, int timeout_ms) {
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    while (!h_file_has(path, needle) && mono_ms() < end) usleep(50 * 1000);
    return h_file_has(path, needle);
}

int h_temp_dir(char *dir, size_t len, const char *name) {
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(dir, len, "%s/moonkv-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
    if (n < 0 || (size_t)n >= len || !mkdtemp(dir)) {
        if (len) dir[0] = 0;
        return -1;
    }
    return 0;
}

void h_temp_dir_remove(const char *dir, const char *name) {
    char mark[128], cmd[1200];
    snprintf(mark, sizeof mark, "/moonkv-%s-", name);
    if (!dir[0] || !strstr(dir, mark)) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("# cannot remove %s\n", dir);
}
