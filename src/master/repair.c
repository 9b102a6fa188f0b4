/* master/repair.c - keeping every object at its replica count.
 *
 * Re-replication and drain are one mechanism: a replica counts as healthy
 * only if all its extents are on alive (not draining) nodes, and an
 * object with fewer healthy replicas than it wants gets a new one. The
 * master places it and hands one copy task per destination node out in
 * heartbeat replies; nodes move the bytes and answer MOON.COPYDONE. The
 * new replica joins the object only when every task succeeded, so a
 * reader never sees a replica whose bytes have not fully landed. Then
 * replicas on draining nodes that are no longer needed are dropped, and
 * a draining node nothing refers to any more leaves the cluster.
 *
 * Many small objects move in waves: a pass starts up to MM_MAX_JOBS
 * copies (bounded in bytes too), a heartbeat reply hands a node up to
 * PROTO_MAX_TASKS of them, the node runs a reply's tasks as one engine
 * batch and reports them in one MOON.COPYDONE, and the wave's end starts
 * the next pass (mm_repair_kick) rather than waiting for the sweep. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "master/meta_internal.h"

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static int replica_healthy(master_meta *m, const obj_replica *r) {
    for (uint32_t i = 0; i < r->nextents; i++)
        if (!mm_node_usable(mm_node_get(m, r->extents[i].node))) return 0;
    return 1;
}

static uint32_t healthy_count(master_meta *m, const object *o) {
    uint32_t n = 0;
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t i = 0; i < o->nreplicas; i++) n += replica_healthy(m, &reps[i]);
    return n;
}

int mm_needs_repair(master_meta *m, const object *o) {
    return o->state == OBJ_COMPLETE && healthy_count(m, o) < mm_obj_of(o)->want;
}

uint64_t mm_task_expiry(const mm_task *t) { return t->deadline_ms; }

uint32_t mm_task_share_places(const mm_task *t, uint64_t *out) {
    const obj_replica *r = t->job ? &t->job->rep : NULL;   /* the disk replica: the source's layout */
    if (t->to_disk != MM_TASK_OFFLOAD || !r || r->nextents < 2) return 0;
    uint32_t k = 0;
    uint64_t pos = 0;
    for (uint32_t i = 0; i < r->nextents && k < t->nsrc; pos += r->extents[i].length, i++)
        if (r->extents[i].node == t->node) out[k++] = pos;
    return k == t->nsrc ? k : 0;
}

/* ---- the task list ----
 *
 * In id order (ids only grow, and a job's tasks are pushed as created),
 * so a node's report finds its task by binary search; a task that ends
 * leaves a hole (NULL) and the holes are squeezed out on a push, never
 * while the list is walked. Tens of thousands of tasks in flight cost no
 * quadratic walk. */

static size_t tasks_find(const master_meta *m, uint64_t id) {
    size_t lo = 0, hi = m->tasks_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->task_ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < m->tasks_len && m->task_ids[lo] == id && m->tasks[lo] ? lo : SIZE_MAX;
}

static void tasks_squeeze(master_meta *m) {
    size_t k = 0;
    for (size_t i = 0; i < m->tasks_len; i++) {
        if (!m->tasks[i]) continue;
        m->tasks[k] = m->tasks[i];
        m->task_ids[k++] = m->task_ids[i];
    }
    m->tasks_len = k;
}

static void tasks_push(master_meta *m, mm_task *t) {
    if (m->tasks_len - m->ntasks > m->ntasks) tasks_squeeze(m);
    if (m->tasks_len == m->captasks) {
        m->captasks = m->captasks ? m->captasks * 2 : 16;
        m->tasks = xrealloc(m->tasks, m->captasks * sizeof *m->tasks);
        m->task_ids = xrealloc(m->task_ids, m->captasks * sizeof *m->task_ids);
    }
    m->tasks[m->tasks_len] = t;
    m->task_ids[m->tasks_len++] = t->id;
    m->ntasks++;
    mm_node *n = mm_node_get(m, t->node);
    if (n) n->tasks_waiting++;
}

/* t is handed out, or goes before it was. */
static void task_unwait(master_meta *m, const mm_task *t) {
    mm_node *n = mm_node_get(m, t->node);
    if (n && n->tasks_waiting) n->tasks_waiting--;
}

static void tasks_remove(master_meta *m, mm_task *t) {
    size_t i = tasks_find(m, t->id);
    if (i == SIZE_MAX) return;
    if (!t->handed) task_unwait(m, t);
    m->tasks[i] = NULL;
    m->ntasks--;
}

void mm_fail_all_tasks(master_meta *m, uint64_t now_ms) {
    for (size_t i = 0; i < m->tasks_len; i++)
        if (m->tasks[i]) mm_job_fail(m, m->tasks[i]->job, now_ms);
}

static void extent_push(obj_extent **v, uint32_t *n, obj_extent e) {
    *v = xrealloc(*v, (*n + 1) * sizeof **v);
    (*v)[(*n)++] = e;
}

/* Append to *v the pieces of replica r holding object bytes
 * [off, off+len), in order. */
static void map_pieces(const obj_replica *r, uint64_t off, uint64_t len, obj_extent **v, uint32_t *n) {
    uint64_t pos = 0, end = off + len;
    for (uint32_t i = 0; i < r->nextents && pos < end; i++) {
        const obj_extent *e = &r->extents[i];
        uint64_t lo = off > pos ? off : pos, hi = end < pos + e->length ? end : pos + e->length;
        if (lo < hi) extent_push(v, n, (obj_extent){e->node, e->offset + (lo - pos), hi - lo});
        pos += e->length;
    }
}

/* j's tasks handed out (each node takes its own with its next heartbeat,
 * or at once on a holdings pull that waits for them), the
 * job marked on its object and counted. */
static void job_launch(master_meta *m, mm_job *j) {
    j->nleft = j->ntasks;
    for (uint32_t i = 0; i < j->ntasks; i++) tasks_push(m, j->tasks[i]);
    mm_obj_set_job(j->o, j);
    m->njobs++;
    m->job_bytes += j->o->size;
}

/* A disk job's kind (every task of it is of one: an offload or a load of
 * a replica striped over nodes has a task per node), else 0. */
static int job_disk(const mm_job *j) { return j->ntasks ? j->tasks[0]->to_disk : 0; }

static mm_task *job_task_for(master_meta *m, mm_job *j, uint32_t node, uint64_t deadline) {
    for (uint32_t i = 0; i < j->ntasks; i++)
        if (j->tasks[i]->node == node) return j->tasks[i];
    mm_task *t = xcalloc(1, sizeof *t);
    t->id = m->next_task_id++;
    t->node = node;
    t->job = j;
    t->obj = j->o;
    t->deadline_ms = deadline;
    t->issued_us = mm_issue_us(m, deadline - m->cfg.put_timeout_ms);
    j->tasks = xrealloc(j->tasks, (j->ntasks + 1) * sizeof *j->tasks);
    j->tasks[j->ntasks++] = t;
    return t;
}

static void job_free(mm_job *j) {
    for (uint32_t i = 0; i < j->ntasks; i++) {
        free(j->tasks[i]->src);
        free(j->tasks[i]->dst);
        free(j->tasks[i]);
    }
    free(j->tasks);
    mm_replica_clear(&j->rep);
    free(j);
}

/* ---- jobs ---- */

/* Copy source: a healthy replica if there is one (a draining node is
 * still readable, but spare it the load). */
static const obj_replica *pick_source(master_meta *m, const object *o, obj_reps *v) {
    const obj_replica *any = NULL, *reps = object_reps(o, v);
    for (uint32_t i = 0; i < o->nreplicas; i++) {
        if (mm_replica_on_disk(&reps[i])) continue;   /* not readable by a copy (yet) */
        if (replica_healthy(m, &reps[i])) return &reps[i];
        if (!any) any = &reps[i];
    }
    return any;
}

/* With no replica in a segment to copy from: a disk replica on a node
 * still alive (draining too), which sends its record itself. */
static const obj_replica *pick_disk_source(master_meta *m, const object *o, obj_reps *v) {
    const obj_replica *reps = object_reps(o, v);
    for (uint32_t i = 0; i < o->nreplicas; i++) {
        const mm_node *n = mm_node_get(m, reps[i].extents[0].node);
        int readable = mm_replica_on_disk(&reps[i]);   /* every share's node alive or draining */
        for (uint32_t k = 0; readable && k < reps[i].nextents; k++) {
            n = mm_node_get(m, reps[i].extents[k].node);
            readable = n && (n->state == NODE_ALIVE || n->state == NODE_DRAINING);
        }
        if (readable) return &reps[i];
    }
    return NULL;
}

/* Place one more replica of o and create its tasks. -1 if no room. */
static int job_start(master_meta *m, object *o, uint64_t now_ms) {
    obj_reps v, dv;
    const obj_replica *src = pick_source(m, o, &v), *reps = object_reps(o, &v);
    const obj_replica *disk = src ? NULL : pick_disk_source(m, o, &dv);
    if (!src && !disk) return -1;
    uint8_t *exclude = xcalloc(m->nnodes, 1);
    for (uint32_t i = 0; i < o->nreplicas; i++)
        for (uint32_t k = 0; k < reps[i].nextents; k++)
            exclude[reps[i].extents[k].node - 1] = 1;
    obj_replica rep = {0, NULL};
    proto_status st = mm_place(m, o->size, 1, exclude, &rep, NULL, 0);
    free(exclude);
    if (st != PROTO_OK) return -1;

    mm_job *j = xcalloc(1, sizeof *j);
    j->o = o;
    j->rep = rep;
    uint64_t deadline = now_ms + m->cfg.put_timeout_ms;
    uint64_t pos = 0;
    for (uint32_t i = 0; src && i < rep.nextents; i++) {
        const obj_extent *e = &rep.extents[i];
        mm_task *t = job_task_for(m, j, e->node, deadline);
        extent_push(&t->dst, &t->ndst, *e);
        map_pieces(src, pos, e->length, &t->src, &t->nsrc);
        pos += e->length;
    }
    /* From disk: a task per record, its node writing the new replica's
     * pieces that hold its bytes (every extent for a record of the object
     * whole; for a striped one's share, the pieces of its slices, in
     * object order, as its record holds them). */
    pos = 0;
    for (uint32_t i = 0; !src && i < disk->nextents; i++) {
        const obj_extent *e = &disk->extents[i];
        mm_task *t = job_task_for(m, j, e->node, deadline);
        t->to_disk = MM_TASK_PUSH;
        map_pieces(&rep, pos, e->length, &t->dst, &t->ndst);
        pos += e->length;
    }
    if (!src) m->disk_pushes++;
    /* The tasks' read caps on the source are leases like any other. */
    mm_more *x = mm_more_get(o);
    x->hold_until = max_u64(x->hold_until, deadline);
    job_launch(m, j);
    return 0;
}

/* A disk job (offload or load) ends, landed or not: the waits on it
 * move on (space coming, parked gets). */
static void disk_job_end(master_meta *m, const mm_job *j, uint64_t now_ms) {
    int kind = job_disk(j), handed = 0;
    if (kind == MM_TASK_OFFLOAD) {
        m->offloading -= j->o->size;
        for (uint32_t i = 0; i < j->ntasks; i++) {
            mm_offload_orphan(m, j->tasks[i], now_ms);
            handed |= j->tasks[i]->handed;
        }
        /* Never handed out: no read cap of its tasks' to wait for. */
        if (!handed) mm_more_of(j->o)->hold_until = j->hold_before;
    } else if (kind == MM_TASK_LOAD) {
        m->loads_landed++;
    }
}

void mm_job_fail(master_meta *m, mm_job *j, uint64_t now_ms) {
    uint64_t deadline = j->ntasks ? j->tasks[0]->deadline_ms : now_ms;
    disk_job_end(m, j, now_ms);
    for (uint32_t i = 0; i < j->ntasks; i++) {
        if (j->tasks[i]->done) continue;
        tasks_remove(m, j->tasks[i]);
        m->tasks_failed++;
    }
    /* A node may still be writing there until its write caps expire. */
    mm_hold_replica(m, &j->rep, deadline, now_ms);
    mm_obj_set_job(j->o, NULL);
    m->njobs--;
    m->job_bytes -= j->o->size;
    job_free(j);
    m->repair_dirty = 1;
}

/* Drop replicas on draining nodes once the object has enough without them. */
static void trim(master_meta *m, object *o, uint64_t now_ms) {
    uint32_t want = mm_obj_of(o)->want;
    for (uint32_t i = o->nreplicas; i-- > 0 && o->nreplicas > want;) {
        obj_reps v;
        if (!replica_healthy(m, &object_reps(o, &v)[i]) && healthy_count(m, o) >= want)
            mm_drop_replica(m, o, i, now_ms);
    }
}

/* The object's bytes are on the disk of the task's node: the disk
 * replica joins, the segment replica it came from goes (its extents
 * held until the object's leases end, its node told to forget it). */
static void offload_finish(master_meta *m, mm_job *j, uint64_t now_ms) {
    object *o = j->o;
    const obj_extent src = j->tasks[0]->src[0];
    /* The task's read caps were the node's own, and it is done with them. */
    mm_more_of(o)->hold_until = j->hold_before;
    mm_add_replica(m, o, &j->rep);
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t i = 0; i < o->nreplicas; i++) {
        const obj_replica *r = &reps[i];
        if (r->extents[0].node == src.node && r->extents[0].offset == src.offset) {
            mm_drop_replica(m, o, i, now_ms);
            break;
        }
    }
    mm_obj_of(o)->disk_reads = 0;   /* cold again: reads count from here */
    m->offloads++;
    m->offload_bytes += o->size;
    mm_obj_set_job(o, NULL);
    m->njobs--;
    m->job_bytes -= o->size;
    job_free(j);
}

/* Lying whole on one node, the replica becomes one record of the object
 * there; striped over nodes, it keeps its layout with every offset
 * MM_ON_DISK, and each node writes its own extents as one record (its
 * share): a task per node. */
void mm_offload_start(master_meta *m, object *o, const obj_replica *src, uint64_t now_ms) {
    mm_job *j = xcalloc(1, sizeof *j);
    j->o = o;
    int one = 1;
    for (uint32_t i = 1; i < src->nextents; i++) one &= src->extents[i].node == src->extents[0].node;
    j->rep.nextents = one ? 1 : src->nextents;
    j->rep.extents = xcalloc(j->rep.nextents, sizeof *j->rep.extents);
    for (uint32_t i = 0; i < j->rep.nextents; i++)
        j->rep.extents[i] = (obj_extent){src->extents[i].node, MM_ON_DISK, one ? o->size : src->extents[i].length};
    uint64_t deadline = now_ms + m->cfg.put_timeout_ms;
    for (uint32_t i = 0; i < src->nextents; i++) {
        mm_task *t = job_task_for(m, j, src->extents[i].node, deadline);
        t->to_disk = MM_TASK_OFFLOAD;
        extent_push(&t->src, &t->nsrc, src->extents[i]);
    }
    mm_more *x = mm_more_get(o);   /* its read caps are a lease */
    j->hold_before = x->hold_until;
    x->hold_until = max_u64(x->hold_until, deadline);
    job_launch(m, j);
    m->offloading += o->size;
}

void mm_load_start(master_meta *m, object *o, const obj_replica *dst, int keep_disk, uint64_t now_ms) {
    mm_job *j = xcalloc(1, sizeof *j);
    j->o = o;
    j->rep = *dst;   /* owned by the job now */
    j->keep_disk = keep_disk;
    uint64_t deadline = now_ms + m->cfg.put_timeout_ms;
    for (uint32_t i = 0; i < dst->nextents; i++) {   /* striped: each node reads its own share back */
        mm_task *t = job_task_for(m, j, dst->extents[i].node, deadline);
        t->to_disk = MM_TASK_LOAD;
        extent_push(&t->dst, &t->ndst, dst->extents[i]);
    }
    job_launch(m, j);
}

/* The record landed whole in the new segment replica (the node checked
 * its CRC): the replica joins. Promoted, the disk record on that node
 * goes (a later offload writes it again if the object goes cold); kept,
 * the copy is temporary (mm_drop_temp_copy once read). */
static void load_finish(master_meta *m, mm_job *j, uint64_t now_ms) {
    object *o = j->o;
    uint32_t node = j->tasks[0]->node;
    mm_add_replica(m, o, &j->rep);   /* a copy: job_free frees the job's */
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    mm_note_replica(m, o, &reps[o->nreplicas - 1], 0);
    for (uint32_t i = 0; !j->keep_disk && i < o->nreplicas; i++)
        if (mm_replica_on_disk(&reps[i]) && reps[i].extents[0].node == node) {
            mm_drop_replica(m, o, i, now_ms);
            break;
        }
    if (j->keep_disk) {
        m->disk_reads++;
        m->disk_read_bytes += o->size;
    } else {
        m->promotes++;
        m->promote_bytes += o->size;
    }
    m->loads_landed++;
    mm_obj_set_job(o, NULL);
    m->njobs--;
    m->job_bytes -= o->size;
    job_free(j);
}

static void job_finish(master_meta *m, mm_job *j, uint64_t now_ms) {
    object *o = j->o;
    if (job_disk(j) == MM_TASK_OFFLOAD) {
        m->offloading -= o->size;
        offload_finish(m, j, now_ms);
        return;
    }
    if (job_disk(j) == MM_TASK_LOAD) {
        load_finish(m, j, now_ms);
        return;
    }
    mm_add_replica(m, o, &j->rep);
    obj_reps v;
    mm_note_replica(m, o, &object_reps(o, &v)[o->nreplicas - 1], 0);
    mm_obj_set_job(o, NULL);
    m->njobs--;
    m->job_bytes -= o->size;
    job_free(j);
    trim(m, o, now_ms);
    m->repair_dirty = 1;
    m->repair_next_ms = 0;
}

proto_status mm_copy_done(master_meta *m, uint32_t node, uint64_t task_id, int ok,
                       uint64_t now_ms, char *err, size_t errlen) {
    size_t at = tasks_find(m, task_id);
    mm_task *t = at == SIZE_MAX ? NULL : m->tasks[at];
    if (!t) {
        mm_offload_orphan_done(m, node, task_id, ok);
        return mm_fail(err, errlen, PROTO_NOTFOUND,
                       "no task %llu in progress (finished, failed or expired)",
                       (unsigned long long)task_id);
    }
    if (t->node != node)
        return mm_fail(err, errlen, PROTO_ERR, "task %llu belongs to node %u",
                       (unsigned long long)task_id, t->node);
    mm_job *j = t->job;
    if (!ok || now_ms >= t->deadline_ms) {
        mm_job_fail(m, j, now_ms);
        mm_offload_orphan_done(m, node, task_id, ok);   /* an offload's record came too late */
        if (ok) return mm_fail(err, errlen, PROTO_ERR, "task %llu expired",
                               (unsigned long long)task_id);
        return PROTO_OK;
    }
    t->done = 1;
    tasks_remove(m, t);
    m->tasks_done++;
    if (--j->nleft == 0) job_finish(m, j, now_ms);
    return PROTO_OK;
}

int mm_expire_tasks(master_meta *m, uint64_t now_ms) {
    int n = 0;
    /* mm_job_fail only leaves holes: the walk stays valid. */
    for (size_t i = 0; i < m->tasks_len; i++) {
        if (!m->tasks[i] || m->tasks[i]->deadline_ms > now_ms) continue;
        mm_job_fail(m, m->tasks[i]->job, now_ms);
        n++;
    }
    return n;
}

size_t mm_node_tasks(master_meta *m, uint32_t node, mm_task **out, size_t max) {
    size_t n = 0, extents = 0;
    for (size_t i = 0; i < m->tasks_len && n < max; i++) {
        mm_task *t = m->tasks[i];
        if (!t || t->node != node || t->handed) continue;
        /* The node bounds what one reply makes it allocate. */
        if (n > 0 && extents + t->nsrc + t->ndst > PROTO_MAX_TASK_EXTENTS) break;
        extents += t->nsrc + t->ndst;
        t->handed = 1;
        task_unwait(m, t);
        out[n++] = t;
    }
    return n;
}

/* ---- the repair pass ---- */

/* Per draining node, what this pass learnt about the objects still on it. */
typedef struct drain_view {
    uint32_t refs;       /* objects with an extent there */
    uint32_t waiting;    /* ... of which a copy or a put is in flight */
    uint32_t stuck;      /* ... of which no new replica fits anywhere (nor will: no shared node
                            may give our group more chunks) */
} drain_view;

static void note_drain(master_meta *m, const object *o, drain_view *dv, int waiting, int stuck) {
    for (uint32_t id = 1; id <= m->nnodes; id++) {
        if (!m->nodes[id - 1] || m->nodes[id - 1]->state != NODE_DRAINING) continue;
        int on = 0;
        for (uint32_t i = 0; i < o->nreplicas && !on; i++) on = mm_obj_on_node(o, i, id);
        if (!on) continue;
        dv[id - 1].refs++;
        dv[id - 1].waiting += waiting;
        dv[id - 1].stuck += stuck;
    }
}

static void finish_drains(master_meta *m, const drain_view *dv, uint64_t now_ms) {
    for (uint32_t id = 1; id <= m->nnodes; id++) {
        const drain_view *v = &dv[id - 1];
        if (!m->nodes[id - 1] || m->nodes[id - 1]->state != NODE_DRAINING) continue;
        if (v->refs == 0) mm_node_fail(m, id, "drained", now_ms);
        else if (v->waiting == 0 && v->stuck == v->refs)
            mm_node_fail(m, id, "drained, no room for the rest", now_ms);
    }
}

/* Jobs in flight are bounded in number and in bytes (their copies must
 * land before the caps expire); one always fits. */
static int job_room(const master_meta *m, const object *o) {
    if (m->njobs >= MM_MAX_JOBS) return 0;
    return m->njobs == 0 || m->job_bytes + o->size <= MM_MAX_JOB_BYTES;
}

int mm_repair(master_meta *m, uint64_t now_ms) {
    if (!m->repair_dirty || now_ms < m->repair_next_ms) return 0;
    m->repair_dirty = 0;
    int created = 0, no_room = 0;
    drain_view *dv = xcalloc(m->nnodes ? m->nnodes : 1, sizeof *dv);
    size_t count;
    object **all = mm_all_objects(m, &count);
    for (size_t i = 0; i < count; i++) {
        object *o = all[i];
        mm_obj *mo = mm_obj_of(o);
        int waiting = o->state == OBJ_PENDING || mm_obj_job(o), stuck = 0;
        if (!waiting) trim(m, o, now_ms);
        if (!waiting && healthy_count(m, o) < mo->want) {
            if (!job_room(m, o)) m->repair_dirty = 1;   /* a later pass */
            else if (job_start(m, o, now_ms) == 0) created++, waiting = 1;
            else stuck = !mm_chunks_ahead(m, o->size), no_room = 1;   /* a shared node may give room */
        }
        note_drain(m, o, dv, waiting, stuck);
    }
    free(all);
    finish_drains(m, dv, now_ms);
    free(dv);
    if (no_room) {   /* retry later: space or nodes may come */
        m->repair_dirty = 1;
        m->repair_next_ms = now_ms + m->cfg.repair_retry_ms;
    }
    if (created) log_info("repair: %d copy tasks scheduled", created);
    return created;
}

void mm_repair_kick(master_meta *m, uint64_t now_ms) {
    if (m->njobs == 0) mm_repair(m, now_ms);
}
