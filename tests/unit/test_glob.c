/* test_glob - Redis-style glob matching (SCAN MATCH, CONFIG GET). */
#include <string.h>

#include "server/glob.h"
#include "test.h"

static int m(const char *pat, const char *s) { return glob_match(pat, strlen(pat), s, strlen(s), 0); }

static void test_literals_and_wildcards(void) {
    ASSERT(m("abc", "abc"));
    ASSERT(!m("abc", "abcd"));
    ASSERT(!m("abcd", "abc"));
    ASSERT(m("*", ""));
    ASSERT(m("*", "anything"));
    ASSERT(m("a*", "a"));
    ASSERT(m("a*c", "abbbc"));
    ASSERT(!m("a*c", "abbb"));
    ASSERT(m("*b*", "abc"));
    ASSERT(m("h?llo", "hello"));
    ASSERT(!m("h?llo", "hllo"));
    ASSERT(m("**a**", "xxa"));
    ASSERT(m("scan:*", "scan:12"));
    ASSERT(!m("scan:*", "scam:12"));
}

static void test_classes(void) {
    ASSERT(m("h[ae]llo", "hallo"));
    ASSERT(m("h[ae]llo", "hello"));
    ASSERT(!m("h[ae]llo", "hillo"));
    ASSERT(m("h[^e]llo", "hallo"));
    ASSERT(!m("h[^e]llo", "hello"));
    ASSERT(m("h[a-c]llo", "hbllo"));
    ASSERT(m("h[c-a]llo", "hbllo"));   /* reversed range */
    ASSERT(!m("h[a-c]llo", "hdllo"));
    ASSERT(m("[\\]]", "]"));
    ASSERT(m("x[abc", "xb"));           /* unclosed class runs to the end */
}

static void test_escapes_and_case(void) {
    ASSERT(m("a\\*b", "a*b"));
    ASSERT(!m("a\\*b", "axb"));
    ASSERT(m("a\\?", "a?"));
    ASSERT(glob_match("SEG*", 4, "segment-size", 12, 1));
    ASSERT(!glob_match("SEG*", 4, "segment-size", 12, 0));
}

static void test_binary(void) {
    ASSERT(glob_match("a?c", 3, "a\0c", 3, 0));
    ASSERT(glob_match("a\0*", 3, "a\0zz", 4, 0));
    ASSERT(!glob_match("a\0*", 3, "a1zz", 4, 0));
}

/* A pattern that makes naive recursive matchers take exponential time. */
static void test_pathological_is_fast(void) {
    char s[200], p[200];
    memset(s, 'a', 150);
    s[150] = '\0';
    strcpy(p, "a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b");
    ASSERT(!m(p, s));
}

int main(void) {
    RUN_TEST(test_literals_and_wildcards);
    RUN_TEST(test_classes);
    RUN_TEST(test_escapes_and_case);
    RUN_TEST(test_binary);
    RUN_TEST(test_pathological_is_fast);
    TEST_EXIT();
}
