/* tests/unit/test_shm_warm.c - the warm-chunk bookkeeping of shm map mode
 * (which chunk goes next, what reads ready, bytes never changed) and the
 * process's shared mappings (one per segment, warmed by the background
 * thread, released by the last holder). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/shm_maps.h"
#include "backend/shm_warm.h"
#include "core/util.h"
#include "test.h"

#define C SHM_WARM_CHUNK

static char *shared_map(uint64_t size, int *fd) {
    *fd = memfd_create("test-shm-warm", MFD_CLOEXEC);
    if (*fd < 0 || ftruncate(*fd, (off_t)size) != 0) return NULL;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Six chunks, the last one short: the chunk a transfer found cold goes
 * next, then the rest from 0 upward; ranges read ready only when every
 * chunk they touch is warm; warming changes no byte. */
static void test_order_and_ready(void) {
    const uint64_t size = 5 * C + 12345;
    int fd;
    char *base = shared_map(size, &fd);
    ASSERT(base != NULL);
    for (uint64_t i = 0; i < size; i += 997) base[i] = (char)(i * 13 + 1);
    shm_warm *w = shm_warm_new(base, size);
    ASSERT_EQ(shm_warm_bytes(w), 0);
    ASSERT_EQ(shm_warm_step(w, 0), SHM_WARM_NONE);      /* nothing asked, no sweep */
    ASSERT_EQ(shm_warm_bytes(w), 0);
    ASSERT_EQ(shm_warm_asked(w), 0);
    ASSERT_EQ(shm_warm_ready(w, 0, 1), 0);
    ASSERT_EQ(shm_warm_ready(w, 3 * C + 5, 10), 0);    /* hints chunk 3 */
    ASSERT_EQ(shm_warm_asked(w), 1);
    ASSERT_EQ(shm_warm_step(w, 0), SHM_WARM_ASKED);
    ASSERT_EQ(shm_warm_asked(w), 0);
    ASSERT_EQ(shm_warm_ready(w, 3 * C, C), 1);
    ASSERT_EQ(shm_warm_ready(w, 0, 1), 0);              /* chunk 0 still cold; hints it */
    ASSERT_EQ(shm_warm_ready(w, 3 * C + C - 1, 2), 0);  /* reaches into chunk 4: hints it */
    ASSERT_EQ(shm_warm_bytes(w), C);
    ASSERT_EQ(shm_warm_step(w, 1), SHM_WARM_ASKED);        /* chunk 4, the last hint */
    ASSERT_EQ(shm_warm_ready(w, 3 * C, 2 * C), 1);
    ASSERT_EQ(shm_warm_ready(w, 0, 1), 0);
    ASSERT_EQ(shm_warm_ready(w, 3 * C, 1), 1);          /* a warm range leaves the hint alone */
    ASSERT_EQ(shm_warm_step(w, 1), SHM_WARM_ASKED);        /* chunk 0 */
    ASSERT_EQ(shm_warm_ready(w, 0, C), 1);
    ASSERT_EQ(shm_warm_ready(w, C, 1), 0);
    ASSERT_EQ(shm_warm_step(w, 1), SHM_WARM_ASKED);        /* chunk 1 */
    ASSERT_EQ(shm_warm_step(w, 1), SHM_WARM_SWEPT);        /* then in order: 2, the short 5 */
    ASSERT_EQ(shm_warm_ready(w, 0, 5 * C), 1);
    ASSERT_EQ(shm_warm_bytes(w), 5 * C);
    ASSERT_EQ(shm_warm_ready(w, 2 * C, 1), 1);          /* warm: no hint */
    ASSERT_EQ(shm_warm_done(w), 0);
    ASSERT_EQ(shm_warm_step(w, 1), SHM_WARM_SWEPT);     /* the short last one */
    ASSERT_EQ(shm_warm_done(w), 1);
    ASSERT_EQ(shm_warm_step(w, 1), SHM_WARM_NONE);      /* nothing left */
    ASSERT_EQ(shm_warm_bytes(w), size);
    ASSERT_EQ(shm_warm_ready(w, 0, size), 1);
    /* Empty or outside the mapping: never ready, whatever is warm. */
    ASSERT_EQ(shm_warm_ready(w, 0, 0), 0);
    ASSERT_EQ(shm_warm_ready(w, size - 1, 2), 0);
    ASSERT_EQ(shm_warm_ready(w, UINT64_MAX - 1, 4), 0);
    for (uint64_t i = 0; i < size; i++) ASSERT(base[i] == (i % 997 ? 0 : (char)(i * 13 + 1)));
    shm_warm_free(w);
    munmap(base, size);
    close(fd);
}

/* Waits (bounded) for every mapping of the process to be warm. */
static int all_warm(void) {
    for (int i = 0; i < 3000; i++) {
        if (shm_maps_cold_bytes() == 0) return 1;
        usleep(10000);
    }
    return 0;
}

/* Paths to one segment share a mapping, even through another fd of it;
 * the thread warms it without changing a byte; the last put unmaps it. */
static void test_shared_and_warmed(void) {
    const uint64_t size = 9 * C;
    int fd, fd2;
    char *node = shared_map(size, &fd), *other = shared_map(size, &fd2), why[128];
    ASSERT(node && other);
    memcpy(node + size - 6, "node!", 6);
    int dupfd = dup(fd);
    shm_map *a = shm_map_get(fd, size, 0, 0, why, sizeof why), *b = shm_map_get(dupfd, size, 0, 0, why, sizeof why);
    shm_map *c = shm_map_get(fd2, size, 0, 0, why, sizeof why);
    ASSERT(a && b && c);
    ASSERT(a == b && a != c);
    ASSERT(shm_map_base(a) != node);
    ASSERT(all_warm());
    ASSERT_EQ(shm_map_cold_bytes(a), 0);
    ASSERT_EQ(shm_map_ready(a, 0, size), 1);
    ASSERT_STREQ(shm_map_base(a) + size - 6, "node!");
    shm_map_put(c);
    shm_map_put(a);
    ASSERT_EQ(shm_map_ready(b, size - 1, 1), 1);   /* b still holds it */
    shm_map_put(b);
    ASSERT_EQ(shm_map_get(fd, 0, 0, 0, why, sizeof why), NULL);
    munmap(node, size);
    munmap(other, size);
    close(fd);
    close(fd2);
    close(dupfd);
}

/* At 1 MB/s a 64 MiB mapping would take a minute: released after its
 * first chunks, the thread stops and the mapping goes (ASan and TSan
 * check the rest: no leak, no race with the thread inside a chunk). */
static void test_released_while_cold(void) {
    const uint64_t size = 32 * C;
    int fd;
    char *node = shared_map(size, &fd), why[128];
    ASSERT(node != NULL);
    for (int round = 0; round < 3; round++) {
        shm_map *m = shm_map_get(fd, size, 0, 1, why, sizeof why);
        ASSERT(m != NULL);
        ASSERT(shm_map_cold_bytes(m) > 0);
        usleep(round * 20000);
        shm_map_put(m);
        ASSERT_EQ(shm_maps_cold_bytes(), 0);   /* nothing held */
    }
    munmap(node, size);
    close(fd);
}

/* The sweep waits for the whole process's transfers to pause: a mapping
 * nobody reads (the second replica's segment, with --replicas 2) stays
 * cold while another one is in use, and both warm once all are quiet. */
static void test_no_sweep_while_busy(void) {
    const uint64_t size = 4 * C;
    int fd, fd2;
    char *node = shared_map(size, &fd), *other = shared_map(size, &fd2), why[128];
    ASSERT(node && other);
    shm_map *used = shm_map_get(fd, size, 0, 0, why, sizeof why), *idle = shm_map_get(fd2, size, 0, 0, why, sizeof why);
    ASSERT(used && idle);
    uint64_t start = mono_ms(), last = start, gap = 0;
    while (mono_ms() - start < 600) {   /* three quiet periods' worth */
        shm_map_used(used);
        uint64_t now = mono_ms();
        if (now - last > gap) gap = now - last;
        last = now;
        usleep(5000);
    }
    /* Only a use loop descheduled for most of a quiet period lets a sweep in. */
    if (gap < 150) {
        ASSERT_EQ(shm_map_cold_bytes(idle), size);
        ASSERT_EQ(shm_map_cold_bytes(used), size);
    }
    ASSERT(all_warm());
    shm_map_put(used);
    shm_map_put(idle);
    munmap(node, size);
    munmap(other, size);
    close(fd);
    close(fd2);
}

/* The process that handed a segment out exits (a node killed): without a
 * transfer asking, the mapping is dropped (no line of /proc/self/maps
 * names the segment any more, nor an fd of /proc/self/fd: its fd reads
 * /dev/null), its range still reads (zeros) so a copy
 * in flight cannot fault, it is ready for no transfer, a new get maps
 * the segment anew, and the last put unmaps it. A mapping whose owner
 * lives keeps its bytes. */
static void test_owner_exit_drops_mapping(void) {
    const uint64_t size = 2 * C;
    int fd = memfd_create("test-shm-owner", MFD_CLOEXEC), fd2 = memfd_create("test-shm-alive", MFD_CLOEXEC);
    ASSERT(fd >= 0 && fd2 >= 0 && ftruncate(fd, (off_t)size) == 0 && ftruncate(fd2, (off_t)size) == 0);
    ASSERT(pwrite(fd, "node!", 6, 100) == 6 && pwrite(fd2, "live!", 6, 100) == 6);
    pid_t owner = fork();
    if (owner == 0) {
        pause();
        _exit(0);
    }
    ASSERT(owner > 0);
    char why[128];
    shm_map *m = shm_map_get(fd, size, 7, 0, why, sizeof why), *live = shm_map_get(fd2, size, 8, 0, why, sizeof why);
    ASSERT(m && live);
    shm_map_watch(m, owner);
    shm_map_watch(live, getpid());
    ASSERT(all_warm());
    ASSERT_STREQ(shm_map_base(m) + 100, "node!");
    ASSERT_EQ(test_mappings_of("test-shm-owner"), 1);
    ASSERT_EQ(test_fds_of("test-shm-owner"), 2);   /* ours and the mapping's */
    usleep(2 * SHM_WATCH_MS * 1000);
    ASSERT_EQ(shm_map_dead(m), 0);   /* alive: watched, kept */
    kill(owner, SIGKILL);
    waitpid(owner, NULL, 0);
    uint64_t end = mono_ms() + 10000;
    while (!shm_map_dead(m) && mono_ms() < end) usleep(10000);
    ASSERT_EQ(shm_map_dead(m), 1);
    ASSERT_EQ(test_mappings_of("test-shm-owner"), 0);
    ASSERT_EQ(test_fds_of("test-shm-owner"), 1);   /* ours alone: the mapping's is /dev/null now */
    char byte = 1;
    ASSERT_EQ(pread(shm_map_fd(m), &byte, 1, 100), 0);
    ASSERT_EQ(shm_map_base(m)[100], 0);
    ASSERT_EQ(shm_map_ready(m, 0, 1), 0);
    ASSERT_EQ(shm_map_cold_bytes(m), 0);
    shm_map *again = shm_map_get(fd, size, 7, 0, why, sizeof why);   /* not the dead one */
    ASSERT(again && again != m);
    ASSERT_STREQ(shm_map_base(again) + 100, "node!");
    shm_map_put(again);
    shm_map_put(m);
    ASSERT_EQ(shm_map_dead(live), 0);
    ASSERT_STREQ(shm_map_base(live) + 100, "live!");
    ASSERT_EQ(test_mappings_of("test-shm-alive"), 1);
    shm_map_put(live);
    ASSERT_EQ(test_mappings_of("test-shm-alive"), 0);
    close(fd);
    close(fd2);
}

int main(void) {
    RUN_TEST(test_order_and_ready);
    RUN_TEST(test_shared_and_warmed);
    RUN_TEST(test_released_while_cold);
    RUN_TEST(test_no_sweep_while_busy);
    RUN_TEST(test_owner_exit_drops_mapping);
    TEST_EXIT();
}
