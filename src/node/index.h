/* node/index.h - what this node's bytes are: key -> object and extents.
 *
 * The master tells a node, in order, which objects it came to hold and
 * which it no longer holds (MOON.HOLDINGS, master/holdings.c); the index
 * keeps that in memory next to the segment, and with a journal attached
 * (journal.h, persist.h) logs every change so a restarted node gets it
 * back.
 * After a master restart the node reports it (MOON.REPORT), proving each
 * object it holds whole by recomputing its CRC32C first. Bounded: at
 * most one entry per 64 segment bytes. Thread-safe. */
#ifndef MKV_NODE_INDEX_H
#define MKV_NODE_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "core/objtable.h"
#include "proto/report.h"

typedef struct node_index node_index;

typedef struct node_index_stats {
    uint64_t objects, extents, bytes;   /* held now; bytes of index memory */
    uint64_t refused;                   /* entries refused: over the bound or malformed */
    uint64_t applied;                   /* holds and drops taken from the master */
    uint64_t reported;                  /* extents reported to a master */
    uint64_t checksum_errors;           /* objects whose bytes no longer match their CRC */
    uint64_t scrub_bytes, scrub_passes; /* read by the background scrub; whole walks */
} node_index_stats;

/* One extent of ours to report: bytes [obj_off, obj_off+length) of key
 * (the packed MOON.REPORT record). */
typedef proto_report_rec node_index_extent;

/* The segment the extents point into (to prove objects). */
node_index *node_index_create(const void *seg_base, uint64_t seg_size);
void node_index_free(node_index *ix);

/* This node (id self) holds its part of replica rep of key, whose slice
 * CRCs are sl (NULL or count 0: none; bounded as proto_slices_ref_get
 * bounds them): the entry is replaced. -1 if refused (no extent here, one
 * outside the segment, the bound reached). */
int node_index_hold(node_index *ix, const void *key, size_t keylen, uint64_t size, uint32_t crc,
                    uint32_t want, const obj_replica *rep, const proto_slices_ref *sl, uint32_t self);
void node_index_drop(node_index *ix, const void *key, size_t keylen);

/* Holds and drops applied together, in order (a MOON.HOLDINGS reply's
 * notes): each is hashed and its entry built as it is added, then
 * node_index_commit applies them under one lock with the table lookups
 * prefetched ahead (a node indexes every small put: one cache miss after
 * another, one at a time, was a third of its control thread). The same
 * as node_index_hold / node_index_drop one by one. A full batch commits
 * itself; keys must stay valid until their commit. */
#define NODE_INDEX_BATCH 64
typedef struct node_index_batch node_index_batch;
node_index_batch *node_index_batch_new(void);
void node_index_batch_hold(node_index *ix, node_index_batch *b, const void *key, size_t keylen, uint64_t size,
                           uint32_t crc, uint32_t want, const obj_replica *rep, const proto_slices_ref *sl,
                           uint32_t self);
void node_index_batch_drop(node_index *ix, node_index_batch *b, const void *key, size_t keylen);
void node_index_commit(node_index *ix, node_index_batch *b);
void node_index_batch_free(node_index_batch *b);   /* uncommitted ones are dropped */
/* Up to max extents of key's entry into out (ours named self, as in
 * the note): how many it has (0: no entry). */
size_t node_index_extents(node_index *ix, const void *key, size_t keylen, uint32_t self, obj_extent *out,
                          size_t max);
/* Forget every entry. */
void node_index_clear(node_index *ix);
/* Forget the entries with an extent of ours at an offset mine says is
 * (a node shared by master groups forgets one group's objects). */
void node_index_clear_where(node_index *ix, int (*mine)(uint64_t seg_off, void *ctx), void *ctx);

/* Walk from *cursor (0 to start): whole entries' extents into out (an
 * entry's first one with its slice CRCs), up to max extents and
 * max_key_bytes of their keys (counted per extent) and slice CRCs,
 * but always at least one entry (so max must be >= PROTO_MAX_EXTENTS).
 * Each object is proved first where it lies wholly here (a mismatch
 * drops it and counts a checksum error). Returns how many; *cursor
 * becomes 0 at the end. The keys in out stay valid until the next hold,
 * drop or free. */
size_t node_index_report(node_index *ix, uint64_t *cursor, node_index_extent *out, size_t max,
                         size_t max_key_bytes);

/* An entry as the scrub saw it not match (its key an owned copy). */
typedef struct node_index_mark {
    char *key;
    size_t keylen;
    uint32_t crc;
    uint64_t size, seg_off;   /* seg_off: its first extent */
} node_index_mark;

/* The background scrub: from *cursor (0 to start), prove the objects that
 * lie wholly here until about budget bytes were read (each entry counts
 * 4 KiB more than its bytes). Mismatches go to
 * marks[*nmarks...] (up to max) but stay in the index: the master may
 * have removed the object and reused its space, and the note saying so
 * may not be here yet. Returns the bytes read; *cursor becomes 0 at the
 * end of a pass. */
uint64_t node_index_scrub(node_index *ix, uint64_t *cursor, uint64_t budget, node_index_mark *marks,
                          size_t *nmarks, size_t max);
/* After the next holdings pull: 1 if m's entry is unchanged and still
 * does not match (it is dropped and counted as a checksum error). */
int node_index_confirm(node_index *ix, const node_index_mark *m);
void node_index_mark_free(node_index_mark *m);

void node_index_get_stats(node_index *ix, node_index_stats *st);

/* From now on every change is logged to jr (which stays the caller's;
 * NULL: no more). */
struct node_journal;
void node_index_attach(node_index *ix, struct node_journal *jr);

/* A restart: every entry that lies wholly here proved against its CRC,
 * split over wp's threads (NULL: this one); the ones that fail are
 * dropped (and counted as checksum errors), the others are not proved
 * again by the report that follows. Returns how many; *bytes: the bytes
 * read. */
struct workpool;
size_t node_index_prove_all(node_index *ix, struct workpool *wp, uint64_t *bytes);

#endif
