/* backend/preauth_gate.h - admission of data-plane connections that have
 * not authenticated yet.
 *
 * A peer that connects and never speaks holds a connection thread until
 * the handshake deadline; enough of them, replaced as they are dropped,
 * used to fill max_conns so that no cluster member could connect. The
 * gate keeps unauthenticated connections in a pool of their own, capped
 * in total and per source address: a newcomer over a cap pushes out the
 * oldest unauthenticated connection (of its source, or of all), so a
 * member that completes the handshake in a round trip always gets in, and
 * authenticated connections never compete with these slots. What it drops
 * and refuses is logged at most once per TE_GATE_LOG_MS, as a count.
 *
 * Thread-safe: the acceptor admits, connection threads report their
 * handshake's outcome. */
#ifndef MKV_PREAUTH_GATE_H
#define MKV_PREAUTH_GATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define TE_GATE_MAX_DEFAULT        64     /* unauthenticated connections in all */
#define TE_GATE_PER_SOURCE_DEFAULT 16     /* ... from one source address */
#define TE_GATE_LOG_MS             10000  /* at most one summary line per period */

typedef struct te_gate te_gate;

typedef struct te_gate_stats {
    uint64_t pending;          /* unauthenticated now */
    uint64_t evicted;          /* pushed out by newer connections, ever */
    uint64_t failed;           /* handshakes that failed or timed out, ever */
    uint64_t refused;          /* authenticated but over max_conns, ever */
} te_gate_stats;

/* max / per_source <= 0 take the defaults; per_source is at most max. */
te_gate *te_gate_create(int max, int per_source);
void te_gate_destroy(te_gate *g);

/* A new connection on fd from peer (len bytes; a unix peer counts as one
 * source). Makes room first by shutting down the oldest unauthenticated
 * connection(s) over a cap; their threads see the socket end. Returns the
 * ticket the connection's thread passes to the calls below (never 0). */
uint64_t te_gate_admit(te_gate *g, int fd, const struct sockaddr *peer, socklen_t len);
/* The handshake succeeded: 0, the connection leaves the pool; -1 if it
 * was evicted meanwhile (its socket is shut down: drop it). */
int te_gate_passed(te_gate *g, uint64_t ticket);
/* The handshake failed (why: for the log line); leaves the pool. Call
 * before closing the fd. */
void te_gate_failed(te_gate *g, uint64_t ticket, const char *why);
/* An authenticated connection turned away (max_conns): counted, logged
 * at the rate limit. */
void te_gate_refused(te_gate *g, const char *why);
void te_gate_get_stats(te_gate *g, te_gate_stats *out);

#endif
