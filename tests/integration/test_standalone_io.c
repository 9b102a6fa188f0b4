/* The standalone server's own data path end to end: the segment warms in
 * the background while the server already answers (INFO segment shows
 * how far), and a large GET leaves slice by slice, each verified before
 * its bytes go (a corrupted slice closes the connection instead of
 * reaching the client: the test flips a bit in the server's memory
 * through /proc/PID/mem), also behind the partial writes to a slow reader,
 * whose replies arrive byte-exact; a reader that stops reading holds only
 * a little of a reply in the server's socket. Starts the real binary ($MOONKV_SERVER) on the
 * ports of one block of h_free_ports, taken first in main(). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "core/util.h"
#include "support/harness.h"
#include "test.h"

#define PORTS 16   /* more than the servers started */

static int next_port;
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

/* 256 MB: the 64 values fill a quarter of it, on pages warmed and not yet
 * warmed. 2 GB cost 8 CPU-s to warm in rel and 14 in SAN, on a thread
 * niced to give way: at load 28 the SAN run had not warmed it in 240 s. */
#define WARM_SEG "256MB"
#define WARM_SEG_BYTES (256ULL << 20)
#define WARM_KEYS 64
#define WARM_VALUE (1u << 20)

/* Key i's name into key and its value (of its own length) into v. */
static size_t warm_entry(int i, unsigned char *v, char *key, size_t keylen) {
    size_t n = WARM_VALUE - (size_t)i;
    fill(v, n, (unsigned)i);
    snprintf(key, keylen, "warm:%d", i);
    return n;
}

/* A segment (2 GB) used to be faulted in before the first PING; now the
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
    uint64_t end = mono_ms() + 240000;   /* 2.2 CPU-s in SAN, niced: minutes under load */
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

/* ---- Large GETs, slice by slice --------------------------------------- */

#define SLICE (256u * 1024)   /* store_local's slice */

/* 1 when r is the n bytes fill() makes from seed (v: scratch). */
static int roundtrip_value(const redisReply *r, size_t n, unsigned seed, unsigned char *v) {
    fill(v, n, seed);
    return r && r->type == REDIS_REPLY_STRING && (size_t)r->len == n && memcmp(r->str, v, n) == 0;
}

/* Sizes around the slice boundaries, pipelined on one connection and
 * read back byte-exact, in order, with MGET of all of them too. */
static void test_sliced_get_roundtrip(void) {
    static const size_t sizes[] = {SLICE - 1, SLICE, SLICE + 1, 3 * SLICE + 5, 4u << 20, (4u << 20) + 3};
    enum { N = sizeof sizes / sizeof sizes[0] };
    int port;
    pid_t pid = start_standalone(&port, "128MB", NULL);
    redisContext *c = pid > 0 ? h_redis(port) : NULL;
    ASSERT(c != NULL);
    unsigned char *v = malloc((4u << 20) + 3);
    ASSERT(v != NULL);
    int stored = 0, exact = 0, mget_exact = 0;
    for (int i = 0; i < N; i++) {
        fill(v, sizes[i], 100u + (unsigned)i);
        stored += redisAppendCommand(c, "SET s:%d %b", i, v, sizes[i]) == REDIS_OK;
    }
    for (int i = 0; i < N; i++) redisAppendCommand(c, "GET s:%d", i);
    redisAppendCommand(c, "MGET s:0 s:1 s:2 s:3 s:4 s:5");
    for (int i = 0; i < N; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK) break;
        freeReplyObject(r);   /* the SETs' +OK */
    }
    for (int i = 0; i < N; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK) break;
        exact += roundtrip_value(r, sizes[i], 100u + (unsigned)i, v);
        freeReplyObject(r);
    }
    redisReply *m = NULL;
    if (redisGetReply(c, (void **)&m) == REDIS_OK && m->type == REDIS_REPLY_ARRAY && m->elements == N)
        for (int i = 0; i < N; i++) mget_exact += roundtrip_value(m->element[i], sizes[i], 100u + (unsigned)i, v);
    freeReplyObject(m);
    free(v);
    redisFree(c);
    ASSERT_EQ(h_stop_status(pid, 10000), 0);
    ASSERT_EQ(stored, N);
    ASSERT_EQ(exact, N);
    ASSERT_EQ(mget_exact, N);
}

/* Where needle (len bytes) sits in pid's writable mappings of seg to
 * 2*seg bytes (its segment: reading the rest, such as ASan's terabytes
 * of shadow, through /proc/pid/mem would fault it all in), found through
 * /proc/pid/maps and /proc/pid/mem; 0 if nowhere. */
static uint64_t find_in_segment(pid_t pid, uint64_t seg, const void *needle, size_t len) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *maps = fopen(path, "r");
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    int mem = open(path, O_RDONLY);
    size_t bufsz = 8u << 20;
    unsigned char *buf = malloc(bufsz);
    uint64_t found = 0;
    while (maps && mem >= 0 && buf && !found && fgets(line, sizeof line, maps)) {
        unsigned long long lo, hi;
        char perms[8];
        if (sscanf(line, "%llx-%llx %7s", &lo, &hi, perms) != 3 || perms[1] != 'w') continue;
        if (hi - lo < seg || hi - lo > 2 * seg) continue;
        for (uint64_t at = lo; at < hi && !found; at += bufsz - len) {
            size_t want = hi - at < bufsz ? (size_t)(hi - at) : bufsz;
            ssize_t got = pread(mem, buf, want, (off_t)at);
            if (got < (ssize_t)len) break;
            unsigned char *hit = memmem(buf, (size_t)got, needle, len);
            if (hit) found = at + (uint64_t)(hit - buf);
            if ((size_t)got < bufsz) break;
        }
    }
    free(buf);
    if (mem >= 0) close(mem);
    if (maps) fclose(maps);
    return found;
}

/* Flips one bit of pid's memory at addr; 0 on success. */
static int flip_bit(pid_t pid, uint64_t addr) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    int mem = open(path, O_RDWR);
    unsigned char b;
    int ok = mem >= 0 && pread(mem, &b, 1, (off_t)addr) == 1;
    b ^= 0x10;
    ok = ok && pwrite(mem, &b, 1, (off_t)addr) == 1;
    if (mem >= 0) close(mem);
    return ok ? 0 : -1;
}

/* Everything until EOF (1) or a timeout (0) into buf; bytes in *got.
 * slow: at most 16 KiB per recv, with a pause after each. */
static int read_to_eof(int fd, unsigned char *buf, size_t cap, size_t *got, int slow) {
    *got = 0;
    for (;;) {
        size_t want = slow && cap - *got > 16384 ? 16384 : cap - *got;
        if (slow) usleep(200);
        ssize_t r = recv(fd, buf + *got, want, 0);
        if (r == 0) return 1;
        if (r < 0) return 0;
        *got += (size_t)r;
        if (*got == cap) return 0;
    }
}

#define CORRUPT_LEN (4u << 20)
#define SLOW_RCVBUF 16384

/* A fresh 64 MB standalone (prefault off) holding key: len bytes of
 * fill(seed), kept in *v too; *stored 1 once the SET answered OK. */
static pid_t start_holding(int *port, redisContext **c, const char *key, unsigned char **v, size_t len,
                           unsigned seed, int *stored) {
    pid_t pid = start_standalone(port, "64MB", (const char *const[]){"--prefault", "no", NULL});
    *c = pid > 0 ? h_redis(*port) : NULL;
    *v = malloc(len);
    *stored = 0;
    if (*c && *v) {
        fill(*v, len, seed);
        *stored = set_value(*c, key, *v, len);
    }
    return pid;
}

/* A bit flipped in slice k of a stored 4 MiB value (written into the
 * server's memory from outside): a GET sends at most slices 0..k-1, each
 * byte as stored, then the connection closes; nothing of slice k or later
 * leaves. The server counts the error and keeps serving. slow: the reader
 * has a small window and reads 16 KiB at a time, so the reply leaves in
 * many partial writes. */
static void corrupt_slice_case(int slice, int slow) {
    int port, stored;
    redisContext *c;
    unsigned char *v;
    pid_t pid = start_holding(&port, &c, "victim", &v, CORRUPT_LEN, 77, &stored);
    ASSERT(c != NULL && v != NULL);
    size_t at = (size_t)slice * SLICE + 1000;   /* inside slice k */
    uint64_t addr = stored ? find_in_segment(pid, 64ULL << 20, v + at, 64) : 0;
    int flipped = addr && flip_bit(pid, addr) == 0;

    size_t cap = CORRUPT_LEN + 64, got = 0;
    unsigned char *buf = malloc(cap);
    int fd = h_raw_connect_to(port, slow ? SLOW_RCVBUF : 0, 10);
    const char get[] = "*2\r\n$3\r\nGET\r\n$6\r\nvictim\r\n";
    int eof = fd >= 0 && send(fd, get, sizeof get - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof get - 1) &&
              read_to_eof(fd, buf, cap, &got, slow);
    if (fd >= 0) close(fd);
    const char hdr[] = "$4194304\r\n";
    /* What came is a prefix of the whole reply (maybe nothing at all:
     * the first writev waits for its slices' checks). */
    size_t hl = strlen(hdr), body = got > hl ? got - hl : 0;
    int prefix_ok = memcmp(buf, hdr, got < hl ? got : hl) == 0 && memcmp(buf + hl, v, body) == 0;
    printf("# flipped at +%zu, got %zu reply bytes before EOF\n", at, got);
    long long errors = info_num(c, "segment", "checksum_errors");
    redisReply *r = redisCommand(c, "PING");
    int alive = r && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    free(buf);
    free(v);
    redisFree(c);
    ASSERT_EQ(h_stop_status(pid, 10000), 0);
    ASSERT(stored);
    ASSERT(flipped);
    ASSERT(eof);                                  /* closed, not a whole reply */
    ASSERT(prefix_ok);                            /* no byte differs from the stored value */
    ASSERT(body <= (size_t)slice * SLICE);        /* nothing of slice k on */
    if (slow) ASSERT(body > 0);                   /* the slices before it did leave */
    ASSERT_EQ(errors, 1);
    ASSERT(alive);
}

static void test_corrupt_slice_never_sent(void) { corrupt_slice_case(3, 0); }

/* Slice 13 of 16, behind many partial writes to a slow reader: the
 * checks run ahead of the socket (one writev per MiB checked, a slice more
 * while the socket is full) and still stop before slice 13's bytes. */
static void test_corrupt_late_slice_slow_reader(void) { corrupt_slice_case(13, 1); }

#define SLOW_LEN ((4u << 20) + 5)
#define SLOW_GETS 2


/* 1 if p holds the bulk reply hdr (hl bytes), the len bytes of v, CRLF. */
static int is_bulk_at(const unsigned char *p, const char *hdr, int hl, const unsigned char *v, size_t len) {
    return memcmp(p, hdr, (size_t)hl) == 0 && memcmp(p + hl, v, len) == 0 && memcmp(p + hl + len, "\r\n", 2) == 0;
}

/* A reader with a small window that takes 16 KiB at a time gets two
 * pipelined 4 MiB GETs (every write partial, the slices checked ahead of
 * the socket) byte-exact and in order, and the server serves another
 * client meanwhile. */
static void test_slow_reader_exact(void) {
    int port, stored;
    redisContext *c;
    unsigned char *v;
    pid_t pid = start_holding(&port, &c, "slow", &v, SLOW_LEN, 91, &stored);
    ASSERT(c != NULL && v != NULL);

    char hdr[32];
    int hl = snprintf(hdr, sizeof hdr, "$%u\r\n", SLOW_LEN);
    size_t one = (size_t)hl + SLOW_LEN + 2, cap = SLOW_GETS * one + 64, got = 0;
    unsigned char *buf = malloc(cap);
    int fd = h_raw_connect_to(port, SLOW_RCVBUF, 10);
    const char get[] = "*2\r\n$3\r\nGET\r\n$4\r\nslow\r\n";
    int sent = 1;
    for (int i = 0; i < SLOW_GETS && fd >= 0; i++)
        sent &= send(fd, get, sizeof get - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof get - 1);
    /* Half of it slowly, then PING from another client, then the rest. */
    int ok = fd >= 0 && sent;
    while (ok && got < cap / 2) {
        usleep(200);
        ssize_t r = recv(fd, buf + got, 16384, 0);
        ok = r > 0;
        if (r > 0) got += (size_t)r;
    }
    redisReply *r = redisCommand(c, "PING");
    int other = r && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    while (ok && got < SLOW_GETS * one) {
        size_t want = SLOW_GETS * one - got < 16384 ? SLOW_GETS * one - got : 16384;
        ssize_t n = recv(fd, buf + got, want, 0);
        ok = n > 0;
        if (n > 0) got += (size_t)n;
    }
    int exact = 0;
    for (int i = 0; ok && i < SLOW_GETS; i++) {
        exact += is_bulk_at(buf + (size_t)i * one, hdr, hl, v, SLOW_LEN);
    }
    if (fd >= 0) close(fd);
    free(buf);
    free(v);
    redisFree(c);
    ASSERT_EQ(h_stop_status(pid, 10000), 0);
    ASSERT(stored);
    ASSERT(ok);
    ASSERT_EQ(got, SLOW_GETS * one);
    ASSERT_EQ(exact, SLOW_GETS);
    ASSERT(other);
}

/* ---- What a reader that stops holds in the server ------------------------ */

/* tx_queue and rx_queue of the IPv4 TCP socket from port lport to port
 * rport (/proc/net/tcp: for an established socket, bytes written and not
 * yet acknowledged, and bytes received and not yet read). 0 when found. */
static int tcp_queues(int lport, int rport, unsigned long *tx, unsigned long *rx) {
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512];
    int found = -1;
    if (!f) return -1;
    while (found != 0 && fgets(line, sizeof line, f)) {
        unsigned la, lp, ra, rp, st;
        if (sscanf(line, " %*d: %8X:%4X %8X:%4X %2X %lX:%lX", &la, &lp, &ra, &rp, &st, tx, rx) == 7 &&
            (int)lp == lport && (int)rp == rport)
            found = 0;
    }
    fclose(f);
    return found;
}

static int local_port(int fd) {
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    return getsockname(fd, (struct sockaddr *)&sa, &len) == 0 ? ntohs(sa.sin_port) : -1;
}

#define HELD_LEN (4u << 20)
#define HELD_BOUND (512u * 1024)

/* A client with a small window asks for 4 MiB and reads nothing: the
 * server's socket holds what the window took plus at most about 64 KiB
 * queued unsent (TCP_NOTSENT_LOWAT), not a send buffer's worth (over
 * 1 MiB without the limit); the rest waits in the segment, and the whole
 * reply still arrives byte-exact once the client reads. */
static void test_unread_reply_held_back(void) {
    int port, stored;
    redisContext *c;
    unsigned char *v;
    pid_t pid = start_holding(&port, &c, "held", &v, HELD_LEN, 23, &stored);
    ASSERT(c != NULL && v != NULL);
    int fd = h_raw_connect_to(port, SLOW_RCVBUF, 10), cport = fd >= 0 ? local_port(fd) : -1;
    const char get[] = "*2\r\n$3\r\nGET\r\n$4\r\nheld\r\n";
    int sent = fd >= 0 && send(fd, get, sizeof get - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof get - 1);
    /* The reply has begun to arrive, so its first writev has begun; the
     * PING after it is served once that writev returned. */
    unsigned long tx = 0, rx = 0, stx = 0, srx = 0;
    for (int i = 0; sent && i < 1000 && rx == 0; i++) {
        if (tcp_queues(cport, port, &tx, &rx) != 0) break;
        if (rx == 0) usleep(10000);
    }
    redisReply *r = redisCommand(c, "PING");
    int other = r && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    int queued = tcp_queues(port, cport, &stx, &srx) == 0;
    printf("# client window took %lu bytes, the server's socket holds %lu\n", rx, stx);

    char hdr[32];
    int hl = snprintf(hdr, sizeof hdr, "$%u\r\n", HELD_LEN);
    size_t whole = (size_t)hl + HELD_LEN + 2, got = 0;
    unsigned char *buf = malloc(whole);
    int ok = sent && buf;
    if (ok) got = h_recv_all(fd, buf, whole);
    ok = ok && got == whole;
    int exact = ok && is_bulk_at(buf, hdr, hl, v, HELD_LEN);
    if (fd >= 0) close(fd);
    free(buf);
    free(v);
    redisFree(c);
    ASSERT_EQ(h_stop_status(pid, 10000), 0);
    ASSERT(stored);
    ASSERT(sent);
    ASSERT(rx > 0);
    ASSERT(other);
    ASSERT(queued);
    ASSERT(stx > 0);              /* the reply is under way ... */
    ASSERT(stx < HELD_BOUND);     /* ... and not handed over whole */
    ASSERT(exact);
}

int main(void) {
    if (!mkdtemp(logdir)) return 1;
    h_init(400);
    h_setup_or_exit(next_port = h_free_ports(PORTS), "free ports");
    RUN_TEST(test_serves_while_warming);
    RUN_TEST(test_prefault_off_says_off);
    RUN_TEST(test_sliced_get_roundtrip);
    RUN_TEST(test_corrupt_slice_never_sent);
    RUN_TEST(test_corrupt_late_slice_slow_reader);
    RUN_TEST(test_slow_reader_exact);
    RUN_TEST(test_unread_reply_held_back);
    h_kill_all();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", logdir);
    if (!test_failed_cases && system(cmd) != 0) return 1;
    TEST_EXIT();
}
