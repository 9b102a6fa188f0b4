/* backend/shares.h - a node's segment shared by master groups: whose
 * capabilities may touch which chunk.
 *
 * Every master group signs capabilities with a key of its own and stamps
 * its term (an etcd create revision, so no two groups' leaderships share
 * one). A node that serves several groups keeps, per group, the key and
 * term it registered under and which chunks of its segment it gave the
 * group; a request is served only under a capability that is genuine for
 * the group whose term it carries and whose range lies wholly in that
 * group's chunks. So a group cannot read or write another's bytes, even
 * with a capability its own master signed. Thread-safe. */
#ifndef MKV_SHARES_H
#define MKV_SHARES_H

#include <stdint.h>

#include "backend/cap.h"

#define TE_MAX_SHARES 16   /* groups one node serves */

typedef struct te_shares te_shares;

/* chunk_size: a power of two. NULL on bad arguments. */
te_shares *te_shares_create(uint64_t segment_size, uint64_t chunk_size);
void te_shares_free(te_shares *s);
uint64_t te_shares_chunk_size(const te_shares *s);
uint32_t te_shares_nchunks(const te_shares *s);
/* Group g (0..TE_MAX_SHARES-1) registered under key and term (term 0:
 * not registered, nothing of it is honoured). */
void te_shares_set_group(te_shares *s, int g, const uint8_t key[TE_CAP_KEY_LEN], uint64_t term);
/* Chunk i to group g (-1: free). The owner before, or -2 if i is out of range. */
int te_shares_set_owner(te_shares *s, uint32_t i, int g);
int te_shares_owner(te_shares *s, uint32_t i);
/* Up to k free chunks given to group g, lowest first: how many. */
uint32_t te_shares_grant(te_shares *s, int g, uint32_t k);
/* A range of one group's chunk lent to group g (a slot moved between
 * groups with its objects: g adopted an object the chunk's group placed,
 * master/migrate.h): g's capabilities are served there too, the owner's
 * no longer. 0, or -1 if it does not lie wholly in chunks of one other
 * group, overlaps a range lent already, or TE_MAX_LENT are lent. */
#define TE_MAX_LENT (1u << 20)
int te_shares_lend(te_shares *s, uint64_t off, uint64_t len, int g);
/* The range lent to g at off goes back to its chunk's group: its length,
 * or 0 if none was. */
uint64_t te_shares_unlend(te_shares *s, uint64_t off, int g);
/* The range lent away at off, in a chunk of g, back to g (g adopted the
 * object again: a move undone): its length, or 0 if none was. */
uint64_t te_shares_reclaim(te_shares *s, uint64_t off, int g);
/* What a group's chunks lent to another group (lent) and got back (a
 * drop of the borrower's): its master holds such a range neither as used
 * nor as free, so it places nothing over a range lent away and has a range
 * given back as room again (MOON.LENT). Kept per chunk owner, oldest first,
 * until its master took them; at most TE_MAX_LENT_EVENTS, past which the
 * queue is made anew from the ranges lent now. */
#define TE_MAX_LENT_EVENTS (2 * TE_MAX_LENT)
typedef struct te_lent_event {
    uint64_t off, len;
    int back;                      /* 0: lent away, 1: given back */
} te_lent_event;
/* Up to max of group g's events, oldest first, taken by nothing yet: how
 * many; *gen names the queue (for te_shares_events_done). */
size_t te_shares_events(te_shares *s, int g, te_lent_event *out, size_t max, uint64_t *gen);
/* The first n of g's events reached its master: forgotten (unless the
 * queue was made anew since: gen). */
void te_shares_events_done(te_shares *s, int g, uint64_t gen, size_t n);
/* g's queue made anew: a "lent" for every range of its chunks lent away
 * now (a new leader of g learns them all at its registration). */
void te_shares_events_resync(te_shares *s, int g);
/* 1 if some range lent away overlaps [off, off+len). */
int te_shares_lent_in(te_shares *s, uint64_t off, uint64_t len);
/* The group whose capabilities are served at off: the group a range
 * there is lent to, else the chunk's (-1 free, -2 out of range). */
int te_shares_whose(te_shares *s, uint64_t off);
/* As te_cap_check, with the key and term of the group whose term cap
 * carries, and TE_ERANGE unless [off, off+len) lies in that group's
 * chunks (clear of ranges lent away) or wholly in a range lent to it; *g (may be NULL) the group. */
int te_shares_check(te_shares *s, const te_cap *cap, uint32_t node_id, te_op op, uint64_t off, uint64_t len,
                    uint64_t now_ms, int *g);

#endif
