/* node/journal.h - the node's index, kept in a file that outlives the process.
 *
 * An append-only log of what the index was told, in order: one record
 * per hold (key, size, CRC, want, every extent of the replica with ours
 * marked, slice CRCs) or drop, as the packed MOON.HOLDINGS note
 * (proto/notes.h) behind a frame of its own:
 *
 *   u32 len | u32 crc32c(len) | u32 crc32c(note) | note[len]
 *
 * after a 64-byte header (magic, version, the segment file's generation).
 * The index appends under its lock and writes each batch with one
 * write(2) before it acknowledges the notes it applied (so a note the
 * master saw acknowledged is in the file); a file in tmpfs survives the
 * process. Past a bound the log is rewritten as a snapshot of the index
 * (a new file renamed over the old: never half of one). Read back at
 * start: a record whose frame runs past the end of the file is the tail
 * a kill cut short and is cut off; any other bad record, or a header of
 * another generation, damns the whole file. Not thread-safe: the index
 * calls it under its own lock. */
#ifndef MKV_NODE_JOURNAL_H
#define MKV_NODE_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/objtable.h"
#include "proto/notes.h"

/* Our own extents in a record: any id a master never gives. */
#define JOURNAL_SELF UINT32_MAX

typedef struct node_journal node_journal;

/* A new, empty log at path for generation gen (an old file is replaced). */
node_journal *node_journal_create(const char *path, uint64_t gen, char *err, size_t errlen);

/* Every record of the log at path, in order, to fn (its extents marked
 * ours carry JOURNAL_SELF; the note's key and CRCs stay valid until fn
 * is called with NULL, after the last one); a torn tail is cut off. The
 * log open for appending, or NULL with why: missing, of another
 * generation, or damaged (fn may have been called for the records before
 * the damage). */
typedef void node_journal_fn(void *ctx, const proto_note *note);
node_journal *node_journal_replay(const char *path, uint64_t gen, node_journal_fn *fn, void *ctx,
                                  uint64_t *cut_bytes, char *why, size_t whylen);

/* Records; ext[] is the replica's, with ours marked node 0 (the index's way). */
void node_journal_hold(node_journal *j, const void *key, size_t keylen, uint64_t size, uint32_t crc,
                       uint32_t want, const obj_extent *ext, uint32_t n, const proto_slices_ref *sl);
void node_journal_drop(node_journal *j, const void *key, size_t keylen);
/* Writes what was appended. 1 if the log is past its bound for an index
 * of live_bytes: the caller rewrites it (rewrite_begin, a hold per entry,
 * rewrite_end). */
int node_journal_flush(node_journal *j, uint64_t live_bytes);
void node_journal_rewrite_begin(node_journal *j);
void node_journal_rewrite_end(node_journal *j);

typedef struct node_journal_stats {
    uint64_t bytes, records, rewrites, write_errors;
} node_journal_stats;
void node_journal_get_stats(const node_journal *j, node_journal_stats *st);
void node_journal_free(node_journal *j);

#endif
