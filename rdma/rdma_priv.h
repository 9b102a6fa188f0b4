/* rdma/rdma_priv.h - the client transport's internals, shared by
 * rdma_transport.c (memory, submit, poll) and rdma_conn.c (QP life). */
#ifndef MKV_RDMA_PRIV_H
#define MKV_RDMA_PRIV_H

#include <stdint.h>

#include "rdma/rdma_transport.h"

/* wr_id = [table index:16][generation:8][sequence:40]. The index and
 * generation name one QP instance, so a completion left in the CQ by a
 * QP since destroyed (or replaced) is recognised and dropped. */
#define WRID_SEQ_BITS 40
#define WRID_SEQ_MASK ((1ull << WRID_SEQ_BITS) - 1)
#define CONN_TAB_MAX  (1 << 16)

typedef struct rdma_t rdma_t;

typedef struct rdma_slot {
    uint64_t cookie;
    uint64_t posted_us;
} rdma_slot;

/* One RC QP of a path, with its set-up socket. */
typedef struct rdma_conn {
    struct te_path *path;
    int pos;                  /* index in path->conns: the node's port hint */
    int dev;                  /* our port (index in rdma_t.devs) */
    struct ibv_qp *qp;        /* NULL while down */
    int fd;                   /* set-up socket, open for the QP's life */
    int tab;                  /* index in rdma_t.tab while up */
    uint8_t gen;
    uint32_t rights;          /* TE_CAP_* the node opened on this QP */
    uint32_t rkey;            /* segment rkey, valid once rights != 0 */
    uint64_t seg_base;
    int depth;                /* max_send_wr, a power of two */
    rdma_slot *ring;          /* in flight, by sequence & (depth-1) */
    uint64_t head, tail;      /* in flight: [head, tail); unposted at the end */
    struct ibv_send_wr *wrs;  /* the batch being built */
    struct ibv_sge *sges;
    int nbatch;
} rdma_conn;

struct te_path {
    rdma_t *t;
    struct te_path *next;
    char peer[TE_ADDR_LEN];
    uint32_t node_id;         /* from the node, fixed for the path's life */
    uint64_t seg_len;
    int inflight;
    int rr;                   /* next conn to try */
    int nconns;
    rdma_conn conns[RDMA_MAX_QPS_PER_PATH];
};

typedef struct rdma_tab_entry {
    rdma_conn *conn;          /* NULL: free */
    uint8_t gen;
} rdma_tab_entry;

struct rdma_t {
    te_transport base;
    const verbs_ops *ops;
    rdma_options opt;
    rdma_dev devs[RDMA_MAX_DEVS];
    int ndevs;
    int next_dev;             /* spreads paths' first QP over ports */
    struct rdma_mreg **mrs;   /* sorted by address */
    int nmrs, mrcap;
    struct te_path *paths;
    rdma_tab_entry *tab;
    int ntab;
    te_cqe *ready;            /* finished, not yet returned by poll: a ring */
    uint64_t rhead, rtail;
    uint64_t rcap;            /* a power of two */
};

/* rdma_transport.c */
void rdma_complete(rdma_t *t, struct te_path *p, uint64_t cookie, int status);

/* rdma_conn.c */
int rdma_conn_up(rdma_conn *c, char *err, size_t errlen);
/* Finish every request in flight on c with status and take the QP down;
 * the next use brings it up again. */
void rdma_conn_fail(rdma_conn *c, int status);
/* Ask the node to open the right for op on c, showing cap. TE_OK,
 * the node's refusal (TE_EAUTH, TE_ERANGE) or TE_EIO (c then failed). */
int rdma_conn_grant(rdma_conn *c, const te_req *r);
uint64_t rdma_conn_wrid(const rdma_conn *c, uint64_t seq);
/* The conn a completion belongs to, with its full sequence in *seq, or
 * NULL for a stale or foreign completion. */
rdma_conn *rdma_conn_from_wrid(rdma_t *t, uint64_t wr_id, uint64_t *seq);

#endif
