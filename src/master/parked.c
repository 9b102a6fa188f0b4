/* master/parked.c - a request parked until the master can answer it
 * (put_wait.c: room; get_wait.c: loads from disk): its items and keys
 * copied out of the command's arguments, which go when it returns, and
 * its client blocked (its later commands wait; the loop does not). The
 * queue is the list with its timer and before-sleep look, so each kind
 * of wait says only what it retries and how it answers. */
#include <stdlib.h>
#include <string.h>

#include "core/sweep.h"
#include "core/util.h"
#include "master/master.h"
#include "server/networking.h"

master_parked *master_park(master_parked **head, client *c, const mm_item *it, size_t n, int form,
                           uint64_t now_ms, uint64_t bound_ms) {
    master_parked *p = xcalloc(1, sizeof *p);
    size_t keybytes = 0;
    for (size_t i = 0; i < n; i++) keybytes += it[i].keylen;
    p->keys = xmalloc(keybytes ? keybytes : 1);
    p->it = xmemdup(it, n * sizeof *it);
    p->stamp = xcalloc(n, sizeof *p->stamp);
    for (size_t i = 0, off = 0; i < n; off += it[i].keylen, i++) {
        memcpy(p->keys + off, it[i].key, it[i].keylen);
        p->it[i].key = p->keys + off;
        if (it[i].status == PROTO_OK) p->stamp[i] = mm_obj_stamp(it[i].obj);
    }
    p->c = c;
    p->n = n;
    p->form = form;
    p->t0_ms = now_ms;
    p->deadline_ms = now_ms + bound_ms;
    master_parked **tail = head;
    while (*tail) tail = &(*tail)->next;
    *tail = p;
    client_block(c);
    return p;
}

void master_parked_free(master_parked *p) {
    free(p->it);
    free(p->stamp);
    free(p->keys);
    free(p);
}

void master_parked_free_all(master_parked **head) {
    while (*head) {
        master_parked *p = *head;
        *head = p->next;
        master_parked_free(p);   /* the clients go with the server */
    }
}

size_t master_parked_count(const master_parked *head) {
    size_t n = 0;
    for (; head; head = head->next) n++;
    return n;
}

uint64_t master_parked_next(const master_parked *head, uint64_t next_ms) {
    for (; head; head = head->next)
        if (head->deadline_ms < next_ms) next_ms = head->deadline_ms;
    return next_ms;
}

/* ---- the queue ---- */

static void queue_rearm(master_park_queue *q, uint64_t now_ms) {
    uint64_t next = q->head ? master_parked_next(q->head, q->ops->wake_by(q->owner, now_ms)) : UINT64_MAX;
    sweep_arm(q->sweep, next, now_ms);
}

/* Before a sleep, only if what the waits need changed in the iteration. */
static void on_sweep(void *data, int timed) {
    master_park_queue *q = data;
    if (timed || (q->head && q->ops->changed(q->owner))) master_park_queue_run(q);
}

void master_park_queue_init(master_park_queue *q, event_loop *el, const master_park_ops *ops, void *owner) {
    memset(q, 0, sizeof *q);
    q->ops = ops;
    q->owner = owner;
    q->sweep = sweep_create(el, SERVER_HOOK_FLUSH - 1, on_sweep, q);
}

void master_park_queue_fini(master_park_queue *q) {
    master_parked_free_all(&q->head);
    sweep_free(q->sweep);
}

master_parked *master_park_queue_add(master_park_queue *q, client *c, const mm_item *it, size_t n, int form,
                                     uint64_t now_ms, uint64_t bound_ms) {
    master_parked *p = master_park(&q->head, c, it, n, form, now_ms, bound_ms);
    queue_rearm(q, now_ms);   /* retried from the loop, not from inside the command */
    return p;
}

void master_park_queue_run(master_park_queue *q) {
    uint64_t now = wall_ms();
    q->ops->before(q->owner, now);
    for (master_parked **pp = &q->head; *pp;) {
        master_parked *p = *pp;
        if (q->ops->retry(q->owner, p, now) || now >= p->deadline_ms) {
            *pp = p->next;
            q->ops->finish(q->owner, p);
            continue;
        }
        pp = &p->next;
    }
    q->ops->after(q->owner);
    queue_rearm(q, now);
}

void master_park_queue_forget(master_park_queue *q, client *c) {
    for (master_parked **pp = &q->head; *pp;) {
        master_parked *p = *pp;
        if (p->c != c) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        if (q->ops->forget) q->ops->forget(q->owner, p);
        master_parked_free(p);
    }
}
