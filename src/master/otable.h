/* master/otable.h - the master's own object table: key -> object.
 *
 * Built for tens of millions of objects at a small fixed cost each
 * (docs/SCALE.md): no heap block per object. Records (the object and a
 * fixed room for its owner after it) lie in 2 MiB slabs and never move,
 * so an object * stays valid until the object is freed; keys lie in an
 * arena of 8-byte size classes (keys past OTABLE_KEY_ARENA_MAX bytes
 * take a heap block); the index is open addressing (linear probing) of
 * 8-byte slots, 32 bits of the key's hash and a record number, grown
 * and shrunk incrementally (a few slots move per operation) so a
 * resize never stalls the master. Keys are hashed with objtable_hash.
 *
 * Iteration is by record number, so a scan cursor stays valid while the
 * index is resized: every object present for a whole scan is handed out
 * exactly once. */
#ifndef MKV_MASTER_OTABLE_H
#define MKV_MASTER_OTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "core/objtable.h"

#define OTABLE_KEY_ARENA_MAX 256   /* keys and their NUL up to this: in the arena */

typedef struct otable otable;

/* room: bytes after each object for its owner (otable_room), zeroed at insert. */
otable *otable_create(size_t room);
/* fn (may be NULL) for every object still in the table, then all goes. */
void otable_destroy(otable *t, objtable_scan_fn *fn, void *ctx);

static inline void *otable_room(object *o) { return o + 1; }

object *otable_find(otable *t, const void *key, size_t keylen, uint64_t hash);
/* A new PENDING object for a key the caller knows is absent (hash: its
 * objtable_hash), replicas none, room zeroed. NULL if keylen is 0 or
 * above UINT16_MAX. */
object *otable_insert(otable *t, const void *key, size_t keylen, uint64_t hash);
/* Out of the index (no longer found or scanned); o and its key stay
 * until otable_free. */
void otable_unlink(otable *t, object *o);
/* o's record and key back (unlinked first if it is not); its replicas
 * and its owner's parts are the caller's to free before. */
void otable_free(otable *t, object *o);

void otable_set_state(otable *t, object *o, obj_state s);
size_t otable_size(const otable *t);
size_t otable_count_state(const otable *t, obj_state s);
size_t otable_slots(const otable *t);      /* index slots over both arrays while resizing */
int otable_resizing(const otable *t);
/* About to hold n objects: size the index for them now, and do not
 * shrink below that until otable_reserve(t, 0). */
void otable_reserve(otable *t, size_t n);

/* Batches: the index slot a key's hash starts at, a few keys ahead; then,
 * once it arrived, the record it names if its hash bits match. */
void otable_prefetch(const otable *t, uint64_t hash);
void otable_prefetch_record(const otable *t, uint64_t hash);
/* objtable_find_many's contract on this table. */
void otable_find_many(otable *t, objtable_probe *p, size_t n);

/* From cursor (0: the start), fn for each object in a stretch of record
 * numbers; the next cursor, 0 when done. fn may free the object it is
 * handed (no other). A cursor past the end starts over from its
 * remainder (a random cursor samples). */
uint64_t otable_scan(otable *t, uint64_t cursor, objtable_scan_fn *fn, void *ctx);

/* Bytes an object with a key of keylen takes besides its index slot:
 * its record and its key's arena slot (a heap block past the arena). */
size_t otable_object_bytes(const otable *t, size_t keylen);
/* Bytes the table holds: slabs, arena, index. */
size_t otable_bytes(const otable *t);

#endif
