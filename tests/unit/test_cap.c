/* Capabilities: signing, every refusal path, range edges, wire form. */
#include <stdint.h>
#include <string.h>

#include "backend/cap.h"
#include "test.h"

static const uint8_t KEY[TE_CAP_KEY_LEN] = "0123456789abcdef";
static const uint8_t OTHER_KEY[TE_CAP_KEY_LEN] = "fedcba9876543210";
static const uint64_t TERM = 42;   /* the issuing master's */

static te_cap make_cap(uint64_t off, uint64_t len, uint32_t rights) {
    te_cap c = { .node_id = 7, .rights = rights, .offset = off, .length = len,
                 .expiry_ms = 1000000, .term = TERM };
    te_cap_sign(&c, KEY);
    return c;
}

static void test_sign_check(void) {
    te_cap c = make_cap(4096, 8192, TE_CAP_READ | TE_CAP_WRITE);
    ASSERT_EQ(te_cap_check(&c, KEY, TERM, 7, TE_READ, 4096, 8192, 999999), TE_OK);
    ASSERT_EQ(te_cap_check(&c, KEY, TERM, 7, TE_WRITE, 5000, 100, 0), TE_OK);
    ASSERT_EQ(te_cap_check(&c, OTHER_KEY, TERM, 7, TE_READ, 4096, 1, 0), TE_EAUTH);
}

static void test_refusals(void) {
    te_cap r = make_cap(0, 100, TE_CAP_READ);
    ASSERT_EQ(te_cap_check(&r, KEY, TERM, 8, TE_READ, 0, 1, 0), TE_EAUTH);        /* node */
    ASSERT_EQ(te_cap_check(&r, KEY, TERM, 7, TE_WRITE, 0, 1, 0), TE_EAUTH);       /* rights */
    ASSERT_EQ(te_cap_check(&r, KEY, TERM, 7, TE_READ, 0, 1, 1000000), TE_EAUTH);  /* expired */
    te_cap w = make_cap(0, 100, TE_CAP_WRITE);
    ASSERT_EQ(te_cap_check(&w, KEY, TERM, 7, TE_READ, 0, 1, 0), TE_EAUTH);
    te_cap none = make_cap(0, 100, 0);
    ASSERT_EQ(te_cap_check(&none, KEY, TERM, 7, TE_READ, 0, 1, 0), TE_EAUTH);
    /* Changing a field after signing breaks the MAC. */
    te_cap grown = r;
    grown.length = 200;
    ASSERT_EQ(te_cap_check(&grown, KEY, TERM, 7, TE_READ, 0, 1, 0), TE_EAUTH);
}

/* A disk cap (TE_CAP_DISK) grants TE_READ_DISK alone: never a segment
 * read or write, even with the other rights beside it; a segment cap
 * never grants a disk read. Keys' tags differ and are never 0. */
static void test_disk_rights(void) {
    te_cap d = make_cap(0x1234, 100, TE_CAP_DISK);
    ASSERT_EQ(te_cap_check(&d, KEY, TERM, 7, TE_READ_DISK, 0x1234, 100, 0), TE_OK);
    ASSERT_EQ(te_cap_check(&d, KEY, TERM, 7, TE_READ_DISK, 0x1234 + 1, 100, 0), TE_ERANGE);
    ASSERT_EQ(te_cap_check(&d, KEY, TERM, 7, TE_READ, 0x1234, 100, 0), TE_EAUTH);
    te_cap all = make_cap(0x1234, 100, TE_CAP_DISK | TE_CAP_READ | TE_CAP_WRITE);
    ASSERT_EQ(te_cap_check(&all, KEY, TERM, 7, TE_READ, 0x1234, 100, 0), TE_EAUTH);
    ASSERT_EQ(te_cap_check(&all, KEY, TERM, 7, TE_WRITE, 0x1234, 100, 0), TE_EAUTH);
    te_cap r = make_cap(0x1234, 100, TE_CAP_READ | TE_CAP_WRITE);
    ASSERT_EQ(te_cap_check(&r, KEY, TERM, 7, TE_READ_DISK, 0x1234, 100, 0), TE_EAUTH);
    ASSERT(te_cap_disk_tag("k1", 2) != te_cap_disk_tag("k2", 2));
    ASSERT(te_cap_disk_tag("", 0) != 0 && te_cap_disk_tag("k1", 2) == te_cap_disk_tag("k1", 2));
}

/* Fencing: a genuine cap of another master term (a deposed leader's, a
 * restarted master's predecessor's) is refused, and the holder cannot
 * move it into the current term without breaking the MAC. */
static void test_term(void) {
    te_cap c = make_cap(0, 100, TE_CAP_WRITE);
    ASSERT_EQ(te_cap_check(&c, KEY, TERM, 7, TE_WRITE, 0, 100, 0), TE_OK);
    ASSERT_EQ(te_cap_check(&c, KEY, TERM + 1, 7, TE_WRITE, 0, 100, 0), TE_EAUTH);
    ASSERT_EQ(te_cap_check(&c, KEY, TERM - 1, 7, TE_WRITE, 0, 100, 0), TE_EAUTH);
    te_cap moved = c;
    moved.term = TERM + 1;
    ASSERT_EQ(te_cap_check(&moved, KEY, TERM + 1, 7, TE_WRITE, 0, 100, 0), TE_EAUTH);
    /* The key-less checks (shm client side) do not know terms. */
    ASSERT_EQ(te_cap_check_nokey(&moved, 7, TE_WRITE, 0, 100, 0), TE_OK);
}

static void test_range_edges(void) {
    te_cap c = make_cap(100, 50, TE_CAP_READ);
    ASSERT_EQ(te_cap_check(&c, KEY, TERM, 7, TE_READ, 100, 50, 0), TE_OK);
    ASSERT_EQ(te_cap_check(&c, KEY, TERM, 7, TE_READ, 149, 1, 0), TE_OK);
    ASSERT_EQ(te_cap_check(&c, KEY, TERM, 7, TE_READ, 150, 0, 0), TE_OK);
    ASSERT_EQ(te_cap_check(&c, KEY, TERM, 7, TE_READ, 99, 1, 0), TE_ERANGE);
    ASSERT_EQ(te_cap_check(&c, KEY, TERM, 7, TE_READ, 149, 2, 0), TE_ERANGE);
    ASSERT_EQ(te_cap_check(&c, KEY, TERM, 7, TE_READ, 100, 51, 0), TE_ERANGE);
    ASSERT_EQ(te_cap_check(&c, KEY, TERM, 7, TE_READ, 151, 0, 0), TE_ERANGE);
    ASSERT_EQ(te_cap_check(&c, KEY, TERM, 7, TE_READ, UINT64_MAX - 1, 4, 0), TE_ERANGE);
    ASSERT_EQ(te_cap_check(&c, KEY, TERM, 7, TE_READ, 120, UINT64_MAX, 0), TE_ERANGE);
    /* A capability reaching the top of the address space: sums must not wrap. */
    te_cap top = make_cap(UINT64_MAX - 10, 10, TE_CAP_READ);
    ASSERT_EQ(te_cap_check(&top, KEY, TERM, 7, TE_READ, UINT64_MAX - 1, 4, 0), TE_ERANGE);
    ASSERT_EQ(te_cap_check(&top, KEY, TERM, 7, TE_READ, UINT64_MAX - 10, 10, 0), TE_OK);
    ASSERT_EQ(te_cap_check(&top, KEY, TERM, 7, TE_READ, UINT64_MAX - 2, 2, 0), TE_OK);
    ASSERT_EQ(te_cap_check(&top, KEY, TERM, 7, TE_READ, 5, UINT64_MAX - 5, 0), TE_ERANGE);
    te_cap wrap = make_cap(UINT64_MAX - 1, 100, TE_CAP_READ);   /* claims past the end */
    ASSERT_EQ(te_cap_check(&wrap, KEY, TERM, 7, TE_READ, 10, 4, 0), TE_ERANGE);
}

static void test_wire_roundtrip(void) {
    te_cap c = make_cap(1ULL << 40, 1ULL << 20, TE_CAP_WRITE), d;
    c.term = 0x1122334455667788ULL;
    te_cap_sign(&c, KEY);
    uint8_t w[TE_CAP_WIRE_LEN];
    te_cap_encode(&c, w);
    memset(&d, 0, sizeof d);
    ASSERT_EQ(te_cap_decode(&d, w, sizeof w), 0);
    ASSERT_EQ(d.node_id, 7);
    ASSERT_EQ(d.offset, 1ULL << 40);
    ASSERT_EQ(d.term, 0x1122334455667788ULL);
    ASSERT_MEMEQ(d.mac, c.mac, TE_MAC_LEN);
    ASSERT_EQ(te_cap_check(&d, KEY, 0x1122334455667788ULL, 7, TE_WRITE, 1ULL << 40, 1ULL << 20, 0), TE_OK);
    ASSERT_EQ(te_cap_decode(&d, w, sizeof w - 1), -1);
    ASSERT_EQ(te_cap_decode(&d, NULL, 64), -1);
}

/* Flipping any bit of any byte of the encoding is refused. */
static void test_tamper_every_byte(void) {
    te_cap c = make_cap(4096, 4096, TE_CAP_READ | TE_CAP_WRITE);
    uint8_t w[TE_CAP_WIRE_LEN];
    te_cap_encode(&c, w);
    for (int i = 0; i < TE_CAP_WIRE_LEN; i++) {
        for (int bit = 0; bit < 8; bit++) {
            uint8_t t[TE_CAP_WIRE_LEN];
            memcpy(t, w, sizeof t);
            t[i] ^= (uint8_t)(1u << bit);
            te_cap d;
            if (te_cap_decode(&d, t, sizeof t) != 0) continue;   /* refused at decode */
            int st = te_cap_check(&d, KEY, TERM, 7, TE_READ, 4096, 1, 0);
            ASSERT_MSG(st == TE_EAUTH, "byte %d bit %d: status %d", i, bit, st);
        }
    }
}

int main(void) {
    RUN_TEST(test_sign_check);
    RUN_TEST(test_refusals);
    RUN_TEST(test_disk_rights);
    RUN_TEST(test_term);
    RUN_TEST(test_range_edges);
    RUN_TEST(test_wire_roundtrip);
    RUN_TEST(test_tamper_every_byte);
    TEST_EXIT();
}
