/* tests/unit/test_memwarm.c - warming reads every byte and changes none,
 * for odd lengths and read-only memory too. */
#include "core/memwarm.h"
#include "test.h"

#include <sys/mman.h>
#include <unistd.h>

static void test_bytes_unchanged(void) {
    static const size_t lens[] = {1, 4095, 65536, (1u << 20) + 17, (3u << 20) + 5};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        size_t n = lens[k];
        unsigned char *a = malloc(n), *copy = malloc(n);
        ASSERT(a && copy);
        for (size_t i = 0; i < n; i++) a[i] = (unsigned char)(i * 131 + k);
        memcpy(copy, a, n);
        ASSERT_EQ(memwarm_kernel(a, n), 0);
        ASSERT_MSG(memcmp(a, copy, n) == 0, "len %zu", n);
        free(a);
        free(copy);
    }
    ASSERT_EQ(memwarm_kernel(NULL, 0), 0);
}

static void test_read_only_and_untouched(void) {
    size_t n = 8u << 20;
    /* Never touched: warming maps it without writing a byte. */
    unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT(p != MAP_FAILED);
    ASSERT_EQ(memwarm_kernel(p, n), 0);
    ASSERT(p[0] == 0 && p[n - 1] == 0);
    p[12345] = 7;
    ASSERT(mprotect(p, n, PROT_READ) == 0);
    ASSERT_EQ(memwarm_kernel(p, n), 0);
    ASSERT_EQ(p[12345], 7);
    munmap(p, n);
}

static void test_unmapped_fails_cleanly(void) {
    long pg = sysconf(_SC_PAGESIZE);
    unsigned char *p = mmap(NULL, (size_t)pg * 4, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT(p != MAP_FAILED);
    /* The kernel reports EFAULT instead of crashing the process. */
    ASSERT_EQ(memwarm_kernel(p, (size_t)pg * 4), -1);
    munmap(p, (size_t)pg * 4);
}

int main(void) {
    RUN_TEST(test_bytes_unchanged);
    RUN_TEST(test_read_only_and_untouched);
    RUN_TEST(test_unmapped_fails_cleanly);
    TEST_EXIT();
}
