/* backend/xport_base.c - see xport_base.h. */
#include "backend/xport_base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

struct te_mr_node {
    te_mr mr;
    te_mr_node *next;
};

static te_cqe *cq_slot(te_cq *q) {
    if (q->head > 0 && q->head == q->len) q->head = q->len = 0;
    if (q->len == q->cap) {
        if (q->head > 0) {
            memmove(q->v, q->v + q->head, (size_t)(q->len - q->head) * sizeof *q->v);
            q->len -= q->head;
            q->head = 0;
        } else {
            q->cap = q->cap ? q->cap * 2 : 64;
            q->v = xrealloc(q->v, (size_t)q->cap * sizeof *q->v);
        }
    }
    return &q->v[q->len++];
}

void te_cq_push(te_cq *q, te_path *p, uint64_t cookie, int status) {
    *cq_slot(q) = (te_cqe){ .cookie = cookie, .status = status, .path = p };
}

void te_cq_push_crc(te_cq *q, te_path *p, uint64_t cookie, int status, uint32_t crc) {
    *cq_slot(q) = (te_cqe){ .cookie = cookie, .status = status, .path = p, .has_crc = 1, .crc = crc };
}

int te_cq_pop(te_cq *q, te_cqe *out, int max) {
    int n = 0;
    while (n < max && q->head < q->len) out[n++] = q->v[q->head++];
    return n;
}

void te_cq_free(te_cq *q) {
    free(q->v);
    *q = (te_cq){ 0 };
}

void te_link_push(te_link **head, te_link *l) {
    l->prev = NULL;
    l->next = *head;
    if (*head) (*head)->prev = l;
    *head = l;
}

void te_link_remove(te_link **head, te_link *l) {
    if (l->prev) l->prev->next = l->next;
    else *head = l->next;
    if (l->next) l->next->prev = l->prev;
    l->prev = l->next = NULL;
}

int te_mr_list_add(te_mr_list *l, void *addr, size_t len, te_mr **out, char *err, size_t errlen) {
    if (!addr || !len) { snprintf(err, errlen, "reg_mem: empty region"); return -1; }
    te_mr_node *m = xcalloc(1, sizeof *m);
    m->mr = (te_mr){ .addr = addr, .len = len, .priv = m };
    m->next = l->head;
    l->head = m;
    *out = &m->mr;
    return 0;
}

void te_mr_list_remove(te_mr_list *l, te_mr *mr) {
    for (te_mr_node **pp = &l->head; *pp; pp = &(*pp)->next) {
        if (&(*pp)->mr != mr) continue;
        te_mr_node *m = *pp;
        *pp = m->next;
        free(m);
        return;
    }
}

int te_mr_list_covers(const te_mr_list *l, const void *addr, uint64_t len) {
    for (const te_mr_node *m = l->head; m; m = m->next)
        if (te_range_inside(m->mr.addr, m->mr.len, addr, len)) return 1;
    return 0;
}

void te_mr_list_clear(te_mr_list *l) {
    while (l->head) te_mr_list_remove(l, &l->head->mr);
}

void te_xport_base_init(te_xport_base *b, const te_transport_ops *ops, const te_config *cfg) {
    b->t.ops = ops;
    b->t.cfg = *cfg;
    te_config_defaults(&b->t.cfg);
    b->t.priv = b;
}

int te_xport_reg_mem(te_transport *t, void *addr, size_t len, te_mr **out, char *err, size_t errlen) {
    return te_mr_list_add(&((te_xport_base *)t)->mrs, addr, len, out, err, errlen);
}

void te_xport_dereg_mem(te_transport *t, te_mr *mr) { te_mr_list_remove(&((te_xport_base *)t)->mrs, mr); }

void te_xport_base_clear(te_xport_base *b, void (*close_path)(te_path *p)) {
    while (b->paths) close_path((te_path *)b->paths);
    te_mr_list_clear(&b->mrs);
    te_cq_free(&b->cq);
}

int te_mr_list_covers_req(const te_mr_list *l, const te_req *r) {
    if (!r->niov) return te_mr_list_covers(l, r->local, r->len);
    if (r->niov < 0 || r->niov > TE_REQ_SEGS || !r->iov) return 0;
    uint64_t sum = 0;
    for (int i = 0; i < r->niov; i++) {
        if (!te_mr_list_covers(l, r->iov[i].iov_base, r->iov[i].iov_len)) return 0;
        sum += r->iov[i].iov_len;
    }
    return sum == r->len;
}
