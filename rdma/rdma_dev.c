/* rdma/rdma_dev.c - find, open and close the RDMA ports we use. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/rdma_dev.h"

typedef struct devspec {
    char name[RDMA_DEV_NAME_MAX];
    int port;                 /* 0 = every active port */
} devspec;

/* "a,b:2" -> {a,0},{b,2}. -1 on an empty entry, bad port or too many. */
static int parse_spec(const char *spec, devspec *out, char *err, size_t errlen) {
    int n = 0;
    const char *p = spec ? spec : "";
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        size_t namelen = colon ? (size_t)(colon - p) : len;
        if (n == RDMA_MAX_DEVS || namelen == 0 || namelen >= RDMA_DEV_NAME_MAX) {
            snprintf(err, errlen, "bad rdma device list '%s' (device[:port],...; at most %d)",
                     spec, RDMA_MAX_DEVS);
            return -1;
        }
        memcpy(out[n].name, p, namelen);
        out[n].name[namelen] = '\0';
        out[n].port = 0;
        if (colon) {
            char *stop;
            long port = strtol(colon + 1, &stop, 10);
            if (stop != p + len || port < 1 || port > 255) {
                snprintf(err, errlen, "bad port in rdma device list '%s'", spec);
                return -1;
            }
            out[n].port = (int)port;
        }
        n++;
        p += len;
        if (*p == ',') p++;
    }
    return n;
}

static int is_ipv4_mapped(const union ibv_gid *g) {
    static const uint8_t prefix[12] = {0,0,0,0,0,0,0,0,0,0,0xff,0xff};
    return memcmp(g->raw, prefix, sizeof prefix) == 0;
}

/* IB ports are addressed by LID, so GID 0 serves. On RoCE the GID is the
 * address: prefer the last IPv4-mapped entry, which on common NICs is the
 * RoCE v2 (routable) one for the port's IPv4 address. */
static int pick_gid(rdma_dev *d, const struct ibv_port_attr *pa, int want) {
    if (want >= 0) {
        d->gid_index = want;
        return d->ops->query_gid(d->ctx, d->port, want, &d->gid);
    }
    d->gid_index = 0;
    if (d->ops->query_gid(d->ctx, d->port, 0, &d->gid) != 0) return -1;
    if (!d->is_roce) return 0;
    int len = pa->gid_tbl_len < 128 ? pa->gid_tbl_len : 128;
    for (int i = 1; i < len; i++) {
        union ibv_gid g;
        if (d->ops->query_gid(d->ctx, d->port, i, &g) != 0) break;
        if (is_ipv4_mapped(&g)) { d->gid = g; d->gid_index = i; }
    }
    return 0;
}

static void dev_close(rdma_dev *d) {
    const verbs_ops *ops = d->ops;
    if (d->cq) ops->destroy_cq(d->cq);
    if (d->ch) ops->destroy_comp_channel(d->ch);
    if (d->pd) ops->dealloc_pd(d->pd);
    if (d->ctx) ops->close_device(d->ctx);
    memset(d, 0, sizeof *d);
}

/* Open one port with its own context, PD, channel and CQ. */
static int dev_open(const verbs_ops *ops, struct ibv_device *ibdev, int port, int cq_depth,
                    int gid_index, rdma_dev *d, char *err, size_t errlen) {
    struct ibv_device_attr da;
    struct ibv_port_attr pa;
    memset(d, 0, sizeof *d);
    d->ops = ops;
    snprintf(d->name, sizeof d->name, "%s", ops->get_device_name(ibdev));
    d->port = (uint8_t)port;
    const char *what = "open device";
    if (!(d->ctx = ops->open_device(ibdev))) goto fail;
    what = "query device";
    if (ops->query_device(d->ctx, &da) != 0) goto fail;
    what = "query port";
    if (port > da.phys_port_cnt || ops->query_port(d->ctx, d->port, &pa) != 0) goto fail;
    if (pa.state != IBV_PORT_ACTIVE) {
        snprintf(err, errlen, "rdma device %s port %d is not active", d->name, port);
        dev_close(d);
        return -1;
    }
    d->is_roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    d->lid = pa.lid;
    d->mtu = pa.active_mtu;
    d->max_msg_sz = pa.max_msg_sz;
    d->max_qp_wr = da.max_qp_wr;
    d->max_rd_atomic = da.max_qp_init_rd_atom;
    d->max_dest_rd_atomic = da.max_qp_rd_atom;
    what = "query gid";
    if (pick_gid(d, &pa, gid_index) != 0) goto fail;
    what = "alloc pd";
    if (!(d->pd = ops->alloc_pd(d->ctx))) goto fail;
    what = "create completion channel";
    if (!(d->ch = ops->create_comp_channel(d->ctx))) goto fail;
    d->cq_depth = cq_depth < da.max_cqe ? cq_depth : da.max_cqe;
    what = "create cq";
    if (!(d->cq = ops->create_cq(d->ctx, d->cq_depth, d, d->ch, 0))) goto fail;
    return 0;
fail:
    snprintf(err, errlen, "rdma device %s port %d: %s failed (%s)", d->name, port, what,
             strerror(errno ? errno : EIO));
    dev_close(d);
    return -1;
}

/* Which ports of ibdev are active: bit p set for port p. 0 if it can't tell. */
static uint32_t active_ports(const verbs_ops *ops, struct ibv_device *ibdev) {
    struct ibv_device_attr da;
    uint32_t mask = 0;
    struct ibv_context *ctx = ops->open_device(ibdev);
    if (!ctx) return 0;
    if (ops->query_device(ctx, &da) == 0) {
        for (int p = 1; p <= da.phys_port_cnt && p < 32; p++) {
            struct ibv_port_attr pa;
            if (ops->query_port(ctx, (uint8_t)p, &pa) == 0 && pa.state == IBV_PORT_ACTIVE)
                mask |= 1u << p;
        }
    }
    ops->close_device(ctx);
    return mask;
}

static struct ibv_device **device_list(const verbs_ops *ops, int *num, char *err, size_t errlen) {
    errno = 0;
    struct ibv_device **list = ops->get_device_list(num);
    if (list && *num > 0) return list;
    if (list) ops->free_device_list(list);
    if (!list && errno)
        snprintf(err, errlen, "no RDMA devices found (%s)", strerror(errno));
    else
        snprintf(err, errlen, "no RDMA devices found");
    return NULL;
}

static struct ibv_device *find_device(const verbs_ops *ops, struct ibv_device **list, int num,
                                      const char *name) {
    for (int i = 0; i < num; i++)
        if (strcmp(ops->get_device_name(list[i]), name) == 0) return list[i];
    return NULL;
}

/* Open the ports of one device that want names (port 0: all active). */
static int open_device_ports(const verbs_ops *ops, struct ibv_device *ibdev, int want_port,
                             int required, int cq_depth, int gid_index, rdma_dev *devs, int n,
                             char *err, size_t errlen) {
    if (want_port)
        return dev_open(ops, ibdev, want_port, cq_depth, gid_index, &devs[n], err, errlen) == 0
               ? 1 : -1;
    uint32_t mask = active_ports(ops, ibdev);
    int opened = 0;
    for (int p = 1; p < 32 && n + opened < RDMA_MAX_DEVS; p++) {
        if (!(mask & (1u << p))) continue;
        if (dev_open(ops, ibdev, p, cq_depth, gid_index, &devs[n + opened], err, errlen) != 0) {
            if (required) { rdma_devs_close(devs + n, opened); return -1; }
            continue;
        }
        opened++;
    }
    if (opened == 0 && required) {
        snprintf(err, errlen, "rdma device %s has no active port", ops->get_device_name(ibdev));
        return -1;
    }
    return opened;
}

int rdma_devs_open(const verbs_ops *ops, const char *spec, int cq_depth, int gid_index,
                   rdma_dev *devs, char *err, size_t errlen) {
    devspec want[RDMA_MAX_DEVS];
    int nwant = parse_spec(spec, want, err, errlen);
    if (nwant < 0) return -1;
    int num = 0, n = 0;
    struct ibv_device **list = device_list(ops, &num, err, errlen);
    if (!list) return -1;
    for (int i = 0; i < (nwant ? nwant : num) && n < RDMA_MAX_DEVS; i++) {
        struct ibv_device *ibdev = nwant ? find_device(ops, list, num, want[i].name) : list[i];
        if (!ibdev) {
            snprintf(err, errlen, "rdma device '%s' not found", want[i].name);
            goto fail;
        }
        int got = open_device_ports(ops, ibdev, nwant ? want[i].port : 0, nwant > 0, cq_depth,
                                    gid_index, devs, n, err, errlen);
        if (got < 0) goto fail;
        n += got;
    }
    ops->free_device_list(list);
    if (n == 0) snprintf(err, errlen, "no active RDMA port on %d device(s)", num);
    return n ? n : -1;
fail:
    ops->free_device_list(list);
    rdma_devs_close(devs, n);
    return -1;
}

void rdma_devs_close(rdma_dev *devs, int n) {
    for (int i = 0; i < n; i++) dev_close(&devs[i]);
}

int rdma_devs_probe(const verbs_ops *ops, char *why, size_t whylen) {
    int num = 0, ports = 0;
    struct ibv_device **list = device_list(ops, &num, why, whylen);
    if (!list) return 0;
    for (int i = 0; i < num; i++)
        ports += __builtin_popcount(active_ports(ops, list[i]));
    ops->free_device_list(list);
    if (ports == 0) snprintf(why, whylen, "%d RDMA device(s) found but no active port", num);
    return ports;
}

int rdma_dev_reserve_cq(rdma_dev *d, int max_send_wr) {
    if (d->cq_reserved > d->cq_depth - max_send_wr) return -1;
    d->cq_reserved += max_send_wr;
    return 0;
}

void rdma_dev_release_cq(rdma_dev *d, int max_send_wr) {
    d->cq_reserved -= max_send_wr;
}
