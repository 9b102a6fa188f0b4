/* Unit test of node/task.c: copy tasks as the master sends them in
 * heartbeat replies (RESP fed through hiredis's reader, as on the wire),
 * malformed ones refused, and the split of the source stream per
 * destination extent. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cap.h"
#include "node/task.h"
#include "test.h"

#define SELF 7   /* the node executing the tasks: its write caps name it */

/* "$64\r\n<cap>\r\n" for a cap over [off, off+len) of node, at out. */
static size_t cap_bulk(char *out, uint32_t node, uint32_t rights, long long off, long long len) {
    te_cap cap = {.node_id = node, .rights = rights, .offset = (uint64_t)off,
                  .length = (uint64_t)len, .expiry_ms = 1};
    uint8_t key[TE_CAP_KEY_LEN] = {0};
    te_cap_sign(&cap, key);
    uint8_t wire[TE_CAP_WIRE_LEN];
    te_cap_encode(&cap, wire);
    memcpy(out, "$64\r\n", 5);
    memcpy(out + 5, wire, sizeof wire);
    memcpy(out + 5 + 64, "\r\n", 2);
    return 5 + 64 + 2;
}

/* RESP from a template: '|' is "\r\n"; 'R' the read cap of the source
 * extent just written (its last three integers: node, offset, length),
 * 'W' the write cap of the destination just written (offset, length, on
 * SELF), 'C' a cap that matches no extent (node 1, bytes 0..99). */
static redisReply *parse_resp(const char *tmpl) {
    size_t len = strlen(tmpl), n = 0;
    char *buf = malloc(len * 80 + 1);
    long long ints[3] = {0};
    for (const char *p = tmpl; *p; p++) {
        if (*p == 'R') {
            n += cap_bulk(buf + n, (uint32_t)ints[0], TE_CAP_READ, ints[1], ints[2]);
        } else if (*p == 'W') {
            n += cap_bulk(buf + n, SELF, TE_CAP_WRITE, ints[1], ints[2]);
        } else if (*p == 'C') {
            n += cap_bulk(buf + n, 1, TE_CAP_READ, 0, 100);
        } else if (*p == '|') {
            buf[n++] = '\r';
            buf[n++] = '\n';
        } else {
            if (*p == ':') {
                ints[0] = ints[1];
                ints[1] = ints[2];
                ints[2] = strtoll(p + 1, NULL, 10);
            }
            buf[n++] = *p;
        }
    }
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    redisReaderFeed(rd, buf, n);
    if (redisReaderGetReply(rd, &reply) != REDIS_OK) reply = NULL;
    redisReaderFree(rd);
    free(buf);
    return reply;
}

static node_task *task_of(const char *tmpl, uint64_t *id) {
    redisReply *r = parse_resp(tmpl);
    if (!r) return NULL;
    node_task *t = node_task_parse(r, id);
    freeReplyObject(r);
    return t;
}

/* 100 bytes: sources 60 on node 2 + 40 on node 3; destinations 30 + 70. */
#define GOOD "*5|:9|$1|k|:100|*2|*4|:2|:1000|:60|R*4|:3|:0|:40|R*2|*3|:64|:30|W*3|:4096|:70|W"

static void test_parse_good(void) {
    uint64_t id;
    node_task *t = task_of(GOOD, &id);
    ASSERT(t);
    ASSERT_EQ(id, 9);
    ASSERT_EQ(t->id, 9);
    ASSERT_EQ(t->size, 100);
    ASSERT_EQ(t->len, 100);
    ASSERT_EQ(t->nsrc, 2);
    ASSERT_EQ(t->ndst, 2);
    ASSERT_EQ(t->src[0].node_id, 2);
    ASSERT_EQ(t->src[0].offset, 1000);
    ASSERT_EQ(t->src[1].node_id, 3);
    ASSERT_EQ(t->src[1].cap.length, 40);
    ASSERT_EQ(t->dst[1].offset, 4096);
    ASSERT_EQ(t->dst[1].length, 70);
    ASSERT_EQ(t->dst[1].node_id, SELF);
    node_task_free(t);
}

/* A node's share of a replica striped over nodes: 40 of the 100 bytes. */
static void test_parse_striped_share(void) {
    uint64_t id;
    node_task *t = task_of("*5|:9|$1|k|:100|*1|*4|:2|:60|:40|R*1|*3|:0|:40|W", &id);
    ASSERT(t);
    ASSERT_EQ(t->size, 100);
    ASSERT_EQ(t->len, 40);
    node_task_free(t);
    /* the two sides must still agree */
    ASSERT(task_of("*5|:9|$1|k|:100|*1|*4|:2|:60|:40|R*1|*3|:0|:39|W", &id) == NULL);
}

static void test_src_range(void) {
    uint64_t id;
    node_task *t = task_of(GOOD, &id);
    ASSERT(t);
    te_extent out[2];
    /* First destination: bytes 0..29, all on node 2. */
    int n = node_task_src_range(t, 0, 30, out);
    int ok1 = n == 1 && out[0].node_id == 2 && out[0].offset == 1000 && out[0].length == 30;
    /* Second: bytes 30..99 = 30 more on node 2 (from offset 1030), 40 on node 3. */
    n = node_task_src_range(t, 30, 70, out);
    int ok2 = n == 2 && out[0].offset == 1030 && out[0].length == 30 && out[1].node_id == 3 &&
              out[1].offset == 0 && out[1].length == 40;
    /* A range inside the second source only. */
    n = node_task_src_range(t, 70, 10, out);
    int ok3 = n == 1 && out[0].node_id == 3 && out[0].offset == 10 && out[0].length == 10;
    node_task_free(t);
    ASSERT(ok1);
    ASSERT(ok2);
    ASSERT(ok3);
}

static void test_parse_refuses(void) {
    static const char *bad[] = {
        /* not an array / wrong arity */
        ":1|",
        "*4|:9|$1|k|:100|*0|",
        /* task id 0 */
        "*5|:0|$1|k|:100|*1|*4|:2|:0|:100|R*1|*3|:0|:100|W",
        /* key not a string */
        "*5|:9|:1|:100|*1|*4|:2|:0|:100|R*1|*3|:0|:100|W",
        /* size 0, negative */
        "*5|:9|$1|k|:0|*1|*4|:2|:0|:100|R*1|*3|:0|:100|W",
        "*5|:9|$1|k|:-5|*1|*4|:2|:0|:100|R*1|*3|:0|:100|W",
        /* no sources, no destinations */
        "*5|:9|$1|k|:100|*0|*1|*3|:0|:100|W",
        "*5|:9|$1|k|:100|*1|*4|:2|:0|:100|R*0|",
        /* sources short of the destinations / beyond the size */
        "*5|:9|$1|k|:100|*1|*4|:2|:0|:99|R*1|*3|:0|:100|W",
        "*5|:9|$1|k|:100|*2|*4|:2|:0|:100|R*4|:3|:0|:1|R*1|*3|:0|:100|W",
        /* destinations sum wrong */
        "*5|:9|$1|k|:100|*1|*4|:2|:0|:100|R*1|*3|:0|:101|W",
        /* huge length that would wrap a sum */
        "*5|:9|$1|k|:100|*2|*4|:2|:0|:9223372036854775807|R*4|:3|:0|:101|R*1|*3|:0|:100|W",
        /* node 0, negative offset, zero length */
        "*5|:9|$1|k|:100|*1|*4|:0|:0|:100|R*1|*3|:0|:100|W",
        "*5|:9|$1|k|:100|*1|*4|:2|:-1|:100|R*1|*3|:0|:100|W",
        "*5|:9|$1|k|:100|*1|*4|:2|:0|:100|R*2|*3|:0|:0|W*3|:0|:100|W",
        /* cap not 64 bytes, not a string */
        "*5|:9|$1|k|:100|*1|*4|:2|:0|:100|$3|abc|*1|*3|:0|:100|W",
        "*5|:9|$1|k|:100|*1|*4|:2|:0|:100|:7|*1|*3|:0|:100|W",
        /* extent of the wrong shape */
        "*5|:9|$1|k|:100|*1|*3|:2|:0|:100|*1|*3|:0|:100|W",
        "*5|:9|$1|k|:100|*1|*4|:2|:0|:100|R*1|*4|:0|:100|C:1|",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redisReply *r = parse_resp(bad[i]);
        ASSERT_MSG(r != NULL, "case %zu: test input is not RESP", i);
        uint64_t id;
        node_task *t = node_task_parse(r, &id);
        freeReplyObject(r);
        node_task_free(t);
        ASSERT_MSG(t == NULL, "case %zu accepted", i);
    }
    /* The id of a malformed task is still known, so it can be failed. */
    uint64_t id = 0;
    ASSERT(task_of("*5|:9|$1|k|:0|*1|*4|:2|:0|:100|R*1|*3|:0|:100|W", &id) == NULL);
    ASSERT_EQ(id, 9);
}

/* More extents than the engine takes per replica: refused. */
static void test_parse_extent_limit(void) {
    int over = PROTO_MAX_EXTENTS + 1;
    static char tmpl[(PROTO_MAX_EXTENTS + 1) * 32 + 256];
    size_t n = (size_t)snprintf(tmpl, sizeof tmpl, "*5|:9|$1|k|:%d|*%d|", over, over);
    for (int i = 0; i < over; i++) n += (size_t)snprintf(tmpl + n, sizeof tmpl - n, "*4|:2|:%d|:1|R", i);
    snprintf(tmpl + n, sizeof tmpl - n, "*1|*3|:0|:%d|W", over);
    uint64_t id = 0;
    node_task *t = task_of(tmpl, &id);
    node_task_free(t);
    ASSERT(t == NULL);
    ASSERT_EQ(id, 9);
}

int main(void) {
    RUN_TEST(test_parse_good);
    RUN_TEST(test_parse_striped_share);
    RUN_TEST(test_src_range);
    RUN_TEST(test_parse_refuses);
    RUN_TEST(test_parse_extent_limit);
    TEST_EXIT();
}
