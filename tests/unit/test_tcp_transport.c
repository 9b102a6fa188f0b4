/* TCP transport against the in-process data-plane server on loopback. */
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/auth.h"
#include "backend/cap.h"
#include "backend/netio.h"
#include "backend/stream_server.h"
#include "backend/tcp_transport.h"
#include "backend/wire.h"
#include "core/crc32c.h"
#include "core/util.h"
#include "test.h"

#define SEG_SIZE (80ULL << 20)
#define SECRET "tcp-test-secret"

static const uint8_t KEY[TE_CAP_KEY_LEN] = "tcp-test-capkey";

typedef struct rig {
    char *seg;
    te_stream_server *srv;
    te_transport *t;
    te_path *p;
    char *buf;
    te_mr *mr;
    char addr[TE_ADDR_LEN];
} rig;

static te_cap cap_for(uint64_t off, uint64_t len, uint32_t rights) {
    te_cap c = { .node_id = 3, .rights = rights, .offset = off, .length = len,
                 .expiry_ms = wall_ms() + 60000, .issued_us = wall_ms() * 1000 };
    te_cap_sign(&c, KEY);
    return c;
}


/* ---- disk reads (TE_READ_DISK): a fake tier holding one record ---- */

#define DISK_PIECE (1u << 20)

static struct fake_disk {
    char *val;
    uint64_t size, tag;
    uint32_t crc;
    int damaged;                  /* the value fails its CRC: pieces before the last went, then -EBADMSG */
    uint64_t bytes;               /* the last read's, handed to the server (its thread's: atomic) */
} fd_;

/* As the store does: a whole value in pieces from 0, a part from its
 * first piece's start to its end. */
static int fake_read(void *ctx, uint64_t tag, uint64_t size, uint32_t crc, uint64_t from, uint64_t to,
                     te_disk_put *put, void *sink) {
    (void)ctx;
    /* counted before a piece goes: the reader may look as soon as it has the bytes */
    __atomic_store_n(&fd_.bytes, 0, __ATOMIC_SEQ_CST);
    if (tag != fd_.tag || size != fd_.size || crc != fd_.crc) return -2;   /* -ENOENT */
    for (uint64_t at = from / DISK_PIECE * DISK_PIECE; at < to; at += DISK_PIECE) {
        uint64_t n = size - at < DISK_PIECE ? size - at : DISK_PIECE;
        if (at + n == size && fd_.damaged) return -74;   /* -EBADMSG: the last piece held back */
        __atomic_fetch_add(&fd_.bytes, n, __ATOMIC_SEQ_CST);
        if (put(sink, at, fd_.val + at, (size_t)n) != 0) return -32;
    }
    return 0;
}

static const te_disk_reader fake_disk = {fake_read, NULL};

/* A server on a segment (and disk, or NULL: no tier), a TCP path to it;
 * set_key 0: the server has no cap key yet. */
static int rig_up_tier(rig *r, int set_key, const te_disk_reader *disk) {
    char err[256];
    memset(r, 0, sizeof *r);
    r->seg = xcalloc(1, SEG_SIZE);
    te_server_config sc = { .base = r->seg, .size = SEG_SIZE, .node_id = 3, .nlisten = 1, .disk = disk };
    snprintf(sc.secret, sizeof sc.secret, SECRET);
    snprintf(sc.listen[0], TE_ADDR_LEN, "127.0.0.1:0");
    r->srv = te_stream_server_start(&sc, err, sizeof err);
    if (!r->srv) { printf("# %s\n", err); return -1; }
    if (set_key) te_stream_server_set_cap_key(r->srv, KEY);
    snprintf(r->addr, sizeof r->addr, "127.0.0.1:%d", te_stream_server_port(r->srv, 0));
    te_config cfg = { .timeout_ms = 5000 };
    snprintf(cfg.secret, sizeof cfg.secret, SECRET);
    r->t = te_tcp_create(&cfg, err, sizeof err);
    if (te_connect(r->t, "127.0.0.1", r->addr, &r->p, err, sizeof err) != 0) {
        printf("# %s\n", err);
        return -1;
    }
    r->buf = xmalloc(SEG_SIZE);
    return r->t->ops->reg_mem(r->t, r->buf, SEG_SIZE, &r->mr, err, sizeof err);
}

static int rig_up(rig *r, int set_key) { return rig_up_tier(r, set_key, NULL); }
static int rig_up_disk(rig *r, const te_disk_reader *disk) { return rig_up_tier(r, 1, disk); }

static void rig_down(rig *r) {
    if (r->t) r->t->ops->destroy(r->t);
    te_stream_server_stop(r->srv);
    free(r->buf);
    free(r->seg);
}

/* Submit one request and wait for its completion status. */
static int run1(rig *r, te_op op, void *local, uint64_t off, uint64_t len, const te_cap *cap) {
    te_req q = { .op = op, .local = local, .remote_off = off, .len = len, .cap = cap, .cookie = 42 };
    if (te_submit(r->t, r->p, &q, 1) != 1) return 99;
    te_cqe c;
    uint64_t t0 = mono_ms();
    while (mono_ms() - t0 < 20000)
        if (te_poll(r->t, &c, 1, 100) == 1) return c.cookie == 42 ? c.status : 98;
    return 97;
}

static void fill(char *p, uint64_t n, unsigned seed) {
    for (uint64_t i = 0; i < n; i++) p[i] = (char)(seed + i * 131 + (i >> 12));
}

static void test_roundtrip_sizes(void) {
    rig r;
    ASSERT(rig_up(&r, 1) == 0);
    static const uint64_t sizes[] = { 1, 7, 4095, 65536, (1 << 20) + 3, 4 << 20, 64ULL << 20 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint64_t n = sizes[i], off = 12345;
        te_cap c = cap_for(off, n, TE_CAP_READ | TE_CAP_WRITE);
        fill(r.buf, n, (unsigned)i);
        ASSERT_EQ(run1(&r, TE_WRITE, r.buf, off, n, &c), TE_OK);
        ASSERT_MEMEQ(r.seg + off, r.buf, n);
        memset(r.buf, 0, n);
        ASSERT_EQ(run1(&r, TE_READ, r.buf, off, n, &c), TE_OK);
        ASSERT_MEMEQ(r.seg + off, r.buf, n);
    }
    te_server_stats st;
    te_stream_server_stats(r.srv, &st);
    ASSERT(st.bytes_in >= (64ULL << 20) && st.requests == 14 && st.rejected == 0);
    rig_down(&r);
}

/* Submit q and wait for its completion into *c; 0 when it came. */
static int run_req(rig *r, te_req *q, te_cqe *c) {
    if (te_submit(r->t, r->p, q, 1) != 1) return -1;
    uint64_t t0 = mono_ms();
    while (mono_ms() - t0 < 20000)
        if (te_poll(r->t, c, 1, 100) == 1) return c->cookie == q->cookie ? 0 : -1;
    return -1;
}

/* A write completes with the checksum of the bytes it sent (summed once
 * they all went, the client's pass saved), whole or in segments far apart;
 * a read carries none (its bytes are summed where they land). */
static void test_write_completes_with_crc(void) {
    rig r;
    ASSERT(rig_up(&r, 1) == 0);
    te_cap c = cap_for(0, 4 << 20, TE_CAP_READ | TE_CAP_WRITE);
    fill(r.buf, 16 << 20, 9);
    te_cqe cq;
    te_req q = { .op = TE_WRITE, .local = r.buf, .remote_off = 0, .len = 3 << 20, .cap = &c, .cookie = 7 };
    ASSERT(run_req(&r, &q, &cq) == 0 && cq.status == TE_OK);
    ASSERT(cq.has_crc && cq.crc == crc32c(0, r.buf, 3 << 20));
    struct iovec segs[TE_REQ_SEGS];
    uint64_t len = 0;
    for (int i = 0; i < TE_REQ_SEGS; i++) {   /* 16 KiB + i, 256 KiB apart */
        segs[i] = (struct iovec){ r.buf + (size_t)i * (256 << 10) + i, (16 << 10) + (size_t)i };
        len += segs[i].iov_len;
    }
    q = (te_req){ .op = TE_WRITE, .iov = segs, .niov = TE_REQ_SEGS, .remote_off = 1000, .len = len, .cap = &c,
                  .cookie = 8 };
    ASSERT(run_req(&r, &q, &cq) == 0 && cq.status == TE_OK);
    ASSERT(cq.has_crc && cq.crc == crc32c_sumv(0, segs, TE_REQ_SEGS));
    ASSERT(crc32c(0, r.seg + 1000, len) == cq.crc);
    q = (te_req){ .op = TE_READ, .local = r.buf, .remote_off = 0, .len = 4096, .cap = &c, .cookie = 9 };
    ASSERT(run_req(&r, &q, &cq) == 0 && cq.status == TE_OK && !cq.has_crc);
    rig_down(&r);
}

static void test_throughput_4mib(void) {
    rig r;
    ASSERT(rig_up(&r, 1) == 0);
    uint64_t n = 4 << 20, total = 0, t0 = mono_us();
    te_cap c = cap_for(0, SEG_SIZE, TE_CAP_READ | TE_CAP_WRITE);
    for (int i = 0; i < 64; i++) {
        te_req q[4];
        for (int k = 0; k < 4; k++)
            q[k] = (te_req){ .op = i & 1 ? TE_READ : TE_WRITE, .local = r.buf + k * n,
                             .remote_off = k * n, .len = n, .cap = &c, .cookie = (uint64_t)k };
        ASSERT_EQ(te_submit(r.t, r.p, q, 4), 4);
        te_cqe cq[4];
        for (int got = 0; got < 4;) {
            int m = te_poll(r.t, cq + got, 4 - got, 1000);
            for (int j = 0; j < m; j++) ASSERT_EQ(cq[got + j].status, TE_OK);
            got += m;
        }
        total += 4 * n;
    }
    double s = (double)(mono_us() - t0) / 1e6;
    printf("# tcp single path: %.0f MiB/s (4 MiB requests, 4 in flight)\n", total / s / (1 << 20));
    rig_down(&r);
}

static void test_many_in_flight(void) {
    rig r;
    ASSERT(rig_up(&r, 1) == 0);
    enum { N = 500, SZ = 4096 };
    te_cap c = cap_for(0, N * SZ, TE_CAP_READ | TE_CAP_WRITE);
    fill(r.buf, N * SZ, 9);
    int submitted = 0, done = 0, seen[N] = { 0 };
    while (done < N) {
        while (submitted < N) {
            te_req q = { .op = TE_WRITE, .local = r.buf + submitted * SZ, .remote_off = submitted * SZ,
                         .len = SZ, .cap = &c, .cookie = (uint64_t)submitted };
            int k = te_submit(r.t, r.p, &q, 1);
            ASSERT(k >= 0);
            if (k == 0) break;      /* window full */
            submitted++;
        }
        te_cqe cq[64];
        int m = te_poll(r.t, cq, 64, 1000);
        ASSERT(m > 0);
        for (int j = 0; j < m; j++) {
            ASSERT_EQ(cq[j].status, TE_OK);
            ASSERT(cq[j].cookie < N && !seen[cq[j].cookie]);
            seen[cq[j].cookie] = 1;
        }
        done += m;
    }
    ASSERT_MEMEQ(r.seg, r.buf, N * SZ);
    rig_down(&r);
}

static void test_refusals_keep_connection(void) {
    rig r;
    ASSERT(rig_up(&r, 1) == 0);
    te_cap c = cap_for(1000, 100, TE_CAP_READ | TE_CAP_WRITE);
    memset(r.buf, 'z', 4096);
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 1050, 100, &c), TE_ERANGE);
    ASSERT_EQ(run1(&r, TE_READ, r.buf, 900, 200, &c), TE_ERANGE);
    te_cap forged = c;
    forged.length = 1 << 20;
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 1000, 4096, &forged), TE_EAUTH);
    te_cap ro = cap_for(1000, 100, TE_CAP_READ);
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 1000, 100, &ro), TE_EAUTH);
    te_cap other = c;
    other.node_id = 4;
    te_cap_sign(&other, KEY);
    ASSERT_EQ(run1(&r, TE_READ, r.buf, 1000, 10, &other), TE_EAUTH);
    te_cap big = cap_for(SEG_SIZE - 10, 100, TE_CAP_READ);   /* past the segment */
    ASSERT_EQ(run1(&r, TE_READ, r.buf, SEG_SIZE - 10, 20, &big), TE_ERANGE);
    ASSERT_EQ(run1(&r, TE_READ, r.buf, 1000, 0, &c), TE_EINVAL);
    for (int i = 0; i < 4096; i++) ASSERT(r.seg[i] == 0);   /* nothing written */
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 1000, 100, &c), TE_OK);  /* same path still works */
    ASSERT_MEMEQ(r.seg + 1000, r.buf, 100);
    te_server_stats st;
    te_stream_server_stats(r.srv, &st);
    ASSERT_EQ(st.rejected, 6);
    rig_down(&r);
}

static void test_no_cap_key_refuses(void) {
    rig r;
    ASSERT(rig_up(&r, 0) == 0);
    te_cap c = cap_for(0, 100, TE_CAP_READ | TE_CAP_WRITE);
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 0, 100, &c), TE_EAUTH);
    te_stream_server_set_cap_key(r.srv, KEY);
    ASSERT_EQ(run1(&r, TE_WRITE, r.buf, 0, 100, &c), TE_OK);
    rig_down(&r);
}

static void test_wrong_secret_and_unauthenticated(void) {
    rig r;
    char err[256];
    ASSERT(rig_up(&r, 1) == 0);
    te_config bad = { 0 };
    snprintf(bad.secret, sizeof bad.secret, "wrong");
    te_transport *t = te_tcp_create(&bad, err, sizeof err);
    te_path *p;
    ASSERT(te_connect(t, NULL, r.addr, &p, err, sizeof err) != 0);
    ASSERT(strstr(err, "bad secret") != NULL);
    t->ops->destroy(t);
    /* A raw peer that skips auth and sends a request gets nothing back. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(te_stream_server_port(r.srv, 0)),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    ASSERT(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    te_cap c = cap_for(0, 100, TE_CAP_READ | TE_CAP_WRITE);
    te_wire_req wr = { .op = TE_WRITE, .cookie = 1, .remote_off = 0, .len = 4 };
    te_cap_encode(&c, wr.cap);
    uint8_t msg[TE_WIRE_REQ_LEN + 4];
    te_wire_req_encode(&wr, msg);
    memcpy(msg + TE_WIRE_REQ_LEN, "EVIL", 4);
    ASSERT_EQ(te_write_full(fd, msg, sizeof msg, te_deadline(1000)), 0);
    char junk[64];
    uint64_t got = 0;
    for (;;) {
        ssize_t k = read(fd, junk, sizeof junk);
        if (k <= 0) break;
        got += (uint64_t)k;
    }
    ASSERT_EQ(got, 0);
    ASSERT(memcmp(r.seg, "EVIL", 4) != 0);
    close(fd);
    /* The server's connection threads count a refusal after they close the
     * socket the client just saw closed: give them a moment. */
    te_server_stats st;
    for (int i = 0; i < 100; i++) {
        te_stream_server_stats(r.srv, &st);
        if (st.auth_failures >= 2) break;
        usleep(10 * 1000);
    }
    ASSERT_EQ(st.requests, 0);
    ASSERT(st.auth_failures >= 2);
    rig_down(&r);
}

/* A peer of the test's own (fn, on a thread, given the listening fd)
 * and a transport with timeout_ms connected to it. */
typedef struct {
    int lfd;
    pthread_t th;
    te_transport *t;
    te_path *p;
} own_peer;

static int own_peer_up(own_peer *o, void *(*fn)(void *), int timeout_ms) {
    char err[256], addr[64];
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof sa;
    o->lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (bind(o->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(o->lfd, 4) != 0) return -1;
    getsockname(o->lfd, (struct sockaddr *)&sa, &sl);
    pthread_create(&o->th, NULL, fn, &o->lfd);
    te_config cfg = { .timeout_ms = timeout_ms };
    snprintf(cfg.secret, sizeof cfg.secret, SECRET);
    o->t = te_tcp_create(&cfg, err, sizeof err);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(sa.sin_port));
    return te_connect(o->t, NULL, addr, &o->p, err, sizeof err);
}

static void own_peer_down(own_peer *o) {
    o->t->ops->destroy(o->t);
    pthread_join(o->th, NULL);
    close(o->lfd);
}

/* A peer that authenticates, takes the first MiB of what is sent and
 * dies: the requests behind it are in flight when it goes, every time. */
static void *dying_server(void *arg) {
    int *fds = arg;
    char err[128];
    int c = accept(fds[0], NULL, NULL);
    if (c >= 0 && te_auth_server(c, SECRET, 2000, err, sizeof err) == TE_AUTH_OK) {
        static char b[64 << 10];
        ssize_t k;
        for (size_t got = 0; got < (1u << 20) && (k = read(c, b, sizeof b)) > 0;) got += (size_t)k;
    }
    if (c >= 0) close(c);
    return NULL;
}

/* 64 MiB of writes in flight, the server killed under them: every request
 * completes (none hangs) with TE_EIO, and a later submit fails. */
static void test_killed_server_errors(void) {
    char err[256];
    own_peer o;
    te_mr *mr;
    char *buf = xmalloc(64 << 20);
    ASSERT(own_peer_up(&o, dying_server, 5000) == 0);
    te_transport *t = o.t;
    te_path *p = o.p;
    ASSERT(t->ops->reg_mem(t, buf, 64 << 20, &mr, err, sizeof err) == 0);
    te_cap c = cap_for(0, SEG_SIZE, TE_CAP_READ | TE_CAP_WRITE);
    te_req q[8];
    for (int k = 0; k < 8; k++)
        q[k] = (te_req){ .op = TE_WRITE, .local = buf + k * (8 << 20), .remote_off = k * (8 << 20),
                         .len = 8 << 20, .cap = &c, .cookie = (uint64_t)k };
    ASSERT_EQ(te_submit(t, p, q, 8), 8);
    int done = 0, failed = 0;
    uint64_t t0 = mono_ms();
    while (done < 8 && mono_ms() - t0 < 10000) {
        te_cqe cq[8];
        int m = te_poll(t, cq, 8, 100);
        for (int j = 0; j < m; j++) failed += cq[j].status == TE_EIO;
        done += m;
    }
    ASSERT_EQ(done, 8);
    ASSERT_EQ(failed, 8);
    ASSERT(mono_ms() - t0 < 4000);   /* seen at the close, not at the timeout */
    ASSERT_EQ(te_submit(t, p, q, 1), -1);
    own_peer_down(&o);
    free(buf);
}

/* A peer that authenticates and then never answers. */
static void *mute_server(void *arg) {
    int *fds = arg;
    char err[128];
    int c = accept(fds[0], NULL, NULL);
    if (c >= 0 && te_auth_server(c, SECRET, 2000, err, sizeof err) == TE_AUTH_OK) {
        char b[4096];
        while (read(c, b, sizeof b) > 0) {}
    }
    if (c >= 0) close(c);
    return NULL;
}

static void test_request_timeout(void) {
    char err[256], buf[64];
    own_peer o;
    te_mr *mr;
    ASSERT(own_peer_up(&o, mute_server, 300) == 0);
    te_transport *t = o.t;
    te_path *p = o.p;
    ASSERT(t->ops->reg_mem(t, buf, sizeof buf, &mr, err, sizeof err) == 0);
    te_cap c = cap_for(0, 64, TE_CAP_READ);
    te_req q = { .op = TE_READ, .local = buf, .len = 64, .cap = &c, .cookie = 5 };
    te_req outside = q;
    outside.local = buf + 1;      /* runs past the registered region */
    ASSERT_EQ(te_submit(t, p, &outside, 1), 1);
    te_cqe cq;
    ASSERT_EQ(te_poll(t, &cq, 1, 0), 1);
    ASSERT_EQ(cq.status, TE_EINVAL);
    uint64_t t0 = mono_ms();
    ASSERT_EQ(te_submit(t, p, &q, 1), 1);
    ASSERT_EQ(te_poll(t, &cq, 1, 5000), 1);
    ASSERT_EQ(cq.status, TE_ETIMEDOUT);
    ASSERT(mono_ms() - t0 >= 250 && mono_ms() - t0 < 3000);
    own_peer_down(&o);
}

/* A disk cap (cap.h): the record of key's tag, of size bytes and CRC crc. */
static te_cap disk_cap(const char *key, uint64_t size, uint32_t crc) {
    te_cap c = { .node_id = 3, .rights = TE_CAP_DISK, .offset = crc, .length = size,
                 .expiry_ms = wall_ms() + 60000, .issued_us = te_cap_disk_tag(key, strlen(key)) };
    te_cap_sign(&c, KEY);
    return c;
}

/* A record read whole and in part straight from the (fake) tier, byte
 * exact; another key's cap, a disk cap on the segment and a segment cap
 * on the disk are refused, the connection serving on. */
static void test_disk_reads(void) {
    rig r;
    fd_ = (struct fake_disk){0};
    fd_.size = (5u << 20) + 3;
    fd_.val = xmalloc(fd_.size);
    fill(fd_.val, fd_.size, 9);
    fd_.crc = crc32c(0, fd_.val, fd_.size);
    fd_.tag = te_cap_disk_tag("k1", 2);
    ASSERT(rig_up_disk(&r, &fake_disk) == 0);
    te_cap c = disk_cap("k1", fd_.size, fd_.crc);
    memset(r.buf, 0, fd_.size);
    ASSERT_EQ(run1(&r, TE_READ_DISK, r.buf, fd_.crc, fd_.size, &c), TE_OK);
    ASSERT_MEMEQ(r.buf, fd_.val, fd_.size);
    /* bytes [1 MiB + 5, +100) of it: remote_off is cap.offset plus the
     * object offset; the part read alone (its piece, not the record) */
    memset(r.buf, 0, 100);
    ASSERT_EQ(run1(&r, TE_READ_DISK, r.buf, fd_.crc + DISK_PIECE + 5, 100, &c), TE_OK);
    ASSERT_MEMEQ(r.buf, fd_.val + DISK_PIECE + 5, 100);
    ASSERT_EQ(__atomic_load_n(&fd_.bytes, __ATOMIC_SEQ_CST), DISK_PIECE);
    memset(r.buf, 0, 2 * DISK_PIECE);   /* across pieces */
    ASSERT_EQ(run1(&r, TE_READ_DISK, r.buf, fd_.crc + 3 * DISK_PIECE - 7, 2 * DISK_PIECE, &c), TE_OK);
    ASSERT_MEMEQ(r.buf, fd_.val + 3 * DISK_PIECE - 7, 2 * DISK_PIECE);
    te_cap other = disk_cap("k2", fd_.size, fd_.crc), wrong_crc = disk_cap("k1", fd_.size, fd_.crc ^ 1);
    ASSERT_EQ(run1(&r, TE_READ_DISK, r.buf, fd_.crc, fd_.size, &other), TE_ERANGE);
    ASSERT_EQ(run1(&r, TE_READ_DISK, r.buf, fd_.crc ^ 1, fd_.size, &wrong_crc), TE_ERANGE);
    /* past the cap's range, a disk cap on the segment, a segment cap on the disk */
    ASSERT_EQ(run1(&r, TE_READ_DISK, r.buf, fd_.crc + 1, fd_.size, &c), TE_ERANGE);
    ASSERT_EQ(run1(&r, TE_READ, r.buf, fd_.crc, 4096, &c), TE_EAUTH);
    te_cap seg = cap_for(fd_.crc, fd_.size, TE_CAP_READ | TE_CAP_WRITE);
    ASSERT_EQ(run1(&r, TE_READ_DISK, r.buf, fd_.crc, fd_.size, &seg), TE_EAUTH);
    ASSERT_EQ(run1(&r, TE_READ_DISK, r.buf, fd_.crc, fd_.size, &c), TE_OK);   /* still serving */
    ASSERT_MEMEQ(r.buf, fd_.val, fd_.size);
    rig_down(&r);
    free(fd_.val);
}

/* A record that fails its CRC is never a whole read: with pieces gone
 * the connection drops (TE_EIO), with none the answer is TE_ERANGE;
 * a node with no tier answers TE_ERANGE. */
static void test_disk_damaged(void) {
    rig r;
    fd_ = (struct fake_disk){0};
    fd_.size = 3u << 20;
    fd_.val = xmalloc(fd_.size);
    fill(fd_.val, fd_.size, 4);
    fd_.crc = crc32c(0, fd_.val, fd_.size);
    fd_.tag = te_cap_disk_tag("k1", 2);
    fd_.damaged = 1;
    ASSERT(rig_up_disk(&r, &fake_disk) == 0);
    te_cap c = disk_cap("k1", fd_.size, fd_.crc);
    ASSERT_EQ(run1(&r, TE_READ_DISK, r.buf, fd_.crc, fd_.size, &c), TE_EIO);
    rig_down(&r);
    fd_.size = 4096;   /* one piece: nothing went, the connection serves on */
    fd_.crc = crc32c(0, fd_.val, fd_.size);
    ASSERT(rig_up_disk(&r, &fake_disk) == 0);
    c = disk_cap("k1", fd_.size, fd_.crc);
    ASSERT_EQ(run1(&r, TE_READ_DISK, r.buf, fd_.crc, fd_.size, &c), TE_ERANGE);
    fd_.damaged = 0;
    ASSERT_EQ(run1(&r, TE_READ_DISK, r.buf, fd_.crc, fd_.size, &c), TE_OK);
    ASSERT_MEMEQ(r.buf, fd_.val, fd_.size);
    rig_down(&r);
    ASSERT(rig_up_disk(&r, NULL) == 0);
    ASSERT_EQ(run1(&r, TE_READ_DISK, r.buf, fd_.crc, fd_.size, &c), TE_ERANGE);
    rig_down(&r);
    free(fd_.val);
}

int main(void) {
    RUN_TEST(test_roundtrip_sizes);
    RUN_TEST(test_write_completes_with_crc);
    RUN_TEST(test_throughput_4mib);
    RUN_TEST(test_many_in_flight);
    RUN_TEST(test_refusals_keep_connection);
    RUN_TEST(test_no_cap_key_refuses);
    RUN_TEST(test_wrong_secret_and_unauthenticated);
    RUN_TEST(test_killed_server_errors);
    RUN_TEST(test_request_timeout);
    RUN_TEST(test_disk_reads);
    RUN_TEST(test_disk_damaged);
    TEST_EXIT();
}
