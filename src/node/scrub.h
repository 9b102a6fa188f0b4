/* node/scrub.h - the background scrub: a node re-reads what it holds.
 *
 * Memory can rot (bit flips, a stray write): a get of such an object is
 * refused by its reader's checksum, but nothing would replace the bad
 * replica. The scrub walks the index at scrub_mb_per_s, recomputes the
 * CRC32C of every object that lies wholly on this node, and a mismatch
 * that holds after the next holdings pull (a removal and reuse of the
 * space may have crossed it) is dropped from the index, counted in
 * checksum_errors and handed back to the caller to tell the master
 * (MOON.BADREPLICA), whose repair copies the object again. Runs on a
 * thread of its own, a step after each new holdings pull: not on the
 * control thread, whose heartbeats a step reading 4 MiB held up for
 * seconds on a loaded machine under TSan (nodes declared dead). */
#ifndef MKV_NODE_SCRUB_H
#define MKV_NODE_SCRUB_H

#include <stddef.h>
#include <stdint.h>

#include "node/index.h"

#define SCRUB_MAX_MARKS 64        /* mismatches held per step */
#define SCRUB_MAX_STEP  (4 << 20) /* bytes read in one step (the index is locked meanwhile) */

typedef struct node_scrub node_scrub;

/* Starts the scrub of ix at mb_per_s (0: off, no thread); pulls(arg)
 * counts the holdings pulls answered so far (thread-safe). */
node_scrub *node_scrub_start(node_index *ix, int mb_per_s, uint64_t (*pulls)(void *), void *arg);
/* Stops and joins its thread. */
void node_scrub_free(node_scrub *s);

/* Up to max objects confirmed corrupt since the last call (already
 * dropped from the index) into out: the caller tells the master and
 * frees each with node_index_mark_free. */
size_t node_scrub_take(node_scrub *s, node_index_mark *out, size_t max);

#endif
