/* master/meta_internal.h - what the files of master/meta share privately. */
#ifndef MKV_MASTER_META_INTERNAL_H
#define MKV_MASTER_META_INTERNAL_H

#include <stdarg.h>

#include "core/evict.h"
#include "core/pinset.h"
#include "master/meta.h"
#include "master/otable.h"

/* Extents taken out of use but not yet reusable: a reader or writer may
 * still hold a capability on them until `until`. */
typedef struct mm_tomb mm_tomb;   /* a removed object's returnable leases (quarantine.c) */
typedef struct mm_held {
    obj_extent ext;
    uint64_t until;
    mm_tomb *tomb;              /* NULL: a fixed hold */
} mm_held;

/* One new replica being copied into place by one task per destination node. */
typedef struct mm_job {
    object *o;
    obj_replica rep;
    uint32_t ntasks, nleft;
    mm_task **tasks;
    uint64_t hold_before;       /* an offload: o's hold before its task's read caps */
    int keep_disk;              /* a load for one read: the disk replica stays (not promoted) */
} mm_job;

struct master_meta {
    mm_config cfg;
    otable *objs;               /* the objects, mm_obj in each one's room */
    uint32_t obj_stamps;        /* the last mm_obj.stamp given */
    mm_node **nodes;            /* nodes[id-1]; NULL: no node had the id yet (mm_node_get makes it) */
    uint32_t nnodes, cap_nodes; /* ids covered, room (grows by doubling up to max_nodes) */
    uint32_t rr;                /* round-robin cursor: id of the last node chosen */
    struct mm_cand *cand;       /* placement.c's candidates, kept between placements */
    uint32_t capcand;
    struct mm_cand *order;      /* placement.c: nodes most free first, kept while */
    uint32_t norder;            /* order_changes == alloc_changes (capcand of room) */
    uint64_t alloc_changes;     /* reserves and releases of every node's allocator */
    uint64_t order_changes;
    object *pending_head, *pending_tail;
    mm_held *held;
    size_t nheld, capheld;
    objtable *tombs;            /* removed keys whose leases are still out */
    uint64_t space_freed;       /* extents given back to the allocators, ever */
    mm_task **tasks;            /* tasks not done yet, by id; NULL: a hole (repair.c) */
    uint64_t *task_ids;         /* tasks[i]'s id, kept for holes too */
    size_t tasks_len, ntasks, captasks;   /* entries, live tasks, room */
    uint32_t njobs;
    uint64_t job_bytes;         /* object bytes the jobs in flight copy */
    uint64_t next_task_id;
    int repair_dirty;           /* something may need a copy or a drain may end */
    uint64_t repair_next_ms;    /* earliest next repair pass */
    uint64_t last_issued_us;    /* mm_issue_us */
    uint64_t objects_lost, replicas_corrupt, tasks_done, tasks_failed, puts_timed_out, puts_revoked;
    evictor gc;                 /* policy EVICT_NONE unless configured */
    uint64_t suspicions;
    uint64_t under_replicated;  /* complete objects below their replica count: kept at each change */
    uint32_t id_floor;          /* ids up to here may still be claimed: never new */
    uint64_t slice_crc_bytes;   /* every object's per-slice CRCs */
    uint64_t lent_back_bytes;   /* shares.c: ranges lent away given back, ever */
    /* mm_notes_track: nodes given a note since (ids, then their marks) */
    int tracking;
    uint64_t track_gen;
    uint32_t *touched;
    mm_note_mark *marks;
    size_t ntouched, captouched;
    mm_restore_stats restores;  /* restore.c */
    pinset *pins;               /* pins on prefix hits (core/pinset.h): apart from the objects */
    uint64_t repin_until_ms;    /* objects from the nodes held until (mm_repin_grace) */
    uint64_t rebuilt_last_ms;   /* the latest created_ms a rebuild gave: such objects are the nodes' */
    uint64_t offloads, offload_bytes;   /* offload.c */
    uint64_t promotes, promote_bytes;
    uint64_t disk_reads, disk_read_bytes;   /* loads that kept the disk replica */
    uint64_t disk_direct, disk_direct_bytes;   /* gets answered with a disk record (read from the node's disk) */
    uint64_t offloading;        /* object bytes of offloads in flight (space coming) */
    uint64_t loads_landed;      /* loads finished or failed, ever (parked gets retry) */
    uint64_t shed_until_ms;     /* puts wait for room: offload as if past the high watermark */
    uint64_t temp_swept;        /* disk_reads when the last sweep found no temporary copy */
    struct mm_orphan *orphans;  /* offloads failed here while their node may write (offload.c) */
    size_t norphans;
    uint64_t orphans_dropped;   /* records written for them, dropped */
    uint64_t disk_pushes;       /* repair.c */
};

/* Printf the message into err (if given), return st: every error path is
 * one line. The message has no error word: the reply layer adds it. */
proto_status mm_fail(char *err, size_t errlen, proto_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Counted in under_replicated: every change of an object's state or
 * replicas takes it out first (-=) and puts it back after (+=). */
static inline int mm_under(const object *o) {
    return o->state == OBJ_COMPLETE && o->nreplicas < mm_obj_of(o)->want;
}

/* A node that may receive new extents. */
static inline int mm_node_usable(const mm_node *n) { return n && n->state == NODE_ALIVE; }

/* placement.c */
/* Place nrep replicas of size bytes on usable nodes not marked in
 * exclude[id-1] (may be NULL); distinct nodes across all of them. On
 * PROTO_OK reps[0..nrep) own fresh extent arrays (free with mm_replica_clear). */
/* A replica of like's layout (its extents' nodes and lengths, in order) in
 * those nodes' segments: a load of a disk replica striped over nodes,
 * each node reading its own share back. PROTO_NOSPACE: one did not fit
 * (nothing is kept). */
proto_status mm_place_like(master_meta *m, const obj_replica *like, obj_replica *out);
proto_status mm_place(master_meta *m, uint64_t size, uint32_t nrep, const uint8_t *exclude,
                   obj_replica *reps, char *err, size_t errlen);
void mm_replica_clear(obj_replica *r);

/* shares.c */
/* Claim (reserve_at) and release an extent on node n's allocator; on a
 * shared node a range lying in another group's chunk (an adopted object
 * placed by the group that gave it: master/migrate.h) is lent from the
 * withheld space and given back to it (core/alloc.h seg_alloc_lend). */
int mm_extent_claim(mm_node *n, uint64_t off, uint64_t len);
void mm_extent_release(mm_node *n, uint64_t off, uint64_t len);
/* An extent of an object given away (migrate.c): one lent to us goes
 * back to withheld at once; one of our chunks stays reserved until the
 * node says it lent it (mm_node_lent). */
void mm_extent_given(mm_node *n, uint64_t off, uint64_t len);

/* collect.c */
/* mm_place for a new object, collecting victims while nothing fits. */
proto_status mm_place_collecting(master_meta *m, uint64_t size, uint32_t nrep, obj_replica *reps,
                              uint64_t now_ms, char *err, size_t errlen);

/* quarantine.c */
/* Take the replica's extents out of use; they become free at `until`
 * (now if already passed). Extents on dead nodes are simply forgotten. */
void mm_hold_replica(master_meta *m, const obj_replica *r, uint64_t until, uint64_t now_ms);
/* The same for every replica of a removed o, until its latest live lease;
 * the leases its readers may still give back shorten the hold. */
void mm_hold_object(master_meta *m, const object *o, uint64_t now_ms);
/* Forget the held extents on a dead node (never freed: its segment is gone). */
void mm_forget_held_on(master_meta *m, uint32_t node);
objtable *mm_tombs_create(void);
/* A lease of a removed object given back: 1 if it was live, else 0. */
int mm_tomb_lease_return(master_meta *m, const void *key, size_t keylen, uint64_t lease_until,
                         uint64_t now_ms);
int mm_tomb_has_lease(master_meta *m, const void *key, size_t keylen, uint64_t lease_until);

/* lifecycle.c */
/* Unlink o from the table and hold all its extents until its hold time. */
void mm_drop_object(master_meta *m, object *o, uint64_t now_ms);
/* Remove replica i from o (its extents held until o's hold time). */
void mm_drop_replica(master_meta *m, object *o, uint32_t i, uint64_t now_ms);
/* Append a copy of r (o's arrays are replaced, r stays the caller's). */
void mm_add_replica(master_meta *m, object *o, const obj_replica *r);
void mm_pending_unlink(master_meta *m, object *o);
/* mo's side part, allocated if it has none yet. */
mm_more *mm_more_get(object *o);
/* Give it back if nothing is left in it (no live lease, copy, hold or
 * slice CRCs at now_ms). */
void mm_more_trim(object *o, uint64_t now_ms);
/* Set or clear o's copy in flight. */
void mm_obj_set_job(object *o, struct mm_job *j);
mm_obj *mm_obj_new(master_meta *m, object *o, uint32_t want, uint64_t hold_until);
void mm_obj_free(object *o);
/* A new object for key (hash: objtable_hash of it) with its mm_obj and
 * replicas reps[0..n) in one block. The key must be absent (callers
 * look it up first, or know the table held none of theirs). The caller
 * fills the rest. */
object *mm_obj_insert(master_meta *m, const void *key, size_t keylen, uint64_t hash, uint64_t size,
                      const obj_replica *reps, uint32_t n, uint32_t want, uint64_t hold_until);
/* The memory mm_obj_insert takes for such an object (for sizing ahead). */
size_t mm_obj_bytes(size_t keylen, uint32_t nreplicas, size_t nextents);
int mm_replica_on_node(const obj_replica *r, uint32_t node);
int mm_obj_on_node(const object *o, uint32_t i, uint32_t node);   /* o's replica i */
/* Every object, collected first so callers may delete while walking. */
object **mm_all_objects(master_meta *m, size_t *n);

/* membership.c: node id out of o (replicas, copies touching it; o dropped if bare) */
void mm_forget_node_in(master_meta *m, object *o, uint32_t id, uint64_t now_ms);

/* restore.c */
/* Node n (alive) restarted with its segment: its replicas wait for its
 * report (mm_restore_done judges them, and what it had in flight). */
void mm_restore_begin(master_meta *m, mm_node *n, uint64_t now_ms);
void mm_restore_abort(master_meta *m, mm_node *n);   /* it died meanwhile */
/* A hold note for restoring node n about o (a put of its that the master
 * completed meanwhile): kept at the end though the node never reported it. */
void mm_restore_noted(master_meta *m, mm_node *n, const object *o);

/* holdings.c */
/* Tell the nodes of replica r of COMPLETE o that they hold it (drop = 0)
 * or no longer do; of every replica of o. */
void mm_note_replica(master_meta *m, const object *o, const obj_replica *r, int drop);
void mm_note_object(master_meta *m, const object *o, int drop);
void mm_notes_reset(mm_node *n);

/* repair.c */
/* Start an offload of o's replica src (one extent, wholly on its node)
 * to that node's disk: a job whose new replica is the disk one. */
void mm_offload_start(master_meta *m, object *o, const obj_replica *src, uint64_t now_ms);
/* Load o (every replica on disk) into a new segment replica dst on a
 * node holding its record: a job whose task reads the record into dst.
 * keep_disk: the disk replica stays (a temporary copy, not a promote). */
void mm_load_start(master_meta *m, object *o, const obj_replica *dst, int keep_disk, uint64_t now_ms);
/* offload.c: a get of o, with no replica in DRAM: a load started or in
 * flight (PROTO_TRYAGAIN) or no room for it yet (PROTO_TRYAGAIN too). */
/* A get of o, which has no DRAM replica: PROTO_OK when the reader is to
 * read a disk record straight (the encoders send whole records of an
 * object with no DRAM replica), else why not (TRYAGAIN while a load runs). */
proto_status mm_load(master_meta *m, object *o, uint64_t now_ms, char *err, size_t errlen);
/* A get served from DRAM: o read once more while it also has a disk
 * replica and a temporary copy; promoted (the disk replica goes) at its
 * disk_promote_after-th read. */
void mm_disk_hit(master_meta *m, object *o, uint64_t now_ms);
/* A job with handed offload task t failed: should the node still answer
 * OK for it, its record is dropped (mm_offload_orphan_done, from
 * mm_copy_done for a task it no longer has). */
void mm_offload_orphan(master_meta *m, const mm_task *t, uint64_t now_ms);
void mm_offload_orphan_done(master_meta *m, uint32_t node, uint64_t task_id, int ok);
void mm_offload_orphans_free(master_meta *m);
/* A holdings note telling node id to drop its disk record of key. */
void mm_note_drop_disk_key(master_meta *m, uint32_t id, const void *key, size_t keylen);
/* o's temporary DRAM copy goes (no lease, job or pin left on it). */
void mm_drop_temp_copy(master_meta *m, object *o, uint64_t now_ms);
/* Fewer replicas wholly on alive nodes than the object wants. */
int mm_needs_repair(master_meta *m, const object *o);
void mm_job_fail(master_meta *m, mm_job *j, uint64_t now_ms);
int mm_expire_tasks(master_meta *m, uint64_t now_ms);
/* Fail every job in flight (the master goes). */
void mm_fail_all_tasks(master_meta *m, uint64_t now_ms);

#endif
