/* tests/unit/test_resp_parser.c - request parsing: samples under every
 * split, exact error texts, bounded allocation, bulk_dest, direct span,
 * and a random-input robustness loop. */
#include "resp/resp_parser.h"
#include "test.h"

#include <malloc.h>
#include <stdint.h>

/* What a parse produced, serialized so two runs compare with memcmp:
 * per command "I|M argc {len:bytes}...;", then "E:<errstr>" on error. */
typedef struct transcript {
    char data[256 * 1024];
    size_t len;
} transcript;

static void tr_add(transcript *t, const void *p, size_t n) {
    if (n > sizeof t->data - t->len) n = sizeof t->data - t->len;
    memcpy(t->data + t->len, p, n);
    t->len += n;
}

static void tr_printf(transcript *t, const char *fmt, long long v) {
    char s[64];
    int n = snprintf(s, sizeof s, fmt, v);
    tr_add(t, s, (size_t)n);
}

static void tr_command(transcript *t, resp_parser *p) {
    resp_arg *argv = resp_parser_argv(p);
    tr_add(t, resp_parser_is_inline(p) ? "I" : "M", 1);
    tr_printf(t, "%lld", resp_parser_argc(p));
    for (int i = 0; i < resp_parser_argc(p); i++) {
        tr_printf(t, " %lld:", (long long)argv[i].len);
        tr_add(t, argv[i].ptr, argv[i].len);
    }
    tr_add(t, ";", 1);
}

/* Feeds one chunk, recording every command; returns -1 after an error. */
static int feed_chunk(resp_parser *p, const char *buf, size_t len, transcript *t) {
    size_t pos = 0;
    while (pos < len) {
        size_t used = 0;
        resp_status st = resp_parser_feed(p, buf + pos, len - pos, &used);
        if (used > len - pos) { tr_add(t, "OVERRUN", 7); return -1; }
        pos += used;
        if (st == RESP_ERROR) {
            tr_add(t, "E:", 2);
            tr_add(t, resp_parser_errstr(p), strlen(resp_parser_errstr(p)));
            return -1;
        }
        if (st == RESP_AGAIN) {
            if (pos != len) tr_add(t, "SHORT", 5);
            break;
        }
        tr_command(t, p);
        /* Alternate explicit resets with feed's automatic one. */
        if (t->len & 1) resp_parser_reset(p);
    }
    return 0;
}

/* Feeds input in chunks ending at the given cut offsets. */
static void run_cuts(const char *in, size_t len, const size_t *cuts, int ncuts,
                     const resp_limits *lim, transcript *t) {
    resp_parser *p = resp_parser_create(lim);
    size_t start = 0;
    t->len = 0;
    for (int i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        if (feed_chunk(p, in + start, end - start, t) < 0) break;
        start = end;
    }
    if (resp_parser_in_progress(p)) tr_add(t, "PARTIAL", 7);
    resp_parser_free(p);
}

static void run_whole(const char *in, size_t len, const resp_limits *lim, transcript *t) {
    run_cuts(in, len, NULL, 0, lim, t);
}

static void run_bytewise(const char *in, size_t len, const resp_limits *lim, transcript *t) {
    resp_parser *p = resp_parser_create(lim);
    t->len = 0;
    for (size_t i = 0; i < len; i++)
        if (feed_chunk(p, in + i, 1, t) < 0) break;
    if (resp_parser_in_progress(p)) tr_add(t, "PARTIAL", 7);
    resp_parser_free(p);
}

/* Whole, byte by byte and every two-chunk split must agree with expect. */
static int check_all_splits(const char *in, size_t len, const resp_limits *lim,
                            const char *expect, size_t elen, size_t *bad_cut) {
    static transcript t;
    run_whole(in, len, lim, &t);
    if (t.len != elen || memcmp(t.data, expect, elen)) { *bad_cut = (size_t)-1; return -1; }
    run_bytewise(in, len, lim, &t);
    if (t.len != elen || memcmp(t.data, expect, elen)) { *bad_cut = (size_t)-2; return -1; }
    for (size_t cut = 0; cut <= len; cut++) {
        run_cuts(in, len, &cut, 1, lim, &t);
        if (t.len != elen || memcmp(t.data, expect, elen)) { *bad_cut = cut; return -1; }
    }
    return 0;
}

#define S(lit) lit, sizeof(lit) - 1

typedef struct sample {
    const char *in;
    size_t len;
    const char *expect;
    size_t elen;
} sample;

static const sample samples[] = {
    { S("*1\r\n$4\r\nPING\r\n"), S("M1 4:PING;") },
    { S("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n"), S("M3 3:SET 1:k 5:hello;") },
    { S("*2\r\n$3\r\nGET\r\n$0\r\n\r\n"), S("M2 3:GET 0:;") },
    { S("*2\r\n$3\r\nSET\r\n$6\r\na\r\n\0b\n\r\n"), S("M2 3:SET 6:a\r\n\0b\n;") },
    { S("PING\r\n"), S("I1 4:PING;") },
    { S("PING\n"), S("I1 4:PING;") },
    { S("  set   k  v \r\n"), S("I3 3:set 1:k 1:v;") },
    { S("SET \"a b\" 'c\\'d'\r\n"), S("I3 3:SET 3:a b 3:c'd;") },
    { S("ECHO \"\\x41\\x7a\\n\\r\\t\\b\\a\\\\\\\"\\q\"\n"),
      S("I2 4:ECHO 10:Az\n\r\t\b\a\\\"q;") },
    { S("ECHO 'a\\nb' \"\\xZZ\"\n"), S("I3 4:ECHO 4:a\\nb 3:xZZ;") },
    { S("ECHO a\"b c\"d\n"), S("E:Protocol error: unbalanced quotes in request") },
    { S("ECHO \"\"\n"), S("I2 4:ECHO 0:;") },
    { S("\r\n\n   \r\nPING\r\n"), S("I1 4:PING;") },
    { S("*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n"), S("M1 4:PING;") },
    { S("PING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nGET x\r\n*1\r\n$4\r\nQUIT\r\n"),
      S("I1 4:PING;M2 4:ECHO 2:hi;I2 3:GET 1:x;M1 4:QUIT;") },
    { S("*2\r\n$3\r\nGET\r\n$1\r\n"), S("PARTIAL") },
    { S("GET x"), S("PARTIAL") },
};

static void test_samples_all_splits(void) {
    for (size_t i = 0; i < sizeof samples / sizeof *samples; i++) {
        size_t cut = 0;
        int r = check_all_splits(samples[i].in, samples[i].len, NULL, samples[i].expect,
                                 samples[i].elen, &cut);
        ASSERT_MSG(r == 0, "sample %zu failed at cut %zd", i, (ssize_t)cut);
    }
}

/* All samples concatenated form one long pipeline of mixed kinds. */
static void test_pipeline_of_all_samples(void) {
    static char in[4096];
    static char expect[8192];
    size_t len = 0, elen = 0;
    for (size_t i = 0; i < sizeof samples / sizeof *samples; i++) {
        const sample *s = &samples[i];
        if (s->expect[0] == 'E' || strstr(s->expect, "PARTIAL")) continue;
        memcpy(in + len, s->in, s->len);
        len += s->len;
        memcpy(expect + elen, s->expect, s->elen);
        elen += s->elen;
    }
    size_t cut = 0;
    int r = check_all_splits(in, len, NULL, expect, elen, &cut);
    ASSERT_MSG(r == 0, "failed at cut %zd", (ssize_t)cut);
}

static void test_consumed_points_at_next_command(void) {
    const char in[] = "*1\r\n$4\r\nPING\r\nPING\r\n";
    resp_parser *p = resp_parser_create(NULL);
    size_t used = 0;
    ASSERT_EQ(resp_parser_feed(p, in, sizeof in - 1, &used), RESP_COMMAND);
    ASSERT_EQ(used, 14);
    ASSERT_EQ(resp_parser_is_inline(p), 0);
    ASSERT_EQ(resp_parser_argv(p)[0].ptr[4], '\0');
    ASSERT_EQ(resp_parser_feed(p, in + 14, sizeof in - 1 - 14, &used), RESP_COMMAND);
    ASSERT_EQ(used, 6);
    ASSERT_EQ(resp_parser_is_inline(p), 1);
    ASSERT_STREQ(resp_parser_argv(p)[0].ptr, "PING");
    ASSERT_EQ(resp_parser_in_progress(p), 0);
    resp_parser_free(p);
}

/* ---------------------------------------------------------------- errors */

static const resp_limits small = { .max_bulk_len = 16, .max_multibulk_len = 4,
                                   .max_inline_len = 16 };

static const struct { const char *in; size_t len; const char *expect; size_t elen; } errors[] = {
    { S("aaaaaaaaaaaaaaaaaaaa"), S("E:Protocol error: too big inline request") },
    { S("aaaaaaaaaaaaaaaaaaaa\r\n"), S("E:Protocol error: too big inline request") },
    { S("SET \"abc\r\n"), S("E:Protocol error: unbalanced quotes in request") },
    { S("SET 'abc\r\n"), S("E:Protocol error: unbalanced quotes in request") },
    { S("SET 'a'b\r\n"), S("E:Protocol error: unbalanced quotes in request") },
    { S("*111111111111111111111111111111111111"), S("E:Protocol error: too big mbulk count string") },
    { S("*abc\r\n"), S("E:Protocol error: invalid multibulk length") },
    { S("*\r\n"), S("E:Protocol error: invalid multibulk length") },
    { S("*5\r\n"), S("E:Protocol error: invalid multibulk length") },
    { S("*2147483648\r\n"), S("E:Protocol error: invalid multibulk length") },
    { S("*999999999999999\r\n"), S("E:Protocol error: invalid multibulk length") },
    { S("*99999999999999999999\r\n"), S("E:Protocol error: invalid multibulk length") },
    { S("*2\n"), S("E:Protocol error: invalid multibulk length") },
    { S("*1\r\n:3\r\n"), S("E:Protocol error: expected '$', got ':'") },
    { S("*2\r\n$1\r\na\r\nx"), S("E:Protocol error: expected '$', got 'x'") },
    { S("*1\r\n$111111111111111111111111111111111"), S("E:Protocol error: too big bulk count string") },
    { S("*1\r\n$abc\r\n"), S("E:Protocol error: invalid bulk length") },
    { S("*1\r\n$-1\r\n"), S("E:Protocol error: invalid bulk length") },
    { S("*1\r\n$17\r\n"), S("E:Protocol error: invalid bulk length") },
    { S("*1\r\n$\r\n"), S("E:Protocol error: invalid bulk length") },
    { S("*1\r\n$3\r\nfooX\r\n"), S("E:Protocol error: bulk not followed by CRLF") },
    { S("*1\r\n$3\r\nfoo\rX"), S("E:Protocol error: bulk not followed by CRLF") },
    { S("*1\r\n$0\r\n\n"), S("E:Protocol error: bulk not followed by CRLF") },
    { S("PING\r\n*1\r\n$17\r\n"), S("I1 4:PING;E:Protocol error: invalid bulk length") },
};

static void test_error_texts(void) {
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++) {
        size_t cut = 0;
        int r = check_all_splits(errors[i].in, errors[i].len, &small, errors[i].expect,
                                 errors[i].elen, &cut);
        ASSERT_MSG(r == 0, "error case %zu (%s) failed at cut %zd", i, errors[i].expect,
                   (ssize_t)cut);
    }
}

/* Limits with a scope (networking's before AUTH) name it for counts
 * over them; malformed counts stay "invalid". set_limits applies to the
 * next header of the same parser. */
static void test_scoped_limits(void) {
    static const resp_limits preauth = {.max_bulk_len = 16, .max_multibulk_len = 3,
                                        .scope = "unauthenticated"};
    static const struct { const char *in; size_t len; const char *expect; size_t elen; } cases[] = {
        { S("*4\r\n"), S("E:Protocol error: unauthenticated multibulk length") },
        { S("*1\r\n$17\r\n"), S("E:Protocol error: unauthenticated bulk length") },
        { S("*1\r\n$-1\r\n"), S("E:Protocol error: invalid bulk length") },
        { S("*3\r\n$1\r\na\r\n$16\r\n0123456789abcdef\r\n$0\r\n\r\n"),
          S("M3 1:a 16:0123456789abcdef 0:;") },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t cut = 0;
        ASSERT_MSG(check_all_splits(cases[i].in, cases[i].len, &preauth, cases[i].expect, cases[i].elen, &cut) == 0,
                   "case %zu (%s) failed at cut %zu", i, cases[i].expect, cut);
    }
    resp_parser *p = resp_parser_create(&preauth);
    size_t used;
    ASSERT_EQ(resp_parser_feed(p, "*1\r\n$4\r\nAUTH\r\n", 14, &used), RESP_COMMAND);
    resp_parser_reset(p);
    resp_parser_set_limits(p, NULL);   /* authenticated: the defaults */
    ASSERT_EQ(resp_parser_feed(p, "*20\r\n$100\r\n", 11, &used), RESP_AGAIN);
    ASSERT_EQ(resp_parser_in_progress(p), 1);
    resp_parser_free(p);
}

static void test_default_limits_reject_huge(void) {
    static const struct { const char *in; size_t len; const char *expect; } huge[] = {
        { S("*1048577\r\n"), "E:Protocol error: invalid multibulk length" },
        { S("*2147483648\r\n"), "E:Protocol error: invalid multibulk length" },
        { S("*1\r\n$536870913\r\n"), "E:Protocol error: invalid bulk length" },
        { S("*1\r\n$9223372036854775807\r\n"), "E:Protocol error: invalid bulk length" },
        { S("*1\r\n$-9223372036854775808\r\n"), "E:Protocol error: invalid bulk length" },
        { S("*1\r\n$9223372036854775808\r\n"), "E:Protocol error: invalid bulk length" },
    };
    static transcript t;
    for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
        run_whole(huge[i].in, huge[i].len, NULL, &t);
        ASSERT_MSG(t.len == strlen(huge[i].expect) && !memcmp(t.data, huge[i].expect, t.len),
                   "huge case %zu", i);
    }
}

static long heap_in_use(void) {
    struct mallinfo2 mi = mallinfo2();
    return (long)mi.uordblks;
}

/* Claims the parser accepts must not turn into allocations: 1M arguments
 * announced, 512 MiB bulk announced, only a few bytes sent. */
static void test_claims_do_not_allocate(void) {
    const char hdr[] = "*1048576\r\n$3\r\nSET\r\n$536870912\r\n0123456789";
    long before = heap_in_use();
    resp_parser *p = resp_parser_create(NULL);
    size_t used;
    ASSERT_EQ(resp_parser_feed(p, hdr, sizeof hdr - 1, &used), RESP_AGAIN);
    ASSERT_EQ(used, sizeof hdr - 1);
    ASSERT_EQ(resp_parser_in_progress(p), 1);
    long after = heap_in_use();
    if (before > 0) ASSERT_MSG(after - before < 1024 * 1024, "heap grew %ld", after - before);
    char *dst = NULL;
    size_t span = resp_parser_direct_span(p, &dst);
    ASSERT(span > 0 && span <= 64 * 1024);  /* only what is allocated now */
    ASSERT(dst != NULL);
    ASSERT_MEMEQ(dst - 10, "0123456789", 10);
    resp_parser_free(p);                     /* half-received bulk: ASan checks */
}

/* Small bulks share the parser's arena: thousands of them in one
 * command (the master's 4096-key batches) keep every earlier argument's
 * bytes and NUL while later blocks are added, under every chunking; big
 * ones around them still get their own buffers. After the reset the
 * parser holds little (one small block at most). */
static void test_small_args_share_arena(void) {
    enum { N = 3000 };
    size_t cap = 64 + (size_t)N * 300 + 80000, len = 0;
    char *in = malloc(cap);
    len += (size_t)snprintf(in, cap, "*%d\r\n", N);
    for (int i = 0; i < N; i++) {
        size_t alen = i == 1234 ? 70000 : (size_t)(i * 37) % 260;   /* 0..259: both sides of 256 */
        len += (size_t)snprintf(in + len, cap - len, "$%zu\r\n", alen);
        for (size_t k = 0; k < alen; k++) in[len++] = (char)('a' + (i + k) % 26);
        memcpy(in + len, "\r\n", 2);
        len += 2;
    }
    long before = heap_in_use();
    static const size_t chunks[] = {0, 1, 7, 4096};   /* 0: all at once */
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        resp_parser *p = resp_parser_create(NULL);
        size_t pos = 0, used;
        resp_status st = RESP_AGAIN;
        while (st == RESP_AGAIN && pos < len) {
            size_t n = chunks[c] && len - pos > chunks[c] ? chunks[c] : len - pos;
            st = resp_parser_feed(p, in + pos, n, &used);
            pos += used;
        }
        ASSERT_EQ(st, RESP_COMMAND);
        ASSERT_EQ(resp_parser_argc(p), N);
        resp_arg *argv = resp_parser_argv(p);
        for (int i = 0; i < N; i++) {
            size_t alen = i == 1234 ? 70000 : (size_t)(i * 37) % 260;
            int ok = argv[i].len == alen && argv[i].ptr[alen] == '\0' && !argv[i].external &&
                     argv[i].pooled == (alen <= 256);
            for (size_t k = 0; ok && k < alen; k++) ok = argv[i].ptr[k] == (char)('a' + (i + k) % 26);
            ASSERT_MSG(ok, "chunks of %zu: argument %d", chunks[c], i);
        }
        resp_parser_reset(p);
        long held = heap_in_use();
        /* argv's slots stay for the next command; the arguments go */
        long bound = (long)(N * sizeof(resp_arg)) + 16 * 1024;
        if (before > 0) ASSERT_MSG(held - before < bound, "chunks of %zu: %ld bytes held", chunks[c],
                                   held - before);
        resp_parser_free(p);
    }
    free(in);
}

static void test_bulk_buffer_grows_with_data(void) {
    enum { N = 300000 };
    char *in = malloc(N + 64);
    size_t len = (size_t)sprintf(in, "*1\r\n$%d\r\n", N);
    for (int i = 0; i < N; i++) in[len + i] = (char)(i * 7);
    memcpy(in + len + N, "\r\n", 2);
    len += N + 2;
    resp_parser *p = resp_parser_create(NULL);
    size_t used, pos = 0;
    resp_status st = RESP_AGAIN;
    while (pos < len && st == RESP_AGAIN) {  /* 1000-byte chunks */
        size_t n = len - pos < 1000 ? len - pos : 1000;
        st = resp_parser_feed(p, in + pos, n, &used);
        pos += used;
    }
    ASSERT_EQ(st, RESP_COMMAND);
    ASSERT_EQ(resp_parser_argv(p)[0].len, N);
    ASSERT_EQ(resp_parser_argv(p)[0].external, 0);
    ASSERT_MEMEQ(resp_parser_argv(p)[0].ptr, in + len - N - 2, N);
    ASSERT_EQ(resp_parser_argv(p)[0].ptr[N], '\0');
    resp_parser_free(p);
    free(in);
}

/* ------------------------------------------------------------- bulk_dest */

typedef struct dest_ctx {
    char buf[64];
    int calls;
    int seen_argi[8], seen_argc[8];
    size_t seen_len[8];
    char first_arg[16];
} dest_ctx;

static void *value_dest(void *ctx, const resp_arg *argv, int argi, int argc, size_t len) {
    dest_ctx *d = ctx;
    if (d->calls < 8) {
        d->seen_argi[d->calls] = argi;
        d->seen_argc[d->calls] = argc;
        d->seen_len[d->calls] = len;
    }
    d->calls++;
    if (argi == 2 && argc == 3 && len <= sizeof d->buf) {
        snprintf(d->first_arg, sizeof d->first_arg, "%.*s", (int)argv[0].len, argv[0].ptr);
        return d->buf;
    }
    return NULL;
}

static void test_bulk_dest_routes_value(void) {
    const char in[] = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$10\r\nvalue\r\n\0xy\r\n";
    dest_ctx d;
    memset(&d, 0, sizeof d);
    resp_parser *p = resp_parser_create(NULL);
    resp_parser_set_bulk_dest(p, value_dest, &d);
    size_t used;
    ASSERT_EQ(resp_parser_feed(p, in, sizeof in - 1, &used), RESP_COMMAND);
    ASSERT_EQ(d.calls, 3);
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(d.seen_argi[i], i);
        ASSERT_EQ(d.seen_argc[i], 3);
    }
    ASSERT_EQ(d.seen_len[0], 3);
    ASSERT_EQ(d.seen_len[1], 3);
    ASSERT_EQ(d.seen_len[2], 10);
    ASSERT_STREQ(d.first_arg, "SET");
    resp_arg *argv = resp_parser_argv(p);
    ASSERT(argv[2].ptr == d.buf);
    ASSERT_EQ(argv[2].external, 1);
    ASSERT_EQ(argv[1].external, 0);
    ASSERT_MEMEQ(d.buf, "value\r\n\0xy", 10);
    ASSERT_EQ(d.buf[10], 0);                  /* parser never writes past len */
    resp_parser_free(p);                      /* must not free d.buf */
}

static void test_bulk_dest_half_received_not_freed(void) {
    const char in[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$20\r\nabc";
    dest_ctx d;
    memset(&d, 0, sizeof d);
    resp_parser *p = resp_parser_create(NULL);
    resp_parser_set_bulk_dest(p, value_dest, &d);
    size_t used;
    ASSERT_EQ(resp_parser_feed(p, in, sizeof in - 1, &used), RESP_AGAIN);
    ASSERT_EQ(resp_parser_in_progress(p), 1);
    char *dst;
    ASSERT_EQ(resp_parser_direct_span(p, &dst), 17);
    ASSERT(dst == d.buf + 3);
    resp_parser_free(p);                      /* ASan would flag a free of d.buf */
}

static void test_bulk_dest_not_asked_for_inline(void) {
    dest_ctx d;
    memset(&d, 0, sizeof d);
    resp_parser *p = resp_parser_create(NULL);
    resp_parser_set_bulk_dest(p, value_dest, &d);
    size_t used;
    ASSERT_EQ(resp_parser_feed(p, S("SET k v\r\n"), &used), RESP_COMMAND);
    ASSERT_EQ(d.calls, 0);
    ASSERT_EQ(resp_parser_argc(p), 3);
    resp_parser_free(p);
}

static void *discard_dest(void *ctx, const resp_arg *argv, int argi, int argc, size_t len) {
    return argi == 2 ? RESP_BULK_DISCARD : NULL;
}

/* A discarded payload (a value refused at its header): fed a byte at a
 * time, its bytes are dropped, never offered as a direct span, counted
 * down by bulk_left, the argument reads as empty, and the next command
 * parses. */
static void test_bulk_discard(void) {
    const char in[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n0123456789\r\n*1\r\n$4\r\nPING\r\n";
    const size_t hdr = sizeof "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n" - 1;
    resp_parser *p = resp_parser_create(NULL);
    resp_parser_set_bulk_dest(p, discard_dest, NULL);
    size_t used, pos = 0;
    char *dst;
    resp_status st = RESP_AGAIN;
    while (st == RESP_AGAIN && pos < sizeof in - 1) {
        st = resp_parser_feed(p, in + pos, 1, &used);
        pos += used;
        if (pos >= hdr && pos < hdr + 10) {
            ASSERT_EQ(resp_parser_bulk_left(p), hdr + 10 - pos);
            ASSERT_EQ(resp_parser_direct_span(p, &dst), 0);
        }
    }
    ASSERT_EQ(st, RESP_COMMAND);
    ASSERT_EQ(resp_parser_bulk_left(p), 0);
    ASSERT_EQ(resp_parser_argc(p), 3);
    resp_arg *argv = resp_parser_argv(p);
    ASSERT_EQ(argv[2].len, 0);
    ASSERT_STREQ(argv[2].ptr, "");
    ASSERT_EQ(resp_parser_feed(p, in + pos, sizeof in - 1 - pos, &used), RESP_COMMAND);
    ASSERT_EQ(resp_parser_argc(p), 1);
    ASSERT_MEMEQ(resp_parser_argv(p)[0].ptr, "PING", 4);
    resp_parser_free(p);
}

/* An argument pointed elsewhere (the gateway moves an unstreamed SET
 * value into its put buffer): the parser frees its own copy at once and
 * never the new bytes, for an inline value, a pooled small one and a
 * large one (ASan flags a wrong free or a leak). */
static void test_arg_replace(void) {
    static char kept[3][8] = {"kept0", "kept1", "kept2"};
    char big[600];
    memset(big, 'b', sizeof big);
    char in[700];
    int n = snprintf(in, sizeof in, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%zu\r\n%.*s\r\n", sizeof big,
                     (int)sizeof big, big);
    const struct { const char *s; size_t len; } cases[] = {
        {"SET k \"hello world\"\r\n", 0}, {"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nhi\r\n", 0}, {in, (size_t)n}};
    for (int i = 0; i < 3; i++) {
        resp_parser *p = resp_parser_create(NULL);
        size_t used, len = cases[i].len ? cases[i].len : strlen(cases[i].s);
        ASSERT_EQ(resp_parser_feed(p, cases[i].s, len, &used), RESP_COMMAND);
        ASSERT_EQ(resp_parser_argc(p), 3);
        resp_arg *v = &resp_parser_argv(p)[2];
        resp_arg_replace(v, kept[i]);
        ASSERT(v->ptr == kept[i]);
        ASSERT_EQ(v->external, 1);
        resp_parser_reset(p);
        ASSERT_EQ(resp_parser_feed(p, S("PING\r\n"), &used), RESP_COMMAND);   /* still usable */
        resp_parser_free(p);
    }
}

/* ----------------------------------------------------------- direct span */

static uint32_t rng_state = 12345;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

typedef struct big_dest {
    char *mem;
    size_t cap;
} big_dest;

static void *big_value_dest(void *ctx, const resp_arg *argv, int argi, int argc, size_t len) {
    big_dest *b = ctx;
    return argi == 2 && len <= b->cap ? b->mem : NULL;
}

/* Feeds in at random points, sometimes read()-style into the direct span. */
static int feed_mixed(resp_parser *p, const char *in, size_t len, transcript *t) {
    size_t pos = 0;
    while (pos < len) {
        char *dst = NULL;
        size_t span = resp_parser_direct_span(p, &dst);
        if (span && (rnd() & 1)) {
            size_t n = 1 + rnd() % (span < 70000 ? span : 70000);
            if (n > len - pos) n = len - pos;
            memcpy(dst, in + pos, n);
            resp_parser_direct_advance(p, n);
            pos += n;
            continue;
        }
        size_t n = 1 + rnd() % 90000;
        if (n > len - pos) n = len - pos;
        if (feed_chunk(p, in + pos, n, t) < 0) return -1;
        pos += n;
    }
    return 0;
}

static void test_direct_span_mixed_with_feeds(void) {
    enum { N = 200000 };
    char *in = malloc(N + 256);
    size_t len = (size_t)sprintf(in, "PING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n", N);
    const char *payload = in + len;
    for (int i = 0; i < N; i++) in[len + i] = (char)(rnd() & 0xff);
    len += N;
    len += (size_t)sprintf(in + len, "\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");

    big_dest bd = { malloc(N), N };
    for (int mode = 0; mode < 2; mode++) {
        for (int iter = 0; iter < 60; iter++) {
            static transcript t;
            t.len = 0;
            memset(bd.mem, 0, N);
            resp_parser *p = resp_parser_create(NULL);
            if (mode) resp_parser_set_bulk_dest(p, big_value_dest, &bd);
            int r = feed_mixed(p, in, len, &t);
            int partial = resp_parser_in_progress(p);
            resp_parser_free(p);
            ASSERT(r == 0 && !partial);
            /* Transcript: "I1 4:PING;M3 3:SET 1:k 200000:<payload>;M2 3:GET 1:k;" */
            const char *head = "I1 4:PING;M3 3:SET 1:k 200000:";
            ASSERT_MSG(t.len == strlen(head) + N + strlen(";M2 3:GET 1:k;"),
                       "mode %d iter %d len %zu", mode, iter, t.len);
            ASSERT_MEMEQ(t.data, head, strlen(head));
            if (mode) ASSERT_MEMEQ(bd.mem, payload, N);
        }
    }
    free(bd.mem);
    free(in);
}

static void test_direct_span_zero_when_idle(void) {
    resp_parser *p = resp_parser_create(NULL);
    char *dst = NULL;
    size_t used;
    ASSERT_EQ(resp_parser_direct_span(p, &dst), 0);
    ASSERT_EQ(resp_parser_feed(p, S("*1\r\n$0\r\n"), &used), RESP_AGAIN);
    ASSERT_EQ(resp_parser_direct_span(p, &dst), 0);  /* empty payload: only CRLF */
    ASSERT_EQ(resp_parser_feed(p, S("\r\n"), &used), RESP_COMMAND);
    ASSERT_EQ(resp_parser_argv(p)[0].len, 0);
    ASSERT_EQ(resp_parser_direct_span(p, &dst), 0);
    resp_parser_free(p);
}

/* ------------------------------------------------------------ robustness */

static void random_input(char *buf, size_t len) {
    static const char alphabet[] = "*$\r\n\r\n0123456789-\"' \\xaZ\t";
    for (size_t i = 0; i < len; i++)
        buf[i] = rnd() % 4 ? alphabet[rnd() % (sizeof alphabet - 1)] : (char)rnd();
}

/* Random bytes and mutated samples, fed in random chunks with random
 * direct writes, small and default limits: nothing may crash or leak. */
static void test_random_robustness(void) {
    static char buf[512];
    static transcript t;
    big_dest bd = { malloc(64), 64 };
    int commands = 0, errors_seen = 0;
    for (int iter = 0; iter < 20000; iter++) {
        size_t len;
        if (iter & 1) {
            len = 1 + rnd() % sizeof buf;
            random_input(buf, len);
        } else {
            const sample *s = &samples[rnd() % (sizeof samples / sizeof *samples)];
            len = s->len;
            memcpy(buf, s->in, len);
            for (int m = rnd() % 4; m >= 0 && len; m--) buf[rnd() % len] = (char)rnd();
        }
        resp_parser *p = resp_parser_create(iter % 3 ? &small : NULL);
        if (iter % 5 == 0) resp_parser_set_bulk_dest(p, big_value_dest, &bd);
        t.len = 0;
        if (feed_mixed(p, buf, len, &t) < 0) errors_seen++;
        for (size_t i = 0; i < t.len; i++) commands += t.data[i] == ';';
        resp_parser_free(p);
    }
    free(bd.mem);
    ASSERT(commands > 1000);
    ASSERT(errors_seen > 1000);
}

/* resp_peek_keys names argv[1] of exactly the whole multibulk commands
 * (of two or more arguments) at the start of a buffer, as the parser
 * parses them: random pipelines with binary arguments ("\r\n" inside
 * too), whole and cut at every offset. */
static void test_peek_keys_match_parser(void) {
    static char buf[4096];
    static resp_span keys[64], want[64];
    for (int iter = 0; iter < 300; iter++) {
        size_t len = 0, nwant = 0, ends[64];
        int ncmd = 1 + (int)(rnd() % 20);
        for (int c = 0; c < ncmd; c++) {
            int argc = 1 + (int)(rnd() % 4);
            len += (size_t)snprintf(buf + len, 16, "*%d\r\n", argc);
            for (int a = 0; a < argc; a++) {
                size_t n = rnd() % 40;
                len += (size_t)snprintf(buf + len, 16, "$%zu\r\n", n);
                if (a == 1) want[nwant] = (resp_span){buf + len, n};
                for (size_t k = 0; k < n; k++) buf[len++] = rnd() % 3 ? 'a' + (char)(rnd() % 26) : "\r\n$*"[rnd() % 4];
                buf[len++] = '\r';
                buf[len++] = '\n';
            }
            if (argc >= 2) ends[nwant++] = len;
        }
        /* The parser agrees on every key. */
        resp_parser *p = resp_parser_create(NULL);
        size_t pos = 0, seen = 0, used;
        while (pos < len && resp_parser_feed(p, buf + pos, len - pos, &used) == RESP_COMMAND) {
            pos += used;
            if (resp_parser_argc(p) < 2) continue;
            resp_arg *argv = resp_parser_argv(p);
            ASSERT(seen < nwant && argv[1].len == want[seen].len &&
                   memcmp(argv[1].ptr, want[seen].ptr, want[seen].len) == 0);
            seen++;
        }
        resp_parser_free(p);
        ASSERT(seen == nwant);
        for (size_t cut = 0; cut <= len; cut++) {
            size_t whole = 0;
            while (whole < nwant && ends[whole] <= cut) whole++;
            size_t n = resp_peek_keys(buf, cut, keys, 64);
            ASSERT(n == whole);
            for (size_t i = 0; i < n; i++) ASSERT(keys[i].ptr == want[i].ptr && keys[i].len == want[i].len);
        }
        ASSERT(resp_peek_keys(buf, len, keys, 2) == (nwant < 2 ? nwant : 2));
    }
}

/* It stops at what the parser would refuse or parse another way: an
 * inline command, a bad header, a negative or overlong count. */
static void test_peek_keys_stop(void) {
    static const char *const stops[] = {
        "GET a\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n",
        "*2\r\n$3\r\nGET\r\n$-1\r\n",
        "*-1\r\n",
        "*2\n$3\r\nGET\r\n$1\r\nb\r\n",
        "*2\r\n$3\r\nGET\r\n$99999999999999999999\r\nb\r\n",
        "*1000000\r\n$3\r\nGET\r\n$1\r\nb\r\n",
    };
    resp_span keys[4];
    for (size_t i = 0; i < sizeof stops / sizeof *stops; i++)
        ASSERT(resp_peek_keys(stops[i], strlen(stops[i]), keys, 4) == 0);
    const char *two = "*2\r\n$3\r\nGET\r\n$1\r\nb\r\nGET c\r\n";
    ASSERT(resp_peek_keys(two, strlen(two), keys, 4) == 1 && keys[0].len == 1 && keys[0].ptr[0] == 'b');
}

int main(void) {
    RUN_TEST(test_samples_all_splits);
    RUN_TEST(test_pipeline_of_all_samples);
    RUN_TEST(test_consumed_points_at_next_command);
    RUN_TEST(test_error_texts);
    RUN_TEST(test_default_limits_reject_huge);
    RUN_TEST(test_claims_do_not_allocate);
    RUN_TEST(test_bulk_buffer_grows_with_data);
    RUN_TEST(test_small_args_share_arena);
    RUN_TEST(test_bulk_dest_routes_value);
    RUN_TEST(test_bulk_dest_half_received_not_freed);
    RUN_TEST(test_bulk_dest_not_asked_for_inline);
    RUN_TEST(test_bulk_discard);
    RUN_TEST(test_arg_replace);
    RUN_TEST(test_direct_span_mixed_with_feeds);
    RUN_TEST(test_direct_span_zero_when_idle);
    RUN_TEST(test_random_robustness);
    RUN_TEST(test_scoped_limits);
    RUN_TEST(test_peek_keys_match_parser);
    RUN_TEST(test_peek_keys_stop);
    TEST_EXIT();
}
