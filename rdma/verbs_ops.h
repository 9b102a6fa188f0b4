/* rdma/verbs_ops.h - the verbs calls the RDMA transport makes, as a table.
 *
 * The transport and the node exporter call libibverbs only through a
 * verbs_ops table, never directly. verbs_real_ops (verbs_real.c) forwards
 * to the library; tests swap in a software stand-in
 * (tests/support/verbs_fake.h) that moves bytes with memcpy, so every path
 * of the transport runs on a machine without an RDMA device.
 *
 * Several verbs are static inline or macros in infiniband/verbs.h
 * (ibv_post_send, ibv_poll_cq, ibv_req_notify_cq, ibv_reg_mr,
 * ibv_query_port); verbs_real.c wraps them in real functions so that
 * their addresses can sit in the table. Signatures match the library. */
#ifndef MKV_VERBS_OPS_H
#define MKV_VERBS_OPS_H

#include <infiniband/verbs.h>

typedef struct verbs_ops {
    const char *name;   /* "verbs", or the stand-in's name */
    struct ibv_device **(*get_device_list)(int *num);
    void (*free_device_list)(struct ibv_device **list);
    const char *(*get_device_name)(struct ibv_device *dev);
    struct ibv_context *(*open_device)(struct ibv_device *dev);
    int (*close_device)(struct ibv_context *ctx);
    int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
    int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
    int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
    int (*dealloc_pd)(struct ibv_pd *pd);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
    int (*dereg_mr)(struct ibv_mr *mr);
    struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *ctx);
    int (*destroy_comp_channel)(struct ibv_comp_channel *ch);
    struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context,
                                struct ibv_comp_channel *ch, int comp_vector);
    int (*destroy_cq)(struct ibv_cq *cq);
    int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
    int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context);
    void (*ack_cq_events)(struct ibv_cq *cq, unsigned int nevents);
    int (*poll_cq)(struct ibv_cq *cq, int num, struct ibv_wc *wc);
    struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
    int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
    int (*destroy_qp)(struct ibv_qp *qp);
    int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
} verbs_ops;

extern const verbs_ops verbs_real_ops;

#endif
