/* test_commands - every RESP command of the standalone server, checked
 * over the wire with hiredis against the exact Redis reply texts.
 * Ports: one block of h_free_ports, taken first in main(). */
#include <errno.h>
#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util.h"
#include "support/harness.h"
#include "test.h"

static int port0;
#define PORT_MAIN (port0 + 0)
#define PORT_AUTH (port0 + 1)
#define SEGMENT (64ULL * 1024 * 1024)
#define PASSWORD "s3cret"

#define TIMEOUT_MS 10000   /* connect and reply timeout */

/* Starts the server and waits (bounded) until it answers PING. */
static int start_server(int port, const char *password) {
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_arg(&a, "--bind");
    h_arg(&a, "127.0.0.1");
    h_arg(&a, "--port");
    h_argf(&a, "%d", port);
    h_arg(&a, "--segment-size");
    h_arg(&a, "64MB");
    h_arg(&a, "--log-level");
    h_arg(&a, "warning");
    if (password) {
        h_arg(&a, "--requirepass");
        h_arg(&a, password);
    }
    /* 20 s, for slow sanitizer builds */
    return h_ready(h_spawn(a.v), "127.0.0.1", port, password, 20000) > 0 ? 0 : -1;
}

static redisContext *ctx;   /* to the main server */

/* ---- reply checks ---- */

static redisReply *cmd(redisContext *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    return r;
}

static int is_status(const redisReply *r, const char *s) {
    return r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, s) == 0;
}

static int is_error(const redisReply *r, const char *s) {
    int ok = r && r->type == REDIS_REPLY_ERROR && strcmp(r->str, s) == 0;
    if (!ok) printf("# expected error '%s', got type %d '%s'\n", s, r ? r->type : -1,
                    r && r->str ? r->str : "");
    return ok;
}

static int is_error_prefix(const redisReply *r, const char *s) {
    return r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, s, strlen(s)) == 0;
}

static int is_bulk(redisReply *r, const void *p, size_t n) {
    return r && r->type == REDIS_REPLY_STRING &&
           r->len == n && memcmp(r->str, p, n) == 0;
}

static int is_int(redisReply *r, long long v) {
    return r && r->type == REDIS_REPLY_INTEGER && r->integer == v;
}

static int is_nil(redisReply *r) { return r && r->type == REDIS_REPLY_NIL; }

/* Runs a command and checks its reply with one of the predicates above. */
#define CHECK(pred, reply) do { redisReply *_r = (reply); int _ok = pred; \
    freeReplyObject(_r); ASSERT_MSG(_ok, "%s", #reply); } while (0)
#define EXPECT_STATUS(s, ...) do { redisReply *_r = cmd(__VA_ARGS__); int _ok = is_status(_r, s); \
    freeReplyObject(_r); ASSERT_MSG(_ok, "%s -> %s", #__VA_ARGS__, s); } while (0)
#define EXPECT_ERROR(s, ...) do { redisReply *_r = cmd(__VA_ARGS__); int _ok = is_error(_r, s); \
    freeReplyObject(_r); ASSERT_MSG(_ok, "%s -> %s", #__VA_ARGS__, s); } while (0)
#define EXPECT_INT(v, ...) do { redisReply *_r = cmd(__VA_ARGS__); int _ok = is_int(_r, v); \
    freeReplyObject(_r); ASSERT_MSG(_ok, "%s -> %lld", #__VA_ARGS__, (long long)(v)); } while (0)
#define EXPECT_NIL(...) do { redisReply *_r = cmd(__VA_ARGS__); int _ok = is_nil(_r); \
    freeReplyObject(_r); ASSERT_MSG(_ok, "%s -> nil", #__VA_ARGS__); } while (0)
#define EXPECT_BULK(p, n, ...) do { redisReply *_r = cmd(__VA_ARGS__); int _ok = is_bulk(_r, p, n); \
    freeReplyObject(_r); ASSERT_MSG(_ok, "%s -> bulk", #__VA_ARGS__); } while (0)

/* The value of "field:" in an INFO text, or NULL. */
static const char *info_field(const char *info, const char *field, char *buf, size_t len) {
    char pat[96];
    snprintf(pat, sizeof pat, "\r\n%s:", field);
    const char *p = strstr(info, pat);
    if (!p) return NULL;
    p += strlen(pat);
    size_t n = strcspn(p, "\r\n");
    if (n >= len) n = len - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

static long long info_ll(const char *section, const char *field) {
    char buf[128];
    redisReply *r = cmd(ctx, "INFO %s", section);
    const char *v = r && r->str ? info_field(r->str, field, buf, sizeof buf) : NULL;
    long long n = v ? atoll(v) : -1;
    freeReplyObject(r);
    return n;
}

/* ---- cases ---- */

static void test_ping_echo(void) {
    EXPECT_STATUS("PONG", ctx, "PING");
    EXPECT_BULK("hi there", 8, ctx, "PING %s", "hi there");
    EXPECT_BULK("x\0y", 3, ctx, "ECHO %b", "x\0y", (size_t)3);
    EXPECT_ERROR("ERR wrong number of arguments for 'ping' command", ctx, "PING a b");
    EXPECT_ERROR("ERR wrong number of arguments for 'echo' command", ctx, "ECHO");
}

static void test_set_get_write_once(void) {
    EXPECT_STATUS("OK", ctx, "SET wo:k first");
    EXPECT_ERROR("EXISTS key already exists", ctx, "SET wo:k second");
    EXPECT_BULK("first", 5, ctx, "GET wo:k");
    EXPECT_NIL(ctx, "SET wo:k third NX");
    EXPECT_BULK("first", 5, ctx, "GET wo:k");
    EXPECT_STATUS("OK", ctx, "SET wo:nx v NX");
    EXPECT_STATUS("OK", ctx, "PUT wo:put v2");
    EXPECT_BULK("v2", 2, ctx, "GET wo:put");
    EXPECT_NIL(ctx, "GET wo:missing");
    EXPECT_STATUS("OK", ctx, "SET wo:empty %b", "", (size_t)0);
    EXPECT_BULK("", 0, ctx, "GET wo:empty");
    EXPECT_INT(0, ctx, "STRLEN wo:empty");
    EXPECT_INT(5, ctx, "STRLEN wo:k");
    EXPECT_INT(0, ctx, "STRLEN wo:missing");
    EXPECT_ERROR("ERR wrong number of arguments for 'set' command", ctx, "SET onlykey");
    EXPECT_ERROR("ERR wrong number of arguments for 'get' command", ctx, "GET");
}

static void test_set_refused_options(void) {
    static const char *opts[][2] = {{"XX", NULL}, {"GET", NULL}, {"KEEPTTL", NULL},
                                    {"EX", "10"}, {"PX", "10"}, {"EXAT", "1999999999"},
                                    {"PXAT", "1999999999000"}};
    long long aborted = info_ll("stats", "aborted_puts");
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        char want[320];
        if (opts[i][1])   /* an expiry: a collection hint, and this server does not collect */
            snprintf(want, sizeof want,
                     "ERR moonkv objects are write-once and never expire: SET option '%s' is a "
                     "garbage-collection hint and maxmemory_policy is noeviction "
                     "(set allkeys-lru or allkeys-random to use it)", opts[i][0]);
        else
            snprintf(want, sizeof want,
                     "ERR moonkv objects are write-once: SET option '%s' is not supported", opts[i][0]);
        redisReply *r = opts[i][1] ? cmd(ctx, "SET opt:k v %s %s", opts[i][0], opts[i][1])
                                   : cmd(ctx, "SET opt:k v %s", opts[i][0]);
        int ok = is_error(r, want);
        freeReplyObject(r);
        ASSERT_MSG(ok, "SET option %s", opts[i][0]);
    }
    EXPECT_ERROR("ERR moonkv objects are write-once: SET option 'XX' is not supported", ctx,
                 "SET opt:k v xx");
    EXPECT_ERROR("ERR syntax error", ctx, "SET opt:k v BOGUS");
    /* None of the refused SETs left anything behind. */
    EXPECT_INT(0, ctx, "EXISTS opt:k");
    EXPECT_STATUS("OK", ctx, "SET opt:k v");
    ASSERT(info_ll("stats", "aborted_puts") >= aborted + 9);
}

static void test_binary_values(void) {
    size_t n = 1024 * 1024 + 13;
    unsigned char *v = xmalloc(n);
    for (size_t i = 0; i < n; i++) v[i] = (unsigned char)(i * 2654435761u >> 24);
    memcpy(v, "\0\r\n$-1\r\n", 8);
    redisReply *r = cmd(ctx, "SET %b %b", "bin\0key", (size_t)7, v, n);
    int ok = is_status(r, "OK");
    freeReplyObject(r);
    if (ok) {
        r = cmd(ctx, "GET %b", "bin\0key", (size_t)7);
        ok = is_bulk(r, v, n);
        freeReplyObject(r);
    }
    free(v);
    ASSERT(ok);
    EXPECT_INT((long long)n, ctx, "STRLEN %b", "bin\0key", (size_t)7);
    EXPECT_NIL(ctx, "GET %b", "bin", (size_t)3);
}

static void test_mget_del_exists(void) {
    EXPECT_STATUS("OK", ctx, "SET m:a 1");
    EXPECT_STATUS("OK", ctx, "SET m:b 22");
    redisReply *r = cmd(ctx, "MGET m:a m:missing m:b");
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
             is_bulk(r->element[0], "1", 1) && is_nil(r->element[1]) && is_bulk(r->element[2], "22", 2);
    freeReplyObject(r);
    ASSERT(ok);
    EXPECT_INT(3, ctx, "EXISTS m:a m:b m:missing m:a");
    EXPECT_INT(2, ctx, "DEL m:a m:missing m:b");
    EXPECT_INT(0, ctx, "EXISTS m:a m:b");
    EXPECT_NIL(ctx, "GET m:a");
    EXPECT_STATUS("OK", ctx, "SET m:a again");   /* removed keys may be put again */
    EXPECT_INT(1, ctx, "REMOVE m:a");
    EXPECT_INT(0, ctx, "REMOVE m:a");
}

static void test_scan(void) {
    int nkeys = 500;
    for (int i = 0; i < nkeys; i++) redisAppendCommand(ctx, "SET scan:%d v", i);
    for (int i = 0; i < nkeys; i++) {
        redisReply *r;
        ASSERT(redisGetReply(ctx, (void **)&r) == REDIS_OK);
        int ok = is_status(r, "OK");
        freeReplyObject(r);
        ASSERT(ok);
    }
    char *seen = xcalloc((size_t)nkeys, 1);
    char cursor[32] = "0";
    int rounds = 0, stray = 0;
    do {
        redisReply *r = cmd(ctx, "SCAN %s MATCH scan:* COUNT 50", cursor);
        int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                 r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_ARRAY;
        if (ok) {
            snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
            for (size_t i = 0; i < r->element[1]->elements; i++) {
                const char *k = r->element[1]->element[i]->str;
                if (strncmp(k, "scan:", 5) != 0) stray++;
                else if (atoi(k + 5) < nkeys) seen[atoi(k + 5)] = 1;
            }
        }
        freeReplyObject(r);
        if (!ok) {
            free(seen);
            ASSERT(ok);
        }
    } while (strcmp(cursor, "0") != 0 && ++rounds < 10000);
    int missing = 0;
    for (int i = 0; i < nkeys; i++) missing += !seen[i];
    free(seen);
    ASSERT_EQ(stray, 0);
    ASSERT_EQ(missing, 0);
    ASSERT_STREQ(cursor, "0");
    /* A pattern that matches nothing still walks to the end. */
    redisReply *r = cmd(ctx, "SCAN 0 MATCH nomatch:[xyz]?* COUNT 1000000");
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->elements == 0;
    freeReplyObject(r);
    ASSERT(ok);
    EXPECT_ERROR("ERR invalid cursor", ctx, "SCAN abc");
    EXPECT_ERROR("ERR syntax error", ctx, "SCAN 0 COUNT 0");
    EXPECT_ERROR("ERR value is not an integer or out of range", ctx, "SCAN 0 COUNT x");
    EXPECT_ERROR("ERR syntax error", ctx, "SCAN 0 MATCH");
    long long dbsize;
    r = cmd(ctx, "DBSIZE");
    dbsize = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    ASSERT(dbsize >= nkeys);
    ASSERT_EQ(info_ll("keyspace", "db0") >= 0, 1);
}

static void test_nospace_keeps_objects(void) {
    size_t chunk = 8 * 1024 * 1024;
    unsigned char *v = xmalloc(chunk);
    char key[32];
    int stored = 0, ok = 1;
    for (int i = 0; i < 7 && ok; i++) {
        memset(v, 'a' + i, chunk);
        snprintf(key, sizeof key, "full:%d", i);
        redisReply *r = cmd(ctx, "SET %s %b", key, v, chunk);
        ok = is_status(r, "OK");
        freeReplyObject(r);
        stored += ok;
    }
    /* ~8 MB are left: 16 MB cannot fit, and nothing stored is touched. */
    unsigned char *big = xcalloc(2 * chunk, 1);
    redisReply *r = cmd(ctx, "SET full:big %b", big, 2 * chunk);
    int nospace = is_error_prefix(r, "NOSPACE not enough memory for a value of 16777216 bytes (segment: ") &&
                  strstr(r->str, "largest free extent") != NULL;
    if (!nospace && r) printf("# got: %s\n", r->str ? r->str : "(no text)");
    freeReplyObject(r);
    free(big);
    for (int i = 0; i < stored && ok; i++) {
        memset(v, 'a' + i, chunk);
        snprintf(key, sizeof key, "full:%d", i);
        r = cmd(ctx, "GET %s", key);
        ok = is_bulk(r, v, chunk);
        freeReplyObject(r);
    }
    free(v);
    for (int i = 0; i < stored; i++) freeReplyObject(cmd(ctx, "DEL full:%d", i));
    ASSERT_EQ(stored, 7);
    ASSERT(nospace);
    ASSERT(ok);
    EXPECT_INT(0, ctx, "EXISTS full:big");
    ASSERT(info_ll("stats", "nospace_rejections") >= 1);
}

static void test_toobig(void) {
    size_t n = SEGMENT + 1;
    unsigned char *v = xcalloc(n, 1);
    redisReply *r = cmd(ctx, "SET toobig %b", v, n);
    free(v);
    int ok = is_error_prefix(r, "TOOBIG ");
    freeReplyObject(r);
    ASSERT(ok);
    EXPECT_INT(0, ctx, "EXISTS toobig");
}

static void test_info(void) {
    redisReply *r = cmd(ctx, "INFO");
    ASSERT(r && r->type == REDIS_REPLY_STRING);
    const char *sections[] = {"# Server\r\n", "# Clients\r\n", "# Memory\r\n", "# Segment\r\n",
                              "# Stats\r\n", "# Keyspace\r\n"};
    int ok = 1;
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
        if (!strstr(r->str, sections[i])) {
            printf("# INFO lacks %s", sections[i]);
            ok = 0;
        }
    const char *fields[] = {"redis_version", "moonkv_version", "redis_mode", "os", "arch_bits",
                            "process_id", "tcp_port", "uptime_in_seconds", "uptime_in_days",
                            "executable", "config_file", "connected_clients", "maxclients",
                            "blocked_clients", "used_memory", "used_memory_human",
                            "total_connections_received", "total_commands_processed",
                            "total_net_input_bytes", "total_net_output_bytes",
                            "rejected_connections", "keyspace_hits", "keyspace_misses",
                            "exists_rejections", "nospace_rejections", "aborted_puts",
                            "protocol_errors", "segment_size", "segment_used", "segment_free",
                            "largest_free_extent", "fragmentation_ratio", "objects_complete",
                            "objects_pending", "db0"};
    char buf[256];
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (!info_field(r->str, fields[i], buf, sizeof buf)) {
            printf("# INFO lacks %s\n", fields[i]);
            ok = 0;
        }
    /* Every line is "# Section", "key:value" or the blank line between sections. */
    char *text = xstrdup(r->str);
    for (char *save, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\r') ok = 0;
        else if (n > 1 && line[0] != '#' && !strchr(line, ':')) ok = 0;
    }
    free(text);
    int port_ok = info_field(r->str, "tcp_port", buf, sizeof buf) && atoi(buf) == PORT_MAIN;
    int seg_ok = info_field(r->str, "segment_size", buf, sizeof buf) &&
                 strtoull(buf, NULL, 10) == SEGMENT;
    int ver_ok = info_field(r->str, "redis_version", buf, sizeof buf) && strcmp(buf, "7.0.0") == 0;
    freeReplyObject(r);
    ASSERT(ok);
    ASSERT(port_ok);
    ASSERT(seg_ok);
    ASSERT(ver_ok);

    r = cmd(ctx, "INFO SeGmEnT");
    ok = r && r->type == REDIS_REPLY_STRING && strncmp(r->str, "# Segment\r\n", 11) == 0 &&
         !strstr(r->str, "# Server");
    freeReplyObject(r);
    ASSERT(ok);
    r = cmd(ctx, "INFO server stats");
    ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "# Server\r\n") &&
         strstr(r->str, "\r\n\r\n# Stats\r\n") && !strstr(r->str, "# Memory");
    freeReplyObject(r);
    ASSERT(ok);
    r = cmd(ctx, "INFO everything");
    ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "# Segment") && strstr(r->str, "# Server");
    freeReplyObject(r);
    ASSERT(ok);
    long long hits = info_ll("stats", "keyspace_hits");
    freeReplyObject(cmd(ctx, "GET wo:k"));
    ASSERT_EQ(info_ll("stats", "keyspace_hits"), hits + 1);
}

static int pair_is(redisReply *r, size_t i, const char *k, const char *v) {
    return r->element[i]->type == REDIS_REPLY_STRING && strcmp(r->element[i]->str, k) == 0 &&
           r->element[i + 1]->type == REDIS_REPLY_STRING && strcmp(r->element[i + 1]->str, v) == 0;
}

static void test_config(void) {
    char port[16];
    snprintf(port, sizeof port, "%d", PORT_MAIN);
    redisReply *r = cmd(ctx, "CONFIG GET port");
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && pair_is(r, 0, "port", port);
    freeReplyObject(r);
    ASSERT(ok);
    r = cmd(ctx, "CONFIG GET save appendonly");
    ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 4 && pair_is(r, 0, "save", "") &&
         pair_is(r, 2, "appendonly", "no");
    freeReplyObject(r);
    ASSERT(ok);
    r = cmd(ctx, "CONFIG GET SEGMENT-SI*");   /* segment-file and segment-persist also match SEGMENT-* */
    ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && pair_is(r, 0, "segment-size", "67108864");
    freeReplyObject(r);
    ASSERT(ok);
    r = cmd(ctx, "CONFIG GET *");
    ok = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 20 && r->elements % 2 == 0;
    freeReplyObject(r);
    ASSERT(ok);
    r = cmd(ctx, "CONFIG GET nosuchsetting");
    ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 0;
    freeReplyObject(r);
    ASSERT(ok);
    CHECK(is_error_prefix(_r, "ERR moonkv settings are read-only at runtime"), cmd(ctx, "CONFIG SET maxclients 10"));
    EXPECT_ERROR("ERR wrong number of arguments for 'config' command", ctx, "CONFIG");
}

static void test_client(void) {
    EXPECT_ERROR("ERR Client names cannot contain spaces, newlines or special characters.", ctx,
                 "CLIENT SETNAME %s", "bad name");
    EXPECT_NIL(ctx, "CLIENT GETNAME");
    EXPECT_STATUS("OK", ctx, "CLIENT SETNAME tester");
    EXPECT_BULK("tester", 6, ctx, "CLIENT GETNAME");
    EXPECT_STATUS("OK", ctx, "CLIENT SETINFO LIB-NAME mylib");
    EXPECT_STATUS("OK", ctx, "CLIENT SETINFO lib-ver 1.2.3");
    redisReply *r = cmd(ctx, "CLIENT ID");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER);
    long long id = r->integer;
    freeReplyObject(r);
    char want[64];
    snprintf(want, sizeof want, "id=%lld addr=127.0.0.1:", id);
    r = cmd(ctx, "CLIENT LIST");
    int ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, want) &&
             strstr(r->str, " name=tester ") && strstr(r->str, " laddr=127.0.0.1:") &&
             strstr(r->str, " db=0 ") && strstr(r->str, " lib-name=mylib lib-ver=1.2.3\n");
    if (!ok && r && r->str) printf("# CLIENT LIST: %s", r->str);
    freeReplyObject(r);
    ASSERT(ok);
    r = cmd(ctx, "CLIENT INFO");
    ok = r && r->type == REDIS_REPLY_STRING && strncmp(r->str, want, strlen(want)) == 0 &&
         strchr(r->str, '\n') == r->str + r->len - 1;
    freeReplyObject(r);
    ASSERT(ok);
    CHECK(is_error_prefix(_r, "ERR unknown subcommand"), cmd(ctx, "CLIENT BOGUS"));
}

static void test_command(void) {
    redisReply *r = cmd(ctx, "COMMAND COUNT");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer >= 20);
    long long count = r->integer;
    freeReplyObject(r);
    r = cmd(ctx, "COMMAND");
    int ok = r && r->type == REDIS_REPLY_ARRAY && (long long)r->elements == count;
    freeReplyObject(r);
    ASSERT(ok);
    r = cmd(ctx, "COMMAND INFO get nosuch");
    ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && is_nil(r->element[1]);
    if (ok) {
        redisReply *g = r->element[0];
        ok = g->type == REDIS_REPLY_ARRAY && g->elements == 10 && is_bulk(g->element[0], "get", 3) &&
             is_int(g->element[1], 2) && is_int(g->element[3], 1) && is_int(g->element[4], 1) &&
             is_int(g->element[5], 1) && g->element[8]->type == REDIS_REPLY_ARRAY &&
             g->element[8]->elements == 1;
    }
    freeReplyObject(r);
    ASSERT(ok);
    r = cmd(ctx, "COMMAND DOCS set");
    ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && is_bulk(r->element[0], "set", 3) &&
         r->element[1]->type == REDIS_REPLY_ARRAY && r->element[1]->elements == 10;
    int has_args = 0;
    if (ok) {
        redisReply *d = r->element[1];
        for (size_t i = 0; i + 1 < d->elements; i += 2)
            if (is_bulk(d->element[i], "arguments", 9))
                has_args = d->element[i + 1]->type == REDIS_REPLY_ARRAY && d->element[i + 1]->elements == 4;
    }
    freeReplyObject(r);
    ASSERT(ok);
    ASSERT(has_args);
    r = cmd(ctx, "COMMAND DOCS");
    ok = r && r->type == REDIS_REPLY_ARRAY && (long long)r->elements == 2 * count;
    freeReplyObject(r);
    ASSERT(ok);
}

static void test_errors_and_misc(void) {
    EXPECT_ERROR("ERR unknown command 'FOO', with args beginning with: 'a' 'b c' ", ctx,
                 "FOO a %s", "b c");
    EXPECT_ERROR("ERR unknown command 'nope', with args beginning with: ", ctx, "nope");
    EXPECT_ERROR("ERR wrong number of arguments for 'strlen' command", ctx, "STRLEN a b");
    EXPECT_STATUS("OK", ctx, "SELECT 0");
    EXPECT_ERROR("ERR DB index is out of range", ctx, "SELECT 1");
    EXPECT_ERROR("ERR value is not an integer or out of range", ctx, "SELECT x");
    EXPECT_ERROR("ERR AUTH <password> called without any password configured for the default "
                 "user. Are you sure your configuration is correct?", ctx, "AUTH foo");
}

/* ---- raw RESP3 (the installed hiredis 0.14 predates RESP3) ---- */

/* Reads exactly n bytes within 10 s; 0 on success. */
static int raw_read(int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 10000) <= 0) return -1;
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

/* Sends req and checks that exactly `want` comes back. */
static int raw_expect(int fd, const char *req, const char *want) {
    size_t n = strlen(want);
    char *buf = xmalloc(n + 1);
    int ok = write(fd, req, strlen(req)) == (ssize_t)strlen(req) && raw_read(fd, buf, n) == 0 &&
             memcmp(buf, want, n) == 0;
    if (!ok) {
        buf[n] = '\0';
        printf("# sent %s# want %s# got  %s\n", req, want, buf);
    }
    free(buf);
    return ok;
}

/* Reads one "<type><text>\r\n" line. */
static int raw_line(int fd, char *buf, size_t len) {
    size_t n = 0;
    while (n + 1 < len) {
        if (raw_read(fd, buf + n, 1) != 0) return -1;
        if (buf[n++] == '\n') break;
    }
    buf[n] = '\0';
    return n >= 2 && buf[n - 2] == '\r' ? 0 : -1;
}

static void test_hello_resp3(void) {
    int fd = h_raw_connect(PORT_MAIN, 0);
    ASSERT(fd >= 0);
    char line[64], want[512];
    int ok = write(fd, "CLIENT ID\r\n", 11) == 11 && raw_line(fd, line, sizeof line) == 0 && line[0] == ':';
    long long id = ok ? atoll(line + 1) : 0;
    if (ok) {
        snprintf(want, sizeof want,
                 "%%7\r\n$6\r\nserver\r\n$6\r\nmoonkv\r\n$7\r\nversion\r\n$%zu\r\n%s\r\n"
                 "$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:%lld\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n"
                 "$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n",
                 strlen(MOONKV_VERSION), MOONKV_VERSION, id);
        ok = raw_expect(fd, "HELLO 3\r\n", want);
    }
    ok = ok && raw_expect(fd, "GET hello:missing\r\n", "_\r\n");
    if (ok) {
        snprintf(want, sizeof want, "%%1\r\n$4\r\nport\r\n$5\r\n%d\r\n", PORT_MAIN);
        ok = raw_expect(fd, "CONFIG GET port\r\n", want);
    }
    if (ok) {   /* INFO is a verbatim string in RESP3 */
        ok = write(fd, "INFO server\r\n", 13) == 13 && raw_line(fd, line, sizeof line) == 0 &&
             line[0] == '=';
        size_t n = ok ? (size_t)atoll(line + 1) + 2 : 0;
        char *body = ok ? xmalloc(n + 1) : NULL;
        ok = ok && raw_read(fd, body, n) == 0 && memcmp(body, "txt:# Server\r\n", 14) == 0;
        free(body);
    }
    ok = ok && raw_expect(fd, "HELLO 4\r\n", "-NOPROTO unsupported protocol version\r\n");
    ok = ok && raw_expect(fd, "HELLO 2 SETNAME h2\r\n", "*14\r\n$6\r\nserver\r\n");
    close(fd);
    ASSERT(ok);
}

static void test_quit(void) {
    redisContext *c = h_redis_ms("127.0.0.1", PORT_MAIN, TIMEOUT_MS);
    ASSERT(c);
    redisReply *r = cmd(c, "QUIT");
    int ok = is_status(r, "OK");
    freeReplyObject(r);
    r = ok ? cmd(c, "PING") : NULL;
    int closed = r == NULL;
    freeReplyObject(r);
    redisFree(c);
    ASSERT(ok);
    ASSERT(closed);
}

static void test_auth(void) {
    ASSERT(start_server(PORT_AUTH, PASSWORD) == 0);
    redisContext *c = h_redis_ms("127.0.0.1", PORT_AUTH, TIMEOUT_MS);
    ASSERT(c);
    const char *wrongpass = "WRONGPASS invalid username-password pair or user is disabled.";
    /* each step only if the one before went right; c is freed before ASSERT */
    int ok = h_command_is(c, is_error, "NOAUTH Authentication required.", "GET k");
    ok = ok && h_command_is(c, is_error, wrongpass, "AUTH wrong");
    ok = ok && h_command_is(c, is_error, wrongpass, "AUTH someone %s", PASSWORD);
    /* unknown commands are reported before NOAUTH, as in Redis */
    ok = ok && h_command_is(c, is_error_prefix, "ERR unknown command 'NOSUCH'", "NOSUCH");
    ok = ok && h_command_is(c, is_error_prefix,
                            "NOAUTH HELLO must be called with the client already authenticated",
                            "HELLO 3");
    ok = ok && h_command_is(c, is_status, "OK", "AUTH %s", PASSWORD);
    ok = ok && h_command_is(c, is_status, "OK", "SET k v");
    redisFree(c);
    ASSERT(ok);
    /* HELLO AUTH authenticates and switches protocol at once. */
    int fd = h_raw_connect(PORT_AUTH, 0);
    ASSERT(fd >= 0);
    ok = raw_expect(fd, "HELLO 3 AUTH default " PASSWORD "\r\n", "%7\r\n$6\r\nserver\r\n");
    char line[64];
    for (int i = 0; ok && i < 22; i++) ok = raw_line(fd, line, sizeof line) == 0;  /* rest of the map */
    ok = ok && raw_line(fd, line, sizeof line) == 0 && strcmp(line, "*0\r\n") == 0;
    ok = ok && raw_expect(fd, "GET k\r\n", "$1\r\nv\r\n");
    /* The password is not readable. */
    ok = ok && raw_expect(fd, "CONFIG GET requirepass\r\n", "%1\r\n$11\r\nrequirepass\r\n$0\r\n\r\n");
    close(fd);
    ASSERT(ok);
}

/* redis-cli (which calls COMMAND DOCS at start-up) works against us. */
static void test_redis_cli(void) {
    if (system("command -v redis-cli >/dev/null 2>&1") != 0) {
        printf("# redis-cli not installed, skipped\n");
        return;
    }
    char line[512];
    snprintf(line, sizeof line, "redis-cli -p %d GET wo:k 2>&1", PORT_MAIN);
    FILE *f = popen(line, "r");
    ASSERT(f);
    char out[256] = "";
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    pclose(f);
    ASSERT_STREQ(out, "first\n");
}

int main(void) {
    h_init(55);
    h_setup_or_exit(port0 = h_free_ports(2), "free ports");
    if (start_server(PORT_MAIN, NULL) != 0 || !(ctx = h_redis_ms("127.0.0.1", PORT_MAIN, TIMEOUT_MS))) {
        printf("not ok - start_server: moonkv-server did not come up on port %d\n", PORT_MAIN);
        return 1;
    }
    RUN_TEST(test_ping_echo);
    RUN_TEST(test_set_get_write_once);
    RUN_TEST(test_set_refused_options);
    RUN_TEST(test_binary_values);
    RUN_TEST(test_mget_del_exists);
    RUN_TEST(test_scan);
    RUN_TEST(test_nospace_keeps_objects);
    RUN_TEST(test_toobig);
    RUN_TEST(test_info);
    RUN_TEST(test_config);
    RUN_TEST(test_client);
    RUN_TEST(test_command);
    RUN_TEST(test_errors_and_misc);
    RUN_TEST(test_hello_resp3);
    RUN_TEST(test_quit);
    RUN_TEST(test_auth);
    RUN_TEST(test_redis_cli);
    redisFree(ctx);
    h_stop_all();
    TEST_EXIT();
}
