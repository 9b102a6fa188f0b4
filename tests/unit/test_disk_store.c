/* Unit tests for the node's disk tier store (src/node/disk_store.c):
 * write/read/remove, a restart's scan, a torn record, a bit flip, a full
 * disk, a file of another owner or size, both I/O backends. Files go in
 * a directory under $TMPDIR (or /tmp), removed at the end. */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/cap.h"
#include "core/crc32c.h"
#include "node/disk_store.h"
#include "test.h"

static char dir[256];
static disk_io_kind kind = DISK_IO_URING;
static char name_buf[64];

static disk_store *open_store(uint64_t size, uint64_t tag) {
    disk_store_config c = { .dir = dir, .name = name_buf, .size = size, .io = kind, .tag = tag };
    char err[256] = "";
    disk_store *ds = disk_store_open(&c, err, sizeof err);
    if (!ds) printf("# open: %s\n", err);
    return ds;
}

/* Bytes of a seed, 8 at a time (a byte at a time was most of the time
 * under TSan). */
static void fill(uint8_t *p, size_t n, uint32_t seed) {
    uint64_t x = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    if (i < n) memcpy(p + i, &x, n - i);
}

static int put_val(disk_store *ds, const char *key, size_t len, uint32_t seed) {
    uint8_t *v = malloc(len ? len : 1);
    fill(v, len, seed);
    int rc = disk_store_put(ds, key, strlen(key), v, len, crc32c(0, v, len));
    free(v);
    return rc;
}

/* 1 if key reads back as fill(len, seed). */
static int read_ok(disk_store *ds, const char *key, size_t len, uint32_t seed) {
    uint8_t *got = malloc(len + 1), *want = malloc(len + 1);
    fill(want, len, seed);
    uint64_t n = 0;
    int rc = disk_store_read(ds, key, strlen(key), got, len, &n);
    int ok = rc == 0 && n == len && memcmp(got, want, len) == 0;
    free(got);
    free(want);
    return ok;
}

static void unique_name(const char *what) {
    snprintf(name_buf, sizeof name_buf, "%s-%s.disk", what, kind == DISK_IO_PLAIN ? "plain" : "uring");
}

static void test_put_read_remove(void) {
    unique_name("basic");
    disk_store *ds = open_store(64u << 20, 7);
    ASSERT(ds);
    size_t sizes[] = { 0, 1, 4095, 4096, 4097, 100000, 1u << 20, (1u << 20) + 3, (5u << 20) + 17 };
    char key[32];
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        snprintf(key, sizeof key, "k%zu", i);
        ASSERT_EQ(put_val(ds, key, sizes[i], (uint32_t)i), 0);
    }
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        snprintf(key, sizeof key, "k%zu", i);
        ASSERT_MSG(read_ok(ds, key, sizes[i], (uint32_t)i), "%s of %zu bytes", key, sizes[i]);
    }
    /* An aligned buffer goes straight to the disk and back. */
    uint8_t *a = NULL;
    ASSERT(posix_memalign((void **)&a, 4096, 3u << 20) == 0);
    fill(a, (3u << 20) - 5, 99);
    uint32_t crc = crc32c(0, a, (3u << 20) - 5);
    ASSERT_EQ(disk_store_put(ds, "aligned", 7, a, (3u << 20) - 5, crc), 0);
    memset(a, 0, 3u << 20);
    uint64_t n = 0;
    ASSERT_EQ(disk_store_read(ds, "aligned", 7, a, 3u << 20, &n), 0);
    ASSERT_EQ(n, (3u << 20) - 5);
    ASSERT_EQ(crc32c(0, a, n), crc);
    free(a);
    /* A value whose CRC is not the one given is not kept. */
    uint8_t v[100];
    fill(v, sizeof v, 5);
    ASSERT_EQ(disk_store_put(ds, "liar", 4, v, sizeof v, crc32c(0, v, sizeof v) ^ 1), -EBADMSG);
    ASSERT_EQ(disk_store_stat(ds, "liar", 4, &n, &crc, NULL), -ENOENT);
    /* The same for an aligned value, whose CRC is summed while it is
     * written: its record is wiped, its space given back, no I/O error. */
    uint8_t *al = aligned_alloc(4096, 1u << 20);
    fill(al, 1u << 20, 6);
    disk_store_stats before;
    disk_store_get_stats(ds, &before);
    ASSERT_EQ(disk_store_put(ds, "liar2", 5, al, 1u << 20, crc32c(0, al, 1u << 20) ^ 1), -EBADMSG);
    ASSERT_EQ(disk_store_stat(ds, "liar2", 5, &n, &crc, NULL), -ENOENT);
    disk_store_stats after;
    disk_store_get_stats(ds, &after);
    ASSERT_EQ(after.used, before.used);
    ASSERT_EQ(after.io_errors, 0);
    free(al);
    /* Too small a buffer says how much is needed. */
    ASSERT_EQ(disk_store_read(ds, "k5", 2, v, sizeof v, &n), -ENOBUFS);
    ASSERT_EQ(n, 100000);
    disk_store_stats st;
    disk_store_get_stats(ds, &st);
    ASSERT_EQ(st.objects, 10);
    uint64_t used = st.used;
    ASSERT_EQ(disk_store_remove(ds, "k8", 2), 0);
    ASSERT_EQ(disk_store_remove(ds, "k8", 2), -ENOENT);
    ASSERT_EQ(disk_store_read(ds, "k8", 2, v, sizeof v, &n), -ENOENT);
    disk_store_get_stats(ds, &st);
    ASSERT_EQ(st.objects, 9);
    ASSERT_EQ(used - st.used, 8192 + (5u << 20));   /* header and 5 MiB + 17 in blocks */
    /* A second put of a key replaces the first. */
    ASSERT_EQ(put_val(ds, "k1", 5000, 1234), 0);
    ASSERT(read_ok(ds, "k1", 5000, 1234));
    disk_store_get_stats(ds, &st);
    ASSERT_EQ(st.objects, 9);
    ASSERT(st.reads >= 10 && st.writes >= 11 && st.checksum_errors == 0);
    disk_store_close(ds, 1);
}

/* Closed (or killed: nothing is written at close) and opened again, the
 * file gives back every record; the newer of a key replaced wins. */
static void test_restart(void) {
    unique_name("restart");
    disk_store *ds = open_store(32u << 20, 7);
    ASSERT(ds);
    char key[32];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "obj:%d", i);
        ASSERT_EQ(put_val(ds, key, 1000 + (size_t)i * 7919, (uint32_t)i), 0);
    }
    ASSERT_EQ(disk_store_remove(ds, "obj:3", 5), 0);
    ASSERT_EQ(put_val(ds, "obj:4", 777, 4444), 0);
    disk_store_stats st0;
    disk_store_get_stats(ds, &st0);
    disk_store_close(ds, 0);

    ds = open_store(32u << 20, 7);
    ASSERT(ds);
    disk_store_stats st;
    disk_store_get_stats(ds, &st);
    ASSERT_EQ(st.recovered, 39);
    ASSERT_EQ(st.objects, 39);
    ASSERT_EQ(st.used, st0.used);
    /* Blocks never written are not read (SEEK_DATA): the scan reads
     * about what was written, not the whole file (with O_DIRECT: buffered
     * reads' readahead caches pages that then count as data). */
    if (!strcmp(disk_store_io_name(ds), "uring"))
        ASSERT_MSG(st.scan_bytes <= st0.used + (16u << 20) && st.scan_bytes < (32u << 20), "scanned %llu of %llu used",
               (unsigned long long)st.scan_bytes, (unsigned long long)st0.used);
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "obj:%d", i);
        if (i == 3) { uint64_t n; uint32_t c; ASSERT_EQ(disk_store_stat(ds, key, strlen(key), &n, &c, NULL), -ENOENT); }
        else if (i == 4) ASSERT(read_ok(ds, key, 777, 4444));
        else ASSERT_MSG(read_ok(ds, key, 1000 + (size_t)i * 7919, (uint32_t)i), "%s", key);
    }
    /* New records after the restart do not collide with the old ones. */
    ASSERT_EQ(put_val(ds, "after", 50000, 1), 0);
    ASSERT(read_ok(ds, "obj:39", 1000 + 39 * 7919, 39));
    disk_store_close(ds, 0);
    /* Another owner's tag or another size is refused, the file kept. */
    ASSERT(!open_store(32u << 20, 8));
    ASSERT(!open_store(64u << 20, 7));
    ds = open_store(32u << 20, 7);
    ASSERT(ds);
    disk_store_get_stats(ds, &st);
    ASSERT_EQ(st.objects, 40);
    /* Two processes (here: two opens) cannot share a file. */
    ASSERT(!open_store(32u << 20, 7));
    disk_store_close(ds, 1);
}

/* Where a record of key lies in the file: the offset of its header. */
static long find_record(const char *path, const char *key) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    uint8_t b[4096];
    long at = 0, found = -1;
    while (fread(b, 1, sizeof b, f) == sizeof b) {
        if (!memcmp(b, "MKVDREC1", 8) && !memcmp(b + 48, key, strlen(key)) &&
            b[36] == strlen(key)) { found = at; break; }
        at += 4096;
    }
    fclose(f);
    return found;
}

static void poke(const char *path, long off, uint8_t xor_with) {
    int fd = open(path, O_RDWR);
    uint8_t c;
    if (pread(fd, &c, 1, off) != 1) c = 0;
    c ^= xor_with;
    if (pwrite(fd, &c, 1, off) != 1) perror("pwrite");
    close(fd);
}

/* A bit flipped in a value while the node was down: the record is
 * dropped at the scan, its neighbours kept. A bit flipped while it runs:
 * the read fails its CRC, the record is dropped, never returned. */
static void test_bit_flip(void) {
    unique_name("flip");
    disk_store *ds = open_store(16u << 20, 1);
    ASSERT(ds);
    char path[512];
    snprintf(path, sizeof path, "%s", disk_store_path(ds));
    ASSERT_EQ(put_val(ds, "a", 300000, 1), 0);
    ASSERT_EQ(put_val(ds, "b", 300000, 2), 0);
    ASSERT_EQ(put_val(ds, "c", 300000, 3), 0);
    long b = find_record(path, "b");
    ASSERT(b > 0);
    /* While running: the flip is seen by the read. */
    poke(path, b + 4096 + 1234, 0x10);
    uint8_t *buf = malloc(300000);
    uint64_t n;
    ASSERT_EQ(disk_store_read(ds, "b", 1, buf, 300000, &n), -EBADMSG);
    ASSERT_EQ(disk_store_read(ds, "b", 1, buf, 300000, &n), -ENOENT);
    disk_store_stats st;
    disk_store_get_stats(ds, &st);
    ASSERT_EQ(st.checksum_errors, 1);
    ASSERT_EQ(st.objects, 2);
    /* While down: the scan drops it. */
    long c = find_record(path, "c");
    ASSERT(c > 0);
    disk_store_close(ds, 0);
    poke(path, c + 4096 + 299999, 0x01);
    ds = open_store(16u << 20, 1);
    ASSERT(ds);
    disk_store_get_stats(ds, &st);
    ASSERT_EQ(st.recovered, 1);
    ASSERT_EQ(st.dropped, 1);
    ASSERT(read_ok(ds, "a", 300000, 1));
    ASSERT_EQ(disk_store_read(ds, "c", 1, buf, 300000, &n), -ENOENT);
    /* A header bit flip too. */
    long a = find_record(path, "a");
    disk_store_close(ds, 0);
    poke(path, a + 20, 0x80);   /* its sequence */
    ds = open_store(16u << 20, 1);
    ASSERT(ds);
    disk_store_get_stats(ds, &st);
    ASSERT_EQ(st.objects, 0);
    free(buf);
    disk_store_close(ds, 1);
}

/* A record cut short (a kill in the middle of its write): its value's
 * tail is what was there before, so it fails its CRC and is dropped. */
static void test_torn(void) {
    unique_name("torn");
    disk_store *ds = open_store(16u << 20, 1);
    ASSERT(ds);
    char path[512];
    snprintf(path, sizeof path, "%s", disk_store_path(ds));
    ASSERT_EQ(put_val(ds, "whole", 200000, 1), 0);
    ASSERT_EQ(put_val(ds, "torn", 2u << 20, 2), 0);
    ASSERT_EQ(put_val(ds, "after", 10000, 3), 0);
    long t = find_record(path, "torn");
    ASSERT(t > 0);
    disk_store_close(ds, 0);
    /* The second half of its value never reached the disk. */
    int fd = open(path, O_RDWR);
    ASSERT(fd >= 0);
    uint8_t *z = calloc(1, 1u << 20);
    ASSERT(pwrite(fd, z, 1u << 20, t + 4096 + (1u << 20)) == 1 << 20);
    close(fd);
    free(z);
    ds = open_store(16u << 20, 1);
    ASSERT(ds);
    disk_store_stats st;
    disk_store_get_stats(ds, &st);
    ASSERT_EQ(st.recovered, 2);
    ASSERT_EQ(st.dropped, 1);
    ASSERT(read_ok(ds, "whole", 200000, 1));
    ASSERT(read_ok(ds, "after", 10000, 3));
    uint64_t n;
    uint32_t c;
    ASSERT_EQ(disk_store_stat(ds, "torn", 4, &n, &c, NULL), -ENOENT);
    /* Its space is free again: a 2 MiB value fits where it was. */
    ASSERT_EQ(put_val(ds, "torn", 2u << 20, 4), 0);
    ASSERT(read_ok(ds, "torn", 2u << 20, 4));
    disk_store_close(ds, 1);
}

/* A full disk refuses with -ENOSPC and takes values again once space is
 * freed; a bytes stored that look like a record do not come back. */
static void test_full(void) {
    unique_name("full");
    disk_store *ds = open_store(4u << 20, 1);
    ASSERT(ds);
    int ok = 0, rc = 0;
    char key[32];
    for (int i = 0; i < 100 && rc == 0; i++) {
        snprintf(key, sizeof key, "f%d", i);
        rc = put_val(ds, key, 300000, (uint32_t)i);
        if (rc == 0) ok++;
    }
    ASSERT_EQ(rc, -ENOSPC);
    ASSERT(ok >= 10 && ok < 14);
    disk_store_stats st;
    disk_store_get_stats(ds, &st);
    ASSERT_EQ(st.nospace, 1);
    ASSERT(st.capacity - st.used < 300000 + 8192);
    ASSERT_EQ(put_val(ds, "big", 5u << 20, 1), -ENOSPC);
    ASSERT_EQ(disk_store_remove(ds, "f0", 2), 0);
    ASSERT_EQ(put_val(ds, "again", 300000, 77), 0);
    ASSERT(read_ok(ds, "again", 300000, 77));
    for (int i = 1; i < ok; i++) {
        snprintf(key, sizeof key, "f%d", i);
        ASSERT(read_ok(ds, key, 300000, (uint32_t)i));
    }
    disk_store_close(ds, 1);
}

/* A disk with no room for the file: open fails with a message. */
static void test_no_room(void) {
    unique_name("huge");
    disk_store_config c = { .dir = dir, .name = name_buf, .size = 1ull << 60, .io = kind, .tag = 1 };
    char err[256] = "";
    disk_store *ds = disk_store_open(&c, err, sizeof err);
    int e = errno;
    ASSERT(!ds);
    ASSERT_MSG(strstr(err, "cannot allocate") != NULL, "%s", err);
    ASSERT_MSG(e == ENOSPC || e == EFBIG, "errno %d", e);
    /* The file made for it is gone again. */
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name_buf);
    ASSERT(access(path, F_OK) != 0);
}


/* Threads putting, reading and removing at once (run under TSan too):
 * every read gives its value whole or a miss, never other bytes. */
static disk_store *conc_ds;
static int conc_bad;
/* Rounds per thread: fewer under the sanitizers (the SAN and TSan runs
 * of make test), whose slowdown is not what this case measures. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define CONC_ROUNDS 24
#else
#define CONC_ROUNDS 60
#endif

static void *conc_worker(void *arg) {
    int t = (int)(intptr_t)arg;
    char key[32];
    for (int i = 0; i < CONC_ROUNDS; i++) {
        snprintf(key, sizeof key, "t%d:%d", t, i % 6);
        size_t len = 70000 + (size_t)(i % 6) * 40000;
        int rc = put_val(conc_ds, key, len, (uint32_t)(i % 6 + t * 100));
        if (rc != 0 && rc != -ENOSPC) __atomic_add_fetch(&conc_bad, 1, __ATOMIC_RELAXED);
        snprintf(key, sizeof key, "shared:%d", i % 4);
        uint8_t *buf = malloc(1u << 20);
        uint64_t n = 0;
        rc = disk_store_read(conc_ds, key, strlen(key), buf, 1u << 20, &n);
        if (rc == 0 && !read_ok(conc_ds, key, n, (uint32_t)(i % 4))) {
            /* replaced or removed in between is fine; wrong bytes are not */
            uint8_t *want = malloc(n);
            fill(want, n, (uint32_t)(i % 4));
            if (memcmp(buf, want, n) != 0) __atomic_add_fetch(&conc_bad, 1, __ATOMIC_RELAXED);
            free(want);
        } else if (rc != 0 && rc != -ENOENT) __atomic_add_fetch(&conc_bad, 1, __ATOMIC_RELAXED);
        if (t == 0) disk_store_remove(conc_ds, key, strlen(key));
        if (t == 1) put_val(conc_ds, key, 100000 + (size_t)(i % 4) * 1000, (uint32_t)(i % 4));
        free(buf);
    }
    return NULL;
}

static void test_concurrent(void) {
    unique_name("conc");
    conc_ds = open_store(32u << 20, 1);
    ASSERT(conc_ds);
    conc_bad = 0;
    pthread_t th[4];
    for (int t = 0; t < 4; t++) pthread_create(&th[t], NULL, conc_worker, (void *)(intptr_t)t);
    for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
    ASSERT_EQ(conc_bad, 0);
    disk_store_stats st;
    disk_store_get_stats(conc_ds, &st);
    ASSERT_EQ(st.checksum_errors, 0);
    disk_store_close(conc_ds, 0);
    /* What the threads left comes back whole. */
    conc_ds = open_store(32u << 20, 1);
    ASSERT(conc_ds);
    disk_store_stats st2;
    disk_store_get_stats(conc_ds, &st2);
    ASSERT_EQ(st2.objects, st.objects);
    ASSERT_EQ(st2.dropped, 0);
    disk_store_close(conc_ds, 1);
}

/* disk_store_scan in steps of 7 hands every record once (nothing changes
 * between the steps), and its count. */
static void count_key(void *ctx, const void *key, size_t keylen, uint64_t len, uint32_t crc, const disk_obj *of) {
    uint8_t *seen = ctx;
    char k[16] = "";
    memcpy(k, key, keylen < sizeof k - 1 ? keylen : sizeof k - 1);
    int i = atoi(k + 1);
    if (i >= 0 && i < 100 && len == 100 + (uint64_t)i && of->size == len && of->crc == crc) seen[i]++;
}

static void test_scan_steps(void) {
    unique_name("scan");
    disk_store *ds = open_store(16 << 20, 1);
    ASSERT(ds != NULL);
    char key[16];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "s%d", i);
        ASSERT_EQ(put_val(ds, key, 100 + (size_t)i, (uint32_t)i), 0);
    }
    uint8_t seen[100] = {0};
    uint64_t cursor = 0;
    int steps = 0;
    do cursor = disk_store_scan(ds, cursor, 7, count_key, seen), steps++;
    while (cursor && steps < 1000);
    ASSERT_EQ(cursor, 0);
    ASSERT(steps > 1);
    for (int i = 0; i < 100; i++) ASSERT_MSG(seen[i] == 1, "record %d handed %d times", i, seen[i]);
    disk_store_close(ds, 1);
}

/* The store of 16 MB closed and opened again (a node's restart): it, if
 * its scan brought back recovered records and dropped none, else NULL
 * (closed). */
static disk_store *reopened(disk_store *ds, uint64_t recovered) {
    disk_store_close(ds, 0);
    ds = open_store(16 << 20, 1);
    disk_store_stats st;
    if (ds) disk_store_get_stats(ds, &st);
    if (ds && st.recovered == recovered && st.dropped == 0) return ds;
    if (ds) printf("# reopened: %llu recovered, %llu dropped\n", (unsigned long long)st.recovered,
                   (unsigned long long)st.dropped);
    disk_store_close(ds, 0);
    return NULL;
}

/* A node's share of an object striped over nodes: its bytes (CRC32C of
 * their own) with the object's size and CRC beside them, kept across a
 * restart; a whole record beside it still reads as before. */
static void test_share(void) {
    unique_name("share");
    disk_store *ds = open_store(16 << 20, 1);
    ASSERT(ds != NULL);
    const size_t len = 300000 + 17;
    uint8_t *v = malloc(len), *got = malloc(len);
    fill(v, len, 42);
    disk_obj of = {3 * len, 0xfeedbeef, 0, NULL};
    ASSERT_EQ(disk_store_put_share(ds, "striped", 7, v, len, &of), 0);
    ASSERT_EQ(put_val(ds, "whole", 5000, 5), 0);
    disk_obj back = {0, 0, 0, NULL};
    uint64_t n = 0;
    uint32_t crc = 0;
    ASSERT_EQ(disk_store_stat(ds, "striped", 7, &n, &crc, &back), 0);
    ASSERT(n == len && crc == crc32c(0, v, len) && back.size == of.size && back.crc == of.crc);
    ASSERT_EQ(disk_store_put_share(ds, "toolong", 7, v, len, &(disk_obj){len - 1, 1, 0, NULL}), -EINVAL);
    for (int round = 0; round < 2; round++) {   /* as written, then after a restart */
        memset(got, 0, len);
        ASSERT_EQ(disk_store_read(ds, "striped", 7, got, len, &n), 0);
        ASSERT(n == len && memcmp(got, v, len) == 0);
        ASSERT_EQ(disk_store_stat(ds, "striped", 7, &n, &crc, &back), 0);
        ASSERT(back.size == of.size && back.crc == of.crc);
        ASSERT_EQ(disk_store_stat(ds, "whole", 5, &n, &crc, &back), 0);
        ASSERT(back.size == 5000 && back.crc == crc && read_ok(ds, "whole", 5000, 5));
        ASSERT((ds = reopened(ds, 2)) != NULL);
    }
    free(v);
    free(got);
    disk_store_close(ds, 1);
}

/* What a walk hands of the record "pieces": its pieces, copied. */
typedef struct pieces_seen {
    int found;
    disk_obj of;
    disk_piece p[DISK_MAX_PIECES];
} pieces_seen;

static void note_pieces(void *ctx, const void *key, size_t keylen, uint64_t len, uint32_t crc, const disk_obj *of) {
    pieces_seen *s = ctx;
    if (keylen != 6 || memcmp(key, "pieces", 6) != 0) return;
    s->found++;
    s->of = *of;
    memcpy(s->p, of->pieces, of->npieces * sizeof *of->pieces);
}

/* A share that says where its pieces lie in the object (as a node writes
 * it for a master that may have to put the object together again): the
 * pieces come back from a walk, as written and after two restarts, in a
 * header longer than a block (300 pieces); pieces that do not tile the
 * value, or leave the object, are refused. */
static void test_share_pieces(void) {
    unique_name("pieces");
    disk_store *ds = open_store(16 << 20, 1);
    ASSERT(ds != NULL);
    enum { N = 300, UNIT = 1000 };
    const uint64_t len = (uint64_t)N * UNIT;
    uint8_t *v = malloc(len), *got = malloc(len);
    fill(v, len, 7);
    static disk_piece p[N];
    for (int i = 0; i < N; i++) p[i] = (disk_piece){(uint64_t)i * 3 * UNIT + UNIT, UNIT};   /* every third unit */
    disk_obj of = {3ull * N * UNIT, 0xabcdef01, N, p};
    disk_piece bad[2] = {{0, UNIT}, {UNIT / 2, len - UNIT}};   /* overlapping */
    ASSERT_EQ(disk_store_put_share(ds, "bad", 3, v, len, &(disk_obj){of.size, 1, 2, bad}), -EINVAL);
    bad[1] = (disk_piece){of.size - 10, len - UNIT};   /* past the object's end */
    ASSERT_EQ(disk_store_put_share(ds, "bad", 3, v, len, &(disk_obj){of.size, 1, 2, bad}), -EINVAL);
    bad[1] = (disk_piece){UNIT, len - UNIT - 1};   /* one byte short of the value */
    ASSERT_EQ(disk_store_put_share(ds, "bad", 3, v, len, &(disk_obj){of.size, 1, 2, bad}), -EINVAL);
    ASSERT_EQ(disk_store_put_share(ds, "pieces", 6, v, len, &of), 0);
    ASSERT_EQ(put_val(ds, "whole", 5000, 5), 0);
    static pieces_seen seen;
    for (int round = 0; round < 3; round++) {   /* as written, then after each of two restarts */
        memset(&seen, 0, sizeof seen);
        disk_store_walk(ds, note_pieces, &seen);
        ASSERT_EQ(seen.found, 1);
        ASSERT(seen.of.size == of.size && seen.of.crc == of.crc && seen.of.npieces == N);
        ASSERT(memcmp(seen.p, p, sizeof p) == 0);
        uint64_t n = 0;
        ASSERT_EQ(disk_store_read(ds, "pieces", 6, got, len, &n), 0);
        ASSERT(n == len && memcmp(got, v, len) == 0);
        disk_obj st = {0, 0, 0, NULL};
        uint32_t crc = 0;
        ASSERT_EQ(disk_store_stat(ds, "pieces", 6, &n, &crc, &st), 0);
        ASSERT(st.npieces == N && st.pieces == NULL);   /* the count, not the record's memory */
        ASSERT(read_ok(ds, "whole", 5000, 5));
        ASSERT((ds = reopened(ds, 2)) != NULL);
    }
    ASSERT_EQ(disk_store_remove(ds, "pieces", 6), 0);
    free(v);
    free(got);
    disk_store_close(ds, 1);
}

/* What disk_store_read_tagged handed: the bytes at their offsets. */
typedef struct got_pieces {
    uint8_t *buf;
    uint64_t bytes;
    int pieces;
} got_pieces;

static int take_piece(void *ctx, uint64_t at, const void *p, size_t n) {
    got_pieces *g = ctx;
    memcpy(g->buf + at, p, n);
    g->bytes += n;
    g->pieces++;
    return 0;
}

/* A record read by its key tag (a TE_READ_DISK): whole (9 MiB + 5, three
 * pieces) and a part (its piece only); another tag, size or CRC, a
 * share or a removed record is not found; a value flipped while it runs
 * fails its CRC with no last piece handed, the record dropped and its key
 * kept for the master (disk_store_take_rotten); found again after a
 * restart (the tags are indexed by the scan). */
static void test_tagged(void) {
    unique_name("tagged");
    disk_store *ds = open_store(64u << 20, 1);
    ASSERT(ds);
    const size_t len = (9u << 20) + 5;
    uint8_t *want = malloc(len);
    fill(want, len, 7);
    uint32_t crc = crc32c(0, want, len);
    ASSERT_EQ(put_val(ds, "t1", len, 7), 0);
    ASSERT_EQ(put_val(ds, "t2", 4096, 8), 0);
    got_pieces g = {calloc(1, len), 0, 0};
    uint64_t tag = te_cap_disk_tag("t1", 2);
    ASSERT_EQ(disk_store_read_tagged(ds, tag, len, crc, 0, len, take_piece, &g), 0);
    ASSERT(g.bytes == len && g.pieces == 3 && memcmp(g.buf, want, len) == 0);
    memset(g.buf, 0, len);
    g = (got_pieces){g.buf, 0, 0};
    ASSERT_EQ(disk_store_read_tagged(ds, tag, len, crc, (5u << 20) + 3, (5u << 20) + 100, take_piece, &g), 0);
    ASSERT(g.pieces == 1 && g.bytes < DISK_STAGE_BYTES);
    ASSERT(memcmp(g.buf + (5u << 20) + 3, want + (5u << 20) + 3, 97) == 0);
    ASSERT_EQ(disk_store_read_tagged(ds, te_cap_disk_tag("t3", 2), len, crc, 0, len, take_piece, &g), -ENOENT);
    ASSERT_EQ(disk_store_read_tagged(ds, tag, len - 1, crc, 0, len - 1, take_piece, &g), -ENOENT);
    ASSERT_EQ(disk_store_read_tagged(ds, tag, len, crc ^ 1, 0, len, take_piece, &g), -ENOENT);
    ASSERT_EQ(disk_store_read_tagged(ds, tag, len, crc, 0, len + 1, take_piece, &g), -ENOENT);
    disk_obj whole = {len * 2, 99, 0, NULL};
    ASSERT_EQ(disk_store_put_share(ds, "s1", 2, want, len, &whole), 0);
    ASSERT_EQ(disk_store_read_tagged(ds, te_cap_disk_tag("s1", 2), len, crc, 0, len, take_piece, &g), -ENOENT);
    ASSERT_EQ(disk_store_remove(ds, "t2", 2), 0);
    uint8_t small[4096];
    fill(small, sizeof small, 8);
    ASSERT_EQ(disk_store_read_tagged(ds, te_cap_disk_tag("t2", 2), 4096, crc32c(0, small, 4096), 0, 4096,
                                     take_piece, &g), -ENOENT);
    /* across a restart */
    disk_store_close(ds, 0);
    ds = open_store(64u << 20, 1);
    ASSERT(ds);
    g = (got_pieces){g.buf, 0, 0};
    ASSERT_EQ(disk_store_read_tagged(ds, tag, len, crc, 0, len, take_piece, &g), 0);
    ASSERT(g.bytes == len && memcmp(g.buf, want, len) == 0);
    /* damaged while running */
    char path[512];
    snprintf(path, sizeof path, "%s", disk_store_path(ds));
    long at = find_record(path, "t1");
    ASSERT(at > 0);
    poke(path, at + 4096 + (long)(len - 2), 0x04);   /* in the last piece */
    g = (got_pieces){g.buf, 0, 0};
    ASSERT_EQ(disk_store_read_tagged(ds, tag, len, crc, 0, len, take_piece, &g), -EBADMSG);
    ASSERT(g.pieces == 2 && g.bytes == 2 * DISK_STAGE_BYTES);   /* the last one never handed */
    ASSERT_EQ(disk_store_read_tagged(ds, tag, len, crc, 0, len, take_piece, &g), -ENOENT);
    disk_key k[4];
    ASSERT_EQ(disk_store_take_rotten(ds, NULL, 0, k, 4), 1);
    ASSERT(k[0].keylen == 2 && memcmp(k[0].key, "t1", 2) == 0);
    free(k[0].key);
    ASSERT_EQ(disk_store_take_rotten(ds, NULL, 0, k, 4), 0);
    free(g.buf);
    free(want);
    disk_store_close(ds, 1);
}

static void run_all(const char *suffix) {
    static char names[11][64];
    void (*fns[])(void) = { test_put_read_remove, test_restart, test_bit_flip, test_torn,   test_full,
                            test_no_room,         test_concurrent, test_scan_steps, test_share, test_share_pieces,
                            test_tagged };
    const char *base[] = { "put_read_remove", "restart", "bit_flip", "torn", "full", "no_room", "concurrent",
                           "scan_steps", "share", "share_pieces", "tagged" };
    for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) {
        snprintf(names[i], sizeof names[i], "%s/%s", base[i], suffix);
        RUN_TEST_NAMED(fns[i], names[i]);
    }
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/mkv-disk-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return 1;
    kind = DISK_IO_URING;
    run_all("uring");
    kind = DISK_IO_PLAIN;
    run_all("plain");
    /* A failed case leaves its file: the directory goes whole. */
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (strstr(dir, "/mkv-disk-") && system(cmd) != 0) printf("# cannot remove %s\n", dir);
    TEST_EXIT();
}
