/* The RESP server core end to end: start-up and its errors, PING,
 * pipelining, protocol errors, maxclients, backpressure, a value cut off
 * mid-stream, SIGTERM. Starts the real binary ($MOONKV_SERVER) on ports
 * 21000-21099. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#define PORT_BASE 21000
#define MAX_CHILDREN 16

static const char *server_bin;
static pid_t children[MAX_CHILDREN];
static int next_port = PORT_BASE;
static char logdir[] = "/tmp/mkv-test-server-core-XXXXXX";

static void kill_children(void) {
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (children[i] > 0) {
            kill(children[i], SIGKILL);
            waitpid(children[i], NULL, 0);
            children[i] = 0;
        }
    }
}

static void on_signal(int sig) {
    kill_children();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void track(pid_t pid) {
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] == 0) {
            children[i] = pid;
            return;
        }
}

static void untrack(pid_t pid) {
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] == pid) children[i] = 0;
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* waitpid with a deadline; -1 on timeout (the child is then killed). */
static int wait_exit(pid_t pid, int timeout_ms, int *status) {
    long long end = now_ms() + timeout_ms;
    while (now_ms() < end) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) {
            untrack(pid);
            return 0;
        }
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, status, 0);
    untrack(pid);
    return -1;
}

/* Runs the server binary with args (NULL-terminated) to completion, output
 * (stdout and stderr) in out. Returns the exit code, -1 if it did not exit. */
static int run_capture(char *out, size_t outlen, const char *const *args) {
    int fds[2];
    if (pipe(fds) < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        const char *argv[32] = {server_bin};
        int n = 1;
        for (; args[n - 1] && n < 31; n++) argv[n] = args[n - 1];
        argv[n] = NULL;
        execv(server_bin, (char **)argv);
        _exit(127);
    }
    track(pid);
    close(fds[1]);
    size_t len = 0;
    struct pollfd pfd = {fds[0], POLLIN, 0};
    long long end = now_ms() + 10000;
    while (now_ms() < end && poll(&pfd, 1, 100) >= 0) {
        if (!(pfd.revents & (POLLIN | POLLHUP))) continue;
        ssize_t r = read(fds[0], out + len, outlen - 1 - len);
        if (r <= 0) break;
        len += (size_t)r;
        if (len == outlen - 1) break;
    }
    out[len] = '\0';
    close(fds[0]);
    int status;
    if (wait_exit(pid, 5000, &status) < 0 || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

typedef struct test_server {
    pid_t pid;
    int port;
    char log[256];
} test_server;

static redisContext *connect_to(int port) {
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    if (c) redisSetTimeout(c, tv);
    return c;
}

/* Starts a server on the next port with extra flags (NULL-terminated);
 * returns 0 once it answers PING. */
static int start_server(test_server *s, const char *const *extra) {
    s->port = next_port++;
    snprintf(s->log, sizeof s->log, "%s/server-%d.log", logdir, s->port);
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        const char *argv[32] = {server_bin, "--bind", "127.0.0.1", "--port", port,
                                "--segment-size", "64MB"};
        int n = 7;
        for (int i = 0; extra && extra[i] && n < 31; i++) argv[n++] = extra[i];
        argv[n] = NULL;
        execv(server_bin, (char **)argv);
        _exit(127);
    }
    s->pid = pid;
    track(pid);
    long long end = now_ms() + 10000;
    while (now_ms() < end) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            untrack(pid);
            s->pid = 0;
            return -1;
        }
        redisContext *c = connect_to(s->port);
        if (c) {
            redisReply *r = redisCommand(c, "PING");
            int ok = r && r->type == REDIS_REPLY_STATUS;
            freeReplyObject(r);
            redisFree(c);
            if (ok) return 0;
        }
        usleep(20000);
    }
    return -1;
}

/* SIGTERM and wait (SIGKILL after 5 s); the exit code, -1 if killed.
 * Under ASan a leak or memory error makes the exit code non-zero. */
static int stop_server(test_server *s) {
    if (s->pid <= 0) return -1;
    int status;
    kill(s->pid, SIGTERM);
    int rc = wait_exit(s->pid, 5000, &status);
    s->pid = 0;
    return rc == 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int file_contains(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* A plain TCP socket, for bytes hiredis would never send. */
static int raw_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static int send_all(int fd, const void *p, size_t n) {
    const char *s = p;
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads until EOF (or len-1 bytes, or the 5 s timeout). Returns bytes. */
static size_t read_until_eof(int fd, char *buf, size_t len, int *saw_eof) {
    size_t got = 0;
    *saw_eof = 0;
    while (got < len - 1) {
        ssize_t r = recv(fd, buf + got, len - 1 - got, 0);
        if (r == 0) {
            *saw_eof = 1;
            break;
        }
        if (r < 0) break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    return got;
}

/* ---- Start-up ------------------------------------------------------------ */

static void test_version(void) {
    char out[4096];
    const char *args[] = {"--version", NULL};
    ASSERT_EQ(run_capture(out, sizeof out, args), 0);
    ASSERT(strcmp(out, "moonkv-server v" MOONKV_VERSION "\n") == 0);
}

static void test_help_lists_flags(void) {
    char out[16384];
    const char *args[] = {"--help", NULL};
    ASSERT_EQ(run_capture(out, sizeof out, args), 0);
    const char *flags[] = {"--config", "--role", "--bind", "--port", "--requirepass", "--segment-size",
                           "--log-level", "--master", "--replicas", "--data-addrs", "--transport",
                           "--cluster-secret", "--heartbeat-ms", "--maxclients", "--version"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        ASSERT_MSG(strstr(out, flags[i]) != NULL, "--help does not list %s", flags[i]);
}

static void test_bad_config_exits_1(void) {
    char out[4096], path[300];
    snprintf(path, sizeof path, "%s/bad.json", logdir);
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fputs("{\"port\": 7379, \"colour\": \"blue\"}", f);
    fclose(f);
    const char *a1[] = {"--config", path, NULL};
    ASSERT_EQ(run_capture(out, sizeof out, a1), 1);
    ASSERT(strstr(out, "unknown key 'colour'") != NULL);
    ASSERT(strchr(out, '\n') == out + strlen(out) - 1);   /* one message, one line */

    const char *a2[] = {"--port", "many", NULL};
    ASSERT_EQ(run_capture(out, sizeof out, a2), 1);
    ASSERT(strcmp(out, "config error: '--port' must be an integer\n") == 0);

    const char *a3[] = {"--config", "/nonexistent/x.json", NULL};
    ASSERT_EQ(run_capture(out, sizeof out, a3), 1);
    ASSERT(strstr(out, "cannot read '/nonexistent/x.json'") != NULL);

    const char *a4[] = {"--segment-size", "huge", NULL};
    ASSERT_EQ(run_capture(out, sizeof out, a4), 1);
    ASSERT(strstr(out, "'--segment-size' must be a size") != NULL);

    f = fopen(path, "w");
    ASSERT(f != NULL);
    fputs("{\"port\": 7379,,}", f);
    fclose(f);
    ASSERT_EQ(run_capture(out, sizeof out, a1), 1);
    ASSERT(strstr(out, "invalid JSON at line 1 column") != NULL);
}

static void test_port_in_use_exits_1(void) {
    test_server s;
    ASSERT_EQ(start_server(&s, NULL), 0);
    char out[4096], port[16];
    snprintf(port, sizeof port, "%d", s.port);
    const char *args[] = {"--port", port, "--segment-size", "64MB", NULL};
    int rc = run_capture(out, sizeof out, args);
    stop_server(&s);
    ASSERT_EQ(rc, 1);
    ASSERT(strstr(out, "cannot listen on 127.0.0.1") != NULL);
}

/* ---- Serving ------------------------------------------------------------- */

static test_server srv;   /* shared by the cases below */

static void test_ping_and_ready_line(void) {
    char line[128];
    snprintf(line, sizeof line, "Ready to accept connections tcp 127.0.0.1:%d", srv.port);
    ASSERT(file_contains(srv.log, line));
    redisContext *c = connect_to(srv.port);
    ASSERT(c != NULL);
    redisReply *r = redisCommand(c, "PING");
    ASSERT(r && r->type == REDIS_REPLY_STATUS);
    ASSERT_STREQ(r->str, "PONG");
    freeReplyObject(r);
    redisFree(c);
}

static void test_pipeline_10k(void) {
    redisContext *c = connect_to(srv.port);
    ASSERT(c != NULL);
    for (int i = 0; i < 10000; i++) redisAppendCommand(c, "ECHO %d", i);
    int good = 0;
    for (int i = 0; i < 10000; i++) {
        redisReply *r;
        if (redisGetReply(c, (void **)&r) != REDIS_OK) break;
        char want[16];
        snprintf(want, sizeof want, "%d", i);
        if (r->type == REDIS_REPLY_STRING && strcmp(r->str, want) == 0) good++;
        freeReplyObject(r);
    }
    redisFree(c);
    ASSERT_EQ(good, 10000);
}

static void test_protocol_error_closes_only_that_client(void) {
    redisContext *other = connect_to(srv.port);
    ASSERT(other != NULL);
    int fd = raw_connect(srv.port);
    ASSERT(fd >= 0);
    const char bad[] = "*1\r\n$abc\r\nPING\r\n";
    ASSERT_EQ(send_all(fd, bad, sizeof bad - 1), 0);
    char buf[512];
    int eof;
    read_until_eof(fd, buf, sizeof buf, &eof);
    close(fd);
    ASSERT_MSG(strncmp(buf, "-ERR Protocol error", 19) == 0, "got '%.100s'", buf);
    ASSERT(eof);
    redisReply *r = redisCommand(other, "PING");
    ASSERT(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(other);
}

static void test_inline_and_split_commands(void) {
    int fd = raw_connect(srv.port);
    ASSERT(fd >= 0);
    /* One command split at every byte, then an inline one. */
    const char cmd[] = "*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\nPING\r\n";
    for (size_t i = 0; i < sizeof cmd - 1; i++) {
        ASSERT_EQ(send_all(fd, cmd + i, 1), 0);
        usleep(200);
    }
    char buf[256];
    size_t got = 0;
    const char want[] = "$5\r\nhello\r\n+PONG\r\n";
    while (got < sizeof want - 1) {
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r <= 0) break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    close(fd);
    ASSERT_STREQ(buf, want);
}

static void test_big_value_roundtrip(void) {
    redisContext *c = connect_to(srv.port);
    ASSERT(c != NULL);
    size_t n = 3 * 1024 * 1024 + 7;
    char *v = malloc(n);
    for (size_t i = 0; i < n; i++) v[i] = (char)(i * 31 + 7);
    redisReply *r = redisCommand(c, "SET big %b", v, n);
    int set_ok = r && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    r = redisCommand(c, "GET big");
    int get_ok = r && r->type == REDIS_REPLY_STRING && r->len == n && memcmp(r->str, v, n) == 0;
    freeReplyObject(r);
    free(v);
    redisFree(c);
    ASSERT(set_ok);
    ASSERT(get_ok);
}

/* A client that pipelines GETs of a large value and reads nothing for a
 * while is throttled, and still gets every reply, in order, once it reads. */
static void test_backpressure_keeps_order(void) {
    redisContext *c = connect_to(srv.port);
    ASSERT(c != NULL);
    size_t n = 256 * 1024;
    char *v = malloc(n);
    memset(v, 'b', n);
    redisReply *r = redisCommand(c, "SET bp %b", v, n);
    int set_ok = r && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    ASSERT(set_ok);
    for (int i = 0; i < 200; i++) {
        redisAppendCommand(c, "GET bp");
        redisAppendCommand(c, "ECHO %d", i);
    }
    /* Push the requests out without reading any reply. */
    int done = 0;
    while (!done)
        if (redisBufferWrite(c, &done) != REDIS_OK) break;
    usleep(300000);
    int good = 0;
    for (int i = 0; i < 200; i++) {
        char want[16];
        snprintf(want, sizeof want, "%d", i);
        if (redisGetReply(c, (void **)&r) != REDIS_OK) break;
        int g = r->type == REDIS_REPLY_STRING && r->len == n && r->str[n - 1] == 'b';
        freeReplyObject(r);
        if (redisGetReply(c, (void **)&r) != REDIS_OK) break;
        if (g && r->type == REDIS_REPLY_STRING && strcmp(r->str, want) == 0) good++;
        freeReplyObject(r);
    }
    free(v);
    redisFree(c);
    ASSERT_EQ(good, 200);
}

/* A SET whose value never fully arrives leaves nothing behind. */
static void test_disconnect_mid_value_leaves_no_key(void) {
    int fd = raw_connect(srv.port);
    ASSERT(fd >= 0);
    const char hdr[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1000000\r\n";
    ASSERT_EQ(send_all(fd, hdr, sizeof hdr - 1), 0);
    char part[300000];
    memset(part, 'x', sizeof part);
    ASSERT_EQ(send_all(fd, part, sizeof part), 0);
    usleep(100000);
    close(fd);
    usleep(100000);

    redisContext *c = connect_to(srv.port);
    ASSERT(c != NULL);
    redisReply *r = redisCommand(c, "EXISTS k");
    long long exists = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    r = redisCommand(c, "GET k");
    int nil = r && r->type == REDIS_REPLY_NIL;
    freeReplyObject(r);
    /* The key is free again: a full SET of it now succeeds. */
    r = redisCommand(c, "SET k %b", part, sizeof part);
    int set_ok = r && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    redisFree(c);
    ASSERT_EQ(exists, 0);
    ASSERT(nil);
    ASSERT(set_ok);
}

/* After all the traffic above (pipelines, protocol errors, aborted
 * values) the server still shuts down cleanly: exit 0, and under ASan no
 * leak. */
static void test_clean_exit_after_traffic(void) {
    ASSERT_EQ(stop_server(&srv), 0);
    ASSERT(file_contains(srv.log, "moonkv is now ready to exit, bye bye"));
}

static void test_maxclients(void) {
    test_server s;
    const char *extra[] = {"--maxclients", "2", NULL};
    ASSERT_EQ(start_server(&s, extra), 0);
    usleep(50000);   /* let the probe connection of start_server close */
    redisContext *a = connect_to(s.port), *b = connect_to(s.port);
    redisReply *r = a ? redisCommand(a, "PING") : NULL;
    int a_ok = r && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    int fd = raw_connect(s.port);
    char buf[256] = "";
    int eof = 0;
    if (fd >= 0) {
        read_until_eof(fd, buf, sizeof buf, &eof);
        close(fd);
    }
    r = b ? redisCommand(b, "PING") : NULL;
    int b_ok = r && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    redisFree(a);
    redisFree(b);
    stop_server(&s);
    ASSERT(a_ok);
    ASSERT(b_ok);
    ASSERT_STREQ(buf, "-ERR max number of clients reached\r\n");
    ASSERT(eof);
}

static void test_sigterm_exits_0(void) {
    test_server s;
    ASSERT_EQ(start_server(&s, NULL), 0);
    /* A connected client and a half-sent value must not hold shutdown up. */
    redisContext *c = connect_to(s.port);
    int fd = raw_connect(s.port);
    const char hdr[] = "*3\r\n$3\r\nSET\r\n$1\r\nq\r\n$100000\r\nabc";
    if (fd >= 0) send_all(fd, hdr, sizeof hdr - 1);
    usleep(50000);
    long long t0 = now_ms();
    kill(s.pid, SIGTERM);
    int status;
    int rc = wait_exit(s.pid, 5000, &status);
    s.pid = 0;
    long long took = now_ms() - t0;
    redisFree(c);
    if (fd >= 0) close(fd);
    ASSERT_EQ(rc, 0);
    ASSERT(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
    ASSERT_MSG(took < 3000, "shutdown took %lld ms", took);
    ASSERT(file_contains(s.log, "moonkv is now ready to exit, bye bye"));
}

int main(void) {
    server_bin = getenv("MOONKV_SERVER");
    if (!server_bin || access(server_bin, X_OK) != 0) server_bin = "build/rel/moonkv-server";
    if (!mkdtemp(logdir)) return 1;
    atexit(kill_children);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);

    RUN_TEST(test_version);
    RUN_TEST(test_help_lists_flags);
    RUN_TEST(test_bad_config_exits_1);
    RUN_TEST(test_port_in_use_exits_1);

    if (start_server(&srv, NULL) == 0) {
        RUN_TEST(test_ping_and_ready_line);
        RUN_TEST(test_pipeline_10k);
        RUN_TEST(test_protocol_error_closes_only_that_client);
        RUN_TEST(test_inline_and_split_commands);
        RUN_TEST(test_big_value_roundtrip);
        RUN_TEST(test_backpressure_keeps_order);
        RUN_TEST(test_disconnect_mid_value_leaves_no_key);
        RUN_TEST(test_clean_exit_after_traffic);
    } else {
        printf("not ok - start_server: the server did not start (log in %s)\n", srv.log);
        test_failed_cases++;
    }
    RUN_TEST(test_maxclients);
    RUN_TEST(test_sigterm_exits_0);

    kill_children();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", logdir);
    if (!test_failed_cases && system(cmd) != 0) return 1;
    TEST_EXIT();
}
