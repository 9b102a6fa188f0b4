/* master/ack_wait.c - see ack_wait.h. */
#include "master/ack_wait.h"

#include <stdlib.h>

#include "core/util.h"

/* One mark waiting in its node's FIFO. */
typedef struct ack_entry {
    ack_waiter *x;
    uint64_t epoch, seq;
} ack_entry;

typedef struct ack_fifo {   /* a ring */
    ack_entry *v;
    size_t head, n, cap;
} ack_fifo;

struct ack_waiter {
    void *owner;
    uint32_t left;              /* nodes whose mark is not met yet */
    uint32_t refs;              /* FIFO entries still pointing here */
    int released;               /* answered or cancelled: its entries only drain */
    ack_why why;
    uint64_t deadline_ms;
    ack_waiter *prev, *next;    /* waiters not released, by deadline */
};

struct ack_wait {
    ack_release_fn *fn;
    void *ctx;
    ack_fifo *fifos;            /* fifos[node - 1] */
    uint32_t nfifos;
    ack_waiter *head, *tail;
    ack_wait_stats st;
};

ack_wait *ack_wait_create(ack_release_fn *fn, void *ctx) {
    ack_wait *w = xcalloc(1, sizeof *w);
    w->fn = fn;
    w->ctx = ctx;
    return w;
}

static void unref(ack_waiter *x) {
    if (--x->refs == 0 && x->released) free(x);
}

void ack_wait_free(ack_wait *w) {
    if (!w) return;
    /* Every waiter not freed yet has an entry (a live one has left > 0). */
    for (uint32_t i = 0; i < w->nfifos; i++) {
        ack_fifo *f = &w->fifos[i];
        for (size_t k = 0; k < f->n; k++) {
            ack_waiter *x = f->v[(f->head + k) % f->cap].x;
            x->released = 1;
            unref(x);
        }
        free(f->v);
    }
    free(w->fifos);
    free(w);
}

static ack_fifo *fifo_of(ack_wait *w, uint32_t node) {
    if (node == 0) return NULL;
    if (node > w->nfifos) {
        w->fifos = xrealloc(w->fifos, node * sizeof *w->fifos);
        for (uint32_t i = w->nfifos; i < node; i++) w->fifos[i] = (ack_fifo){0};
        w->nfifos = node;
    }
    return &w->fifos[node - 1];
}

static void fifo_push(ack_fifo *f, ack_entry e) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        ack_entry *v = xmalloc(cap * sizeof *v);
        for (size_t k = 0; k < f->n; k++) v[k] = f->v[(f->head + k) % f->cap];
        free(f->v);
        f->v = v;
        f->cap = cap;
        f->head = 0;
    }
    f->v[(f->head + f->n++) % f->cap] = e;
}

static ack_entry fifo_pop(ack_fifo *f) {
    ack_entry e = f->v[f->head];
    f->head = (f->head + 1) % f->cap;
    f->n--;
    return e;
}

static void unlink_live(ack_wait *w, ack_waiter *x) {
    if (x->prev) x->prev->next = x->next;
    else w->head = x->next;
    if (x->next) x->next->prev = x->prev;
    else w->tail = x->prev;
    x->prev = x->next = NULL;
    w->st.waiting--;
}

static void release(ack_wait *w, ack_waiter *x, ack_why why) {
    x->released = 1;
    unlink_live(w, x);
    if (why == ACK_BY_NODES) w->st.by_nodes++;
    else if (why == ACK_BY_RESET) w->st.by_reset++;
    else w->st.by_bound++;
    w->fn(x->owner, why, w->ctx);
    if (x->refs == 0) free(x);
}

/* One of x's marks is met (or void: why). */
static void meet(ack_wait *w, ack_waiter *x, ack_why why) {
    x->refs--;
    if (x->released) {
        if (x->refs == 0) free(x);
        return;
    }
    if (why > x->why) x->why = why;
    if (--x->left == 0) release(w, x, x->why);
}

ack_waiter *ack_wait_add(ack_wait *w, const mm_note_mark *marks, size_t n, uint64_t deadline_ms, void *owner) {
    ack_waiter *x = xcalloc(1, sizeof *x);
    x->owner = owner;
    x->deadline_ms = deadline_ms;
    for (size_t i = 0; i < n; i++) {
        ack_fifo *f = fifo_of(w, marks[i].node);
        if (!f) continue;
        fifo_push(f, (ack_entry){x, marks[i].epoch, marks[i].seq});
        x->left++;
        x->refs++;
    }
    /* By deadline: with one bound for all, that is the end. */
    ack_waiter *after = w->tail;
    while (after && after->deadline_ms > deadline_ms) after = after->prev;
    x->prev = after;
    x->next = after ? after->next : w->head;
    if (x->next) x->next->prev = x;
    else w->tail = x;
    if (after) after->next = x;
    else w->head = x;
    w->st.waiting++;
    if (x->left == 0) release(w, x, ACK_BY_NODES);   /* nothing to wait for */
    return x;
}

void ack_wait_acked(ack_wait *w, uint32_t node, uint64_t epoch, uint64_t seq) {
    ack_fifo *f = node && node <= w->nfifos ? &w->fifos[node - 1] : NULL;
    while (f && f->n) {
        const ack_entry *e = &f->v[f->head];
        if (e->epoch < epoch) meet(w, fifo_pop(f).x, ACK_BY_RESET);
        else if (e->epoch == epoch && e->seq <= seq) meet(w, fifo_pop(f).x, ACK_BY_NODES);
        else break;
    }
}

void ack_wait_epoch(ack_wait *w, uint32_t node, uint64_t epoch) {
    ack_fifo *f = node && node <= w->nfifos ? &w->fifos[node - 1] : NULL;
    while (f && f->n && f->v[f->head].epoch < epoch) meet(w, fifo_pop(f).x, ACK_BY_RESET);
}

void ack_wait_each_node(ack_wait *w, void (*fn)(uint32_t node, void *ctx), void *ctx) {
    for (uint32_t i = 0; i < w->nfifos; i++)
        if (w->fifos[i].n) fn(i + 1, ctx);
}

void ack_wait_expire(ack_wait *w, uint64_t now_ms) {
    while (w->head && w->head->deadline_ms <= now_ms) release(w, w->head, ACK_BY_BOUND);
}

void ack_wait_reset_all(ack_wait *w) {
    for (uint32_t i = 0; i < w->nfifos; i++) ack_wait_epoch(w, i + 1, UINT64_MAX);
}

void ack_wait_cancel(ack_wait *w, ack_waiter *x) {
    if (x->released) return;
    x->released = 1;
    unlink_live(w, x);
    if (x->refs == 0) free(x);
}

void ack_wait_each(ack_wait *w, void (*fn)(ack_waiter *x, void *owner, void *ctx), void *ctx) {
    for (ack_waiter *x = w->head, *next; x; x = next) {
        next = x->next;
        fn(x, x->owner, ctx);
    }
}

uint64_t ack_wait_next_deadline(const ack_wait *w) { return w->head ? w->head->deadline_ms : UINT64_MAX; }

void ack_wait_get_stats(const ack_wait *w, ack_wait_stats *st) { *st = w->st; }
