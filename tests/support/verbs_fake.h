/* tests/support/verbs_fake.h - a software RDMA NIC for tests.
 *
 * verbs_fake_ops is a verbs_ops table (rdma/verbs_ops.h) backed by an
 * in-process model: fake devices with ports, LIDs and GIDs, PDs, MRs with
 * lkey/rkey and access flags, CQs with a depth and completion channels
 * (real eventfds, so poll() works), and RC QPs with the verbs state
 * machine (RESET->INIT->RTR->RTS, ERR) connected in pairs by QP number.
 * RDMA WRITE and READ are memcpy between registered regions, checked as
 * a NIC would: a bad lkey/local range is IBV_WC_LOC_PROT_ERR, a bad rkey,
 * range or missing remote right is IBV_WC_REM_ACCESS_ERR, and an errored
 * QP flushes what follows. Completions honour IBV_SEND_SIGNALED, and an
 * unsignalled WR keeps its send-queue slot until a later signalled one
 * is polled. Thread-safe (one lock), so a node thread and a client can
 * share the world. Linked only into test binaries. */
#ifndef MKV_VERBS_FAKE_H
#define MKV_VERBS_FAKE_H

#include <stddef.h>
#include <stdint.h>

#include "rdma/verbs_ops.h"

extern const verbs_ops verbs_fake_ops;

#define FAKE_MAX_DEVS  4
#define FAKE_MAX_PORTS 4

/* A fresh world of ndev devices ("fake0".."fake3") with nports active
 * ports each. 0 devices: ibv_get_device_list finds none. Any objects of
 * the previous world must already be destroyed. */
void fake_verbs_reset(int ndev, int nports);
void fake_verbs_set_port_state(int dev, int port, enum ibv_port_state st);
/* Ports speak Ethernet (RoCE): LID 0, an IPv4-mapped GID at index 1. */
void fake_verbs_set_roce(int on);

/* Injection. The nth WR posted from now on (1 = the next) completes with
 * status and puts its QP in the error state. */
void fake_verbs_fail_nth_wr(int n, enum ibv_wc_status status);
/* Move a QP to the error state now (its pending WRs are flushed). */
int fake_verbs_break_qp(uint32_t qpn);
/* Deferred: posted WRs wait for fake_verbs_progress() instead of running
 * inside post_send, as on a real NIC. Returns WRs executed. */
void fake_verbs_set_deferred(int on);
int fake_verbs_progress(void);

typedef struct fake_verbs_stats {
    uint64_t post_calls;      /* ibv_post_send calls */
    uint64_t wrs_posted;
    uint64_t wrs_signalled;
    uint64_t wc_errors;       /* completions with a status other than success */
    uint64_t cq_overflows;
    uint64_t qps_created;
    uint64_t notify_events;   /* completion-channel events raised */
    int live_objects;         /* contexts+PDs+MRs+channels+CQs+QPs not destroyed */
    int qps_live;
} fake_verbs_stats;
void fake_verbs_get_stats(fake_verbs_stats *out);

/* The WRs posted since reset, in order (the last 4096 are kept). */
typedef struct fake_wr {
    uint32_t qpn;
    enum ibv_wr_opcode opcode;
    uint64_t local_addr;
    uint32_t length;
    uint32_t lkey;
    uint64_t remote_addr;
    uint32_t rkey;
    int signalled;
    uint64_t wr_id;
} fake_wr;
int fake_verbs_wr_count(void);
int fake_verbs_wr_at(int i, fake_wr *out);   /* 0, or -1 if not kept */

/* State of a live QP, or -1 if there is none with that number. */
int fake_verbs_qp_state(uint32_t qpn);
/* Access flags of a live QP, or -1. */
int fake_verbs_qp_access(uint32_t qpn);

#endif
