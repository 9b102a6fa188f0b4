/* standalone/store_local.h - the standalone store: one memory segment in this
 * process, an allocator over it and an object table. */
#ifndef MKV_STORE_LOCAL_H
#define MKV_STORE_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "server/store.h"

/* Maps segment_size bytes (huge pages when the system has them) and,
 * with prefault, warms every page in the background (seg_warm.h) so puts
 * and gets soon run at memory speed while the server already answers.
 * NULL with a message in err on failure. */
store *store_local_create(uint64_t segment_size, int prefault, char *err, size_t errlen);

/* Opt-in garbage collection (core/evict.h): with a policy other than
 * EVICT_NONE, a put that finds the segment above high_pct percent used, or
 * without room, first collects unpinned COMPLETE objects down to low_pct. */
void store_local_gc(store *s, int policy, unsigned high_pct, unsigned low_pct);

/* Test hook: where a COMPLETE object's bytes live (NULL if absent), so
 * tests can corrupt a value on purpose and see the checksum catch it. */
void *store_local_value_ptr(store *s, const void *key, size_t keylen);

#endif
