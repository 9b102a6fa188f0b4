/* core/objtable.h - the object table: key -> object metadata.
 *
 * A chained hash table with incremental rehashing (two tables, a few
 * buckets moved per operation), so growing never stalls the server. It
 * holds metadata only (state, size, checksum, replica extents); the bytes
 * live in segments. No socket or role code here: the master, a standalone
 * server and a rebuild from node reports all drive it the same way. */
#ifndef MKV_OBJTABLE_H
#define MKV_OBJTABLE_H

#include <stddef.h>
#include <stdint.h>

typedef enum obj_state {
    OBJ_PENDING = 0,   /* space placed, bytes still arriving: invisible to GET */
    OBJ_COMPLETE = 1   /* every byte landed and checksummed: visible */
} obj_state;

/* A contiguous range of one node's segment. Standalone uses node 0. */
typedef struct obj_extent {
    uint32_t node;
    uint64_t offset;
    uint64_t length;
} obj_extent;

/* One full copy of the object, possibly striped over several extents
 * (in object order: extent i holds the bytes after extent i-1). */
typedef struct obj_replica {
    uint32_t nextents;
    obj_extent *extents;
} obj_replica;

/* An object's replicas. The common case, up to OBJ_REP_WORDS replicas of
 * one extent each holding the whole object (length == size), is one
 * 8-byte word per replica in the object itself: node id (OBJ_REP_NODE_BITS)
 * and offset in OBJ_REP_UNIT units (the rest; all ones: offset UINT64_MAX,
 * a replica on a disk tier). Anything else (a striped replica, more
 * replicas, an id or offset that does not fit) is a heap array of
 * obj_replica with their extents (rep.list). Read them through
 * object_reps, change them with object_set_replicas. */
#define OBJ_REP_WORDS     2
#define OBJ_REP_NODE_BITS 24
#define OBJ_REP_UNIT      64
typedef union obj_rep_store {
    uint64_t word[OBJ_REP_WORDS];
    obj_replica *list;
} obj_rep_store;

/* What object_reps decodes words into (the caller's, e.g. on its stack). */
typedef struct obj_reps {
    obj_replica r[OBJ_REP_WORDS];
    obj_extent e[OBJ_REP_WORDS];
} obj_reps;

/* The 8-byte fields first, then the smaller ones: no padding holes (one
 * per key, millions of them; every first touch of heap is a page fault):
 * 80 bytes. */
typedef struct object {
    char *key;              /* binary safe, NUL added for convenience */
    uint64_t size;
    uint64_t created_ms;    /* put-start time (for put timeouts) */
    uint64_t atime_ms;      /* last read or write, for LRU collection (core/evict.h) */
    uint64_t expire_ms;     /* SET EX/PX hint: preferred victim from then on; 0 = none */
    void *owner;            /* role-specific: e.g. the client writing it */
    obj_rep_store rep;      /* nreplicas of them (object_reps) */
    uint32_t keylen;        /* keys are bounded far below (PROTO_MAX_KEY_LEN) */
    uint32_t crc;           /* CRC32C of the value, valid when COMPLETE */
    uint32_t pins;          /* readers/writers in flight (leases) */
    uint8_t nreplicas;
    uint8_t state;          /* obj_state */
    uint8_t rep_list;       /* replicas in rep.list (heap), not words */
    uint8_t table;          /* kept by the table holding it (master/otable.h) */
} object;

typedef struct objtable objtable;

/* Called for every object when the table is destroyed, and by
 * objtable_delete, after the object leaves the table: the owner decides
 * when its memory is released (e.g. after pins drop to 0). */
typedef void objtable_free_fn(object *o, void *ctx);

objtable *objtable_create(objtable_free_fn *free_fn, void *ctx);
void objtable_destroy(objtable *t);

object *objtable_find(objtable *t, const void *key, size_t keylen);
/* The same with the key's objtable_hash, computed once by the caller. */
object *objtable_find_hashed(objtable *t, const void *key, size_t keylen, uint64_t hash);
/* Insert a new PENDING object with no replicas. Returns NULL and sets
 * *existed = 1 if the key is present (in any state). */
object *objtable_insert(objtable *t, const void *key, size_t keylen, int *existed);
/* The same with room bytes (8-byte aligned) in the object's own block for
 * its owner's data and replicas: one allocation per object instead of
 * three. objtable_room(o) is that room, NULL if it was inserted without. */
object *objtable_insert_room(objtable *t, const void *key, size_t keylen, size_t room, int *existed);
#define OBJTABLE_ROOM_MAX 65528   /* bytes of room at most (more: NULL, nothing inserted) */
void *objtable_room(object *o);
/* The hash a key is filed under (keyed per process). A caller inserting
 * many keys hashes each once, passes it in (it must be this key's), and
 * can prefetch the bucket a few keys ahead. */
uint64_t objtable_hash(const void *key, size_t keylen);
object *objtable_insert_hashed(objtable *t, const void *key, size_t keylen, uint64_t hash, size_t room,
                               int *existed);
/* The same for a key the caller knows is absent (it just looked, or the
 * table held none of the keys it inserts): no lookup, whose cache misses
 * on the bucket's chain were a rebuild's largest cost after grouping. A
 * present key would be filed twice. */
object *objtable_insert_absent(objtable *t, const void *key, size_t keylen, uint64_t hash, size_t room);
/* What one entry with that key and room takes (malloc's own overhead
 * aside): for a caller that sizes memory ahead of many inserts. */
size_t objtable_entry_bytes(size_t keylen, size_t room);
void objtable_prefetch(const objtable *t, uint64_t hash);
/* The first entry of its bucket's chain, once objtable_prefetch brought
 * the bucket in (a few keys earlier): a lookup's second miss. */
void objtable_prefetch_chain(const objtable *t, uint64_t hash);
/* And, once that arrived too, the chains' second entries (where a new
 * key's look-up reads on when the table is well filled). */
void objtable_prefetch_chain_next(const objtable *t, uint64_t hash);
/* objtable_find for many keys at once: fills each probe's hash and
 * found (NULL: not there). The lookups' cache misses overlap (a group's
 * buckets, then their first entries, are prefetched before any compare),
 * which one objtable_find after another cannot do. */
typedef struct objtable_probe {
    const void *key;
    size_t keylen;
    uint64_t hash;
    object *found;
} objtable_probe;
void objtable_find_many(objtable *t, objtable_probe *p, size_t n);
/* Unlink the key and hand its object to free_fn. 1 if found, else 0. */
int objtable_delete(objtable *t, const void *key, size_t keylen);
/* Unlink without calling free_fn; the caller now owns the object. */
object *objtable_unlink(objtable *t, const void *key, size_t keylen);

/* About to hold n objects: grow to that many buckets now (instead of
 * doubling and rehashing as they come) and do not shrink below it until
 * objtable_reserve(t, 0). */
void objtable_reserve(objtable *t, size_t n);

/* Change an object's state. Use this instead of writing o->state, so the
 * O(1) per-state counts below stay right. Works on unlinked objects too
 * (then only o->state changes). */
void objtable_set_state(objtable *t, object *o, obj_state s);

size_t objtable_size(const objtable *t);
/* Introspection for INFO and tests: buckets allocated over both tables,
 * and 1 while an incremental rehash is under way. */
size_t objtable_buckets(const objtable *t);
int objtable_rehashing(const objtable *t);
/* O(1): counters kept by insert, unlink and objtable_set_state. */
size_t objtable_count_state(const objtable *t, obj_state s);

/* Redis-style SCAN cursor: reverse-binary increments, so every key present
 * for the whole scan is returned at least once even across rehashing.
 * Returns the next cursor; 0 when the scan is over. fn may delete the
 * object it is handed (no other) and may look keys up. */
typedef void objtable_scan_fn(object *o, void *ctx);
uint64_t objtable_scan(objtable *t, uint64_t cursor, objtable_scan_fn *fn, void *ctx);

/* Replica helpers: set the object's replicas (copies the arrays; words
 * where they fit, so set o->size first). reps may be o's own. */
int object_set_replicas(object *o, const obj_replica *reps, uint32_t n);
/* o's replicas (NULL if none): its list, or its words decoded into v
 * (valid while v is and o's replicas are not changed). */
const obj_replica *object_reps(const object *o, obj_reps *v);
/* Replica i (< nreplicas) alone: its first extent, the only one of a
 * word (replicas that may be striped: object_reps). */
obj_extent object_replica_first(const object *o, uint32_t i);
void object_free_replicas(object *o);
/* Frees the key, the replicas and the struct (for free_fn callbacks). */
void object_free(object *o);

#endif
