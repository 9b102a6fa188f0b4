/* master/meta.h - the master's metadata: nodes, objects, placement, repair.
 *
 * Pure state, no sockets and no event loop: every function takes the
 * current time (wall clock ms, the clock capabilities expire on) so the
 * whole state machine runs under a fake clock in tests, could be
 * replicated through a log later, and can be rebuilt from what nodes
 * report (mm_rebuild). Calls return a proto_status with a message that
 * has no error word (proto/status.h); master_cmds.c turns both into the
 * RESP protocol described in docs/PROTOCOL.md.
 *
 * Files: membership.c (nodes), placement.c (where extents go),
 * lifecycle.c (put/get/remove, leases, quarantine), repair.c (copy
 * tasks: re-replication and drain), rebuild.c (table from node reports).
 *
 * An object's layout (master/otable.h, docs/SCALE.md): a record of 88
 * bytes in a slab, no heap block of its own: the object (core/objtable.h,
 * 80, its replicas as 8-byte words when there are at most two and each
 * is one extent holding the whole object) and the mm_obj below (8). The
 * key, with its NUL, in an arena slot rounded to 8; an 8-byte index slot
 * at the index's load (3/8 to 3/4). Striped or more replicas: a heap list
 * (16 per replica and 24 per extent, malloc's 16). A pending put, leases,
 * a copy in flight, a hold and slice CRCs are in mm_more (object.owner),
 * allocated only while the object has one of them. Bytes per object
 * besides a key of k bytes, unstriped, r <= 2: 88 + round8(k+1) +
 * 8/load - k. */
#ifndef MKV_MASTER_META_H
#define MKV_MASTER_META_H

#include <stddef.h>
#include <stdint.h>

#include "backend/transport.h"
#include "core/alloc.h"
#include "core/objtable.h"
#include "core/pinset.h"
#include "proto/extents.h"
#include "proto/limits.h"
#include "proto/report.h"
#include "proto/slices.h"
#include "proto/status.h"
#include "resp/resp_writer.h"

#define MM_MAX_WIDTH      64       /* stripe width bound */
/* Repair copies in flight at once: enough that a drain of small objects
 * moves in waves of thousands, not of a few hundred per sweep; bytes
 * bound them too (each must land before its caps expire). */
#define MM_MAX_JOBS       16384
#define MM_MAX_JOB_BYTES  (1ULL << 30)
#define MM_ALIGN          64       /* extent alignment inside a segment */
#define MM_LEASES         16       /* read leases tracked per object (returnable) */

typedef enum mm_node_state { NODE_ALIVE = 0, NODE_DRAINING, NODE_DEAD } mm_node_state;

typedef struct mm_node {
    uint32_t id;                  /* 1-based; 0 is the standalone segment */
    mm_node_state state;
    uint64_t segment_size;
    int naddrs;
    char addrs[TE_MAX_PATHS][TE_ADDR_LEN];
    seg_alloc *alloc;             /* offsets into its segment; NULL once dead */
    uint64_t registered_ms, last_seen_ms;
    uint64_t reported_used;       /* what the node said in its last heartbeat */
    uint64_t conn_id;             /* role layer: the connection that registered it, 0 once
                                     closed (another process may claim the id then) */
    char dead_reason[32];         /* "timeout", "drained", ... */
    /* A client could not reach it (MOON.SUSPECT): nothing new is placed on
     * it until suspect_until_ms, while the heartbeat decides if it died. */
    int suspect;
    uint64_t suspect_until_ms;
    uint64_t instance;            /* the node process's token: a restart has a new one */
    int joined;                   /* 0: a placeholder for an id nobody claimed yet */
    /* Changes of what it holds not yet acknowledged by the node
     * (holdings.c), as MOON.HOLDINGS PACKED records (proto/notes.h):
     * notes_n of them in notes.data[notes_head..notes.len), the first
     * numbered notes_seq. */
    resp_buf notes;
    size_t notes_head, notes_n;
    uint64_t notes_seq;
    int notes_overflow;           /* it stopped taking them: fail it */
    uint64_t notes_epoch;         /* queues so far: each reset starts a new one */
    uint64_t track_gen;           /* mm_notes_track's: listed in this command's marks */
    /* It pulls on a link that waits for notes (MOON.HOLDLINK, WAIT)
     * since its notes were last reset (it registered): answers wait for
     * its acks. Not before (a restarted node reports its index first),
     * nor for a node that never does (one from before, a test's fake). */
    int acks_awaited;
    /* Restarted with its segment (KEPT): reconciling its report with the
     * table, nothing new placed on it meanwhile (restore.c). */
    struct mm_restore *restore;
    uint64_t disk_free;           /* its disk tier's free bytes (heartbeat), 0: none */
    uint64_t shed_want;           /* bytes a load or put found no room for here: shed them
                                     whatever the watermarks (a fragmented segment) */
    uint32_t tasks_waiting;       /* its tasks not yet handed out: a parked pull that takes
                                     tasks is answered at once (holdings_wait.c) */
    /* A node shared by master groups (shares.c): the chunks of its segment
     * it gave our group; everything else is withheld in alloc. NULL: the
     * whole segment is ours. */
    struct proto_chunks *chunks;
    /* Ranges of our chunks the node lent to another group (a moved slot's
     * objects it adopted: MOON.LENT), withheld in alloc until given back. */
    struct mm_lent_away *away;
    uint32_t chunks_free;         /* free chunks the node said it has (MOON.CHUNKS FREE; UINT32_MAX: not said) */
    int chunks_push;              /* a put found no room: its next pull tells it to ask now */
    uint64_t chunks_need;         /* bytes such puts want (the next ask covers them) */
} mm_node;

typedef struct mm_config {
    uint64_t put_timeout_ms;      /* write caps and unfinished puts expire after */
    uint64_t lease_ms;            /* read caps expire after */
    uint64_t node_timeout_ms;     /* no heartbeat for this long: dead */
    uint64_t stripe_threshold;    /* objects above this are striped (cut into stripe_unit extents) */
    uint64_t stripe_unit;
    uint32_t stripe_width;        /* nodes per replica for striped objects */
    uint64_t repair_retry_ms;     /* wait before retrying a repair that found no room */
    /* Garbage collection (collect.c): evict_policy of core/evict.h, and the
     * percent of all nodes' bytes above which it starts / where it stops. */
    uint32_t gc_policy, gc_high_pct, gc_low_pct;
    /* Disk tier (offload.c): percent of a node's segment in use above
     * which its coldest objects go to its disk, and where that stops;
     * high 0: never. */
    uint32_t disk_high_pct, disk_low_pct;
    /* A get of an object only on disk promotes it (its disk record goes)
     * once it was read this many times since its offload; before, it is
     * read through a temporary DRAM copy dropped after the read. */
    uint32_t disk_promote_after;
    /* Node ids the table takes (0: PROTO_DEFAULT_MAX_NODES), at most
     * PROTO_MAX_NODES: what a peer that proved the cluster secret can make
     * the table grow to (a pointer per id; a node's state only for ids
     * that had a node). */
    uint32_t max_nodes;
} mm_config;

/* A replica on a node's disk tier rather than in its segment: one
 * extent {node, MM_ON_DISK, size} (no layout change; proto/extents.h). */
#define MM_ON_DISK PROTO_ON_DISK
_Static_assert(MM_ON_DISK == PROTO_REPORT_ON_DISK, "a disk record's report is the disk replica's extent");
static inline int mm_replica_on_disk(const obj_replica *r) { return proto_replica_on_disk(r); }

/* A copy the master asks a node to make: read the src extents in order
 * (from any node, with read caps) and write the same bytes, in order,
 * into the dst extents of the node executing it (write caps). */
#define MM_TASK_OFFLOAD 1
#define MM_TASK_LOAD    2
#define MM_TASK_PUSH    3
typedef struct mm_task {
    uint64_t id;
    uint32_t node;                /* executes it; every dst extent is here (but a push's) */
    struct mm_job *job;
    const object *obj;            /* the object copied (key for the node's index) */
    uint32_t nsrc, ndst;
    obj_extent *src, *dst;
    uint64_t deadline_ms;         /* caps expire then; not done = failed */
    uint64_t issued_us;           /* its write caps' grant stamp (mm_issue_us) */
    int handed;                   /* sent in a heartbeat reply */
    int to_disk;                  /* MM_TASK_OFFLOAD: src (the node's own) to its disk tier;
                                     MM_TASK_LOAD: its disk record into dst;
                                     MM_TASK_PUSH: its disk record sent to dst,
                                     on other nodes (a repair with no other source) */
    int done;
} mm_task;

typedef struct mm_stats {
    uint32_t nodes_alive, nodes_draining, nodes_dead;
    uint32_t nodes_suspect;       /* alive or draining, but reported unreachable */
    uint64_t suspicions;          /* MOON.SUSPECT reports taken, ever */
    uint64_t objects_pending, objects_complete;
    uint64_t objects_lost;        /* complete objects whose every replica died */
    uint64_t replicas_corrupt;    /* replicas a node's scrub found rotten (MOON.BADREPLICA) */
    uint64_t under_replicated;    /* complete objects below their replica count */
    uint64_t tasks_pending;       /* copy tasks not yet done */
    uint64_t tasks_done, tasks_failed;
    uint64_t puts_timed_out, puts_revoked;
    uint64_t held_extents;        /* removed extents waiting for leases to expire */
    uint64_t bytes_used, bytes_total;   /* over alive and draining nodes */
    uint64_t free_extents;        /* free extents over those nodes' segments */
    double fragmentation_max;     /* the worst node's 1 - largest_free/free */
    uint64_t evicted_keys;        /* collected by garbage collection */
    uint64_t evicted_expired_keys;/* of which their expiry hint had passed */
    uint64_t holdings_pending;    /* notes the nodes have not acknowledged yet */
    uint64_t slice_crc_bytes;     /* kept for objects' per-slice checksums */
    uint64_t offloads, offload_bytes;   /* objects moved to a disk tier, ever */
    uint64_t promotes, promote_bytes;   /* ... and loaded back into DRAM */
    uint64_t disk_reads, disk_read_bytes;   /* reads that left it on disk: a temporary copy or direct */
    uint64_t disk_direct, disk_direct_bytes;   /* of them, read by the reader straight from the node's disk */
    uint64_t offloading_bytes;    /* object bytes of offloads in flight */
    uint64_t offload_orphans;     /* records written for offloads failed meanwhile, dropped */
    uint64_t disk_pushes;         /* repairs whose source was a disk record (MM_TASK_PUSH) */
} mm_stats;

typedef struct master_meta master_meta;

/* What only some objects need, apart (object.owner): allocated at the
 * put's start (its place in the pending list, its write grant) or the
 * first read lease, copy, hold or slice CRCs, freed once none is left,
 * so an object written and not read costs none of it. */
typedef struct mm_more {
    uint64_t write_issued_us;     /* pending: the put's write caps' grant stamp */
    object *prev, *next;          /* pending puts, oldest first */
    int pending;                  /* in that list */
    uint64_t hold_until;          /* bytes not reused before: leases not tracked below, tasks */
    struct mm_job *job;           /* replica copy in flight, if any */
    proto_slices slices;          /* per-slice CRCs from the put's end; count 0: none */
    uint32_t nlease;
    uint64_t lease[MM_LEASES];    /* expiries of leases not yet returned (maybe expired) */
} mm_more;

/* The per-object master state, in the room after each object of the
 * master's table (master/otable.h): 8 bytes. */
#define MM_DISK_READS_MAX ((1u << 24) - 1)
typedef struct mm_obj {
    uint32_t stamp;               /* which object this is (mm_obj_stamp) */
    uint32_t want : 8;            /* replica count asked for (PROTO_MAX_REPLICAS) */
    uint32_t disk_reads : 24;     /* gets since its offload, while on disk (disk_promote_after),
                                     up to MM_DISK_READS_MAX */
} mm_obj;

static inline mm_obj *mm_obj_of(const object *o) { return (mm_obj *)(o + 1); }
/* Records are reused once an object goes: who keeps an object * across
 * calls (a parked command) compares this too. It differs for every
 * object the master makes (modulo 2^32). */
static inline uint64_t mm_obj_stamp(const object *o) { return mm_obj_of(o)->stamp; }
/* o's side part: NULL when not pending, no lease, copy, hold or slice CRCs. */
static inline mm_more *mm_more_of(const object *o) { return (mm_more *)o->owner; }
/* A pending o's write grant stamp (0 once it is not pending). */
static inline uint64_t mm_obj_issued(const object *o) {
    const mm_more *x = mm_more_of(o);
    return x && x->pending ? x->write_issued_us : 0;
}
/* The copy in flight for o, if any. */
static inline struct mm_job *mm_obj_job(const object *o) {
    const mm_more *x = mm_more_of(o);
    return x ? x->job : NULL;
}
/* o's slice CRCs (count 0: none); never NULL. */
const proto_slices *mm_obj_slices(const object *o);

void mm_config_defaults(mm_config *cfg);
master_meta *mm_create(const mm_config *cfg);
void mm_destroy(master_meta *m);
const mm_config *mm_get_config(const master_meta *m);

/* ---- nodes (membership.c) ---- */
proto_status mm_node_register(master_meta *m, uint64_t segment_size, const char *const *addrs,
                           int naddrs, uint64_t now_ms, uint32_t *id, char *err, size_t errlen);
/* What a node says about itself when it registers. */
typedef struct mm_node_claim {
    uint32_t id;                  /* the id it had (0: none, a new node) */
    uint64_t instance;            /* its process's token */
    uint32_t seen_max;            /* the highest node id it has seen */
    int restarted;                /* a new process taking its id over (--node-id) */
    uint32_t assign;              /* a new node given this id, reserved for it before
                                     (with mm_node_id_taken): the master recorded it first */
    int kept;                     /* its process restarted with its segment and index (KEPT) */
} mm_node_claim;
/* Outcome of a registration. */
typedef enum mm_reg_kind {
    MM_REG_NEW = 0,               /* a fresh id for a new node: it holds nothing */
    MM_REG_RESUMED,               /* the same process again (lost connection): kept as is */
    MM_REG_REJOINED,              /* its id again, but we dropped what it held (it died or
                                     restarted): it must forget its index */
    MM_REG_RECLAIMED,             /* an id this master never knew (it restarted): report */
    MM_REG_RESTORED               /* a live id whose process restarted with its segment (KEPT):
                                     its replicas stay while it reports them (restore.c) */
} mm_reg_kind;
/* Register with a claim. A claimed id is given back to its node: one this
 * master never knew (it restarted) is created (RECLAIMED); one it saw die
 * is started afresh (REJOINED), as is a live one with another instance
 * (the node process restarted), which fails first, dropping its replicas,
 * unless that node still has its connection (conn_id): then the claim is
 * refused, PROTO_IDINUSE, and the live node keeps everything.
 * New nodes get ids above every id known, claimed or seen, so an id is
 * never handed to a node while another may still claim it. */
proto_status mm_node_register_as(master_meta *m, const mm_node_claim *claim, uint64_t segment_size,
                                 const char *const *addrs, int naddrs, uint64_t now_ms,
                                 uint32_t *id, mm_reg_kind *kind, char *err, size_t errlen);
/* The id a registration with claim would get now, and how; nothing
 * changes (mm_node_register_as then gives the same, if nothing happened
 * in between). */
mm_reg_kind mm_node_pick(const master_meta *m, const mm_node_claim *claim, uint32_t *id);
/* ---- restarted nodes that kept their segment (restore.c) ---- */
/* One extent node id reported while restoring: 1 if the table has it
 * there (kept if all of its object's are), else 0 (the node is told to
 * drop the key). 0 too if the node is not restoring. */
int mm_restore_report(master_meta *m, uint32_t id, const void *key, size_t keylen, uint64_t size, uint32_t crc,
                      uint64_t obj_off, uint64_t seg_off, uint64_t length);
/* Its report is over: replicas not wholly reported are dropped (and
 * repaired). 1 if it was restoring. */
int mm_restore_done(master_meta *m, uint32_t id, uint64_t now_ms);
int mm_node_restoring(const master_meta *m, uint32_t id);
typedef struct mm_restore_stats {
    uint64_t nodes;               /* restarts that kept their segment */
    uint64_t kept, dropped;       /* replicas confirmed / not proved (repaired) */
    uint64_t unknown;             /* extents reported that the table did not have */
} mm_restore_stats;
void mm_restore_totals(const master_meta *m, mm_restore_stats *st);

/* A node of the cluster's past holds id (a claimant named it): new nodes
 * get ids above it. */
void mm_node_id_taken(master_meta *m, uint32_t id);
/* Notes for node id from sequence number ack on (the ones before are
 * acknowledged and freed), as packed records (proto/notes.h): up to max
 * of them, no more once max_bytes are taken. Returns how many; *recs and
 * *len are their bytes (valid until the next call), *next_seq the number
 * to acknowledge them with. */
/* Only take the acknowledgement (notes before ack are freed). */
void mm_node_holdings_ack(master_meta *m, uint32_t id, uint64_t ack);
size_t mm_node_holdings(master_meta *m, uint32_t id, uint64_t ack, size_t max, size_t max_bytes,
                        const uint8_t **recs, size_t *len, uint64_t *next_seq);
/* Tell node id it holds nothing of key (e.g. a refused report); disk:
 * of its disk tier's record of key, not of its segment's. */
void mm_note_drop_key(master_meta *m, uint32_t id, const void *key, size_t keylen, int disk);
proto_status mm_node_heartbeat(master_meta *m, uint32_t id, uint64_t used, uint64_t now_ms,
                            char *err, size_t errlen);
/* Node id (if a member) was heard from now: another command than a
 * heartbeat, or the master itself was too busy to hear it (a rebuild). */
void mm_node_seen(master_meta *m, uint32_t id, uint64_t now_ms);
/* Stop placing on the node and move its objects away (MOON.DRAIN, LEAVE). */
proto_status mm_node_drain(master_meta *m, uint32_t id, uint64_t now_ms, char *err, size_t errlen);
/* Declare the node gone: its replicas leave the metadata, objects left
 * with none are removed (complete ones counted in objects_lost). */
void mm_node_fail(master_meta *m, uint32_t id, const char *reason, uint64_t now_ms);
/* Node id's scrub found its replica of key (first extent at seg_off)
 * rotten: the replica goes (repair copies the object again, or it is
 * lost if that was the last). 1 if such a replica was there. */
int mm_replica_bad(master_meta *m, uint32_t id, const void *key, size_t keylen, uint64_t seg_off,
                   uint64_t now_ms);
/* A client could not reach the node: place nothing new on it for
 * node_timeout_ms (each report extends that); dead nodes are ignored. */
proto_status mm_node_suspect(master_meta *m, uint32_t id, uint64_t now_ms, char *err, size_t errlen);
/* Fail every node silent for longer than node_timeout (and end suspicions
 * that ran out). Returns how many failed. */
int mm_check_nodes(master_meta *m, uint64_t now_ms);
/* Node id, NULL past the table; an id no node had yet reads as a dead
 * node "not registered" (made in the table when first asked for). */
mm_node *mm_node_get(master_meta *m, uint32_t id);
/* The same without making anything: an id no node had is a shared dead
 * stand-in (for listing and lookups over every id). */
const mm_node *mm_node_view(const master_meta *m, uint32_t id);
uint32_t mm_node_count(const master_meta *m);        /* ids are 1..count */
uint32_t mm_max_nodes(const master_meta *m);         /* the configured bound on ids */
const char *mm_node_state_name(mm_node_state s);

/* ---- objects (lifecycle.c) ---- */
/* Place and insert a PENDING object. The write caps of its extents expire
 * at o->created_ms + put_timeout_ms (mm_write_expiry). */
proto_status mm_put_start(master_meta *m, const void *key, size_t keylen, uint64_t size,
                       uint32_t replicas, uint64_t now_ms, object **out, char *err, size_t errlen);
/* sl (NULL or count 0: none) must cover the object and combine to crc;
 * the object keeps a copy. */
proto_status mm_put_end(master_meta *m, const void *key, size_t keylen, uint32_t crc,
                        const proto_slices *sl, uint64_t now_ms, char *err, size_t errlen);
proto_status mm_put_revoke(master_meta *m, const void *key, size_t keylen, uint64_t now_ms,
                        char *err, size_t errlen);
/* A COMPLETE object and a read lease on it until *lease_until: its bytes
 * are not reused before then, even if it is removed. */
proto_status mm_get(master_meta *m, const void *key, size_t keylen, uint64_t now_ms,
                 object **out, uint64_t *lease_until, char *err, size_t errlen);
proto_status mm_remove(master_meta *m, const void *key, size_t keylen, uint64_t now_ms,
                    char *err, size_t errlen);
/* A reader is done with the lease that expires at lease_until: its bytes
 * need not wait for it. 1 if such a lease was outstanding, else 0 (a
 * lease already returned or expired, an object since removed). */
int mm_lease_return(master_meta *m, const void *key, size_t keylen, uint64_t lease_until,
                    uint64_t now_ms);
/* When o's bytes may be reused if it went now: its latest live lease. */
uint64_t mm_hold_until(const object *o, uint64_t now_ms);
int mm_exists(master_meta *m, const void *key, size_t keylen);   /* COMPLETE only */
/* The pins on prefix hits (MOON.PREFIXPIN): removes and collection ask them. */
pinset *mm_pins_of(master_meta *m);
/* A term began: until until_ms, objects rebuilt from the nodes' reports
 * are held as if pinned (the old leader's pins are not known here until
 * their clients pinned them again: proto/pins.h PROTO_REPIN_GRACE_MS). */
void mm_repin_grace(master_meta *m, uint64_t until_ms);
/* How long o is still held so (0: not). */
uint64_t mm_repin_left(const master_meta *m, const object *o, uint64_t now_ms);
object *mm_find(master_meta *m, const void *key, size_t keylen); /* any state */
uint64_t mm_write_expiry(const master_meta *m, const object *o);
/* A fresh grant stamp for write caps: microseconds of now_ms, above every
 * stamp handed out before, so a node can tell which grant is newer
 * (backend/claims.h) even for grants made in the same millisecond. */
uint64_t mm_issue_us(master_meta *m, uint64_t now_ms);
/* From a Redis-style cursor (stable while the table grows or shrinks):
 * fn for COMPLETE objects until about count were given or the visit
 * bound is met; the next cursor, 0 when the walk is done. */
uint64_t mm_scan(master_meta *m, uint64_t cursor, long count, void (*fn)(object *o, void *ctx),
                 void *ctx);

/* Batch forms: one result per item, each as if done alone, in order. */
typedef struct mm_item {
    const void *key;
    size_t keylen;
    uint64_t size;                /* put_start */
    uint32_t crc;                 /* put_end */
    proto_slices slices;          /* put_end: per-slice CRCs (count 0: none) */
    proto_status status;             /* out */
    object *obj;                  /* out: put_start, get */
    uint64_t lease_until;         /* out: get */
    uint64_t hash;                /* put_start: scratch (its objtable_hash) */
    char err[PROTO_ERR_LEN];         /* out when status != PROTO_OK */
} mm_item;
void mm_put_start_batch(master_meta *m, mm_item *items, size_t n, uint32_t replicas, uint64_t now_ms);
void mm_put_end_batch(master_meta *m, mm_item *items, size_t n, uint64_t now_ms);
void mm_get_batch(master_meta *m, mm_item *items, size_t n, uint64_t now_ms);
/* MOON.RELEASE: each item's lease (lease_until) given back as
 * mm_lease_return; how many of them were still live. */
size_t mm_lease_return_batch(master_meta *m, const mm_item *items, size_t n, uint64_t now_ms);
void mm_exists_batch(master_meta *m, mm_item *items, size_t n);   /* status PROTO_OK or PROTO_NOTFOUND */

/* Revoke puts older than put_timeout; release quarantined extents whose
 * leases expired. Return how many puts / extents. */
int mm_expire_puts(master_meta *m, uint64_t now_ms);
int mm_release_held(master_meta *m, uint64_t now_ms);
/* A put of size x nrep that found no room may wait: quarantined extents
 * on usable nodes that free by horizon_ms, or when their readers give
 * leases back, cover its bytes with what is free now (a reason to wait a
 * bounded time, not a promise that placement will fit). */
int mm_space_due(master_meta *m, uint64_t size, uint32_t nrep, uint64_t horizon_ms);
/* The earliest time a held extent frees (UINT64_MAX: none held). */
uint64_t mm_next_release(const master_meta *m);
/* Extents given back to the allocators so far: a change means a put
 * that found no room may fit now. */
uint64_t mm_space_freed(const master_meta *m);

/* ---- repair (repair.c) ---- */
/* Schedule copies for objects below their replica count or on draining
 * nodes, drop replicas no longer needed, finish drains, fail overdue
 * tasks. Returns the number of tasks created. */
int mm_repair(master_meta *m, uint64_t now_ms);
/* Up to max tasks for node not yet handed out, carrying at most
 * PROTO_MAX_TASK_EXTENTS extents together (one task always goes); marks
 * them handed. */
size_t mm_node_tasks(master_meta *m, uint32_t node, mm_task **out, size_t max);
/* The node finished (ok) or gave up on a task. Only when every task of
 * the new replica succeeded does the replica join the object. */
proto_status mm_copy_done(master_meta *m, uint32_t node, uint64_t task_id, int ok,
                       uint64_t now_ms, char *err, size_t errlen);
uint64_t mm_task_expiry(const mm_task *t);
/* An offload of a share (a replica striped over nodes goes to disk, each
 * node its own extents): where each of t's src extents lies in the
 * object, into out (room for t->nsrc); how many (0: not a share's). */
uint32_t mm_task_share_places(const mm_task *t, uint64_t *out);
/* A repair pass now if no copy is in flight (a wave of copies ended):
 * the next wave need not wait for the sweep. */
void mm_repair_kick(master_meta *m, uint64_t now_ms);

/* ---- disk tier (offload.c) ---- */
/* Node id's disk tier has disk_free bytes free (0: it has none). */
void mm_node_disk(master_meta *m, uint32_t id, uint64_t disk_free);

/* ---- nodes shared by master groups (shares.c) ---- */
struct proto_chunks;
/* The node's chunks for our group are now given (a superset of what it
 * gave before: chunks are only taken back through mm_node_chunks_advise).
 * The first call after the node's allocator was made withholds the whole
 * segment, then frees the given chunks. PROTO_ERR with a message for a
 * chunk size that is not the one it had, or a node without allocator. */
proto_status mm_node_share(master_meta *m, uint32_t id, const struct proto_chunks *given, char *err,
                           size_t errlen);
/* What our group asks of a shared node now: *want more chunks when its
 * free room falls below a quarter of what it holds (or a chunk), enough
 * for half (or two chunks); or at most one
 * wholly free chunk given back into back (withheld here before the node
 * hears of it) when half of the rest (and two chunks) stays free, and
 * only if may_give: not while the table is being rebuilt from the nodes'
 * reports (an allocator that does not know the objects yet looks empty). */
void mm_node_chunks_advise(master_meta *m, uint32_t id, int may_give, uint32_t *want, struct proto_chunks *back);
/* MOON.LENT: [off, off+len) of our chunks on node id was lent to another
 * group (back 0: an object we gave away with a moved slot, adopted
 * there) or given back (back 1). Lent: withheld here (neither used nor
 * free: nothing of ours is placed over it); back: free again a lease
 * time after now_ms (the borrower's readers may still read it).
 * PROTO_TRYAGAIN for a range not wholly in our chunks (a chunk given back
 * that the node kept: it names it ours again in its next MOON.CHUNKS),
 * PROTO_ERR for one overlapping a range lent already. */
proto_status mm_node_lent(master_meta *m, uint32_t id, int back, uint64_t off, uint64_t len, uint64_t now_ms,
                          char *err, size_t errlen);
/* Bytes of our chunks lent to other groups now, and given back ever. */
void mm_lent_stats(const master_meta *m, uint64_t *away, uint64_t *back);
/* The node's shares forgotten (a new allocator, or the table's end). */
void mm_node_shares_reset(mm_node *n);
/* The node said it has free_chunks chunks nobody holds. */
void mm_node_chunks_free(master_meta *m, uint32_t id, uint32_t free_chunks);
/* A put of size found no room: every shared node that may still give
 * chunks is told, on its holdings pull, to ask at once (holdings_wait.c)
 * rather than after its next heartbeat; the chunks given count as space
 * freed (mm_space_freed), so a parked put is placed again. 1 if any may
 * give (wait for it rather than shed to disk). */
int mm_chunks_ahead(master_meta *m, uint64_t size);
/* 1 if shared node n may still give our group chunks: it grows rather
 * than offloads to disk (offload.c). */
int mm_node_may_grow(const mm_node *n);
/* Room for size wanted on n: if it may grow, its next pull tells it to
 * ask now (1), else 0. */
int mm_node_grow(mm_node *n, uint64_t size);
/* Above disk_high_pct of a node's segment, offload tasks for its
 * coldest replicas (wholly there, no lease, copy or pin on the object)
 * down to disk_low_pct; temporary copies whose leases ran out go.
 * Returns how many offloads started. */
int mm_offload(master_meta *m, uint64_t now_ms);
/* A put of size found no room: 1 if offloads are in flight or some node
 * has disk room, which then sheds down to its low watermark for a lease
 * time (an offload pass now if none is in flight): worth a wait. */
int mm_offload_ahead(master_meta *m, uint64_t size, uint64_t now_ms);
/* Loads from disk finished or failed so far: a change means a parked
 * get may be answered. */
uint64_t mm_loads_landed(const master_meta *m);

/* ---- garbage collection (collect.c) ---- */
/* Above the high watermark, collect down to the low one. Only COMPLETE
 * objects with no lease or write cap outstanding and no copy in flight
 * go, as on a remove (their extents are free at once). Returns how many. */
int mm_collect(master_meta *m, uint64_t now_ms);

/* Every periodic job in order: nodes, puts, tasks, quarantine, repair,
 * garbage collection. */
void mm_sweep(master_meta *m, uint64_t now_ms);

/* ---- rebuild (rebuild.c) ---- */
/* One extent a node says it holds: part [obj_off, obj_off+length) of the
 * object key (size, crc), at seg_off in node's segment. */
typedef struct mm_report {
    uint32_t node;
    uint32_t keylen;              /* here, not after key: 64 bytes a report, as before slices */
    const void *key;
    uint64_t size;
    uint32_t crc;
    uint32_t want;                /* replica count the object was put with */
    uint64_t obj_off;
    uint64_t seg_off, length;
    const uint8_t *slices;        /* the object's slice CRCs, packed (proto_slices_ref_get), or NULL */
} mm_report;

typedef struct mm_rebuild_stats {
    uint64_t objects, replicas, extents;   /* accepted */
    uint64_t extents_rejected;             /* bad, overlapping, or part of no whole replica */
    uint64_t keys_incomplete;              /* keys with no whole replica: dropped */
    uint64_t keys_refused;                 /* whole replicas, none claimable (overlap, node) */
    uint64_t objects_short;                /* of objects, with fewer replicas than they want */
} mm_rebuild_stats;

/* Told about each refused extent (e.g. so its node forgets the key). */
typedef void mm_rebuild_refused_fn(const mm_report *r, void *ctx);

/* Re-create COMPLETE objects from reports of any number of nodes: the
 * extents of each key are chained into whole replicas (distinct nodes,
 * contiguous object ranges), then each whole replica claims its space
 * (seg_alloc_reserve_at). Keys already present are left alone; what is
 * refused never blocks another key (only whole replicas that overlap
 * compete), and the same reports again add nothing. fn may be NULL. */
void mm_rebuild(master_meta *m, const mm_report *reports, size_t n, uint64_t now_ms,
                mm_rebuild_stats *st, mm_rebuild_refused_fn *fn, void *ctx);

/* Reports' key hashes taken as they arrive (so a rebuild need not hash
 * them all at its start, where it groups them by key): add reports
 * [from, to) of r, every report from 0 on in order; r may move between
 * calls. */
typedef struct mm_groups mm_groups;
mm_groups *mm_groups_create(void);
void mm_groups_add(mm_groups *g, const mm_report *r, size_t from, size_t to);
void mm_groups_free(mm_groups *g);   /* NULL is fine */

/* The same in steps, so a master can keep answering while it builds a
 * large table: begin takes the reports' hashes g (consumed; NULL or
 * not covering all n: it hashes them itself; they must stay put until
 * the end), each step builds up to keys of them, adding to *st (zero it
 * first); 1 while keys remain, else 0. end gives the job back; free
 * drops it without touching m (m is gone or being reset).
 *
 * prepare, with every report in g and time to spare before begin (a
 * window waiting out its grace): groups them by key, sorts each node's
 * extents for the claims, sizes the table and
 * faults in the heap their objects will take (heap_huge_reserve), so
 * begin and the steps do less. Reports added to g afterwards undo it
 * (begin groups again); nothing in m's objects or nodes changes. */
typedef struct mm_rebuild_job mm_rebuild_job;
void mm_rebuild_prepare(master_meta *m, const mm_report *reports, size_t n, mm_groups *g);
mm_rebuild_job *mm_rebuild_begin(master_meta *m, const mm_report *reports, size_t n, mm_groups *g);
int mm_rebuild_step(master_meta *m, mm_rebuild_job *j, size_t keys, uint64_t now_ms,
                    mm_rebuild_stats *st, mm_rebuild_refused_fn *fn, void *ctx);
void mm_rebuild_end(master_meta *m, mm_rebuild_job *j);
void mm_rebuild_free(mm_rebuild_job *j);

/* ---- holdings notes a command queued (holdings.c) ----
 * A command whose outcome must be known to its nodes before it is
 * answered (a put's end, a remove, a flush: see master/ack_wait.h)
 * brackets its metadata calls with these: every node with acks_awaited
 * that got a note in between is listed once, with the acknowledgement
 * (MOON.HOLDINGS ack, mm_node.notes_seq once taken) that covers its
 * last one. */
typedef struct mm_note_mark {
    uint32_t node;
    uint64_t epoch;               /* mm_node.notes_epoch: a reset voids the mark */
    uint64_t seq;                 /* covered once notes_seq reaches it */
} mm_note_mark;
void mm_notes_track(master_meta *m);
/* The marks since mm_notes_track (valid until the next call of either),
 * how many in *n; tracking stops. */
const mm_note_mark *mm_notes_touched(master_meta *m, size_t *n);

/* ---- observability ---- */
/* O(nodes): the object counts are kept as objects change. */
void mm_get_stats(master_meta *m, mm_stats *st);

#endif
