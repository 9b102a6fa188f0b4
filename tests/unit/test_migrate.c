/* Unit tests of src/master/migrate: a group gives the objects of a slot
 * away as records and forgets them, leaving their extents reserved; a
 * group that knows the same node processes (by their instance tokens,
 * under other ids) adopts them byte-for-byte where they are; nodes it
 * does not know keep an object waiting; a second adoption adds nothing;
 * a cut blob is refused whole. Time is a plain number: no sleeps. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/migrate.h"
#include "proto/chunks.h"
#include "proto/slots.h"
#include "test.h"

#define KB 1024ULL
#define REPS(o) object_reps((o), &(obj_reps){.r = {{0, NULL}}})

static char err[PROTO_ERR_LEN];

static master_meta *meta(void) {
    mm_config c;
    mm_config_defaults(&c);
    c.stripe_threshold = 8 * KB;   /* the 12 KiB object is striped */
    c.stripe_unit = 4 * KB;
    c.stripe_width = 2;
    return mm_create(&c);
}

/* Node process tok (instance) of seg bytes with the address port,
 * registered in m: its id, or 0. */
static uint32_t join_seg(master_meta *m, uint64_t tok, int port, uint64_t seg) {
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    const char *addrs[] = {addr};
    mm_node_claim cl = {0, tok, 0, 0, 0, 0};
    uint32_t id;
    mm_reg_kind kind;
    if (mm_node_register_as(m, &cl, seg, addrs, 1, 0, &id, &kind, err, sizeof err) != PROTO_OK) return 0;
    return id;
}

static uint32_t join(master_meta *m, uint64_t tok, int port) { return join_seg(m, tok, port, 1024 * KB); }

static int put(master_meta *m, const char *key, uint64_t size, uint32_t replicas) {
    object *o;
    return mm_put_start(m, key, strlen(key), size, replicas, 1, &o, err, sizeof err) == PROTO_OK &&
           mm_put_end(m, key, strlen(key), 0x1234 + (uint32_t)size, NULL, 1, err, sizeof err) == PROTO_OK;
}

static uint64_t used(master_meta *m, uint32_t id) {
    seg_alloc_stats st;
    seg_alloc_get_stats(mm_node_get(m, id)->alloc, &st);
    return st.used;
}

static uint64_t objects(master_meta *m) {
    mm_stats st;
    mm_get_stats(m, &st);
    return st.objects_complete;
}

/* Give the objects whose slot is in [lo, hi] (to dest 0). */
typedef struct range { uint16_t lo, hi; } range;
static int in_range(const object *o, void *ctx, int *dest) {
    const range *r = ctx;
    uint16_t s = proto_key_slot(o->key, o->keylen);
    *dest = 0;
    return s >= r->lo && s <= r->hi;
}

static void give_all(master_meta *m, range r, resp_buf *out, mm_give_pass *p) {
    memset(p, 0, sizeof *p);
    while (mm_give_step(m, p, in_range, &r, out, NULL)) {}
}

/* The instance behind node id of m. */
static uint64_t tok(master_meta *m, uint32_t id) { return mm_node_get(m, id)->instance; }

static void test_give_and_adopt(void) {
    master_meta *a = meta(), *b = meta(), *c = meta();
    uint32_t a1 = join(a, 0xA1, 9001), a2 = join(a, 0xA2, 9002);
    ASSERT(a1 && a2);
    /* b knows the same processes under other ids (and one of its own first) */
    uint32_t b0 = join(b, 0xB0, 9100);
    uint32_t b2 = join(b, 0xA2, 9002), b1 = join(b, 0xA1, 9001);
    ASSERT(b1 != a1 || b2 != a2);
    join(c, 0xA1, 9001);   /* c knows only one of them */
    char key[32];
    int moved = 0;
    range r = {0, 8191};
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ASSERT(put(a, key, i == 7 ? 12 * KB : 100 + (uint64_t)i, i % 3 == 0 ? 2 : 1));
        uint16_t s = proto_key_slot(key, strlen(key));
        moved += s >= r.lo && s <= r.hi;
    }
    uint64_t a_used = used(a, a1) + used(a, a2);
    resp_buf out[MM_GIVE_DESTS];
    for (int i = 0; i < MM_GIVE_DESTS; i++) resp_buf_init(&out[i]);
    mm_give_pass p;
    give_all(a, r, out, &p);
    ASSERT_EQ(p.given, (uint64_t)moved);
    ASSERT_EQ(p.busy, 0);
    ASSERT(p.lent_bytes > 0);
    ASSERT_EQ(objects(a), (uint64_t)(200 - moved));
    ASSERT_EQ(used(a, a1) + used(a, a2), a_used);   /* lent: still reserved here */
    for (int i = 0; i < 200; i++) {   /* what stays, stays; what went is gone */
        snprintf(key, sizeof key, "k%d", i);
        uint16_t s = proto_key_slot(key, strlen(key));
        ASSERT_EQ(mm_exists(a, key, strlen(key)), !(s >= r.lo && s <= r.hi));
    }
    /* c does not know node 0xA2: objects on it wait, the rest come */
    mm_adopt_stats st;
    ASSERT_EQ(mm_adopt(c, (const uint8_t *)out[0].data, out[0].len, 5000, 10, &st), 0);
    ASSERT(st.waiting > 0);
    ASSERT_EQ(st.objects + st.waiting, (uint64_t)moved);
    /* b adopts them all, each replica where a had it, under b's ids */
    ASSERT_EQ(mm_adopt(b, (const uint8_t *)out[0].data, out[0].len, 5000, 10, &st), 0);
    ASSERT_EQ(st.objects, (uint64_t)moved);
    ASSERT_EQ(st.waiting, 0);
    ASSERT_EQ(st.refused, 0);
    ASSERT(used(b, b1) + used(b, b2) >= p.lent_bytes && used(b, b1) + used(b, b2) <= a_used);   /* 64-byte aligned */
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "k%d", i);
        uint16_t s = proto_key_slot(key, strlen(key));
        if (!(s >= r.lo && s <= r.hi)) continue;
        object *o;
        uint64_t lease;
        ASSERT_EQ(mm_get(b, key, strlen(key), 20, &o, &lease, err, sizeof err), PROTO_OK);
        ASSERT_EQ(o->size, i == 7 ? 12 * KB : 100 + (uint64_t)i);
        ASSERT_EQ(o->crc, 0x1234 + (uint32_t)o->size);
        ASSERT_EQ(o->nreplicas, i % 3 == 0 ? 2 : 1);
        const obj_replica *reps = REPS(o);
        for (uint32_t k = 0; k < reps[0].nextents; k++)   /* same process as in a */
            ASSERT(tok(b, reps[0].extents[k].node) == 0xA1 || tok(b, reps[0].extents[k].node) == 0xA2);
        if (i == 7) ASSERT(reps[0].nextents >= 2);
    }
    /* b's new objects land beside the adopted ones, never on them */
    uint64_t before = used(b, b0) + used(b, b1) + used(b, b2);
    ASSERT(put(b, "fresh-in-b", 64 * KB, 2));
    ASSERT_EQ(used(b, b0) + used(b, b1) + used(b, b2), before + 128 * KB);
    /* again: nothing more */
    ASSERT_EQ(mm_adopt(b, (const uint8_t *)out[0].data, out[0].len, 5000, 30, &st), 0);
    ASSERT_EQ(st.present, (uint64_t)moved);
    ASSERT_EQ(st.objects, 0);
    /* cut at whole objects: every piece adopts with nothing waiting */
    size_t at = 0, pieces = 0;
    while (at < out[0].len) {
        size_t n = mm_give_cut((const uint8_t *)out[0].data + at, out[0].len - at, 1000);
        ASSERT(n > 0);
        ASSERT_EQ(mm_adopt(c, (const uint8_t *)out[0].data + at, n, 5000, 35, &st), 0);
        at += n, pieces++;
    }
    ASSERT(pieces > 3);
    /* a cut blob: refused whole */
    ASSERT_EQ(mm_adopt(c, (const uint8_t *)out[0].data, out[0].len - 3, 5000, 40, &st), -1);
    for (int i = 0; i < MM_GIVE_DESTS; i++) resp_buf_free(&out[i]);
    mm_destroy(a);
    mm_destroy(b);
    mm_destroy(c);
}

/* An object with a copy in flight is left for the next pass. */
static void test_busy_waits(void) {
    master_meta *a = meta();
    join(a, 0xA1, 9001);
    join(a, 0xA2, 9002);
    ASSERT(put(a, "{t}x", 100, 1));
    object *o = mm_find(a, "{t}x", 4);
    mm_obj_of(o)->want = 2;   /* repair copies it to the other node */
    ASSERT(mm_repair(a, 100) > 0);
    resp_buf out[MM_GIVE_DESTS];
    for (int i = 0; i < MM_GIVE_DESTS; i++) resp_buf_init(&out[i]);
    uint16_t s = proto_key_slot("{t}x", 4);
    range r = {s, s};
    mm_give_pass p;
    give_all(a, r, out, &p);
    ASSERT_EQ(p.given, 0);
    ASSERT_EQ(p.busy, 1);
    ASSERT(mm_exists(a, "{t}x", 4));
    for (int i = 0; i < MM_GIVE_DESTS; i++) resp_buf_free(&out[i]);
    mm_destroy(a);
}

/* Node tok of seg bytes in m, shared (chunks of 1 MiB): chunks [c0, c1)
 * given to m's group. */
static uint32_t join_shared(master_meta *m, uint64_t tok, int port, uint64_t seg, uint32_t c0, uint32_t c1) {
    uint32_t id = join_seg(m, tok, port, seg);
    if (!id) return 0;
    proto_chunks c;
    if (proto_chunks_init(&c, seg, 1024 * KB) != 0) return 0;
    for (uint32_t i = c0; i < c1; i++) proto_chunks_set(&c, i, 1);
    return mm_node_share(m, id, &c, err, sizeof err) == PROTO_OK ? id : 0;
}

static uint64_t size_of(master_meta *m, uint32_t id) {
    seg_alloc_stats st;
    seg_alloc_get_stats(mm_node_get(m, id)->alloc, &st);
    return st.size;
}

/* Groups a and b sharing two nodes (one id and token each in both; a
 * holds chunks 0-3, b 4-7): b adopts a's objects, their extents lent
 * from the space b withholds (a's chunks); b places nothing of its own
 * there; a remove on b gives the space back as withheld (adopting the
 * same records again lends it again). A group knowing the same ids as
 * other processes adopts nothing. */
static void test_shared_nodes(void) {
    const uint64_t seg = 8 * 1024 * KB;
    master_meta *a = meta(), *b = meta(), *d = meta();
    uint32_t a1 = join_shared(a, 0xA1, 9001, seg, 0, 4), a2 = join_shared(a, 0xA2, 9002, seg, 0, 4);
    uint32_t b1 = join_shared(b, 0xA1, 9001, seg, 4, 8), b2 = join_shared(b, 0xA2, 9002, seg, 4, 8);
    ASSERT(a1 && a2 && b1 == a1 && b2 == a2);
    ASSERT(join(d, 0xD1, 9001) == a1 && join(d, 0xD2, 9002) == a2);   /* same ids, other processes */
    char key[32];
    int moved = 0;
    range r = {0, 8191};
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof key, "s%d", i);
        ASSERT(put(a, key, 1000 + 100 * (uint64_t)i, i % 2 ? 2 : 1));
        uint16_t s = proto_key_slot(key, strlen(key));
        moved += s >= r.lo && s <= r.hi;
    }
    ASSERT(moved > 5);
    resp_buf out[MM_GIVE_DESTS];
    for (int i = 0; i < MM_GIVE_DESTS; i++) resp_buf_init(&out[i]);
    mm_give_pass p;
    give_all(a, r, out, &p);
    ASSERT_EQ(p.given, (uint64_t)moved);
    mm_adopt_stats st;
    ASSERT_EQ(mm_adopt(d, (const uint8_t *)out[0].data, out[0].len, 5000, 10, &st), 0);
    ASSERT_EQ(st.objects, 0);
    ASSERT_EQ(st.waiting, (uint64_t)moved);
    uint64_t b_size = size_of(b, b1) + size_of(b, b2);
    ASSERT_EQ(used(b, b1) + used(b, b2), 0);
    ASSERT_EQ(mm_adopt(b, (const uint8_t *)out[0].data, out[0].len, 5000, 10, &st), 0);
    ASSERT_EQ(st.objects, (uint64_t)moved);
    ASSERT_EQ(st.waiting, 0);
    ASSERT_EQ(st.refused, 0);
    uint64_t lent = used(b, b1) + used(b, b2);
    ASSERT(lent >= p.lent_bytes && lent < p.lent_bytes + 64 * 2 * (uint64_t)moved * 2);
    ASSERT_EQ(size_of(b, b1) + size_of(b, b2), b_size + lent);   /* counted in b's share while b's */
    for (int i = 0; i < 60; i++) {   /* at a's offsets, in a's chunks, on the same ids */
        snprintf(key, sizeof key, "s%d", i);
        uint16_t s = proto_key_slot(key, strlen(key));
        if (!(s >= r.lo && s <= r.hi)) continue;
        object *o;
        uint64_t lease;
        ASSERT_EQ(mm_get(b, key, strlen(key), 20, &o, &lease, err, sizeof err), PROTO_OK);
        const obj_replica *reps = REPS(o);
        ASSERT(reps[0].extents[0].offset < 4 * 1024 * KB);
    }
    /* b's own puts land in b's chunks only, until b's share is full */
    int fresh = 0;
    for (; fresh < 100; fresh++) {
        snprintf(key, sizeof key, "{b}fresh%d", fresh);
        object *o;
        if (mm_put_start(b, key, strlen(key), 256 * KB, 1, 1, &o, err, sizeof err) != PROTO_OK) break;
        ASSERT(REPS(o)[0].extents[0].offset >= 4 * 1024 * KB);
        ASSERT_EQ(mm_put_end(b, key, strlen(key), 1, NULL, 1, err, sizeof err), PROTO_OK);
    }
    ASSERT(fresh > 8 && fresh < 100);
    for (int i = 0; i < fresh; i++) {
        snprintf(key, sizeof key, "{b}fresh%d", i);
        ASSERT_EQ(mm_remove(b, key, strlen(key), 100000, err, sizeof err), PROTO_OK);
    }
    /* removed on b: back to withheld, not free */
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof key, "s%d", i);
        uint16_t s = proto_key_slot(key, strlen(key));
        if (s >= r.lo && s <= r.hi) ASSERT_EQ(mm_remove(b, key, strlen(key), 100000, err, sizeof err), PROTO_OK);
    }
    ASSERT_EQ(used(b, b1) + used(b, b2), 0);
    ASSERT_EQ(size_of(b, b1) + size_of(b, b2), b_size);
    ASSERT_EQ(mm_adopt(b, (const uint8_t *)out[0].data, out[0].len, 5000, 300000, &st), 0);
    ASSERT_EQ(st.objects, (uint64_t)moved);
    ASSERT_EQ(used(b, b1) + used(b, b2), lent);
    for (int i = 0; i < MM_GIVE_DESTS; i++) resp_buf_free(&out[i]);
    mm_destroy(a);
    mm_destroy(b);
    mm_destroy(d);
}
/* The extents of the objects s0..s59 of r in m (node, off, len), into x: how many. */
typedef struct ext3 { uint32_t node; uint64_t off, len; } ext3;
static size_t extents_of(master_meta *m, range r, ext3 *x, size_t max) {
    size_t n = 0;
    char key[32];
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof key, "s%d", i);
        uint16_t s = proto_key_slot(key, strlen(key));
        object *o;
        uint64_t lease;
        if (s < r.lo || s > r.hi || mm_get(m, key, strlen(key), 20, &o, &lease, err, sizeof err) != PROTO_OK) continue;
        const obj_replica *reps = REPS(o);
        for (uint32_t k = 0; k < o->nreplicas; k++)
            for (uint32_t e = 0; e < reps[k].nextents && n < max; e++)
                x[n++] = (ext3){reps[k].extents[e].node, reps[k].extents[e].offset, reps[k].extents[e].length};
    }
    return n;
}

/* Group a gives objects on shared nodes to b; the nodes lend the ranges
 * to b and tell a (MOON.LENT): a holds them withheld (its used bytes fall,
 * its free ones stay), then free once b dropped them (given back). A move
 * undone: b gives them back (its lent ranges withheld again at once) and
 * a adopts them at the same offsets, from its ranges lent away. */
static void test_lent_away_and_back(void) {
    const uint64_t seg = 8 * 1024 * KB;
    master_meta *a = meta(), *b = meta();
    uint32_t a1 = join_shared(a, 0xA1, 9001, seg, 0, 4), a2 = join_shared(a, 0xA2, 9002, seg, 0, 4);
    ASSERT(join_shared(b, 0xA1, 9001, seg, 4, 8) == a1 && join_shared(b, 0xA2, 9002, seg, 4, 8) == a2);
    uint64_t size0 = size_of(a, a1) + size_of(a, a2);
    char key[32];
    range r = {0, 8191};
    for (int i = 0; i < 60; i++) {
        snprintf(key, sizeof key, "s%d", i);
        ASSERT(put(a, key, 1000 + 100 * (uint64_t)i, i % 2 ? 2 : 1));
    }
    static ext3 x[256];
    size_t nx = extents_of(a, r, x, 256);
    ASSERT(nx > 5);
    uint64_t used1 = used(a, a1) + used(a, a2), bytes = 0, raw = 0;
    resp_buf out[MM_GIVE_DESTS];
    for (int i = 0; i < MM_GIVE_DESTS; i++) resp_buf_init(&out[i]);
    mm_give_pass p;
    give_all(a, r, out, &p);
    ASSERT_EQ(used(a, a1) + used(a, a2), used1);   /* given away: still reserved */
    mm_adopt_stats st;
    ASSERT_EQ(mm_adopt(b, (const uint8_t *)out[0].data, out[0].len, 5000, 10, &st), 0);
    ASSERT_EQ(st.objects, p.given);
    for (size_t i = 0; i < nx; i++) {   /* the nodes lent them to b */
        ASSERT_EQ(mm_node_lent(a, x[i].node, 0, x[i].off, x[i].len, 100, err, sizeof err), PROTO_OK);
        bytes += (x[i].len + 63) & ~63ULL;   /* in the allocator: aligned */
        raw += x[i].len;
    }
    ASSERT_EQ(mm_node_lent(a, x[0].node, 0, x[0].off, x[0].len, 100, err, sizeof err), PROTO_OK);   /* told twice */
    ASSERT_EQ(mm_node_lent(a, x[0].node, 0, x[0].off + 64, x[0].len, 100, err, sizeof err), PROTO_ERR);   /* overlaps */
    ASSERT_EQ(mm_node_lent(a, a1, 0, 5 * 1024 * KB, 64, 100, err, sizeof err), PROTO_TRYAGAIN);   /* not our chunk (yet) */
    uint64_t away, back;
    mm_lent_stats(a, &away, &back);
    ASSERT_EQ(away, raw);
    ASSERT_EQ(used(a, a1) + used(a, a2), used1 - bytes);
    ASSERT_EQ(size_of(a, a1) + size_of(a, a2), size0 - bytes);
    /* undone: b gives them back, a adopts them where they are */
    resp_buf again[MM_GIVE_DESTS];
    for (int i = 0; i < MM_GIVE_DESTS; i++) resp_buf_init(&again[i]);
    mm_give_pass q;
    give_all(b, r, again, &q);
    ASSERT_EQ(q.given, p.given);
    ASSERT_EQ(used(b, a1) + used(b, a2), 0);   /* b's lent ranges: withheld again */
    ASSERT_EQ(mm_adopt(a, (const uint8_t *)again[0].data, again[0].len, 5000, 10, &st), 0);
    ASSERT_EQ(st.objects, p.given);
    ASSERT_EQ(st.refused, 0);
    mm_lent_stats(a, &away, &back);
    ASSERT_EQ(away, 0);
    ASSERT_EQ(used(a, a1) + used(a, a2), used1);
    for (size_t i = 0; i < nx; i++)   /* the nodes' word of their return changes nothing now */
        ASSERT_EQ(mm_node_lent(a, x[i].node, 1, x[i].off, x[i].len, 100, err, sizeof err), PROTO_OK);
    ASSERT_EQ(used(a, a1) + used(a, a2), used1);
    /* given away again, lent again, then dropped by b: free in a */
    give_all(a, r, out, &p);
    ASSERT_EQ(p.given, q.given);
    for (size_t i = 0; i < nx; i++) ASSERT_EQ(mm_node_lent(a, x[i].node, 0, x[i].off, x[i].len, 100, err, sizeof err), PROTO_OK);
    for (size_t i = 0; i < nx; i++) ASSERT_EQ(mm_node_lent(a, x[i].node, 1, x[i].off, x[i].len, 100, err, sizeof err), PROTO_OK);
    mm_lent_stats(a, &away, &back);
    ASSERT_EQ(away, 0);
    ASSERT_EQ(back, raw);
    ASSERT_EQ(used(a, a1) + used(a, a2), used1);   /* held a lease time: b's readers may still read them */
    mm_release_held(a, 100 + 60000);
    ASSERT_EQ(used(a, a1) + used(a, a2), used1 - bytes);   /* the objects of other slots stay */
    ASSERT_EQ(size_of(a, a1) + size_of(a, a2), size0);
    for (int i = 0; i < MM_GIVE_DESTS; i++) resp_buf_free(&out[i]), resp_buf_free(&again[i]);
    mm_destroy(a);
    mm_destroy(b);
}

int main(void) {
    RUN_TEST(test_give_and_adopt);
    RUN_TEST(test_shared_nodes);
    RUN_TEST(test_lent_away_and_back);
    RUN_TEST(test_busy_waits);
    TEST_EXIT();
}
