/* backend/stream_server.c - see stream_server.h. */
#include "backend/stream_server.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "backend/auth.h"
#include "backend/claims.h"
#include "backend/netio.h"
#include "backend/preauth_gate.h"
#include "backend/shares.h"
#include "backend/shm_handoff.h"
#include "backend/wire.h"
#include "core/anet.h"
#include "core/log.h"
#include "core/util.h"

typedef struct conn {
    te_stream_server *srv;
    int fd;
    int listener;             /* index of the listen address it came in on */
    uint64_t ticket;          /* in the gate until authenticated */
    int authed;               /* counted in nauthed */
    pthread_t th;
    int done;                 /* thread finished: join and free */
    struct conn *next;
} conn;

struct te_stream_server {
    te_server_config cfg;
    int lfd[TE_MAX_PATHS + 1];    /* TCP listeners, then the shm socket if any */
    int nlfd;
    int port[TE_MAX_PATHS];
    int wake[2];              /* pipe: tells the acceptor to stop */
    pthread_t acceptor;
    pthread_mutex_t mu;       /* conns list, cap key */
    conn *conns;
    int nconns;
    int nauthed;              /* authenticated connections: at most max_conns */
    te_gate *gate;            /* the unauthenticated ones (preauth_gate.h) */
    int stopping;
    atomic_uint_fast64_t bytes_in, bytes_out, requests, rejected, accepted, auth_fail;
};

static int listen_on(const char *addr, int *port, char *err, size_t errlen) {
    char why[ANET_ERR_LEN];
    int fd = te_listen_tcp(addr, 0, port, why, sizeof why);
    if (fd < 0) snprintf(err, errlen, "listen %s: %s", addr, why);
    return fd;
}

/* The shm hand-off socket: a path (mode 0600, only our user may map the
 * segment) or an abstract name ("@name"). */
static int listen_unix(const char *path, char *err, size_t errlen) {
    char why[ANET_ERR_LEN];
    int fd = anet_unix_server(why, path, 128);
    if (fd == ANET_ERR) {
        snprintf(err, errlen, "shm socket %s: %s", path, why);
        return -1;
    }
    return fd;
}

/* The status a node gives a request header (cap, range, segment bounds):
 * TCP requests and shm verifications alike. */
static int request_check(te_stream_server *s, te_op op, const uint8_t cap_wire[TE_CAP_WIRE_LEN],
                         uint64_t off, uint64_t len) {
    te_cap cap;
    uint8_t key[TE_CAP_KEY_LEN];
    if (len == 0) return TE_EINVAL;
    if (te_cap_decode(&cap, cap_wire, TE_CAP_WIRE_LEN) != 0) return TE_EAUTH;
    if (s->cfg.shares) {
        int st = te_shares_check(s->cfg.shares, &cap, s->cfg.node_id, op, off, len, wall_ms(), NULL);
        if (st != TE_OK) return st;
        return op == TE_WRITE && s->cfg.claims ? te_claims_write(s->cfg.claims, &cap, wall_ms()) : TE_OK;
    }
    pthread_mutex_lock(&s->mu);
    int have = s->cfg.have_cap_key;
    memcpy(key, s->cfg.cap_key, sizeof key);
    uint64_t term = s->cfg.cap_term;
    pthread_mutex_unlock(&s->mu);
    if (!have) return TE_EAUTH;
    int st = te_cap_check(&cap, key, term, s->cfg.node_id, op, off, len, wall_ms());
    if (st != TE_OK || op == TE_READ_DISK) return st;
    if (off > s->cfg.size || len > s->cfg.size - off) return TE_ERANGE;
    if (op == TE_WRITE && s->cfg.claims) return te_claims_write(s->cfg.claims, &cap, wall_ms());
    return TE_OK;
}

/* Read and throw away a refused write's payload so the stream stays in
 * step and the connection keeps serving. */
static int discard(int fd, uint64_t n, uint64_t dl) {
    char junk[16384];
    while (n) {
        size_t k = n < sizeof junk ? (size_t)n : sizeof junk;
        if (te_read_full(fd, junk, k, dl) < 0) return -1;
        n -= k;
    }
    return 0;
}

/* A disk read's answer, sent as the tier hands the record's pieces:
 * object bytes [from, to) of them, after a header at the first piece. */
typedef struct disk_sink {
    te_stream_server *s;
    int fd;
    uint64_t dl, cookie, from, to;
    int started;
} disk_sink;

static int disk_put(void *arg, uint64_t at, const void *buf, size_t n) {
    disk_sink *k = arg;
    uint64_t a = at > k->from ? at : k->from, b = at + n < k->to ? at + n : k->to;
    uint8_t rh[TE_WIRE_RESP_LEN];
    struct iovec iov[2];
    int niov = 0;
    if (!k->started) {
        te_wire_resp resp = { .cookie = k->cookie, .status = TE_OK, .len = k->to - k->from };
        te_wire_resp_encode(&resp, rh);
        iov[niov++] = (struct iovec){ rh, sizeof rh };
        k->started = 1;
    }
    if (a < b) iov[niov++] = (struct iovec){ (char *)buf + (a - at), (size_t)(b - a) };
    if (niov && te_writev_full(k->fd, iov, niov, k->dl) < 0) return -EPIPE;
    if (a < b) atomic_fetch_add(&k->s->bytes_out, b - a);
    return 0;
}

/* TE_READ_DISK: the record the cap names, read from the disk tier (a
 * whole one checked, its CRC32C, before its last bytes go); bytes
 * [remote_off - cap.offset, + len) of it to the reader. A record the
 * tier does not have (or no longer: it failed its CRC) is TE_ERANGE; one
 * that fails after bytes went drops the connection, so the reader never
 * takes them for a whole read. */
static int serve_disk(te_stream_server *s, int fd, const te_wire_req *rq, int st, uint64_t dl) {
    te_cap cap;
    te_cap_decode(&cap, rq->cap, TE_CAP_WIRE_LEN);
    if (st == TE_OK && (!s->cfg.disk || cap.offset > UINT32_MAX)) st = TE_ERANGE;
    disk_sink k = { s, fd, dl, rq->cookie, rq->remote_off - cap.offset, rq->remote_off - cap.offset + rq->len, 0 };
    if (st == TE_OK) {
        int rc = s->cfg.disk->read(s->cfg.disk->ctx, cap.issued_us, cap.length, (uint32_t)cap.offset, k.from, k.to,
                                   disk_put, &k);
        if (rc != 0 && k.started) return -1;
        if (rc != 0) st = TE_ERANGE;
    }
    if (st == TE_OK) return 0;
    atomic_fetch_add(&s->rejected, 1);
    te_wire_resp resp = { .cookie = rq->cookie, .status = st, .len = 0 };
    uint8_t rh[TE_WIRE_RESP_LEN];
    te_wire_resp_encode(&resp, rh);
    struct iovec iov = { rh, sizeof rh };
    return te_writev_full(fd, &iov, 1, dl) < 0 ? -1 : 0;
}

/* A put's bytes into its range of the segment: the connection threads'
 * only write of segment bytes (a get's reply sends them). One range is
 * touched by two connections one after the other (a get of an object,
 * its remove, the range given to a new put; or two puts, the first
 * removed), ordered by the master's grants over other processes'
 * sockets, which TSan does not see: tests/tsan.supp names this function. */
static int segment_recv(int fd, char *seg, uint64_t len, uint64_t dl) { return te_read_full(fd, seg, len, dl); }

/* One request, header already read; verify_only (shm): answer the
 * capability check, no payload moves. -1 drops the connection. */
static int serve_request(te_stream_server *s, int fd, const uint8_t hdr[TE_WIRE_REQ_LEN], int verify_only) {
    te_wire_req rq;
    if (te_wire_req_decode(&rq, hdr) != 0) {
        log_warning("data plane: broken request framing, dropping connection");
        return -1;
    }
    uint64_t dl = te_deadline(s->cfg.io_timeout_ms);
    int st = request_check(s, rq.op, rq.cap, rq.remote_off, rq.len);
    if (rq.op == TE_READ_DISK && !verify_only) {
        atomic_fetch_add(&s->requests, 1);
        return serve_disk(s, fd, &rq, st, dl);
    }
    if (rq.op == TE_READ_DISK && st == TE_OK) st = TE_EINVAL;   /* shm: nothing to verify, the tier goes over TCP */
    char *seg = (char *)s->cfg.base + (st == TE_OK ? rq.remote_off : 0);
    atomic_fetch_add(&s->requests, 1);
    if (rq.op == TE_WRITE && !verify_only) {
        int rc = st == TE_OK ? segment_recv(fd, seg, rq.len, dl) : discard(fd, rq.len, dl);
        if (rc < 0) return -1;
        if (st == TE_OK) atomic_fetch_add(&s->bytes_in, rq.len);
    }
    te_wire_resp resp = { .cookie = rq.cookie, .status = st,
                          .len = st == TE_OK && rq.op == TE_READ && !verify_only ? rq.len : 0 };
    uint8_t rh[TE_WIRE_RESP_LEN];
    te_wire_resp_encode(&resp, rh);
    struct iovec iov[2] = { { rh, sizeof rh }, { seg, resp.len } };
    if (st != TE_OK) atomic_fetch_add(&s->rejected, 1);
    if (te_writev_full(fd, iov, resp.len ? 2 : 1, dl) < 0) return -1;
    atomic_fetch_add(&s->bytes_out, resp.len);
    return 0;
}

/* An authenticated connection leaves the gate and takes a member slot;
 * -1 (drop it) if it was pushed out meanwhile or max_conns are in use. */
static int admit_member(te_stream_server *s, conn *c) {
    if (te_gate_passed(s->gate, c->ticket) != 0) return -1;
    pthread_mutex_lock(&s->mu);
    int full = s->nauthed >= s->cfg.max_conns;
    if (!full) {
        s->nauthed++;
        c->authed = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (full) te_gate_refused(s->gate, "max_conns reached");
    return full ? -1 : 0;
}

static void *conn_main(void *arg) {
    conn *c = arg;
    te_stream_server *s = c->srv;
    char err[128];
    if (te_auth_server(c->fd, s->cfg.secret, s->cfg.auth_timeout_ms, err, sizeof err) != TE_AUTH_OK) {
        atomic_fetch_add(&s->auth_fail, 1);
        te_gate_failed(s->gate, c->ticket, err);   /* counted, logged at a rate limit */
    } else if (admit_member(s, c) == 0) {
        int shm = c->listener == s->cfg.nlisten;
        uint8_t hdr[TE_WIRE_REQ_LEN];
        te_shm_hello h = { s->cfg.node_id, s->cfg.size, s->cfg.incarnation };
        if (shm && te_shm_send_segment(c->fd, s->cfg.seg_fd, &h, s->cfg.auth_timeout_ms) < 0)
            log_notice("data plane: shm hand-off failed: %s", strerror(errno));
        else /* Idle connections wait forever; stop() shuts the socket down. */
            while (te_read_full(c->fd, hdr, sizeof hdr, 0) == 0 && serve_request(s, c->fd, hdr, shm) == 0) {}
    }
    shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_lock(&s->mu);
    c->done = 1;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Join and free connection threads that have finished. */
static void reap(te_stream_server *s, int all) {
    pthread_mutex_lock(&s->mu);
    conn **pp = &s->conns;
    while (*pp) {
        conn *c = *pp;
        if (!c->done && !all) { pp = &c->next; continue; }
        *pp = c->next;
        s->nconns--;
        s->nauthed -= c->authed;
        pthread_mutex_unlock(&s->mu);
        pthread_join(c->th, NULL);
        close(c->fd);
        free(c);
        pthread_mutex_lock(&s->mu);
        pp = &s->conns;
    }
    pthread_mutex_unlock(&s->mu);
}

/* Every connection is let in: the gate makes room among the
 * unauthenticated ones. Threads are bounded by max_conns members plus the
 * gate's pool, and twice the pool for pushed-out ones still exiting. */
static void accept_one(te_stream_server *s, int li) {
    struct sockaddr_storage peer;
    socklen_t plen = sizeof peer;
    int fd = accept4(s->lfd[li], (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC | SOCK_NONBLOCK), one = 1;
    int is_tcp = li < s->cfg.nlisten;
    if (fd < 0) return;
    reap(s, 0);
    pthread_mutex_lock(&s->mu);
    int full = s->nconns >= s->cfg.max_conns + 3 * s->cfg.preauth_max;
    pthread_mutex_unlock(&s->mu);
    if (full) {
        te_gate_refused(s->gate, "connection threads exhausted");
        close(fd);
        return;
    }
    if (is_tcp) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    atomic_fetch_add(&s->accepted, 1);
    conn *c = xcalloc(1, sizeof *c);
    c->srv = s;
    c->fd = fd;
    c->listener = li;
    c->ticket = te_gate_admit(s->gate, fd, (struct sockaddr *)&peer, plen);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 256 * 1024);
    pthread_mutex_lock(&s->mu);
    if (pthread_create(&c->th, &at, conn_main, c) != 0) {
        pthread_mutex_unlock(&s->mu);
        te_gate_failed(s->gate, c->ticket, "no thread");
        close(fd);
        free(c);
    } else {
        c->next = s->conns;
        s->conns = c;
        s->nconns++;
        pthread_mutex_unlock(&s->mu);
    }
    pthread_attr_destroy(&at);
}

static void *acceptor_main(void *arg) {
    te_stream_server *s = arg;
    struct pollfd pf[TE_MAX_PATHS + 2];
    int n = s->nlfd;
    for (int i = 0; i < n; i++) pf[i] = (struct pollfd){ .fd = s->lfd[i], .events = POLLIN };
    pf[n] = (struct pollfd){ .fd = s->wake[0], .events = POLLIN };
    for (;;) {
        if (poll(pf, (nfds_t)n + 1, 1000) < 0 && errno != EINTR) break;
        if (pf[n].revents) break;
        for (int i = 0; i < n; i++)
            if (pf[i].revents & POLLIN) accept_one(s, i);
        reap(s, 0);
    }
    return NULL;
}

te_stream_server *te_stream_server_start(const te_server_config *c, char *err, size_t errlen) {
    if (!c->base || !c->size || c->nlisten < 0 || c->nlisten > TE_MAX_PATHS ||
        (c->nlisten == 0 && !c->shm_path[0])) {
        snprintf(err, errlen, "data plane: need a segment and 1..%d listen addresses", TE_MAX_PATHS);
        return NULL;
    }
    te_stream_server *s = xcalloc(1, sizeof *s);
    s->cfg = *c;
    if (s->cfg.max_conns <= 0) s->cfg.max_conns = 256;
    if (s->cfg.auth_timeout_ms <= 0) s->cfg.auth_timeout_ms = 1000;
    if (s->cfg.io_timeout_ms <= 0) s->cfg.io_timeout_ms = 10000;
    if (s->cfg.preauth_max <= 0) s->cfg.preauth_max = TE_GATE_MAX_DEFAULT;
    s->gate = te_gate_create(s->cfg.preauth_max, s->cfg.preauth_per_source);
    pthread_mutex_init(&s->mu, NULL);
    int want = c->nlisten + (c->shm_path[0] ? 1 : 0), ok = 1;
    while (ok && s->nlfd < want) {
        int i = s->nlfd;
        s->lfd[i] = i < c->nlisten ? listen_on(c->listen[i], &s->port[i], err, errlen)
                                   : listen_unix(c->shm_path, err, errlen);
        if (s->lfd[i] < 0) ok = 0;
        else s->nlfd++;
    }
    if (ok && pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        snprintf(err, errlen, "data plane: pipe: %s", strerror(errno));
        ok = 0;
    }
    if (!ok) {
        for (int i = 0; i < s->nlfd; i++) close(s->lfd[i]);
        pthread_mutex_destroy(&s->mu);
        te_gate_destroy(s->gate);
        free(s);
        return NULL;
    }
    pthread_create(&s->acceptor, NULL, acceptor_main, s);
    return s;
}

void te_stream_server_set_cap_key(te_stream_server *s, const uint8_t key[TE_CAP_KEY_LEN]) {
    pthread_mutex_lock(&s->mu);
    memcpy(s->cfg.cap_key, key, TE_CAP_KEY_LEN);
    s->cfg.have_cap_key = 1;
    pthread_mutex_unlock(&s->mu);
}

int te_stream_server_port(const te_stream_server *s, int i) {
    return i >= 0 && i < s->cfg.nlisten ? s->port[i] : -1;
}

int te_stream_server_addr(const te_stream_server *s, int i, char out[TE_ADDR_LEN]) {
    char host[TE_ADDR_LEN];
    int port;
    if (i < 0 || i >= s->cfg.nlisten || te_split_hostport(s->cfg.listen[i], host, sizeof host, &port) != 0)
        return -1;
    snprintf(out, TE_ADDR_LEN, "%.56s:%d", host, s->port[i]);
    return 0;
}

void te_stream_server_stats(const te_stream_server *s, te_server_stats *out) {
    te_stream_server *m = (te_stream_server *)s;
    out->bytes_in = atomic_load(&m->bytes_in);
    out->bytes_out = atomic_load(&m->bytes_out);
    out->requests = atomic_load(&m->requests);
    out->rejected = atomic_load(&m->rejected);
    out->conns_accepted = atomic_load(&m->accepted);
    out->auth_failures = atomic_load(&m->auth_fail);
    pthread_mutex_lock(&m->mu);
    out->conns_active = (uint64_t)m->nconns;
    pthread_mutex_unlock(&m->mu);
}

void te_stream_server_drop_conns(te_stream_server *s, int listener, int max) {
    pthread_mutex_lock(&s->mu);
    int dropped = 0;
    for (conn *c = s->conns; c && (max <= 0 || dropped < max); c = c->next) {
        if (listener >= 0 && c->listener != listener) continue;
        shutdown(c->fd, SHUT_RDWR);
        dropped++;
    }
    pthread_mutex_unlock(&s->mu);
}

/* The acceptor stopped and every connection closed and joined; the
 * listening sockets stay as they are. */
static void stop_serving(te_stream_server *s) {
    if (write(s->wake[1], "x", 1) < 0) { /* the acceptor also wakes every second */ }
    pthread_join(s->acceptor, NULL);
    char x;
    while (read(s->wake[0], &x, 1) > 0) {}   /* emptied for a later resume */
    /* Wake every connection thread out of its blocking wait. */
    pthread_mutex_lock(&s->mu);
    for (conn *c = s->conns; c; c = c->next) shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_unlock(&s->mu);
    reap(s, 1);
}

void te_stream_server_pause(te_stream_server *s) { stop_serving(s); }

void te_stream_server_resume(te_stream_server *s, const te_server_config *c) {
    pthread_mutex_lock(&s->mu);
    s->cfg.node_id = c->node_id;
    s->cfg.have_cap_key = c->have_cap_key;
    memcpy(s->cfg.cap_key, c->cap_key, TE_CAP_KEY_LEN);
    s->cfg.cap_term = c->cap_term;
    s->cfg.shares = c->shares;
    pthread_mutex_unlock(&s->mu);
    /* Connection threads start after this: they read the identity unlocked. */
    pthread_create(&s->acceptor, NULL, acceptor_main, s);
}

void te_stream_server_stop(te_stream_server *s) {
    if (!s) return;
    stop_serving(s);
    for (int i = 0; i < s->nlfd; i++) close(s->lfd[i]);
    if (s->cfg.shm_path[0] && s->cfg.shm_path[0] != '@') unlink(s->cfg.shm_path);
    close(s->wake[0]);
    close(s->wake[1]);
    pthread_mutex_destroy(&s->mu);
    te_gate_destroy(s->gate);
    free(s);
}

/* ---- the TCP and shm data servers (data_server.h): one instance each ---- */

static void *tcp_start(te_server_config *c, char *err, size_t errlen) {
    te_server_config mine = *c;
    mine.shm_path[0] = '\0';
    if (c->nlisten < 1) {
        snprintf(err, errlen, "data plane: need 1..%d listen addresses", TE_MAX_PATHS);
        return NULL;
    }
    te_stream_server *s = te_stream_server_start(&mine, err, errlen);
    /* "host:0" becomes the port it got: registered, and bound again on restart */
    for (int i = 0; s && i < c->nlisten; i++) te_stream_server_addr(s, i, c->listen[i]);
    return s;
}

static int tcp_addrs(const te_server_config *c, char out[][TE_ADDR_LEN], int max) {
    int n = 0;
    for (int i = 0; i < c->nlisten && n < max; i++) snprintf(out[n++], TE_ADDR_LEN, "%s", c->listen[i]);
    return n;
}

/* Skipped (1) rather than failed when the segment cannot be shared. */
static int shm_check(const te_server_config *c, char *err, size_t errlen) {
    if (c->seg_fd >= 0) return 0;
    snprintf(err, errlen, "the segment is not a memfd, no shm export");
    return 1;
}

static void *shm_start(te_server_config *c, char *err, size_t errlen) {
    if (!c->shm_path[0])   /* abstract, so nothing is left behind on a crash */
        snprintf(c->shm_path, sizeof c->shm_path, "@moonkv-node-%d", (int)getpid());
    te_server_config mine = *c;
    mine.nlisten = 0;
    return te_stream_server_start(&mine, err, errlen);
}

static int shm_addrs(const te_server_config *c, char out[][TE_ADDR_LEN], int max) {
    if (!c->shm_path[0] || max < 1) return 0;
    snprintf(out[0], TE_ADDR_LEN, "unix:%s", c->shm_path);
    return 1;
}

static void stream_stats(void *srv, te_server_stats *out) { te_stream_server_stats(srv, out); }
static void stream_stop(void *srv) { te_stream_server_stop(srv); }
static void stream_pause(void *srv) { te_stream_server_pause(srv); }
static void stream_resume(void *srv, const te_server_config *c) { te_stream_server_resume(srv, c); }

const te_data_server_ops te_tcp_data_server = {
    .name = "tcp", .start = tcp_start, .addrs = tcp_addrs, .stats = stream_stats, .stop = stream_stop,
    .pause = stream_pause, .resume = stream_resume,
};

const te_data_server_ops te_shm_data_server = {
    .name = "shm", .check = shm_check, .start = shm_start, .addrs = shm_addrs, .stats = stream_stats,
    .stop = stream_stop, .pause = stream_pause, .resume = stream_resume,
};
