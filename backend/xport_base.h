/* backend/xport_base.h - bookkeeping the socket transports share.
 *
 * TCP and shm keep their completions in a queue that poll() drains,
 * their open paths in a list, and their registered regions in another
 * (neither needs the memory pinned or keyed, unlike RDMA): all three
 * live here once. */
#ifndef MKV_XPORT_BASE_H
#define MKV_XPORT_BASE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/transport.h"

/* Completions not yet returned by poll(); grows as needed. */
typedef struct te_cq {
    te_cqe *v;
    int head, len, cap;
} te_cq;

void te_cq_push(te_cq *q, te_path *p, uint64_t cookie, int status);
/* The same with the CRC32C of the bytes moved (te_cqe.has_crc). */
void te_cq_push_crc(te_cq *q, te_path *p, uint64_t cookie, int status, uint32_t crc);
/* Moves up to max completions to out; returns how many. */
int te_cq_pop(te_cq *q, te_cqe *out, int max);
static inline int te_cq_empty(const te_cq *q) { return q->head == q->len; }
void te_cq_free(te_cq *q);

/* Does [addr, addr+len) lie inside [base, base+blen)? Overflow-safe. */
static inline int te_range_inside(const void *base, size_t blen, const void *addr, uint64_t len) {
    uintptr_t a = (uintptr_t)base, b = (uintptr_t)addr;
    return b >= a && len <= blen && b - a <= blen - len;
}

/* A transport's open paths: each path struct has a te_link as its first
 * member, so a link is its path. */
typedef struct te_link {
    struct te_link *prev, *next;
} te_link;

void te_link_push(te_link **head, te_link *l);
void te_link_remove(te_link **head, te_link *l);

/* Registered regions: reg_mem/dereg_mem of a transport that needs no
 * more than to remember them. */
typedef struct te_mr_node te_mr_node;
typedef struct te_mr_list {
    te_mr_node *head;
} te_mr_list;

int te_mr_list_add(te_mr_list *l, void *addr, size_t len, te_mr **out, char *err, size_t errlen);
void te_mr_list_remove(te_mr_list *l, te_mr *mr);
/* 1 if one region holds all of [addr, addr+len). */
int te_mr_list_covers(const te_mr_list *l, const void *addr, uint64_t len);
struct te_req;
/* 1 if r's local bytes (local, or every segment of iov) lie in l's regions. */
int te_mr_list_covers_req(const te_mr_list *l, const struct te_req *r);
void te_mr_list_clear(te_mr_list *l);

/* The part of a socket transport's state the helpers above make up: the
 * first member of tcp's and shm's own struct, so a te_transport is one. */
typedef struct te_xport_base {
    te_transport t;
    te_link *paths;
    te_mr_list mrs;
    te_cq cq;
} te_xport_base;

void te_xport_base_init(te_xport_base *b, const te_transport_ops *ops, const te_config *cfg);
/* reg_mem / dereg_mem for a transport built on te_xport_base. */
int te_xport_reg_mem(te_transport *t, void *addr, size_t len, te_mr **out, char *err, size_t errlen);
void te_xport_dereg_mem(te_transport *t, te_mr *mr);
/* Closes every path with close_path (which unlinks it), then forgets the
 * regions and completions; the caller frees its struct. */
void te_xport_base_clear(te_xport_base *b, void (*close_path)(te_path *p));

#endif
