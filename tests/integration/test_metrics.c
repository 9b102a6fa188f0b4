/* tests/integration/test_metrics.c - /metrics on every role: standalone,
 * a master, two memory nodes and a gateway run with --metrics-port; the
 * test sends known commands, scrapes, and checks that the counters moved
 * by exactly what was sent, that `promtool check metrics` finds nothing
 * wrong with any scrape, that every metric conf/grafana-dashboard.json
 * queries exists in some role's scrape, and that bad HTTP input gets an
 * error (or a closed connection) while the server keeps serving.
 * Ports: one block of h_free_ports, taken first in main(). */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/util.h"
#include "test.h"
#include "cluster_harness.h"

static int port0;
#define SA_PORT        (port0 + 0)
#define SA_METRICS     (port0 + 1)
#define MASTER_PORT    (port0 + 2)
#define MASTER_METRICS (port0 + 3)
#define NODE_PORT      (port0 + 4)   /* + i; data plane NODE_PORT + 10 + i, metrics + 20 + i */
#define NODES          2
#define GW_PORT        (port0 + 6)
#define GW_METRICS     (port0 + 7)
#define PLAIN_PORT     (port0 + 8)   /* a standalone without --metrics-port */
#define TIME_LIMIT_S   90
#define BIG            (100 * 1024)   /* a value in the 64KiB-1MiB size class */
#define DASHBOARD      "conf/grafana-dashboard.json"

/* ---- HTTP and scrapes ---- */

/* A scrape's connection: reads give up after 8 s. */
static int http_connect(int port) { return h_raw_connect_to(port, 0, 8); }

/* Everything the server sends until it closes (NUL terminated, malloc'd);
 * NULL if the connect fails. */
static char *read_all(int fd) {
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ssize_t n;
    while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (cap - len < 4096) buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    return buf;
}

static char *http_raw(int port, const char *req, size_t len) {
    int fd = http_connect(port);
    if (fd < 0) return NULL;
    if (len && write(fd, req, len) != (ssize_t)len) { /* the reply tells */ }
    char *resp = read_all(fd);
    close(fd);
    return resp;
}

static int http_status(const char *resp) {
    int st = -1;
    if (resp && sscanf(resp, "HTTP/1.1 %d", &st) != 1) st = -1;
    return st;
}

/* The body of a 200 GET /metrics, or NULL. */
static char *scrape(int port) {
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    char *resp = http_raw(port, req, sizeof req - 1);
    char *body = resp ? strstr(resp, "\r\n\r\n") : NULL;
    if (http_status(resp) != 200 || !body) {
        free(resp);
        return NULL;
    }
    char *out = strdup(body + 4);
    free(resp);
    return out;
}

/* The value of one series ("name" or "name{labels}" exactly as written),
 * NAN if absent. */
static double sample(const char *text, const char *series) {
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, series, n) == 0 && p[n] == ' ') return strtod(p + n + 1, NULL);
    return NAN;
}

/* 1 if some sample line's metric name is name. */
static int has_metric(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (*p != '#' && strncmp(p, name, n) == 0 && (p[n] == ' ' || p[n] == '{')) return 1;
    return 0;
}

/* promtool's verdict: 1 when it exits 0 and reports nothing. */
static int promtool_ok(const char *text, char *why, size_t whylen) {
    char path[] = "/tmp/moonkv-metrics-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 0;
    size_t len = strlen(text);
    int wrote = write(fd, text, len) == (ssize_t)len;
    close(fd);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "/usr/bin/promtool check metrics < %s 2>&1", path);
    FILE *p = wrote ? popen(cmd, "r") : NULL;
    size_t got = p ? fread(why, 1, whylen - 1, p) : 0;
    why[got] = '\0';
    int rc = p ? pclose(p) : -1;
    unlink(path);
    if (rc != 0 && got == 0) snprintf(why, whylen, "promtool missing or failed (status %d)", rc);
    return rc == 0 && got == 0;
}

#define ASSERT_PROMTOOL(text) do { char _why[2048]; \
    ASSERT_MSG(promtool_ok((text), _why, sizeof _why), "promtool: %.400s", _why); } while (0)

/* ---- Children ---- */

static pid_t start_role(const char *role, int port, int metrics_port, const char *const *extra) {
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_arg(&a, "--role");
    h_arg(&a, role);
    h_argf(&a, "--port=%d", port);
    h_argf(&a, "--metrics-port=%d", metrics_port);
    h_arg(&a, "--log-level");
    h_arg(&a, "warning");
    h_argv(&a, extra);
    return h_spawn(a.v);
}

static char *scrapes[4 + NODES];   /* last scrape of each process, for the dashboard */
static int nscrapes;

static void keep_scrape(char *text) { scrapes[nscrapes++] = text; }

/* ---- Cases ---- */

static char big[BIG];
static char disk_dir[256];
static pid_t sa_pid;

static void standalone_counts(void) {
    redisContext *c = h_redis(SA_PORT);
    ASSERT(c);
    char *before = scrape(SA_METRICS);
    ASSERT(before);
    ASSERT_PROMTOOL(before);
    double set0 = sample(before, "moonkv_commands_total{cmd=\"set\"}");
    double get0 = sample(before, "moonkv_commands_total{cmd=\"get\"}");
    double in0 = sample(before, "moonkv_net_input_bytes_total");
    double bigset0 = sample(before, "moonkv_command_duration_seconds_count{cmd=\"set\",size=\"64KiB-1MiB\"}");
    free(before);

    for (int i = 0; i < 6; i++) freeReplyObject(redisCommand(c, "SET small:%d v%d", i, i));
    freeReplyObject(redisCommand(c, "SET big %b", big, (size_t)BIG));
    for (int i = 0; i < 4; i++) freeReplyObject(redisCommand(c, "GET small:%d", i));
    freeReplyObject(redisCommand(c, "GET big"));
    freeReplyObject(redisCommand(c, "GET missing"));
    redisFree(c);

    char *after = scrape(SA_METRICS);
    ASSERT(after);
    ASSERT_PROMTOOL(after);
    /* Absent before the first SET: the series starts at its first call. */
    ASSERT_EQ(sample(after, "moonkv_commands_total{cmd=\"set\"}") - (isnan(set0) ? 0 : set0), 7);
    ASSERT_EQ(sample(after, "moonkv_commands_total{cmd=\"get\"}") - (isnan(get0) ? 0 : get0), 6);
    ASSERT_EQ(sample(after, "moonkv_command_duration_seconds_count{cmd=\"set\",size=\"64KiB-1MiB\"}") -
                  (isnan(bigset0) ? 0 : bigset0), 1);
    ASSERT_EQ(sample(after, "moonkv_command_duration_seconds_count{cmd=\"get\",size=\"64KiB-1MiB\"}"), 1);
    ASSERT_EQ(sample(after, "moonkv_command_duration_seconds_bucket{cmd=\"get\",size=\"0-4KiB\",le=\"+Inf\"}"), 5);
    ASSERT(sample(after, "moonkv_net_input_bytes_total") - in0 > BIG);
    ASSERT_EQ(sample(after, "moonkv_objects{state=\"complete\"}"), 7);
    ASSERT(sample(after, "moonkv_segment_used_bytes") >= BIG);
    ASSERT(sample(after, "moonkv_keyspace_lookups_total{result=\"miss\"}") >= 1);
    ASSERT(!isnan(sample(after, "moonkv_segment_fragmentation_ratio")));
    ASSERT_EQ(sample(after, "moonkv_conflicts_kept_total"), 0);   /* on_conflict error */
    ASSERT_EQ(sample(after, "moonkv_evicted_keys_total"), 0);     /* noeviction */
    ASSERT_EQ(sample(after, "moonkv_info{role=\"standalone\",version=\"0.1.0\"}"), 1);
    keep_scrape(after);
}

static void http_errors(void) {
    static const char notfound[] = "GET /nope HTTP/1.1\r\n\r\n";
    static const char post[] = "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
    static const char garbage[] = "\x01\x02 garbage\r\n\r\n";
    static const char head[] = "HEAD /metrics HTTP/1.0\r\n\r\n";
    static const char query[] = "GET /metrics?x=1 HTTP/1.1\r\n\r\n";
    char *r = http_raw(SA_METRICS, notfound, sizeof notfound - 1);
    ASSERT_EQ(http_status(r), 404);
    free(r);
    r = http_raw(SA_METRICS, post, sizeof post - 1);
    ASSERT_EQ(http_status(r), 405);
    free(r);
    r = http_raw(SA_METRICS, garbage, sizeof garbage - 1);
    ASSERT_EQ(http_status(r), 400);
    free(r);
    r = http_raw(SA_METRICS, head, sizeof head - 1);
    ASSERT_EQ(http_status(r), 200);
    ASSERT(strstr(r, "\r\n\r\n") && strstr(r, "\r\n\r\n")[4] == '\0');   /* no body */
    free(r);
    r = http_raw(SA_METRICS, query, sizeof query - 1);
    ASSERT_EQ(http_status(r), 200);
    free(r);
    char huge[9000];
    memset(huge, 'A', sizeof huge);
    memcpy(huge, "GET /", 5);
    r = http_raw(SA_METRICS, huge, sizeof huge);
    ASSERT_EQ(http_status(r), 431);
    free(r);
    /* A request in two pieces is still one request. */
    int fd = http_connect(SA_METRICS);
    ASSERT(fd >= 0);
    ASSERT(write(fd, "GET /metr", 9) == 9);
    usleep(50 * 1000);
    ASSERT(write(fd, "ics HTTP/1.1\r\n\r\n", 16) == 16);
    r = read_all(fd);
    close(fd);
    ASSERT_EQ(http_status(r), 200);
    free(r);
    redisContext *c = h_redis(SA_PORT);
    ASSERT(c);
    redisReply *p = redisCommand(c, "PING");
    ASSERT(p && p->type == REDIS_REPLY_STATUS);
    freeReplyObject(p);
    redisFree(c);
}

/* Idle and dripping connections beyond the cap of 16 push out the oldest
 * (the cap used to refuse every new connection, so 16 of them made every
 * scrape an empty reply); each is cut at the request deadline at the
 * latest; scrapes are answered throughout. */
#define IDLE   12
#define DRIP   8
static void http_idle_limits(void) {
    static const char partial[] = "GET /metrics HTTP/1.1\r\nX-Never-Ends: ";
    int fds[IDLE + DRIP];
    for (int i = 0; i < IDLE + DRIP; i++) ASSERT((fds[i] = http_connect(SA_METRICS)) >= 0);
    for (int round = 0; round < 10; round++) {
        for (int i = IDLE; i < IDLE + DRIP; i++)   /* a byte each per 100 ms, never a whole request */
            (void)send(fds[i], partial + round, 1, MSG_NOSIGNAL);
        usleep(100 * 1000);
        char *text = scrape(SA_METRICS);
        ASSERT_MSG(text, "scrape %d: no 200 reply", round);
        ASSERT(has_metric(text, "moonkv_info"));
        free(text);
    }
    /* Pushed out or timed out, every one is closed by the server. */
    for (int i = 0; i < IDLE + DRIP; i++) {
        char byte;
        ssize_t n = read(fds[i], &byte, 1);
        ASSERT_MSG(n == 0 || (n < 0 && errno == ECONNRESET), "connection %d: read %zd (%s)", i, n,
                   n < 0 ? strerror(errno) : "");
        close(fds[i]);
    }
    int fd = http_connect(SA_METRICS);
    ASSERT(fd >= 0);
    uint64_t t0 = mono_ms();
    char byte;
    ASSERT_EQ(read(fd, &byte, 1), 0);   /* the deadline closes a lone idle one */
    uint64_t waited = mono_ms() - t0;
    ASSERT_MSG(waited >= 3000 && waited < 7500, "closed after %llu ms", (unsigned long long)waited);
    close(fd);
    char *text = scrape(SA_METRICS);
    ASSERT(text);
    free(text);
}

static void cluster_counts(void) {
    redisContext *gw = h_redis(GW_PORT);
    ASSERT(gw);
    char *before = scrape(GW_METRICS);
    ASSERT(before);
    double set0 = sample(before, "moonkv_commands_total{cmd=\"set\"}");
    double put0 = sample(before, "moonkv_gateway_cluster_ops_total{op=\"put\"}");
    free(before);
    for (int i = 0; i < 3; i++) {
        redisReply *r = redisCommand(gw, "SET gw:%d %b", i, big, (size_t)BIG);
        ASSERT(r && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    for (int i = 0; i < 2; i++) {
        redisReply *r = redisCommand(gw, "GET gw:%d", i);
        ASSERT(r && r->type == REDIS_REPLY_STRING && r->len == BIG);
        freeReplyObject(r);
    }
    redisFree(gw);

    /* The first GET also lends the gateway's inline-read client to a
     * worker to dial its same-host paths (read_batch.c): a job that may
     * outlive the replies. Wait for it, bounded. */
    char *g = scrape(GW_METRICS);
    for (uint64_t t0 = mono_ms(); g && sample(g, "moonkv_gateway_jobs_inflight") != 0 && mono_ms() - t0 < 10000;) {
        free(g);
        usleep(50 * 1000);
        g = scrape(GW_METRICS);
    }
    ASSERT(g);
    ASSERT_PROMTOOL(g);
    ASSERT_EQ(sample(g, "moonkv_commands_total{cmd=\"set\"}") - (isnan(set0) ? 0 : set0), 3);
    ASSERT_EQ(sample(g, "moonkv_commands_total{cmd=\"get\"}"), 2);
    /* GET blocks on a worker: measured at unblock, sized by its reply. */
    ASSERT_EQ(sample(g, "moonkv_command_duration_seconds_count{cmd=\"get\",size=\"64KiB-1MiB\"}"), 2);
    ASSERT_EQ(sample(g, "moonkv_gateway_cluster_ops_total{op=\"put\"}") - (isnan(put0) ? 0 : put0), 3);
    ASSERT_EQ(sample(g, "moonkv_gateway_jobs_inflight"), 0);
    ASSERT_EQ(sample(g, "moonkv_info{role=\"gateway\",version=\"0.1.0\"}"), 1);
    keep_scrape(g);

    char *m = scrape(MASTER_METRICS);
    ASSERT(m);
    ASSERT_PROMTOOL(m);
    ASSERT_EQ(sample(m, "moonkv_nodes{state=\"alive\"}"), NODES);
    ASSERT_EQ(sample(m, "moonkv_nodes{state=\"dead\"}"), 0);
    ASSERT_EQ(sample(m, "moonkv_objects{state=\"complete\"}"), 3);
    ASSERT(sample(m, "moonkv_cluster_used_bytes") >= 3.0 * 2 * BIG);
    ASSERT(!isnan(sample(m, "moonkv_put_timeouts_total")));
    ASSERT(!isnan(sample(m, "moonkv_lease_held_extents")));
    ASSERT(!isnan(sample(m, "moonkv_segment_fragmentation_max_ratio")));
    ASSERT_EQ(sample(m, "moonkv_evicted_keys_total"), 0);
    /* Evictions are counted where they happen, not again on the gateway. */
    ASSERT(isnan(sample(g, "moonkv_evicted_keys_total")));
    keep_scrape(m);

    for (int i = 0; i < NODES; i++) {
        char *n = scrape(NODE_PORT + 20 + i);
        ASSERT(n);
        ASSERT_PROMTOOL(n);
        ASSERT(!isnan(sample(n, "moonkv_transfer_server_bytes_total{direction=\"in\"}")));
        ASSERT(sample(n, "moonkv_node_heartbeats_total") >= 1);
        /* node 0's disk tier: 16 MB less its header block, all free */
        double disk_free = sample(n, "moonkv_node_disk_bytes{state=\"free\"}");
        if (i == 0) ASSERT_MSG(disk_free == 16.0 * 1024 * 1024 - 4096, "disk free %.0f", disk_free);
        else ASSERT(isnan(disk_free));
        if (i == 0) ASSERT_EQ(sample(n, "moonkv_node_disk_checksum_errors_total"), 0);
        keep_scrape(n);
    }
    /* Nodes on this host export shm, which the gateway prefers: its
     * engine's bytes by transport add up to 2 replicas of 3 SETs plus 2
     * GETs, whichever transport moved them. */
    double moved = sample(g, "moonkv_transfer_bytes_total{transport=\"tcp\"}") +
                   sample(g, "moonkv_transfer_bytes_total{transport=\"shm\"}") +
                   sample(g, "moonkv_transfer_bytes_total{transport=\"rdma\"}");
    ASSERT_MSG(moved == (3.0 * 2 + 2) * BIG, "gateway moved %.0f bytes", moved);
    ASSERT(sample(g, "moonkv_transfer_bytes_total{transport=\"shm\"}") > 0);
    ASSERT(!isnan(sample(g, "moonkv_transfer_retries_total")));
}

/* Metric names in a PromQL expression: moonkv_ followed by name chars. */
static int check_expr(const char *expr, char *missing, size_t len) {
    for (const char *p = strstr(expr, "moonkv_"); p; p = strstr(p, "moonkv_")) {
        size_t n = 0;
        while (isalnum((unsigned char)p[n]) || p[n] == '_') n++;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        int found = 0;
        for (int i = 0; i < nscrapes && !found; i++) found = has_metric(scrapes[i], name);
        if (!found) {
            snprintf(missing, len, "%s", name);
            return 0;
        }
        p += n;
    }
    return 1;
}

/* Every "expr" anywhere in the dashboard; counts them in *nexpr. */
static int check_exprs(const cJSON *j, int *nexpr, char *missing, size_t len) {
    const cJSON *e;
    if (cJSON_IsString(j) && j->string && strcmp(j->string, "expr") == 0) {
        (*nexpr)++;
        return check_expr(j->valuestring, missing, len);
    }
    cJSON_ArrayForEach(e, j)
        if (!check_exprs(e, nexpr, missing, len)) return 0;
    return 1;
}

static void dashboard_metrics_exist(void) {
    ASSERT_EQ(nscrapes, 3 + NODES);   /* standalone, gateway, master, nodes */
    FILE *f = fopen(DASHBOARD, "r");
    ASSERT_MSG(f, "cannot open %s", DASHBOARD);
    static char text[1 << 18];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    cJSON *j = cJSON_Parse(text);
    ASSERT_MSG(j, "%s is not JSON", DASHBOARD);
    char missing[128] = "";
    int nexpr = 0;
    int ok = check_exprs(j, &nexpr, missing, sizeof missing);
    cJSON_Delete(j);
    ASSERT_MSG(ok, "the dashboard queries %s, which no role exports", missing);
    ASSERT(nexpr >= 10);
}

/* Listening TCP sockets of pid (ss from iproute2), -1 on error. */
static int listeners_of(pid_t pid) {
    char cmd[96], line[512];
    snprintf(cmd, sizeof cmd, "ss -Hltnp 2>/dev/null");
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char tag[32];
    snprintf(tag, sizeof tag, "pid=%d,", (int)pid);
    int n = 0;
    while (fgets(line, sizeof line, p)) n += strstr(line, tag) != NULL;
    pclose(p);
    return n;
}

static void metrics_off_by_default(void) {
    const char *const extra[] = {"--segment-size", "16MB", "--prefault", "no", NULL};
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_argf(&a, "--port=%d", PLAIN_PORT);
    h_arg(&a, "--log-level");
    h_arg(&a, "warning");
    h_argv(&a, extra);
    pid_t plain = h_ready(h_spawn(a.v), "127.0.0.1", PLAIN_PORT, NULL, 20000);
    ASSERT(plain > 0);
    redisContext *c = h_redis(PLAIN_PORT);
    ASSERT(c);
    redisReply *r = redisCommand(c, "CONFIG GET metrics-port");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT_STREQ(r->element[1]->str, "0");
    freeReplyObject(r);
    redisFree(c);
    ASSERT_EQ(listeners_of(plain), 1);      /* RESP only */
    ASSERT_EQ(listeners_of(sa_pid), 2);     /* RESP and metrics */
    h_stop(plain);
}

int main(void) {
    h_init(TIME_LIMIT_S);
    const char *tmp = getenv("TMPDIR");
    snprintf(disk_dir, sizeof disk_dir, "%s/moonkv-metrics-disk-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    h_setup_or_exit(mkdtemp(disk_dir) ? 0 : -1, "a directory for the disk tier");
    h_setup_or_exit(port0 = h_free_ports(24 + NODES), "free ports");
    h_fill(big, sizeof big, 7);
    const char *const sa_extra[] = {"--segment-size", "64MB", "--prefault", "no", NULL};
    pid_t sa = sa_pid = start_role("standalone", SA_PORT, SA_METRICS, sa_extra);
    pid_t master = start_role("master", MASTER_PORT, MASTER_METRICS, NULL);
    if (h_ready(sa, "127.0.0.1", SA_PORT, NULL, 20000) < 0 ||
        h_ready(master, "127.0.0.1", MASTER_PORT, NULL, 20000) < 0) {
        printf("not ok - start: standalone or master did not come up\n");
        return 1;
    }
    for (int i = 0; i < NODES; i++) {
        char masterarg[32], data[32];
        snprintf(masterarg, sizeof masterarg, "127.0.0.1:%d", MASTER_PORT);
        snprintf(data, sizeof data, "127.0.0.1:%d", NODE_PORT + 10 + i);
        /* Node 0 has a disk tier (docs/SSD_TIER.md): its metrics too. */
        const char *const extra[] = {"--master", masterarg, "--segment-size", "32MB", "--data-addrs", data,
                                     "--prefault", "no", i == 0 ? "--disk-dir" : NULL, disk_dir, "--disk-size",
                                     "16MB", NULL};
        start_role("node", NODE_PORT + i, NODE_PORT + 20 + i, extra);
    }
    if (h_wait_nodes(MASTER_PORT, "alive", NODES, 20000) != 0) {
        printf("not ok - start: nodes did not join\n");
        return 1;
    }
    char masterarg[32];
    snprintf(masterarg, sizeof masterarg, "127.0.0.1:%d", MASTER_PORT);
    const char *const gw_extra[] = {"--master", masterarg, "--replicas", "2", "--segment-size", "16MB", NULL};
    pid_t gw = start_role("gateway", GW_PORT, GW_METRICS, gw_extra);
    if (h_ready(gw, "127.0.0.1", GW_PORT, NULL, 20000) < 0) {
        printf("not ok - start: gateway did not come up\n");
        return 1;
    }

    RUN_TEST(standalone_counts);
    RUN_TEST(http_errors);
    RUN_TEST(cluster_counts);
    RUN_TEST(dashboard_metrics_exist);
    RUN_TEST(metrics_off_by_default);
    RUN_TEST(http_idle_limits);
    h_stop_all();
    for (int i = 0; i < nscrapes; i++) free(scrapes[i]);
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", disk_dir);
    if (strstr(disk_dir, "moonkv-metrics-disk-") && system(cmd) != 0) printf("# cannot remove %s\n", disk_dir);
    TEST_EXIT();
}
