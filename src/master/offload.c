/* master/offload.c - the disk tier's offloads (docs/SSD_TIER.md).
 *
 * The master owns every segment allocation, so it decides what leaves a
 * node's DRAM: past disk_high_pct of a segment in use (or while puts
 * wait for room), the coldest replicas lying whole in it (least recently
 * read; no lease, copy or pin on their object) go to disk through an
 * offload task (repair.c's jobs), down to disk_low_pct: a replica striped
 * over nodes goes whole, each of its nodes writing its own share. The
 * segment replica goes only once the node answered that the disk record
 * is written and its CRC checked (mm_copy_done).
 *
 * A get of an object with no DRAM replica loads it back (mm_load): for
 * good (promoted) at its disk_promote_after-th read since its offload,
 * before that into a temporary copy that goes once read. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "master/meta_internal.h"

#define OFFLOAD_MAX_PER_PASS 4096   /* tasks a pass starts (more at the next sweep) */

void mm_node_disk(master_meta *m, uint32_t id, uint64_t disk_free) {
    mm_node *n = mm_node_get(m, id);
    if (n) n->disk_free = disk_free;
}

uint64_t mm_loads_landed(const master_meta *m) { return m->loads_landed; }

typedef struct cand {
    object *o;
    uint32_t rep;                 /* the replica that goes */
    uint64_t atime;
} cand;

static int by_atime(const void *a, const void *b) {
    const cand *x = a, *y = b;
    return x->atime < y->atime ? -1 : x->atime > y->atime;
}

/* Bytes of r on node (its share: what it writes as one record). */
static uint64_t share_of(const obj_replica *r, uint32_t node) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < r->nextents; i++) n += r->extents[i].node == node ? r->extents[i].length : 0;
    return n;
}

/* r (a DRAM replica) has bytes on a node that sheds. */
static int sheds(const obj_replica *r, const uint64_t *want) {
    if (mm_replica_on_disk(r)) return 0;
    for (uint32_t i = 0; i < r->nextents; i++)
        if (want[r->extents[i].node - 1]) return 1;
    return 0;
}

/* Every node of r has disk room for its share (a record's header and
 * padding, roughly: the next heartbeat says). */
static int disk_room(master_meta *m, const obj_replica *r) {
    for (uint32_t i = 0; i < r->nextents; i++) {
        const mm_node *n = m->nodes[r->extents[i].node - 1];
        if (n->disk_free < share_of(r, n->id) + 8192) return 0;
    }
    return 1;
}

/* r's offload started: each of its nodes sheds its share. */
static void shed(master_meta *m, const obj_replica *r, uint64_t *want) {
    for (uint32_t i = 0; i < r->nextents; i++) {
        uint32_t id = r->extents[i].node;
        int seen = 0;
        for (uint32_t k = 0; k < i && !seen; k++) seen = r->extents[k].node == id;
        if (seen) continue;
        uint64_t share = share_of(r, id), *w = &want[id - 1];
        m->nodes[id - 1]->disk_free -= share + 8192;
        *w = *w > share ? *w - share : 0;
    }
}

/* o may lose a DRAM replica to a disk: complete, with no lease, copy in
 * flight or pin, and no temporary copy (that one is dropped, not written). */
static int offloadable(master_meta *m, const object *o, uint64_t now_ms) {
    if (o->state != OBJ_COMPLETE || o->nreplicas != mm_obj_of(o)->want || mm_obj_job(o)) return 0;
    return mm_hold_until(o, now_ms) == 0 && pinset_left(m->pins, o->key, o->keylen, now_ms) == 0;
}

/* Bytes node n should shed (0: below its high watermark, or while puts
 * wait for room, below its low one), and at least what a load or put
 * found no room for: a segment may be under its low watermark with no
 * extent large enough free. */
static uint64_t excess(const master_meta *m, mm_node *n, uint64_t now_ms) {
    /* a shared node that may still give our group chunks grows instead */
    if (!n || !n->alloc || n->state != NODE_ALIVE || n->disk_free == 0 || n->restore || mm_node_may_grow(n)) return 0;
    seg_alloc_stats as;
    seg_alloc_get_stats(n->alloc, &as);
    uint64_t low = as.size * m->cfg.disk_low_pct / 100, want = n->shed_want;
    n->shed_want = 0;   /* asked again by the next that finds no room */
    int past = as.used * 100 > as.size * m->cfg.disk_high_pct || m->shed_until_ms > now_ms;
    uint64_t over = past && as.used > low ? as.used - low : 0;
    return over > want ? over : want;
}

/* Room for size is wanted on n: more chunks if it is shared and may give
 * them, else shed at least twice that at the next pass. */
static void want_room(mm_node *n, uint64_t size) {
    if (mm_node_grow(n, size)) return;
    if (n && n->disk_free && n->shed_want < 2 * size) n->shed_want = 2 * size;
}

static int has_disk_replica(const object *o) {
    for (uint32_t i = 0; i < o->nreplicas; i++)
        if (object_replica_first(o, i).offset == MM_ON_DISK) return 1;
    return 0;
}

/* Its disk replica to load from: one on a usable node (NULL: none; v
 * holds what it points at). */
static const obj_replica *load_source(master_meta *m, const object *o, obj_reps *v) {
    const obj_replica *reps = object_reps(o, v);
    for (uint32_t i = 0; i < o->nreplicas; i++) {
        int usable = mm_replica_on_disk(&reps[i]);
        for (uint32_t k = 0; usable && k < reps[i].nextents; k++)
            usable = mm_node_usable(mm_node_get(m, reps[i].extents[k].node));
        if (usable) return &reps[i];
    }
    return NULL;
}

/* Segment room for a load of from, where its records lie: the object
 * whole on the record's node, or a striped one's shares each on its own
 * node in the layout it had. */
static proto_status load_place(master_meta *m, const object *o, const obj_replica *from, obj_replica *rep) {
    if (from->nextents > 1) return mm_place_like(m, from, rep);
    uint8_t *exclude = xmalloc(m->nnodes);
    memset(exclude, 1, m->nnodes);
    exclude[from->extents[0].node - 1] = 0;   /* the record is read where it lies */
    proto_status st = mm_place(m, o->size, 1, exclude, rep, NULL, 0);
    free(exclude);
    return st;
}

/* o has a whole record (one extent) on a usable node: the reader can
 * read it straight from that node's disk (TE_READ_DISK). */
static int direct_source(master_meta *m, const object *o) {
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t i = 0; i < o->nreplicas; i++)
        if (proto_replica_disk_whole(&reps[i]) && mm_node_usable(mm_node_get(m, reps[i].extents[0].node)))
            return 1;
    return 0;
}

/* The get is answered with o's disk records: the reader reads one from
 * its node's disk, the object stays there (its reads still count toward
 * the promote). */
static proto_status read_direct(master_meta *m, object *o) {
    mm_obj *mo = mm_obj_of(o);
    if (mo->disk_reads < MM_DISK_READS_MAX) mo->disk_reads++;
    m->disk_direct++;
    m->disk_direct_bytes += o->size;
    return PROTO_OK;
}

proto_status mm_load(master_meta *m, object *o, uint64_t now_ms, char *err, size_t errlen) {
    o->atime_ms = now_ms;   /* read: not the next offload's pick */
    mm_obj *mo = mm_obj_of(o);
    /* This read is the disk_promote_after-th since the offload: promote. */
    int promote = (uint32_t)mo->disk_reads + 1 >= m->cfg.disk_promote_after, direct = direct_source(m, o);
    /* Before it the reader reads the record itself (while a load runs it
     * waits for it: a promote drops the record when it lands). */
    if (direct && !promote && !mm_obj_job(o)) return read_direct(m, o);
    if (mm_obj_job(o)) return mm_fail(err, errlen, PROTO_TRYAGAIN, "loading from disk");
    obj_reps v;
    const obj_replica *from = load_source(m, o, &v);
    if (!from) return mm_fail(err, errlen, PROTO_NOTFOUND, "only on the disk of an unusable node");
    obj_replica rep = {0, NULL};
    if (load_place(m, o, from, &rep) != PROTO_OK) {
        m->shed_until_ms = now_ms + m->cfg.lease_ms;   /* make room: offload ahead */
        for (uint32_t i = 0; i < from->nextents; i++)
            want_room(mm_node_get(m, from->extents[i].node), share_of(from, from->extents[i].node));
        if (m->offloading == 0) mm_offload(m, now_ms);   /* now, not at the next sweep (as puts do) */
        if (direct) return read_direct(m, o);   /* no DRAM room (both tiers full, say): from the disk */
        return mm_fail(err, errlen, PROTO_TRYAGAIN, "no room yet to load from disk");
    }
    mm_load_start(m, o, &rep, !promote, now_ms);
    return mm_fail(err, errlen, PROTO_TRYAGAIN, "loading from disk");
}

/* Its temporary copy: a DRAM replica beyond the count asked for, beside a
 * disk one (a load kept on disk). UINT32_MAX: none. */
static uint32_t temp_copy(const object *o) {
    if (o->nreplicas <= mm_obj_of(o)->want || !has_disk_replica(o)) return UINT32_MAX;
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t i = o->nreplicas; i-- > 0;)
        if (!mm_replica_on_disk(&reps[i])) return i;
    return UINT32_MAX;
}

void mm_disk_hit(master_meta *m, object *o, uint64_t now_ms) {
    if (temp_copy(o) == UINT32_MAX) return;
    mm_obj *mo = mm_obj_of(o);
    if (mo->disk_reads < MM_DISK_READS_MAX) mo->disk_reads++;
    if (mo->disk_reads < m->cfg.disk_promote_after || mm_obj_job(o)) return;
    /* Read enough: the copy stays and the disk records go. */
    for (uint32_t i = o->nreplicas; i-- > 0 && o->nreplicas > mo->want;)
        if (object_replica_first(o, i).offset == MM_ON_DISK) mm_drop_replica(m, o, i, now_ms);
    m->promotes++;
    m->promote_bytes += o->size;
}

void mm_drop_temp_copy(master_meta *m, object *o, uint64_t now_ms) {
    uint32_t i = temp_copy(o);
    if (i == UINT32_MAX || mm_obj_job(o) || mm_hold_until(o, now_ms)) return;
    mm_drop_replica(m, o, i, now_ms);
}

/* Temporary copies whose leases expired unreturned (a returned lease
 * drops its copy at once: lifecycle.c); the table is walked only while
 * some exist. */
static void drop_temp_copies(master_meta *m, uint64_t now_ms) {
    if (m->disk_reads == m->temp_swept) return;
    size_t count, left = 0;
    object **all = mm_all_objects(m, &count);
    for (size_t i = 0; i < count; i++) {
        mm_drop_temp_copy(m, all[i], now_ms);
        left += temp_copy(all[i]) != UINT32_MAX;
    }
    free(all);
    if (!left) m->temp_swept = m->disk_reads;
}

int mm_offload(master_meta *m, uint64_t now_ms) {
    if (m->cfg.disk_high_pct == 0 || m->nnodes == 0) return 0;
    drop_temp_copies(m, now_ms);
    uint64_t *want = xcalloc(m->nnodes, sizeof *want);
    int any = 0;
    for (uint32_t i = 0; i < m->nnodes; i++) any |= (want[i] = excess(m, m->nodes[i], now_ms)) > 0;
    if (!any) {
        free(want);
        return 0;
    }
    size_t count, nc = 0;
    object **all = mm_all_objects(m, &count);
    cand *c = xcalloc(count ? count : 1, sizeof *c);
    for (size_t i = 0; i < count; i++) {
        const object *o = all[i];
        const mm_job *j = mm_obj_job(o);
        for (uint32_t t = 0; j && t < j->ntasks && j->tasks[t]->to_disk == MM_TASK_OFFLOAD; t++) {
            uint64_t *w = &want[j->tasks[t]->node - 1];   /* on its way: counts as shed */
            uint64_t share = share_of(&j->rep, j->tasks[t]->node);
            *w = *w > share ? *w - share : 0;
        }
    }
    /* One replica per object a pass (one job per object): the first on
     * a node that sheds. */
    for (size_t i = 0; i < count; i++) {
        object *o = all[i];
        if (!offloadable(m, o, now_ms)) continue;
        obj_reps v;
        const obj_replica *reps = object_reps(o, &v);
        for (uint32_t r = 0; r < o->nreplicas; r++)
            if (sheds(&reps[r], want)) {
                c[nc++] = (cand){o, r, o->atime_ms};
                break;
            }
    }
    free(all);
    qsort(c, nc, sizeof *c, by_atime);
    int started = 0;
    for (size_t i = 0; i < nc && started < OFFLOAD_MAX_PER_PASS; i++) {
        object *o = c[i].o;
        obj_reps v;
        const obj_replica *rep = &object_reps(o, &v)[c[i].rep];
        if (!sheds(rep, want) || !disk_room(m, rep)) continue;
        shed(m, rep, want);
        mm_offload_start(m, o, rep, now_ms);
        started++;
    }
    free(c);
    free(want);
    if (started) log_info("offload: %d objects to disk", started);
    return started;
}

/* ---- offloads that failed on the master's side while the node wrote ----
 * A remove (or an expiry) of an object whose offload task was handed
 * out fails the job, but the node may be writing the record: when it
 * answers OK for the task after all, its record is nobody's, and a drop
 * note removes it (sent only then: a note that overtook the write would
 * find nothing to remove). */
#define ORPHANS_MAX 4096

typedef struct mm_orphan {
    uint64_t task_id, until_ms;
    uint32_t node;
    size_t keylen;
    char *key;
} mm_orphan;

static void orphan_free(master_meta *m, size_t i) {
    free(m->orphans[i].key);
    m->orphans[i] = m->orphans[--m->norphans];
}

/* A disk replica of o has a share on node: the key's record there is live. */
static int disk_share_on(const object *o, uint32_t node) {
    obj_reps v;
    const obj_replica *reps = o ? object_reps(o, &v) : NULL;
    for (uint32_t i = 0; o && i < o->nreplicas; i++)
        if (mm_replica_on_disk(&reps[i]) && share_of(&reps[i], node)) return 1;
    return 0;
}

void mm_offload_orphan(master_meta *m, const mm_task *t, uint64_t now_ms) {
    if (t->to_disk != MM_TASK_OFFLOAD || !t->handed) return;
    if (t->done) {
        /* A striped offload whose other share's task failed, or whose
         * object went meanwhile: this node wrote its share and said so,
         * but the job's disk replica never joins the object, so the
         * record is nobody's. The write is over: the note cannot
         * overtake it. (Kept only if a disk replica has a share there.) */
        if (!disk_share_on(t->obj, t->node)) {
            mm_note_drop_disk_key(m, t->node, t->obj->key, t->obj->keylen);
            m->orphans_dropped++;
        }
        return;
    }
    for (size_t i = m->norphans; i-- > 0;)
        if (m->orphans[i].until_ms <= now_ms) orphan_free(m, i);
    if (m->norphans == ORPHANS_MAX) orphan_free(m, 0);   /* the oldest maybe: its record stays */
    if (!m->orphans) m->orphans = xcalloc(ORPHANS_MAX, sizeof *m->orphans);
    /* The node's write is bounded by the task's read caps, checked before it. */
    m->orphans[m->norphans++] = (mm_orphan){t->id, t->deadline_ms + m->cfg.put_timeout_ms, t->node,
                                            t->obj->keylen, xmemdup(t->obj->key, t->obj->keylen)};
}

/* The key's record on node is live: an object with a disk replica or an
 * offload on its way there. */
static int record_wanted(master_meta *m, uint32_t node, const void *key, size_t keylen) {
    const object *o = mm_find(m, key, keylen);
    if (disk_share_on(o, node)) return 1;
    const mm_job *j = o ? mm_obj_job(o) : NULL;
    for (uint32_t t = 0; j && t < j->ntasks; t++)
        if (j->tasks[t]->to_disk == MM_TASK_OFFLOAD && j->tasks[t]->node == node) return 1;
    return 0;
}

void mm_offload_orphan_done(master_meta *m, uint32_t node, uint64_t task_id, int ok) {
    for (size_t i = 0; i < m->norphans; i++) {
        mm_orphan *x = &m->orphans[i];
        if (x->task_id != task_id || x->node != node) continue;
        if (ok && !record_wanted(m, node, x->key, x->keylen)) {
            mm_note_drop_disk_key(m, node, x->key, x->keylen);
            m->orphans_dropped++;
        }
        orphan_free(m, i);
        return;
    }
}

void mm_offload_orphans_free(master_meta *m) {
    while (m->norphans) orphan_free(m, 0);
    free(m->orphans);
    m->orphans = NULL;
}

int mm_offload_ahead(master_meta *m, uint64_t size, uint64_t now_ms) {
    if (m->cfg.disk_high_pct == 0) return 0;
    int room = 0;
    for (uint32_t i = 0; i < m->nnodes; i++) {
        mm_node *n = m->nodes[i];
        if (!mm_node_usable(n) || !n->alloc || n->restore || n->disk_free < size + 8192) continue;
        want_room(n, size);
        room = 1;
    }
    if (!room) return m->offloading > 0;
    m->shed_until_ms = now_ms + m->cfg.lease_ms;   /* shed now, not at the watermark */
    if (m->offloading == 0) mm_offload(m, now_ms);   /* else the next sweep goes on */
    return 1;
}
