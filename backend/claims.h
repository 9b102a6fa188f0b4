/* backend/claims.h - which write grant owns each range of a segment.
 *
 * The master reuses space as soon as no read lease needs it, even while
 * an older write capability on that space is unexpired (a put that ended,
 * was revoked, or a copy task that failed). The node makes that safe:
 * the first write under a capability claims the capability's whole range
 * for its issue time, and a write under a capability issued earlier than
 * any claim it overlaps is refused. So once the new owner has written,
 * the old holder can no longer touch its bytes; whatever the old holder
 * wrote before that, the new owner overwrites (it writes every byte of its
 * extents before its put ends). Claims are disjoint ranges, a newer claim
 * replacing what it overlaps, so their number is bounded by how finely the
 * segment is cut, and one is dropped once every capability issued before
 * it must have expired (issued + TE_CLAIM_HORIZON_MS). Write capabilities
 * issued before the node started are refused: a restarted node knows no
 * claims, and no grant from before it may write into its segment. */
#ifndef MKV_CLAIMS_H
#define MKV_CLAIMS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/transport.h"

#define TE_CLAIM_HORIZON_MS (3600ULL * 1000)   /* longest write capability a node accepts */
#define TE_CLAIMS_MAX       (1u << 20)         /* claims a node keeps at most */

typedef struct te_claim {
    uint64_t off, end;            /* [off, end) of the segment */
    uint64_t issued_us;
} te_claim;

typedef struct te_claims {
    pthread_mutex_t mu;
    te_claim *v;                  /* sorted by off, disjoint */
    size_t n, cap;
    uint64_t started_ms;          /* write grants issued before this are refused */
    uint64_t refused;             /* writes refused as superseded */
} te_claims;

void te_claims_init(te_claims *c, uint64_t now_ms);
void te_claims_free(te_claims *c);
/* Forget every claim; refuse write grants issued before now_ms. */
void te_claims_reset(te_claims *c, uint64_t now_ms);
/* May a write under cap (already verified: MAC, rights, expiry, range)
 * go ahead at now_ms? TE_OK (and cap's range is claimed for it), or
 * TE_EAUTH: superseded by a newer grant, issued before the node started,
 * longer-lived than the horizon, or no room left for the claim. */
int te_claims_write(te_claims *c, const te_cap *cap, uint64_t now_ms);
size_t te_claims_count(te_claims *c);
/* Forget what is claimed of [off, end) (parts outside stay claimed): the
 * range went to another master group, whose grants' times are of another
 * clock (backend/shares.h). */
void te_claims_forget(te_claims *c, uint64_t off, uint64_t end);

#endif
