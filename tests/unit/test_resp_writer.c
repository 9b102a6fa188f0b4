/* tests/unit/test_resp_writer.c - exact bytes of every reply type, RESP2 and RESP3. */
#include "resp/resp_writer.h"
#include "test.h"

#include <math.h>

/* Compares b's content with a literal that may hold NULs. */
#define ASSERT_BUF(b, lit) do { \
    ASSERT_MSG((b)->len == sizeof(lit) - 1 && memcmp((b)->data, lit, sizeof(lit) - 1) == 0, \
               "got \"%.*s\" want \"%s\"", (int)(b)->len, (b)->data, lit); \
    resp_buf_clear(b); \
} while (0)

static void test_simple_error_integer(void) {
    resp_buf b;
    resp_buf_init(&b);
    resp_add_simple(&b, "OK");
    ASSERT_BUF(&b, "+OK\r\n");
    resp_add_error(&b, "ERR bad\r\nthing\n");
    ASSERT_BUF(&b, "-ERR bad  thing \r\n");
    resp_add_errorf(&b, "ERR unknown command '%s', with args beginning with: %d", "FOO", 3);
    ASSERT_BUF(&b, "-ERR unknown command 'FOO', with args beginning with: 3\r\n");
    char longmsg[600];
    memset(longmsg, 'x', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = '\0';
    resp_add_errorf(&b, "ERR %s\n", longmsg);   /* longer than the stack buffer */
    ASSERT_EQ(b.len, 1 + 4 + 599 + 1 + 2);
    ASSERT_MEMEQ(b.data + b.len - 4, "x \r\n", 4);
    resp_buf_clear(&b);
    resp_add_integer(&b, 0);
    resp_add_integer(&b, -42);
    resp_add_integer(&b, 9223372036854775807LL);
    resp_add_integer(&b, -9223372036854775807LL - 1);
    ASSERT_BUF(&b, ":0\r\n:-42\r\n:9223372036854775807\r\n:-9223372036854775808\r\n");
    resp_buf_free(&b);
}

static void test_bulks(void) {
    resp_buf b;
    resp_buf_init(&b);
    resp_add_bulk(&b, "a\r\n\0b", 5);
    ASSERT_BUF(&b, "$5\r\na\r\n\0b\r\n");
    resp_add_bulk(&b, "", 0);
    ASSERT_BUF(&b, "$0\r\n\r\n");
    resp_add_bulk(&b, NULL, 0);
    ASSERT_BUF(&b, "$0\r\n\r\n");
    resp_add_bulk_cstr(&b, "hello");
    ASSERT_BUF(&b, "$5\r\nhello\r\n");
    resp_add_bulk_header(&b, 1234567);
    ASSERT_BUF(&b, "$1234567\r\n");
    resp_buf_free(&b);
}

static void test_aggregates(void) {
    resp_buf b;
    resp_buf_init(&b);
    resp_add_array(&b, 3);
    resp_add_array(&b, 0);
    resp_add_array(&b, -1);
    ASSERT_BUF(&b, "*3\r\n*0\r\n*-1\r\n");
    resp_add_map(&b, 2, 2);
    ASSERT_BUF(&b, "*4\r\n");
    resp_add_map(&b, 3, 2);
    ASSERT_BUF(&b, "%2\r\n");
    resp_add_set(&b, 2, 5);
    ASSERT_BUF(&b, "*5\r\n");
    resp_add_set(&b, 3, 5);
    ASSERT_BUF(&b, "~5\r\n");
    resp_add_push(&b, 2, 3);
    ASSERT_BUF(&b, "*3\r\n");
    resp_add_push(&b, 3, 3);
    ASSERT_BUF(&b, ">3\r\n");
    resp_buf_free(&b);
}

static void test_null_bool(void) {
    resp_buf b;
    resp_buf_init(&b);
    resp_add_null(&b, 2);
    ASSERT_BUF(&b, "$-1\r\n");
    resp_add_null(&b, 3);
    ASSERT_BUF(&b, "_\r\n");
    resp_add_null_array(&b, 2);
    ASSERT_BUF(&b, "*-1\r\n");
    resp_add_null_array(&b, 3);
    ASSERT_BUF(&b, "_\r\n");
    resp_add_bool(&b, 2, 1);
    resp_add_bool(&b, 2, 0);
    ASSERT_BUF(&b, ":1\r\n:0\r\n");
    resp_add_bool(&b, 3, 7);
    resp_add_bool(&b, 3, 0);
    ASSERT_BUF(&b, "#t\r\n#f\r\n");
    resp_buf_free(&b);
}

static void test_doubles(void) {
    resp_buf b;
    resp_buf_init(&b);
    resp_add_double(&b, 2, 1.5);
    ASSERT_BUF(&b, "$3\r\n1.5\r\n");
    resp_add_double(&b, 3, 1.5);
    ASSERT_BUF(&b, ",1.5\r\n");
    resp_add_double(&b, 2, 0.1);
    ASSERT_BUF(&b, "$19\r\n0.10000000000000001\r\n");
    resp_add_double(&b, 3, 3);
    ASSERT_BUF(&b, ",3\r\n");
    resp_add_double(&b, 3, 1e300);
    ASSERT_BUF(&b, ",1.0000000000000001e+300\r\n");
    resp_add_double(&b, 2, INFINITY);
    resp_add_double(&b, 2, -INFINITY);
    ASSERT_BUF(&b, "$3\r\ninf\r\n$4\r\n-inf\r\n");
    resp_add_double(&b, 3, INFINITY);
    resp_add_double(&b, 3, -INFINITY);
    ASSERT_BUF(&b, ",inf\r\n,-inf\r\n");
    resp_add_double(&b, 2, NAN);
    resp_add_double(&b, 3, -NAN);
    ASSERT_BUF(&b, "$3\r\nnan\r\n,nan\r\n");
    resp_buf_free(&b);
}

static void test_verbatim(void) {
    resp_buf b;
    resp_buf_init(&b);
    resp_add_verbatim(&b, 3, "txt", "hi\r\nyo", 6);
    ASSERT_BUF(&b, "=10\r\ntxt:hi\r\nyo\r\n");
    resp_add_verbatim(&b, 2, "txt", "hi\r\nyo", 6);
    ASSERT_BUF(&b, "$6\r\nhi\r\nyo\r\n");
    resp_add_verbatim(&b, 3, "mkd", "", 0);
    ASSERT_BUF(&b, "=4\r\nmkd:\r\n");
    resp_buf_free(&b);
}

/* Many appends: geometric growth keeps everything, clear keeps capacity. */
static void test_growth_and_clear(void) {
    resp_buf b;
    resp_buf_init(&b);
    ASSERT_EQ(b.len, 0);
    for (int i = 0; i < 100000; i++) resp_add_integer(&b, i % 10);
    ASSERT_EQ(b.len, 100000 * 4);
    ASSERT_MEMEQ(b.data + 4 * 12345, ":5\r\n", 4);
    ASSERT(b.cap >= b.len && b.cap < 2 * b.len + 128);
    size_t cap = b.cap;
    resp_buf_clear(&b);
    ASSERT_EQ(b.len, 0);
    ASSERT_EQ(b.cap, cap);
    resp_buf_append(&b, "xyz", 3);
    resp_buf_append(&b, NULL, 0);
    ASSERT_BUF(&b, "xyz");
    resp_buf_free(&b);
    ASSERT(b.data == NULL && b.len == 0 && b.cap == 0);
}

int main(void) {
    RUN_TEST(test_simple_error_integer);
    RUN_TEST(test_bulks);
    RUN_TEST(test_aggregates);
    RUN_TEST(test_null_bool);
    RUN_TEST(test_doubles);
    RUN_TEST(test_verbatim);
    RUN_TEST(test_growth_and_clear);
    TEST_EXIT();
}
