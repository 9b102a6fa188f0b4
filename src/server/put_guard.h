/* server/put_guard.h - values that stop arriving must not hold space.
 *
 * A SET's value is reserved in the store at its "$<len>" header, so the
 * zero-copy path can read it straight into place. A peer that declares a
 * large value and then sends nothing (or trickles) would hold that space
 * forever. The guard bounds it two ways:
 *  - a periodic sweep drops a put with no bytes for put_timeout_ms, or
 *    older than that and averaging less than put_min_rate;
 *  - a put that finds no room takes the space of a put idle for
 *    put_stall_ms (put_guard_reclaim), so declared sizes alone cannot
 *    fill the store.
 * Dropping aborts the put (space freed at once), replies an error and
 * closes the connection. */
#ifndef MKV_PUT_GUARD_H
#define MKV_PUT_GUARD_H

#include "server/server.h"

void put_guard_start(server *srv);   /* from server_init */
void put_guard_stop(server *srv);

/* Drop the stalled put (idle put_stall_ms or more) of another client that
 * holds the most unarrived bytes, so asker's put may fit. 1 if one was
 * dropped (try again), 0 if none qualifies. */
int put_guard_reclaim(server *srv, const client *asker);

/* Why c's put must go now ("ERR put timed out ..."), in buf; NULL if it
 * may go on. Exposed for the unit test. */
const char *put_guard_verdict(const mkv_config *cfg, const client *c, uint64_t now_ms, char *buf,
                              size_t len);

#endif
