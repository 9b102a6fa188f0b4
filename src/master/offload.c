/* master/offload.c - the disk tier's offloads (docs/SSD_TIER.md).
 *
 * The master owns every segment allocation, so it decides what leaves a
 * node's DRAM: past disk_high_pct of a segment in use, the coldest
 * objects lying whole in it (least recently read; one replica, one
 * extent; no lease, copy or pin) go to that node's disk through an
 * offload task (repair.c's jobs), down to disk_low_pct. The segment
 * replica goes only once the node answered that the disk record is
 * written and its CRC checked (mm_copy_done). */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "master/meta_internal.h"
#include "master/pins.h"

#define OFFLOAD_MAX_PER_PASS 4096   /* tasks a pass starts (more at the next sweep) */

void mm_node_disk(master_meta *m, uint32_t id, uint64_t disk_free) {
    mm_node *n = mm_node_get(m, id);
    if (n) n->disk_free = disk_free;
}

typedef struct cand {
    object *o;
    uint64_t atime;
} cand;

static int by_atime(const void *a, const void *b) {
    const cand *x = a, *y = b;
    return x->atime < y->atime ? -1 : x->atime > y->atime;
}

/* o may go to the disk of the node holding its one segment replica. */
static int offloadable(master_meta *m, const object *o, uint64_t now_ms) {
    if (o->state != OBJ_COMPLETE || o->nreplicas != 1 || mm_obj_of(o)->want != 1) return 0;
    const obj_replica *r = &o->replicas[0];
    if (r->nextents != 1 || mm_replica_on_disk(r) || mm_obj_job(o)) return 0;
    return mm_hold_until(o, now_ms) == 0 && mm_pins_left(m->pins, o->key, o->keylen, now_ms) == 0;
}

/* Bytes node n should shed (0: below its high watermark). */
static uint64_t excess(const master_meta *m, const mm_node *n) {
    if (!n->alloc || n->state != NODE_ALIVE || n->disk_free == 0 || n->restore) return 0;
    seg_alloc_stats as;
    seg_alloc_get_stats(n->alloc, &as);
    if (as.used * 100 <= as.size * m->cfg.disk_high_pct) return 0;
    return as.used - as.size * m->cfg.disk_low_pct / 100;
}

proto_status mm_load(master_meta *m, object *o, uint64_t now_ms, char *err, size_t errlen) {
    o->atime_ms = now_ms;   /* read: not the next offload's pick */
    if (mm_obj_job(o)) return mm_fail(err, errlen, PROTO_TRYAGAIN, "loading from disk");
    uint32_t home = o->replicas[0].extents[0].node;
    mm_node *n = mm_node_get(m, home);
    if (!mm_node_usable(n)) return mm_fail(err, errlen, PROTO_NOTFOUND, "only on the disk of an unusable node");
    uint8_t *exclude = xmalloc(m->nnodes);
    memset(exclude, 1, m->nnodes);
    exclude[home - 1] = 0;   /* the record is read where it lies */
    obj_replica rep = {0, NULL};
    proto_status st = mm_place(m, o->size, 1, exclude, &rep, NULL, 0);
    free(exclude);
    if (st != PROTO_OK) return mm_fail(err, errlen, PROTO_TRYAGAIN, "no room yet to load from disk");
    mm_load_start(m, o, &rep, now_ms);
    return mm_fail(err, errlen, PROTO_TRYAGAIN, "loading from disk");
}

int mm_offload(master_meta *m, uint64_t now_ms) {
    if (m->cfg.disk_high_pct == 0 || m->nnodes == 0) return 0;
    uint64_t *want = xcalloc(m->nnodes, sizeof *want);
    int any = 0;
    for (uint32_t i = 0; i < m->nnodes; i++) any |= (want[i] = excess(m, m->nodes[i])) > 0;
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
        if (j && j->ntasks == 1 && j->tasks[0]->to_disk == MM_TASK_OFFLOAD) {   /* on its way: counts as shed */
            uint64_t *w = &want[j->tasks[0]->node - 1];
            *w = *w > o->size ? *w - o->size : 0;
        }
    }
    for (size_t i = 0; i < count; i++)
        if (offloadable(m, all[i], now_ms) && want[all[i]->replicas[0].extents[0].node - 1])
            c[nc++] = (cand){all[i], all[i]->atime_ms};
    free(all);
    qsort(c, nc, sizeof *c, by_atime);
    int started = 0;
    for (size_t i = 0; i < nc && started < OFFLOAD_MAX_PER_PASS; i++) {
        object *o = c[i].o;
        mm_node *n = m->nodes[o->replicas[0].extents[0].node - 1];
        uint64_t *w = &want[n->id - 1];
        if (*w == 0 || n->disk_free < o->size + 8192) continue;
        mm_offload_start(m, o, &o->replicas[0], now_ms);
        n->disk_free -= o->size + 8192;   /* its header and padding, roughly: the next heartbeat says */
        *w = *w > o->size ? *w - o->size : 0;
        started++;
    }
    free(c);
    free(want);
    if (started) log_info("offload: %d objects to disk", started);
    return started;
}
