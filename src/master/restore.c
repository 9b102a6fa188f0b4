/* master/restore.c - a restarted node that kept its segment keeps its replicas.
 *
 * A node whose segment and index live in a file (node/persist.h) comes
 * back from a restart (kill -9, an upgrade) with the bytes it held and
 * proves each object by its CRC32C before it registers, with KEPT. If the
 * master still has it as a member (it came back within node_timeout_ms)
 * it does not drop its replicas as it does for a node that lost its
 * segment: it takes the node's report (MOON.REPORT, as after a master
 * restart) and reconciles it with its table at MOON.REPORTDONE:
 *
 * - a replica the node reported whole (every extent, at the offsets and
 *   with the size and CRC the table has) is kept: no copy is made;
 * - a replica on the node it did not report (the bytes failed their
 *   proof, the index lost it) is dropped and repaired from the others;
 * - an extent reported that the table does not have there (a remove or
 *   a move the node did not hear of) becomes a drop note to the node.
 *
 * What was in flight on the node when its process died is not kept: at
 * MOON.REPORTDONE puts not yet complete lose their replica there (the
 * writer's PUTEND fails or places again) and copies touching it fail; a
 * put the master completed there meanwhile (its writer had written every
 * byte before the crash), which the node could not report, is kept: its
 * hold note goes to the node after the report. Until then nothing new is
 * placed on the node, so everything on it at the end was there at the
 * start. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "master/meta_internal.h"

/* The objects the node reported, by address (an open addressing set: one
 * probe per report), with how many of their extents matched the table. */
typedef struct rs_slot {
    const object *o;     /* NULL: empty */
    uint32_t seen;       /* extents reported as the table has them; UINT32_MAX: a mismatch */
} rs_slot;

struct mm_restore {
    rs_slot *slot;
    size_t mask, n;
    uint64_t started_ms, unknown;
};

/* Objects a pass collects to act on after it (the table is not changed under a scan). */
typedef struct rs_list {
    object **v;
    size_t n, cap;
} rs_list;

static void list_add(rs_list *l, object *o) {
    if (l->n == l->cap) l->v = xrealloc(l->v, (l->cap = l->cap ? l->cap * 2 : 256) * sizeof *l->v);
    l->v[l->n++] = o;
}

static size_t slot_of(const struct mm_restore *r, const object *o) {
    uint64_t h = (uint64_t)(uintptr_t)o * 0x9e3779b97f4a7c15ULL;
    size_t i = (size_t)(h >> 17) & r->mask;
    while (r->slot[i].o && r->slot[i].o != o) i = (i + 1) & r->mask;
    return i;
}

static void set_add(struct mm_restore *r, const object *o) {
    if (2 * (r->n + 1) > r->mask + 1) {   /* at most half full */
        struct mm_restore old = *r;
        r->mask = old.mask ? 2 * old.mask + 1 : 1023;
        r->slot = xcalloc(r->mask + 1, sizeof *r->slot);
        r->n = 0;
        for (size_t i = 0; old.slot && i <= old.mask; i++)
            if (old.slot[i].o) r->slot[slot_of(r, old.slot[i].o)] = old.slot[i], r->n++;
        free(old.slot);
    }
    size_t i = slot_of(r, o);
    if (!r->slot[i].o) r->slot[i].o = o, r->n++;   /* a scan may hand an object twice */
}

static rs_slot *set_find(struct mm_restore *r, const object *o) {
    if (!r->slot) return NULL;
    rs_slot *s = &r->slot[slot_of(r, o)];
    return s->o ? s : NULL;
}

#define DONE (UINT32_MAX - 1)    /* an object done_visit judged */
#define NOTED (UINT32_MAX - 2)   /* completed there by the master during the restore */

void mm_restore_noted(master_meta *m, mm_node *n, const object *o) {
    set_add(n->restore, o);
    set_find(n->restore, o)->seen = NOTED;
}

/* Extents of o on node id (one replica at most: replicas use distinct nodes). */
static uint32_t extents_on(const object *o, uint32_t id) {
    uint32_t k = 0;
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t i = 0; i < o->nreplicas; i++)
        for (uint32_t e = 0; e < reps[i].nextents; e++) k += reps[i].extents[e].node == id;
    return k;
}

static int job_touches(const mm_job *j, const object *o, uint32_t id) {
    if (mm_replica_on_node(&j->rep, id)) return 1;
    for (uint32_t i = 0; i < o->nreplicas; i++)
        if (mm_obj_on_node(o, i, id)) return 1;
    return 0;
}

static void restore_free(mm_node *n) {
    if (!n->restore) return;
    free(n->restore->slot);
    free(n->restore);
    n->restore = NULL;
}

void mm_restore_abort(master_meta *m, mm_node *n) {
    if (n->restore) log_notice("node %u: its restore is abandoned", n->id);
    restore_free(n);
}

/* O(1): the table is judged once, when the report is over (a pass over
 * 10^6 objects here held the registration's answer past the node's
 * timeout on a loaded machine). */
void mm_restore_begin(master_meta *m, mm_node *n, uint64_t now_ms) {
    restore_free(n);
    n->restore = xcalloc(1, sizeof(struct mm_restore));
    n->restore->started_ms = now_ms;
    mm_notes_reset(n);   /* the node's index is what it reports now, not what it had acknowledged */
    m->restores.nodes++;
    log_notice("node %u restarted with its segment: confirming its replicas from its report", n->id);
}

/* How many extents of o on node id the report matches (0: none): one at
 * seg_off of length bytes, obj_off into the object; a disk record's piece
 * (seg_off MM_ON_DISK) likewise, one extent of the disk replica there; or
 * a disk record reported as one extent at 0 (the object whole, or a
 * node's share written before records kept their pieces): every extent
 * of the disk replica there, whose lengths add up to the record's. */
static uint32_t extent_in_table(const object *o, uint32_t id, uint64_t obj_off, uint64_t seg_off, uint64_t length) {
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t i = 0; i < o->nreplicas; i++) {
        uint64_t pos = 0, share = 0;
        uint32_t k = 0;
        for (uint32_t e = 0; e < reps[i].nextents; e++) {
            const obj_extent *x = &reps[i].extents[e];
            if (x->node == id && x->offset == seg_off && x->length == length && pos == obj_off) return 1;
            if (x->node == id && x->offset == MM_ON_DISK) share += x->length, k++;
            pos += x->length;
        }
        if (k && seg_off == MM_ON_DISK && obj_off == 0 && share == length) return k;
    }
    return 0;
}

int mm_restore_report(master_meta *m, uint32_t id, const void *key, size_t keylen, uint64_t size, uint32_t crc,
                      uint64_t obj_off, uint64_t seg_off, uint64_t length) {
    mm_node *n = mm_node_get(m, id);
    struct mm_restore *r = n ? n->restore : NULL;
    if (!r) return 0;
    object *o = mm_find(m, key, keylen);
    uint32_t k = o && o->state == OBJ_COMPLETE && o->size == size && o->crc == crc
                     ? extent_in_table(o, id, obj_off, seg_off, length) : 0;
    int match = k > 0;
    rs_slot *s = o ? set_find(r, o) : NULL;
    if (o && !s && match) {
        set_add(r, o);
        s = set_find(r, o);
    }
    if (s && s->seen != NOTED) s->seen = match && s->seen != UINT32_MAX ? s->seen + k : UINT32_MAX;
    if (!match) {
        r->unknown++;
        mm_note_drop_key(m, id, key, keylen, seg_off == MM_ON_DISK);   /* the node frees it */
    }
    return match;
}


typedef struct done_pass {
    struct mm_restore *r;
    uint32_t id;
    uint64_t kept;
    rs_list jobs, pending, drop;
} done_pass;

/* Everything on the node now was there when the restore began (nothing
 * was placed on it since): what the old process had in flight died with
 * it (its copies fail, its unfinished puts lose their replica there), a
 * complete object is kept if all its extents there were reported. */
static void done_visit(object *o, void *arg) {
    done_pass *d = arg;
    mm_job *job = mm_obj_job(o);
    if (job && job_touches(job, o, d->id)) list_add(&d->jobs, o);
    uint32_t need = extents_on(o, d->id);
    if (!need) return;
    if (o->state != OBJ_COMPLETE) {
        list_add(&d->pending, o);
        return;
    }
    rs_slot *s = set_find(d->r, o);
    if (s && s->seen == DONE) return;   /* handed twice */
    if (s && (s->seen == need || s->seen == NOTED)) d->kept++;
    else list_add(&d->drop, o);
    if (!s) set_add(d->r, o), s = set_find(d->r, o);
    s->seen = DONE;
}

int mm_restore_done(master_meta *m, uint32_t id, uint64_t now_ms) {
    mm_node *n = mm_node_get(m, id);
    struct mm_restore *r = n ? n->restore : NULL;
    if (!r) return 0;
    n->restore = NULL;   /* placements may go there again */
    uint64_t lost0 = m->objects_lost, cursor = 0;
    done_pass d = {r, id, 0, {0}, {0}, {0}};
    do cursor = otable_scan(m->objs, cursor, done_visit, &d);
    while (cursor);
    for (size_t i = 0; i < d.jobs.n; i++) {
        mm_job *job = mm_obj_job(d.jobs.v[i]);
        if (job) mm_job_fail(m, job, now_ms);
    }
    for (size_t i = 0; i < d.pending.n; i++) mm_forget_node_in(m, d.pending.v[i], id, now_ms);
    for (size_t i = 0; i < d.drop.n; i++) mm_forget_node_in(m, d.drop.v[i], id, now_ms);   /* repaired from the others */
    m->restores.kept += d.kept;
    m->restores.dropped += d.drop.n;
    m->restores.unknown += r->unknown;
    if (d.drop.n || d.pending.n || d.jobs.n) {   /* a repair pass walks the whole table: only if there is work */
        m->repair_dirty = 1;
        m->repair_next_ms = 0;
    }
    log_notice("node %u restored in %llu ms: %llu replicas kept, %zu not proved and dropped (%llu objects lost "
               "with them), %llu extents it reported unknown (dropped there), %zu unfinished puts and %zu copies "
               "there failed", id, (unsigned long long)(now_ms - r->started_ms), (unsigned long long)d.kept, d.drop.n,
               (unsigned long long)(m->objects_lost - lost0), (unsigned long long)r->unknown, d.pending.n, d.jobs.n);
    free(d.jobs.v);
    free(d.pending.v);
    free(d.drop.v);
    free(r->slot);
    free(r);
    return 1;
}

int mm_node_restoring(const master_meta *m, uint32_t id) {
    const mm_node *n = id && id <= m->nnodes ? m->nodes[id - 1] : NULL;
    return n && n->restore;
}

void mm_restore_totals(const master_meta *m, mm_restore_stats *st) { *st = m->restores; }
