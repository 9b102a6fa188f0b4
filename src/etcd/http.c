/* etcd/http.c - see http.h. */
#include "etcd/http.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/anet.h"
#include "core/util.h"

/* Wait for fd to be ready for events until deadline; 0 ready, -1 timeout/error. */
static int wait_fd(int fd, short events, uint64_t deadline) {
    for (;;) {
        uint64_t now = mono_ms();
        if (now >= deadline) return -1;
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, (int)(deadline - now));
        if (n > 0) return 0;
        if (n < 0 && errno != EINTR) return -1;
    }
}

static int send_all(int fd, const char *p, size_t len, uint64_t deadline) {
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            return -1;
        } else if (wait_fd(fd, POLLOUT, deadline) != 0) {
            return -1;
        }
    }
    return 0;
}

/* The end of the headers ("\r\n\r\n"), or NULL. */
static char *headers_end(char *buf, size_t len) {
    return memmem(buf, len, "\r\n\r\n", 4);
}

/* The value of header name inside [hdr, end), or NULL. */
static const char *header(const char *hdr, const char *end, const char *name) {
    size_t nl = strlen(name);
    for (const char *line = hdr; line < end;) {
        const char *eol = memmem(line, (size_t)(end - line), "\r\n", 2);
        if (!eol) eol = end;
        if ((size_t)(eol - line) > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (v < eol && *v == ' ') v++;
            return v;
        }
        line = eol + 2;
    }
    return NULL;
}

long http_dechunk(char *buf, size_t len) {
    size_t in = 0, out = 0;
    for (;;) {
        char *eol = memmem(buf + in, len - in, "\r\n", 2);
        if (!eol) return -1;
        char *endp;
        unsigned long n = strtoul(buf + in, &endp, 16);
        if (endp == buf + in) return -1;
        in = (size_t)(eol - buf) + 2;
        if (n == 0) return (long)out;
        if (n > len - in || len - in - n < 2) return -1;
        memmove(buf + out, buf + in, n);
        out += n;
        in += n + 2;
    }
}

/* Read the reply into buf (cap bytes) until EOF or its Content-Length. */
static long read_reply(int fd, char *buf, size_t cap, uint64_t deadline) {
    size_t len = 0;
    long want = -1;   /* total bytes once Content-Length is known */
    for (;;) {
        if (want >= 0 && len >= (size_t)want) return (long)len;
        if (len == cap) return -1;
        ssize_t n = read(fd, buf + len, cap - len);
        if (n == 0) return (long)len;
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR) return -1;
            if (wait_fd(fd, POLLIN, deadline) != 0) return -1;
            continue;
        }
        len += (size_t)n;
        char *he = want < 0 ? headers_end(buf, len) : NULL;
        if (he) {
            const char *cl = header(buf, he, "Content-Length");
            if (cl) want = (long)(he + 4 - buf) + strtol(cl, NULL, 10);
        }
    }
}

int http_post(const char *host, int port, const char *path, const char *body, int timeout_ms,
              size_t maxlen, int *status, char **out, size_t *outlen, char *err, size_t errlen) {
    uint64_t deadline = mono_ms() + (uint64_t)timeout_ms;
    char aerr[ANET_ERR_LEN];
    int fd = anet_tcp_connect(aerr, host, port, NULL, 0, timeout_ms);
    if (fd < 0) {
        snprintf(err, errlen, "connect %s:%d: %s", host, port, aerr);
        return -1;
    }
    size_t blen = strlen(body);
    char head[512];
    int hl = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      path, host, port, blen);
    size_t cap = maxlen + 4096;   /* room for the headers */
    char *buf = NULL;
    int rc = -1;
    if (hl < 0 || (size_t)hl >= sizeof head) {
        snprintf(err, errlen, "request line too long");
        goto done;
    }
    if (send_all(fd, head, (size_t)hl, deadline) != 0 || send_all(fd, body, blen, deadline) != 0) {
        snprintf(err, errlen, "%s:%d: send failed or timed out", host, port);
        goto done;
    }
    buf = xmalloc(cap + 1);
    long n = read_reply(fd, buf, cap, deadline);
    char *he = n > 0 ? headers_end(buf, (size_t)n) : NULL;
    if (!he || sscanf(buf, "HTTP/1.%*d %d", status) != 1) {
        snprintf(err, errlen, "%s:%d: %s", host, port,
                 n < 0 ? "no complete reply in time (or too large)" : "malformed HTTP reply");
        goto done;
    }
    char *bstart = he + 4;
    size_t bl = (size_t)(buf + n - bstart);
    const char *te = header(buf, he, "Transfer-Encoding");
    if (te && strncasecmp(te, "chunked", 7) == 0) {
        long dl = http_dechunk(bstart, bl);
        if (dl < 0) {
            snprintf(err, errlen, "%s:%d: malformed chunked body", host, port);
            goto done;
        }
        bl = (size_t)dl;
    }
    if (bl > maxlen) {
        snprintf(err, errlen, "%s:%d: reply larger than %zu bytes", host, port, maxlen);
        goto done;
    }
    memmove(buf, bstart, bl);
    buf[bl] = '\0';
    *out = buf;
    *outlen = bl;
    buf = NULL;
    rc = 0;
done:
    free(buf);
    close(fd);
    return rc;
}
