/* Unit tests for the answers that wait for their nodes' acknowledgements
 * (src/master/ack_wait.h) and the marks a command leaves in the master's
 * metadata (mm_notes_track / mm_notes_touched). Time is a plain number:
 * no sleeps. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "master/ack_wait.h"
#include "master/meta.h"
#include "test.h"

/* o's replicas, decoded for the statement (object_reps) */
#define REPS(o) object_reps((o), &(obj_reps){.r = {{0, NULL}}})

/* What the release callback saw, in order. */
typedef struct seen {
    int owner[64];
    ack_why why[64];
    int n;
} seen;

static void on_release(void *owner, ack_why why, void *ctx) {
    seen *s = ctx;
    s->owner[s->n] = (int)(intptr_t)owner;
    s->why[s->n++] = why;
}

static ack_waiter *wait_on(ack_wait *w, int owner, uint64_t deadline, int nmarks, ...) {
    mm_note_mark marks[8];
    va_list ap;
    va_start(ap, nmarks);
    for (int i = 0; i < nmarks; i++) {
        marks[i].node = va_arg(ap, uint32_t);
        marks[i].epoch = 0;
        marks[i].seq = va_arg(ap, uint64_t);
    }
    va_end(ap);
    return ack_wait_add(w, marks, (size_t)nmarks, deadline, (void *)(intptr_t)owner);
}

/* Each waiter goes once all its nodes acknowledged, whatever the order. */
static void test_release_order(void) {
    seen s = {0};
    ack_wait *w = ack_wait_create(on_release, &s);
    wait_on(w, 1, 1000, 2, 1u, (uint64_t)1, 2u, (uint64_t)1);
    wait_on(w, 2, 1000, 1, 1u, (uint64_t)2);
    wait_on(w, 3, 1000, 2, 1u, (uint64_t)3, 2u, (uint64_t)2);
    ack_wait_stats st;
    ack_wait_get_stats(w, &st);
    ASSERT_EQ(st.waiting, 3);
    ack_wait_acked(w, 1, 0, 0);   /* nothing taken yet */
    ASSERT_EQ(s.n, 0);
    ack_wait_acked(w, 1, 0, 2);   /* 2 is whole, 1 still waits for node 2 */
    ASSERT_EQ(s.n, 1);
    ASSERT_EQ(s.owner[0], 2);
    ack_wait_acked(w, 2, 0, 1);
    ASSERT_EQ(s.n, 2);
    ASSERT_EQ(s.owner[1], 1);
    ack_wait_acked(w, 1, 0, 3);   /* 3 waits for node 2 still */
    ASSERT_EQ(s.n, 2);
    ack_wait_acked(w, 2, 0, 5);
    ASSERT_EQ(s.n, 3);
    ASSERT_EQ(s.owner[2], 3);
    for (int i = 0; i < 3; i++) ASSERT_EQ(s.why[i], ACK_BY_NODES);
    ack_wait_get_stats(w, &st);
    ASSERT_EQ(st.waiting, 0);
    ASSERT_EQ(st.by_nodes, 3);
    ack_wait_free(w);
}

/* A node whose notes were reset (it died, or registered anew) releases
 * what waits on it, counted apart; an ack of the new epoch voids older
 * marks too. */
static void test_reset_releases(void) {
    seen s = {0};
    ack_wait *w = ack_wait_create(on_release, &s);
    wait_on(w, 1, 1000, 2, 1u, (uint64_t)1, 2u, (uint64_t)1);
    wait_on(w, 2, 1000, 1, 3u, (uint64_t)4);
    ack_wait_acked(w, 2, 0, 1);
    ASSERT_EQ(s.n, 0);
    ack_wait_epoch(w, 1, 0);   /* still the same epoch: nothing */
    ASSERT_EQ(s.n, 0);
    ack_wait_epoch(w, 1, 1);   /* node 1 died */
    ASSERT_EQ(s.n, 1);
    ASSERT_EQ(s.owner[0], 1);
    ASSERT_EQ(s.why[0], ACK_BY_RESET);
    ack_wait_acked(w, 3, 2, 0);   /* node 3 registered twice since */
    ASSERT_EQ(s.n, 2);
    ASSERT_EQ(s.why[1], ACK_BY_RESET);
    ack_wait_stats st;
    ack_wait_get_stats(w, &st);
    ASSERT_EQ(st.by_reset, 2);
    ASSERT_EQ(st.by_nodes, 0);
    /* A master that drops its metadata releases all. */
    wait_on(w, 3, 1000, 1, 1u, (uint64_t)9);
    ack_wait_reset_all(w);
    ASSERT_EQ(s.n, 3);
    ack_wait_free(w);
}

/* The bound releases a waiter whose node never acknowledges; the late
 * ack after it releases nothing again. A cancelled waiter is never
 * released. */
static void test_bound_and_cancel(void) {
    seen s = {0};
    ack_wait *w = ack_wait_create(on_release, &s);
    wait_on(w, 1, 100, 1, 1u, (uint64_t)1);
    wait_on(w, 2, 200, 1, 1u, (uint64_t)2);
    ack_waiter *c = wait_on(w, 3, 150, 1, 2u, (uint64_t)1);
    ASSERT_EQ(ack_wait_next_deadline(w), 100);
    ack_wait_expire(w, 99);
    ASSERT_EQ(s.n, 0);
    ack_wait_expire(w, 100);
    ASSERT_EQ(s.n, 1);
    ASSERT_EQ(s.why[0], ACK_BY_BOUND);
    ack_wait_cancel(w, c);
    ASSERT_EQ(ack_wait_next_deadline(w), 200);
    ack_wait_acked(w, 1, 0, 1);   /* the bound one's late ack */
    ack_wait_acked(w, 2, 0, 1);   /* the cancelled one's */
    ASSERT_EQ(s.n, 1);
    ack_wait_acked(w, 1, 0, 2);
    ASSERT_EQ(s.n, 2);
    ASSERT_EQ(s.owner[1], 2);
    ASSERT_EQ(s.why[1], ACK_BY_NODES);
    ack_wait_stats st;
    ack_wait_get_stats(w, &st);
    ASSERT_EQ(st.by_bound, 1);
    ASSERT_EQ(st.by_nodes, 1);
    ASSERT_EQ(st.waiting, 0);
    ASSERT_EQ(ack_wait_next_deadline(w), UINT64_MAX);
    /* Freed with marks still queued: nothing released, nothing leaked. */
    wait_on(w, 4, 300, 2, 1u, (uint64_t)7, 5u, (uint64_t)7);
    ack_wait_free(w);
    ASSERT_EQ(s.n, 2);
}

/* Many waiters on one node: each ack pops exactly the ones it covers. */
static void test_many_in_order(void) {
    seen s = {0};
    ack_wait *w = ack_wait_create(on_release, &s);
    for (int i = 1; i <= 40; i++) wait_on(w, i, 1000, 1, 7u, (uint64_t)i);
    ack_wait_acked(w, 7, 0, 25);
    ASSERT_EQ(s.n, 25);
    for (int i = 0; i < 25; i++) ASSERT_EQ(s.owner[i], i + 1);
    ack_wait_acked(w, 7, 0, 40);
    ASSERT_EQ(s.n, 40);
    ASSERT_EQ(s.owner[39], 40);
    ack_wait_free(w);
}

/* The marks of a command: each node told something, once, with the
 * acknowledgement that covers its last note; none without notes. */
static void test_marks_of_commands(void) {
    mm_config c;
    mm_config_defaults(&c);
    master_meta *m = mm_create(&c);
    char err[PROTO_ERR_LEN];
    for (int i = 0; i < 3; i++) {
        char addr[32];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", 9000 + i);
        const char *addrs[] = {addr};
        uint32_t id;
        ASSERT(mm_node_register(m, 1 << 20, addrs, 1, 0, &id, err, sizeof err) == PROTO_OK);
        if (i < 2) mm_node_get(m, id)->acks_awaited = 1;
    }
    object *o = NULL;
    size_t n;
    /* Node 3 does not pull with WAIT: a put on it waits for nobody. */
    mm_notes_track(m);
    ASSERT_EQ(mm_put_start(m, "x", 1, 100, 3, 0, &o, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_put_end(m, "x", 1, 7, NULL, 0, err, sizeof err), PROTO_OK);
    const mm_note_mark *x = mm_notes_touched(m, &n);
    ASSERT_EQ(n, 2);
    ASSERT(x[0].node != 3 && x[1].node != 3);
    mm_node_get(m, 3)->acks_awaited = 1;
    mm_notes_track(m);
    ASSERT_EQ(mm_put_start(m, "k", 1, 100, 2, 0, &o, err, sizeof err), PROTO_OK);
    mm_notes_touched(m, &n);
    ASSERT_EQ(n, 0);   /* a pending put tells nobody */
    mm_notes_track(m);
    ASSERT_EQ(mm_put_end(m, "k", 1, 7, NULL, 0, err, sizeof err), PROTO_OK);
    const mm_note_mark *mk = mm_notes_touched(m, &n);
    ASSERT_EQ(n, 2);
    uint32_t a = REPS(o)[0].extents[0].node, b = REPS(o)[1].extents[0].node;
    ASSERT(mk[0].node == a || mk[0].node == b);
    ASSERT(mk[1].node == a || mk[1].node == b);
    ASSERT(mk[0].node != mk[1].node);
    ASSERT_EQ(mk[0].seq, 2);   /* after x's */
    ASSERT_EQ(mk[1].seq, 2);
    mm_notes_track(m);
    ASSERT_EQ(mm_remove(m, "k", 1, 10, err, sizeof err), PROTO_OK);
    mk = mm_notes_touched(m, &n);
    ASSERT_EQ(n, 2);
    ASSERT_EQ(mk[0].seq, 3);   /* the drop comes after the hold */
    mm_notes_track(m);
    ASSERT(mm_remove(m, "k", 1, 10, err, sizeof err) == PROTO_NOTFOUND);
    mm_notes_touched(m, &n);
    ASSERT_EQ(n, 0);
    /* Taking the acknowledgement moves notes_seq to the mark. */
    mm_node_holdings_ack(m, a, 3);
    ASSERT_EQ(mm_node_get(m, a)->notes_seq, 3);
    /* A dead node's notes are reset: a new epoch, and it is not waited
     * for until its link pulls again. */
    uint64_t epoch = mm_node_get(m, b)->notes_epoch;
    mm_node_fail(m, b, "test", 20);
    ASSERT(mm_node_get(m, b)->notes_epoch > epoch);
    ASSERT_EQ(mm_node_get(m, b)->acks_awaited, 0);
    mm_destroy(m);
}

int main(void) {
    RUN_TEST(test_release_order);
    RUN_TEST(test_reset_releases);
    RUN_TEST(test_bound_and_cancel);
    RUN_TEST(test_many_in_order);
    RUN_TEST(test_marks_of_commands);
    TEST_EXIT();
}
