/* tests/unit/test_etcd.c - the etcd client's pure parts: endpoint lists,
 * chunked bodies, the leader key; and a call to an endpoint that does not
 * answer fails cleanly within its timeout. */
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "etcd/etcd.h"
#include "etcd/http.h"
#include "test.h"

static void test_endpoints(void) {
    char err[ETCD_ERR_LEN];
    etcd_client *ec = etcd_create("http://127.0.0.1:2379,127.0.0.2:2380", 100, err, sizeof err);
    ASSERT(ec != NULL);
    etcd_free(ec);
    ASSERT(etcd_create("https://127.0.0.1:2379", 100, err, sizeof err) == NULL);
    ASSERT(strstr(err, "bad etcd endpoint") != NULL);
    ASSERT(etcd_create("", 100, err, sizeof err) == NULL);
    ASSERT(etcd_create("http://nohostport", 100, err, sizeof err) == NULL);
    ASSERT(etcd_create("a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8,i:9", 100, err, sizeof err) == NULL);
}

static void test_dechunk(void) {
    char ok[] = "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    long n = http_dechunk(ok, strlen(ok));
    ASSERT_EQ(n, 11);
    ASSERT_MEMEQ(ok, "hello world", 11);
    char short_chunk[] = "a\r\nhello\r\n0\r\n\r\n";   /* says 10, has 5 */
    ASSERT_EQ(http_dechunk(short_chunk, strlen(short_chunk)), -1);
    char no_end[] = "5\r\nhello\r\n";
    ASSERT_EQ(http_dechunk(no_end, strlen(no_end)), -1);
    char not_hex[] = "zz\r\nhello\r\n0\r\n\r\n";
    ASSERT_EQ(http_dechunk(not_hex, strlen(not_hex)), -1);
    char huge[] = "ffffffffffffffff\r\nx\r\n";
    ASSERT_EQ(http_dechunk(huge, strlen(huge)), -1);
}

static void test_leader_key(void) {
    char key[ETCD_KEY_MAX];
    ASSERT(etcd_leader_key("prod", key, sizeof key) == 0);
    ASSERT_STREQ(key, "/moonkv/prod/leader");
    ASSERT(etcd_leader_key("", key, sizeof key) == 0);
    ASSERT_STREQ(key, "/moonkv/moonkv/leader");
    ASSERT(etcd_leader_key("prod", key, 8) == -1);
}

static void test_unreachable(void) {
    char err[ETCD_ERR_LEN], val[16];
    /* Port 1 on loopback: refused at once. */
    etcd_client *ec = etcd_create("127.0.0.1:1", 300, err, sizeof err);
    ASSERT(ec != NULL);
    int found = 7;
    int64_t rev = 0;
    uint64_t t0 = mono_ms();
    ASSERT(etcd_get(ec, "/k", &found, val, sizeof val, &rev, err, sizeof err) == -1);
    ASSERT(mono_ms() - t0 < 2000);
    ASSERT(strstr(err, "127.0.0.1:1") != NULL);
    etcd_free(ec);
}

int main(void) {
    RUN_TEST(test_endpoints);
    RUN_TEST(test_dechunk);
    RUN_TEST(test_leader_key);
    RUN_TEST(test_unreachable);
    TEST_EXIT();
}
