/* gateway/master_said.h - the master's answers to the gateway's control
 * questions (INFO cluster, MOON.SCAN, MOON.FLUSH), asked over the
 * asynchronous master connection ahead of the command that needs them
 * (internal to src/gateway).
 *
 * DBSIZE, INFO, SCAN, KEYS and FLUSHALL ask here first (gateway_async.c);
 * once every answer is in, the shared command runs and the store's
 * count, scan, flush and info read what was said (store_cluster.c)
 * instead of asking the master on the loop. A question asked but not
 * answered (the connection failed) reads as an unreachable master. */
#ifndef MKV_GATEWAY_MASTER_SAID_H
#define MKV_GATEWAY_MASTER_SAID_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/master_async.h"
#include "gateway/workers.h"
#include "server/store.h"

typedef struct gw_said gw_said;

/* done(ctx) runs on the loop once asking is over (said_end) and every
 * answer asked for is in or lost: at once from said_end when none is
 * outstanding. ma NULL (the master reached through etcd): the questions
 * are asked by blocking calls on one of w's workers. */
gw_said *said_create(master_async *ma, workers *w, void (*done)(void *ctx), void *ctx);
/* INFO cluster. */
void said_ask_info(gw_said *s);
/* One MOON.SCAN page. */
void said_ask_scan(gw_said *s, uint64_t cursor, long count);
/* What KEYS pattern reads: INFO cluster for the count, then, unless that
 * is above max, the pages of a whole walk until it ends or more than max
 * keys matched (as the command stops). */
void said_ask_keys(gw_said *s, const char *pat, size_t plen, uint64_t max);
/* MOON.FLUSH. */
void said_ask_flush(gw_said *s);
void said_end(gw_said *s);
void said_free(gw_said *s);

/* Reading, on the loop. Each returns -1 when the question was not asked
 * (the store then asks itself), 0 when it was but no answer came, 1
 * with the answer. */
/* INFO cluster's text, valid until said_free. */
int said_info(const gw_said *s, const char **text);
/* The page at cursor: its keys to fn, the next cursor in *next. */
int said_scan(const gw_said *s, uint64_t cursor, uint64_t *next, store_scan_fn *fn, void *ctx);
/* MOON.FLUSH: the count removed, or the master's error text in *err. */
int said_flush(const gw_said *s, long long *removed, const char **err);

/* A numeric field of an INFO reply's text; -1 if absent. */
long long info_text_field(const char *text, const char *field);

#endif
