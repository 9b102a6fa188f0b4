/* test_client_fault - a client's own bad buffer is its own error (issue
 * 26). A registered buffer that goes bad (mprotect PROT_NONE: the kernel
 * then answers EFAULT to a send from it, safely) failed its put with the
 * node blamed: the client sent MOON.SUSPECT, the master held the node
 * suspect for node_timeout_ms, and every client's 2-replica puts on the
 * 2-node cluster failed NOREPLICAS meanwhile. Now the put fails
 * MKV_EFAULT, the master's suspicions do not move, and another client's
 * puts go through at once. Over TCP (puts and a get into read-only
 * memory, the path staying usable), shm in fd mode, and shm in map mode
 * (where the copy is this process's own: MKV_EFAULT while the mapping is
 * cold, else the process faults, as memcpy would; either way no node is
 * blamed). Registering unreadable memory is refused MKV_EFAULT. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

#define NODES   2
#define BIG     (3u << 20)   /* several slices */
#define SMALL   4096

static int master_port;
static char master[32];

static long long suspicions(void) { return h_port_info(master_port, "cluster", "suspicions"); }

static mkv_client *client(const char *transport, const char *shm_mode) {
    mkv_options o;
    mkv_options_init(&o);
    o.master = master;
    o.transport = transport;
    o.shm_mode = shm_mode;
    o.replicas = NODES;
    mkv_client *c = NULL;
    if (mkv_connect(&c, &o) != MKV_OK) printf("# connect %s: %s\n", transport, mkv_last_error(NULL));
    return c;
}

/* len bytes of fresh anonymous memory, filled. */
static char *pages(size_t len) {
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    h_fill(p, len, len);
    return p;
}

/* n 2-replica puts of another client, right after: all must succeed. */
static int other_client_puts(const char *tag, int n) {
    mkv_client *c = client("tcp", NULL);
    if (!c) return -1;
    char *buf = pages(SMALL);
    int failed = mkv_register_buffer(c, buf, SMALL) != MKV_OK ? n : 0;
    for (int i = 0; !failed && i < n; i++) {
        char key[64];
        snprintf(key, sizeof key, "other:%s:%d", tag, i);
        int rc = mkv_put(c, key, strlen(key), buf, SMALL, NODES);
        if (rc != MKV_OK) {
            printf("# %s: %s\n", key, mkv_last_error(c));
            failed++;
        }
    }
    mkv_close(c);
    munmap(buf, SMALL);
    return failed;
}

/* A put from a buffer registered and then made unreadable. */
static int put_from_bad(mkv_client *c, const char *key, size_t len) {
    char *buf = pages(len);
    if (!buf || mkv_register_buffer(c, buf, len) != MKV_OK) return MKV_ENOMEM;
    mprotect(buf, len, PROT_NONE);
    int rc = mkv_put(c, key, strlen(key), buf, len, NODES);
    mkv_unregister_buffer(c, buf);
    munmap(buf, len);
    return rc;
}

static void test_tcp_bad_buffer(void) {
    long long s0 = suspicions();
    ASSERT(s0 >= 0);
    mkv_client *c = client("tcp", NULL);
    ASSERT(c);
    int rc = put_from_bad(c, "bad:small", SMALL);
    ASSERT_MSG(rc == MKV_EFAULT, "small: %s: %s", mkv_strerror(rc), mkv_last_error(c));
    rc = put_from_bad(c, "bad:big", BIG);
    ASSERT_MSG(rc == MKV_EFAULT, "big: %s: %s", mkv_strerror(rc), mkv_last_error(c));
    ASSERT_EQ(suspicions(), s0);                         /* no MOON.SUSPECT */
    ASSERT_EQ(h_port_info(master_port, "cluster", "nodes_suspect"), 0);
    ASSERT_EQ(other_client_puts("tcp", 20), 0);
    ASSERT_EQ(mkv_exists(c, "bad:small", 9), 0);         /* revoked, not published */

    /* The same client's paths still carry good puts and gets; a get into
     * read-only memory is the caller's error too. */
    char *good = pages(BIG), *ro = pages(BIG);
    ASSERT(good && ro);
    ASSERT_EQ(mkv_register_buffer(c, good, BIG), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(c, ro, BIG), MKV_OK);
    mprotect(ro, BIG, PROT_READ);
    ASSERT_EQ(mkv_put(c, "good:big", 8, good, BIG, NODES), MKV_OK);
    size_t got = 0;
    rc = mkv_get(c, "good:big", 8, ro, BIG, &got);
    ASSERT_MSG(rc == MKV_EFAULT, "get into read-only: %s: %s", mkv_strerror(rc), mkv_last_error(c));
    memset(good, 0, BIG);
    ASSERT_EQ(mkv_get(c, "good:big", 8, good, BIG, &got), MKV_OK);
    ASSERT(got == BIG && memcmp(good, ro, BIG) == 0);    /* ro still holds the bytes put */
    ASSERT_EQ(suspicions(), s0);
    mkv_close(c);
    munmap(good, BIG);
    munmap(ro, BIG);
}

static void test_register_unreadable(void) {
    mkv_client *c = client("tcp", NULL);
    ASSERT(c);
    char *buf = mmap(NULL, SMALL, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT(buf != MAP_FAILED);
    int rc = mkv_register_buffer(c, buf, SMALL);
    ASSERT_MSG(rc == MKV_EFAULT, "%s: %s", mkv_strerror(rc), mkv_last_error(c));
    ASSERT_EQ(mkv_put(c, "bad:unreg", 9, buf, SMALL, NODES), MKV_ENOTREG);
    mkv_close(c);
    munmap(buf, SMALL);
}

static void test_shm_fd_bad_buffer(void) {
    long long s0 = suspicions();
    mkv_client *c = client("shm", "fd");
    ASSERT(c);
    int rc = put_from_bad(c, "bad:shmfd", BIG);
    ASSERT_MSG(rc == MKV_EFAULT, "%s: %s", mkv_strerror(rc), mkv_last_error(c));
    ASSERT_EQ(suspicions(), s0);
    ASSERT_EQ(other_client_puts("shmfd", 10), 0);
    mkv_close(c);
}

/* Map mode copies in this process: a child tries, so that a fault there
 * ends only the child. */
static void test_shm_map_bad_buffer(void) {
    long long s0 = suspicions();
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        mkv_client *c = client("shm", "map");
        int rc = c ? put_from_bad(c, "bad:shmmap", BIG) : MKV_ECONN;
        _exit(rc == MKV_EFAULT ? 0 : 1);
    }
    int st = 0;
    ASSERT(waitpid(pid, &st, 0) == pid);
    ASSERT_MSG((WIFEXITED(st) && WEXITSTATUS(st) == 0) || (WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV),
               "child status %#x", st);
    printf("# map mode: %s\n", WIFEXITED(st) ? "MKV_EFAULT (cold mapping)" : "SIGSEGV in the client");
    ASSERT_EQ(suspicions(), s0);
    ASSERT_EQ(other_client_puts("shmmap", 10), 0);
}

int main(void) {
    h_init(180);
    int base = h_free_ports(1 + 2 * NODES);
    if (base < 0) {
        printf("not ok - ports\n");
        return 1;
    }
    master_port = base;
    snprintf(master, sizeof master, "127.0.0.1:%d", master_port);
    if (h_start_master(master_port, NULL) < 0) {
        printf("not ok - start master\n");
        return 1;
    }
    for (int i = 0; i < NODES; i++) {
        h_args a = {0};
        h_node_argv(&a, master, "127.0.0.1", base + 1 + i, base + 1 + NODES + i, "64MB");
        h_arg(&a, "--transport");
        h_arg(&a, "auto");   /* shm next to TCP */
        h_spawn(a.v);
    }
    if (h_wait_nodes(master_port, "alive", NODES, 20000) != 0) {
        printf("not ok - nodes did not join\n");
        return 1;
    }
    RUN_TEST(test_tcp_bad_buffer);
    RUN_TEST(test_register_unreadable);
    RUN_TEST(test_shm_fd_bad_buffer);
    RUN_TEST(test_shm_map_bad_buffer);
    h_stop_all();
    TEST_EXIT();
}
