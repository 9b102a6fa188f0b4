/* gateway/master_ask.h - the cluster store's keyspace questions to the
 * master (store.h stat_async, scan_async, flush_async: INFO cluster, one
 * MOON.SCAN page, MOON.FLUSH; pin_async: MOON.PREFIX, PREFIXPIN, UNPIN),
 * internal to src/gateway.
 *
 * Each is asked once and completes through done(ctx) on the loop: over
 * the asynchronous master connection, pipelined with everyone else's
 * (the client's, master_async_over), or without one (master groups) by
 * a blocking call on a worker, whose client routes the key (a PREFIX
 * there is one exists batch on the router's async face); pins too
 * (the client pins them again on a new connection or leader). A question whose answer was
 * lost reads as an unreachable master ("TRYAGAIN ..."); nothing is kept
 * for a later command. */
#ifndef MKV_GATEWAY_MASTER_ASK_H
#define MKV_GATEWAY_MASTER_ASK_H

#include <stdint.h>

#include "gateway/master_async.h"
#include "gateway/workers.h"
#include "server/store.h"

/* ma NULL: on one of w's workers. There, over master groups, a stat
 * or flush asks every group's master in turn and sums their answers,
 * and a SCAN cursor carries its group in its top byte (the walk goes
 * through the groups one after another: a slot moved meanwhile may show
 * its keys twice or not at all, as a rehash does in Redis). */
void master_ask_stat(master_async *ma, workers *w, store_stat *st, store_got_fn *done, void *ctx);
void master_ask_scan(master_async *ma, workers *w, uint64_t cursor, long count, store_page *pg,
                     store_got_fn *done, void *ctx);
void master_ask_flush(master_async *ma, workers *w, store_flushed *f, store_got_fn *done, void *ctx);
/* MOON.PREFIX, PREFIXPIN or UNPIN (store.h pin_async): q answered, then
 * done(ctx) on the loop. Without ma, a PREFIX goes as one exists batch on
 * face (over groups the router's) when there is one. */
struct mkv_async;
void master_ask_pin(master_async *ma, struct mkv_async *face, workers *w, store_pinq *q, store_got_fn *done,
                    void *ctx);

#endif
