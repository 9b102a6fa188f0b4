/* rdma/verbs_real.c - verbs_ops forwarding to libibverbs.
 *
 * The wrappers exist because the library defines these calls as static
 * inline functions or macros, which have no address to put in a table. */
#include "rdma/verbs_ops.h"

static struct ibv_device **real_get_device_list(int *num) { return ibv_get_device_list(num); }

static int real_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr) {
    return ibv_query_port(ctx, port, attr);
}

static struct ibv_mr *real_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
    return ibv_reg_mr(pd, addr, len, access);
}

static int real_req_notify_cq(struct ibv_cq *cq, int solicited_only) {
    return ibv_req_notify_cq(cq, solicited_only);
}

static int real_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc) {
    return ibv_poll_cq(cq, num, wc);
}

static int real_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
    return ibv_post_send(qp, wr, bad);
}

const verbs_ops verbs_real_ops = {
    .name = "verbs",
    .get_device_list = real_get_device_list,
    .free_device_list = ibv_free_device_list,
    .get_device_name = ibv_get_device_name,
    .open_device = ibv_open_device,
    .close_device = ibv_close_device,
    .query_device = ibv_query_device,
    .query_port = real_query_port,
    .query_gid = ibv_query_gid,
    .alloc_pd = ibv_alloc_pd,
    .dealloc_pd = ibv_dealloc_pd,
    .reg_mr = real_reg_mr,
    .dereg_mr = ibv_dereg_mr,
    .create_comp_channel = ibv_create_comp_channel,
    .destroy_comp_channel = ibv_destroy_comp_channel,
    .create_cq = ibv_create_cq,
    .destroy_cq = ibv_destroy_cq,
    .req_notify_cq = real_req_notify_cq,
    .get_cq_event = ibv_get_cq_event,
    .ack_cq_events = ibv_ack_cq_events,
    .poll_cq = real_poll_cq,
    .create_qp = ibv_create_qp,
    .modify_qp = ibv_modify_qp,
    .destroy_qp = ibv_destroy_qp,
    .post_send = real_post_send,
};
