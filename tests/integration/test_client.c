/* test_client - libmoonkv against a real master and one memory node:
 * byte-exact put/get at every size class, write-once, remove, registered
 * buffers, batches, and the master's refusals (NOREPLICAS, NOSPACE) as
 * MKV_E* codes. Ports: one block of h_free_ports, taken first in main(). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "client/moonkv.h"
#include "cluster_harness.h"
#include "test.h"

static int port0;
static char master_addr[32], nothing_addr[32];   /* 127.0.0.1:PORT_MASTER, :PORT_NOTHING */
#define PORT_MASTER  (port0 + 0)
#define PORT_NODE    (port0 + 1)
#define PORT_DATA    (port0 + 2)
#define PORT_NOTHING (port0 + 31)   /* ours, and nothing listens here */
#define MIB (1024u * 1024u)
#define BIG (64u * MIB)

static mkv_client *cli;
static unsigned char *src, *dst;   /* registered, BIG bytes each */

static void key_of(char *key, size_t len, const char *tag, unsigned i) {
    snprintf(key, len, "test_client:%s:%u", tag, i);
}

/* The libmoonkv example of docs/CLIENTS.md, as code: connect, register, put, get, remove. */
static int readme_example(const char *master) {
    mkv_options opt;
    mkv_options_init(&opt);
    opt.master = master;
    mkv_client *c;
    if (mkv_connect(&c, &opt) != MKV_OK) {
        fprintf(stderr, "connect: %s\n", mkv_last_error(NULL));
        return -1;
    }
    static char block[4096], back[4096];
    memset(block, 'k', sizeof block);
    int rc = mkv_register_buffer(c, block, sizeof block);
    if (rc == MKV_OK) rc = mkv_register_buffer(c, back, sizeof back);
    if (rc == MKV_OK) rc = mkv_put(c, "layer0:hash", 11, block, sizeof block, 0);
    size_t n = 0;
    if (rc == MKV_OK) rc = mkv_get(c, "layer0:hash", 11, back, sizeof back, &n);
    if (rc == MKV_OK && (n != sizeof block || memcmp(block, back, n) != 0)) rc = MKV_ECORRUPT;
    if (rc == MKV_OK) rc = mkv_remove(c, "layer0:hash", 11);
    if (rc != MKV_OK) fprintf(stderr, "example: %s: %s\n", mkv_strerror(rc), mkv_last_error(c));
    mkv_close(c);
    return rc;
}

static void test_readme_example(void) {
    ASSERT_EQ(readme_example(master_addr), MKV_OK);
}

static void test_connect_refused(void) {
    mkv_options opt;
    mkv_options_init(&opt);
    opt.master = nothing_addr;
    opt.timeout_ms = 1000;
    mkv_client *c = (mkv_client *)1;
    ASSERT_EQ(mkv_connect(&c, &opt), MKV_ECONN);
    ASSERT(c == NULL);
    ASSERT(strstr(mkv_last_error(NULL), nothing_addr) != NULL);
    opt.master = "no-port-here";
    ASSERT_EQ(mkv_connect(&c, &opt), MKV_EINVAL);
}

static void test_password_refused(void) {
    mkv_options opt;
    mkv_options_init(&opt);
    opt.master = master_addr;
    opt.password = "not-configured";
    mkv_client *c;
    ASSERT_EQ(mkv_connect(&c, &opt), MKV_EAUTH);
}

/* put, exists, size, get byte-exact, put again EXISTS, remove, gone. */
static void roundtrip(size_t len, unsigned seed) {
    char key[64];
    key_of(key, sizeof key, "size", (unsigned)len);
    h_fill(src, len, seed);
    memset(dst, 0, len);
    ASSERT_EQ(mkv_put(cli, key, strlen(key), src, len, 1), MKV_OK);
    ASSERT_EQ(mkv_exists(cli, key, strlen(key)), 1);
    uint64_t size = 0;
    ASSERT_EQ(mkv_size(cli, key, strlen(key), &size), MKV_OK);
    ASSERT_EQ(size, len);
    size_t got = 0;
    ASSERT_EQ(mkv_get(cli, key, strlen(key), dst, BIG, &got), MKV_OK);
    ASSERT_EQ(got, len);
    ASSERT_MEMEQ(src, dst, len);
    ASSERT_EQ(mkv_put(cli, key, strlen(key), src, len, 1), MKV_EEXISTS);
    ASSERT(strstr(mkv_last_error(cli), "EXISTS") != NULL);
    ASSERT_EQ(mkv_remove(cli, key, strlen(key)), MKV_OK);
    ASSERT_EQ(mkv_exists(cli, key, strlen(key)), 0);
    ASSERT_EQ(mkv_get(cli, key, strlen(key), dst, BIG, &got), MKV_ENOTFOUND);
    ASSERT_EQ(mkv_remove(cli, key, strlen(key)), MKV_ENOTFOUND);
}

static void test_size_1(void) { roundtrip(1, 1); }
static void test_size_4k(void) { roundtrip(4096, 2); }
static void test_size_1m(void) { roundtrip(MIB, 3); }
static void test_size_1m_plus_3(void) { roundtrip(MIB + 3, 4); }
static void test_size_64m(void) { roundtrip(BIG, 5); }

static void test_size_zero_refused(void) {
    ASSERT_EQ(mkv_put(cli, "zero", 4, src, 0, 1), MKV_EINVAL);
    ASSERT_EQ(mkv_exists(cli, "zero", 4), 0);
}

static void test_bad_arguments(void) {
    ASSERT_EQ(mkv_put(cli, "", 0, src, 10, 1), MKV_EINVAL);
    ASSERT_EQ(mkv_put(cli, "k", 1, src, 10, 99), MKV_EINVAL);
    static char longkey[5000];
    memset(longkey, 'x', sizeof longkey);
    ASSERT_EQ(mkv_exists(cli, longkey, sizeof longkey), MKV_EINVAL);
    ASSERT_EQ(mkv_register_buffer(cli, src + 10, 100), MKV_EINVAL);   /* overlaps */
    ASSERT_EQ(mkv_unregister_buffer(cli, src + 1), MKV_EINVAL);
}

static void test_unregistered_refused(void) {
    static unsigned char heap[8192];   /* never registered */
    memset(heap, 7, sizeof heap);
    int rc = mkv_put(cli, "unreg", 5, heap, 8192, 1);
    int rc2 = mkv_put(cli, "unreg", 5, src + BIG - 100, 200, 1);   /* runs past the end */
    ASSERT_EQ(mkv_exists(cli, "unreg", 5), 0);
    ASSERT_EQ(mkv_put(cli, "unreg", 5, src, 8192, 1), MKV_OK);
    size_t got = 0;
    int rc3 = mkv_get(cli, "unreg", 5, heap, 8192, &got);
    ASSERT_EQ(rc, MKV_ENOTREG);
    ASSERT_EQ(rc2, MKV_ENOTREG);
    ASSERT_EQ(rc3, MKV_ENOTREG);
    ASSERT_EQ(mkv_remove(cli, "unreg", 5), MKV_OK);
}

static void test_too_small(void) {
    h_fill(src, 4096, 9);
    ASSERT_EQ(mkv_put(cli, "small", 5, src, 4096, 1), MKV_OK);
    size_t got = 0;
    ASSERT_EQ(mkv_get(cli, "small", 5, dst, 4095, &got), MKV_ETOOSMALL);
    ASSERT_EQ(got, 4096);
    ASSERT_EQ(mkv_get(cli, "small", 5, dst, 4096, &got), MKV_OK);
    ASSERT_MEMEQ(src, dst, 4096);
    ASSERT_EQ(mkv_remove(cli, "small", 5), MKV_OK);
}

#define NBATCH 200
#define BLOCK  (16u * 1024)

static void test_batch_200(void) {
    static mkv_obj objs[NBATCH];
    static char keys[NBATCH][32];
    static int found[NBATCH];
    h_fill(src, NBATCH * BLOCK, 11);
    for (unsigned i = 0; i < NBATCH; i++) {
        key_of(keys[i], sizeof keys[i], "batch", i);
        objs[i] = (mkv_obj){.key = keys[i], .keylen = strlen(keys[i]), .buf = src + i * BLOCK,
                            .len = BLOCK - i};   /* sizes differ: no mix-up goes unseen */
    }
    ASSERT_EQ(mkv_put_batch(cli, objs, NBATCH, 1), MKV_OK);
    for (unsigned i = 0; i < NBATCH; i++) ASSERT_EQ(objs[i].status, MKV_OK);
    ASSERT_EQ(mkv_exists_batch(cli, objs, NBATCH, found), MKV_OK);
    for (unsigned i = 0; i < NBATCH; i++) ASSERT_EQ(found[i], 1);
    ASSERT_EQ(mkv_put_batch(cli, objs, NBATCH, 1), MKV_OK);   /* again: write-once */
    for (unsigned i = 0; i < NBATCH; i++) ASSERT_EQ(objs[i].status, MKV_EEXISTS);
    memset(dst, 0, NBATCH * BLOCK);
    for (unsigned i = 0; i < NBATCH; i++) {
        objs[i].buf = dst + i * BLOCK;
        objs[i].len = BLOCK;
    }
    ASSERT_EQ(mkv_get_batch(cli, objs, NBATCH), MKV_OK);
    for (unsigned i = 0; i < NBATCH; i++) {
        ASSERT_EQ(objs[i].status, MKV_OK);
        ASSERT_EQ(objs[i].len, BLOCK - i);
        ASSERT_MEMEQ(src + i * BLOCK, dst + i * BLOCK, BLOCK - i);
    }
    for (unsigned i = 0; i < NBATCH; i++)
        ASSERT_EQ(mkv_remove(cli, keys[i], strlen(keys[i])), MKV_OK);
    ASSERT_EQ(mkv_exists_batch(cli, objs, NBATCH, found), MKV_OK);
    for (unsigned i = 0; i < NBATCH; i++) ASSERT_EQ(found[i], 0);
}

/* A batch where some keys are missing gets per-object results. */
static void test_batch_mixed(void) {
    mkv_obj objs[3] = {
        {.key = "mix:a", .keylen = 5, .buf = src, .len = 100},
        {.key = "mix:b", .keylen = 5, .buf = src + 4096, .len = 100},
    };
    h_fill(src, 8192, 12);
    ASSERT_EQ(mkv_put(cli, "mix:a", 5, src, 100, 1), MKV_OK);
    objs[0].buf = dst;
    objs[1].buf = dst + 4096;
    objs[2] = (mkv_obj){.key = "mix:c", .keylen = 5, .buf = dst + 8192, .len = 10};
    ASSERT_EQ(mkv_get_batch(cli, objs, 3), MKV_OK);
    ASSERT_EQ(objs[0].status, MKV_OK);
    ASSERT_MEMEQ(src, dst, 100);
    ASSERT_EQ(objs[1].status, MKV_ENOTFOUND);
    ASSERT_EQ(objs[2].status, MKV_ENOTFOUND);
    ASSERT_EQ(mkv_remove(cli, "mix:a", 5), MKV_OK);
}

/* A put batch gets per-object results too: a refused key (EXISTS) in
 * the middle of placed ones (MOON.MPUTSTART PACKED's error record)
 * leaves its neighbours written and readable. */
static void test_put_batch_mixed(void) {
    mkv_obj objs[3] = {
        {.key = "pmix:a", .keylen = 6, .buf = src, .len = 300},
        {.key = "pmix:b", .keylen = 6, .buf = src + 4096, .len = 200},
        {.key = "pmix:c", .keylen = 6, .buf = src + 8192, .len = 100},
    };
    h_fill(src, 3 * 4096, 14);
    ASSERT_EQ(mkv_put(cli, "pmix:b", 6, src + 4096, 200, 1), MKV_OK);
    ASSERT_EQ(mkv_put_batch(cli, objs, 3, 1), MKV_OK);
    ASSERT_EQ(objs[0].status, MKV_OK);
    ASSERT_EQ(objs[1].status, MKV_EEXISTS);
    ASSERT_EQ(objs[2].status, MKV_OK);
    for (int i = 0; i < 3; i++) {
        size_t got = 0;
        ASSERT_EQ(mkv_get(cli, objs[i].key, objs[i].keylen, dst, 4096, &got), MKV_OK);
        ASSERT_EQ(got, objs[i].len);
        ASSERT_MEMEQ(objs[i].buf, dst, got);
        ASSERT_EQ(mkv_remove(cli, objs[i].key, objs[i].keylen), MKV_OK);
    }
}

/* Batches of objects over one slice (4 MiB) through a TCP client: the
 * put sums slice CRCs and ends with MOON.MPUTEND SLICES, a batch get
 * decodes them from MOON.MGETPACKED's records and checks the bytes
 * slice by slice (no checksum on the way in over TCP); the default
 * client reads the same batch through the mapping. */
static void test_batch_sliced(void) {
    enum { N = 3, SIZE = 9 * MIB + 5 };
    mkv_client *tcp = NULL;
    ASSERT_EQ(h_mkv_connect(&tcp, master_addr, "tcp", 0), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(tcp, src, BIG), MKV_OK);
    ASSERT_EQ(mkv_register_buffer(tcp, dst, BIG), MKV_OK);
    mkv_obj objs[N];
    char keys[N][32];
    h_fill(src, N * SIZE, 15);
    for (int i = 0; i < N; i++) {
        key_of(keys[i], sizeof keys[i], "sliced", (unsigned)i);
        objs[i] = (mkv_obj){.key = keys[i], .keylen = strlen(keys[i]), .buf = src + i * SIZE, .len = SIZE - i};
    }
    ASSERT_EQ(mkv_put_batch(tcp, objs, N, 1), MKV_OK);
    for (int i = 0; i < N; i++) ASSERT_EQ(objs[i].status, MKV_OK);
    mkv_client *readers[2] = {tcp, cli};
    for (int r = 0; r < 2; r++) {
        memset(dst, 0, N * SIZE);
        for (int i = 0; i < N; i++) {
            objs[i].buf = dst + i * SIZE;
            objs[i].len = SIZE;
        }
        ASSERT_EQ(mkv_get_batch(readers[r], objs, N), MKV_OK);
        for (int i = 0; i < N; i++) {
            ASSERT_EQ(objs[i].status, MKV_OK);
            ASSERT_EQ(objs[i].len, (size_t)(SIZE - i));
            ASSERT_MEMEQ(src + i * SIZE, dst + i * SIZE, SIZE - i);
        }
    }
    for (int i = 0; i < N; i++) ASSERT_EQ(mkv_remove(tcp, keys[i], strlen(keys[i])), MKV_OK);
    mkv_close(tcp);
}

static void test_noreplicas(void) {
    ASSERT_EQ(mkv_put(cli, "two", 3, src, 100, 2), MKV_ENOREPLICAS);
    ASSERT(strstr(mkv_last_error(cli), "NOREPLICAS") != NULL);
    ASSERT_EQ(mkv_exists(cli, "two", 3), 0);
}

/* Fill the node with 8 MiB objects until NOSPACE; everything stored
 * before stays readable, and the space comes back after removal. */
static void test_nospace(void) {
    enum { CHUNK = 8 * MIB, MAXOBJ = 64 };
    char key[64];
    unsigned n = 0;
    int rc = MKV_OK;
    h_fill(src, BIG, 13);
    for (; n < MAXOBJ; n++) {
        key_of(key, sizeof key, "fill", n);
        rc = mkv_put(cli, key, strlen(key), src + (n % 8) * CHUNK, CHUNK, 1);
        if (rc != MKV_OK) break;
    }
    ASSERT_EQ(rc, MKV_ENOSPACE);
    ASSERT(n > 0);
    ASSERT(strstr(mkv_last_error(cli), "NOSPACE") != NULL);
    ASSERT_EQ(mkv_exists(cli, key, strlen(key)), 0);
    for (unsigned i = 0; i < n; i++) {
        size_t got = 0;
        key_of(key, sizeof key, "fill", i);
        ASSERT_EQ(mkv_get(cli, key, strlen(key), dst, CHUNK, &got), MKV_OK);
        ASSERT_MEMEQ(dst, src + (i % 8) * CHUNK, CHUNK);
    }
    for (unsigned i = 0; i < n; i++) {
        key_of(key, sizeof key, "fill", i);
        ASSERT_EQ(mkv_remove(cli, key, strlen(key)), MKV_OK);
    }
}

int main(void) {
    h_init(80);
    h_setup_or_exit(port0 = h_free_ports(32), "free ports");
    snprintf(master_addr, sizeof master_addr, "127.0.0.1:%d", PORT_MASTER);
    snprintf(nothing_addr, sizeof nothing_addr, "127.0.0.1:%d", PORT_NOTHING);
    pid_t master = h_start_master(PORT_MASTER, NULL);
    if (master < 0) {
        printf("not ok - master did not start\n");
        return 1;
    }
    h_start_node(PORT_MASTER, PORT_NODE, PORT_DATA, "160MB");
    if (h_wait_nodes(PORT_MASTER, "alive", 1, 20000) != 0) {
        printf("not ok - node did not join the master\n");
        return 1;
    }
    RUN_TEST(test_connect_refused);
    RUN_TEST(test_password_refused);
    RUN_TEST(test_readme_example);

    if (h_mkv_connect(&cli, master_addr, NULL, 0) != MKV_OK) {
        printf("not ok - connect: %s\n", mkv_last_error(NULL));
        return 1;
    }
    src = mmap(NULL, 2 * (size_t)BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (src == MAP_FAILED) return 1;
    dst = src + BIG;
    if (mkv_register_buffer(cli, src, BIG) != MKV_OK || mkv_register_buffer(cli, dst, BIG) != MKV_OK) {
        printf("not ok - register: %s\n", mkv_last_error(cli));
        return 1;
    }
    RUN_TEST(test_size_1);
    RUN_TEST(test_size_4k);
    RUN_TEST(test_size_1m);
    RUN_TEST(test_size_1m_plus_3);
    RUN_TEST(test_size_64m);
    RUN_TEST(test_size_zero_refused);
    RUN_TEST(test_bad_arguments);
    RUN_TEST(test_unregistered_refused);
    RUN_TEST(test_too_small);
    RUN_TEST(test_batch_200);
    RUN_TEST(test_batch_mixed);
    RUN_TEST(test_put_batch_mixed);
    RUN_TEST(test_batch_sliced);
    RUN_TEST(test_noreplicas);
    RUN_TEST(test_nospace);

    mkv_close(cli);
    munmap(src, 2 * (size_t)BIG);
    h_kill_all();
    TEST_EXIT();
}
