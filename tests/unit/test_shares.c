/* A segment shared by master groups: chunk sets on the wire
 * (proto/chunks.h), the master's withheld ranges (core/alloc.h), the
 * node's check of a group's capabilities against its chunks
 * (backend/shares.h) and forgetting claims of a chunk that changed hands
 * (backend/claims.h). */
#include <stdint.h>
#include <string.h>

#include "backend/claims.h"
#include "backend/shares.h"
#include "core/alloc.h"
#include "proto/chunks.h"
#include "test.h"

#define MiB (1ULL << 20)

static void test_chunk_text(void) {
    ASSERT_EQ(proto_chunk_size_for(32 * MiB), MiB);
    ASSERT_EQ(proto_chunk_size_for(1ULL << 40), 16ULL << 30);   /* 1 TiB: 64 chunks of 16 GiB */
    ASSERT(proto_chunk_size_for(1ULL << 50) / (1ULL << 50) < PROTO_MAX_CHUNKS);
    proto_chunks c, d;
    ASSERT_EQ(proto_chunks_init(&c, 33 * MiB + 4096, MiB), 0);   /* 34 chunks, the last short */
    ASSERT_EQ(c.n, 34);
    char text[64];   /* room enough for 34 chunks */
    proto_chunks_format(&c, text, sizeof text);
    ASSERT_STREQ(text, "1048576:-");
    proto_chunks_set(&c, 0, 1);
    proto_chunks_set(&c, 5, 1);
    proto_chunks_set(&c, 33, 1);
    proto_chunks_format(&c, text, sizeof text);
    ASSERT_STREQ(text, "1048576:120000002");   /* digit d: chunks 4d..4d+3 */
    ASSERT_EQ(proto_chunks_parse(text, strlen(text), 33 * MiB + 4096, &d), 0);
    ASSERT(memcmp(&c, &d, sizeof c) == 0);
    ASSERT_EQ(proto_chunks_count(&d), 3);
    uint64_t off, len;
    proto_chunk_range(&d, 33 * MiB + 4096, 33, &off, &len);
    ASSERT(off == 33 * MiB && len == 4096);
    proto_chunk_range(&d, 33 * MiB + 4096, 5, &off, &len);
    ASSERT(off == 5 * MiB && len == MiB);
    /* refused: a chunk past the segment, not hex, a size that is no power of two */
    ASSERT_EQ(proto_chunks_parse("1048576:000000000004", 20, 33 * MiB + 4096, &d), -1);
    ASSERT_EQ(proto_chunks_parse("1048576:00000000002", 19, 33 * MiB, &d), -1);   /* chunk 33 of 33 */
    ASSERT_EQ(proto_chunks_parse("1048576:x", 9, 33 * MiB, &d), -1);
    ASSERT_EQ(proto_chunks_parse("1048577:1", 9, 33 * MiB, &d), -1);
    ASSERT_EQ(proto_chunks_parse("1024:1", 6, 33 * MiB, &d), -1);   /* below the minimum */
    ASSERT_EQ(proto_chunks_parse("1048576:1", 9, 8192 * MiB, &d), -1);   /* too many chunks */
}

static void test_withheld_space(void) {
    seg_alloc *a = seg_alloc_create_untracked(8 * MiB, 64);
    seg_alloc_stats st;
    ASSERT_EQ(seg_alloc_withhold(a, 0, 8 * MiB), ALLOC_OK);
    seg_alloc_get_stats(a, &st);
    ASSERT(st.size == 0 && st.used == 0 && st.free == 0 && st.allocations == 0);
    uint64_t off;
    ASSERT_EQ(seg_alloc_reserve(a, 64, &off), ALLOC_ERR);      /* nothing is ours */
    ASSERT_EQ(seg_alloc_unwithhold(a, 2 * MiB, MiB), ALLOC_OK);
    seg_alloc_get_stats(a, &st);
    ASSERT(st.size == MiB && st.free == MiB && st.used == 0);
    ASSERT_EQ(seg_alloc_reserve(a, 4096, &off), ALLOC_OK);
    ASSERT(off >= 2 * MiB && off < 3 * MiB);
    seg_alloc_get_stats(a, &st);
    ASSERT(st.used == 4096 && st.free == MiB - 4096 && st.allocations == 1);
    ASSERT_EQ(seg_alloc_withhold(a, 2 * MiB, MiB), ALLOC_ERR);   /* something of ours is there */
    ASSERT_EQ(seg_alloc_release(a, off, 4096), ALLOC_OK);
    ASSERT_EQ(seg_alloc_withhold(a, 2 * MiB, MiB), ALLOC_OK);    /* wholly free: taken back */
    seg_alloc_get_stats(a, &st);
    ASSERT(st.size == 0 && st.allocations == 0);
    ASSERT_EQ(seg_alloc_unwithhold(a, 2 * MiB, MiB), ALLOC_OK);
    ASSERT_EQ(seg_alloc_unwithhold(a, 2 * MiB, MiB), ALLOC_ERR);  /* free already */
    /* a rebuild's one-pass claim needs the whole segment free: one free
     * extent that is only our chunk is not that */
    seg_range r = {2 * MiB, 4096};
    ASSERT_EQ(seg_alloc_claim_sorted(a, &r, 1), ALLOC_ERR);
    ASSERT_EQ(seg_alloc_reserve_at(a, 2 * MiB, 4096), ALLOC_OK);   /* the rebuild's fallback */
    seg_alloc_get_stats(a, &st);
    ASSERT(st.size == MiB && st.used == 4096);
    seg_alloc_destroy(a);
}

/* Withheld space lent as ours (an object adopted from another group's
 * chunk) and given back as withheld, never free. */
static void test_lent_space(void) {
    seg_alloc *a = seg_alloc_create_untracked(8 * MiB, 64);
    seg_alloc_stats st;
    ASSERT_EQ(seg_alloc_withhold(a, 0, 8 * MiB), ALLOC_OK);
    ASSERT_EQ(seg_alloc_unwithhold(a, 4 * MiB, MiB), ALLOC_OK);   /* our chunk */
    ASSERT_EQ(seg_alloc_lend(a, MiB + 128, 1000), ALLOC_OK);      /* in another's */
    seg_alloc_get_stats(a, &st);
    ASSERT(st.size == MiB + 1024 && st.used == 1024 && st.free == MiB && st.allocations == 1);
    ASSERT_EQ(seg_alloc_lend(a, 4 * MiB, 64), ALLOC_ERR);         /* free: ours to reserve, not lend */
    ASSERT_EQ(seg_alloc_lend(a, 0, 9 * MiB), ALLOC_ERR);          /* past the segment */
    uint64_t off;
    for (int i = 0; i < 16; i++) {   /* placement stays in our chunk */
        ASSERT_EQ(seg_alloc_reserve(a, 64 * 1024, &off), ALLOC_OK);
        ASSERT(off >= 4 * MiB && off < 5 * MiB);
    }
    ASSERT_EQ(seg_alloc_reserve(a, 64, &off), ALLOC_ERR);
    ASSERT_EQ(seg_alloc_unlend(a, MiB + 128, 1000), ALLOC_OK);
    ASSERT_EQ(seg_alloc_unlend(a, MiB + 128, 1000), ALLOC_ERR);    /* nothing lent */
    seg_alloc_get_stats(a, &st);
    ASSERT(st.size == MiB && st.used == MiB && st.allocations == 16);
    ASSERT_EQ(seg_alloc_reserve(a, 64, &off), ALLOC_ERR);          /* withheld again, not free */
    seg_alloc_destroy(a);
    seg_alloc *t = seg_alloc_create(8 * MiB, 64);                   /* tracked: refused */
    ASSERT_EQ(seg_alloc_withhold(t, 0, MiB), ALLOC_OK);
    ASSERT_EQ(seg_alloc_lend(t, 0, 64), ALLOC_ERR);
    seg_alloc_destroy(t);
}

static te_cap cap_of(const uint8_t *key, uint64_t term, uint64_t off, uint64_t len) {
    te_cap c = {.node_id = 7, .rights = TE_CAP_READ | TE_CAP_WRITE, .offset = off, .length = len,
                .expiry_ms = 100000, .term = term, .issued_us = 1000};
    te_cap_sign(&c, key);
    return c;
}

static void test_caps_in_chunks(void) {
    te_shares *s = te_shares_create(8 * MiB, MiB);
    uint8_t ka[TE_CAP_KEY_LEN] = {1}, kb[TE_CAP_KEY_LEN] = {2};
    te_shares_set_group(s, 0, ka, 100);
    te_shares_set_group(s, 1, kb, 200);
    ASSERT_EQ(te_shares_grant(s, 0, 2), 2);   /* chunks 0, 1 */
    ASSERT_EQ(te_shares_grant(s, 1, 1), 1);   /* chunk 2 */
    ASSERT_EQ(te_shares_owner(s, 1), 0);
    ASSERT_EQ(te_shares_owner(s, 2), 1);
    ASSERT_EQ(te_shares_owner(s, 3), -1);
    int g = -1;
    te_cap c = cap_of(ka, 100, MiB - 4096, 8192);   /* across a's two chunks */
    ASSERT_EQ(te_shares_check(s, &c, 7, TE_WRITE, MiB - 4096, 8192, 50, &g), TE_OK);
    ASSERT_EQ(g, 0);
    c = cap_of(ka, 100, 2 * MiB, 64);                /* a's key on b's chunk */
    ASSERT_EQ(te_shares_check(s, &c, 7, TE_READ, 2 * MiB, 64, 50, NULL), TE_ERANGE);
    c = cap_of(ka, 100, 2 * MiB - 64, 128);          /* straddling a's and b's */
    ASSERT_EQ(te_shares_check(s, &c, 7, TE_READ, 2 * MiB - 64, 128, 50, NULL), TE_ERANGE);
    c = cap_of(kb, 100, 0, 64);                      /* b's key, a's term: a bad MAC */
    ASSERT_EQ(te_shares_check(s, &c, 7, TE_READ, 0, 64, 50, NULL), TE_EAUTH);
    c = cap_of(kb, 300, 2 * MiB, 64);                /* a term no group has */
    ASSERT_EQ(te_shares_check(s, &c, 7, TE_READ, 2 * MiB, 64, 50, &g), TE_EAUTH);
    ASSERT_EQ(g, -1);
    c = cap_of(kb, 200, 2 * MiB, 64);
    ASSERT_EQ(te_shares_check(s, &c, 7, TE_READ, 2 * MiB, 64, 50, NULL), TE_OK);
    ASSERT_EQ(te_shares_check(s, &c, 8, TE_READ, 2 * MiB, 64, 50, NULL), TE_EAUTH);   /* another node's */
    ASSERT_EQ(te_shares_set_owner(s, 2, -1), 1);     /* given back */
    ASSERT_EQ(te_shares_check(s, &c, 7, TE_READ, 2 * MiB, 64, 50, NULL), TE_ERANGE);
    ASSERT_EQ(te_shares_check(s, &c, 7, TE_READ, 8 * MiB, 64, 50, NULL), TE_ERANGE);   /* past the end */
    ASSERT_EQ(te_shares_grant(s, 1, 100), 6);        /* every free chunk: 2..7 */
    te_shares_free(s);
}

/* A range of a's chunks lent to b (b adopted an object a placed): b's
 * capabilities are served there and a's no longer; given back, a's again. */
static void test_lent_ranges(void) {
    te_shares *s = te_shares_create(8 * MiB, MiB);
    uint8_t ka[TE_CAP_KEY_LEN] = {1}, kb[TE_CAP_KEY_LEN] = {2};
    te_shares_set_group(s, 0, ka, 100);
    te_shares_set_group(s, 1, kb, 200);
    ASSERT_EQ(te_shares_grant(s, 0, 2), 2);   /* chunks 0, 1 */
    ASSERT_EQ(te_shares_grant(s, 1, 1), 1);   /* chunk 2 */
    te_cap cb = cap_of(kb, 200, MiB - 4096, 8192), ca = cap_of(ka, 100, MiB - 4096, 8192);
    ASSERT_EQ(te_shares_check(s, &cb, 7, TE_READ, MiB - 4096, 8192, 50, NULL), TE_ERANGE);
    ASSERT_EQ(te_shares_lend(s, MiB - 4096, 8192, 1), 0);          /* across a's two chunks */
    ASSERT_EQ(te_shares_lend(s, MiB, 64, 1), -1);                  /* overlaps it */
    ASSERT_EQ(te_shares_lend(s, 2 * MiB, 64, 1), -1);              /* b's own chunk */
    ASSERT_EQ(te_shares_lend(s, 3 * MiB, 64, 1), -1);              /* a free chunk */
    ASSERT_EQ(te_shares_lend(s, 2 * MiB - 64, 128, 1), -1);        /* a's and b's */
    ASSERT_EQ(te_shares_lend(s, 0, 64, 0), -1);                    /* a's own */
    ASSERT_EQ(te_shares_check(s, &cb, 7, TE_READ, MiB - 4096, 8192, 50, NULL), TE_OK);
    ASSERT_EQ(te_shares_check(s, &cb, 7, TE_WRITE, MiB - 4096, 64, 50, NULL), TE_OK);
    ASSERT_EQ(te_shares_check(s, &ca, 7, TE_READ, MiB - 4096, 8192, 50, NULL), TE_ERANGE);   /* not a's now */
    te_cap ca2 = cap_of(ka, 100, MiB - 12288, 8192);                 /* ending where it starts: a's */
    ASSERT_EQ(te_shares_check(s, &ca2, 7, TE_READ, MiB - 12288, 8192, 50, NULL), TE_OK);
    ca2 = cap_of(ka, 100, MiB - 12288, 8256);                        /* into it: not */
    ASSERT_EQ(te_shares_check(s, &ca2, 7, TE_READ, MiB - 12288, 8256, 50, NULL), TE_ERANGE);
    te_cap cb2 = cap_of(kb, 200, MiB - 8192, 8256);                  /* b past its range: not */
    ASSERT_EQ(te_shares_check(s, &cb2, 7, TE_READ, MiB - 8192, 8256, 50, NULL), TE_ERANGE);
    ASSERT_EQ(te_shares_whose(s, MiB), 1);
    ASSERT_EQ(te_shares_whose(s, MiB + 4096), 0);
    ASSERT_EQ(te_shares_unlend(s, MiB - 4096, 0), 0);               /* not a's to give */
    ASSERT_EQ(te_shares_unlend(s, MiB - 4096, 1), 8192);
    ASSERT_EQ(te_shares_whose(s, MiB), 0);
    ASSERT_EQ(te_shares_check(s, &cb, 7, TE_READ, MiB - 4096, 8192, 50, NULL), TE_ERANGE);
    ASSERT_EQ(te_shares_check(s, &ca, 7, TE_READ, MiB - 4096, 8192, 50, NULL), TE_OK);
    for (uint64_t i = 0; i < 100; i++)   /* many, out of order */
        ASSERT_EQ(te_shares_lend(s, ((i * 37) % 100) * 4096, 4096, 1), 0);
    for (uint64_t i = 0; i < 100; i++) ASSERT_EQ(te_shares_whose(s, i * 4096 + 64), 1);
    te_cap cb3 = cap_of(kb, 200, 50 * 4096, 4096);
    ASSERT_EQ(te_shares_check(s, &cb3, 7, TE_READ, 50 * 4096, 4096, 50, NULL), TE_OK);
    te_shares_free(s);
}

/* What a group's chunks lent and got back is told to its master in order
 * (MOON.LENT), each event once; its queue made anew holds what is lent now. */
static void test_lent_events(void) {
    te_shares *s = te_shares_create(8 * MiB, MiB);
    te_lent_event ev[8];
    uint64_t gen, gen2;
    ASSERT_EQ(te_shares_grant(s, 0, 2), 2);   /* a: chunks 0, 1 */
    ASSERT_EQ(te_shares_grant(s, 1, 1), 1);   /* b: chunk 2 */
    ASSERT_EQ(te_shares_lend(s, 4096, 8192, 1), 0);
    ASSERT_EQ(te_shares_lend(s, MiB, 64, 1), 0);
    ASSERT(te_shares_lent_in(s, 0, MiB) && te_shares_lent_in(s, MiB, MiB) && !te_shares_lent_in(s, 2 * MiB, MiB));
    ASSERT_EQ(te_shares_unlend(s, 4096, 1), 8192);
    ASSERT(!te_shares_lent_in(s, 0, MiB));   /* a chunk holding no range lent away: may be taken back */
    ASSERT_EQ(te_shares_events(s, 1, ev, 8, &gen), 0);   /* b's chunks lent nothing */
    ASSERT_EQ(te_shares_events(s, 0, ev, 2, &gen), 2);
    ASSERT(ev[0].off == 4096 && ev[0].len == 8192 && !ev[0].back);
    ASSERT(ev[1].off == MiB && ev[1].len == 64 && !ev[1].back);
    te_shares_events_done(s, 0, gen, 2);
    ASSERT_EQ(te_shares_events(s, 0, ev, 8, &gen), 1);
    ASSERT(ev[0].off == 4096 && ev[0].len == 8192 && ev[0].back);
    te_shares_events_resync(s, 0);   /* a new leader of a: what is lent now */
    te_shares_events_done(s, 0, gen, 1);   /* of the queue before: nothing */
    ASSERT_EQ(te_shares_events(s, 0, ev, 8, &gen2), 1);
    ASSERT(gen2 != gen && ev[0].off == MiB && ev[0].len == 64 && !ev[0].back);
    te_shares_events_done(s, 0, gen2, 1);
    /* a adopts the object back (a move undone): the range is a's again, told as given back */
    ASSERT_EQ(te_shares_reclaim(s, MiB, 1), 0);   /* b owns no chunk there */
    ASSERT_EQ(te_shares_reclaim(s, MiB, 0), 64);
    ASSERT_EQ(te_shares_whose(s, MiB), 0);
    ASSERT_EQ(te_shares_events(s, 0, ev, 8, &gen), 1);
    ASSERT(ev[0].off == MiB && ev[0].back);
    te_shares_free(s);
}

static void test_claims_forgotten(void) {
    te_claims c;
    te_claims_init(&c, 0);
    te_cap old = {.node_id = 1, .rights = TE_CAP_WRITE, .offset = 0, .length = 3 * MiB, .issued_us = 5000000,
                  .expiry_ms = 60000};
    ASSERT_EQ(te_claims_write(&c, &old, 6000), TE_OK);
    /* chunk 1 goes to a group whose clock is behind: its grant is older */
    te_claims_forget(&c, MiB, 2 * MiB);
    ASSERT_EQ(te_claims_count(&c), 2);   /* [0, 1 MiB) and [2, 3 MiB) stay */
    te_cap fresh = {.node_id = 1, .rights = TE_CAP_WRITE, .offset = MiB, .length = 4096, .issued_us = 1000000,
                    .expiry_ms = 60000};
    ASSERT_EQ(te_claims_write(&c, &fresh, 6000), TE_OK);
    fresh.offset = 2 * MiB;   /* still claimed by the newer grant */
    ASSERT_EQ(te_claims_write(&c, &fresh, 6000), TE_EAUTH);
    te_claims_free(&c);
}

int main(void) {
    RUN_TEST(test_chunk_text);
    RUN_TEST(test_withheld_space);
    RUN_TEST(test_lent_space);
    RUN_TEST(test_caps_in_chunks);
    RUN_TEST(test_lent_ranges);
    RUN_TEST(test_lent_events);
    RUN_TEST(test_claims_forgotten);
    TEST_EXIT();
}
