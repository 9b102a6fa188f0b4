/* master/migrate.h - moving objects between master groups by their
 * metadata (docs/SCALE.md "Moving a slot"): no byte moves, the nodes keep
 * them where they are.
 *
 * The group losing a slot gives its objects away: each COMPLETE object
 * of a slot it no longer owns is written as records and forgotten, its
 * extents left reserved in its allocators (lent: the bytes are the other
 * group's now, never placed over here). The group gaining the slot
 * adopts the records: the same rebuild that takes nodes' reports after a
 * restart (mm_rebuild: whole replicas claim their extents) makes them
 * COMPLETE objects of its own.
 *
 * The records, one per extent, an object's consecutive:
 *
 *   u32 node | u64 instance | a MOON.REPORT packed record (proto/report.h)
 *
 * node is the giver's id for the node and instance that node process's
 * token (MOON.REGISTER INSTANCE): a node serving both groups registers
 * with each under the same token, so the adopter finds its own id for
 * the node by it (the same id where ids are the cluster's; a node
 * shared by master groups has one token for all). On a shared node the
 * extents lie in the giver's chunks: the adopter lends them from the
 * space it withholds (mm_extent_claim, master/shares.c). An object
 * one of whose nodes the adopter does not know (yet) is not adopted.
 * Pure state, as meta.h. */
#ifndef MKV_MASTER_MIGRATE_H
#define MKV_MASTER_MIGRATE_H

#include <stddef.h>
#include <stdint.h>

#include "master/meta.h"
#include "resp/resp_writer.h"

#define MM_GIVE_HDR 12   /* node and instance before each report record */

/* 1 if o goes away (its slot is another group's now): then the group
 * its records are for, out of the caller's (< MM_GIVE_DESTS). */
#define MM_GIVE_DESTS 32
typedef int mm_give_fn(const object *o, void *ctx, int *dest);

typedef struct mm_give_pass {
    uint64_t cursor;      /* otable scan position; 0 at a pass's start and end */
    uint64_t given;       /* objects given away in this pass */
    uint64_t busy;        /* objects to give that had a copy in flight: the pass must run again */
    uint64_t lent_bytes;  /* extent bytes given away, ever (left reserved here) */
} mm_give_pass;

/* One stretch of the table (a few thousand records) from p->cursor: every
 * object fn gives goes as records into outs[dest] (appended, bounded by
 * nothing but the table: the caller drains them) and leaves the table.
 * *objects (may be NULL) counts those per dest. 1 while the pass goes
 * on, 0 at its end (p->cursor back to 0). */
int mm_give_step(master_meta *m, mm_give_pass *p, mm_give_fn *fn, void *ctx, resp_buf *outs, size_t *objects);

/* The records of object o (every replica's extents) appended to out. */
void mm_give_records(master_meta *m, const object *o, resp_buf *out);

/* Of records written by mm_give_records at blob (len bytes): the length
 * of the whole objects at its start that fit in max bytes (at least the
 * first object, whatever its size). */
size_t mm_give_cut(const uint8_t *blob, size_t len, size_t max);

typedef struct mm_adopt_stats {
    uint64_t records;     /* extents read */
    uint64_t objects;     /* adopted now */
    uint64_t present;     /* keys the table had already (adopted before) */
    uint64_t waiting;     /* objects not adopted: a node of theirs is not known here */
    uint64_t refused;     /* objects whose replicas could not claim their extents */
} mm_adopt_stats;

/* Adopt the records of blob: 0 with st filled (waiting > 0: call again
 * with them later), or -1 if the blob is malformed (nothing adopted).
 * Adopted objects keep their bytes for hold_ms (the giver's readers may
 * hold leases that long). */
int mm_adopt(master_meta *m, const uint8_t *blob, size_t len, uint64_t hold_ms, uint64_t now_ms,
             mm_adopt_stats *st);

#endif
