/* rdma/rdma_oob.c - sockets and message codec of the QP set-up channel. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/auth.h"
#include "backend/le.h"
#include "backend/netio.h"
#include "core/anet.h"
#include "rdma/rdma_oob.h"

#define OOB_MAGIC   0x52564b4du     /* "MKVR" little-endian */
#define OOB_VERSION 1
#define OOB_HDR_LEN 8
#define QPINFO_LEN  28
#define HELLO_LEN   (QPINFO_LEN + 4)
#define WELCOME_LEN (4 + QPINFO_LEN + 4 + 8 + 8)
#define GRANT_LEN   (TE_CAP_WIRE_LEN + 1 + 8 + 8)
#define GRANTED_LEN 12
#define OOB_MAX_LEN (OOB_HDR_LEN + GRANT_LEN)   /* the longest body */

/* ---- little-endian fields (cursor style over backend/le.h) ---- */

static uint8_t *put16(uint8_t *p, uint16_t v) { le_put16(p, v); return p + 2; }
static uint8_t *put32(uint8_t *p, uint32_t v) { le_put32(p, v); return p + 4; }
static uint8_t *put64(uint8_t *p, uint64_t v) { le_put64(p, v); return p + 8; }
#define get16 le_get16
#define get32 le_get32
#define get64 le_get64

/* ---- bodies ---- */

static uint8_t *put_qpinfo(uint8_t *p, const rdma_qp_info *q) {
    p = put32(p, q->qpn);
    p = put32(p, q->psn);
    p = put16(p, q->lid);
    memcpy(p, q->gid, 16);
    p += 16;
    *p++ = q->mtu;
    *p++ = q->rd_atomic;
    return p;
}

static int get_qpinfo(const uint8_t *p, rdma_qp_info *q) {
    q->qpn = get32(p);
    q->psn = get32(p + 4);
    q->lid = get16(p + 8);
    memcpy(q->gid, p + 10, 16);
    q->mtu = p[26];
    q->rd_atomic = p[27];
    if (q->qpn > 0xffffff || q->psn > 0xffffff) return -1;
    if (q->mtu < IBV_MTU_256 || q->mtu > IBV_MTU_4096) return -1;
    return q->rd_atomic >= 1 && q->rd_atomic <= 16 ? 0 : -1;
}

static size_t body_len(int type) {
    switch (type) {
    case RDMA_MSG_HELLO: return HELLO_LEN;
    case RDMA_MSG_WELCOME: return WELCOME_LEN;
    case RDMA_MSG_GRANT: return GRANT_LEN;
    case RDMA_MSG_GRANTED: return GRANTED_LEN;
    default: return 0;
    }
}

static void encode_body(int type, const rdma_msg *m, uint8_t *p) {
    switch (type) {
    case RDMA_MSG_HELLO:
        p = put_qpinfo(p, &m->hello.qp);
        put32(p, m->hello.dev_hint);
        break;
    case RDMA_MSG_WELCOME:
        p = put32(p, (uint32_t)m->welcome.status);
        p = put_qpinfo(p, &m->welcome.qp);
        p = put32(p, m->welcome.node_id);
        p = put64(p, m->welcome.seg_base);
        put64(p, m->welcome.seg_len);
        break;
    case RDMA_MSG_GRANT:
        memcpy(p, m->grant.cap, TE_CAP_WIRE_LEN);
        p += TE_CAP_WIRE_LEN;
        *p++ = m->grant.op;
        p = put64(p, m->grant.off);
        put64(p, m->grant.len);
        break;
    case RDMA_MSG_GRANTED:
        p = put32(p, (uint32_t)m->granted.status);
        p = put32(p, m->granted.rkey);
        put32(p, m->granted.rights);
        break;
    }
}

/* 0, or -1 for a body no honest peer sends. A failed WELCOME carries
 * no QP, so its QP fields are not checked. */
static int decode_body(int type, const uint8_t *p, rdma_msg *m) {
    memset(m, 0, sizeof *m);
    switch (type) {
    case RDMA_MSG_HELLO:
        m->hello.dev_hint = get32(p + QPINFO_LEN);
        return get_qpinfo(p, &m->hello.qp);
    case RDMA_MSG_WELCOME:
        m->welcome.status = (int32_t)get32(p);
        m->welcome.node_id = get32(p + 4 + QPINFO_LEN);
        m->welcome.seg_base = get64(p + 8 + QPINFO_LEN);
        m->welcome.seg_len = get64(p + 16 + QPINFO_LEN);
        if (m->welcome.status != 0) return 0;
        if (m->welcome.seg_base + m->welcome.seg_len < m->welcome.seg_base) return -1;
        return get_qpinfo(p + 4, &m->welcome.qp);
    case RDMA_MSG_GRANT:
        memcpy(m->grant.cap, p, TE_CAP_WIRE_LEN);
        p += TE_CAP_WIRE_LEN;
        m->grant.op = *p++;
        m->grant.off = get64(p);
        m->grant.len = get64(p + 8);
        return m->grant.op == TE_READ || m->grant.op == TE_WRITE ? 0 : -1;
    case RDMA_MSG_GRANTED:
        m->granted.status = (int32_t)get32(p);
        m->granted.rkey = get32(p + 4);
        m->granted.rights = get32(p + 8);
        return m->granted.rights & ~(TE_CAP_READ | TE_CAP_WRITE) ? -1 : 0;
    }
    return -1;
}

/* ---- bounded blocking I/O ---- */

/* Move exactly len bytes before timeout_ms; -1 with err on timeout,
 * error or EOF. */
static int io_full(int fd, void *buf, size_t len, int writing, int timeout_ms,
                   char *err, size_t errlen) {
    uint64_t deadline = te_deadline(timeout_ms);
    int rc = writing ? te_write_full(fd, buf, len, deadline) : te_read_full(fd, buf, len, deadline);
    if (rc == 0) return 0;
    snprintf(err, errlen, "rdma set-up: %s", errno == EPIPE ? "peer closed"
             : errno == ETIMEDOUT ? "timed out" : strerror(errno));
    return -1;
}

int rdma_oob_send(int fd, int type, const rdma_msg *m, int timeout_ms, char *err, size_t errlen) {
    uint8_t buf[OOB_MAX_LEN];
    size_t len = body_len(type);
    uint8_t *p = put32(buf, OOB_MAGIC);
    *p++ = OOB_VERSION;
    *p++ = (uint8_t)type;
    p = put16(p, (uint16_t)len);
    encode_body(type, m, p);
    return io_full(fd, buf, OOB_HDR_LEN + len, 1, timeout_ms, err, errlen);
}

int rdma_oob_recv(int fd, int type, rdma_msg *m, int timeout_ms, char *err, size_t errlen) {
    uint8_t buf[OOB_MAX_LEN];
    size_t len = body_len(type);
    if (io_full(fd, buf, OOB_HDR_LEN, 0, timeout_ms, err, errlen) != 0) return -1;
    if (get32(buf) != OOB_MAGIC || buf[4] != OOB_VERSION || buf[5] != type ||
        get16(buf + 6) != len) {
        snprintf(err, errlen, "rdma set-up: unexpected message (type %u, version %u)",
                 buf[5], buf[4]);
        return -1;
    }
    if (io_full(fd, buf + OOB_HDR_LEN, len, 0, timeout_ms, err, errlen) != 0) return -1;
    if (decode_body(type, buf + OOB_HDR_LEN, m) != 0) {
        snprintf(err, errlen, "rdma set-up: malformed message (type %d)", type);
        return -1;
    }
    return 0;
}

/* ---- sockets ---- */

int rdma_oob_dial(const char *addr, const char *secret, int timeout_ms, char *err, size_t errlen) {
    char host[256], why[ANET_ERR_LEN];
    int port;
    if (te_split_hostport(addr, host, sizeof host, &port) != 0) {
        snprintf(err, errlen, "bad rdma set-up address '%s' (want host:port)", addr);
        return -1;
    }
    int fd = anet_tcp_connect(why, host, port, NULL, 0, timeout_ms);
    if (fd == ANET_ERR) {
        snprintf(err, errlen, "rdma set-up: connect to %s failed (%s)", addr, why);
        return -1;
    }
    anet_nodelay(NULL, fd);
    why[0] = '\0';
    if (te_auth_client(fd, secret, timeout_ms, why, sizeof why) != TE_AUTH_OK) {
        snprintf(err, errlen, "rdma set-up: authentication with %s failed (%s)", addr, why);
        close(fd);
        return -1;
    }
    return fd;
}

int rdma_oob_listen(const char *addr, int *port, char *err, size_t errlen) {
    char why[ANET_ERR_LEN];
    int fd = te_listen_tcp(addr, 1, port, why, sizeof why);
    if (fd < 0) snprintf(err, errlen, "rdma set-up: listen on %s failed (%s)", addr, why);
    return fd;
}
