/* master/holdings_wait.c - MOON.HOLDINGS ... WAIT ms: a node's pull that
 * finds nothing to send waits for its next note.
 *
 * Its client is blocked (holdings_wait_park); before the loop sleeps,
 * every parked pull whose node got notes in this iteration is answered,
 * so all of an iteration's notes for a node go in one reply (batching is
 * what keeps put rates up: each put's end waits for its nodes' next ack,
 * acks.c). A pull that takes tasks (TASKS) is answered as soon as its
 * node has one waiting too, or a put wants it to ask for chunks now
 * (a node shared by groups, shares.c). A pull with nothing after wait_ms is answered
 * empty; one of a node whose notes were reset is answered at once. */
#include <stdlib.h>

#include "core/sweep.h"
#include "core/util.h"
#include "master/master.h"
#include "server/info.h"
#include "server/networking.h"

typedef struct parked_pull {
    client *c;
    uint32_t node;
    int form;                 /* MASTER_HOLDINGS_*, | MASTER_HOLDINGS_TASKS */
    uint64_t epoch;           /* the node's notes_epoch when parked */
    uint64_t deadline_ms;     /* mono */
} parked_pull;

struct holdings_wait {
    master *m;
    parked_pull *v;
    size_t n, cap;
    sweep *sweep;             /* before each sleep and at the first deadline */
    uint64_t parked, answered_notes;   /* ever: pulls parked, of them answered with notes */
};

/* Answer v[i] and take it out (the last one moves into its place). */
static void answer(holdings_wait *h, size_t i) {
    parked_pull p = h->v[i];
    h->v[i] = h->v[--h->n];
    const mm_node *n = mm_node_get(h->m->meta, p.node);
    if (n && n->notes_n) h->answered_notes++;
    master_holdings_reply(p.c, p.node, 0, p.form);
    client_unblock(p.c);
}

static int due(holdings_wait *h, const parked_pull *p, uint64_t now) {
    const mm_node *n = mm_node_get(h->m->meta, p->node);
    return !n || n->notes_n || ((p->form & MASTER_HOLDINGS_TASKS) && (n->tasks_waiting || n->chunks_push)) ||
           n->notes_epoch != p->epoch || now >= p->deadline_ms;
}

static void rearm(holdings_wait *h) {
    uint64_t next = UINT64_MAX;
    for (size_t i = 0; i < h->n; i++)
        if (h->v[i].deadline_ms < next) next = h->v[i].deadline_ms;
    sweep_arm(h->sweep, next, mono_ms());
}

static void run(holdings_wait *h) {
    if (!h->n) return;
    uint64_t now = mono_ms();
    for (size_t i = 0; i < h->n;) {
        if (due(h, &h->v[i], now)) answer(h, i);   /* v[i] is another one now */
        else i++;
    }
    rearm(h);
}

static void on_sweep(void *data, int timed) { run(data); }

holdings_wait *holdings_wait_create(master *m) {
    holdings_wait *h = xcalloc(1, sizeof *h);
    h->m = m;
    h->sweep = sweep_create(m->srv->loop, SERVER_HOOK_FLUSH - 1, on_sweep, h);
    return h;
}

void holdings_wait_destroy(holdings_wait *h) {
    if (!h) return;
    sweep_free(h->sweep);
    free(h->v);   /* the clients go with the server */
    free(h);
}

void holdings_wait_park(holdings_wait *h, client *c, uint32_t node, int form, uint64_t wait_ms) {
    for (size_t i = 0; i < h->n; i++)   /* one pull per node: an older one goes now */
        if (h->v[i].node == node) {
            answer(h, i);
            break;
        }
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 16;
        h->v = xrealloc(h->v, h->cap * sizeof *h->v);
    }
    const mm_node *n = mm_node_get(h->m->meta, node);
    h->v[h->n++] = (parked_pull){c, node, form, n ? n->notes_epoch : 0, mono_ms() + wait_ms};
    h->parked++;
    client_block(c);
    rearm(h);
}

void holdings_wait_reset(holdings_wait *h) {
    while (h && h->n) answer(h, 0);
    if (h) rearm(h);
}

void holdings_wait_forget(holdings_wait *h, client *c) {
    for (size_t i = 0; h && i < h->n; i++)
        if (h->v[i].c == c) {
            h->v[i] = h->v[--h->n];
            return;
        }
}

void holdings_wait_info(const holdings_wait *h, resp_buf *out) {
    info_field(out, "holdings_parked", "%zu", h ? h->n : 0);
    info_field(out, "holdings_waits", "%llu", (unsigned long long)(h ? h->parked : 0));
    info_field(out, "holdings_waits_noted", "%llu", (unsigned long long)(h ? h->answered_notes : 0));
}
