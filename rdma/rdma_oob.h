/* rdma/rdma_oob.h - the out-of-band TCP channel that sets up RDMA QPs.
 *
 * Per QP the client opens one TCP connection to the node's RDMA set-up
 * address, both sides prove the cluster secret (backend/auth.h), then:
 *
 *   client -> HELLO    its QP number, PSN, LID, GID, MTU, READ depth
 *   node   -> WELCOME  status, the node's QP, node id, segment base/len
 *   client -> GRANT    a capability (TE_CAP_WIRE_LEN bytes) + op/range
 *   node   -> GRANTED  status, segment rkey, rights now open on the QP
 *
 * GRANT is repeated when a request needs a right the QP lacks. The
 * connection stays open for the life of the QP: its close tells the node
 * to destroy its end. Every message has an 8-byte header (magic, version,
 * type, body length) and a fixed little-endian body; anything else is a
 * protocol error and the connection is dropped. */
#ifndef MKV_RDMA_OOB_H
#define MKV_RDMA_OOB_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cap.h"
#include "rdma/rdma_qp.h"

enum { RDMA_MSG_HELLO = 1, RDMA_MSG_WELCOME = 2, RDMA_MSG_GRANT = 3, RDMA_MSG_GRANTED = 4 };

typedef struct rdma_hello {
    rdma_qp_info qp;
    uint32_t dev_hint;        /* which of the node's ports to use (mod count) */
} rdma_hello;

typedef struct rdma_welcome {
    int32_t status;           /* TE_OK or TE_E* */
    rdma_qp_info qp;
    uint32_t node_id;
    uint64_t seg_base;        /* remote address of segment offset 0 */
    uint64_t seg_len;
} rdma_welcome;

typedef struct rdma_grant {
    uint8_t cap[TE_CAP_WIRE_LEN];
    uint8_t op;               /* te_op the client is about to perform */
    uint64_t off, len;        /* a range it is about to touch */
} rdma_grant;

typedef struct rdma_granted {
    int32_t status;           /* TE_OK, TE_EAUTH, TE_ERANGE */
    uint32_t rkey;
    uint32_t rights;          /* TE_CAP_READ|TE_CAP_WRITE now open on the QP */
} rdma_granted;

/* A generic message buffer big enough for any body. */
typedef union rdma_msg {
    rdma_hello hello;
    rdma_welcome welcome;
    rdma_grant grant;
    rdma_granted granted;
} rdma_msg;

/* Sockets. dial: connected, authenticated fd or -1 with err set. */
int rdma_oob_dial(const char *addr, const char *secret, int timeout_ms, char *err, size_t errlen);
/* Listen on "host:port" (port 0: any); the bound port in *port. */
int rdma_oob_listen(const char *addr, int *port, char *err, size_t errlen);

/* Send or receive one message of type, bounded by timeout_ms. recv
 * rejects a wrong magic/version/type/length or a malformed body. */
int rdma_oob_send(int fd, int type, const rdma_msg *m, int timeout_ms, char *err, size_t errlen);
int rdma_oob_recv(int fd, int type, rdma_msg *m, int timeout_ms, char *err, size_t errlen);

#endif
