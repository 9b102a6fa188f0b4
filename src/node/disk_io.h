/* node/disk_io.h - block I/O on the disk tier's file, by io_uring or plainly.
 *
 * One file opened with O_DIRECT and driven by an io_uring ring (Debian's
 * liburing): a batch of reads and writes is submitted at once and waited
 * for whole, so a caller gets the queue depth of its batch. Where the
 * ring cannot be set up (a kernel or seccomp policy without io_uring) or
 * the file system refuses O_DIRECT, or when asked (--disk-io plain), the
 * same calls run as pread/pwrite one after another, with one log line
 * saying why. Buffers, offsets and lengths must be DISK_IO_ALIGN aligned
 * (what O_DIRECT wants; the plain backend does not care). Thread-safe:
 * a batch takes one of several rings for itself until it completed. */
#ifndef MKV_NODE_DISK_IO_H
#define MKV_NODE_DISK_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define DISK_IO_ALIGN 4096u
#define DISK_IO_DEPTH 32u    /* requests in flight at once in a batch */

typedef enum disk_io_kind { DISK_IO_AUTO = 0, DISK_IO_URING, DISK_IO_PLAIN } disk_io_kind;

typedef struct disk_io disk_io;

typedef struct disk_req {
    int write;           /* 1: write buf to off, 0: read off into buf */
    void *buf;
    uint64_t off;
    size_t len;
    /* niov > 0: the bytes are these (aligned) pieces, one request
     * (writev/readv), len their sum; buf is not used. */
    const struct iovec *iov;
    int niov;
} disk_req;

/* "auto", "uring", "plain" -> kind; -1 if none of those. */
int disk_io_parse(const char *s, disk_io_kind *out);

/* Opens (creating) the file at path, size bytes long (allocated on the
 * file system now: a full disk fails here, not in a later write). NULL
 * with why in err; errno ENOSPC (or EFBIG) when the file system has no
 * room for it (a file made for it is removed). */
disk_io *disk_io_open(const char *path, uint64_t size, disk_io_kind want, char *err, size_t errlen);
/* Runs every request of r[0..n): 0, or -errno of the first that failed
 * (a short transfer is -EIO). */
int disk_io_run(disk_io *io, const disk_req *r, size_t n);
/* Work a caller overlaps with its batch, in its own thread: meanwhile
 * once, after the first requests went out (a write's CRC pass over the
 * bytes going out), and landed(i) as request i completes (a read's CRC
 * over the bytes that just came in, while the rest are in flight). On
 * the plain backend meanwhile runs first and landed after each request.
 * Either may be NULL. A thread that computed its CRC after the whole
 * batch left the disk idle meanwhile: with a few threads each reading
 * one value, that was a large part of each value's time. */
typedef struct disk_io_hooks {
    void (*meanwhile)(void *ctx);
    void (*landed)(void *ctx, size_t i);
    void *ctx;
} disk_io_hooks;
int disk_io_run_hooked(disk_io *io, const disk_req *r, size_t n, const disk_io_hooks *h);
/* Where the file's next bytes ever written lie, from off on (SEEK_DATA:
 * blocks only allocated read as holes on ext4 and xfs), aligned down to
 * DISK_IO_ALIGN; the file's size when none; off where the file system
 * cannot say. */
uint64_t disk_io_next_data(disk_io *io, uint64_t off);
/* "uring" or "plain"; whether the file is open with O_DIRECT. */
const char *disk_io_name(const disk_io *io);
int disk_io_direct(const disk_io *io);
uint64_t disk_io_size(const disk_io *io);
void disk_io_close(disk_io *io);

#endif
