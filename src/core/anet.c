/* core/anet.c - see anet.h. */
#include "core/anet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int fail(char *err, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, ANET_ERR_LEN, fmt, ap);
        va_end(ap);
    }
    return ANET_ERR;
}

static int fail_errno(char *err) { return fail(err, "%s", strerror(errno)); }

static void close_keep_errno(int fd) {
    int e = errno;
    close(fd);
    errno = e;
}

static int resolve(char *err, const char *host, int port, int passive, struct addrinfo **res) {
    if (port < 0 || port > 65535) return fail(err, "bad port %d", port);
    char pstr[8];
    snprintf(pstr, sizeof pstr, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)};
    int rc = getaddrinfo(host, pstr, &hints, res);
    if (rc != 0) return fail(err, "%s", rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    return ANET_OK;
}

/* ---- listeners ---- */

static int listen_one(const struct addrinfo *ai, int backlog, int nonblock) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0),
                    ai->ai_protocol);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, backlog) < 0) {
        close_keep_errno(fd);
        return -1;
    }
    return fd;
}

int anet_tcp_server(char *err, const char *host, int port, int backlog, int nonblock) {
    struct addrinfo *res;
    if (resolve(err, host, port, 1, &res) != ANET_OK) return ANET_ERR;
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) fd = listen_one(ai, backlog, nonblock);
    if (fd < 0) fail_errno(err);
    freeaddrinfo(res);
    return fd < 0 ? ANET_ERR : fd;
}

/* path, or "@name" for the abstract namespace (no file). */
static int unix_addr(char *err, const char *path, struct sockaddr_un *sa, socklen_t *len) {
    size_t n = path ? strlen(path) : 0;
    if (n == 0 || n >= sizeof sa->sun_path) return fail(err, "bad unix socket path");
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, path, n);
    if (path[0] == '@') sa->sun_path[0] = '\0';
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    return ANET_OK;
}

int anet_unix_server(char *err, const char *path, int backlog) {
    struct sockaddr_un sa;
    socklen_t sl;
    if (unix_addr(err, path, &sa, &sl) != ANET_OK) return ANET_ERR;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail_errno(err);
    if (path[0] != '@') unlink(path);
    /* Private from the start: no moment when others may connect. */
    mode_t old = umask(077);
    int rc = bind(fd, (struct sockaddr *)&sa, sl);
    umask(old);
    if (rc < 0 || listen(fd, backlog) < 0) {
        fail_errno(err);
        close(fd);
        return ANET_ERR;
    }
    return fd;
}

/* ---- connections ---- */

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for a non-blocking connect; 0, or -1 with errno set. */
static int connect_wait(int fd, long long deadline) {
    for (;;) {
        int wait = -1;
        if (deadline) {
            long long left = deadline - now_ms();
            if (left <= 0) {
                errno = ETIMEDOUT;
                return -1;
            }
            wait = left > 1 << 30 ? 1 << 30 : (int)left;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int n = poll(&p, 1, wait);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) continue;   /* the deadline check above ends it */
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0) return -1;
        if (soerr) {
            errno = soerr;
            return -1;
        }
        return 0;
    }
}

static int connect_one(const struct addrinfo *ai, const struct addrinfo *src, long long deadline,
                       int *bind_failed) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) return -1;
    if (src && bind(fd, src->ai_addr, src->ai_addrlen) < 0) {
        *bind_failed = 1;
        close_keep_errno(fd);
        return -1;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && (errno != EINPROGRESS || connect_wait(fd, deadline) < 0)) {
        close_keep_errno(fd);
        return -1;
    }
    return fd;
}

int anet_tcp_connect(char *err, const char *host, int port, const char *src_host, int src_port,
                     int timeout_ms) {
    struct addrinfo *res, *src = NULL;
    if (resolve(err, host, port, 0, &res) != ANET_OK) return ANET_ERR;
    if (src_host && *src_host && resolve(err, src_host, src_port, 1, &src) != ANET_OK) {
        freeaddrinfo(res);
        return ANET_ERR;
    }
    long long deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
    int fd = -1, bind_failed = 0;
    for (struct addrinfo *ai = res; ai && fd < 0 && !bind_failed; ai = ai->ai_next)
        fd = connect_one(ai, src, deadline, &bind_failed);
    if (fd < 0 && bind_failed) fail(err, "source address: %s", strerror(errno));
    else if (fd < 0) fail_errno(err);
    freeaddrinfo(res);
    if (src) freeaddrinfo(src);
    return fd < 0 ? ANET_ERR : fd;
}

int anet_unix_connect(char *err, const char *path) {
    struct sockaddr_un sa;
    socklen_t sl;
    if (unix_addr(err, path, &sa, &sl) != ANET_OK) return ANET_ERR;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail_errno(err);
    if (connect(fd, (struct sockaddr *)&sa, sl) < 0) {
        fail_errno(err);
        close(fd);
        return ANET_ERR;
    }
    return fd;
}

/* ---- options ---- */

int anet_nonblock(char *err, int fd, int on) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) return fail_errno(err);
    fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
    if (fcntl(fd, F_SETFL, fl) < 0) return fail_errno(err);
    return ANET_OK;
}

static int set_int(char *err, int fd, int level, int opt, int val) {
    if (setsockopt(fd, level, opt, &val, sizeof val) < 0) return fail_errno(err);
    return ANET_OK;
}

int anet_nodelay(char *err, int fd) { return set_int(err, fd, IPPROTO_TCP, TCP_NODELAY, 1); }

int anet_notsent_lowat(char *err, int fd, int bytes) {
    return set_int(err, fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, bytes);
}

int anet_keepalive(char *err, int fd, int interval) {
    if (set_int(err, fd, SOL_SOCKET, SO_KEEPALIVE, 1) != ANET_OK ||
        set_int(err, fd, IPPROTO_TCP, TCP_KEEPIDLE, interval) != ANET_OK)
        return ANET_ERR;
    /* Then a probe every third of it; three unanswered end the connection. */
    int step = interval / 3 > 0 ? interval / 3 : 1;
    if (set_int(err, fd, IPPROTO_TCP, TCP_KEEPINTVL, step) != ANET_OK ||
        set_int(err, fd, IPPROTO_TCP, TCP_KEEPCNT, 3) != ANET_OK)
        return ANET_ERR;
    return ANET_OK;
}

/* ---- names ---- */

static int addr_port(const struct sockaddr_storage *ss) {
    if (ss->ss_family == AF_INET) return ntohs(((const struct sockaddr_in *)ss)->sin_port);
    if (ss->ss_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    return 0;
}

void anet_format_addr(const struct sockaddr_storage *ss, char *buf, size_t len) {
    char ip[INET6_ADDRSTRLEN] = "?";
    if (ss->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, ip, sizeof ip);
    else if (ss->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, ip, sizeof ip);
    snprintf(buf, len, "%s:%d", ip, addr_port(ss));
}

static int name_of(char *err, int fd, int peer, struct sockaddr_storage *ss) {
    socklen_t len = sizeof *ss;
    memset(ss, 0, sizeof *ss);
    int rc = peer ? getpeername(fd, (struct sockaddr *)ss, &len) : getsockname(fd, (struct sockaddr *)ss, &len);
    return rc < 0 ? fail_errno(err) : ANET_OK;
}

int anet_sock_port(char *err, int fd, int *port) {
    struct sockaddr_storage ss;
    if (name_of(err, fd, 0, &ss) != ANET_OK) return ANET_ERR;
    *port = addr_port(&ss);
    return ANET_OK;
}

static int format_name(char *err, int fd, int peer, char *buf, size_t len) {
    struct sockaddr_storage ss;
    if (name_of(err, fd, peer, &ss) != ANET_OK) return ANET_ERR;
    anet_format_addr(&ss, buf, len);
    return ANET_OK;
}

int anet_peer_name(char *err, int fd, char *buf, size_t len) { return format_name(err, fd, 1, buf, len); }

int anet_sock_name(char *err, int fd, char *buf, size_t len) { return format_name(err, fd, 0, buf, len); }
