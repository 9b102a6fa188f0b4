/* Unit tests of src/proto: status words both ways and the exact error
 * texts, the extent decoder's bounds (counts, numbers, shapes, caps,
 * sums) on RESP fed through hiredis's reader as on the wire, the packed
 * placements of MOON.MPUTSTART PACKED and MOON.MGETPACKED, the packed
 * notes of MOON.HOLDINGS PACKED, and the registration proof. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cap.h"
#include "core/util.h"
#include "proto/ended.h"
#include "proto/extents.h"
#include "proto/located.h"
#include "link/master_link.h"
#include "proto/notes.h"
#include "proto/placed.h"
#include "proto/register.h"
#include "proto/report.h"
#include "proto/reply_bound.h"
#include "proto/slices.h"
#include "backend/le.h"
#include "core/crc32c.h"
#include "proto/status.h"
#include "test.h"

/* ---- status words ---- */

static void test_word_round_trip(void) {
    for (int st = PROTO_ERR; st < PROTO_NSTATUS; st++) {
        const char *w = proto_word((proto_status)st);
        char msg[64];
        snprintf(msg, sizeof msg, "%s some words after", w);
        ASSERT_MSG(proto_status_of_reply(msg, strlen(msg)) == st, "%s", w);
        ASSERT_MSG(proto_status_of_reply(w, strlen(w)) == st, "bare %s", w);
        for (int other = PROTO_ERR; other < st; other++)
            ASSERT_MSG(strcmp(w, proto_word((proto_status)other)) != 0, "%s twice", w);
    }
    ASSERT_STREQ(proto_word((proto_status)99), "ERR");
}

static void test_first_word_only(void) {
    static const char *none[] = {"ERRATA x", "EXISTSX", "", " ERR x", "OK", "err x", "NOT FOUND"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        ASSERT_MSG(proto_status_of_reply(none[i], strlen(none[i])) == -1, "'%s'", none[i]);
    /* what follows the word never changes the status */
    const char *m = "ERR no such key";
    ASSERT_EQ(proto_status_of_reply(m, strlen(m)), PROTO_ERR);
    m = "NOTFOUND ERR";
    ASSERT_EQ(proto_status_of_reply(m, strlen(m)), PROTO_NOTFOUND);
    /* only len bytes are read: "EXISTS" cut to "EXIST" is no word */
    ASSERT_EQ(proto_status_of_reply("EXISTS", 5), -1);
}

static void test_error_texts(void) {
    char out[PROTO_ERR_LEN + 16];
    static const struct { proto_status st; const char *msg, *text; } cases[] = {
        {PROTO_EXISTS, "key already exists", "EXISTS key already exists"},
        {PROTO_EXISTS, "key is being written", "EXISTS key is being written"},
        {PROTO_NOTFOUND, "no such key", "NOTFOUND no such key"},
        {PROTO_TIMEDOUT, "put timed out and was revoked", "TIMEDOUT put timed out and was revoked"},
        {PROTO_NOSPACE, "cluster full", "NOSPACE cluster full"},
        {PROTO_NOREPLICAS, "3 replicas need 3 alive nodes", "NOREPLICAS 3 replicas need 3 alive nodes"},
        {PROTO_NODEDEAD, "node 2 left", "NODEDEAD node 2 left"},
        {PROTO_NOAUTH, "bad or missing proof", "NOAUTH bad or missing proof"},
        {PROTO_ERR, "empty key", "ERR empty key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = proto_error_text(cases[i].st, cases[i].msg, out, sizeof out);
        ASSERT_STREQ(out, cases[i].text);
        ASSERT_EQ(n, strlen(cases[i].text));
    }
    /* truncated, still terminated, length says what is there */
    ASSERT_EQ(proto_error_text(PROTO_NOSPACE, "cluster full", out, 8), 7);
    ASSERT_STREQ(out, "NOSPACE");
}

/* ---- extents ---- */

typedef struct rbuf {
    char *p;
    size_t len, cap;
} rbuf;

static void put(rbuf *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void putf(rbuf *b, const char *fmt, long long v) {
    char s[40];
    put(b, s, (size_t)snprintf(s, sizeof s, fmt, v));
}

static void cap_bulk(rbuf *b, uint32_t node, uint32_t rights, uint64_t off, uint64_t len) {
    te_cap cap = {.node_id = node, .rights = rights, .offset = off, .length = len, .expiry_ms = 1};
    uint8_t key[TE_CAP_KEY_LEN] = {0}, wire[TE_CAP_WIRE_LEN];
    te_cap_sign(&cap, key);
    te_cap_encode(&cap, wire);
    putf(b, "$%lld\r\n", TE_CAP_WIRE_LEN);
    put(b, wire, sizeof wire);
    put(b, "\r\n", 2);
}

/* [node, off, len, cap] with a cap that grants exactly it. */
static void remote(rbuf *b, long long node, long long off, long long len, uint32_t rights) {
    put(b, "*4\r\n", 4);
    putf(b, ":%lld\r\n", node);
    putf(b, ":%lld\r\n", off);
    putf(b, ":%lld\r\n", len);
    cap_bulk(b, (uint32_t)node, rights, (uint64_t)off, (uint64_t)len);
}

static redisReply *parse(rbuf *b) {
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    redisReaderFeed(rd, b->p, b->len);
    if (redisReaderGetReply(rd, &reply) != REDIS_OK) reply = NULL;
    redisReaderFree(rd);
    free(b->p);
    memset(b, 0, sizeof *b);
    return reply;
}

/* Decode b's reply as read extents of size bytes: 0, -1, or -2 if b is not RESP. */
/* proto_extents_decode_into, into a fresh array that is the caller's on
 * success and NULL on failure. */
static int decode_fresh(const redisReply *r, proto_ext_form form, uint64_t size, uint32_t rights,
                        te_extent **ext, uint32_t *n) {
    *ext = xcalloc(PROTO_MAX_EXTENTS, sizeof **ext);
    int rc = proto_extents_decode_into(r, form, size, rights, *ext, PROTO_MAX_EXTENTS, n);
    if (rc != 0) {
        free(*ext);
        *ext = NULL;
    }
    return rc;
}

static int decode(rbuf *b, proto_ext_form form, uint64_t size, uint32_t *n, te_extent **ext) {
    redisReply *r = parse(b);
    if (!r) return -2;
    int rc = decode_fresh(r, form, size, TE_CAP_READ, ext, n);
    freeReplyObject(r);
    return rc;
}

static void test_extents_good(void) {
    rbuf b = {0};
    put(&b, "*2\r\n", 4);
    remote(&b, 3, 4096, 60, TE_CAP_READ);
    remote(&b, PROTO_MAX_NODES, 0, 40, TE_CAP_READ | TE_CAP_WRITE);
    te_extent *e;
    uint32_t n;
    ASSERT_EQ(decode(&b, PROTO_EXT_REMOTE, 100, &n, &e), 0);
    ASSERT_EQ(n, 2);
    ASSERT(e[0].node_id == 3 && e[0].offset == 4096 && e[0].length == 60);
    ASSERT(e[1].node_id == PROTO_MAX_NODES && e[1].length == 40 && e[1].cap.length == 40);
    free(e);
    /* LOCAL: [off, len, cap], the node comes from the cap */
    const char *local = "*1\r\n*3\r\n:64\r\n:10\r\n";
    put(&b, local, strlen(local));
    cap_bulk(&b, 5, TE_CAP_READ, 64, 10);
    ASSERT_EQ(decode(&b, PROTO_EXT_LOCAL, 10, &n, &e), 0);
    ASSERT(n == 1 && e[0].node_id == 5 && e[0].offset == 64 && e[0].length == 10);
    free(e);
}

/* Exactly PROTO_MAX_EXTENTS pass; one more, more extents than bytes, or
 * more than the room given fail. */
static void test_extents_counts(void) {
    for (int extra = 0; extra <= 1; extra++) {
        int count = PROTO_MAX_EXTENTS + extra;
        rbuf b = {0};
        putf(&b, "*%lld\r\n", count);
        for (int i = 0; i < count; i++) remote(&b, 1, i, 1, TE_CAP_READ);
        te_extent *e = NULL;
        uint32_t n = 99;
        int rc = decode(&b, PROTO_EXT_REMOTE, (uint64_t)count, &n, &e);
        ASSERT_MSG(rc == (extra ? -1 : 0), "%d extents: %d", count, rc);
        ASSERT_EQ(n, extra ? 0 : (uint32_t)count);
        free(e);
    }
    rbuf b = {0};
    put(&b, "*2\r\n", 4);
    remote(&b, 1, 0, 1, TE_CAP_READ);
    remote(&b, 1, 1, 1, TE_CAP_READ);
    uint32_t n = 99;
    te_extent room[2];
    redisReply *r = parse(&b);
    ASSERT(r != NULL);
    ASSERT_EQ(proto_extents_decode_into(r, PROTO_EXT_REMOTE, 1, TE_CAP_READ, room, 2, &n), -1);   /* 2 extents for 1 byte */
    ASSERT_EQ(n, 0);
    /* the room given bounds what is written: 2 extents do not go in 1 */
    ASSERT_EQ(proto_extents_decode_into(r, PROTO_EXT_REMOTE, 2, TE_CAP_READ, room, 1, &n), -1);
    ASSERT_EQ(n, 0);
    ASSERT_EQ(proto_extents_decode_into(r, PROTO_EXT_REMOTE, 2, TE_CAP_READ, room, 2, &n), 0);
    ASSERT(n == 2 && room[1].offset == 1);
    freeReplyObject(r);
}

static void test_extents_refused(void) {
    enum { NODE, OFF, LEN };
    /* one field of [node, off, len] replaced by a bad number */
    static const struct { int field; long long v; } nums[] = {
        {NODE, 0}, {NODE, PROTO_MAX_NODES + 1}, {NODE, -1}, {OFF, -1}, {LEN, 0}, {LEN, -100},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        long long f[3] = {2, 0, 100};
        f[nums[i].field] = nums[i].v;
        rbuf b = {0};
        put(&b, "*1\r\n*4\r\n", 8);
        for (int k = 0; k < 3; k++) putf(&b, ":%lld\r\n", f[k]);
        cap_bulk(&b, 2, TE_CAP_READ, 0, 100);
        te_extent *e;
        uint32_t n;
        ASSERT_MSG(decode(&b, PROTO_EXT_REMOTE, 100, &n, &e) == -1, "number case %zu", i);
    }
    /* shapes, caps and sums (after "*1\r\n" or as given) */
    static const char *const shapes[] = {
        ":1\r\n",                               /* not an array */
        "*0\r\n",                               /* no extent */
        "*-1\r\n",                              /* nil array */
        "*1\r\n*3\r\n:2\r\n:0\r\n:100\r\n",     /* truncated extent */
        "*1\r\n*4\r\n:2\r\n:0\r\n:100\r\n$3\r\nabc\r\n",   /* cap not 64 bytes */
        "*1\r\n*4\r\n:2\r\n:0\r\n:100\r\n:7\r\n",          /* cap not a string */
        "*1\r\n*4\r\n$1\r\n2\r\n:0\r\n:100\r\n:7\r\n",     /* node a string */
        "*1\r\n$-1\r\n",                        /* nil extent */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        rbuf b = {0};
        put(&b, shapes[i], strlen(shapes[i]));
        te_extent *e;
        uint32_t n;
        ASSERT_MSG(decode(&b, PROTO_EXT_REMOTE, 100, &n, &e) == -1, "shape case %zu", i);
    }
}

/* A cap must grant exactly its extent, with the right asked for. */
static void test_extents_caps_and_sums(void) {
    static const struct { uint32_t node, rights; uint64_t off, len, size; } bad[] = {
        {3, TE_CAP_READ, 0, 100, 100},     /* cap for another node */
        {2, TE_CAP_READ, 8, 100, 100},     /* another offset */
        {2, TE_CAP_READ, 0, 200, 100},     /* a larger range */
        {2, TE_CAP_WRITE, 0, 100, 100},    /* write where read is asked */
        {2, TE_CAP_READ, 0, 100, 101},     /* sum short of the size */
        {2, TE_CAP_READ, 0, 100, 99},      /* beyond it */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rbuf b = {0};
        const char *head = "*1\r\n*4\r\n:2\r\n:0\r\n:100\r\n";
        put(&b, head, strlen(head));
        cap_bulk(&b, bad[i].node, bad[i].rights, bad[i].off, bad[i].len);
        te_extent *e;
        uint32_t n;
        ASSERT_MSG(decode(&b, PROTO_EXT_REMOTE, bad[i].size, &n, &e) == -1, "case %zu", i);
    }
    /* lengths that would wrap a 64-bit sum */
    rbuf b = {0};
    put(&b, "*2\r\n", 4);
    remote(&b, 2, 0, INT64_MAX, TE_CAP_READ);
    remote(&b, 2, 0, INT64_MAX, TE_CAP_READ);
    te_extent *e;
    uint32_t n;
    ASSERT_EQ(decode(&b, PROTO_EXT_REMOTE, 10, &n, &e), -1);
}

/* What the master encodes, the decoder reads back: same extents, caps
 * that verify under the key with the rights and expiry granted. */
static void test_encode_decode(void) {
    uint8_t key[TE_CAP_KEY_LEN] = {9, 8, 7};
    obj_extent a[2] = {{2, 4096, 60}, {5, 0, 40}}, b[1] = {{3, 128, 100}};
    obj_replica reps[2] = {{2, a}, {1, b}};
    object o = {.size = 100, .nreplicas = 2, .rep.list = reps, .rep_list = 1};
    proto_grant g = {TE_CAP_WRITE, 5000, key, 0, 77};
    resp_buf out;
    resp_buf_init(&out);
    proto_replicas_encode(&out, &o, &g);
    rbuf rb = {0};
    put(&rb, out.data, out.len);
    resp_buf_free(&out);
    redisReply *r = parse(&rb);
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    for (size_t i = 0; i < 2; i++) {
        te_extent *e;
        uint32_t n;
        ASSERT_EQ(decode_fresh(r->element[i], PROTO_EXT_REMOTE, 100, TE_CAP_WRITE, &e, &n), 0);
        ASSERT_EQ(n, reps[i].nextents);
        for (uint32_t k = 0; k < n; k++) {
            const obj_extent *want = &reps[i].extents[k];
            int same = e[k].node_id == want->node && e[k].offset == want->offset &&
                       e[k].length == want->length;
            int valid = te_cap_check(&e[k].cap, key, 77, want->node, TE_WRITE, want->offset,
                                     want->length, 4999) == TE_OK &&
                        te_cap_check(&e[k].cap, key, 77, want->node, TE_WRITE, want->offset,
                                     want->length, 5000) != TE_OK;
            if (!same || !valid) free(e);
            ASSERT_MSG(same && valid, "replica %zu extent %u", i, k);
        }
        free(e);
    }
    /* read rights were not granted */
    te_extent *e;
    uint32_t n;
    ASSERT_EQ(decode_fresh(r->element[0], PROTO_EXT_REMOTE, 100, TE_CAP_READ, &e, &n), -1);
    freeReplyObject(r);
    /* LOCAL: no node on the wire, the cap names it */
    resp_buf_init(&out);
    proto_extents_encode(&out, PROTO_EXT_LOCAL, b, 1, &g);
    put(&rb, out.data, out.len);
    resp_buf_free(&out);
    r = parse(&rb);
    ASSERT(r && r->elements == 1 && r->element[0]->elements == 3);
    ASSERT_EQ(decode_fresh(r, PROTO_EXT_LOCAL, 100, TE_CAP_WRITE, &e, &n), 0);
    freeReplyObject(r);
    ASSERT(n == 1 && e[0].node_id == 3 && e[0].offset == 128);
    free(e);
}

/* ---- packed placements (MOON.MPUTSTART PACKED) ---- */

/* Whether a decoded record's two replicas are reps, extent by extent, each
 * with a cap that g signed for op on exactly that extent (checked just before
 * it expires); why names the first that is not. */
static int replicas_match(const proto_placed *pl, const obj_replica *reps, const proto_grant *g, te_op op,
                          char *why, size_t n) {
    for (uint32_t r = 0; r < 2; r++) {
        if (pl->next[r] != reps[r].nextents) {
            snprintf(why, n, "replica %u has %u extents", r, pl->next[r]);
            return 0;
        }
        for (uint32_t k = 0; k < pl->next[r]; k++) {
            const obj_extent *want = &reps[r].extents[k];
            const te_extent *e = &pl->ext[r][k];
            if (e->node_id != want->node || e->offset != want->offset || e->length != want->length ||
                e->cap.issued_us != g->issued_us ||
                te_cap_check(&e->cap, g->key, g->term, want->node, op, want->offset, want->length,
                             g->expiry_ms - 1) != TE_OK) {
                snprintf(why, n, "replica %u extent %u", r, k);
                return 0;
            }
        }
    }
    return 1;
}

/* Two placed objects around a refusal, as the master writes them. */
static void placed_blob(resp_buf *out, object *o, const proto_grant *g) {
    resp_buf_init(out);
    proto_placed_put(out, o, g);
    proto_placed_put_error(out, "EXISTS key already exists");
    proto_placed_put(out, o, g);
}

static void test_placed_round_trip(void) {
    uint8_t key[TE_CAP_KEY_LEN] = {4, 2};
    obj_extent a[2] = {{2, 4096, 60}, {5, 0, 40}}, b[1] = {{3, 128, 100}};
    obj_replica reps[2] = {{2, a}, {1, b}};
    object o = {.size = 100, .nreplicas = 2, .rep.list = reps, .rep_list = 1};
    proto_grant g = {TE_CAP_WRITE, 5000, key, 12, 77};
    resp_buf out;
    placed_blob(&out, &o, &g);
    const uint8_t *p = (const uint8_t *)out.data, *end = p + out.len;
    proto_extbuf buf = {0};
    for (int rec = 0; rec < 3; rec++) {
        proto_placed pl;
        ASSERT_EQ(proto_placed_next(&p, end, 100, TE_CAP_WRITE, &buf, &pl), 0);
        if (rec == 1) {
            ASSERT(pl.err && pl.errlen == 25 && memcmp(pl.err, "EXISTS key already exists", 25) == 0);
            ASSERT_EQ(pl.nreplicas, 0);
            continue;
        }
        ASSERT(!pl.err && pl.nreplicas == 2);
        ASSERT(pl.nextents == 3 && pl.ext[0] == buf.ext && pl.ext[1] == buf.ext + 2);   /* one buffer */
        char why[64];
        int ok = replicas_match(&pl, reps, &g, TE_WRITE, why, sizeof why);
        ASSERT_MSG(ok, "record %d: %s", rec, why);
    }
    ASSERT(p == end);
    /* past the end: nothing to decode */
    proto_placed pl;
    ASSERT_EQ(proto_placed_next(&p, end, 100, TE_CAP_WRITE, &buf, &pl), -1);
    /* a placement needs a buffer to decode into */
    p = (const uint8_t *)out.data;
    ASSERT_EQ(proto_placed_next(&p, end, 100, TE_CAP_WRITE, NULL, &pl), -1);
    proto_extbuf_free(&buf);
    resp_buf_free(&out);
}

/* Every cut of a record fails it, as do counts, sizes and rights that
 * do not fit; nothing is left allocated (the ASan build checks). */
static void test_placed_refused(void) {
    uint8_t key[TE_CAP_KEY_LEN] = {1};
    obj_extent a[2] = {{2, 0, 60}, {5, 64, 40}};
    obj_replica reps[1] = {{2, a}};
    object o = {.size = 100, .nreplicas = 1, .rep.list = reps, .rep_list = 1};
    proto_grant g = {TE_CAP_WRITE, 5000, key, 0, 1};
    resp_buf out;
    resp_buf_init(&out);
    proto_placed_put(&out, &o, &g);
    proto_placed_put_error(&out, "NOSPACE full");
    size_t first = 2 + 2 + 2 * TE_CAP_WIRE_LEN;   /* head, extent count, two caps */
    proto_extbuf buf = {0};
    ASSERT_EQ(out.len, first + 3 + 12);
    for (size_t cut = 0; cut < out.len; cut++) {
        if (cut == first) continue;   /* a whole first record */
        const uint8_t *p = (const uint8_t *)out.data, *end = p + cut;
        proto_placed pl;
        int rc = proto_placed_next(&p, end, 100, TE_CAP_WRITE, &buf, &pl);
        if (rc == 0) rc = proto_placed_next(&p, end, 100, TE_CAP_WRITE, &buf, &pl);   /* the first whole: the second is cut */
        ASSERT_MSG(rc == -1, "cut at %zu", cut);
    }
    static const uint64_t sizes[] = {99, 101, 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const uint8_t *p = (const uint8_t *)out.data;
        proto_placed pl;
        ASSERT_MSG(proto_placed_next(&p, p + out.len, sizes[i], TE_CAP_WRITE, &buf, &pl) == -1, "size %llu",
                   (unsigned long long)sizes[i]);
    }
    const uint8_t *p = (const uint8_t *)out.data;
    proto_placed pl;
    ASSERT_EQ(proto_placed_next(&p, p + out.len, 100, TE_CAP_READ, &buf, &pl), -1);   /* write caps only */
    /* bad heads: kind, replica count, extent count */
    static const size_t at[] = {0, 1, 1, 2, 2};
    static const uint8_t val[] = {7, 0, PROTO_MAX_REPLICAS + 1, 0, 3};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        uint8_t *bytes = xmemdup(out.data, out.len);
        bytes[at[i]] = val[i];
        p = bytes;
        int rc = proto_placed_next(&p, bytes + out.len, 100, TE_CAP_WRITE, &buf, &pl);
        free(bytes);
        ASSERT_MSG(rc == -1, "case %zu", i);
    }
    proto_extbuf_free(&buf);
    resp_buf_free(&out);
}

/* ---- packed put ends (MOON.MPUTEND PACKED) ---- */

/* Published, refused, published: one byte, a refusal record, one byte;
 * then nothing more to decode. */
static void test_ended_round_trip(void) {
    resp_buf out;
    resp_buf_init(&out);
    proto_ended_put_ok(&out);
    proto_ended_put_error(&out, "NOTFOUND no put in progress for this key");
    proto_ended_put_ok(&out);
    ASSERT_EQ(out.len, 1 + 3 + 40 + 1);
    const uint8_t *p = (const uint8_t *)out.data, *end = p + out.len;
    proto_ended rec;
    ASSERT_EQ(proto_ended_next(&p, end, &rec), 0);
    ASSERT(rec.err == NULL);
    ASSERT_EQ(proto_ended_next(&p, end, &rec), 0);
    ASSERT(rec.err && rec.errlen == 40 && memcmp(rec.err, "NOTFOUND no put in progress for this key", 40) == 0);
    ASSERT_EQ(proto_ended_next(&p, end, &rec), 0);
    ASSERT(rec.err == NULL && p == end);
    ASSERT_EQ(proto_ended_next(&p, end, &rec), -1);
    resp_buf_free(&out);
}

/* A refusal cut anywhere fails, as does a tag that is neither record
 * (placed.h's placement tag 0 reads as "published", so 2 and up). */
static void test_ended_refused(void) {
    resp_buf out;
    resp_buf_init(&out);
    proto_ended_put_error(&out, "NOSPACE full");
    for (size_t cut = 0; cut < out.len; cut++) {
        const uint8_t *p = (const uint8_t *)out.data;
        proto_ended rec;
        ASSERT_MSG(proto_ended_next(&p, p + cut, &rec) == -1, "cut at %zu", cut);
    }
    static const uint8_t bad[] = {2, 7, 255};
    for (size_t i = 0; i < sizeof bad; i++) {
        const uint8_t *p = &bad[i];
        proto_ended rec;
        ASSERT_MSG(proto_ended_next(&p, p + 1, &rec) == -1, "tag %u", bad[i]);
    }
    resp_buf_free(&out);
}

/* ---- packed holdings notes ---- */

/* A hold of two extents, a drop, a hold of one, as the master writes them. */
static void notes_blob(resp_buf *out) {
    obj_extent a[2] = {{3, 128, 60}, {7, 0, 40}}, b[1] = {{2, 64, 5}};
    obj_replica ra = {2, a}, rb = {1, b};
    resp_buf_init(out);
    proto_note_put(out, 0, "alpha", 5, 100, 0xdeadbeef, 2, &ra, NULL);
    proto_note_put(out, 1, "gone", 4, 0, 0, 0, NULL, NULL);
    proto_note_put(out, 0, "b", 1, 5, 7, 8, &rb, NULL);
}

static void test_notes_round_trip(void) {
    resp_buf out;
    notes_blob(&out);
    ASSERT_EQ(out.len, (size_t)(PROTO_NOTE_HOLD_HDR + 5 + 2 * PROTO_NOTE_EXTENT) + PROTO_NOTE_DROP_HDR + 4 +
                           PROTO_NOTE_HOLD_HDR + 1 + PROTO_NOTE_EXTENT);
    obj_extent *ext = xcalloc(PROTO_MAX_EXTENTS, sizeof *ext);
    const uint8_t *p = (const uint8_t *)out.data, *end = p + out.len;
    proto_note n;
    ASSERT_EQ(proto_note_next(&p, end, ext, &n), 0);
    ASSERT(!n.drop && n.keylen == 5 && memcmp(n.key, "alpha", 5) == 0);
    ASSERT(n.size == 100 && n.crc == 0xdeadbeef && n.want == 2 && n.rep.nextents == 2);
    ASSERT(n.rep.extents[0].node == 3 && n.rep.extents[0].offset == 128 && n.rep.extents[0].length == 60);
    ASSERT(n.rep.extents[1].node == 7 && n.rep.extents[1].offset == 0 && n.rep.extents[1].length == 40);
    ASSERT_EQ(proto_note_next(&p, end, ext, &n), 0);
    ASSERT(n.drop && n.keylen == 4 && memcmp(n.key, "gone", 4) == 0 && n.rep.nextents == 0);
    ASSERT_EQ(proto_note_next(&p, end, ext, &n), 0);
    ASSERT(!n.drop && n.keylen == 1 && n.key[0] == 'b' && n.size == 5 && n.crc == 7 && n.want == 8);
    ASSERT(n.rep.nextents == 1 && n.rep.extents[0].node == 2 && n.rep.extents[0].offset == 64 &&
           n.rep.extents[0].length == 5);
    ASSERT(p == end);
    ASSERT_EQ(proto_note_next(&p, end, ext, &n), -1);   /* nothing left */
    free(ext);
    resp_buf_free(&out);
}

/* A drop of a disk record is a drop with 1 as its second byte. */
static void test_notes_disk_drop(void) {
    resp_buf out;
    resp_buf_init(&out);
    proto_note_put(&out, PROTO_NOTE_DROP_DISK, "cold", 4, 9, 9, 0, NULL, NULL);
    proto_note_put(&out, 1, "gone", 4, 0, 0, 0, NULL, NULL);
    ASSERT_EQ(out.len, (size_t)2 * (PROTO_NOTE_DROP_HDR + 4));
    ASSERT_EQ((uint8_t)out.data[1], 1);
    obj_extent ext[1];
    const uint8_t *p = (const uint8_t *)out.data, *end = p + out.len;
    proto_note n;
    ASSERT_EQ(proto_note_next(&p, end, ext, &n), 0);
    ASSERT(n.drop == PROTO_NOTE_DROP_DISK && n.keylen == 4 && memcmp(n.key, "cold", 4) == 0);
    ASSERT_EQ(proto_note_next(&p, end, ext, &n), 0);
    ASSERT(n.drop == 1 && memcmp(n.key, "gone", 4) == 0);
    ASSERT(p == end);
    resp_buf_free(&out);
}

/* A copy of len bytes at data with the width bytes at `at` set to val
 * (little-endian): one field replaced. Free it. */
static uint8_t *patched(const void *data, size_t len, size_t at, size_t width, uint64_t val) {
    uint8_t *bytes = xmemdup(data, len);
    for (size_t k = 0; k < width; k++) bytes[at + k] = (uint8_t)(val >> (8 * k));
    return bytes;
}

/* Every cut of a record fails it; so does every field out of its bound. */
static void test_notes_refused(void) {
    resp_buf out;
    notes_blob(&out);
    obj_extent *ext = xcalloc(PROTO_MAX_EXTENTS, sizeof *ext);
    size_t first = PROTO_NOTE_HOLD_HDR + 5 + 2 * PROTO_NOTE_EXTENT, second = first + PROTO_NOTE_DROP_HDR + 4;
    for (size_t cut = 0; cut < out.len; cut++) {
        const uint8_t *p = (const uint8_t *)out.data, *end = p + cut;
        proto_note n;
        int rc = 0;
        while (rc == 0 && p < end) rc = proto_note_next(&p, end, ext, &n);
        ASSERT_MSG(rc == -1 || cut == 0 || cut == first || cut == second, "cut at %zu", cut);
    }
    /* one field replaced: kind, want, key length, size, extent count,
     * an extent's node, offset and length, a drop's second byte */
    struct { size_t at, width; uint64_t val; } bad[] = {
        {0, 1, 3}, {1, 1, PROTO_MAX_REPLICAS + 1}, {2, 2, 0}, {2, 2, PROTO_MAX_KEY_LEN + 1},
        {8, 8, 0}, {8, 8, PROTO_MAX_SEGMENT + 1}, {16, 2, 0}, {16, 2, PROTO_MAX_EXTENTS + 1},
        {16, 2, 3}, {23, 4, 0}, {27, 8, PROTO_MAX_SEGMENT + 1}, {35, 8, 0},
        {35, 8, PROTO_MAX_SEGMENT + 1}, {first + 1, 1, 2}, {first + 2, 2, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *bytes = patched(out.data, out.len, bad[i].at, bad[i].width, bad[i].val);
        const uint8_t *p = bytes, *end = bytes + out.len;
        proto_note n;
        int rc = 0;
        while (rc == 0 && p < end) rc = proto_note_next(&p, end, ext, &n);
        free(bytes);
        ASSERT_MSG(rc == -1, "case %zu", i);
    }
    free(ext);
    resp_buf_free(&out);
}

/* ---- slice CRCs in holdings notes and reports ---- */

#define SL_OBJ 150000   /* three slices of 64 KiB, the last short */
static const uint32_t sl_crcs[3] = {0x11111111, 0x22222222, 0x33333333};
static const proto_slices sl_three = {65536, 3, (uint32_t *)sl_crcs};

/* A hold with slice CRCs, then one without. */
static void sliced_notes_blob(resp_buf *out) {
    obj_extent a[2] = {{3, 128, 100000}, {7, 0, 50000}};
    obj_replica ra = {2, a};
    resp_buf_init(out);
    proto_note_put(out, 0, "big", 3, SL_OBJ, 0xabcd, 2, &ra, &sl_three);
    proto_note_put(out, 0, "big", 3, SL_OBJ, 0xabcd, 2, &ra, NULL);
}

static void test_notes_slices(void) {
    resp_buf out, plain;
    sliced_notes_blob(&out);
    size_t hold = PROTO_NOTE_HOLD_HDR + 3 + 2 * PROTO_NOTE_EXTENT, first = hold + PROTO_SLICES_REF_HDR + 12;
    ASSERT_EQ(out.len, first + hold);
    ASSERT_EQ(proto_note_len((const uint8_t *)out.data), first);
    obj_extent *ext = xcalloc(PROTO_MAX_EXTENTS, sizeof *ext);
    const uint8_t *p = (const uint8_t *)out.data, *end = p + out.len;
    proto_note n;
    ASSERT_EQ(proto_note_next(&p, end, ext, &n), 0);
    ASSERT(!n.drop && n.size == SL_OBJ && n.crc == 0xabcd && n.rep.nextents == 2 && n.rep.extents[1].node == 7);
    ASSERT(n.slices.size == 65536 && n.slices.count == 3);
    for (int i = 0; i < 3; i++) ASSERT_EQ(le_get32(n.slices.crc + 4 * i), sl_crcs[i]);
    proto_slices back;
    proto_slices_from_ref(&n.slices, &back);
    ASSERT(back.size == 65536 && back.count == 3 && memcmp(back.crc, sl_crcs, sizeof sl_crcs) == 0);
    proto_slices_free(&back);
    ASSERT_EQ(proto_note_next(&p, end, ext, &n), 0);
    ASSERT(n.slices.count == 0 && n.slices.crc == NULL && p == end);
    /* for a node that did not ask: the same holds without them */
    resp_buf_init(&plain);
    proto_notes_plain((const uint8_t *)out.data, out.len, &plain);
    ASSERT_EQ(plain.len, 2 * hold);
    ASSERT(memcmp(plain.data, plain.data + hold, hold) == 0);
    ASSERT(memcmp(plain.data, out.data + first, hold) == 0);
    resp_buf_free(&plain);
    free(ext);
    resp_buf_free(&out);
}

static void test_notes_slices_refused(void) {
    resp_buf out;
    sliced_notes_blob(&out);
    obj_extent *ext = xcalloc(PROTO_MAX_EXTENTS, sizeof *ext);
    size_t t = PROTO_NOTE_HOLD_HDR + 3 + 2 * PROTO_NOTE_EXTENT, first = t + PROTO_SLICES_REF_HDR + 12;
    for (size_t cut = 1; cut < first; cut++) {
        const uint8_t *p = (const uint8_t *)out.data;
        proto_note n;
        ASSERT_MSG(proto_note_next(&p, p + cut, ext, &n) == -1, "cut at %zu", cut);
    }
    /* the slice size not a power of two, below or above the bounds; a
     * count of 0, not the object's (2, 4), over PROTO_MAX_SLICES */
    struct { size_t at, width; uint64_t val; } bad[] = {
        {t, 8, 65537}, {t, 8, 32768}, {t, 8, 1ULL << 41}, {t, 8, 0},
        {t + 8, 2, 0}, {t + 8, 2, 2}, {t + 8, 2, 4}, {t + 8, 2, PROTO_MAX_SLICES + 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *bytes = patched(out.data, out.len, bad[i].at, bad[i].width, bad[i].val);
        const uint8_t *p = bytes;
        proto_note n;
        int refused = proto_note_next(&p, bytes + out.len, ext, &n) == -1 && p == bytes;
        free(bytes);
        ASSERT_MSG(refused, "case %zu", i);
    }
    free(ext);
    resp_buf_free(&out);
}

static void test_report_slices(void) {
    uint8_t packed[12];
    for (int i = 0; i < 3; i++) le_put32(packed + 4 * i, sl_crcs[i]);
    proto_report_rec with = {"big", 3, SL_OBJ, 0xabcd, 2, 0, 4096, 100000, {65536, 3, packed}};
    proto_report_rec without = {"big", 3, SL_OBJ, 0xabcd, 2, 100000, 0, 50000, {0, 0, NULL}};
    size_t a = proto_report_len(&with), b = proto_report_len(&without);
    ASSERT_EQ(a, PROTO_REPORT_HDR + 3 + PROTO_SLICES_REF_HDR + 12);
    ASSERT_EQ(b, PROTO_REPORT_HDR + 3);
    uint8_t blob[256];
    ASSERT_EQ(proto_report_put(blob, &with), a);
    ASSERT_EQ(proto_report_put(blob + a, &without), b);
    ASSERT_EQ(blob[3], 1);   /* flags: slice CRCs follow */
    ASSERT_EQ(blob[a + 3], 0);
    const uint8_t *p = blob;
    proto_report_rec r;
    ASSERT_EQ(proto_report_next(&p, blob + a + b, &r), 0);
    ASSERT(r.keylen == 3 && memcmp(r.key, "big", 3) == 0 && r.size == SL_OBJ && r.length == 100000);
    ASSERT(proto_slices_ref_eq(&r.slices, &with.slices));
    ASSERT_EQ(proto_report_next(&p, blob + a + b, &r), 0);
    ASSERT(r.slices.count == 0 && r.obj_off == 100000 && p == blob + a + b);
    /* cut anywhere in the first: refused, nothing taken */
    for (size_t cut = 0; cut < a; cut++) {
        p = blob;
        ASSERT_MSG(proto_report_next(&p, blob + cut, &r) == -1 && p == blob, "cut at %zu", cut);
    }
    size_t t = PROTO_REPORT_HDR + 3;
    struct { size_t at, width; uint64_t val; } bad[] = {
        {3, 1, 2}, {t, 8, 1000}, {t, 8, 32768}, {t + 8, 2, 0}, {t + 8, 2, 2}, {t + 8, 2, 5000},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *copy = patched(blob, a + b, bad[i].at, bad[i].width, bad[i].val);
        p = copy;
        int rc = proto_report_next(&p, copy + a + b, &r);
        free(copy);
        ASSERT_MSG(rc == -1, "case %zu", i);
    }
    /* flags 1 on a record of none: what follows its key is no slice list */
    uint8_t *copy = patched(blob + a, b, 3, 1, 1);
    p = copy;
    int rc = proto_report_next(&p, copy + b, &r);
    free(copy);
    ASSERT_EQ(rc, -1);
}

/* A disk tier's record: the whole object (or a piece of a node's share
 * of a striped one: shorter, where it lies in the object), flags 2,
 * seg_off 0 on the wire. */
static void test_report_disk(void) {
    uint8_t packed[12];
    for (int i = 0; i < 3; i++) le_put32(packed + 4 * i, sl_crcs[i]);
    proto_report_rec disk = {"cold", 4, SL_OBJ, 0xabcd, 1, 0, PROTO_REPORT_ON_DISK, SL_OBJ, {65536, 3, packed}};
    uint8_t blob[256];
    size_t a = proto_report_put(blob, &disk);
    ASSERT_EQ(a, proto_report_len(&disk));
    ASSERT_EQ(blob[3], PROTO_REPORT_SLICES | PROTO_REPORT_DISK);
    ASSERT_EQ(le_get64(blob + 24), 0);
    const uint8_t *p = blob;
    proto_report_rec r;
    ASSERT_EQ(proto_report_next(&p, blob + a, &r), 0);
    ASSERT(r.seg_off == PROTO_REPORT_ON_DISK && r.obj_off == 0 && r.length == SL_OBJ && r.size == SL_OBJ);
    ASSERT(proto_slices_ref_eq(&r.slices, &disk.slices) && p == blob + a);
    /* a share: the object's size and CRC, its own length */
    proto_report_rec share = disk;
    share.length = SL_OBJ / 2;
    size_t b = proto_report_put(blob, &share);
    p = blob;
    ASSERT_EQ(proto_report_next(&p, blob + b, &r), 0);
    ASSERT(r.seg_off == PROTO_REPORT_ON_DISK && r.length == SL_OBJ / 2 && r.size == SL_OBJ && r.crc == 0xabcd);
    /* a share's piece: where it lies in the object, up to its end and no further */
    share.obj_off = SL_OBJ / 2;
    b = proto_report_put(blob, &share);
    ASSERT_EQ(le_get64(blob + 16), SL_OBJ / 2);
    p = blob;
    ASSERT_EQ(proto_report_next(&p, blob + b, &r), 0);
    ASSERT(r.seg_off == PROTO_REPORT_ON_DISK && r.obj_off == SL_OBJ / 2 && r.length == SL_OBJ / 2);
    uint8_t *past = patched(blob, b, 16, 8, SL_OBJ / 2 + 1);
    p = past;
    ASSERT_EQ(proto_report_next(&p, past + b, &r), -1);
    free(past);
    a = proto_report_put(blob, &disk);
    /* a disk record is at no segment offset, not past its object's end; flags past 3 mean nothing */
    struct { size_t at, width; uint64_t val; } bad[] = {
        {16, 8, 4096}, {24, 8, 4096}, {32, 8, SL_OBJ + 1}, {3, 1, 4}, {3, 1, 7},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *copy = patched(blob, a, bad[i].at, bad[i].width, bad[i].val);
        p = copy;
        int rc = proto_report_next(&p, copy + a, &r);
        free(copy);
        ASSERT_MSG(rc == -1, "case %zu", i);
    }
}

/* ---- packed locations (MOON.MGETPACKED) ---- */

#define LOC_SIZE 150000   /* three slices of 64 KiB */

/* An object of LOC_SIZE bytes on two replicas with its three slice CRCs
 * (over pseudo-random bytes, so they combine to its CRC). */
static void located_object(object *o, obj_replica reps[2], proto_slices *sl, uint32_t crcs[3]) {
    static obj_extent a[2] = {{2, 4096, 100000}, {5, 0, 50000}}, b[1] = {{3, 128, LOC_SIZE}};
    uint8_t *bytes = xmalloc(LOC_SIZE);
    for (size_t i = 0; i < LOC_SIZE; i++) bytes[i] = (uint8_t)(i * 2654435761u >> 13);
    for (int i = 0; i < 3; i++)
        crcs[i] = crc32c(0, bytes + i * 65536, i < 2 ? 65536 : LOC_SIZE - 2 * 65536);
    reps[0] = (obj_replica){2, a};
    reps[1] = (obj_replica){1, b};
    *o = (object){.size = LOC_SIZE, .crc = crc32c(0, bytes, LOC_SIZE), .nreplicas = 2, .rep.list = reps, .rep_list = 1};
    *sl = (proto_slices){.size = 65536, .count = 3, .crc = crcs};
    free(bytes);
}

static void test_located_round_trip(void) {
    uint8_t key[TE_CAP_KEY_LEN] = {4, 2};
    object o;
    obj_replica reps[2];
    proto_slices sl, none = {0};
    uint32_t crcs[3];
    located_object(&o, reps, &sl, crcs);
    proto_grant g = {TE_CAP_READ, 5000, key, 0, 77};
    resp_buf out;
    resp_buf_init(&out);
    proto_located_put(&out, &o, &sl, &g);      /* with slice CRCs */
    proto_located_put_missing(&out);
    proto_located_put(&out, &o, &none, &g);    /* without */
    const uint8_t *p = (const uint8_t *)out.data, *end = p + out.len;
    proto_extbuf buf = {0};
    for (int rec = 0; rec < 3; rec++) {
        proto_located l;
        ASSERT_EQ(proto_located_next(&p, end, &buf, &l), 0);
        if (rec == 1) {
            ASSERT(!l.found && l.rep.nreplicas == 0 && l.slices.crc == NULL);
            continue;
        }
        ASSERT(l.found && l.size == LOC_SIZE && l.crc == o.crc && l.rep.nreplicas == 2 && !l.rep.err);
        ASSERT_EQ(l.slices.count, rec == 0 ? 3u : 0u);
        ASSERT_EQ(l.slices.size, rec == 0 ? 65536u : 0u);
        for (uint32_t i = 0; i < l.slices.count; i++) ASSERT_EQ(l.slices.crc[i], crcs[i]);
        char why[64];
        int ok = replicas_match(&l.rep, reps, &g, TE_READ, why, sizeof why);
        proto_located_free(&l);
        ASSERT_MSG(ok, "record %d: %s", rec, why);
    }
    ASSERT(p == end);
    proto_located l;
    ASSERT_EQ(proto_located_next(&p, end, &buf, &l), -1);   /* past the end */
    proto_extbuf_free(&buf);
    resp_buf_free(&out);
}

/* o's record as MOON.MGETPACKED writes it (no slice CRCs), decoded into
 * *l (buf holds its extents): 0, or -1 if it does not decode whole. */
static int located_one(const object *o, const proto_grant *g, proto_extbuf *buf, proto_located *l) {
    proto_slices none = {0};
    resp_buf out;
    resp_buf_init(&out);
    proto_located_put(&out, o, &none, g);
    const uint8_t *p = (const uint8_t *)out.data, *end = p + out.len;
    int rc = proto_located_next(&p, end, buf, l) == 0 && p == end ? 0 : -1;
    resp_buf_free(&out);
    return rc;
}

/* A replica on a disk tier ({node, PROTO_ON_DISK, size}) is not sent to
 * a reader beside a DRAM one: the packed record carries the DRAM
 * replicas only. */
static void test_located_skips_disk(void) {
    uint8_t key[TE_CAP_KEY_LEN] = {4, 2};
    object o;
    obj_replica reps[2], three[3];
    proto_slices none = {0};
    uint32_t crcs[3];
    located_object(&o, reps, &none, crcs);
    none = (proto_slices){0};
    obj_extent disk = {7, PROTO_ON_DISK, LOC_SIZE};
    three[0] = reps[0];
    three[1] = (obj_replica){1, &disk};
    three[2] = reps[1];
    o.rep.list = three;   /* a list (located_object made one) */
    o.nreplicas = 3;
    ASSERT(proto_replica_on_disk(&three[1]) && !proto_replica_on_disk(&three[0]));
    ASSERT_EQ(proto_replicas_readable(&o), 2u);
    proto_grant g = {TE_CAP_READ, 5000, key, 0, 77};
    proto_extbuf buf = {0};
    proto_located l;
    ASSERT_EQ(located_one(&o, &g, &buf, &l), 0);
    ASSERT(l.found && l.rep.nreplicas == 2 && !l.rep.err);
    char why[64];
    int ok = replicas_match(&l.rep, reps, &g, TE_READ, why, sizeof why);
    proto_located_free(&l);
    ASSERT_MSG(ok, "%s", why);
    proto_extbuf_free(&buf);
    /* The array form (MOON.GET) too: two arrays of extents. */
    resp_buf out;
    resp_buf_init(&out);
    proto_replicas_encode(&out, &o, &g);
    ASSERT(out.len > 4 && memcmp(out.data, "*2\r\n", 4) == 0);
    resp_buf_free(&out);
}

/* An object whose replicas are all on disk is sent to a reader as its
 * whole records (a striped one's shares are not): an extent {node, crc,
 * size} under a disk cap naming the key's tag; a write grant sends none. */
static void test_located_disk_only(void) {
    uint8_t key[TE_CAP_KEY_LEN] = {4, 2};
    object o;
    obj_replica reps[2], disk[2];
    proto_slices none = {0};
    uint32_t crcs[3];
    located_object(&o, reps, &none, crcs);
    none = (proto_slices){0};
    obj_extent whole = {7, PROTO_ON_DISK, LOC_SIZE}, shares[2] = {{2, PROTO_ON_DISK, 100000}, {5, PROTO_ON_DISK, 50000}};
    disk[0] = (obj_replica){2, shares};
    disk[1] = (obj_replica){1, &whole};
    o.rep.list = disk;
    o.key = "k9";
    o.keylen = 2;
    ASSERT_EQ(proto_replicas_readable(&o), 0u);
    ASSERT_EQ(proto_replicas_for_reader(&o), 1u);
    proto_grant g = {TE_CAP_READ, 5000, key, 0, 77}, w = {TE_CAP_WRITE, 5000, key, 1, 77};
    ASSERT_EQ(proto_replicas_sent(&o, &g), 1u);
    ASSERT_EQ(proto_replicas_sent(&o, &w), 0u);
    proto_extbuf buf = {0};
    proto_located l;
    ASSERT_EQ(located_one(&o, &g, &buf, &l), 0);
    ASSERT(l.found && l.rep.nreplicas == 1 && l.rep.next[0] == 1);
    const te_extent *e = l.rep.ext[0];
    ASSERT(e->node_id == 7 && e->offset == o.crc && e->length == LOC_SIZE);
    ASSERT(e->cap.rights == TE_CAP_DISK && e->cap.issued_us == te_cap_disk_tag("k9", 2));
    ASSERT_EQ(te_cap_check(&e->cap, key, 77, 7, TE_READ_DISK, o.crc, LOC_SIZE, 0), TE_OK);
    ASSERT_EQ(te_cap_check(&e->cap, key, 77, 7, TE_READ, o.crc, LOC_SIZE, 0), TE_EAUTH);
    proto_located_free(&l);
    proto_extbuf_free(&buf);
    /* The array form (MOON.GET): one array of one extent, decoded alike. */
    resp_buf out;
    resp_buf_init(&out);
    proto_replicas_encode(&out, &o, &g);
    ASSERT(out.len > 4 && memcmp(out.data, "*1\r\n*1\r\n", 8) == 0);
    resp_buf_free(&out);
}

/* Every cut fails the record, as do a corrupted head, slice list or
 * write caps; nothing is left allocated (the ASan build checks). */
static void test_located_refused(void) {
    uint8_t key[TE_CAP_KEY_LEN] = {1};
    object o;
    obj_replica reps[2];
    proto_slices sl;
    uint32_t crcs[3];
    located_object(&o, reps, &sl, crcs);
    proto_grant g = {TE_CAP_READ, 5000, key, 0, 1};
    resp_buf out;
    resp_buf_init(&out);
    proto_located_put(&out, &o, &sl, &g);
    size_t whole = 25 + 3 * 4 + 1 + 2 + 2 * TE_CAP_WIRE_LEN + 2 + TE_CAP_WIRE_LEN;
    ASSERT_EQ(out.len, whole);
    proto_extbuf buf = {0};
    for (size_t cut = 0; cut < out.len; cut++) {
        const uint8_t *p = (const uint8_t *)out.data;
        proto_located l;
        ASSERT_MSG(proto_located_next(&p, p + cut, &buf, &l) == -1, "cut at %zu", cut);
    }
    /* byte offset, value: kind; size 0, other, over INT64_MAX; CRC;
     * slice size; slice count; a slice CRC; replica count; extent count */
    static const struct { size_t at; uint8_t val; } bad[] = {
        {0, 1}, {0, 7}, {1, 0x50}, {8, 0x80}, {9, 0x11}, {14, 0x80}, {21, 2}, {21, 4}, {25, 0x33},
        {37, 0}, {37, PROTO_MAX_REPLICAS + 1}, {38, 3},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *bytes = xmemdup(out.data, out.len);
        if (bad[i].at == 1) memset(bytes + 1, 0, 8);   /* size 0 */
        else bytes[bad[i].at] = bad[i].val;
        const uint8_t *p = bytes;
        proto_located l;
        int rc = proto_located_next(&p, bytes + out.len, &buf, &l);
        free(bytes);
        ASSERT_MSG(rc == -1, "case %zu", i);
    }
    /* write caps where read caps belong */
    resp_buf_clear(&out);
    g.rights = TE_CAP_WRITE;
    proto_located_put(&out, &o, &sl, &g);
    const uint8_t *p = (const uint8_t *)out.data;
    proto_located l;
    ASSERT_EQ(proto_located_next(&p, p + out.len, &buf, &l), -1);
    proto_extbuf_free(&buf);
    resp_buf_free(&out);
}

static void test_int_in(void) {
    redisReply r = {.type = REDIS_REPLY_INTEGER, .integer = 5};
    uint64_t v = 0;
    ASSERT(proto_int_in(&r, 5, 5, &v) == 0 && v == 5);
    ASSERT(proto_int_in(&r, 6, 9, &v) == -1 && v == 5);
    ASSERT_EQ(proto_int_in(NULL, 0, 9, &v), -1);
    r.type = REDIS_REPLY_STRING;
    ASSERT_EQ(proto_int_in(&r, 0, 9, &v), -1);
}

/* ---- registration proof ---- */

/* ---- the reply bound ---- */

static int feed_one(redisReader *rd, const char *s, void **reply) {
    *reply = NULL;
    if (redisReaderFeed(rd, s, strlen(s)) != REDIS_OK) return REDIS_ERR;
    return redisReaderGetReply(rd, reply);
}

/* A declared count above the bound fails the reader before hiredis
 * allocates its table (2.7 GB here, which ASan's allocator would refuse
 * loudly); arrays at the bound, nested arrays and other types still parse. */
static void test_reply_bound(void) {
    redisReader *rd = redisReaderCreate();
    proto_reader_bound(rd);
    proto_reader_bound(rd);   /* twice: no double wrap */
    void *r;
    ASSERT_EQ(feed_one(rd, "*2\r\n$3\r\nabc\r\n*1\r\n:7\r\n", &r), REDIS_OK);
    redisReply *rep = r;
    ASSERT(rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2);
    ASSERT_EQ(rep->element[1]->element[0]->integer, 7);
    freeReplyObject(r);
    ASSERT_EQ(feed_one(rd, "$-1\r\n", &r), REDIS_OK);
    ASSERT(r && ((redisReply *)r)->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    ASSERT_EQ(feed_one(rd, "*344444444\r\n", &r), REDIS_ERR);
    ASSERT(rd->err != 0);
    redisReaderFree(rd);

    char at_bound[32];
    snprintf(at_bound, sizeof at_bound, "*%d\r\n", PROTO_MAX_REPLY_ELEMENTS);
    rd = redisReaderCreate();
    proto_reader_bound(rd);
    ASSERT_EQ(feed_one(rd, at_bound, &r), REDIS_OK);   /* accepted, waits for elements */
    ASSERT(r == NULL && rd->err == 0);
    redisReaderFree(rd);
}

static void test_reg_proof(void) {
    uint8_t k1[PROTO_REG_KEY_LEN], k2[PROTO_REG_KEY_LEN], nonce[PROTO_NONCE_LEN] = {1, 2, 3};
    proto_reg_key("secret", k1);
    proto_reg_key("secret2", k2);
    ASSERT(memcmp(k1, k2, sizeof k1) != 0);
    uint8_t proof[PROTO_PROOF_LEN];
    char hex[2 * PROTO_PROOF_LEN + 1];
    proto_reg_proof(k1, nonce, proof);
    hex_encode(proof, sizeof proof, hex);
    ASSERT(proto_reg_proof_ok(k1, nonce, hex, strlen(hex)));
    ASSERT(!proto_reg_proof_ok(k2, nonce, hex, strlen(hex)));      /* other secret */
    ASSERT(!proto_reg_proof_ok(k1, nonce, hex, strlen(hex) - 2));  /* short */
    nonce[0] ^= 1;
    ASSERT(!proto_reg_proof_ok(k1, nonce, hex, strlen(hex)));      /* other nonce */
    nonce[0] ^= 1;
    hex[5] = hex[5] == '0' ? '1' : '0';
    ASSERT(!proto_reg_proof_ok(k1, nonce, hex, strlen(hex)));      /* one digit off */
    hex[5] = 'g';
    ASSERT(!proto_reg_proof_ok(k1, nonce, hex, strlen(hex)));      /* not hex */
}

/* MOON.PROVE's proof: bound to the secret and the nonce, and never the
 * MOON.REGISTER proof of the same nonce (nor the reverse). */
static void test_member_proof(void) {
    uint8_t k1[PROTO_REG_KEY_LEN], k2[PROTO_REG_KEY_LEN], nonce[PROTO_NONCE_LEN] = {9, 8, 7};
    proto_reg_key("secret", k1);
    proto_reg_key("secret2", k2);
    char hex[2 * PROTO_PROOF_LEN + 1], reg_hex[2 * PROTO_PROOF_LEN + 1];
    ASSERT_EQ(proto_member_proof_hex("secret", nonce, sizeof nonce, hex), 0);
    ASSERT_EQ(strlen(hex), 2 * PROTO_PROOF_LEN);
    ASSERT(proto_member_proof_ok(k1, nonce, hex, strlen(hex)));
    ASSERT(!proto_member_proof_ok(k2, nonce, hex, strlen(hex)));      /* other secret */
    ASSERT(!proto_member_proof_ok(k1, nonce, hex, strlen(hex) - 2));  /* short */
    /* one proof is not the other: neither replays as the other */
    uint8_t reg[PROTO_PROOF_LEN];
    proto_reg_proof(k1, nonce, reg);
    hex_encode(reg, sizeof reg, reg_hex);
    ASSERT(strcmp(hex, reg_hex) != 0);
    ASSERT(!proto_reg_proof_ok(k1, nonce, hex, strlen(hex)));
    ASSERT(!proto_member_proof_ok(k1, nonce, reg_hex, strlen(reg_hex)));
    nonce[3] ^= 0x40;
    ASSERT(!proto_member_proof_ok(k1, nonce, hex, strlen(hex)));      /* other nonce */
    nonce[3] ^= 0x40;
    hex[7] = hex[7] == 'a' ? 'b' : 'a';
    ASSERT(!proto_member_proof_ok(k1, nonce, hex, strlen(hex)));      /* one digit off */
    /* a challenge reply that is no nonce makes no proof */
    ASSERT_EQ(proto_member_proof_hex("secret", nonce, sizeof nonce - 1, hex), -1);
    ASSERT_EQ(proto_member_proof_hex("secret", NULL, sizeof nonce, hex), -1);
    /* "" is a secret like any other (a cluster without one) */
    ASSERT_EQ(proto_member_proof_hex(NULL, nonce, sizeof nonce, hex), 0);
    proto_reg_key("", k2);
    ASSERT(proto_member_proof_ok(k2, nonce, hex, strlen(hex)));
}

/* The steps of the proof on a reply: a nonce gives the argument, an error
 * is said; +OK (or a master older than MOON.PROVE) accepts, NOAUTH not. */
static void test_prove_replies(void) {
    char hex[2 * PROTO_PROOF_LEN + 1], want[2 * PROTO_PROOF_LEN + 1], err[256];
    char nonce[PROTO_NONCE_LEN] = "0123456789abcde";
    redisReply r = {.type = REDIS_REPLY_STRING, .str = nonce, .len = sizeof nonce};
    ASSERT_EQ(proto_prove_arg(&r, "s", hex, err, sizeof err), 0);
    ASSERT_EQ(proto_member_proof_hex("s", nonce, sizeof nonce, want), 0);
    ASSERT(strcmp(hex, want) == 0);
    char noauth[] = "NOAUTH Authentication required.";
    r = (redisReply){.type = REDIS_REPLY_ERROR, .str = noauth, .len = strlen(noauth)};
    ASSERT_EQ(proto_prove_arg(&r, "s", hex, err, sizeof err), -1);
    ASSERT(strstr(err, "NOAUTH") && strstr(err, "master_auth"));
    ASSERT_EQ(proto_prove_arg(NULL, "s", hex, err, sizeof err), -1);
    ASSERT(!proto_prove_accepted(&r, err, sizeof err));
    ASSERT(strstr(err, "cluster_secret") != NULL);
    ASSERT(!proto_prove_accepted(NULL, err, sizeof err));
    char ok[] = "OK", old[] = "ERR unknown command 'MOON.PROVE', with args beginning with: 'ab' ";
    r = (redisReply){.type = REDIS_REPLY_STATUS, .str = ok, .len = 2};
    ASSERT(proto_prove_accepted(&r, err, sizeof err));
    r = (redisReply){.type = REDIS_REPLY_ERROR, .str = old, .len = strlen(old)};
    ASSERT(proto_prove_accepted(&r, err, sizeof err));
}

/* ---- per-slice CRCs ---- */

/* parse's error text for these arguments (the list as n packed CRCs of 0). */
static const char *slices_err(const char *size, size_t nbytes) {
    static char err[PROTO_ERR_LEN];
    uint8_t *blob = xcalloc(1, nbytes + 1);
    proto_slices sl;
    err[0] = 0;
    int rc = proto_slices_parse(size, strlen(size), blob, nbytes, &sl, err, sizeof err);
    free(blob);
    if (rc == 0) {
        proto_slices_free(&sl);
        return "accepted";
    }
    return sl.crc ? "an array left after a refusal" : err;
}

static void test_slices_parse_refused(void) {
    const char *bad_size = "slice size must be 0 or a power of two from 65536 to 1099511627776";
    ASSERT_STREQ(slices_err("", 8), bad_size);
    ASSERT_STREQ(slices_err("-4194304", 8), bad_size);
    ASSERT_STREQ(slices_err("+4194304", 8), bad_size);
    ASSERT_STREQ(slices_err("4194304x", 8), bad_size);
    ASSERT_STREQ(slices_err("4194305", 8), bad_size);        /* not a power of two */
    ASSERT_STREQ(slices_err("32768", 8), bad_size);          /* below the least */
    ASSERT_STREQ(slices_err("2199023255552", 8), bad_size);  /* 2^41: above the most */
    ASSERT_STREQ(slices_err("18446744073709551616", 8), bad_size);   /* 2^64: overflow */
    ASSERT_STREQ(slices_err("99999999999999999999999", 8), bad_size);
    ASSERT_STREQ(slices_err("4194304", 7), "slice CRCs must be 4 bytes each, got 7 bytes");
    ASSERT_STREQ(slices_err("4194304", 4 * 4097), "at most 4096 slice CRCs");
    ASSERT_STREQ(slices_err("4194304", 0), "slice size 0 goes with no slice CRCs, and only it");
    ASSERT_STREQ(slices_err("0", 4), "slice size 0 goes with no slice CRCs, and only it");
    ASSERT_STREQ(slices_err("0", 0), "accepted");
    ASSERT_STREQ(slices_err("4194304", 4 * 4096), "accepted");
    ASSERT_STREQ(slices_err("65536", 4), "accepted");
    ASSERT_STREQ(slices_err("1099511627776", 4), "accepted");
}

static void test_slices_round_trip(void) {
    /* 10 MiB + 5 in 4 MiB slices: three, the last short */
    uint64_t size = (10ULL << 20) + 5, slice = 4ULL << 20;
    uint8_t *v = xmalloc(size);
    for (uint64_t i = 0; i < size; i++) v[i] = (uint8_t)(i * 131 + 7);
    uint32_t whole = crc32c(0, v, size);
    ASSERT_EQ(proto_slice_count(size, slice), 3);
    ASSERT_EQ(proto_slice_choose(size), slice);
    ASSERT_EQ(proto_slice_choose(4ULL << 20), 0);   /* one slice: nothing to add */
    ASSERT_EQ(proto_slice_count(UINT64_MAX, 1ULL << 40), 1ULL << 24);   /* no overflow */
    ASSERT_EQ(proto_slice_choose(1ULL << 50), 1ULL << 38);   /* the largest object: 4096 slices */
    uint32_t crc[3];
    uint8_t packed[12];
    for (int i = 0; i < 3; i++) {
        uint64_t off = (uint64_t)i * slice, len = size - off < slice ? size - off : slice;
        crc[i] = crc32c(0, v + off, len);
    }
    proto_slices src = {slice, 3, crc};
    proto_slices_pack(&src, packed);
    ASSERT_EQ(le_get32(packed + 4), crc[1]);
    proto_slices sl;
    char err[PROTO_ERR_LEN];
    ASSERT_EQ(proto_slices_parse("4194304", 7, packed, sizeof packed, &sl, err, sizeof err), 0);
    ASSERT_EQ(sl.size, slice);
    ASSERT_EQ(sl.count, 3);
    ASSERT_EQ(sl.crc[2], crc[2]);
    ASSERT_EQ(proto_slices_check(&sl, size, whole, err, sizeof err), 0);
    /* the master refuses lists that do not fit the object */
    ASSERT_EQ(proto_slices_check(&sl, size, whole ^ 1, err, sizeof err), -1);
    char want[PROTO_ERR_LEN];
    snprintf(want, sizeof want, "slice CRCs do not combine to the object's CRC %u", whole ^ 1);
    ASSERT_STREQ(err, want);
    ASSERT_EQ(proto_slices_check(&sl, 8ULL << 20, whole, err, sizeof err), -1);
    ASSERT_STREQ(err, "3 slice CRCs for 2 slices of 4194304 bytes");
    ASSERT_EQ(proto_slices_check(&sl, UINT64_MAX, whole, err, sizeof err), -1);
    ASSERT_STREQ(err, "3 slice CRCs for 4398046511104 slices of 4194304 bytes");
    proto_slices none = {0};
    ASSERT_EQ(proto_slices_check(&none, size, 12345, err, sizeof err), 0);
    /* a located reply's elements, through hiredis as on the wire */
    char wire[128];
    int n = snprintf(wire, sizeof wire, "*2\r\n:%llu\r\n$12\r\n", (unsigned long long)slice);
    memcpy(wire + n, packed, 12);
    memcpy(wire + n + 12, "\r\n", 2);
    redisReader *rd = redisReaderCreate();
    redisReaderFeed(rd, wire, (size_t)n + 14);
    void *r = NULL;
    ASSERT_EQ(redisReaderGetReply(rd, &r), REDIS_OK);
    redisReply *rr = r;
    proto_slices dec;
    ASSERT_EQ(proto_slices_decode(rr->element[0], rr->element[1], size, whole, &dec), 0);
    ASSERT_EQ(dec.count, 3);
    ASSERT_EQ(dec.crc[0], crc[0]);
    proto_slices_free(&dec);
    ASSERT_EQ(proto_slices_decode(rr->element[0], rr->element[1], size, whole + 1, &dec), -1);
    ASSERT_EQ(dec.crc, NULL);
    ASSERT_EQ(proto_slices_decode(rr->element[1], rr->element[0], size, whole, &dec), -1);
    freeReplyObject(r);
    redisReaderFree(rd);
    proto_slices_free(&sl);
    free(v);
}

int main(void) {
    RUN_TEST(test_slices_parse_refused);
    RUN_TEST(test_slices_round_trip);
    RUN_TEST(test_word_round_trip);
    RUN_TEST(test_first_word_only);
    RUN_TEST(test_error_texts);
    RUN_TEST(test_extents_good);
    RUN_TEST(test_extents_counts);
    RUN_TEST(test_extents_refused);
    RUN_TEST(test_extents_caps_and_sums);
    RUN_TEST(test_encode_decode);
    RUN_TEST(test_placed_round_trip);
    RUN_TEST(test_placed_refused);
    RUN_TEST(test_ended_round_trip);
    RUN_TEST(test_ended_refused);
    RUN_TEST(test_notes_round_trip);
    RUN_TEST(test_notes_disk_drop);
    RUN_TEST(test_notes_refused);
    RUN_TEST(test_notes_slices);
    RUN_TEST(test_notes_slices_refused);
    RUN_TEST(test_report_slices);
    RUN_TEST(test_report_disk);
    RUN_TEST(test_located_round_trip);
    RUN_TEST(test_located_refused);
    RUN_TEST(test_located_skips_disk);
    RUN_TEST(test_located_disk_only);
    RUN_TEST(test_int_in);
    RUN_TEST(test_reg_proof);
    RUN_TEST(test_member_proof);
    RUN_TEST(test_prove_replies);
    RUN_TEST(test_reply_bound);
    TEST_EXIT();
}
