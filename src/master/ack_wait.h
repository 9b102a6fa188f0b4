/* master/ack_wait.h - answers that wait until nodes hold what they say.
 *
 * A node learns which objects its bytes are from the master's holdings
 * notes (holdings.c), and a master that restarts rebuilds its table from
 * what nodes learnt. So a put's end, a remove or a flush is answered only
 * once every node it gave a note to has acknowledged that note (its next
 * MOON.HOLDINGS ack passes it): then the answer survives the master.
 *
 * Pure bookkeeping, no sockets and no clock of its own (unit-tested under
 * a fake one). A waiter is made of the marks a command left
 * (mm_notes_touched); each node has a FIFO of the marks waiting on it, in
 * the order they were made, so an acknowledgement pops the ones it covers
 * in O(1) each. A waiter is released once it waits for no node: every
 * node acknowledged, or a node's notes were reset (it died, or registered
 * anew: what it was told is gone, so its acknowledgement never comes), or
 * its bound passed. The release callback answers it. */
#ifndef MKV_MASTER_ACK_WAIT_H
#define MKV_MASTER_ACK_WAIT_H

#include <stddef.h>
#include <stdint.h>

#include "master/meta.h"

/* Why a waiter was released, worst first wins: every node acknowledged,
 * a node's notes were reset before it did, or the bound passed. */
typedef enum ack_why { ACK_BY_NODES = 0, ACK_BY_RESET, ACK_BY_BOUND } ack_why;

typedef struct ack_wait ack_wait;
typedef struct ack_waiter ack_waiter;
/* Called once per waiter (not for a cancelled one), from the call that
 * released it; the waiter is gone when it returns. */
typedef void ack_release_fn(void *owner, ack_why why, void *ctx);

typedef struct ack_wait_stats {
    uint64_t waiting;                      /* waiters not released yet */
    uint64_t by_nodes, by_reset, by_bound; /* released, ever, by why */
} ack_wait_stats;

ack_wait *ack_wait_create(ack_release_fn *fn, void *ctx);
/* Frees everything; releases nothing. */
void ack_wait_free(ack_wait *w);
/* A waiter for marks[0..n) (n > 0), released at deadline_ms at the
 * latest; owner is handed to the release callback. */
ack_waiter *ack_wait_add(ack_wait *w, const mm_note_mark *marks, size_t n, uint64_t deadline_ms, void *owner);
/* Node node's notes of epoch were acknowledged up to seq (notes_seq
 * after the ack): its marks up to seq are met, marks of older epochs are
 * void (reset). */
void ack_wait_acked(ack_wait *w, uint32_t node, uint64_t epoch, uint64_t seq);
/* Marks of node older than epoch (its current one) are void. */
void ack_wait_epoch(ack_wait *w, uint32_t node, uint64_t epoch);
/* The nodes with marks waiting: fn(node, ctx) may call ack_wait_epoch. */
void ack_wait_each_node(ack_wait *w, void (*fn)(uint32_t node, void *ctx), void *ctx);
/* Release the waiters whose deadline is <= now_ms. */
void ack_wait_expire(ack_wait *w, uint64_t now_ms);
/* Release every waiter as reset (the master dropped its metadata). */
void ack_wait_reset_all(ack_wait *w);
/* Forget x without a release (its owner is going). */
void ack_wait_cancel(ack_wait *w, ack_waiter *x);
/* Calls fn for every waiter not released yet (the owner may cancel it). */
void ack_wait_each(ack_wait *w, void (*fn)(ack_waiter *x, void *owner, void *ctx), void *ctx);
/* The earliest deadline of a waiter, or UINT64_MAX. */
uint64_t ack_wait_next_deadline(const ack_wait *w);
void ack_wait_get_stats(const ack_wait *w, ack_wait_stats *st);

#endif
