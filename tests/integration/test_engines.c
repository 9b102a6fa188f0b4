/* test_engines - the calls inference engines make, end to end against a
 * master with two memory nodes, a gateway and a standalone server:
 * scatter/gather batches (mkv_put_batchv / mkv_get_batchv, over TCP and
 * shm), per-key status in them, the prefix count (mkv_exists_prefix,
 * MOON.PREFIX), byte-range reads (mkv_get_range, GETRANGE) checked per
 * slice, and mkv_remove_all. Ports from h_free_ports. */
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "core/util.h"
#include "test.h"

#define PIECES   8
#define PIECE    (16u << 10)
#define TAIL     1000u                       /* an odd last piece */
#define OBJ      (PIECES * PIECE + TAIL)
#define NOBJ     32
#define ARENA    ((size_t)NOBJ * OBJ)
#define BIG      (12u << 20)                 /* three 4 MiB slices */

static int port_master, port_gw, port_sa, port_node0, port_data0;
static pid_t node_pid[2];
static char master_addr[32];
static uint32_t node_ids[2];

/* Page-aligned memory of at least n bytes (aligned_alloc wants a multiple). */
static void *palloc(size_t n) { return aligned_alloc(4096, (n + 4095) & ~(size_t)4095); }

static mkv_client *connect_to(const char *transport) {
    mkv_client *c = NULL;
    return h_mkv_connect(&c, master_addr, transport, 1) == MKV_OK ? c : NULL;
}

/* An arena of n objects, each PIECES pieces of PIECE bytes and a TAIL
 * piece, laid out piece-major (all objects' piece 0, then piece 1, ...),
 * as an engine's per-layer buffers are. */
static void layout(char *arena, size_t i, mkv_iov *iov) {
    for (int p = 0; p < PIECES; p++) iov[p] = (mkv_iov){arena + ((size_t)p * NOBJ + i) * PIECE, PIECE};
    iov[PIECES] = (mkv_iov){arena + (size_t)PIECES * NOBJ * PIECE + i * TAIL, TAIL};
}

/* The object i's bytes, contiguous, from its pieces. */
static void gather(const mkv_iov *iov, char *out) {
    for (int p = 0; p <= PIECES; p++) {
        memcpy(out, iov[p].buf, iov[p].len);
        out += iov[p].len;
    }
}

static void vec_roundtrip(const char *transport, const char *tag) {
    mkv_client *c = connect_to(transport);
    ASSERT(c);
    char *src = palloc(ARENA), *dst = palloc(ARENA), *flat = palloc(OBJ);
    h_fill(src, ARENA, 7);
    memset(dst, 0, ARENA);
    ASSERT(mkv_register_buffer(c, src, ARENA) == MKV_OK);
    ASSERT(mkv_register_buffer(c, dst, ARENA) == MKV_OK);
    ASSERT(mkv_register_buffer(c, flat, OBJ) == MKV_OK);
    static mkv_iov in[NOBJ][PIECES + 1], out[NOBJ][2];
    mkv_objv v[NOBJ];
    char keys[NOBJ][32];
    for (size_t i = 0; i < NOBJ; i++) {
        snprintf(keys[i], sizeof keys[i], "vec:%s:%zu", tag, i);
        layout(src, i, in[i]);
        v[i] = (mkv_objv){.key = keys[i], .keylen = strlen(keys[i]), .iov = in[i], .niov = PIECES + 1};
    }
    ASSERT(mkv_put_batchv(c, v, NOBJ, 0) == MKV_OK);
    for (size_t i = 0; i < NOBJ; i++) {
        ASSERT_EQ(v[i].status, MKV_OK);
        ASSERT_EQ(v[i].len, OBJ);
    }
    /* Read back into another layout: two uneven pieces per object, the
     * second larger than what is left (the object fills it only in part). */
    for (size_t i = 0; i < NOBJ; i++) {
        out[i][0] = (mkv_iov){dst + i * OBJ, 3 * PIECE + 17};
        out[i][1] = (mkv_iov){dst + i * OBJ + 3 * PIECE + 17, OBJ};   /* up to the arena's end at most */
        if (i == NOBJ - 1) out[i][1].len = OBJ - (3 * PIECE + 17);
        v[i] = (mkv_objv){.key = keys[i], .keylen = strlen(keys[i]), .iov = out[i], .niov = 2};
    }
    ASSERT(mkv_get_batchv(c, v, NOBJ) == MKV_OK);
    for (size_t i = 0; i < NOBJ; i++) {
        ASSERT_EQ(v[i].status, MKV_OK);
        ASSERT_EQ(v[i].len, OBJ);
        gather(in[i], flat);
        ASSERT_MEMEQ(dst + i * OBJ, flat, OBJ);
    }
    /* A plain get sees the concatenation; a plain put reads back in pieces. */
    size_t got = 0;
    ASSERT(mkv_get(c, keys[5], strlen(keys[5]), flat, OBJ, &got) == MKV_OK && got == OBJ);
    ASSERT_MEMEQ(flat, dst + 5 * OBJ, OBJ);
    char key[40];
    snprintf(key, sizeof key, "vec:%s:plain", tag);
    char *plain = palloc(OBJ);
    h_fill(plain, OBJ, 8);
    ASSERT(mkv_register_buffer(c, plain, OBJ) == MKV_OK);
    ASSERT(mkv_put(c, key, strlen(key), plain, OBJ, 0) == MKV_OK);
    mkv_objv one = {.key = key, .keylen = strlen(key), .iov = in[3], .niov = PIECES + 1};
    ASSERT(mkv_get_batchv(c, &one, 1) == MKV_OK && one.status == MKV_OK && one.len == OBJ);
    gather(in[3], flat);
    ASSERT_MEMEQ(flat, plain, OBJ);
    free(plain);
    mkv_transfer_stats st;
    mkv_transfer_stats_get(c, &st);
    printf("# %s: tcp %llu shm %llu bytes\n", tag, (unsigned long long)st.bytes_tcp, (unsigned long long)st.bytes_shm);
    if (strcmp(transport, "tcp") == 0) ASSERT(st.bytes_tcp > 0 && st.bytes_shm == 0);
    mkv_close(c);
    free(src);
    free(dst);
    free(flat);
}

static void test_vec_tcp(void) { vec_roundtrip("tcp", "tcp"); }
static void test_vec_shm(void) { vec_roundtrip("auto", "shm"); }

/* One batch, every outcome told apart per key. */
static void test_vec_status(void) {
    mkv_client *c = connect_to("tcp");
    ASSERT(c);
    size_t len = 1 << 20;
    char *buf = palloc(len), *loose = malloc(4096);
    h_fill(buf, len, 3);
    ASSERT(mkv_register_buffer(c, buf, len) == MKV_OK);
    ASSERT(mkv_put(c, "st:have", 7, buf, 4096, 0) == MKV_OK);
    /* 300 pieces of the same MiB: 300 MiB, more than both nodes hold */
    static mkv_iov huge[300];
    for (int i = 0; i < 300; i++) huge[i] = (mkv_iov){buf, len};
    mkv_iov small = {buf, 4096}, bad = {loose, 4096};
    mkv_objv v[5] = {
        {.key = "st:have", .keylen = 7, .iov = &small, .niov = 1},
        {.key = "st:huge", .keylen = 7, .iov = huge, .niov = 300},
        {.key = "st:loose", .keylen = 8, .iov = &bad, .niov = 1},
        {.key = "st:none", .keylen = 7, .iov = &small, .niov = 0},
        {.key = "st:new", .keylen = 6, .iov = &small, .niov = 1},
    };
    ASSERT(mkv_put_batchv(c, v, 5, 0) == MKV_OK);
    ASSERT_EQ(v[0].status, MKV_EEXISTS);
    ASSERT_EQ(v[1].status, MKV_ENOSPACE);
    ASSERT_EQ(v[2].status, MKV_ENOTREG);
    ASSERT_EQ(v[3].status, MKV_EINVAL);
    ASSERT_EQ(v[4].status, MKV_OK);
    /* gets: too small pieces (the size said), a missing key */
    mkv_iov tiny = {buf, 100};
    mkv_objv g[2] = {{.key = "st:new", .keylen = 6, .iov = &tiny, .niov = 1},
                     {.key = "st:gone", .keylen = 7, .iov = &small, .niov = 1}};
    ASSERT(mkv_get_batchv(c, g, 2) == MKV_OK);
    ASSERT_EQ(g[0].status, MKV_ETOOSMALL);
    ASSERT_EQ(g[0].len, 4096);
    ASSERT_EQ(g[1].status, MKV_ENOTFOUND);
    mkv_close(c);
    free(buf);
    free(loose);
}

static void test_prefix(void) {
    mkv_client *c = connect_to("tcp");
    ASSERT(c);
    enum { N = 4100 };   /* past one 4096-key chunk */
    char *buf = palloc(4096);
    h_fill(buf, 4096, 9);
    ASSERT(mkv_register_buffer(c, buf, 4096) == MKV_OK);
    static mkv_obj o[N + 2];
    static char keys[N + 2][24];
    for (int i = 0; i < N + 2; i++) {
        snprintf(keys[i], sizeof keys[i], "pfx:%d", i < N ? i : (i == N ? 999999 : 0));
        o[i] = (mkv_obj){.key = keys[i], .keylen = strlen(keys[i]), .buf = buf, .len = 64};
    }
    ASSERT(mkv_put_batch(c, o, N, 0) == MKV_OK);
    for (int i = 0; i < N; i++) ASSERT_EQ(o[i].status, MKV_OK);
    size_t hit = 99;
    ASSERT(mkv_exists_prefix(c, o, N + 2, &hit) == MKV_OK);
    ASSERT_EQ(hit, N);   /* the miss ends it, the hit after it does not count */
    ASSERT(mkv_exists_prefix(c, o + N, 2, &hit) == MKV_OK);
    ASSERT_EQ(hit, 0);
    ASSERT(mkv_exists_prefix(c, o, 10, &hit) == MKV_OK);
    ASSERT_EQ(hit, 10);
    ASSERT(mkv_exists_prefix(c, o, 0, &hit) == MKV_OK);
    ASSERT_EQ(hit, 0);
    /* the master's verb, and the RESP faces */
    redisContext *m = h_redis(port_master), *gw = h_redis(port_gw), *sa = h_redis(port_sa);
    ASSERT(m && gw && sa);
    redisReply *r = redisCommand(m, "MOON.PREFIX pfx:0 pfx:1 pfx:2 nope pfx:3");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 3);
    freeReplyObject(r);
    r = redisCommand(gw, "MOON.PREFIX pfx:0 pfx:1 nope pfx:3");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 2);
    freeReplyObject(r);
    freeReplyObject(redisCommand(sa, "SET sa:0 x"));
    freeReplyObject(redisCommand(sa, "SET sa:1 y"));
    r = redisCommand(sa, "MOON.PREFIX sa:0 sa:1 sa:2 sa:0");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 2);
    freeReplyObject(r);
    redisFree(m);
    redisFree(gw);
    redisFree(sa);
    mkv_close(c);
    free(buf);
}

/* A prefix lookup that pins its hits: a remove of a hit is refused
 * (MKV_ETRYAGAIN) until mkv_unpin, or until the pin's time runs out; keys
 * it did not count, and lookups without a pin, are as before. */
static void test_pin(void) {
    mkv_client *c = connect_to("tcp");
    ASSERT(c);
    char *buf = palloc(4096);
    h_fill(buf, 4096, 5);
    ASSERT(mkv_register_buffer(c, buf, 4096) == MKV_OK);
    enum { N = 6 };
    mkv_obj o[N + 1];
    char keys[N + 1][16];
    for (int i = 0; i <= N; i++) {
        snprintf(keys[i], sizeof keys[i], i < N ? "pin:%d" : "pin:none", i);
        o[i] = (mkv_obj){.key = keys[i], .keylen = strlen(keys[i]), .buf = buf, .len = 100};
    }
    ASSERT(mkv_put_batch(c, o, N, 0) == MKV_OK);
    /* pin:0..3, then a miss: pin:4 and pin:5 are not hits */
    mkv_obj look[5] = {o[0], o[1], o[2], o[3], o[N]};
    uint64_t pin = 0;
    size_t hit = 0;
    ASSERT_EQ(mkv_exists_prefix_pin(c, look, 5, 60000, &pin, &hit), MKV_OK);
    ASSERT_EQ(hit, 4);
    ASSERT(pin != 0);
    ASSERT_EQ(mkv_remove(c, "pin:2", 5), MKV_ETRYAGAIN);
    ASSERT(strstr(mkv_last_error(c), "pinned"));
    ASSERT_EQ(mkv_exists(c, "pin:2", 5), 1);
    char got[128];
    ASSERT_EQ(mkv_get(c, "pin:2", 5, buf + 2048, 1024, NULL), MKV_OK);
    memcpy(got, buf + 2048, 100);
    ASSERT(memcmp(got, buf, 100) == 0);
    ASSERT_EQ(mkv_remove(c, "pin:4", 5), MKV_OK);   /* not a hit: not pinned */
    size_t plain = 0;
    ASSERT_EQ(mkv_exists_prefix(c, look, 5, &plain), MKV_OK);   /* unpinned lookups unchanged */
    ASSERT_EQ(plain, 4);
    /* FLUSH passes pinned objects over */
    uint64_t removed = 0;
    ASSERT_EQ(mkv_remove_all(c, &removed), MKV_OK);
    ASSERT_EQ(mkv_exists(c, "pin:0", 5), 1);
    ASSERT_EQ(mkv_exists(c, "pin:5", 5), 0);
    size_t released = 0;
    ASSERT_EQ(mkv_unpin(c, pin, &released), MKV_OK);
    ASSERT_EQ(released, 4);
    ASSERT_EQ(mkv_unpin(c, pin, &released), MKV_OK);
    ASSERT_EQ(released, 0);
    ASSERT_EQ(mkv_remove(c, "pin:2", 5), MKV_OK);
    /* a short pin runs out by itself (bounded wait: 20 s) */
    uint64_t shortpin = 0;
    ASSERT_EQ(mkv_exists_prefix_pin(c, look, 1, 300, &shortpin, &hit), MKV_OK);
    ASSERT_EQ(hit, 1);
    ASSERT_EQ(mkv_remove(c, "pin:0", 5), MKV_ETRYAGAIN);
    int rc = MKV_ETRYAGAIN;
    for (int i = 0; i < 400 && rc == MKV_ETRYAGAIN; i++) {
        usleep(50000);
        rc = mkv_remove(c, "pin:0", 5);
    }
    ASSERT_EQ(rc, MKV_OK);
    /* bad arguments are refused before anything is sent */
    uint64_t none = 0;
    ASSERT_EQ(mkv_exists_prefix_pin(c, look, 1, 0, &none, &hit), MKV_EINVAL);
    ASSERT_EQ(mkv_exists_prefix_pin(c, look, 1, 600001, &none, &hit), MKV_EINVAL);
    ASSERT(strstr(mkv_last_error(c), "pin time"));
    ASSERT_EQ(mkv_unpin(c, 0, NULL), MKV_EINVAL);
    ASSERT_EQ(mkv_remove(c, "pin:1", 5), MKV_OK);
    ASSERT_EQ(mkv_remove(c, "pin:3", 5), MKV_OK);
    mkv_close(c);
    free(buf);
}

static int is_error(const redisReply *r, const char *prefix) {
    return r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, prefix, strlen(prefix)) == 0;
}

static int is_status(const redisReply *r, const char *want) {
    return r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, want) == 0;
}

static int is_int(const redisReply *r, const char *want) {
    return r && r->type == REDIS_REPLY_INTEGER && r->integer == atoll(want);
}

/* MOON.PREFIXPIN and MOON.UNPIN over RESP: a member's verbs; hostile
 * arguments get a clear error and pin nothing; a connection holds at
 * most PROTO_PIN_MAX_PER_CONN keys pinned. */
static void test_pin_resp(void) {
    redisContext *plain = h_redis(port_master);
    ASSERT(plain);
    ASSERT(h_command_is(plain, is_error, "NOAUTH", "MOON.PREFIXPIN 1 1000 k"));   /* not a member */
    redisFree(plain);
    redisContext *m = h_proven(h_redis(port_master), "");
    ASSERT(m);
    freeReplyObject(redisCommand(m, "MOON.PREFIX x"));
    mkv_client *c = connect_to("tcp");
    ASSERT(c);
    char *buf = palloc(4096);
    ASSERT(mkv_register_buffer(c, buf, 4096) == MKV_OK);
    ASSERT_EQ(mkv_put(c, "rp:0", 4, buf, 64, 0), MKV_OK);
    ASSERT(h_command_is(m, is_int, "1", "MOON.PREFIXPIN 77 60000 rp:0 rp:1"));
    ASSERT(h_command_is(m, is_error, "TRYAGAIN", "MOON.REMOVE rp:0"));
    ASSERT(h_command_is(m, is_int, "1", "MOON.UNPIN 77 78"));
    /* hostile input */
    ASSERT(h_command_is(m, is_error, "ERR pin time", "MOON.PREFIXPIN 1 0 rp:0"));
    ASSERT(h_command_is(m, is_error, "ERR pin time", "MOON.PREFIXPIN 1 600001 rp:0"));
    ASSERT(h_command_is(m, is_error, "ERR pin time", "MOON.PREFIXPIN 1 -5 rp:0"));
    ASSERT(h_command_is(m, is_error, "ERR pin time", "MOON.PREFIXPIN 1 99999999999999999999999 rp:0"));
    ASSERT(h_command_is(m, is_error, "ERR pin time", "MOON.PREFIXPIN 1 soon rp:0"));
    ASSERT(h_command_is(m, is_error, "ERR", "MOON.PREFIXPIN 0 1000 rp:0"));
    ASSERT(h_command_is(m, is_error, "ERR", "MOON.PREFIXPIN -1 1000 rp:0"));
    ASSERT(h_command_is(m, is_error, "ERR", "MOON.PREFIXPIN 9223372036854775808 1000 rp:0"));
    ASSERT(h_command_is(m, is_error, "ERR", "MOON.PREFIXPIN 1 1000"));
    ASSERT(h_command_is(m, is_error, "ERR", "MOON.UNPIN x"));
    ASSERT(h_command_is(m, is_error, "ERR", "MOON.UNPIN 0"));
    /* 4097 keys in one command, 4097 ids in one UNPIN */
    enum { HUGE = 4097 };
    const char **argv = calloc(HUGE + 3, sizeof *argv);
    size_t *lens = calloc(HUGE + 3, sizeof *lens);
    argv[0] = "MOON.PREFIXPIN";
    argv[1] = "5";
    argv[2] = "1000";
    for (int i = 0; i < HUGE; i++) argv[3 + i] = "rp:0";
    for (int i = 0; i < HUGE + 3; i++) lens[i] = strlen(argv[i]);
    redisReply *r = redisCommandArgv(m, HUGE + 3, argv, lens);
    ASSERT(is_error(r, "ERR"));
    freeReplyObject(r);
    argv[0] = "MOON.UNPIN";
    for (int i = 1; i <= HUGE; i++) argv[i] = "5", lens[i] = 1;
    lens[0] = strlen(argv[0]);
    r = redisCommandArgv(m, HUGE + 1, argv, lens);
    ASSERT(is_error(r, "ERR"));
    freeReplyObject(r);
    ASSERT(h_command_is(m, is_error, "TRYAGAIN", "MOON.REMOVE rp:0") == 0);   /* nothing was pinned */
    /* the bound per connection: one hit repeated 4096 times a command */
    ASSERT_EQ(mkv_put(c, "rp:0", 4, buf, 64, 0), MKV_OK);
    argv[0] = "MOON.PREFIXPIN";
    argv[2] = "60000";
    lens[0] = strlen(argv[0]);
    lens[2] = strlen(argv[2]);
    for (int i = 0; i < 4096; i++) argv[3 + i] = "rp:0", lens[3 + i] = 4;
    int ok = 0;
    for (int k = 0; k < 16; k++) {
        char id[16];
        snprintf(id, sizeof id, "%d", 100 + k);
        argv[1] = id;
        lens[1] = strlen(id);
        r = redisCommandArgv(m, 4096 + 3, argv, lens);
        ok += r && r->type == REDIS_REPLY_INTEGER && r->integer == 4096;
        freeReplyObject(r);
    }
    ASSERT_EQ(ok, 16);
    ASSERT(h_command_is(m, is_error, "ERR pin limit", "MOON.PREFIXPIN 200 60000 rp:0"));
    redisContext *m2 = h_proven(h_redis(port_master), "");   /* another connection has its own */
    ASSERT(m2 && h_command_is(m2, is_int, "1", "MOON.PREFIXPIN 201 1000 rp:0"));
    ASSERT(h_command_is(m2, is_int, "1", "MOON.UNPIN 201"));
    redisFree(m2);
    /* release them all in one command */
    argv[0] = "MOON.UNPIN";
    lens[0] = strlen(argv[0]);
    char ids[16][16];
    for (int k = 0; k < 16; k++) {
        snprintf(ids[k], sizeof ids[k], "%d", 100 + k);
        argv[1 + k] = ids[k];
        lens[1 + k] = strlen(ids[k]);
    }
    r = redisCommandArgv(m, 17, argv, lens);
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 16 * 4096);
    freeReplyObject(r);
    ASSERT(h_command_is(m, is_int, "1", "MOON.REMOVE rp:0"));
    free(argv);
    free(lens);
    redisFree(m);
    mkv_close(c);
    free(buf);
}

/* Ranges of a small object (checked whole) and of a 12 MiB one with
 * slice CRCs: a byte spoiled in its last slice fails only the ranges
 * that touch that slice. */
static void test_range(void) {
    mkv_client *c = connect_to("tcp");   /* a put over TCP sums its slices */
    ASSERT(c);
    char *val = palloc(BIG), *out = palloc(BIG);
    h_fill(val, BIG, 11);
    ASSERT(mkv_register_buffer(c, val, BIG) == MKV_OK);
    ASSERT(mkv_register_buffer(c, out, BIG) == MKV_OK);
    ASSERT(mkv_put(c, "rg:small", 8, val, 100000, 0) == MKV_OK);
    size_t got = 0;
    ASSERT(mkv_get_range(c, "rg:small", 8, 50000, out, 10000, &got) == MKV_OK && got == 10000);
    ASSERT_MEMEQ(out, val + 50000, 10000);
    ASSERT(mkv_get_range(c, "rg:small", 8, 99990, out, 100, &got) == MKV_OK && got == 10);
    ASSERT_MEMEQ(out, val + 99990, 10);
    ASSERT(mkv_get_range(c, "rg:small", 8, 100000, out, 100, &got) == MKV_OK && got == 0);
    ASSERT_EQ(mkv_get_range(c, "rg:none", 7, 0, out, 100, &got), MKV_ENOTFOUND);
    ASSERT(mkv_put(c, "rg:big", 6, val, BIG, 1) == MKV_OK);
    redisContext *m = h_redis(port_master);
    redisReply *r = m ? redisCommand(m, "MOON.GET rg:big") : NULL;
    ASSERT_MSG(r && r->type == REDIS_REPLY_ARRAY && r->elements >= 5 && r->element[3]->integer == 4 << 20,
               "rg:big keeps 4 MiB slice CRCs");
    freeReplyObject(r);
    redisFree(m);
    uint64_t at = (8u << 20) + 12345;    /* in the third slice */
    int node = -1;
    uint64_t seg_off = 0;
    ASSERT(h_locate_byte(port_master, "rg:big", 0, at, node_ids, 2, &node, &seg_off) == 0 && node >= 0);
    ASSERT(h_flip_segment_byte(node_pid[node], seg_off) == 0);
    /* a range inside the first two slices reads and checks only them */
    uint64_t off = (4u << 20) - 1000, len = 2u << 20;
    ASSERT(mkv_get_range(c, "rg:big", 6, off, out, len, &got) == MKV_OK && got == len);
    ASSERT_MEMEQ(out, val + off, len);
    ASSERT_EQ(mkv_get_range(c, "rg:big", 6, (8u << 20) + 1, out, 10, &got), MKV_ECORRUPT);
    ASSERT_EQ(mkv_get(c, "rg:big", 6, out, BIG, &got), MKV_ECORRUPT);
    mkv_close(c);
    free(val);
    free(out);
}

/* GETRANGE as Redis answers it, on the standalone server (a value past
 * 256 KiB keeps slice CRCs there) and through the gateway. */
static void getrange_on(int port) {
    redisContext *r = h_redis(port);
    ASSERT(r);
    freeReplyObject(redisCommand(r, "SET gr:hello %s", "Hello World"));
    static const struct {
        const char *start, *end, *want;
    } cases[] = {{"0", "4", "Hello"}, {"-5", "-1", "World"}, {"5", "2", ""}, {"0", "-1", "Hello World"},
                 {"-100", "2", "Hel"}, {"6", "1000", "World"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        redisReply *x = redisCommand(r, "GETRANGE gr:hello %s %s", cases[i].start, cases[i].end);
        ASSERT_MSG(x && x->type == REDIS_REPLY_STRING && strcmp(x->str, cases[i].want) == 0, "GETRANGE %s %s",
                   cases[i].start, cases[i].end);
        freeReplyObject(x);
    }
    redisReply *x = redisCommand(r, "GETRANGE gr:missing 0 10");
    ASSERT(x && x->type == REDIS_REPLY_STRING && x->len == 0);
    freeReplyObject(x);
    size_t n = 3u << 20;
    char *v = malloc(n);
    h_fill(v, n, 5);
    freeReplyObject(redisCommand(r, "SET gr:big %b", v, n));
    x = redisCommand(r, "GETRANGE gr:big 1048570 1048589");
    ASSERT(x && x->type == REDIS_REPLY_STRING && x->len == 20 && memcmp(x->str, v + 1048570, 20) == 0);
    freeReplyObject(x);
    free(v);
    redisFree(r);
}

static void test_getrange_standalone(void) { getrange_on(port_sa); }
static void test_getrange_gateway(void) { getrange_on(port_gw); }

static void test_remove_all(void) {
    mkv_client *c = connect_to("tcp");
    ASSERT(c);
    uint64_t removed = 0;
    ASSERT(mkv_remove_all(c, &removed) == MKV_OK);
    ASSERT(removed >= 4100);
    ASSERT_EQ(mkv_exists(c, "pfx:0", 5), 0);
    ASSERT(mkv_remove_all(c, &removed) == MKV_OK);
    ASSERT_EQ(removed, 0);
    mkv_close(c);
}

/* MOON.PREFIXPIN and MOON.UNPIN through the gateway (the RESP client's
 * own id, the master holding the pin): a pinned key stays through DEL on
 * the gateway and MOON.REMOVE on the master until unpinned; hostile
 * arguments pin nothing. */
static void test_pin_gateway(void) {
    redisContext *gw = h_redis(port_gw), *m = h_proven(h_redis(port_master), "");
    ASSERT(gw && m);
    ASSERT(h_command_is(gw, is_status, "OK", "SET pg:0 zero"));
    ASSERT(h_command_is(gw, is_status, "OK", "SET pg:1 one"));
    ASSERT(h_command_is(gw, is_int, "2", "MOON.PREFIXPIN 4242 60000 pg:0 pg:1 pg:2 pg:0"));
    ASSERT(h_command_is(m, is_error, "TRYAGAIN", "MOON.REMOVE pg:1"));
    ASSERT(h_command_is(gw, is_int, "0", "DEL pg:0"));
    ASSERT(h_command_is(gw, is_int, "2", "EXISTS pg:0 pg:1"));
    ASSERT(h_command_is(gw, is_int, "2", "MOON.UNPIN 4242 4243"));
    ASSERT(h_command_is(gw, is_int, "0", "MOON.UNPIN 4242"));
    ASSERT(h_command_is(gw, is_int, "1", "DEL pg:0"));
    /* a short pin runs out by itself (bounded wait, not a count of tries) */
    ASSERT(h_command_is(gw, is_int, "1", "MOON.PREFIXPIN 4244 300 pg:1"));
    ASSERT(h_command_is(m, is_error, "TRYAGAIN", "MOON.REMOVE pg:1"));
    int gone = 0;
    for (uint64_t t0 = mono_ms(); !gone && mono_ms() - t0 < 30000; usleep(50000)) {
        redisReply *r = redisCommand(gw, "DEL pg:1");
        gone = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        freeReplyObject(r);
    }
    ASSERT(gone);
    /* hostile input: nothing pinned */
    ASSERT(h_command_is(gw, is_status, "OK", "SET pg:0 zero"));
    ASSERT(h_command_is(gw, is_error, "ERR pin time", "MOON.PREFIXPIN 1 0 pg:0"));
    ASSERT(h_command_is(gw, is_error, "ERR pin time", "MOON.PREFIXPIN 1 600001 pg:0"));
    ASSERT(h_command_is(gw, is_error, "ERR pin time", "MOON.PREFIXPIN 1 soon pg:0"));
    ASSERT(h_command_is(gw, is_error, "ERR pin id", "MOON.PREFIXPIN 0 1000 pg:0"));
    ASSERT(h_command_is(gw, is_error, "ERR pin id", "MOON.PREFIXPIN 9223372036854775808 1000 pg:0"));
    ASSERT(h_command_is(gw, is_error, "ERR", "MOON.PREFIXPIN 1 1000"));
    ASSERT(h_command_is(gw, is_error, "ERR pin id", "MOON.UNPIN 7 x"));
    enum { HUGE = 4097 };
    const char **argv = calloc(HUGE + 3, sizeof *argv);
    size_t *lens = calloc(HUGE + 3, sizeof *lens);
    argv[0] = "MOON.PREFIXPIN", argv[1] = "5", argv[2] = "1000";
    for (int i = 0; i < HUGE; i++) argv[3 + i] = "pg:0";
    for (int i = 0; i < HUGE + 3; i++) lens[i] = strlen(argv[i]);
    redisReply *r = redisCommandArgv(gw, HUGE + 3, argv, lens);
    ASSERT(is_error(r, "ERR at most"));
    freeReplyObject(r);
    free(argv);
    free(lens);
    ASSERT(h_command_is(gw, is_int, "1", "DEL pg:0"));   /* nothing was pinned */
    redisFree(gw);
    redisFree(m);
}

/* The same verbs on a standalone server, which keeps the pins itself
 * with the master's semantics: DEL of a pinned key answers 0 and
 * FLUSHALL leaves it until MOON.UNPIN or its time; the same id again
 * holds a key once; hostile arguments pin nothing. */
static void test_pin_standalone(void) {
    redisContext *sa = h_redis(port_sa);
    ASSERT(sa);
    ASSERT(h_command_is(sa, is_status, "OK", "SET ps:0 zero"));
    ASSERT(h_command_is(sa, is_status, "OK", "SET ps:1 one"));
    ASSERT(h_command_is(sa, is_status, "OK", "SET ps:3 three"));
    ASSERT(h_command_is(sa, is_int, "2", "MOON.PREFIXPIN 4242 60000 ps:0 ps:1 ps:2 ps:3"));
    ASSERT(h_command_is(sa, is_int, "2", "MOON.PREFIXPIN 4242 60000 ps:0 ps:1"));   /* held once */
    ASSERT(h_command_is(sa, is_int, "0", "DEL ps:0"));
    ASSERT(h_command_is(sa, is_int, "1", "DEL ps:3"));   /* past the miss: not pinned */
    ASSERT(h_command_is(sa, is_status, "OK", "FLUSHALL"));
    ASSERT(h_command_is(sa, is_int, "2", "EXISTS ps:0 ps:1"));
    ASSERT(h_command_is(sa, is_int, "2", "MOON.UNPIN 4242 4243"));
    ASSERT(h_command_is(sa, is_int, "0", "MOON.UNPIN 4242"));
    ASSERT(h_command_is(sa, is_int, "1", "DEL ps:0"));
    /* a short pin runs out by itself (bounded wait, not a count of tries) */
    ASSERT(h_command_is(sa, is_int, "1", "MOON.PREFIXPIN 4244 300 ps:1"));
    ASSERT(h_command_is(sa, is_int, "0", "DEL ps:1"));
    int gone = 0;
    for (uint64_t t0 = mono_ms(); !gone && mono_ms() - t0 < 30000; usleep(50000)) {
        redisReply *r = redisCommand(sa, "DEL ps:1");
        gone = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        freeReplyObject(r);
    }
    ASSERT(gone);
    /* hostile input: nothing pinned */
    ASSERT(h_command_is(sa, is_status, "OK", "SET ps:0 zero"));
    ASSERT(h_command_is(sa, is_error, "ERR pin time", "MOON.PREFIXPIN 1 0 ps:0"));
    ASSERT(h_command_is(sa, is_error, "ERR pin time", "MOON.PREFIXPIN 1 600001 ps:0"));
    ASSERT(h_command_is(sa, is_error, "ERR pin id", "MOON.PREFIXPIN 0 1000 ps:0"));
    ASSERT(h_command_is(sa, is_error, "ERR pin id", "MOON.PREFIXPIN 9223372036854775808 1000 ps:0"));
    ASSERT(h_command_is(sa, is_error, "ERR", "MOON.PREFIXPIN 1 1000"));
    ASSERT(h_command_is(sa, is_error, "ERR pin id", "MOON.UNPIN 7 x"));
    ASSERT(h_command_is(sa, is_int, "1", "DEL ps:0"));
    /* the bound: 65,536 keys pinned at once on the server (its clients
     * share it, as a gateway's); one hit repeated 4096 times a command */
    ASSERT(h_command_is(sa, is_status, "OK", "SET ps:0 zero"));
    const char **argv = calloc(4096 + 3, sizeof *argv);
    size_t *lens = calloc(4096 + 3, sizeof *lens);
    char ids[17][16];
    int ok = 0;
    for (int k = 0; k < 17; k++) {
        snprintf(ids[k], sizeof ids[k], "%d", 100 + k);
        argv[0] = "MOON.PREFIXPIN", argv[1] = ids[k], argv[2] = "60000";
        for (int i = 0; i < 4096; i++) argv[3 + i] = "ps:0";
        for (int i = 0; i < 4096 + 3; i++) lens[i] = strlen(argv[i]);
        redisReply *r = redisCommandArgv(sa, 4096 + 3, argv, lens);
        ok += r && r->type == REDIS_REPLY_INTEGER && r->integer == 4096;
        if (k == 16) ASSERT(is_error(r, "ERR pin limit"));
        freeReplyObject(r);
    }
    ASSERT_EQ(ok, 16);
    argv[0] = "MOON.UNPIN";
    for (int k = 0; k < 17; k++) argv[1 + k] = ids[k], lens[1 + k] = strlen(ids[k]);
    lens[0] = strlen(argv[0]);
    redisReply *r = redisCommandArgv(sa, 18, argv, lens);
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 16 * 4096);
    freeReplyObject(r);
    ASSERT(h_command_is(sa, is_int, "1", "DEL ps:0"));
    free(argv);
    free(lens);
    redisFree(sa);
}

int main(void) {
    h_init(300);
    int base = h_free_ports(8);
    if (base < 0) {
        printf("not ok - ports: no free block\n");
        return 1;
    }
    port_master = base;
    port_gw = base + 1;
    port_sa = base + 2;
    port_node0 = base + 3;   /* and +4 */
    port_data0 = base + 5;   /* and +6 */
    snprintf(master_addr, sizeof master_addr, "127.0.0.1:%d", port_master);
    char gw_master[48];
    snprintf(gw_master, sizeof gw_master, "--master=%s", master_addr);
    static const char *const gw_flags[] = {"--replicas", "1", NULL};
    if (h_start_master(port_master, NULL) < 0 ||
        (node_pid[0] = h_start_node_unscrubbed(port_master, port_node0, port_data0, "64MB")) < 0 ||
        (node_pid[1] = h_start_node_unscrubbed(port_master, port_node0 + 1, port_data0 + 1, "64MB")) < 0 ||
        h_wait_nodes(port_master, "alive", 2, 20000) != 0 ||
        h_node_ids(port_master, port_data0, node_ids, 2) != 0 ||
        h_start_gateway(port_master, port_gw, gw_flags, NULL) < 0) {
        printf("not ok - start: master, 2 nodes and a gateway did not come up\n");
        h_stop_all();
        return 1;
    }
    h_args a = {0};
    h_arg(&a, h_server_bin());
    h_argf(&a, "--port=%d", port_sa);
    h_arg(&a, "--segment-size");
    h_arg(&a, "32MB");
    h_arg(&a, "--prefault");
    h_arg(&a, "no");
    h_arg(&a, "--log-level");
    h_arg(&a, "warning");
    if (h_ready(h_spawn(a.v), "127.0.0.1", port_sa, NULL, 20000) < 0) {
        printf("not ok - start: standalone did not come up\n");
        h_stop_all();
        return 1;
    }
    RUN_TEST(test_vec_tcp);
    RUN_TEST(test_vec_shm);
    RUN_TEST(test_vec_status);
    RUN_TEST(test_prefix);
    RUN_TEST(test_range);
    RUN_TEST(test_getrange_standalone);
    RUN_TEST(test_getrange_gateway);
    RUN_TEST(test_remove_all);
    RUN_TEST(test_pin);
    RUN_TEST(test_pin_resp);
    RUN_TEST(test_pin_gateway);
    RUN_TEST(test_pin_standalone);
    h_stop_all();
    TEST_EXIT();
}
