/* test_client_decode - libmoonkv's decoding of master replies: well-formed
 * placements are taken as granted, and every malformed one (wrong shape,
 * wrong types, caps that do not match their extent, extents that do not
 * cover the object, too many replicas) is MKV_EPROTO without a crash or
 * a leak. Replies are built as RESP text and parsed by hiredis. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cap.h"
#include "client/client.h"
#include "core/util.h"
#include "test.h"

static mkv_client cli;   /* decoding needs only the error buffer */

typedef struct rbuf {
    char s[16384];
    size_t len;
} rbuf;

static void put(rbuf *b, const void *p, size_t n) {
    if (b->len + n > sizeof b->s) abort();
    memcpy(b->s + b->len, p, n);
    b->len += n;
}

static void putf(rbuf *b, const char *fmt, long long v) {
    char tmp[64];
    int n = snprintf(tmp, sizeof tmp, fmt, v);
    put(b, tmp, (size_t)n);
}

static void cap_of(rbuf *b, uint32_t node, uint32_t rights, uint64_t off, uint64_t len) {
    te_cap cap = {.node_id = node, .rights = rights, .offset = off, .length = len,
                  .expiry_ms = wall_ms() + 10000};
    static const uint8_t key[TE_CAP_KEY_LEN] = {1, 2, 3};
    te_cap_sign(&cap, key);
    uint8_t wire[TE_CAP_WIRE_LEN];
    te_cap_encode(&cap, wire);
    putf(b, "$%lld\r\n", TE_CAP_WIRE_LEN);
    put(b, wire, sizeof wire);
    put(b, "\r\n", 2);
}

/* [node, off, len, cap(node, rights, off, len)] */
static void extent(rbuf *b, long long node, long long off, long long len, uint32_t cap_node,
                   uint32_t rights, uint64_t cap_len) {
    put(b, "*4\r\n", 4);
    putf(b, ":%lld\r\n", node);
    putf(b, ":%lld\r\n", off);
    putf(b, ":%lld\r\n", len);
    cap_of(b, cap_node, rights, (uint64_t)off, cap_len);
}

static void good_extent(rbuf *b, long long node, long long off, long long len) {
    extent(b, node, off, len, (uint32_t)node, TE_CAP_WRITE, (uint64_t)len);
}

static redisReply *parse(const rbuf *b) {
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    redisReaderFeed(rd, b->s, b->len);
    if (redisReaderGetReply(rd, &reply) != REDIS_OK) reply = NULL;
    redisReaderFree(rd);
    return reply;
}

/* Decode b as a placement of size bytes: the MKV_* result. */
static int decode(const rbuf *b, uint64_t size, mkv_placement *pl) {
    redisReply *r = parse(b);
    if (!r) return 999;
    int rc = mkv_placement_decode(&cli, r, size, TE_CAP_WRITE, pl);
    freeReplyObject(r);
    return rc;
}

static void test_two_replicas_striped(void) {
    rbuf b = {.len = 0};
    put(&b, "*2\r\n*2\r\n", 8);
    good_extent(&b, 1, 0, 600);
    good_extent(&b, 2, 4096, 400);
    put(&b, "*1\r\n", 4);
    good_extent(&b, 3, 64, 1000);
    mkv_placement pl;
    ASSERT_EQ(decode(&b, 1000, &pl), MKV_OK);
    ASSERT_EQ(pl.nreplicas, 2);
    ASSERT_EQ(pl.replicas[0].nextents, 2);
    ASSERT_EQ(pl.replicas[0].extents[1].node_id, 2);
    ASSERT_EQ(pl.replicas[0].extents[1].offset, 4096);
    ASSERT_EQ(pl.replicas[0].extents[1].cap.length, 400);
    ASSERT_EQ(pl.replicas[1].extents[0].node_id, 3);
    /* one block holds every replica's extents, in order */
    ASSERT(pl.block == pl.replicas[0].extents && pl.replicas[1].extents == pl.block + 2);
    mkv_placement_free(&pl);
}

/* A clip keeps, per replica, exactly the extents' parts that cover the
 * range, with the same caps; a range beyond the object is MKV_EPROTO. */
static void test_clip(void) {
    rbuf b = {.len = 0};
    put(&b, "*2\r\n*3\r\n", 8);
    good_extent(&b, 1, 0, 300);
    good_extent(&b, 2, 4096, 400);
    good_extent(&b, 1, 8192, 300);
    put(&b, "*1\r\n", 4);
    good_extent(&b, 3, 64, 1000);
    mkv_placement whole, pl;
    ASSERT_EQ(decode(&b, 1000, &whole), MKV_OK);
    ASSERT_EQ(mkv_placement_clip(&cli, &whole, 250, 500, &pl), MKV_OK);
    ASSERT(pl.size == 500 && pl.nreplicas == 2 && pl.replicas[0].nextents == 3);
    const te_extent *e = pl.replicas[0].extents;
    ASSERT(e[0].node_id == 1 && e[0].offset == 250 && e[0].length == 50);
    ASSERT(e[1].node_id == 2 && e[1].offset == 4096 && e[1].length == 400);
    ASSERT(e[2].node_id == 1 && e[2].offset == 8192 && e[2].length == 50);
    ASSERT_EQ(e[2].cap.length, 300);   /* the grant stays the whole extent's */
    ASSERT(pl.replicas[1].nextents == 1 && pl.replicas[1].extents == e + 3);
    ASSERT(pl.replicas[1].extents[0].offset == 64 + 250 && pl.replicas[1].extents[0].length == 500);
    mkv_placement_free(&pl);
    ASSERT_EQ(mkv_placement_clip(&cli, &whole, 900, 200, &pl), MKV_EPROTO);
    mkv_placement_free(&pl);   /* also on failure: ASan sees any leak */
    mkv_placement_free(&whole);
}

/* One malformed single-extent placement: node, offset, length of the
 * extent, and the cap's node, rights and length. */
static int one_bad(long long node, long long off, long long len, uint32_t cnode, uint32_t rights,
                   uint64_t clen, uint64_t size) {
    rbuf b = {.len = 0};
    put(&b, "*1\r\n*1\r\n", 8);
    extent(&b, node, off, len, cnode, rights, clen);
    mkv_placement pl;
    int rc = decode(&b, size, &pl);
    if (rc == MKV_OK) mkv_placement_free(&pl);
    return rc;
}

static void test_bad_extents(void) {
    ASSERT_EQ(one_bad(1, 0, 100, 1, TE_CAP_WRITE, 100, 100), MKV_OK);      /* the control */
    ASSERT_EQ(one_bad(1, 0, 100, 2, TE_CAP_WRITE, 100, 100), MKV_EPROTO);  /* cap for another node */
    ASSERT_EQ(one_bad(1, 0, 100, 1, TE_CAP_READ, 100, 100), MKV_EPROTO);   /* read cap for a write */
    ASSERT_EQ(one_bad(1, 0, 100, 1, TE_CAP_WRITE, 200, 100), MKV_EPROTO);  /* cap wider than extent */
    ASSERT_EQ(one_bad(1, 0, 99, 1, TE_CAP_WRITE, 99, 100), MKV_EPROTO);    /* short of the size */
    ASSERT_EQ(one_bad(1, 0, 101, 1, TE_CAP_WRITE, 101, 100), MKV_EPROTO);  /* beyond the size */
    ASSERT_EQ(one_bad(0, 0, 100, 0, TE_CAP_WRITE, 100, 100), MKV_EPROTO);  /* node 0 */
    ASSERT_EQ(one_bad(PROTO_MAX_NODES + 1, 0, 100, PROTO_MAX_NODES + 1, TE_CAP_WRITE, 100, 100),
              MKV_EPROTO);   /* beyond the node ids */
    ASSERT_EQ(one_bad(1, -64, 100, 1, TE_CAP_WRITE, 100, 100), MKV_EPROTO);
    ASSERT_EQ(one_bad(1, 0, 0, 1, TE_CAP_WRITE, 0, 100), MKV_EPROTO);      /* empty extent */
}

/* Extent lengths whose sum wraps around 2^64 never pass. */
static void test_overflowing_lengths(void) {
    rbuf b = {.len = 0};
    put(&b, "*1\r\n*2\r\n", 8);
    good_extent(&b, 1, 0, INT64_MAX);
    good_extent(&b, 2, 0, INT64_MAX);
    mkv_placement pl;
    ASSERT_EQ(decode(&b, 100, &pl), MKV_EPROTO);
    ASSERT(strstr(mkv_last_error(&cli), "malformed") != NULL);
}

static void test_bad_shapes(void) {
    static const char *const bad[] = {
        "*0\r\n",                               /* no replica */
        ":1\r\n",                               /* not an array */
        "*1\r\n*0\r\n",                         /* replica without extents */
        "*1\r\n:5\r\n",                         /* replica not an array */
        "*1\r\n*1\r\n*3\r\n:1\r\n:0\r\n:100\r\n",              /* extent without cap */
        "*1\r\n*1\r\n*4\r\n:1\r\n:0\r\n:100\r\n$3\r\nabc\r\n", /* cap of 3 bytes */
        "*1\r\n*1\r\n*4\r\n$1\r\n1\r\n:0\r\n:100\r\n$3\r\nabc\r\n", /* node as a string */
        "*9\r\n*0\r\n*0\r\n*0\r\n*0\r\n*0\r\n*0\r\n*0\r\n*0\r\n*0\r\n", /* 9 replicas */
        "-ERR nope\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rbuf b = {.len = 0};
        put(&b, bad[i], strlen(bad[i]));
        mkv_placement pl;
        int rc = decode(&b, 100, &pl);
        ASSERT_MSG(rc == MKV_EPROTO || (i == 8 && rc == MKV_EINVAL), "case %zu: %d", i, rc);
    }
}

static void test_located(void) {
    rbuf b = {.len = 0};
    const char *head = "*3\r\n:100\r\n:4294967295\r\n*1\r\n*1\r\n";
    put(&b, head, strlen(head));
    extent(&b, 1, 0, 100, 1, TE_CAP_READ, 100);
    redisReply *r = parse(&b);
    ASSERT(r);
    mkv_placement pl;
    int rc = mkv_located_decode(&cli, r, &pl);
    freeReplyObject(r);
    ASSERT_EQ(rc, MKV_OK);
    ASSERT_EQ(pl.size, 100);
    ASSERT_EQ(pl.crc, 4294967295u);
    mkv_placement_free(&pl);
    static const char *const bad[] = {"*3\r\n:0\r\n:1\r\n*0\r\n", "*3\r\n:10\r\n:4294967296\r\n*0\r\n",
                                      "*2\r\n:10\r\n:1\r\n", "$-1\r\n"};
    static const int want[] = {MKV_EPROTO, MKV_EPROTO, MKV_EPROTO, MKV_ENOTFOUND};
    for (size_t i = 0; i < 4; i++) {
        rbuf bb = {.len = 0};
        put(&bb, bad[i], strlen(bad[i]));
        r = parse(&bb);
        ASSERT(r);
        rc = mkv_located_decode(&cli, r, &pl);
        freeReplyObject(r);
        ASSERT_MSG(rc == want[i], "case %zu: %d", i, rc);
    }
}

static void test_error_classes(void) {
    static const struct { const char *msg; int code; } cases[] = {
        {"EXISTS key already exists", MKV_EEXISTS},
        {"NOSPACE cluster full: room for 1 of 2 replicas of 10 bytes", MKV_ENOSPACE},
        {"NOREPLICAS 3 replicas need 3 alive nodes, only 2 available", MKV_ENOREPLICAS},
        {"NOAUTH Authentication required.", MKV_EAUTH},
        {"NOTFOUND no such key", MKV_ENOTFOUND},
        {"TIMEDOUT put timed out and was revoked", MKV_ETIMEDOUT},
        {"WRONGPASS invalid username-password pair", MKV_EAUTH},
        /* the first word only: a sentence after ERR does not change it */
        {"ERR no such key", MKV_EINVAL},
        {"NODEDEAD node 2 left the cluster (drained): register again", MKV_EPROTO},
        {"ERR value is not an integer or out of range", MKV_EINVAL},
        {"ERRATA not a class", MKV_EPROTO},
        {"EXISTSX", MKV_EPROTO},
        {"", MKV_EPROTO},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = mkv_reply_error(&cli, cases[i].msg, strlen(cases[i].msg));
        ASSERT_MSG(rc == cases[i].code, "'%s': %d", cases[i].msg, rc);
        ASSERT(strstr(mkv_last_error(&cli), cases[i].msg) != NULL);
    }
}

/* The commands of o (RESP arrays), one reply object each: how many. */
static size_t out_commands(const mkv_out *o, redisReply **cmds, size_t most) {
    redisReader *rd = redisReaderCreate();
    redisReaderFeed(rd, o->buf, o->len);
    size_t n = 0;
    void *r = NULL;
    while (n < most && redisReaderGetReply(rd, &r) == REDIS_OK && r) cmds[n++] = r;
    redisReaderFree(rd);
    return n;
}

static int arg_is(const redisReply *cmd, size_t i, const char *want) {
    return i < cmd->elements && cmd->element[i]->type == REDIS_REPLY_STRING &&
           strcmp(cmd->element[i]->str, want) == 0;
}

/* Leases going back: a run of one expiry (a batch get's keys share
 * theirs) is one MOON.MRELEASE with its expiry once; shorter runs share
 * one MOON.RELEASE, key and expiry each; the list is empty after. */
static void test_leases_out(void) {
    mkv_leases d = {0};
    char key[16];
    for (int i = 0; i < 5; i++) {   /* a batch's five */
        snprintf(key, sizeof key, "a%d", i);
        mkv_lease_keep(&d, key, strlen(key), 100);
    }
    mkv_lease_keep(&d, "b0", 2, 200);
    mkv_lease_keep(&d, "b1", 2, 200);
    mkv_lease_keep(&d, "c0", 2, 300);
    mkv_lease_keep(&d, "none", 4, 0);   /* no lease: nothing to give back */
    mkv_out o = {0};
    ASSERT_EQ(mkv_leases_out(&d, &o), 2);
    ASSERT_EQ(d.n, 0);
    ASSERT_EQ(o.count, 2);
    redisReply *cmds[4];
    ASSERT_EQ(out_commands(&o, cmds, 4), 2);
    ASSERT_EQ(cmds[0]->elements, 7);
    ASSERT(arg_is(cmds[0], 0, "MOON.MRELEASE") && arg_is(cmds[0], 1, "100"));
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "a%d", i);
        ASSERT(arg_is(cmds[0], 2 + (size_t)i, key));
    }
    ASSERT_EQ(cmds[1]->elements, 7);
    ASSERT(arg_is(cmds[1], 0, "MOON.RELEASE"));
    ASSERT(arg_is(cmds[1], 1, "b0") && arg_is(cmds[1], 2, "200") && arg_is(cmds[1], 3, "b1") &&
           arg_is(cmds[1], 4, "200") && arg_is(cmds[1], 5, "c0") && arg_is(cmds[1], 6, "300"));
    for (int i = 0; i < 2; i++) freeReplyObject(cmds[i]);
    mkv_out_free(&o);
    ASSERT_EQ(mkv_leases_out(&d, &o), 0);   /* nothing waits: nothing added */
    ASSERT_EQ(o.len, 0);
    mkv_leases_free(&d);
}

int main(void) {
    RUN_TEST(test_two_replicas_striped);
    RUN_TEST(test_clip);
    RUN_TEST(test_bad_extents);
    RUN_TEST(test_overflowing_lengths);
    RUN_TEST(test_bad_shapes);
    RUN_TEST(test_located);
    RUN_TEST(test_error_classes);
    RUN_TEST(test_leases_out);
    TEST_EXIT();
}
