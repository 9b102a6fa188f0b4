/* tests/test.h - the tiny test harness every C test uses.
 *
 * Each case prints "ok - name" or "not ok - name: where: why"; tests/run.sh
 * counts those lines across binaries. An ASSERT failure ends the case. */
#ifndef MKV_TEST_H
#define MKV_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int test_failed_cases;
static int test_case_failed;
static const char *test_case_name = "";

static inline void test_fail(const char *file, int line, const char *what) {
    if (!test_case_failed) printf("not ok - %s: %s:%d: %s\n", test_case_name, file, line, what);
    test_case_failed = 1;
}

/* Lines of this process's /proc/self/maps naming what (a segment's file
 * or memfd): how many mappings of it the process holds; -1 unreadable. */
static inline int test_mappings_of(const char *what) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f)) n += strstr(line, what) != NULL;
    fclose(f);
    return n;
}

/* This process's open fds whose target (/proc/self/fd) names what:
 * how many; -1 unreadable. */
static inline int test_fds_of(const char *what) {
    char path[64], target[1024];
    int n = 0;
    for (int fd = 0; fd < 4096; fd++) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len <= 0) continue;
        target[len] = 0;
        n += strstr(target, what) != NULL;
    }
    return n;
}

#define ASSERT(cond) do { \
    if (!(cond)) { test_fail(__FILE__, __LINE__, #cond); return; } \
} while (0)

#define ASSERT_MSG(cond, ...) do { if (!(cond)) { \
    char _m[512]; snprintf(_m, sizeof _m, __VA_ARGS__); \
    test_fail(__FILE__, __LINE__, _m); return; } \
} while (0)

#define ASSERT_EQ(a, b) do { long long _a = (long long)(a), _b = (long long)(b); \
    if (_a != _b) { char _m[512]; \
        snprintf(_m, sizeof _m, "%s == %s (%lld != %lld)", #a, #b, _a, _b); \
        test_fail(__FILE__, __LINE__, _m); return; } \
} while (0)

#define ASSERT_STREQ(a, b) do { const char *_a = (a), *_b = (b); \
    if (!_a || !_b || strcmp(_a, _b) != 0) { char _m[512]; \
        snprintf(_m, sizeof _m, "%s == %s (\"%s\" != \"%s\")", #a, #b, \
                 _a ? _a : "(null)", _b ? _b : "(null)"); \
        test_fail(__FILE__, __LINE__, _m); return; } \
} while (0)

#define ASSERT_MEMEQ(a, b, n) ASSERT(memcmp((a), (b), (n)) == 0)

/* Calls a step several cases share, a function that ASSERTs as a case
 * does, and ends the calling case too when that step failed. */
#define ASSERT_STEP(call) do { call; if (test_case_failed) return; } while (0)

/* Runs one case under a given name (e.g. "case/tcp" for a case run once
 * per transport); the name must stay valid while the case runs. */
#define RUN_TEST_NAMED(fn, name) do { \
    test_case_failed = 0; test_case_name = (name); fn(); \
    if (test_case_failed) test_failed_cases++; \
    else printf("ok - %s\n", test_case_name); \
    fflush(stdout); \
    test_case_name = ""; \
} while (0)

/* Runs one case; the name printed is the function's name. */
#define RUN_TEST(fn) RUN_TEST_NAMED(fn, #fn)

#define TEST_EXIT() return test_failed_cases ? 1 : 0

#endif
