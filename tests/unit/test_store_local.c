/* test_store_local - the standalone segment store: puts, gets, pins,
 * write-once, full segment, checksums, fragmentation, scan. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/evict.h"
#include "core/util.h"
#include "standalone/store_local.h"
#include "test.h"

#define SEG (1024 * 1024)

static store *new_store(uint64_t size) {
    char err[256];
    store *s = store_local_create(size, 1, err, sizeof err);
    if (!s) printf("# store_local_create: %s\n", err);
    return s;
}

/* put_start + copy + put_end, as SET does for an in-memory value. */
static int put(store *s, const char *key, const void *val, uint64_t len) {
    void *dst;
    store_put *p;
    int rc = s->ops->put_start(s, key, strlen(key), len, &dst, &p);
    if (rc != STORE_OK) return rc;
    if (len) memcpy(dst, val, len);
    return s->ops->put_end(s, p);
}

static void fill(unsigned char *buf, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(seed * 131 + i * 7);
}

/* Value of key equals want (and the pin is released). */
static int value_is(store *s, const char *key, const void *want, uint64_t len) {
    const void *data;
    uint64_t n;
    store_pin *pin;
    if (s->ops->get(s, key, strlen(key), &data, &n, &pin) != STORE_OK) return 0;
    int same = n == len && (len == 0 || memcmp(data, want, len) == 0);
    s->ops->release(s, pin);
    return same;
}

static uint64_t seg_free(store *s) {
    uint64_t f, l;
    s->ops->space(s, &f, &l);
    return f;
}

static void test_put_get(void) {
    store *s = new_store(SEG);
    ASSERT(s);
    ASSERT_EQ(put(s, "k1", "hello", 5), STORE_OK);
    ASSERT(value_is(s, "k1", "hello", 5));
    ASSERT_EQ(s->ops->exists(s, "k1", 2), 1);
    ASSERT_EQ(s->ops->exists(s, "k2", 2), 0);
    uint64_t len = 0;
    ASSERT_EQ(s->ops->size_of(s, "k1", 2, &len), STORE_OK);
    ASSERT_EQ(len, 5);
    ASSERT_EQ(s->ops->count(s), 1);
    s->ops->destroy(s);
}

static void test_write_once(void) {
    store *s = new_store(SEG);
    ASSERT(s);
    ASSERT_EQ(put(s, "k", "first", 5), STORE_OK);
    ASSERT_EQ(put(s, "k", "second", 6), STORE_EXISTS);
    ASSERT(value_is(s, "k", "first", 5));
    s->ops->destroy(s);
}

static void test_pending_invisible_and_exists(void) {
    store *s = new_store(SEG);
    ASSERT(s);
    void *dst, *dst2;
    store_put *p, *p2;
    ASSERT_EQ(s->ops->put_start(s, "k", 1, 4, &dst, &p), STORE_OK);
    ASSERT_EQ(s->ops->exists(s, "k", 1), 0);
    ASSERT(!value_is(s, "k", "", 0));
    /* Being written counts as present for another writer. */
    ASSERT_EQ(s->ops->put_start(s, "k", 1, 4, &dst2, &p2), STORE_EXISTS);
    /* DEL leaves a PENDING object to its writer. */
    ASSERT_EQ(s->ops->remove(s, "k", 1), 0);
    memcpy(dst, "abcd", 4);
    ASSERT_EQ(s->ops->put_end(s, p), STORE_OK);
    ASSERT(value_is(s, "k", "abcd", 4));
    s->ops->destroy(s);
}

static void test_abort_frees(void) {
    store *s = new_store(SEG);
    ASSERT(s);
    uint64_t before = seg_free(s);
    void *dst;
    store_put *p;
    ASSERT_EQ(s->ops->put_start(s, "k", 1, 1000, &dst, &p), STORE_OK);
    ASSERT(seg_free(s) < before);
    s->ops->put_abort(s, p);
    ASSERT_EQ(seg_free(s), before);
    ASSERT_EQ(s->ops->exists(s, "k", 1), 0);
    ASSERT_EQ(put(s, "k", "x", 1), STORE_OK);   /* the key is free again */
    s->ops->destroy(s);
}

static void test_remove_pinned(void) {
    store *s = new_store(SEG);
    ASSERT(s);
    unsigned char a[4096], b[4096];
    fill(a, sizeof a, 1);
    fill(b, sizeof b, 2);
    uint64_t empty = seg_free(s);
    ASSERT_EQ(put(s, "k", a, sizeof a), STORE_OK);
    const void *data;
    uint64_t n;
    store_pin *pin;
    ASSERT_EQ(s->ops->get(s, "k", 1, &data, &n, &pin), STORE_OK);
    ASSERT_EQ(s->ops->remove(s, "k", 1), 1);
    ASSERT_EQ(s->ops->exists(s, "k", 1), 0);
    ASSERT_EQ(s->ops->remove(s, "k", 1), 0);
    /* The key can be put again, but the pinned bytes are not reused. */
    ASSERT_EQ(put(s, "k", b, sizeof b), STORE_OK);
    ASSERT_MEMEQ(data, a, sizeof a);
    ASSERT(seg_free(s) <= empty - 2 * sizeof a);
    s->ops->release(s, pin);
    ASSERT_EQ(seg_free(s), empty - sizeof b);
    ASSERT(value_is(s, "k", b, sizeof b));
    ASSERT_EQ(s->ops->remove(s, "k", 1), 1);
    ASSERT_EQ(seg_free(s), empty);
    s->ops->destroy(s);
}

static void test_nospace_harms_nothing(void) {
    store *s = new_store(SEG);
    ASSERT(s);
    static unsigned char vals[8][100 * 1024];
    char key[16];
    int stored = 0;
    for (int i = 0; i < 8; i++) {
        fill(vals[i], sizeof vals[i], (unsigned)i);
        snprintf(key, sizeof key, "obj%d", i);
        ASSERT_EQ(put(s, key, vals[i], sizeof vals[i]), STORE_OK);
        stored++;
    }
    uint64_t free_before = seg_free(s);
    /* 300 KiB cannot fit in the ~224 KiB left. */
    void *dst;
    store_put *p;
    ASSERT_EQ(s->ops->put_start(s, "big", 3, 300 * 1024, &dst, &p), STORE_NOSPACE);
    ASSERT_EQ(s->ops->exists(s, "big", 3), 0);
    ASSERT_EQ(seg_free(s), free_before);
    ASSERT_EQ(s->ops->count(s), stored);
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof key, "obj%d", i);
        ASSERT(value_is(s, key, vals[i], sizeof vals[i]));
    }
    s->ops->destroy(s);
}

static void test_toobig(void) {
    store *s = new_store(SEG);
    ASSERT(s);
    void *dst;
    store_put *p;
    ASSERT_EQ(s->ops->put_start(s, "k", 1, SEG + 1, &dst, &p), STORE_TOOBIG);
    ASSERT_EQ(s->ops->put_start(s, "k", 1, UINT64_MAX, &dst, &p), STORE_TOOBIG);
    ASSERT_EQ(s->ops->exists(s, "k", 1), 0);
    /* Exactly the segment size fits in an empty segment. */
    ASSERT_EQ(s->ops->put_start(s, "k", 1, SEG, &dst, &p), STORE_OK);
    memset(dst, 0x5a, SEG);
    ASSERT_EQ(s->ops->put_end(s, p), STORE_OK);
    ASSERT_EQ(seg_free(s), 0);
    s->ops->destroy(s);
}

static void test_empty_value(void) {
    store *s = new_store(SEG);
    ASSERT(s);
    uint64_t before = seg_free(s);
    ASSERT_EQ(put(s, "empty", "", 0), STORE_OK);
    ASSERT_EQ(seg_free(s), before);
    ASSERT_EQ(s->ops->exists(s, "empty", 5), 1);
    ASSERT(value_is(s, "empty", "", 0));
    ASSERT_EQ(put(s, "empty", "", 0), STORE_EXISTS);
    ASSERT_EQ(s->ops->remove(s, "empty", 5), 1);
    ASSERT_EQ(s->ops->count(s), 0);
    s->ops->destroy(s);
}

static void test_checksum_mismatch(void) {
    store *s = new_store(SEG);
    ASSERT(s);
    unsigned char v[1000];
    fill(v, sizeof v, 9);
    ASSERT_EQ(put(s, "k", v, sizeof v), STORE_OK);
    unsigned char *mem = store_local_value_ptr(s, "k", 1);
    ASSERT(mem);
    mem[500] ^= 0x01;
    const void *data;
    uint64_t n;
    store_pin *pin;
    ASSERT_EQ(s->ops->get(s, "k", 1, &data, &n, &pin), STORE_ERR);
    ASSERT(strstr(s->errstr, "checksum") != NULL);
    mem[500] ^= 0x01;
    ASSERT(value_is(s, "k", v, sizeof v));
    s->ops->destroy(s);
}

static void got_done(void *ctx) { ++*(int *)ctx; }

/* get_async completes before it returns (the reply is written in the
 * same loop iteration): one outcome per key, in order, each STORE_OK
 * pinned (a removed key's bytes stay until released), a missing key
 * NOTFOUND, a corrupted one STORE_ERR with its reason, never a stream. */
static void test_get_async_inline(void) {
    store *s = new_store(SEG);
    ASSERT(s);
    ASSERT(s->ops->get_async != NULL);
    unsigned char a[3000], b[70];
    fill(a, sizeof a, 1);
    fill(b, sizeof b, 2);
    ASSERT_EQ(put(s, "a", a, sizeof a), STORE_OK);
    ASSERT_EQ(put(s, "b", b, sizeof b), STORE_OK);
    ASSERT_EQ(put(s, "bad", b, sizeof b), STORE_OK);
    unsigned char *mem = store_local_value_ptr(s, "bad", 3);
    ASSERT(mem);
    mem[7] ^= 0x10;
    store_key keys[5] = {{"a", 1}, {"none", 4}, {"b", 1}, {"bad", 3}, {"a", 1}};
    store_got got[5];
    memset(got, 0xa5, sizeof got);   /* nothing may be read unset */
    int done = 0;
    s->ops->get_async(s, keys, 5, STORE_GET_STREAM, got, got_done, &done);
    ASSERT_EQ(done, 1);
    ASSERT_EQ(got[0].rc, STORE_OK);
    ASSERT_EQ(got[1].rc, STORE_NOTFOUND);
    ASSERT_EQ(got[2].rc, STORE_OK);
    ASSERT_EQ(got[3].rc, STORE_ERR);
    ASSERT(strstr(got[3].errstr, "checksum") != NULL);
    ASSERT_EQ(got[4].rc, STORE_OK);
    for (int i = 0; i < 5; i++) ASSERT(got[i].stream == NULL);
    ASSERT(got[0].len == sizeof a && memcmp(got[0].data, a, sizeof a) == 0);
    ASSERT(got[2].len == sizeof b && memcmp(got[2].data, b, sizeof b) == 0);
    ASSERT(got[4].len == sizeof a && memcmp(got[4].data, a, sizeof a) == 0);
    /* Removed while pinned (twice, by keys 0 and 4): the bytes stay. */
    ASSERT_EQ(s->ops->remove(s, "a", 1), 1);
    ASSERT_EQ(s->ops->exists(s, "a", 1), 0);
    ASSERT(memcmp(got[0].data, a, sizeof a) == 0);
    s->ops->release(s, got[0].pin);
    ASSERT(memcmp(got[4].data, a, sizeof a) == 0);
    s->ops->release(s, got[4].pin);
    s->ops->release(s, got[2].pin);
    mem[7] ^= 0x10;
    ASSERT(value_is(s, "bad", b, sizeof b));
    s->ops->destroy(s);
}

/* "name:value" from INFO text. */
static double info_num(const resp_buf *b, const char *name) {
    char pat[64];
    snprintf(pat, sizeof pat, "\r\n%s:", name);
    char *text = xmemdup(b->data, b->len + 1);
    text[b->len] = '\0';
    char *p = strstr(text, pat);
    double v = p ? strtod(p + strlen(pat), NULL) : -1;
    free(text);
    return v;
}

static void test_fragmentation_info(void) {
    store *s = new_store(SEG);
    ASSERT(s);
    static unsigned char v[64 * 1024];
    ASSERT_EQ(put(s, "a", v, sizeof v), STORE_OK);
    ASSERT_EQ(put(s, "b", v, sizeof v), STORE_OK);
    ASSERT_EQ(put(s, "c", v, sizeof v), STORE_OK);
    resp_buf b;
    resp_buf_init(&b);
    s->ops->info(s, NULL, &b, "segment");
    ASSERT(info_num(&b, "fragmentation_ratio") == 0);
    ASSERT_EQ(s->ops->remove(s, "b", 1), 1);
    resp_buf_clear(&b);
    s->ops->info(s, NULL, &b, NULL);
    ASSERT(b.len > 0 && memcmp(b.data, "# Memory\r\n", 10) == 0);
    ASSERT(info_num(&b, "fragmentation_ratio") > 0);
    ASSERT_EQ(info_num(&b, "segment_size"), SEG);
    ASSERT_EQ(info_num(&b, "segment_used"), 2 * sizeof v);
    ASSERT_EQ(info_num(&b, "segment_free"), SEG - 2 * sizeof v);
    ASSERT_EQ(info_num(&b, "largest_free_extent"), SEG - 3 * sizeof v);
    ASSERT_EQ(info_num(&b, "objects_complete"), 2);
    ASSERT_EQ(info_num(&b, "objects_pending"), 0);
    ASSERT_EQ(info_num(&b, "used_memory"), 2 * sizeof v);
    /* A section the store does not have adds nothing. */
    resp_buf_clear(&b);
    s->ops->info(s, NULL, &b, "keyspace");
    ASSERT_EQ(b.len, 0);
    resp_buf_free(&b);
    s->ops->destroy(s);
}

typedef struct seen {
    int count[1000];
} seen;

static void mark(const char *key, size_t keylen, void *ctx) {
    seen *sn = ctx;
    char num[8] = {0};   /* key is not NUL-terminated */
    if (keylen < 2 || keylen > sizeof num) return;
    memcpy(num, key + 1, keylen - 1);
    int i = atoi(num);
    if (i >= 0 && i < 1000) sn->count[i]++;
}

static void test_scan_all(void) {
    store *s = new_store(SEG);
    ASSERT(s);
    char key[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ASSERT_EQ(put(s, key, key, strlen(key)), STORE_OK);
    }
    void *dst;
    store_put *p;
    ASSERT_EQ(s->ops->put_start(s, "pending", 7, 10, &dst, &p), STORE_OK);
    seen sn = {{0}};
    uint64_t cursor = 0;
    int calls = 0;
    do {
        cursor = s->ops->scan(s, cursor, 10, mark, &sn);
        calls++;
    } while (cursor != 0 && calls < 100000);
    ASSERT_EQ(cursor, 0);
    for (int i = 0; i < 1000; i++) ASSERT_MSG(sn.count[i] >= 1, "key k%d not returned", i);
    s->ops->put_abort(s, p);
    s->ops->destroy(s);
}

/* Not a pass/fail check: the price of verifying checksums on every GET. */
static void test_checksum_cost(void) {
    uint64_t size = 64ULL * 1024 * 1024;
    store *s = new_store(size);
    ASSERT(s);
    void *dst;
    store_put *p;
    ASSERT_EQ(s->ops->put_start(s, "big", 3, size, &dst, &p), STORE_OK);
    memset(dst, 0xab, size);
    ASSERT_EQ(s->ops->put_end(s, p), STORE_OK);
    uint64_t t0 = mono_us();
    int rounds = 4;
    for (int i = 0; i < rounds; i++) {
        const void *data;
        uint64_t n;
        store_pin *pin;
        ASSERT_EQ(s->ops->get(s, "big", 3, &data, &n, &pin), STORE_OK);
        s->ops->release(s, pin);
    }
    uint64_t us = mono_us() - t0;
    if (us == 0) us = 1;
    printf("# verified GET of 64 MiB: %.2f ms each, %.1f GB/s\n", us / 1000.0 / rounds,
           (double)size * rounds / us / 1000.0);
    s->ops->destroy(s);
}

static void test_bad_size(void) {
    char err[256] = "";
    ASSERT(store_local_create(0, 0, err, sizeof err) == NULL);
    ASSERT(strstr(err, "segment size") != NULL);
}

static void flushed_cb(void *ctx) { (*(int *)ctx)++; }

/* Prefix pins (MOON.PREFIXPIN), as the master keeps them: the count of
 * leading keys stored, those pinned under the id; a pinned key is not
 * removed (remove answers 0, FLUSHALL leaves it) nor collected until
 * unpinned or its time runs out; the same id adds keys; a bad id pins
 * nothing. */
static void test_prefix_pins(void) {
    store *s = new_store(SEG);
    ASSERT(s);
    store_local_gc(s, EVICT_LRU, 90, 80);
    static unsigned char val[96 * 1024];
    fill(val, sizeof val, 3);
    ASSERT_EQ(put(s, "p0", val, sizeof val), STORE_OK);
    ASSERT_EQ(put(s, "p1", val, sizeof val), STORE_OK);
    ASSERT_EQ(put(s, "p3", val, sizeof val), STORE_OK);
    store_key k[4] = {{"p0", 2}, {"p1", 2}, {"p2", 2}, {"p3", 2}};
    size_t hit = 99, held = 99;
    ASSERT_EQ(s->ops->prefix_pin(s, 7, 60000, k, 4, &hit), STORE_OK);
    ASSERT_EQ(hit, 2);                                  /* p3 is past the miss: not pinned */
    ASSERT_EQ(s->ops->prefix_pin(s, 7, 60000, k, 2, &hit), STORE_OK);   /* again: held once */
    ASSERT_EQ(s->ops->remove(s, "p0", 2), 0);
    ASSERT_EQ(s->ops->remove(s, "p3", 2), 1);
    store_flushed f;
    int calls = 0;
    store_flush_inline(s, &f, flushed_cb, &calls);
    ASSERT(calls == 1 && f.rc == STORE_OK && f.removed == 0);
    ASSERT_EQ(s->ops->count(s), 2);
    /* a full segment collects around them: puts go on, p0 and p1 stay */
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof key, "gc%d", i);
        ASSERT_EQ(put(s, key, val, sizeof val), STORE_OK);
    }
    ASSERT(value_is(s, "p0", val, sizeof val) && value_is(s, "p1", val, sizeof val));
    ASSERT_EQ(s->ops->unpin(s, 7, &held), STORE_OK);
    ASSERT_EQ(held, 2);
    ASSERT_EQ(s->ops->unpin(s, 7, &held), STORE_OK);
    ASSERT_EQ(held, 0);
    ASSERT_EQ(s->ops->remove(s, "p0", 2), 1);
    /* a short pin runs out by itself (a bounded wait) */
    ASSERT_EQ(s->ops->prefix_pin(s, 8, 50, k + 1, 1, &hit), STORE_OK);
    ASSERT_EQ(hit, 1);
    ASSERT_EQ(s->ops->remove(s, "p1", 2), 0);
    int gone = 0;
    for (uint64_t t0 = mono_ms(); !gone && mono_ms() - t0 < 20000; usleep(10000)) gone = s->ops->remove(s, "p1", 2);
    ASSERT(gone);
    ASSERT_EQ(s->ops->prefix_pin(s, 0, 1000, k, 1, &hit), STORE_REFUSED);   /* id 0 */
    s->ops->destroy(s);
}

int main(void) {
    RUN_TEST(test_put_get);
    RUN_TEST(test_write_once);
    RUN_TEST(test_pending_invisible_and_exists);
    RUN_TEST(test_abort_frees);
    RUN_TEST(test_remove_pinned);
    RUN_TEST(test_nospace_harms_nothing);
    RUN_TEST(test_toobig);
    RUN_TEST(test_empty_value);
    RUN_TEST(test_checksum_mismatch);
    RUN_TEST(test_get_async_inline);
    RUN_TEST(test_fragmentation_info);
    RUN_TEST(test_scan_all);
    RUN_TEST(test_checksum_cost);
    RUN_TEST(test_bad_size);
    RUN_TEST(test_prefix_pins);
    TEST_EXIT();
}
