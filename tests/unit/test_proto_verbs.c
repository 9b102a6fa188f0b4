/* Unit tests of src/proto's verbs (verbs.h), their encoders (cmd.h) and
 * the reply decoders (replies.h; replicas.h: the array forms of
 * PUTSTART and GET; task.h: HEARTBEAT's tasks): the verb list is whole and has
 * each name once; every encoder's vector, sent as RESP and parsed by the
 * server's request parser (resp/), arrives as exactly the arguments it
 * was given; every reply, written as the master writes it (resp_writer),
 * decodes to what was written, and cut at any byte reads as incomplete,
 * never as a reply; wrong shapes are refused. */
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cap.h"
#include "core/crc32c.h"
#include "proto/cmd.h"
#include "proto/extents.h"
#include "proto/limits.h"
#include "proto/register.h"
#include "proto/replicas.h"
#include "proto/replies.h"
#include "proto/slices.h"
#include "proto/task.h"
#include "proto/verbs.h"
#include "resp/resp_parser.h"
#include "resp/resp_writer.h"
#include "test.h"

/* ---- the verbs ---- */

static void test_verbs_once(void) {
    ASSERT_EQ(proto_nverbs, 38);
    for (size_t i = 0; i < proto_nverbs; i++) {
        const char *v = proto_verbs[i];
        ASSERT_MSG(strncmp(v, "MOON.", 5) == 0 && v[5], "%s", v);
        for (size_t j = 0; j < i; j++) ASSERT_MSG(strcmp(v, proto_verbs[j]) != 0, "%s twice", v);
        char lower[32];
        size_t n = strlen(v);
        for (size_t k = 0; k <= n; k++) lower[k] = (char)(v[k] >= 'A' && v[k] <= 'Z' ? v[k] + 32 : v[k]);
        ASSERT(proto_verb_lookup(lower, n) == v);
        ASSERT(proto_verb_lookup(v, n - 1) == NULL);   /* a cut name is none */
    }
    ASSERT(proto_verb_lookup("MOON.GETX", 9) == NULL);
    ASSERT(proto_verb_lookup("MOON.GET\0T", 10) == NULL);
    ASSERT(proto_verb_lookup("GET", 3) == NULL);
}

/* ---- the encoders ---- */

/* cmd, sent as RESP and parsed as the master parses a request, is the
 * argc arguments given (C strings, or "\x01" + index into bins). */
static const void *bins[4];
static size_t binlens[4];

static void expect_cmd(proto_cmd *cmd, int argc, ...) {
    resp_buf b;
    resp_buf_init(&b);
    proto_cmd_resp(cmd, &b);
    resp_parser *p = resp_parser_create(NULL);
    size_t used = 0;
    resp_status st = resp_parser_feed(p, b.data, b.len, &used);
    va_list ap;
    va_start(ap, argc);
    int ok = st == RESP_COMMAND && used == b.len && resp_parser_argc(p) == argc && cmd->argc == argc;
    char why[128] = "";
    if (!ok) snprintf(why, sizeof why, "st %d argc %d/%d want %d", st, resp_parser_argc(p), cmd->argc, argc);
    for (int i = 0; ok && i < argc; i++) {
        const char *want = va_arg(ap, const char *);
        const void *w = want;
        size_t wl = strlen(want);
        if (want[0] == '\x01') w = bins[want[1] - '0'], wl = binlens[want[1] - '0'];
        const resp_arg *a = &resp_parser_argv(p)[i];
        ok = a->len == wl && memcmp(a->ptr, w, wl) == 0 && cmd->lens[i] == wl;
        if (!ok) snprintf(why, sizeof why, "argument %d: '%.*s'", i, (int)a->len, a->ptr);
    }
    va_end(ap);
    resp_parser_free(p);
    resp_buf_free(&b);
    proto_cmd_free(cmd);
    ASSERT_MSG(ok, "%s", why);
}

static void test_cmd_bare_and_keys(void) {
    proto_cmd c;
    static const uint8_t key[] = {'k', 0, '\r', '\n', 0xff};
    bins[0] = key, binlens[0] = sizeof key;
    proto_cmd_bare(&c, PROTO_VERB_CHALLENGE);
    ASSERT_STEP(expect_cmd(&c, 1, "MOON.CHALLENGE"));
    proto_cmd_bare(&c, PROTO_VERB_TOPOLOGY);
    ASSERT_STEP(expect_cmd(&c, 1, "MOON.TOPOLOGY"));
    proto_cmd_bare(&c, PROTO_VERB_FLUSH);
    ASSERT_STEP(expect_cmd(&c, 1, "MOON.FLUSH"));
    const char *one[] = {PROTO_VERB_GET, PROTO_VERB_EXISTS, PROTO_VERB_REMOVE, PROTO_VERB_OBJECT,
                         PROTO_VERB_PUTREVOKE};
    for (size_t i = 0; i < 5; i++) {
        proto_cmd_key(&c, one[i], key, sizeof key);
        ASSERT_STEP(expect_cmd(&c, 2, one[i], "\x01" "0"));
    }
    proto_cmd_keys_begin(&c, PROTO_VERB_MGETPACKED, 2);
    proto_cmd_bin(&c, key, sizeof key);
    proto_cmd_bin(&c, "b", 1);
    ASSERT_STEP(expect_cmd(&c, 3, "MOON.MGETPACKED", "\x01" "0", "b"));
    proto_cmd_keys_begin(&c, PROTO_VERB_MREMOVE, 2);
    proto_cmd_bin(&c, key, sizeof key);
    proto_cmd_bin(&c, "b", 1);
    ASSERT_STEP(expect_cmd(&c, 3, "MOON.MREMOVE", "\x01" "0", "b"));
    /* many keys: the vector leaves its inline room */
    proto_cmd_keys_begin(&c, PROTO_VERB_PREFIX, 100);
    for (int i = 0; i < 100; i++) proto_cmd_u64(&c, (uint64_t)i * 1000003);
    ASSERT_EQ(c.argc, 101);
    ASSERT(c.argv != c.argv_in);
    ASSERT_EQ(c.lens[100], 8);
    ASSERT(memcmp(c.argv[100], "99000297", 8) == 0);
    ASSERT(memcmp(c.argv[1], "0", 1) == 0);
    proto_cmd_free(&c);
}

static void test_cmd_membership(void) {
    proto_cmd c;
    proto_cmd_prove(&c, "00ff");
    ASSERT_STEP(expect_cmd(&c, 2, "MOON.PROVE", "00ff"));
    proto_cmd_holdlink(&c, "abcd", 7, "i1");
    ASSERT_STEP(expect_cmd(&c, 4, "MOON.HOLDLINK", "abcd", "7", "i1"));
    const char *addrs[] = {"tcp:127.0.0.1:1", "shm:/x"};
    proto_register_args a = {.proof_hex = "pp", .segment_size = 1ULL << 40, .addrs = addrs, .naddrs = 2,
                             .instance_hex = "ins", .seen_max = 9};
    proto_cmd_register(&c, &a);
    ASSERT_STEP(expect_cmd(&c, 9, "MOON.REGISTER", "pp", "1099511627776", "tcp:127.0.0.1:1", "shm:/x",
                           "INSTANCE", "ins", "SEEN", "9"));
    a.claim_id = 3, a.kept = 1;
    proto_cmd_register(&c, &a);
    ASSERT_STEP(expect_cmd(&c, 13, "MOON.REGISTER", "pp", "1099511627776", "tcp:127.0.0.1:1", "shm:/x",
                           "CLAIM", "3", "KEPT", "1", "INSTANCE", "ins", "SEEN", "9"));
    a.claim_again = 1, a.kept = 0;
    proto_cmd_register(&c, &a);
    ASSERT_STEP(expect_cmd(&c, 11, "MOON.REGISTER", "pp", "1099511627776", "tcp:127.0.0.1:1", "shm:/x",
                           "ID", "3", "INSTANCE", "ins", "SEEN", "9"));
    proto_cmd_heartbeat(&c, 4294967295u, 18446744073709551615ULL, 0);
    ASSERT_STEP(expect_cmd(&c, 3, "MOON.HEARTBEAT", "4294967295", "18446744073709551615"));
    proto_cmd_slotexport(&c, "b", 7, 3, 65536, 1u << 20);
    ASSERT_STEP(expect_cmd(&c, 6, "MOON.SLOTEXPORT", "b", "7", "3", "65536", "1048576"));
    proto_cmd_lent_begin(&c, 3, 2);
    proto_cmd_lent_add(&c, 0, 1048576, 4096);
    proto_cmd_lent_add(&c, 1, 64, 128);
    ASSERT_STEP(expect_cmd(&c, 8, "MOON.LENT", "3", "L", "1048576", "4096", "B", "64", "128"));
    proto_cmd_heartbeat(&c, 2, 10, 4096);
    ASSERT_STEP(expect_cmd(&c, 5, "MOON.HEARTBEAT", "2", "10", "disk_free", "4096"));
    proto_cmd_node(&c, PROTO_VERB_LEAVE, 2);
    ASSERT_STEP(expect_cmd(&c, 2, "MOON.LEAVE", "2"));
    proto_cmd_node(&c, PROTO_VERB_DRAIN, 5);
    ASSERT_STEP(expect_cmd(&c, 2, "MOON.DRAIN", "5"));
    proto_cmd_nodes(&c, 1);
    ASSERT_STEP(expect_cmd(&c, 2, "MOON.NODES", "EXPECTED"));
    proto_cmd_nodes(&c, 0);
    ASSERT_STEP(expect_cmd(&c, 1, "MOON.NODES"));
    proto_cmd_suspect_begin(&c, 2);
    proto_cmd_u64(&c, 3);
    proto_cmd_u64(&c, 4);
    ASSERT_STEP(expect_cmd(&c, 3, "MOON.SUSPECT", "3", "4"));
    proto_cmd_gateway(&c, "127.0.0.1:7000");
    ASSERT_STEP(expect_cmd(&c, 2, "MOON.GATEWAY", "127.0.0.1:7000"));
}

static void test_cmd_holdings_and_reports(void) {
    proto_cmd c;
    proto_cmd_holdings(&c, 3, 12, 1, 250);
    ASSERT_STEP(expect_cmd(&c, 7, "MOON.HOLDINGS", "3", "12", "PACKED", "SLICES", "WAIT", "250"));
    proto_cmd_holdings(&c, 3, 0, 0, 0);
    ASSERT_STEP(expect_cmd(&c, 4, "MOON.HOLDINGS", "3", "0", "PACKED"));
    proto_cmd_holdings(&c, 3, 5, PROTO_HOLDINGS_SLICES | PROTO_HOLDINGS_TASKS, 250);
    ASSERT_STEP(expect_cmd(&c, 8, "MOON.HOLDINGS", "3", "5", "PACKED", "SLICES", "TASKS", "WAIT", "250"));
    proto_cmd_copydone_begin(&c, 2);
    proto_cmd_copydone_add(&c, 10, 1);
    proto_cmd_copydone_add(&c, 11, 0);
    ASSERT_STEP(expect_cmd(&c, 5, "MOON.COPYDONE", "10", "OK", "11", "FAIL"));
    proto_cmd_badreplica_begin(&c, 2, 1);
    proto_cmd_badreplica_add(&c, "key", 3, 4096);
    ASSERT_STEP(expect_cmd(&c, 4, "MOON.BADREPLICA", "2", "key", "4096"));
    proto_cmd_reportdone_begin(&c, 0);
    ASSERT_STEP(expect_cmd(&c, 1, "MOON.REPORTDONE"));
    /* MOON.REPORT's head and a blob behind it parse as one command */
    char head[PROTO_REPORT_HEAD_MAX];
    static const char blob[] = "\0\1\2packed";
    size_t hl = proto_report_head(head, sizeof head, sizeof blob);
    resp_buf b;
    resp_buf_init(&b);
    resp_buf_append(&b, head, hl);
    resp_buf_append(&b, blob, sizeof blob);
    resp_buf_append(&b, "\r\n", 2);
    resp_parser *p = resp_parser_create(NULL);
    size_t used;
    int st = resp_parser_feed(p, b.data, b.len, &used);
    int ok = st == RESP_COMMAND && used == b.len && resp_parser_argc(p) == 3 &&
             strcmp(resp_parser_argv(p)[0].ptr, PROTO_VERB_REPORT) == 0 &&
             strcmp(resp_parser_argv(p)[1].ptr, "PACKED") == 0 && resp_parser_argv(p)[2].len == sizeof blob &&
             memcmp(resp_parser_argv(p)[2].ptr, blob, sizeof blob) == 0;
    resp_parser_free(p);
    resp_buf_free(&b);
    ASSERT(ok);
}

static void test_cmd_put_and_leases(void) {
    proto_cmd c;
    proto_cmd_putstart(&c, "k", 1, 1 << 20, 2);
    ASSERT_STEP(expect_cmd(&c, 5, "MOON.PUTSTART", "k", "1048576", "REPLICAS", "2"));
    proto_cmd_mputstart_begin(&c, 1, 2);
    proto_cmd_mputstart_add(&c, "a", 1, 10);
    proto_cmd_mputstart_add(&c, "b", 1, 20);
    ASSERT_STEP(expect_cmd(&c, 8, "MOON.MPUTSTART", "REPLICAS", "1", "PACKED", "a", "10", "b", "20"));
    proto_cmd_putend(&c, "k", 1, 4294967295u, NULL);
    ASSERT_STEP(expect_cmd(&c, 3, "MOON.PUTEND", "k", "4294967295"));
    static const uint8_t packed[8] = {1, 2, 3, 4, 0, '\r', '\n', 8};
    bins[1] = packed, binlens[1] = sizeof packed;
    proto_slices_arg sl = {.size = PROTO_SLICE_MIN, .packed = packed, .len = sizeof packed};
    proto_cmd_putend(&c, "k", 1, 7, &sl);
    ASSERT_STEP(expect_cmd(&c, 6, "MOON.PUTEND", "k", "7", "SLICES", "65536", "\x01" "1"));
    proto_cmd_mputend_begin(&c, 0, 2);
    proto_cmd_mputend_add(&c, "a", 1, 1, &sl);   /* PACKED: no slices whatever sl says */
    proto_cmd_mputend_add(&c, "b", 1, 2, NULL);
    ASSERT_STEP(expect_cmd(&c, 6, "MOON.MPUTEND", "PACKED", "a", "1", "b", "2"));
    proto_cmd_mputend_begin(&c, 1, 2);
    proto_cmd_mputend_add(&c, "a", 1, 1, &sl);
    proto_cmd_mputend_add(&c, "b", 1, 2, NULL);   /* SLICES: "0" and none */
    ASSERT_STEP(expect_cmd(&c, 10, "MOON.MPUTEND", "SLICES", "a", "1", "65536", "\x01" "1", "b", "2", "0", ""));
    proto_cmd_release_begin(&c, 2);
    proto_cmd_release_add(&c, "a", 1, 100);
    proto_cmd_release_add(&c, "b", 1, 200);
    ASSERT_STEP(expect_cmd(&c, 5, "MOON.RELEASE", "a", "100", "b", "200"));
    proto_cmd_mrelease_begin(&c, 300, 2);
    proto_cmd_bin(&c, "a", 1);
    proto_cmd_bin(&c, "b", 1);
    ASSERT_STEP(expect_cmd(&c, 4, "MOON.MRELEASE", "300", "a", "b"));
    proto_cmd_scan(&c, 18446744073709551615ULL, 10);
    ASSERT_STEP(expect_cmd(&c, 4, "MOON.SCAN", "18446744073709551615", "COUNT", "10"));
    proto_cmd_prefixpin_begin(&c, 9223372036854775807ULL, 600000, 2);
    proto_cmd_bin(&c, "a", 1);
    proto_cmd_bin(&c, "b", 1);
    ASSERT_STEP(expect_cmd(&c, 5, "MOON.PREFIXPIN", "9223372036854775807", "600000", "a", "b"));
    proto_cmd_repin_begin(&c, 5, 1000, 1);
    proto_cmd_bin(&c, "a", 1);
    ASSERT_STEP(expect_cmd(&c, 4, "MOON.REPIN", "5", "1000", "a"));
    proto_cmd_unpin(&c, 1);
    ASSERT_STEP(expect_cmd(&c, 2, "MOON.UNPIN", "1"));
}

/* A batch cut into several commands starts each with the same head as the
 * one-command encoder: the gateway's batcher and libmoonkv must agree. */
static void test_batch_heads(void) {
    const char *h[PROTO_MPUTSTART_HEAD];
    ASSERT_EQ(proto_mputstart_head(h, "3"), 4);
    proto_cmd c;
    proto_cmd_mputstart_begin(&c, 3, 0);
    ASSERT_EQ(c.argc, 4);
    for (int i = 0; i < 4; i++) ASSERT_STREQ(h[i], c.argv[i]);
    const char *e[PROTO_MPUTEND_HEAD];
    ASSERT_EQ(proto_mputend_head(e), 2);
    proto_cmd_mputend_begin(&c, 0, 0);
    ASSERT_EQ(c.argc, 2);
    for (int i = 0; i < 2; i++) ASSERT_STREQ(e[i], c.argv[i]);
}

/* ---- the replies ---- */

/* b read whole: the reply (used the whole buffer); every cut of it reads
 * as incomplete, never as a reply. */
static redisReply *read_every_cut(const resp_buf *b) {
    for (size_t cut = 0; cut < b->len; cut++) {
        redisReply *r = NULL;
        int rc = proto_reply_read(b->data, cut, &r, NULL);
        if (rc != PROTO_REPLY_INCOMPLETE || r) {
            printf("# cut at %zu of %zu read as %d\n", cut, b->len, rc);
            if (r) freeReplyObject(r);
            return NULL;
        }
    }
    redisReply *r = NULL;
    size_t used = 0;
    if (proto_reply_read(b->data, b->len, &r, &used) != PROTO_REPLY_WHOLE || used != b->len) {
        if (r) freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* MOON.MREMOVE's answer, read at every cut: removed, none, a key's
 * refusal; a wrong count or another element type is refused. */
static void test_reply_removed(void) {
    resp_buf b;
    resp_buf_init(&b);
    resp_add_array(&b, 3);
    resp_add_integer(&b, 1);
    resp_add_error(&b, "TRYAGAIN key pinned by a prefix lookup for up to 5 ms (MOON.UNPIN)");
    resp_add_integer(&b, 0);
    redisReply *r = read_every_cut(&b);
    ASSERT(r);
    int f[3] = {9, 9, 9};
    int ok = r && proto_dec_removed(r, 3, f) == 0 && f[0] == 1 && f[1] == -1 && f[2] == 0 &&
             proto_dec_removed(r, 2, f) == -1 && proto_dec_flags(r, 3, f) == -1;
    ASSERT(ok);
    ASSERT(r && strncmp(r->element[1]->str, "TRYAGAIN", 8) == 0);
    if (r) freeReplyObject(r);
    resp_buf_clear(&b);
    resp_add_array(&b, 2);
    resp_add_integer(&b, 1);
    resp_add_bulk_cstr(&b, "1");
    r = read_every_cut(&b);
    ASSERT(r);
    f[0] = 7;
    ASSERT(r && proto_dec_removed(r, 2, f) == -1 && f[0] == 7);
    if (r) freeReplyObject(r);
    resp_buf_clear(&b);
    resp_add_error(&b, "MOVED 5 b");
    r = read_every_cut(&b);
    ASSERT(r && proto_dec_removed(r, 1, f) == -1);
    if (r) freeReplyObject(r);
    resp_buf_free(&b);
}

static void test_reply_int_and_flags(void) {
    resp_buf b;
    resp_buf_init(&b);
    resp_add_integer(&b, 4096);
    redisReply *r = read_every_cut(&b);
    ASSERT(r);
    long long v = 0;
    int ok = proto_dec_int(r, 0, 4096, &v) == 0 && v == 4096 && proto_dec_int(r, 0, 4095, &v) == -1 &&
             proto_dec_ok(r) == -1 && proto_dec_flags(r, 1, (int[1]){0}) == -1;
    freeReplyObject(r);
    ASSERT(ok);
    resp_buf_clear(&b);
    resp_add_array(&b, 3);
    resp_add_integer(&b, 1);
    resp_add_integer(&b, 0);
    resp_add_integer(&b, 1);
    r = read_every_cut(&b);
    ASSERT(r);
    int f[3] = {9, 9, 9};
    ok = proto_dec_flags(r, 3, f) == 0 && f[0] == 1 && f[1] == 0 && f[2] == 1 && proto_dec_flags(r, 2, f) == -1;
    freeReplyObject(r);
    ASSERT(ok);
    /* a flag that is no integer: refused, out untouched */
    resp_buf_clear(&b);
    resp_add_array(&b, 2);
    resp_add_integer(&b, 1);
    resp_add_bulk_cstr(&b, "1");
    r = read_every_cut(&b);
    ASSERT(r);
    f[0] = 7;
    ok = proto_dec_flags(r, 2, f) == -1 && f[0] == 7;
    freeReplyObject(r);
    ASSERT(ok);
    resp_buf_clear(&b);
    resp_add_simple(&b, "OK");
    r = read_every_cut(&b);
    ASSERT(r);
    ok = proto_dec_ok(r) == 0 && proto_dec_int(r, 0, 1, &v) == -1;
    freeReplyObject(r);
    ASSERT(ok);
    resp_buf_clear(&b);
    resp_add_error(&b, "NOSPACE full");
    r = read_every_cut(&b);
    ASSERT(r);
    ok = r->type == REDIS_REPLY_ERROR && proto_dec_ok(r) == -1 && proto_dec_int(r, 0, 1, &v) == -1;
    freeReplyObject(r);
    resp_buf_free(&b);
    ASSERT(ok);
}

static void test_reply_nonce_scan(void) {
    resp_buf b;
    resp_buf_init(&b);
    uint8_t nonce[PROTO_NONCE_LEN];
    for (int i = 0; i < PROTO_NONCE_LEN; i++) nonce[i] = (uint8_t)(i * 37 + 13);
    nonce[3] = '\r', nonce[4] = '\n';
    resp_add_bulk(&b, nonce, sizeof nonce);
    redisReply *r = read_every_cut(&b);
    ASSERT(r);
    const uint8_t *got = proto_dec_nonce(r);
    int ok = got && memcmp(got, nonce, sizeof nonce) == 0;
    freeReplyObject(r);
    ASSERT(ok);
    resp_buf_clear(&b);
    resp_add_bulk(&b, nonce, sizeof nonce - 1);
    r = read_every_cut(&b);
    ASSERT(r);
    ok = proto_dec_nonce(r) == NULL;
    freeReplyObject(r);
    ASSERT(ok);
    /* SCAN: [cursor, [keys]] as the master writes it */
    resp_buf_clear(&b);
    resp_add_array(&b, 2);
    resp_add_bulk_cstr(&b, "18446744073709551615");
    resp_add_array(&b, 2);
    resp_add_bulk_cstr(&b, "a");
    resp_add_bulk(&b, "b\0c", 3);
    r = read_every_cut(&b);
    ASSERT(r);
    uint64_t next = 0;
    const redisReply *keys = NULL;
    ok = proto_dec_scan(r, &next, &keys) == 0 && next == UINT64_MAX && keys && keys->elements == 2 &&
         keys->element[1]->len == 3;
    freeReplyObject(r);
    ASSERT(ok);
    /* a cursor past u64, one not a number, an empty key: refused */
    static const char *bad_cursor[] = {"18446744073709551616", "12x", "", "-1"};
    for (size_t i = 0; i < 4; i++) {
        resp_buf_clear(&b);
        resp_add_array(&b, 2);
        resp_add_bulk_cstr(&b, bad_cursor[i]);
        resp_add_array(&b, 0);
        r = read_every_cut(&b);
        ASSERT(r);
        ok = proto_dec_scan(r, &next, &keys) == -1;
        freeReplyObject(r);
        ASSERT_MSG(ok, "cursor '%s'", bad_cursor[i]);
    }
    resp_buf_clear(&b);
    resp_add_array(&b, 2);
    resp_add_bulk_cstr(&b, "0");
    resp_add_array(&b, 1);
    resp_add_bulk(&b, "", 0);
    r = read_every_cut(&b);
    ASSERT(r);
    ok = proto_dec_scan(r, &next, &keys) == -1;
    freeReplyObject(r);
    resp_buf_free(&b);
    ASSERT(ok);
}

/* MOON.OBJECT's flat map with state st (NULL: no state field). */
static void object_map(resp_buf *b, const char *st, long long size, long long crc) {
    resp_add_array(b, st ? 10 : 8);
    if (st) {
        resp_add_bulk_cstr(b, "state");
        resp_add_bulk_cstr(b, st);
    }
    resp_add_bulk_cstr(b, "size");
    resp_add_integer(b, size);
    resp_add_bulk_cstr(b, "crc");
    resp_add_integer(b, crc);
    resp_add_bulk_cstr(b, "created");
    resp_add_integer(b, 1700000000000LL);
    resp_add_bulk_cstr(b, "replicas");
    resp_add_array(b, 1);
    resp_add_array(b, 3);
    resp_add_integer(b, 1);
    resp_add_integer(b, 0);
    resp_add_integer(b, size);
}

static void test_reply_object(void) {
    static const struct { const char *st; long long size, crc; int want; } cases[] = {
        {"complete", 1 << 20, 0xdeadbeef, 1}, {"pending", 10, 1, 0}, {NULL, 10, 1, -1},
        {"complete", -1, 1, -1}, {"complete", 10, 1LL << 32, -1}, {"complete", 0, 0, 1},
    };
    resp_buf b;
    resp_buf_init(&b);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        resp_buf_clear(&b);
        object_map(&b, cases[i].st, cases[i].size, cases[i].crc);
        redisReply *r = read_every_cut(&b);
        ASSERT(r);
        uint64_t size = 0;
        uint32_t crc = 0;
        int got = proto_dec_object(r, &size, &crc);
        freeReplyObject(r);
        ASSERT_MSG(got == cases[i].want, "case %zu: %d", i, got);
        if (got == 1) ASSERT(size == (uint64_t)cases[i].size && crc == (uint32_t)cases[i].crc);
    }
    resp_buf_clear(&b);
    resp_add_null(&b, 2);
    redisReply *r = read_every_cut(&b);
    ASSERT(r);
    uint64_t size;
    uint32_t crc;
    int got = proto_dec_object(r, &size, &crc);
    freeReplyObject(r);
    resp_buf_free(&b);
    ASSERT_EQ(got, 0);
}

/* ---- the array forms of MOON.PUTSTART and MOON.GET (replicas.h) ---- */

static uint8_t cap_key[TE_CAP_KEY_LEN] = {7, 1};
#define OSZ (100u << 10)   /* two slices of PROTO_SLICE_MIN */
static obj_extent rep_a[2] = {{2, 4096, 60u << 10}, {5, 0, 40u << 10}}, rep_b[1] = {{3, 128, OSZ}};
static obj_replica two_reps[2] = {{2, rep_a}, {1, rep_b}};

/* Whether out holds two_reps, every cap g's for op on its extent. */
static int replicas_are(const proto_placed *out, const proto_grant *g, te_op op) {
    if (out->nreplicas != 2 || out->nextents != 3 || out->err) return 0;
    for (uint32_t r = 0; r < 2; r++) {
        if (out->next[r] != two_reps[r].nextents) return 0;
        for (uint32_t k = 0; k < out->next[r]; k++) {
            const obj_extent *w = &two_reps[r].extents[k];
            const te_extent *e = &out->ext[r][k];
            if (e->node_id != w->node || e->offset != w->offset || e->length != w->length ||
                te_cap_check(&e->cap, g->key, g->term, w->node, op, w->offset, w->length, g->expiry_ms - 1) != TE_OK)
                return 0;
        }
    }
    return 1;
}

static void test_reply_replicas(void) {
    object o = {.size = OSZ, .nreplicas = 2, .rep.list = two_reps, .rep_list = 1};
    proto_grant g = {TE_CAP_WRITE, 5000, cap_key, 12, 77};
    resp_buf b;
    resp_buf_init(&b);
    proto_replicas_encode(&b, &o, &g);
    redisReply *r = read_every_cut(&b);
    ASSERT(r);
    proto_extbuf buf = {0};
    proto_placed out;
    int ok = proto_dec_replicas(r, OSZ, TE_CAP_WRITE, &buf, &out) == 0 && replicas_are(&out, &g, TE_WRITE);
    /* another size, or read rights, is refused whole */
    int refused = proto_dec_replicas(r, OSZ - 1, TE_CAP_WRITE, &buf, &out) == -1 && out.nreplicas == 0 &&
                  proto_dec_replicas(r, OSZ, TE_CAP_READ, &buf, &out) == -1;
    freeReplyObject(r);
    ASSERT(ok);
    ASSERT(refused);
    static const char *const bad[] = {
        "*0\r\n", ":1\r\n", "*1\r\n*0\r\n", "*1\r\n:5\r\n", "-ERR nope\r\n",
        "*1\r\n*1\r\n*4\r\n:1\r\n:0\r\n:100\r\n$3\r\nabc\r\n",
        "*9\r\n*0\r\n*0\r\n*0\r\n*0\r\n*0\r\n*0\r\n*0\r\n*0\r\n*0\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = NULL;
        ASSERT_EQ(proto_reply_read(bad[i], strlen(bad[i]), &r, NULL), PROTO_REPLY_WHOLE);
        int rc = proto_dec_replicas(r, 100, TE_CAP_WRITE, &buf, &out);
        freeReplyObject(r);
        ASSERT_MSG(rc == -1, "case %zu", i);
    }
    proto_extbuf_free(&buf);
    resp_buf_free(&b);
}

/* GET's [size, crc, replicas(, slice size, slice CRCs)] as the master
 * writes it; slices of 64 KiB over 100 KiB: two CRCs that combine to the
 * object's, or (bad) do not. */
static void location(resp_buf *b, const proto_grant *g, int sliced, int bad_slices) {
    static uint8_t data[OSZ];
    for (size_t i = 0; i < OSZ; i++) data[i] = (uint8_t)(i * 7);
    const size_t sl = PROTO_SLICE_MIN;
    object o = {.size = OSZ, .nreplicas = 2, .rep.list = two_reps, .rep_list = 1};
    resp_add_array(b, sliced ? 5 : 3);
    resp_add_integer(b, OSZ);
    resp_add_integer(b, crc32c(0, data, OSZ));
    proto_replicas_encode(b, &o, g);
    if (!sliced) return;
    uint32_t crc[2] = {crc32c(0, data, sl), crc32c(0, data + sl, OSZ - sl) ^ (bad_slices ? 1u : 0u)};
    uint8_t packed[8];
    proto_slices_pack(&(proto_slices){.size = sl, .count = 2, .crc = crc}, packed);
    resp_add_integer(b, (long long)sl);
    resp_add_bulk(b, packed, sizeof packed);
}

static void test_reply_location(void) {
    proto_grant g = {TE_CAP_READ, 5000, cap_key, 0, 77};
    proto_extbuf buf = {0};
    resp_buf b;
    resp_buf_init(&b);
    for (int sliced = 0; sliced < 2; sliced++) {
        resp_buf_clear(&b);
        location(&b, &g, sliced, 0);
        redisReply *r = read_every_cut(&b);
        ASSERT(r);
        proto_location loc;
        int got = proto_dec_location(r, &buf, &loc);
        freeReplyObject(r);
        ASSERT_MSG(got == 1, "sliced %d: %d", sliced, got);
        ASSERT(loc.size == OSZ && replicas_are(&loc.reps, &g, TE_READ));
        ASSERT(sliced ? loc.slices.count == 2 && loc.slices.size == PROTO_SLICE_MIN : loc.slices.count == 0);
        proto_slices_free(&loc.slices);
    }
    resp_buf_clear(&b);
    location(&b, &g, 1, 1);   /* slice CRCs that do not combine */
    redisReply *r = read_every_cut(&b);
    ASSERT(r);
    proto_location loc;
    int got = proto_dec_location(r, &buf, &loc);
    freeReplyObject(r);
    ASSERT_EQ(got, -1);
    resp_buf_clear(&b);
    resp_add_null(&b, 2);
    r = read_every_cut(&b);
    ASSERT(r);
    got = proto_dec_location(r, &buf, &loc);
    freeReplyObject(r);
    ASSERT_EQ(got, 0);
    static const char *const bad[] = {"*3\r\n:0\r\n:1\r\n*0\r\n", "*3\r\n:10\r\n:4294967296\r\n*0\r\n",
                                      "*2\r\n:10\r\n:1\r\n", "*4\r\n:10\r\n:1\r\n*0\r\n:1\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = NULL;
        ASSERT_EQ(proto_reply_read(bad[i], strlen(bad[i]), &r, NULL), PROTO_REPLY_WHOLE);
        got = proto_dec_location(r, &buf, &loc);
        freeReplyObject(r);
        ASSERT_MSG(got == -1, "case %zu", i);
    }
    proto_extbuf_free(&buf);
    resp_buf_free(&b);
}

/* ---- HEARTBEAT's tasks (task.h) ---- */

/* A task as the master writes it (master_cmds.c reply_task): copy
 * (src and dst), offload (src, DISK, crc; a share's: and where each src
 * extent lies in the object), load (dst, LOAD, crc) or push (dst on other
 * nodes, PUSH, crc). */
static void task_reply_at(resp_buf *b, int kind, uint64_t size, const obj_extent *src, uint32_t nsrc,
                          const obj_extent *dst, uint32_t ndst, const char *word, const uint64_t *places,
                          uint32_t nplaces) {
    proto_grant rd = {TE_CAP_READ, 9000, cap_key, 0, 77}, wr = {TE_CAP_WRITE, 8000, cap_key, 5, 77};
    resp_add_array(b, kind == PROTO_COPY_TASK ? 5 : places ? 7 : 6);
    resp_add_integer(b, 42);
    resp_add_bulk(b, "obj:1", 5);
    resp_add_integer(b, (long long)size);
    if (kind == PROTO_PUSH_TASK) proto_extents_encode(b, PROTO_EXT_REMOTE, dst, ndst, &wr);
    if (kind == PROTO_COPY_TASK || kind == PROTO_OFFLOAD_TASK) proto_extents_encode(b, PROTO_EXT_REMOTE, src, nsrc, &rd);
    if (kind == PROTO_COPY_TASK || kind == PROTO_LOAD_TASK) proto_extents_encode(b, PROTO_EXT_LOCAL, dst, ndst, &wr);
    if (kind == PROTO_COPY_TASK) return;
    resp_add_bulk_cstr(b, word);
    resp_add_integer(b, 0xfeedbeef);
    if (!places) return;
    resp_add_array(b, nplaces);
    for (uint32_t i = 0; i < nplaces; i++) resp_add_integer(b, (long long)places[i]);
}

static void task_reply(resp_buf *b, int kind, uint64_t size, const obj_extent *src, uint32_t nsrc,
                       const obj_extent *dst, uint32_t ndst, const char *word) {
    task_reply_at(b, kind, size, src, nsrc, dst, ndst, word, NULL, 0);
}

/* Decodes b read at every cut: 0 with *t, or -1. */
static int task_of(const resp_buf *b, proto_task *t) {
    redisReply *r = read_every_cut(b);
    if (!r) return -2;
    int rc = proto_dec_task(r, t);
    if (rc == 0 && t->key) {   /* the key points into the reply: check it before it goes */
        int same = t->keylen == 5 && memcmp(t->key, "obj:1", 5) == 0;
        t->key = same ? "obj:1" : NULL;
    }
    freeReplyObject(r);
    return rc;
}

static void test_reply_tasks(void) {
    /* a copy of a 100 KiB object's share of 60 KiB: from node 2, into this node's two extents */
    obj_extent src[1] = {{2, 4096, 60u << 10}}, dst[2] = {{7, 0, 20u << 10}, {7, 1u << 20, 40u << 10}};
    resp_buf b;
    resp_buf_init(&b);
    task_reply(&b, PROTO_COPY_TASK, OSZ, src, 1, dst, 2, NULL);
    proto_task t;
    ASSERT_EQ(task_of(&b, &t), 0);
    int ok = t.id == 42 && t.kind == PROTO_COPY_TASK && t.size == OSZ && t.len == (60u << 10) && t.nsrc == 1 &&
             t.ndst == 2 && t.src[0].node_id == 2 && t.src[0].offset == 4096 && t.dst[1].offset == (1u << 20) &&
             t.dst[1].node_id == 7 && t.expiry_ms == 8000 && !t.key;
    proto_task_free(&t);
    ASSERT(ok);
    /* an offload of the whole object from this node, a load of it into two extents */
    obj_extent whole[1] = {{7, 512, OSZ}}, halves[2] = {{7, 0, OSZ / 2}, {7, 1u << 20, OSZ / 2}};
    resp_buf_clear(&b);
    task_reply(&b, PROTO_OFFLOAD_TASK, OSZ, whole, 1, NULL, 0, PROTO_TASK_DISK);
    ASSERT_EQ(task_of(&b, &t), 0);
    ok = t.kind == PROTO_OFFLOAD_TASK && t.len == OSZ && t.nsrc == 1 && t.ndst == 0 && t.crc == 0xfeedbeef &&
         t.key && t.expiry_ms == 9000;
    proto_task_free(&t);
    ASSERT(ok);
    resp_buf_clear(&b);
    task_reply(&b, PROTO_LOAD_TASK, OSZ, NULL, 0, halves, 2, PROTO_TASK_LOAD);
    ASSERT_EQ(task_of(&b, &t), 0);
    ok = t.kind == PROTO_LOAD_TASK && t.len == OSZ && t.nsrc == 0 && t.ndst == 2 && t.key && t.expiry_ms == 8000;
    proto_task_free(&t);
    ASSERT(ok);
    /* a push of this node's disk record to node 3's two extents */
    obj_extent there[2] = {{3, 0, OSZ / 2}, {3, 1u << 20, OSZ / 2}};
    resp_buf_clear(&b);
    task_reply(&b, PROTO_PUSH_TASK, OSZ, NULL, 0, there, 2, PROTO_TASK_PUSH);
    ASSERT_EQ(task_of(&b, &t), 0);
    ok = t.kind == PROTO_PUSH_TASK && t.len == OSZ && t.nsrc == 0 && t.ndst == 2 && t.dst[1].node_id == 3 &&
         t.dst[1].offset == (1u << 20) && t.key && t.expiry_ms == 8000;
    proto_task_free(&t);
    ASSERT(ok);
    /* an offload, and a push, of this node's share of an object striped
     * over nodes: fewer bytes than the object (pushes of shares since
     * c105a87); more than the object is refused */
    resp_buf_clear(&b);
    task_reply(&b, PROTO_OFFLOAD_TASK, OSZ, src, 1, NULL, 0, PROTO_TASK_DISK);
    ASSERT_EQ(task_of(&b, &t), 0);
    ok = t.kind == PROTO_OFFLOAD_TASK && t.nsrc == 1 && t.len == src[0].length && t.len < OSZ && t.ndst == 0;
    proto_task_free(&t);
    ASSERT(ok);
    resp_buf_clear(&b);
    task_reply(&b, PROTO_PUSH_TASK, OSZ, NULL, 0, src, 1, PROTO_TASK_PUSH);
    ASSERT_EQ(task_of(&b, &t), 0);
    ok = t.kind == PROTO_PUSH_TASK && t.ndst == 1 && t.len == src[0].length && t.len < OSZ;
    proto_task_free(&t);
    ASSERT(ok);
    /* a share's offload says where each of its extents lies in the
     * object: in order, not overlapping, inside it; one per extent */
    obj_extent two[2] = {{7, 0, 20u << 10}, {7, 1u << 20, 20u << 10}};
    struct { uint64_t at[2]; uint32_t n; int ok; } places[] = {
        {{0, 40u << 10}, 2, 1}, {{20u << 10, OSZ - (20u << 10)}, 2, 1}, {{40u << 10, 0}, 2, 0},
        {{0, 10u << 10}, 2, 0}, {{0, OSZ - 1}, 2, 0}, {{0, 0}, 1, 0},
    };
    for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
        resp_buf_clear(&b);
        task_reply_at(&b, PROTO_OFFLOAD_TASK, OSZ, two, 2, NULL, 0, PROTO_TASK_DISK, places[i].at, places[i].n);
        int rc = task_of(&b, &t);
        ok = places[i].ok ? rc == 0 && t.obj_off && t.obj_off[0] == places[i].at[0] && t.obj_off[1] == places[i].at[1]
                          : rc == -1 && t.id == 42 && !t.obj_off;
        proto_task_free(&t);
        ASSERT_MSG(ok, "places case %zu", i);
    }
    resp_buf_clear(&b);   /* not for a whole object, nor for a load */
    task_reply_at(&b, PROTO_OFFLOAD_TASK, OSZ, whole, 1, NULL, 0, PROTO_TASK_DISK, places[0].at, 1);
    ASSERT(task_of(&b, &t) == -1 && t.id == 42);
    resp_buf_clear(&b);
    task_reply_at(&b, PROTO_LOAD_TASK, OSZ, NULL, 0, two, 2, PROTO_TASK_LOAD, places[0].at, 2);
    ASSERT(task_of(&b, &t) == -1 && t.id == 42);
    resp_buf_clear(&b);
    task_reply(&b, PROTO_PUSH_TASK, src[0].length - 1, NULL, 0, src, 1, PROTO_TASK_PUSH);
    ASSERT(task_of(&b, &t) == -1 && t.id == 42);
    /* refused whole, the id still told: sides that disagree, a word unknown */
    resp_buf_clear(&b);
    task_reply(&b, PROTO_COPY_TASK, OSZ, src, 1, halves, 2, NULL);
    ASSERT(task_of(&b, &t) == -1 && t.id == 42 && !t.src && !t.dst);
    resp_buf_clear(&b);
    task_reply(&b, PROTO_LOAD_TASK, OSZ, NULL, 0, halves, 2, "SAVE");
    ASSERT(task_of(&b, &t) == -1 && t.id == 42);
    static const char *const bad[] = {"*5\r\n:0\r\n$1\r\nk\r\n:1\r\n*0\r\n*0\r\n", ":42\r\n",
                                      "*4\r\n:1\r\n$1\r\nk\r\n:1\r\n*0\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redisReply *r = NULL;
        ASSERT_EQ(proto_reply_read(bad[i], strlen(bad[i]), &r, NULL), PROTO_REPLY_WHOLE);
        int rc = proto_dec_task(r, &t);
        freeReplyObject(r);
        ASSERT_MSG(rc == -1 && t.id == 0, "case %zu", i);
    }
    resp_buf_free(&b);
}

static void test_reply_holdings_registered(void) {
    resp_buf b;
    resp_buf_init(&b);
    resp_add_array(&b, 2);
    resp_add_integer(&b, 77);
    resp_add_bulk(&b, "\0\1\r\n", 4);
    redisReply *r = read_every_cut(&b);
    ASSERT(r);
    uint64_t acked = 0;
    const uint8_t *blob = NULL;
    size_t len = 0;
    int ok = proto_dec_holdings(r, &acked, &blob, &len) == 0 && acked == 77 && len == 4 &&
             memcmp(blob, "\0\1\r\n", 4) == 0 && !proto_holdings_tasks(r);
    freeReplyObject(r);
    ASSERT(ok);
    /* with TASKS: a third element, the tasks (an array) */
    resp_buf_clear(&b);
    resp_add_array(&b, 3);
    resp_add_integer(&b, 78);
    resp_add_bulk(&b, "", 0);
    resp_add_array(&b, 1);
    resp_add_integer(&b, 9);
    r = read_every_cut(&b);
    ASSERT(r);
    const redisReply *ts = NULL;
    ok = proto_dec_holdings(r, &acked, &blob, &len) == 0 && acked == 78 && len == 0 &&
         (ts = proto_holdings_tasks(r)) && ts->elements == 1;
    freeReplyObject(r);
    ASSERT(ok);
    resp_buf_clear(&b);   /* a third element that is not an array */
    resp_add_array(&b, 3);
    resp_add_integer(&b, 78);
    resp_add_bulk(&b, "", 0);
    resp_add_integer(&b, 9);
    r = read_every_cut(&b);
    ASSERT(r);
    ok = proto_dec_holdings(r, &acked, &blob, &len) == -1 && !proto_holdings_tasks(r);
    freeReplyObject(r);
    ASSERT(ok);
    resp_buf_clear(&b);
    resp_add_array(&b, 2);
    resp_add_integer(&b, -1);
    resp_add_bulk(&b, "", 0);
    r = read_every_cut(&b);
    ASSERT(r);
    ok = proto_dec_holdings(r, &acked, &blob, &len) == -1;
    freeReplyObject(r);
    ASSERT(ok);
    /* REGISTER: [id, key hex, heartbeat ms, term, reconcile] */
    char hex[2 * TE_CAP_KEY_LEN + 1];
    for (int i = 0; i < 2 * TE_CAP_KEY_LEN; i++) hex[i] = "0123456789abcdef"[(i * 7) & 15];
    hex[2 * TE_CAP_KEY_LEN] = 0;
    long long fields[][4] = {{5, 1000, 3, 2}, {0, 1000, 3, 2}, {5, 0, 3, 2}, {5, 1000, 0, 2},
                             {5, 1000, 3, PROTO_REG_RECONCILE + 1}, {4294967296LL, 1000, 3, 2}};
    int want[] = {0, -1, -1, -1, -1, -1};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        resp_buf_clear(&b);
        resp_add_array(&b, 5);
        resp_add_integer(&b, fields[i][0]);
        resp_add_bulk_cstr(&b, hex);
        resp_add_integer(&b, fields[i][1]);
        resp_add_integer(&b, fields[i][2]);
        resp_add_integer(&b, fields[i][3]);
        r = read_every_cut(&b);
        ASSERT(r);
        proto_registered reg;
        int got = proto_dec_registered(r, &reg);
        freeReplyObject(r);
        ASSERT_MSG(got == want[i], "case %zu", i);
        if (got == 0)
            ASSERT(reg.id == 5 && reg.heartbeat_ms == 1000 && reg.term == 3 && reg.reconcile == 2 &&
                   reg.cap_key[0] == 0x07 && reg.cap_key[1] == 0xe5);
    }
    resp_buf_clear(&b);
    resp_add_array(&b, 5);
    resp_add_integer(&b, 5);
    resp_add_bulk_cstr(&b, "zz");   /* not the key's hex */
    resp_add_integer(&b, 1000);
    resp_add_integer(&b, 3);
    resp_add_integer(&b, 2);
    r = read_every_cut(&b);
    ASSERT(r);
    proto_registered reg;
    ok = proto_dec_registered(r, &reg) == -1;
    freeReplyObject(r);
    resp_buf_free(&b);
    ASSERT(ok);
}

/* MOON.TOPOLOGY's entry [id, state, [addr ...]] with naddrs addresses. */
static void topo_entry(resp_buf *b, long long id, const char *state, int naddrs, size_t addrlen) {
    char addr[TE_ADDR_LEN + 8];
    memset(addr, 'a', sizeof addr);
    resp_add_array(b, 3);
    resp_add_integer(b, id);
    resp_add_bulk_cstr(b, state);
    resp_add_array(b, naddrs);
    for (int i = 0; i < naddrs; i++) resp_add_bulk(b, addr, addrlen);
}

static void test_reply_topology(void) {
    static const struct { long long id; const char *state; int naddrs; size_t addrlen; int want; } cases[] = {
        {1, "alive", 2, 14, 0}, {PROTO_MAX_NODES, "draining", 0, 1, 0}, {3, "dead", TE_MAX_PATHS, TE_ADDR_LEN - 1, 0},
        {0, "alive", 1, 5, -1}, {PROTO_MAX_NODES + 1, "alive", 1, 5, -1}, {2, "gone", 1, 5, -1},
        {2, "alivex", 1, 5, -1}, {2, "alive", TE_MAX_PATHS + 1, 5, -1}, {2, "alive", 1, TE_ADDR_LEN, -1},
        {2, "alive", 1, 0, -1},
    };
    resp_buf b;
    resp_buf_init(&b);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        resp_buf_clear(&b);
        topo_entry(&b, cases[i].id, cases[i].state, cases[i].naddrs, cases[i].addrlen);
        redisReply *r = read_every_cut(&b);
        ASSERT(r);
        proto_topo_node t;
        int got = proto_dec_topo_node(r, &t);
        int ok = got == cases[i].want &&
                 (got != 0 || (t.id == (uint32_t)cases[i].id && t.naddrs == cases[i].naddrs &&
                               (t.naddrs == 0 || (t.addrlen[0] == cases[i].addrlen &&
                                                  t.addrs[t.naddrs - 1][t.addrlen[0]] == '\0'))));
        if (ok && got == 0) ok = t.state == (strcmp(cases[i].state, "alive") == 0      ? PROTO_NODE_ALIVE
                                             : strcmp(cases[i].state, "draining") == 0 ? PROTO_NODE_DRAINING
                                                                                         : PROTO_NODE_DEAD);
        freeReplyObject(r);
        ASSERT_MSG(ok, "case %zu: %d", i, got);
    }
    resp_buf_free(&b);
}

static void test_node_line(void) {
    proto_node_line l;
    ASSERT_EQ(proto_dec_node_line("3 tcp:127.0.0.1:9 alive 1048576 4096\n4 x dead 1 0", &l), 0);
    ASSERT(l.id == 3 && strcmp(l.state, "alive") == 0 && l.segment_size == 1048576 && l.used == 4096);
    ASSERT_EQ(proto_dec_node_line("3 addr alive 1048576", &l), -1);
    ASSERT_EQ(proto_dec_node_line("", &l), -1);
    ASSERT_EQ(proto_dec_node_line("x addr alive 1 2", &l), -1);
    /* a state word longer than its room is cut, not overrun */
    ASSERT_EQ(proto_dec_node_line("1 a abcdefghijklmnopqrstuvwxyz 1 2", &l), -1);
}

/* Bytes that are no RESP, or declare more than the bound: BAD, never a reply. */
static void test_reply_read_refused(void) {
    static const char *bad[] = {"?x\r\n", "*99999999\r\n", "$-5\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redisReply *r = NULL;
        int rc = proto_reply_read(bad[i], strlen(bad[i]), &r, NULL);
        if (r) freeReplyObject(r);
        ASSERT_MSG(rc == PROTO_REPLY_BAD && !r, "'%s': %d", bad[i], rc);
    }
    /* two replies: the first is read, used says where the second starts */
    redisReply *r = NULL;
    size_t used = 0;
    ASSERT_EQ(proto_reply_read(":1\r\n:2\r\n", 8, &r, &used), PROTO_REPLY_WHOLE);
    int ok = r && r->integer == 1 && used == 4;
    freeReplyObject(r);
    ASSERT(ok);
}

int main(void) {
    RUN_TEST(test_verbs_once);
    RUN_TEST(test_cmd_bare_and_keys);
    RUN_TEST(test_cmd_membership);
    RUN_TEST(test_cmd_holdings_and_reports);
    RUN_TEST(test_cmd_put_and_leases);
    RUN_TEST(test_batch_heads);
    RUN_TEST(test_reply_int_and_flags);
    RUN_TEST(test_reply_removed);
    RUN_TEST(test_reply_nonce_scan);
    RUN_TEST(test_reply_object);
    RUN_TEST(test_reply_replicas);
    RUN_TEST(test_reply_location);
    RUN_TEST(test_reply_tasks);
    RUN_TEST(test_reply_holdings_registered);
    RUN_TEST(test_reply_topology);
    RUN_TEST(test_node_line);
    RUN_TEST(test_reply_read_refused);
    TEST_EXIT();
}
