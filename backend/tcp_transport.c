/* backend/tcp_transport.c - the TCP client side of the data plane.
 *
 * Each path is a FIFO ring of up to `window` requests: the server answers
 * a connection in order, so the response at the head always belongs to
 * the oldest unanswered request. Sends gather headers and write payloads
 * into one sendmsg straight from the caller's buffers; responses are read
 * header first, then the payload straight into the caller's buffer. A
 * timed-out request leaves the stream in an unknown state (its answer
 * may still arrive into a buffer the caller has reused), so a timeout
 * breaks its path: expired requests complete TE_ETIMEDOUT, the rest TE_EIO.
 * A completion's path pointer is only an identity once the path is
 * closed: do not dereference it then.
 *
 * A caller's buffer the kernel cannot read (send) or write (recv) says
 * EFAULT: that request alone completes TE_EFAULT, the caller's own error,
 * and the rest of its payload moves through a scratch buffer so the
 * stream stays whole and the path, the node and the other requests on it
 * carry on. A write's node gets meaningless bytes in a range the caller
 * then revokes. */
#include "backend/tcp_transport.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/auth.h"
#include "backend/cap.h"
#include "backend/netio.h"
#include "backend/wire.h"
#include "backend/xport_base.h"
#include "core/anet.h"
#include "core/crc32c.h"
#include "core/util.h"

#define SEND_IOV_MAX 256   /* a few segmented requests (33 entries each) per sendmsg */
_Static_assert(TE_REQ_SEGS + 1 <= SEND_IOV_MAX, "a request with every segment fits one sendmsg");
#define SCRATCH_LEN  (64 * 1024)

typedef struct slot {
    te_req req;
    uint64_t seq;             /* cookie on the wire */
    uint64_t deadline_ms;
    int fault;                /* the caller's buffer faulted: completes TE_EFAULT */
    int has_crc;              /* a write whose bytes all went: crc is theirs */
    uint32_t crc;
    uint8_t hdr[TE_WIRE_REQ_LEN];
} slot;

typedef struct tcp_xport tcp_xport;

struct te_path {
    te_link link;             /* first: in tcp_xport.paths */
    tcp_xport *x;
    int fd;
    int broken;
    int want_out;             /* EPOLLOUT armed */
    slot *ring;
    int head, count, nsent;   /* ring[head..head+nsent) fully sent */
    uint64_t send_off;        /* bytes of the first unsent slot already sent */
    uint64_t next_seq;
    uint8_t rx_hdr[TE_WIRE_RESP_LEN];
    size_t rx_hdr_got;
    te_wire_resp rx;          /* decoded once rx_hdr is full */
    uint64_t rx_got;          /* payload bytes of the head read so far */
};

struct tcp_xport {
    te_xport_base b;          /* first: a tcp_xport is a te_transport */
    int epfd;
    char scratch[SCRATCH_LEN];   /* stands in for a faulted buffer; its bytes mean nothing */
};

static tcp_xport *X(te_transport *t) { return (tcp_xport *)t; }

static void cq_push(tcp_xport *x, te_path *p, uint64_t cookie, int status) {
    te_cq_push(&x->b.cq, p, cookie, status);
}

static slot *ring_at(te_path *p, int k) { return &p->ring[(p->head + k) % p->x->b.t.cfg.window]; }

static void pop_head(te_path *p, int status) {
    slot *s = ring_at(p, 0);
    if (s->has_crc && !s->fault && status == TE_OK) te_cq_push_crc(&p->x->b.cq, p, s->req.cookie, status, s->crc);
    else cq_push(p->x, p, s->req.cookie, s->fault ? TE_EFAULT : status);
    p->head = (p->head + 1) % p->x->b.t.cfg.window;
    p->count--;
    p->nsent--;
    p->rx_hdr_got = 0;
    p->rx_got = 0;
}

/* The path is unusable: every request on it completes with `status`,
 * or TE_ETIMEDOUT for those already past their deadline. */
static void path_fail(te_path *p, int status) {
    uint64_t now = mono_ms();
    for (int k = 0; k < p->count; k++) {
        slot *s = ring_at(p, k);
        cq_push(p->x, p, s->req.cookie, s->deadline_ms <= now ? TE_ETIMEDOUT : status);
    }
    p->count = p->nsent = 0;
    p->send_off = 0;
    if (p->fd >= 0) {
        epoll_ctl(p->x->epfd, EPOLL_CTL_DEL, p->fd, NULL);
        close(p->fd);
        p->fd = -1;
    }
    p->broken = 1;
}

static void arm_out(te_path *p, int on) {
    if (p->want_out == on) return;
    struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = p };
    epoll_ctl(p->x->epfd, EPOLL_CTL_MOD, p->fd, &ev);
    p->want_out = on;
}

static uint64_t slot_wire_len(const slot *s) {
    return TE_WIRE_REQ_LEN + (s->req.op == TE_WRITE ? s->req.len : 0);
}

/* Where payload byte got of r lies locally, and how many bytes from there
 * on are contiguous (up to total): in local, or in its segments. */
static void *payload_at(const te_req *r, uint64_t got, uint64_t total, size_t *want) {
    if (!r->niov) {
        *want = (size_t)(total - got);
        return (char *)r->local + got;
    }
    uint64_t at = 0;
    int i = 0;
    while (i < r->niov - 1 && got >= at + r->iov[i].iov_len) at += r->iov[i++].iov_len;
    uint64_t left = at + r->iov[i].iov_len - got;
    *want = (size_t)(left < total - got ? left : total - got);
    return (char *)r->iov[i].iov_base + (got - at);
}

/* A segmented request's payload from byte got on, as an iovec over its
 * segments (at most TE_REQ_SEGS): one recvmsg fills as many as the socket
 * holds, where a recv per segment cost a system call per 16 KiB piece. */
static int payload_iov(const te_req *r, uint64_t got, uint64_t total, struct iovec *iov) {
    uint64_t at = 0;
    int n = 0;
    for (int i = 0; i < r->niov && at < total; at += r->iov[i].iov_len, i++) {
        uint64_t end = at + r->iov[i].iov_len < total ? at + r->iov[i].iov_len : total;
        if (end <= got) continue;
        uint64_t from = got > at ? got : at;
        iov[n++] = (struct iovec){(char *)r->iov[i].iov_base + (from - at), (size_t)(end - from)};
    }
    return n;
}

/* What is left to send of the first unsent request alone: its header,
 * and its payload, from scratch once the caller's buffer faulted. */
static int head_iov(te_path *p, struct iovec *iov) {
    slot *s = ring_at(p, p->nsent);
    uint64_t off = p->send_off, done = off > TE_WIRE_REQ_LEN ? off - TE_WIRE_REQ_LEN : 0;
    int n = 0;
    if (off < TE_WIRE_REQ_LEN) iov[n++] = (struct iovec){ s->hdr + off, TE_WIRE_REQ_LEN - off };
    if (s->req.op != TE_WRITE || done >= s->req.len) return n;
    uint64_t left = s->req.len - done;
    if (s->fault) {
        iov[n++] = (struct iovec){ p->x->scratch, left < SCRATCH_LEN ? left : SCRATCH_LEN };
    } else {
        for (uint64_t at = done; at < s->req.len;) {   /* the payload from done on, segment by segment */
            size_t want;
            void *src = payload_at(&s->req, at, s->req.len, &want);
            iov[n++] = (struct iovec){ src, want };
            at += want;
        }
    }
    return n;
}

/* A write whose bytes have all gone into the socket is checksummed at
 * once, while the kernel's copy left them in cache (the client then needs
 * no pass of its own over memory long evicted: a batch of 128 x 512 KiB
 * summed after the transfer read 64 MiB again). Only then: the kernel
 * read them, so they are readable (a buffer gone bad is the caller's
 * EFAULT, not a crash here). */
static void sent_whole(slot *s) {
    if (s->req.op != TE_WRITE || s->fault) return;
    s->crc = s->req.niov ? crc32c_sumv(0, s->req.iov, s->req.niov) : crc32c(0, s->req.local, s->req.len);
    s->has_crc = 1;
}

/* Send as much of the unsent requests as the socket takes. -1: broken.
 * EFAULT (a copy failed before any byte went) may come from a later
 * request's buffer in the same copy, so the first unsent request is then
 * sent alone: if it faults too, its buffer is the bad one. */
static int path_flush(te_path *p) {
    int alone = 0;
    while (p->nsent < p->count) {
        struct iovec iov[SEND_IOV_MAX];
        int n = 0, first = 0;
        if (alone || ring_at(p, p->nsent)->fault) {
            n = head_iov(p, iov);
        } else {
            for (int k = p->nsent; k < p->count; k++) {
                slot *s = ring_at(p, k);
                int segs = s->req.op != TE_WRITE ? 0 : s->req.niov ? s->req.niov : 1;
                if (n + 1 + segs > SEND_IOV_MAX) break;   /* TE_REQ_SEGS + 1 always fits */
                iov[n++] = (struct iovec){ s->hdr, TE_WIRE_REQ_LEN };
                if (segs && !s->req.niov) iov[n++] = (struct iovec){ s->req.local, s->req.len };
                for (int i = 0; i < segs && s->req.niov; i++) iov[n++] = s->req.iov[i];
            }
            first = te_iov_advance(iov, n, p->send_off);
        }
        struct msghdr m = { .msg_iov = iov + first, .msg_iovlen = (size_t)(n - first) };
        ssize_t w = sendmsg(p->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            slot *h = ring_at(p, p->nsent);
            if (errno == EFAULT && !h->fault) {
                if (alone) h->fault = 1;
                alone = 1;
                continue;
            }
            return -1;
        }
        alone = 0;
        uint64_t left = (uint64_t)w;
        while (left && p->nsent < p->count) {
            uint64_t rem = slot_wire_len(ring_at(p, p->nsent)) - p->send_off;
            if (left < rem) { p->send_off += left; left = 0; break; }
            left -= rem;
            p->send_off = 0;
            sent_whole(ring_at(p, p->nsent++));
        }
    }
    arm_out(p, p->nsent < p->count);
    return 0;
}

/* Check a complete response header against the request it answers. */
static int rx_header_ok(te_path *p) {
    if (p->nsent == 0 || te_wire_resp_decode(&p->rx, p->rx_hdr) != 0) return 0;
    slot *s = ring_at(p, 0);
    if (p->rx.cookie != s->seq) return 0;
    uint64_t want = p->rx.status == TE_OK && s->req.op != TE_WRITE ? s->req.len : 0;
    return p->rx.len == want;
}

/* Read responses until the socket runs dry. -1: broken. */
static int path_read(te_path *p) {
    for (;;) {
        void *dst;
        size_t want;
        struct iovec segs[TE_REQ_SEGS];
        int nsegs = 0;
        if (p->rx_hdr_got < TE_WIRE_RESP_LEN) {
            dst = p->rx_hdr + p->rx_hdr_got;
            want = TE_WIRE_RESP_LEN - p->rx_hdr_got;
        } else {
            slot *h = ring_at(p, 0);
            uint64_t left = p->rx.len - p->rx_got;
            if (h->fault) {
                dst = p->x->scratch;
                want = (size_t)(left > SCRATCH_LEN ? SCRATCH_LEN : left);
            } else {
                dst = payload_at(&h->req, p->rx_got, p->rx.len, &want);
                if (h->req.niov > 1 && want < left) nsegs = payload_iov(&h->req, p->rx_got, p->rx.len, segs);
            }
        }
        struct msghdr m = {.msg_iov = segs, .msg_iovlen = (size_t)nsegs};
        ssize_t r = nsegs ? recvmsg(p->fd, &m, MSG_DONTWAIT) : want ? recv(p->fd, dst, want, MSG_DONTWAIT) : 0;
        if (r == 0 && want) return -1;
        if (r < 0) {
            if (errno == EINTR) continue;
            if (errno == EFAULT && p->rx_hdr_got == TE_WIRE_RESP_LEN && !ring_at(p, 0)->fault) {
                ring_at(p, 0)->fault = 1;   /* the caller's buffer: drain the rest into scratch */
                continue;
            }
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        if (p->rx_hdr_got < TE_WIRE_RESP_LEN) {
            p->rx_hdr_got += (size_t)r;
            if (p->rx_hdr_got < TE_WIRE_RESP_LEN) continue;
            if (!rx_header_ok(p)) return -1;
        } else {
            p->rx_got += (uint64_t)r;
        }
        if (p->rx_got == p->rx.len) pop_head(p, p->rx.status);
    }
}

static int tcp_submit(te_path *p, const te_req *reqs, int n) {
    tcp_xport *x = p->x;
    if (p->broken) return -1;
    int accepted = 0;
    uint64_t dl = te_deadline(x->b.t.cfg.timeout_ms);
    for (; accepted < n; accepted++) {
        const te_req *r = &reqs[accepted];
        if (!r->cap || r->len == 0 || r->len > TE_WIRE_MAX_LEN ||
            (r->op != TE_READ && r->op != TE_WRITE && r->op != TE_READ_DISK) || !te_mr_list_covers_req(&x->b.mrs, r)) {
            cq_push(x, p, r->cookie, TE_EINVAL);   /* refused here, costs no slot */
            continue;
        }
        if (p->count == x->b.t.cfg.window) break;
        slot *s = ring_at(p, p->count++);
        s->req = *r;
        s->seq = p->next_seq++;
        s->deadline_ms = dl;
        s->fault = 0;
        s->has_crc = 0;
        te_wire_req wr = { .op = r->op, .cookie = s->seq, .remote_off = r->remote_off, .len = r->len };
        te_cap_encode(r->cap, wr.cap);
        te_wire_req_encode(&wr, s->hdr);
    }
    if (path_flush(p) < 0) path_fail(p, TE_EIO);
    return accepted;
}

static void check_timeouts(tcp_xport *x) {
    uint64_t now = mono_ms();
    for (te_link *l = x->b.paths; l; l = l->next) {
        te_path *p = (te_path *)l;
        if (!p->broken && p->count && ring_at(p, 0)->deadline_ms <= now) path_fail(p, TE_EIO);
    }
}

static int next_deadline_wait(tcp_xport *x, int wait) {
    uint64_t now = mono_ms();
    for (te_link *l = x->b.paths; l; l = l->next) {
        te_path *p = (te_path *)l;
        if (p->broken || !p->count) continue;
        uint64_t d = ring_at(p, 0)->deadline_ms;
        int left = d > now ? (int)(d - now) : 0;
        if (wait < 0 || left < wait) wait = left;
    }
    return wait;
}

static int tcp_poll(te_transport *t, te_cqe *out, int max, int timeout_ms) {
    tcp_xport *x = X(t);
    uint64_t until = mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        int n = te_cq_pop(&x->b.cq, out, max);
        if (n) return n;
        uint64_t now = mono_ms();
        int wait = now < until ? (int)(until - now) : 0;
        wait = next_deadline_wait(x, wait);
        struct epoll_event ev[64];
        int ne = epoll_wait(x->epfd, ev, 64, wait);
        for (int i = 0; i < ne; i++) {
            te_path *p = ev[i].data.ptr;
            if (p->broken) continue;
            int bad = (ev[i].events & EPOLLIN) && path_read(p) < 0;
            if (!bad && (ev[i].events & EPOLLOUT)) bad = path_flush(p) < 0;
            if (!bad && (ev[i].events & (EPOLLERR | EPOLLHUP)) && !(ev[i].events & EPOLLIN)) bad = 1;
            if (bad) path_fail(p, TE_EIO);
        }
        check_timeouts(x);
        if (te_cq_empty(&x->b.cq) && mono_ms() >= until) return 0;
    }
}

/* Receive buffers: setting SO_RCVBUF turns off Linux's autotuning, which
 * grows further (tcp_rmem max) than rmem_max usually allows, so only ask
 * when the system lets us have at least what we ask for. */
static void tune_socket(int fd) {
    int want = 8 << 20;
    anet_nodelay(NULL, fd);
    FILE *f = fopen("/proc/sys/net/core/wmem_max", "r");
    long max = 0;
    if (f) { if (fscanf(f, "%ld", &max) != 1) max = 0; fclose(f); }
    if (max >= want) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof want);
}

/* peer is host:port; local a host or host:port to bind first. */
static int connect_fd(const te_config *cfg, const char *local, const char *peer, char *err, size_t errlen) {
    char host[TE_ADDR_LEN], lhost[TE_ADDR_LEN] = "", why[ANET_ERR_LEN];
    int port, lport = 0;
    if (te_split_hostport(peer, host, sizeof host, &port) != 0) {
        snprintf(err, errlen, "bad address '%s' (want host:port)", peer);
        return -1;
    }
    if (local && *local && te_split_hostport(local, lhost, sizeof lhost, &lport) != 0) {
        if (strlen(local) >= sizeof lhost) {
            snprintf(err, errlen, "bad address '%s' (want host:port)", local);
            return -1;
        }
        snprintf(lhost, sizeof lhost, "%s", local);
    }
    int fd = anet_tcp_connect(why, host, port, lhost, lport, cfg->connect_timeout_ms);
    if (fd == ANET_ERR) {
        snprintf(err, errlen, "connect %s: %s", peer, why);
        return -1;
    }
    tune_socket(fd);
    return fd;
}

static int tcp_connect(te_transport *t, const char *local, const char *peer, te_path **out,
                       char *err, size_t errlen) {
    tcp_xport *x = X(t);
    char why[160];
    int fd = connect_fd(&t->cfg, local, peer, err, errlen);
    if (fd < 0) return -1;
    int auth = te_auth_client(fd, t->cfg.secret, t->cfg.connect_timeout_ms, why, sizeof why);
    if (auth != TE_AUTH_OK) {
        snprintf(err, errlen, "%s: %s", peer, why);
        close(fd);
        return auth == TE_AUTH_REFUSED ? TE_EAUTH : -1;   /* the engine does not blame the node */
    }
    te_path *p = xcalloc(1, sizeof *p);
    p->x = x;
    p->fd = fd;
    p->ring = xcalloc((size_t)t->cfg.window, sizeof *p->ring);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = p };
    epoll_ctl(x->epfd, EPOLL_CTL_ADD, fd, &ev);
    te_link_push(&x->b.paths, &p->link);
    *out = p;
    return 0;
}

static void tcp_close(te_path *p) {
    tcp_xport *x = p->x;
    if (!p->broken) path_fail(p, TE_ECLOSED);
    te_link_remove(&x->b.paths, &p->link);
    free(p->ring);
    free(p);
}

static void tcp_destroy(te_transport *t) {
    tcp_xport *x = X(t);
    te_xport_base_clear(&x->b, tcp_close);
    close(x->epfd);
    free(x);
}

static const te_transport_ops tcp_ops = {
    .name = "tcp", .scheme = NULL /* plain host:port */, .segments = 1, .disk_reads = 1, .connect = tcp_connect,
    .reg_mem = te_xport_reg_mem, .dereg_mem = te_xport_dereg_mem, .submit = tcp_submit, .poll = tcp_poll, .close = tcp_close, .destroy = tcp_destroy,
};

te_transport *te_tcp_create(const te_config *cfg, char *err, size_t errlen) {
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) { snprintf(err, errlen, "epoll: %s", strerror(errno)); return NULL; }
    tcp_xport *x = xcalloc(1, sizeof *x);
    te_xport_base_init(&x->b, &tcp_ops, cfg);
    x->epfd = epfd;
    return &x->b.t;
}
