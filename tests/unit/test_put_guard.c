/* test_put_guard - when a streaming put must go (server/put_guard.c):
 * no bytes for put_timeout_ms, or past it and slower than put_min_rate;
 * a put that keeps up, or has all its bytes, stays. */
#include <string.h>

#include "server/config.h"
#include "server/put_guard.h"
#include "test.h"

static mkv_config cfg;

static client put_of(uint64_t size, uint64_t landed, uint64_t start, uint64_t last) {
    static char token;
    client c;
    memset(&c, 0, sizeof c);
    c.pending_put = (store_put *)&token;
    c.pending_put_size = size;
    c.pending_put_landed = landed;
    c.pending_put_start_ms = start;
    c.pending_put_last_ms = last;
    return c;
}

static void test_no_put_no_verdict(void) {
    client c;
    memset(&c, 0, sizeof c);
    char buf[256];
    ASSERT(put_guard_verdict(&cfg, &c, 1000000, buf, sizeof buf) == NULL);
}

static void test_idle_put_times_out(void) {
    char buf[256];
    client c = put_of(60000000, 0, 1000, 1000);
    ASSERT(put_guard_verdict(&cfg, &c, 1000 + 999, buf, sizeof buf) == NULL);
    ASSERT(put_guard_verdict(&cfg, &c, 1000 + 1000, buf, sizeof buf) != NULL);
    ASSERT_STREQ(buf, "ERR put timed out: no value bytes for 1000 ms (0 of 60000000 arrived)");
}

static void test_slow_put_is_dropped_past_the_timeout(void) {
    char buf[256];
    /* 500 KB in 1.5 s, bytes still arriving: 333 KB/s < 1 MiB/s */
    client c = put_of(8000000, 500000, 1000, 2400);
    ASSERT_STREQ(put_guard_verdict(&cfg, &c, 2500, buf, sizeof buf),
                 "ERR put too slow: 500000 of 8000000 bytes in 1500 ms, under the minimum of 1048576 bytes/s");
    /* younger than the timeout: no rate judged yet */
    c = put_of(8000000, 1000, 1000, 1900);
    ASSERT(put_guard_verdict(&cfg, &c, 1950, buf, sizeof buf) == NULL);
    /* fast enough */
    c = put_of(80000000, 4000000, 1000, 2990);
    ASSERT(put_guard_verdict(&cfg, &c, 3000, buf, sizeof buf) == NULL);
    /* every byte there (waiting for the command's end): not slow */
    c = put_of(1000, 1000, 1000, 1500);
    ASSERT(put_guard_verdict(&cfg, &c, 2400, buf, sizeof buf) == NULL);
    /* rate 0 turns the minimum off */
    cfg.put_min_rate = 0;
    c = put_of(8000000, 500000, 1000, 2400);
    ASSERT(put_guard_verdict(&cfg, &c, 2500, buf, sizeof buf) == NULL);
    cfg.put_min_rate = 1024 * 1024;
}

int main(void) {
    config_defaults(&cfg);
    cfg.put_timeout_ms = 1000;
    RUN_TEST(test_no_put_no_verdict);
    RUN_TEST(test_idle_put_times_out);
    RUN_TEST(test_slow_put_is_dropped_past_the_timeout);
    TEST_EXIT();
}
