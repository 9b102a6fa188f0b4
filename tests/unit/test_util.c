/* Unit tests for core/util: hex coding shared by the master and nodes,
 * decimal numbers for the gateway's batches. */
#include <stdio.h>

#include "core/util.h"
#include "test.h"

static void test_hex_round_trip(void) {
    const uint8_t in[4] = {0x00, 0x9f, 0xa0, 0xff};
    char hex[9];
    hex_encode(in, sizeof in, hex);
    ASSERT_STREQ(hex, "009fa0ff");
    uint8_t out[4];
    ASSERT_EQ(hex_decode("009FA0ff", 8, out, sizeof out), 0);
    ASSERT_MEMEQ(out, in, sizeof in);
}

static void test_hex_rejects(void) {
    uint8_t out[2];
    ASSERT_EQ(hex_decode("abc", 3, out, sizeof out), -1);       /* odd length */
    ASSERT_EQ(hex_decode("abcdef", 6, out, sizeof out), -1);    /* too long */
    ASSERT_EQ(hex_decode("ab g", 4, out, sizeof out), -1);      /* not hex */
    ASSERT_EQ(hex_decode("0x12", 4, out, sizeof out), -1);
}

/* u64_decimal writes what snprintf's %llu would, at the edges too. */
static void test_u64_decimal(void) {
    const uint64_t v[] = {0, 7, 10, 99, 1000, 4294967296ULL, 18446744073709551615ULL};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char got[21], want[24];
        size_t n = u64_decimal(v[i], got);
        int w = snprintf(want, sizeof want, "%llu", (unsigned long long)v[i]);
        ASSERT_STREQ(got, want);
        ASSERT_EQ(n, (size_t)w);
    }
}

int main(void) {
    RUN_TEST(test_hex_round_trip);
    RUN_TEST(test_hex_rejects);
    RUN_TEST(test_u64_decimal);
    TEST_EXIT();
}
