/* master/acks.c - MOON.PUTEND, MPUTEND, REMOVE and FLUSH answered once
 * their nodes hold the outcome (ack_wait.h says why).
 *
 * The command runs as ever, its reply written into a reply slot
 * (networking.h); if it gave notes to nodes the slot is held, else it
 * goes at once. Other commands of the client go on meanwhile (a
 * gateway's pipelined puts keep flowing), their replies queued behind
 * the slot, so a client still reads its answers in order. Acknowledged
 * notes (MOON.HOLDINGS), a node's notes reset (it died or registered
 * anew) and the bound release a slot; the nodes' acknowledgements come
 * one pull round trip after the notes were handed out (holdings_wait.c
 * answers parked pulls before the loop sleeps, so one iteration's notes
 * go in one reply per node). A master that may no longer lead when a
 * slot is released (its lease ran out, it stood down) answers -READONLY
 * instead: a stalled old leader acknowledges nothing. */
#include <stdlib.h>

#include "core/sweep.h"
#include "core/util.h"
#include "master/ack_wait.h"
#include "master/master.h"
#include "server/info.h"
#include "server/networking.h"

typedef struct acked_reply {
    client *c;
    reply_slot *slot;
    uint64_t term;            /* master_term when it was written */
} acked_reply;

struct master_acks {
    master *m;
    ack_wait *w;
    sweep *sweep;             /* before each sleep and at the next bound */
    reply_slot *cur;          /* the slot of the command running */
};

/* The reply was written in another term than this one: -READONLY. */
static void refuse_other_term(client *c) {
    master_reply_fail(c, PROTO_READONLY, "the term changed while the nodes were told");
}

static void on_release(void *owner, ack_why why, void *ctx) {
    master_acks *a = ctx;
    acked_reply *r = owner;
    client *c = r->c;
    if (!master_may_lead(a->m) || master_term(a->m) != r->term) {
        client_slot_clear(c, r->slot);
        client_slot_begin(c, r->slot);
        if (!master_refuse_unless_leading(c)) refuse_other_term(c);
    }
    client_slot_end(c, r->slot);
    free(r);
}

static void drop_of(ack_waiter *x, void *owner, void *ctx) {
    ack_wait_cancel(ctx, x);
    free(owner);
}

static void node_epoch(uint32_t id, void *ctx) {
    master_acks *a = ctx;
    const mm_node *n = mm_node_get(a->m->meta, id);
    ack_wait_epoch(a->w, id, n ? n->notes_epoch : UINT64_MAX);
}

/* Release what waits on reset nodes or past its bound; wake for the next bound. */
static void run_sweep(void *data, int timed) {
    master_acks *a = data;
    uint64_t now = mono_ms();
    ack_wait_each_node(a->w, node_epoch, a);
    ack_wait_expire(a->w, now);
    sweep_arm(a->sweep, ack_wait_next_deadline(a->w), now);
}

master_acks *acks_create(master *m) {
    master_acks *a = xcalloc(1, sizeof *a);
    a->m = m;
    a->w = ack_wait_create(on_release, a);
    /* before the flush, so the replies released go out in this iteration */
    a->sweep = sweep_create(m->srv->loop, SERVER_HOOK_FLUSH - 1, run_sweep, a);
    return a;
}

void acks_destroy(master_acks *a) {
    if (!a) return;
    /* The clients go with the server: answer none. */
    ack_wait_each(a->w, drop_of, a->w);
    ack_wait_free(a->w);
    sweep_free(a->sweep);
    free(a);
}

void acks_begin(client *c) {
    master *m = c->srv->role;
    master_acks *a = m->acks;
    if (!a) return;
    mm_notes_track(m->meta);
    a->cur = client_slot_open(c);
    client_slot_begin(c, a->cur);
}

void acks_end(client *c) {
    master *m = c->srv->role;
    master_acks *a = m->acks;
    if (!a || !a->cur) return;
    reply_slot *s = a->cur;
    a->cur = NULL;
    size_t n;
    const mm_note_mark *marks = mm_notes_touched(m->meta, &n);
    if (n == 0) {   /* no node was told anything: nothing to wait for */
        client_slot_end(c, s);
        return;
    }
    client_slot_hold(c, s);
    acked_reply *r = xmalloc(sizeof *r);
    *r = (acked_reply){c, s, master_term(m)};
    ack_wait_add(a->w, marks, n, mono_ms() + MASTER_ACK_BOUND_MS, r);
}

void acks_node_acked(master_acks *a, uint32_t id) {
    const mm_node *n = a ? mm_node_get(a->m->meta, id) : NULL;
    if (n) ack_wait_acked(a->w, id, n->notes_epoch, n->notes_seq);
}

void acks_reset(master_acks *a) {
    if (a) ack_wait_reset_all(a->w);
}

typedef struct forget_ctx {
    ack_wait *w;
    client *c;
} forget_ctx;

static void forget_of(ack_waiter *x, void *owner, void *ctx) {
    forget_ctx *f = ctx;
    if (((acked_reply *)owner)->c != f->c) return;
    ack_wait_cancel(f->w, x);
    free(owner);
}

void acks_forget(master_acks *a, client *c) {
    forget_ctx f = {a ? a->w : NULL, c};
    if (a && client_slots_open(c)) ack_wait_each(a->w, forget_of, &f);
}

void acks_info(const master_acks *a, resp_buf *out) {
    ack_wait_stats st = {0};
    if (a) ack_wait_get_stats(a->w, &st);
    info_field(out, "acks_waiting", "%llu", (unsigned long long)st.waiting);
    info_field(out, "acks_by_nodes", "%llu", (unsigned long long)st.by_nodes);
    info_field(out, "acks_unconfirmed", "%llu", (unsigned long long)st.by_reset);
    info_field(out, "acks_by_bound", "%llu", (unsigned long long)st.by_bound);
}
