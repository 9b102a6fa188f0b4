/* backend/netio.c - see netio.h. */
#include "backend/netio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/anet.h"
#include "core/util.h"

uint64_t te_deadline(int ms) {
    return mono_ms() + (uint64_t)(ms > 0 ? ms : 0);
}

int te_wait_fd(int fd, short events, uint64_t deadline_ms) {
    for (;;) {
        int wait = -1;
        if (deadline_ms) {
            uint64_t now = mono_ms();
            if (now >= deadline_ms) { errno = ETIMEDOUT; return -1; }
            wait = (int)(deadline_ms - now);
        }
        struct pollfd p = { .fd = fd, .events = events };
        int rc = poll(&p, 1, wait);
        if (rc > 0) return 0;   /* readable, writable or error: the syscall tells */
        if (rc < 0 && errno != EINTR) return -1;
    }
}

int te_iov_advance(struct iovec *iov, int iovcnt, size_t n) {
    int i = 0;
    while (i < iovcnt && n >= iov[i].iov_len) { n -= iov[i].iov_len; iov[i].iov_len = 0; i++; }
    if (i < iovcnt && n) {
        iov[i].iov_base = (char *)iov[i].iov_base + n;
        iov[i].iov_len -= n;
    }
    return i;
}

int te_read_full(int fd, void *buf, size_t n, uint64_t deadline_ms) {
    char *p = buf;
    while (n) {
        /* MSG_DONTWAIT: a blocking fd must not sleep past the deadline. */
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r < 0 && errno == ENOTSOCK) {
            if (te_wait_fd(fd, POLLIN, deadline_ms) < 0) return -1;
            r = read(fd, p, n);
        }
        if (r > 0) { p += r; n -= (size_t)r; continue; }
        if (r == 0) { errno = EPIPE; return -1; }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        if (te_wait_fd(fd, POLLIN, deadline_ms) < 0) return -1;
    }
    return 0;
}

int te_writev_full(int fd, struct iovec *iov, int iovcnt, uint64_t deadline_ms) {
    int first = te_iov_advance(iov, iovcnt, 0);
    while (first < iovcnt) {
        /* sendmsg rather than writev: MSG_NOSIGNAL turns a dead peer into
         * EPIPE instead of killing the process, MSG_DONTWAIT keeps the
         * deadline on blocking fds. */
        struct msghdr m = { .msg_iov = iov + first,
                            .msg_iovlen = (size_t)(iovcnt - first < IOV_MAX ? iovcnt - first : IOV_MAX) };
        ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == ENOTSOCK) {
            if (te_wait_fd(fd, POLLOUT, deadline_ms) < 0) return -1;
            w = writev(fd, iov + first, iovcnt - first);
        }
        if (w >= 0) { first += te_iov_advance(iov + first, iovcnt - first, (size_t)w); continue; }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        if (te_wait_fd(fd, POLLOUT, deadline_ms) < 0) return -1;
    }
    return 0;
}

int te_write_full(int fd, const void *buf, size_t n, uint64_t deadline_ms) {
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = n };
    return te_writev_full(fd, &iov, 1, deadline_ms);
}

int te_set_nonblock(int fd, int on) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) return -1;
    fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
    return fcntl(fd, F_SETFL, fl);
}

int te_unix_addr(const char *addr, struct sockaddr_un *sa, unsigned *salen) {
    if (strncmp(addr, "unix:", 5) != 0) return -1;
    const char *path = addr + 5;
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof sa->sun_path) return -1;
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, path, n);
    if (path[0] == '@') sa->sun_path[0] = '\0';     /* abstract namespace */
    *salen = (unsigned)(offsetof(struct sockaddr_un, sun_path) + n);
    return 0;
}

int te_split_hostport(const char *s, char *host, size_t hostlen, int *port) {
    const char *colon = s ? strrchr(s, ':') : NULL;
    if (!colon || colon == s || (size_t)(colon - s) >= hostlen) return -1;
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (errno || *end || end == colon + 1 || p < 0 || p > 65535) return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    *port = (int)p;
    return 0;
}

int te_listen_tcp(const char *addr, int nonblock, int *port, char *why, size_t whylen) {
    char host[256], aerr[ANET_ERR_LEN];
    int p;
    if (te_split_hostport(addr, host, sizeof host, &p) != 0) {
        snprintf(why, whylen, "bad address (want host:port)");
        return -1;
    }
    int fd = anet_tcp_server(aerr, host, p, 128, nonblock);
    if (fd == ANET_ERR) {
        snprintf(why, whylen, "%s", aerr);
        return -1;
    }
    *port = p;
    anet_sock_port(aerr, fd, port);
    return fd;
}
