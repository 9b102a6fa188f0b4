/* rdma/rdma_qp.h - create RC queue pairs and bring them up to RTS.
 *
 * Both ends of a connection run the same RESET->INIT->RTR->RTS sequence
 * with the peer's rdma_qp_info learned over the out-of-band socket. */
#ifndef MKV_RDMA_QP_H
#define MKV_RDMA_QP_H

#include <stddef.h>
#include <stdint.h>

#include "rdma/rdma_dev.h"

/* What one end tells the other about its QP. */
typedef struct rdma_qp_info {
    uint32_t qpn;         /* 24 bits */
    uint32_t psn;         /* 24 bits, first packet sequence number */
    uint16_t lid;
    uint8_t gid[16];
    uint8_t mtu;          /* enum ibv_mtu, 1..5 */
    uint8_t rd_atomic;    /* READs it can have outstanding / accept */
} rdma_qp_info;

/* An RC QP on d's CQ with room for max_send_wr one-SGE send WRs (and
 * no receive queue use). NULL with a message on failure. */
struct ibv_qp *rdma_qp_create(rdma_dev *d, int max_send_wr, char *err, size_t errlen);

/* Fill our side's info; psn random; as_responder selects which of the
 * device's rd_atomic limits we announce. */
void rdma_qp_local_info(const rdma_dev *d, const struct ibv_qp *qp, int as_responder,
                        rdma_qp_info *out);

/* INIT (with remote access flags `access`), RTR towards remote, RTS.
 * The path MTU is the smaller of both ends'; rd_atomic as initiator is
 * capped by what the remote accepts. */
int rdma_qp_connect(rdma_dev *d, struct ibv_qp *qp, const rdma_qp_info *local,
                    const rdma_qp_info *remote, int access, char *err, size_t errlen);

#endif
