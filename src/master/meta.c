/* master/meta.c - creating the master state, the sweep, stats. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "master/meta_internal.h"
#include "proto/pins.h"
#include "proto/limits.h"

void mm_config_defaults(mm_config *cfg) {
    cfg->put_timeout_ms = 30000;
    cfg->lease_ms = 10000;
    cfg->node_timeout_ms = 5000;
    cfg->stripe_threshold = 4ULL << 20;
    cfg->stripe_unit = 1ULL << 20;
    cfg->stripe_width = 2;
    cfg->repair_retry_ms = 1000;
    cfg->gc_policy = EVICT_NONE;
    cfg->gc_high_pct = 90;
    cfg->gc_low_pct = 80;
    cfg->disk_promote_after = 1;
    cfg->max_nodes = PROTO_DEFAULT_MAX_NODES;
}

proto_status mm_fail(char *err, size_t errlen, proto_status st, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* What the table does not free of an object it still holds at destroy
 * time (every other removal is mm_drop_object's). */
static void free_object(object *o, void *ctx) {
    mm_obj_free(o);
    object_free_replicas(o);
}

master_meta *mm_create(const mm_config *cfg) {
    master_meta *m = xcalloc(1, sizeof *m);
    m->cfg = *cfg;
    if (m->cfg.stripe_unit < MM_ALIGN) m->cfg.stripe_unit = MM_ALIGN;
    m->cfg.stripe_unit &= ~(uint64_t)(MM_ALIGN - 1);
    if (m->cfg.stripe_width == 0) m->cfg.stripe_width = 1;
    if (m->cfg.stripe_width > MM_MAX_WIDTH) m->cfg.stripe_width = MM_MAX_WIDTH;
    m->objs = otable_create(sizeof(mm_obj));
    m->tombs = mm_tombs_create();
    m->pins = pinset_create(PROTO_PIN_MAX_PER_CONN, PROTO_PIN_MAX_KEYS);
    m->next_task_id = 1;
    evictor_init(&m->gc, (evict_policy)m->cfg.gc_policy, m->cfg.gc_high_pct, m->cfg.gc_low_pct);
    return m;
}

void mm_destroy(master_meta *m) {
    if (!m) return;
    mm_fail_all_tasks(m, 0);
    mm_offload_orphans_free(m);
    otable_destroy(m->objs, free_object, m);
    for (uint32_t i = 0; i < m->nnodes; i++) {
        if (!m->nodes[i]) continue;
        seg_alloc_destroy(m->nodes[i]->alloc);
        mm_node_shares_reset(m->nodes[i]);
        mm_notes_reset(m->nodes[i]);
        mm_restore_abort(m, m->nodes[i]);
        free(m->nodes[i]);
    }
    free(m->nodes);
    free(m->cand);
    free(m->order);
    free(m->held);
    objtable_destroy(m->tombs);
    pinset_destroy(m->pins);
    free(m->tasks);
    free(m->task_ids);
    free(m->touched);
    free(m->marks);
    free(m);
}

const mm_config *mm_get_config(const master_meta *m) { return &m->cfg; }

void mm_sweep(master_meta *m, uint64_t now_ms) {
    mm_check_nodes(m, now_ms);
    mm_expire_puts(m, now_ms);
    mm_expire_tasks(m, now_ms);
    mm_release_held(m, now_ms);
    pinset_expire(m->pins, now_ms);
    mm_repair(m, now_ms);
    mm_offload(m, now_ms);
    mm_collect(m, now_ms);
}

void mm_get_stats(master_meta *m, mm_stats *st) {
    memset(st, 0, sizeof *st);
    for (uint32_t i = 0; i < m->nnodes; i++) {
        mm_node *n = m->nodes[i];
        if (!n) {   /* an id no node has had: dead */
            st->nodes_dead++;
            continue;
        }
        if (n->state == NODE_ALIVE) st->nodes_alive++;
        else if (n->state == NODE_DRAINING) st->nodes_draining++;
        else st->nodes_dead++;
        if (n->suspect && n->state != NODE_DEAD) st->nodes_suspect++;
        st->holdings_pending += n->notes_n;
        if (n->alloc) {
            seg_alloc_stats as;
            seg_alloc_get_stats(n->alloc, &as);
            st->bytes_used += as.used;
            st->bytes_total += as.size;
            st->free_extents += as.free_extents;
            if (as.fragmentation > st->fragmentation_max) st->fragmentation_max = as.fragmentation;
        }
    }
    st->objects_pending = otable_count_state(m->objs, OBJ_PENDING);
    st->objects_complete = otable_count_state(m->objs, OBJ_COMPLETE);
    st->under_replicated = m->under_replicated;
    st->objects_lost = m->objects_lost;
    st->replicas_corrupt = m->replicas_corrupt;
    st->suspicions = m->suspicions;
    st->tasks_pending = m->ntasks;
    st->tasks_done = m->tasks_done;
    st->tasks_failed = m->tasks_failed;
    st->puts_timed_out = m->puts_timed_out;
    st->puts_revoked = m->puts_revoked;
    st->slice_crc_bytes = m->slice_crc_bytes;
    st->offloads = m->offloads;
    st->offload_bytes = m->offload_bytes;
    st->promotes = m->promotes;
    st->promote_bytes = m->promote_bytes;
    st->disk_reads = m->disk_reads + m->disk_direct;
    st->disk_read_bytes = m->disk_read_bytes + m->disk_direct_bytes;
    st->disk_direct = m->disk_direct;
    st->disk_direct_bytes = m->disk_direct_bytes;
    st->offloading_bytes = m->offloading;
    st->offload_orphans = m->orphans_dropped;
    st->disk_pushes = m->disk_pushes;
    st->held_extents = m->nheld;
    st->evicted_keys = m->gc.evicted;
    st->evicted_expired_keys = m->gc.evicted_expired;
}


typedef struct scan_walk {
    void (*fn)(object *o, void *ctx);
    void *ctx;
    long given;
} scan_walk;

static void scan_visit(object *o, void *arg) {
    scan_walk *w = arg;
    if (o->state != OBJ_COMPLETE) return;   /* pending objects are not listed */
    w->fn(o, w->ctx);
    w->given++;
}

uint64_t mm_scan(master_meta *m, uint64_t cursor, long count, void (*fn)(object *o, void *ctx),
                 void *ctx) {
    scan_walk w = {.fn = fn, .ctx = ctx};
    if (count < 1) count = 1;
    long visits = count * PROTO_SCAN_VISITS_PER_KEY;
    do cursor = otable_scan(m->objs, cursor, scan_visit, &w);
    while (cursor != 0 && w.given < count && --visits > 0);
    return cursor;
}

pinset *mm_pins_of(master_meta *m) { return m->pins; }
