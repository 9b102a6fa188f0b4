/* node/journal.c - see journal.h. */
#include "node/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/le.h"
#include "core/crc32c.h"
#include "core/log.h"
#include "core/util.h"

#define JR_MAGIC "MKVJRNL1"
#define JR_VERSION 1
#define JR_HDR 64            /* magic | u32 version | u32 0 | u64 generation | ... | u32 crc at 60 */
#define JR_FRAME 12          /* u32 len | u32 crc(len) | u32 crc(note) */
#define JR_MAX_RECORD (1u << 20)   /* a note is far smaller (key, 4096 extents, slice CRCs) */
#define JR_WRITE_AT (1u << 20)     /* appended bytes written out at once past this */
#define JR_MIN_REWRITE (64ull << 20)
#define JR_REWRITE_FACTOR 3        /* the log may grow to this many times the index */

struct node_journal {
    char path[PATH_MAX];
    int fd, tmp_fd;          /* tmp_fd: the snapshot being written, -1 if none */
    uint64_t gen, size;      /* bytes in the file (fd's, or tmp_fd's while rewriting) */
    resp_buf buf;            /* records not written yet */
    int broken;              /* a write failed: the file is marked untrusted, nothing more is written */
    obj_extent *ext;         /* scratch: a record's extents */
    uint32_t *crcs;          /* scratch: its slice CRCs */
    node_journal_stats st;
};

static void header(uint8_t h[JR_HDR], uint64_t gen) {
    memset(h, 0, JR_HDR);
    memcpy(h, JR_MAGIC, 8);
    le_put32(h + 8, JR_VERSION);
    le_put64(h + 16, gen);
    le_put32(h + 60, crc32c(0, h, 60));
}

static int write_all(int fd, const void *p, size_t len) {
    const uint8_t *b = p;
    while (len > 0) {
        ssize_t w = write(fd, b, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        len -= (size_t)w;
    }
    return 0;
}

static node_journal *jr_new(const char *path, uint64_t gen) {
    node_journal *j = xcalloc(1, sizeof *j);
    snprintf(j->path, sizeof j->path, "%s", path);
    j->fd = j->tmp_fd = -1;
    j->gen = gen;
    resp_buf_init(&j->buf);
    j->ext = xmalloc(PROTO_MAX_EXTENTS * sizeof *j->ext);
    j->crcs = xmalloc(PROTO_MAX_SLICES * sizeof *j->crcs);
    return j;
}

/* A fresh file at path (tmp: path.tmp) with the header: its fd, or -1. */
static int open_fresh(const char *path, uint64_t gen) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    uint8_t h[JR_HDR];
    header(h, gen);
    if (fd >= 0 && write_all(fd, h, JR_HDR) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

node_journal *node_journal_create(const char *path, uint64_t gen, char *err, size_t errlen) {
    node_journal *j = jr_new(path, gen);
    j->fd = open_fresh(path, gen);
    if (j->fd < 0) {
        snprintf(err, errlen, "cannot create the index log %s: %s", path, strerror(errno));
        node_journal_free(j);
        return NULL;
    }
    j->size = JR_HDR;
    return j;
}

/* A write failed (the file system is full?): the log no longer says all
 * the index holds, so its header is spoiled (no new block needed) and a
 * restart starts empty rather than trust it. */
static void jr_break(node_journal *j, const char *what) {
    if (j->broken) return;
    log_warning("node: cannot write the index log %s (%s: %s): a restart will start empty", j->path, what,
                strerror(errno));
    j->broken = 1;
    j->st.write_errors++;
    uint8_t h[JR_HDR];
    header(h, 0);
    if (j->fd >= 0 && pwrite(j->fd, h, JR_HDR, 0) != JR_HDR) log_warning("node: and cannot mark it untrusted");
    resp_buf_clear(&j->buf);
}

static void frame(node_journal *j, size_t at) {
    size_t len = j->buf.len - at - JR_FRAME;
    uint8_t *f = (uint8_t *)j->buf.data + at, lb[4];
    le_put32(lb, (uint32_t)len);
    le_put32(f, (uint32_t)len);
    le_put32(f + 4, crc32c(0, lb, 4));
    le_put32(f + 8, crc32c(0, f + JR_FRAME, len));
    j->st.records++;
}

static void spill(node_journal *j) {
    int fd = j->tmp_fd >= 0 ? j->tmp_fd : j->fd;
    if (j->broken || j->buf.len == 0) return;
    if (write_all(fd, j->buf.data, j->buf.len) != 0) {
        jr_break(j, "write");
        return;
    }
    j->size += j->buf.len;
    resp_buf_clear(&j->buf);
}

void node_journal_hold(node_journal *j, const void *key, size_t keylen, uint64_t size, uint32_t crc,
                       uint32_t want, const obj_extent *ext, uint32_t n, const proto_slices_ref *sl) {
    if (j->broken || n == 0 || n > PROTO_MAX_EXTENTS) return;
    for (uint32_t i = 0; i < n; i++) {
        j->ext[i] = ext[i];
        if (ext[i].node == 0) j->ext[i].node = JOURNAL_SELF;
    }
    proto_slices s = {0, 0, j->crcs};
    if (sl && sl->count && sl->count <= PROTO_MAX_SLICES) {
        s.size = sl->size;
        s.count = sl->count;
        for (uint32_t i = 0; i < sl->count; i++) j->crcs[i] = le_get32(sl->crc + 4 * (size_t)i);
    }
    obj_replica rep = {n, j->ext};
    size_t at = j->buf.len;
    resp_buf_append(&j->buf, "\0\0\0\0\0\0\0\0\0\0\0\0", JR_FRAME);
    proto_note_put(&j->buf, 0, key, keylen, size, crc, want, &rep, &s);
    frame(j, at);
    if (j->buf.len >= JR_WRITE_AT) spill(j);
}

void node_journal_drop(node_journal *j, const void *key, size_t keylen) {
    if (j->broken) return;
    size_t at = j->buf.len;
    resp_buf_append(&j->buf, "\0\0\0\0\0\0\0\0\0\0\0\0", JR_FRAME);
    proto_note_put(&j->buf, 1, key, keylen, 0, 0, 0, NULL, NULL);
    frame(j, at);
    if (j->buf.len >= JR_WRITE_AT) spill(j);
}

int node_journal_flush(node_journal *j, uint64_t live_bytes) {
    spill(j);
    uint64_t bound = live_bytes * JR_REWRITE_FACTOR;
    return !j->broken && j->tmp_fd < 0 && j->size > JR_MIN_REWRITE && j->size > bound;
}

static void tmp_path(const node_journal *j, char *out, size_t len) { snprintf(out, len, "%.4000s.tmp", j->path); }

void node_journal_rewrite_begin(node_journal *j) {
    char tmp[PATH_MAX + 8];
    if (j->broken) return;
    spill(j);
    tmp_path(j, tmp, sizeof tmp);
    j->tmp_fd = open_fresh(tmp, j->gen);
    if (j->tmp_fd < 0) {
        jr_break(j, "create a snapshot");
        return;
    }
    j->size = JR_HDR;
}

void node_journal_rewrite_end(node_journal *j) {
    char tmp[PATH_MAX + 8];
    if (j->tmp_fd < 0) return;
    tmp_path(j, tmp, sizeof tmp);
    spill(j);
    if (!j->broken && rename(tmp, j->path) != 0) jr_break(j, "rename the snapshot");
    if (j->broken) {
        close(j->tmp_fd);
        unlink(tmp);
    } else {
        close(j->fd);
        j->fd = j->tmp_fd;
        j->st.rewrites++;
    }
    j->tmp_fd = -1;
}

/* ---- reading back ---- */

/* The records of [p, end): 0 with *good the bytes up to the last whole
 * one, or -1 with why if one is damaged. */
static int replay_records(node_journal *j, const uint8_t *p, const uint8_t *end, node_journal_fn *fn, void *ctx,
                          const uint8_t **good, char *why, size_t whylen) {
    const uint8_t *start = p;
    for (;;) {
        *good = p;
        size_t left = (size_t)(end - p);
        if (left == 0) return 0;
        if (left < JR_FRAME) return 0;   /* a torn frame */
        uint32_t len = le_get32(p);
        if (le_get32(p + 4) != crc32c(0, p, 4) || len > JR_MAX_RECORD || len == 0) {
            snprintf(why, whylen, "a damaged record frame at byte %zu", (size_t)(p - start) + JR_HDR);
            return -1;
        }
        if (left - JR_FRAME < len) return 0;   /* torn: the frame is whole, its note is not */
        const uint8_t *note = p + JR_FRAME, *q = note;
        proto_note n;
        if (le_get32(p + 8) != crc32c(0, note, len) || proto_note_next(&q, note + len, j->ext, &n) != 0 ||
            q != note + len) {
            snprintf(why, whylen, "a damaged record at byte %zu", (size_t)(p - start) + JR_HDR);
            return -1;
        }
        fn(ctx, &n);
        j->st.records++;
        p = note + len;
    }
}

node_journal *node_journal_replay(const char *path, uint64_t gen, node_journal_fn *fn, void *ctx,
                                  uint64_t *cut_bytes, char *why, size_t whylen) {
    *cut_bytes = 0;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(why, whylen, "no index log %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    uint8_t want[JR_HDR];
    header(want, gen);
    size_t len = (size_t)sb.st_size;
    const uint8_t *map = len ? mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (map == MAP_FAILED || len < JR_HDR || memcmp(map, want, JR_HDR) != 0) {
        snprintf(why, whylen, "the index log %s %s", path,
                 map == MAP_FAILED || len < JR_HDR ? "is cut short" : "is of another segment file or was marked untrusted");
        if (map != MAP_FAILED) munmap((void *)map, len);
        close(fd);
        return NULL;
    }
    node_journal *j = jr_new(path, gen);
    j->fd = fd;
    const uint8_t *good;
    int rc = replay_records(j, map + JR_HDR, map + len, fn, ctx, &good, why, whylen);
    fn(ctx, NULL);
    j->size = (uint64_t)(good - map);
    munmap((void *)map, len);
    if (rc != 0) {
        node_journal_free(j);
        return NULL;
    }
    *cut_bytes = len - j->size;
    if ((*cut_bytes && ftruncate(fd, (off_t)j->size) != 0) || lseek(fd, 0, SEEK_END) < 0) {
        snprintf(why, whylen, "cannot cut the index log %s: %s", path, strerror(errno));
        node_journal_free(j);
        return NULL;
    }
    return j;
}

void node_journal_get_stats(const node_journal *j, node_journal_stats *st) {
    *st = j->st;
    st->bytes = j->size + j->buf.len;
}

void node_journal_free(node_journal *j) {
    if (!j) return;
    if (j->tmp_fd >= 0) close(j->tmp_fd);
    if (j->fd >= 0) close(j->fd);
    resp_buf_free(&j->buf);
    free(j->ext);
    free(j->crcs);
    free(j);
}
