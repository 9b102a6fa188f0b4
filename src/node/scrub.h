/* node/scrub.h - the background scrub: a node re-reads what it holds.
 *
 * Memory can rot (bit flips, a stray write): a get of such an object is
 * refused by its reader's checksum, but nothing would replace the bad
 * replica. The scrub walks the index at scrub_mb_per_s, recomputes the
 * CRC32C of every object that lies wholly on this node, and a mismatch
 * that holds after the next holdings pull (a removal and reuse of the
 * space may have crossed it) is dropped from the index, counted in
 * checksum_errors and handed back to the caller to tell the master
 * (MOON.BADREPLICA), whose repair copies the object again. Runs on the
 * control thread, between holdings pulls. */
#ifndef MKV_NODE_SCRUB_H
#define MKV_NODE_SCRUB_H

#include <stddef.h>
#include <stdint.h>

#include "node/index.h"

#define SCRUB_MAX_MARKS 64        /* mismatches held per step */
#define SCRUB_MAX_STEP  (4 << 20) /* bytes read in one step (the index is locked meanwhile) */

typedef struct node_scrub node_scrub;

/* mb_per_s 0: off. */
node_scrub *node_scrub_create(node_index *ix, int mb_per_s);
void node_scrub_free(node_scrub *s);

/* One step, right after a holdings pull: confirms the last step's
 * mismatches and reads on for the time since the last step. Returns how
 * many were confirmed corrupt; *bad points at them until the next step. */
size_t node_scrub_step(node_scrub *s, uint64_t now_ms, const node_index_mark **bad);

#endif
