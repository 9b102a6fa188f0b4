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
 * What was in flight on the node when its process died is not kept: puts
 * not yet complete lose their replica there (the writer's PUTEND fails
 * or places again) and copies to or from it fail, at registration. Until
 * MOON.REPORTDONE nothing new is placed on the node, so everything on it
 * at the end was there at the start. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "master/meta_internal.h"

struct mm_restore {
    object **objs;       /* the complete objects on the node at registration, by address */
    uint32_t *seen;      /* extents of each reported as they are in the table; UINT32_MAX: a mismatch */
    size_t n;
    uint64_t started_ms, unknown;
};

/* Extents of o on node id (one replica at most: replicas use distinct nodes). */
static uint32_t extents_on(const object *o, uint32_t id) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < o->nreplicas; i++)
        for (uint32_t e = 0; e < o->replicas[i].nextents; e++) k += o->replicas[i].extents[e].node == id;
    return k;
}

static int job_touches(const mm_job *j, const object *o, uint32_t id) {
    if (mm_replica_on_node(&j->rep, id)) return 1;
    for (uint32_t i = 0; i < o->nreplicas; i++)
        if (mm_replica_on_node(&o->replicas[i], id)) return 1;
    return 0;
}

static void restore_free(mm_node *n) {
    if (!n->restore) return;
    free(n->restore->objs);
    free(n->restore->seen);
    free(n->restore);
    n->restore = NULL;
}

void mm_restore_abort(master_meta *m, mm_node *n) {
    if (n->restore) log_notice("node %u: its restore is abandoned", n->id);
    restore_free(n);
}

void mm_restore_begin(master_meta *m, mm_node *n, uint64_t now_ms) {
    uint32_t id = n->id;
    restore_free(n);
    struct mm_restore *r = xcalloc(1, sizeof *r);
    size_t count, pending = 0;
    object **all = mm_all_objects(m, &count);   /* by address: what the lookups below search */
    r->objs = xmalloc((count + 1) * sizeof *r->objs);
    for (size_t i = 0; i < count; i++) {
        object *o = all[i];
        mm_obj *mo = mm_obj_of(o);
        /* the old process's copies and unfinished puts died with it */
        if (mo->job && job_touches(mo->job, o, id)) mm_job_fail(m, mo->job, now_ms);
        if (!extents_on(o, id)) continue;
        if (o->state == OBJ_COMPLETE) {
            r->objs[r->n++] = o;
        } else {
            pending++;
            mm_forget_node_in(m, o, id, now_ms);
        }
    }
    free(all);
    r->seen = xcalloc(r->n + 1, sizeof *r->seen);
    r->started_ms = now_ms;
    n->restore = r;
    mm_notes_reset(n);   /* the node's index is what it reports now, not what it had acknowledged */
    m->restores.nodes++;
    log_notice("node %u restarted with its segment: %zu objects to confirm, %zu unfinished puts there dropped",
               id, r->n, pending);
}

static int by_addr(const void *key, const void *elem) {
    const object *a = key, *b = *(object *const *)elem;
    return a < b ? -1 : a > b;
}

/* The replica of o has an extent on node id at seg_off of length bytes,
 * obj_off into the object. */
static int extent_in_table(const object *o, uint32_t id, uint64_t obj_off, uint64_t seg_off, uint64_t length) {
    for (uint32_t i = 0; i < o->nreplicas; i++) {
        uint64_t pos = 0;
        for (uint32_t e = 0; e < o->replicas[i].nextents; e++) {
            const obj_extent *x = &o->replicas[i].extents[e];
            if (x->node == id && x->offset == seg_off && x->length == length && pos == obj_off) return 1;
            pos += x->length;
        }
    }
    return 0;
}

int mm_restore_report(master_meta *m, uint32_t id, const void *key, size_t keylen, uint64_t size, uint32_t crc,
                      uint64_t obj_off, uint64_t seg_off, uint64_t length) {
    mm_node *n = mm_node_get(m, id);
    struct mm_restore *r = n ? n->restore : NULL;
    if (!r) return 0;
    object *o = mm_find(m, key, keylen);
    object **at = o ? bsearch(o, r->objs, r->n, sizeof *r->objs, by_addr) : NULL;
    int match = at && o->state == OBJ_COMPLETE && o->size == size && o->crc == crc &&
                extent_in_table(o, id, obj_off, seg_off, length);
    if (at) {
        uint32_t *s = &r->seen[at - r->objs];
        *s = match && *s != UINT32_MAX ? *s + 1 : UINT32_MAX;
    }
    if (!match) {
        r->unknown++;
        mm_note_drop_key(m, id, key, keylen);   /* the node frees it */
    }
    return match;
}

int mm_restore_done(master_meta *m, uint32_t id, uint64_t now_ms) {
    mm_node *n = mm_node_get(m, id);
    struct mm_restore *r = n ? n->restore : NULL;
    if (!r) return 0;
    n->restore = NULL;   /* placements may go there again */
    uint64_t kept = 0, dropped = 0, lost0 = m->objects_lost;
    size_t count;
    object **all = mm_all_objects(m, &count);
    for (size_t i = 0; i < count; i++) {
        object *o = all[i];
        uint32_t need = o->state == OBJ_COMPLETE ? extents_on(o, id) : 0;
        if (!need) continue;
        object **at = bsearch(o, r->objs, r->n, sizeof *r->objs, by_addr);
        if (at && r->seen[at - r->objs] == need) {
            kept++;
            continue;
        }
        dropped++;
        mm_forget_node_in(m, o, id, now_ms);   /* repair copies it from the others */
    }
    free(all);
    m->restores.kept += kept;
    m->restores.dropped += dropped;
    m->restores.unknown += r->unknown;
    m->repair_dirty = 1;
    m->repair_next_ms = 0;
    log_notice("node %u restored in %llu ms: %llu replicas kept, %llu not proved and dropped (%llu objects lost "
               "with them), %llu extents it reported unknown (dropped there)", id,
               (unsigned long long)(now_ms - r->started_ms), (unsigned long long)kept, (unsigned long long)dropped,
               (unsigned long long)(m->objects_lost - lost0), (unsigned long long)r->unknown);
    free(r->objs);
    free(r->seen);
    free(r);
    return 1;
}

int mm_node_restoring(const master_meta *m, uint32_t id) {
    const mm_node *n = id && id <= m->nnodes ? m->nodes[id - 1] : NULL;
    return n && n->restore;
}

void mm_restore_totals(const master_meta *m, mm_restore_stats *st) { *st = m->restores; }
