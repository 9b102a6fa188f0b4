/* node/disk_io.c - see disk_io.h. */
#include "node/disk_io.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/util.h"

/* A batch holds a ring until it completed: several rings, so several
 * callers (a node's offload and its readers) keep the disk busy at once. */
#define DISK_IO_RINGS 8
typedef struct disk_ring {
    pthread_mutex_t mu;
    struct io_uring ring;
} disk_ring;

struct disk_io {
    int fd;
    int direct;
    int uring;                 /* the rings are in use (given up after a failed submit) */
    uint64_t size;
    unsigned next;             /* where a caller starts looking for a free ring */
    int nrings;                /* set up */
    disk_ring rings[DISK_IO_RINGS];
};

int disk_io_parse(const char *s, disk_io_kind *out) {
    if (!strcmp(s, "auto")) *out = DISK_IO_AUTO;
    else if (!strcmp(s, "uring") || !strcmp(s, "io_uring")) *out = DISK_IO_URING;
    else if (!strcmp(s, "plain")) *out = DISK_IO_PLAIN;
    else return -1;
    return 0;
}

/* The file's blocks allocated now; a file system without fallocate gets
 * its zeros written (posix_fallocate does that). */
static int preallocate(int fd, uint64_t size) {
    struct stat st;
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_size == size && (uint64_t)st.st_blocks * 512 >= size) return 0;
    int rc = posix_fallocate(fd, 0, (off_t)size);
    if (rc != 0) { errno = rc; return -1; }
    return 0;
}

static int open_file(disk_io *io, const char *path, disk_io_kind want, char *err, size_t errlen) {
    io->fd = -1;
    if (want != DISK_IO_PLAIN) {
        io->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_DIRECT, 0600);
        if (io->fd >= 0) io->direct = 1;
        else if (errno != EINVAL) goto fail;
        else log_warning("disk: %s refuses O_DIRECT (%s): plain buffered I/O", path, strerror(errno));
    }
    if (io->fd < 0) io->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (io->fd < 0) goto fail;
    if (flock(io->fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, errlen, "%s is in use by another process", path);
        return -1;
    }
    return 0;
fail:
    snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    return -1;
}

disk_io *disk_io_open(const char *path, uint64_t size, disk_io_kind want, char *err, size_t errlen) {
    disk_io *io = xcalloc(1, sizeof *io);
    io->size = size;
    struct stat st;
    int existed = stat(path, &st) == 0;
    if (open_file(io, path, want, err, errlen) != 0) goto fail;
    if (preallocate(io->fd, size) != 0) {
        int e = errno;
        snprintf(err, errlen, "cannot allocate %llu bytes for %s: %s", (unsigned long long)size, path,
                 strerror(e));
        if (!existed) unlink(path);   /* what it did allocate goes back */
        disk_io_close(io);
        errno = e;
        return NULL;
    }
    if (want != DISK_IO_PLAIN && io->direct) {
        int rc = 0;
        while (io->nrings < DISK_IO_RINGS && rc == 0) {
            rc = io_uring_queue_init(DISK_IO_DEPTH, &io->rings[io->nrings].ring, 0);
            if (rc == 0) pthread_mutex_init(&io->rings[io->nrings++].mu, NULL);
        }
        if (io->nrings > 0) io->uring = 1;
        else if (want == DISK_IO_URING) {
            snprintf(err, errlen, "io_uring is not available: %s", strerror(-rc));
            goto fail;
        } else log_warning("disk: io_uring is not available (%s): pread/pwrite", strerror(-rc));
    }
    if (want == DISK_IO_PLAIN) log_notice("disk: plain pread/pwrite as asked (--disk-io plain)");
    return io;
fail:
    disk_io_close(io);
    return NULL;
}

/* A gathered request, plainly: one pwritev/preadv (a short one is -EIO:
 * O_DIRECT on a preallocated file does not make them). */
static int run_plain_iov(disk_io *io, const disk_req *r) {
    ssize_t k;
    do k = r->write ? pwritev(io->fd, r->iov, r->niov, (off_t)r->off) : preadv(io->fd, r->iov, r->niov, (off_t)r->off);
    while (k < 0 && errno == EINTR);
    return k < 0 ? -errno : (size_t)k == r->len ? 0 : -EIO;
}

static int run_plain(disk_io *io, const disk_req *r, size_t n, const disk_io_hooks *h) {
    if (h && h->meanwhile) h->meanwhile(h->ctx);
    for (size_t i = 0; i < n; i++) {
        if (r[i].niov) {
            int rc = run_plain_iov(io, &r[i]);
            if (rc != 0) return rc;
            if (h && h->landed) h->landed(h->ctx, i);
            continue;
        }
        size_t done = 0;
        while (done < r[i].len) {
            char *b = (char *)r[i].buf + done;
            off_t at = (off_t)(r[i].off + done);
            ssize_t k = r[i].write ? pwrite(io->fd, b, r[i].len - done, at) : pread(io->fd, b, r[i].len - done, at);
            if (k < 0 && errno == EINTR) continue;
            if (k < 0) return -errno;
            if (k == 0) return -EIO;
            done += (size_t)k;
        }
        if (h && h->landed) h->landed(h->ctx, i);
    }
    return 0;
}

static void prep(struct io_uring *ring, const disk_req *q, int fd, size_t i) {
    struct io_uring_sqe *s = io_uring_get_sqe(ring);
    if (q->niov && q->write) io_uring_prep_writev(s, fd, q->iov, (unsigned)q->niov, q->off);
    else if (q->niov) io_uring_prep_readv(s, fd, q->iov, (unsigned)q->niov, q->off);
    else if (q->write) io_uring_prep_write(s, fd, q->buf, (unsigned)q->len, q->off);
    else io_uring_prep_read(s, fd, q->buf, (unsigned)q->len, q->off);
    io_uring_sqe_set_data64(s, i);
}

/* Keeps up to DISK_IO_DEPTH requests in flight until all completed. A
 * short transfer is an error (O_DIRECT on a preallocated file does not
 * make them). A ring that cannot submit is given up for pread/pwrite
 * (what is in flight is waited for first: its buffers are the caller's). */
/* A ring no other batch holds, or (all busy) one to wait for. */
static disk_ring *ring_take(disk_io *io) {
    unsigned at = __atomic_fetch_add(&io->next, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < io->nrings; i++) {
        disk_ring *g = &io->rings[(at + (unsigned)i) % (unsigned)io->nrings];
        if (pthread_mutex_trylock(&g->mu) == 0) return g;
    }
    disk_ring *g = &io->rings[at % (unsigned)io->nrings];
    pthread_mutex_lock(&g->mu);
    return g;
}

static int run_uring(disk_io *io, const disk_req *r, size_t n, const disk_io_hooks *h) {
    size_t next = 0, done = 0;
    int first_err = 0, meanwhile = h && h->meanwhile;
    disk_ring *g = ring_take(io);
    struct io_uring *ring = &g->ring;
    while (done < next || (next < n && !first_err)) {
        while (!first_err && next < n && next - done < DISK_IO_DEPTH && io_uring_sq_space_left(ring) > 0) {
            prep(ring, &r[next], io->fd, next);
            next++;
        }
        int rc;
        if (meanwhile && (rc = io_uring_submit(ring)) >= 0) {   /* out: the caller's work while they fly */
            h->meanwhile(h->ctx);
            meanwhile = 0;
        }
        rc = io_uring_submit_and_wait(ring, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
            log_warning("disk: io_uring submit failed (%s): pread/pwrite from now on", strerror(-rc));
            __atomic_store_n(&io->uring, 0, __ATOMIC_RELAXED);
            if (!first_err) first_err = rc;
            if (done == next) break;
        }
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(ring, head, cqe) {
            size_t i = (size_t)io_uring_cqe_get_data64(cqe);
            if (cqe->res < 0 && !first_err) first_err = cqe->res;
            else if (cqe->res >= 0 && (size_t)cqe->res != r[i].len && !first_err) first_err = -EIO;
            else if (!first_err && h && h->landed) h->landed(h->ctx, i);
            seen++;
        }
        io_uring_cq_advance(ring, seen);
        done += seen;
    }
    pthread_mutex_unlock(&g->mu);
    return first_err;
}

int disk_io_run_hooked(disk_io *io, const disk_req *r, size_t n, const disk_io_hooks *h) {
    for (size_t i = 0; i < n; i++)
        if (r[i].off + r[i].len > io->size || r[i].len > (1u << 30)) return -EINVAL;
    return __atomic_load_n(&io->uring, __ATOMIC_RELAXED) ? run_uring(io, r, n, h) : run_plain(io, r, n, h);
}

int disk_io_run(disk_io *io, const disk_req *r, size_t n) { return disk_io_run_hooked(io, r, n, NULL); }

uint64_t disk_io_next_data(disk_io *io, uint64_t off) {
    off_t at = lseek(io->fd, (off_t)off, SEEK_DATA);
    if (at < 0) return errno == ENXIO ? io->size : off;
    uint64_t a = (uint64_t)at & ~(uint64_t)(DISK_IO_ALIGN - 1);
    return a < off ? off : a;
}

const char *disk_io_name(const disk_io *io) {
    return __atomic_load_n(&io->uring, __ATOMIC_RELAXED) ? "uring" : "plain";
}
int disk_io_direct(const disk_io *io) { return io->direct; }
uint64_t disk_io_size(const disk_io *io) { return io->size; }

void disk_io_close(disk_io *io) {
    if (!io) return;
    for (int i = 0; i < io->nrings; i++) {
        io_uring_queue_exit(&io->rings[i].ring);
        pthread_mutex_destroy(&io->rings[i].mu);
    }
    if (io->fd >= 0) close(io->fd);
    free(io);
}
