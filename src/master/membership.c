/* master/membership.c - memory nodes joining, heartbeating, draining, dying.
 *
 * Nodes live in a table indexed by id that grows as ids come (doubling),
 * up to the configured max_nodes (mm_config, --max-nodes); an id no node
 * has had here is an empty slot until something asks for it (a claim of
 * a high id costs a pointer per id below it, not a node),
 * and an id means one node for the cluster's life: a node that had an id
 * claims it back (after a master restart, a lost connection, or restarted
 * with --node-id), and new nodes get ids above every id known, claimed or
 * seen by a claimant; ids are never handed to another node. A late
 * message from an old node is told apart by its connection (the role
 * layer's conn_id). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "master/meta_internal.h"

/* A segment must hold at least one aligned extent; the upper bound keeps
 * offset arithmetic far from overflow. */
#define MM_MIN_SEGMENT MM_ALIGN
#define MM_MAX_SEGMENT (1ULL << 50)

const char *mm_node_state_name(mm_node_state s) {
    switch (s) {
    case NODE_ALIVE: return "alive";
    case NODE_DRAINING: return "draining";
    case NODE_DEAD: return "dead";
    }
    return "unknown";
}

/* What an id that no node has had here is: dead, never registered. */
static mm_node *placeholder(uint32_t id) {
    mm_node *n = xcalloc(1, sizeof *n);
    n->id = id;
    n->state = NODE_DEAD;
    snprintf(n->dead_reason, sizeof n->dead_reason, "not registered");
    snprintf(n->addrs[0], sizeof n->addrs[0], "-");
    return n;
}

static const mm_node absent = {.state = NODE_DEAD, .dead_reason = "not registered", .addrs = {"-"}};

mm_node *mm_node_get(master_meta *m, uint32_t id) {
    if (id == 0 || id > m->nnodes) return NULL;
    mm_node **slot = &m->nodes[id - 1];
    if (!*slot) *slot = placeholder(id);   /* made once something asks for it */
    return *slot;
}

const mm_node *mm_node_view(const master_meta *m, uint32_t id) {
    if (id == 0 || id > m->nnodes) return NULL;
    return m->nodes[id - 1] ? m->nodes[id - 1] : &absent;
}

uint32_t mm_node_count(const master_meta *m) { return m->nnodes; }

static proto_status check_addrs(const char *const *addrs, int naddrs, char *err, size_t errlen) {
    if (naddrs < 1 || naddrs > TE_MAX_PATHS)
        return mm_fail(err, errlen, PROTO_ERR, "a node needs 1 to %d data addresses, got %d",
                       TE_MAX_PATHS, naddrs);
    for (int i = 0; i < naddrs; i++) {
        size_t len = strlen(addrs[i]);
        if (len == 0 || len >= TE_ADDR_LEN)
            return mm_fail(err, errlen, PROTO_ERR,
                           "data address %d must be 1 to %d bytes", i + 1, TE_ADDR_LEN - 1);
    }
    return PROTO_OK;
}

/* The table covers ids up to id: the ones no node has had yet are empty
 * slots (dead, "not registered": mm_node_view), so the table stays dense
 * and a claimed id can be re-created where it was. Bounded by max_nodes:
 * what a peer that proved the secret can make us allocate. */
static int grow_to(master_meta *m, uint32_t id, char *err, size_t errlen) {
    uint32_t max = mm_max_nodes(m);
    if (id > max) {
        mm_fail(err, errlen, PROTO_ERR, "node limit of %u reached (max_nodes)", max);
        return -1;
    }
    if (id <= m->nnodes) return 0;
    if (id > m->cap_nodes) {
        uint32_t cap = m->cap_nodes > max / 2 ? max : 2 * m->cap_nodes;
        if (cap < id) cap = id;
        if (cap < 64 && max >= 64) cap = 64;
        m->nodes = xrealloc(m->nodes, (size_t)cap * sizeof *m->nodes);
        m->cap_nodes = cap;
    }
    memset(m->nodes + m->nnodes, 0, (size_t)(id - m->nnodes) * sizeof *m->nodes);
    m->nnodes = id;
    return 0;
}

uint32_t mm_max_nodes(const master_meta *m) {
    return m->cfg.max_nodes ? m->cfg.max_nodes : PROTO_DEFAULT_MAX_NODES;
}

/* (Re)start node n as a fresh member with this segment and addresses. */
static void node_start(master_meta *m, mm_node *n, seg_alloc *a, uint64_t segment_size,
                       const char *const *addrs, int naddrs, uint64_t instance, uint64_t now_ms) {
    mm_notes_reset(n);
    n->state = NODE_ALIVE;
    n->segment_size = segment_size;
    n->naddrs = naddrs;
    for (int i = 0; i < naddrs; i++) memcpy(n->addrs[i], addrs[i], strlen(addrs[i]) + 1);
    n->alloc = a;
    mm_node_shares_reset(n);   /* a new allocator: what the node gives our group comes anew (shares.c) */
    seg_alloc_watch(a, &m->alloc_changes);
    m->alloc_changes++;   /* a node to place on: placement orders the nodes anew */
    n->instance = instance;
    n->joined = 1;
    n->dead_reason[0] = 0;
    n->suspect = 0;
    n->registered_ms = n->last_seen_ms = now_ms;
    m->repair_dirty = 1;   /* room for objects waiting for a replica */
    m->repair_next_ms = 0;
}

/* How a claim is taken: see mm_reg_kind. */
static mm_reg_kind claim_kind(const mm_node *n, const mm_node_claim *claim) {
    if (!claim->id) return MM_REG_NEW;
    if (!n || !n->joined) return MM_REG_RECLAIMED;
    if (n->instance == claim->instance)   /* back on a new connection (mid-restore: report again) */
        return n->state == NODE_DEAD ? MM_REG_REJOINED : n->restore ? MM_REG_RESTORED : MM_REG_RESUMED;
    /* Restarted with its segment, and still a member: its replicas may stay. */
    if (claim->kept && n->state != NODE_DEAD) return MM_REG_RESTORED;
    /* Another process: a node restarted as this id (--node-id); one that
     * claims from memory an id alive in another process is not its owner. */
    if (claim->restarted || n->state == NODE_DEAD) return MM_REG_REJOINED;
    return MM_REG_NEW;
}

void mm_node_id_taken(master_meta *m, uint32_t id) {
    if (id > m->id_floor) m->id_floor = id;
}

static uint32_t max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }

static const mm_node *node_at(const master_meta *m, uint32_t id) {
    return id && id <= m->nnodes ? m->nodes[id - 1] : NULL;   /* NULL: none yet (not joined) */
}

mm_reg_kind mm_node_pick(const master_meta *m, const mm_node_claim *claim, uint32_t *id) {
    const mm_node *reserved = node_at(m, claim->assign);
    if (claim->assign && (!reserved || !reserved->joined)) {
        *id = claim->assign;
        return MM_REG_NEW;
    }
    mm_reg_kind kind = claim_kind(node_at(m, claim->id), claim);
    /* A new id is above every id known, claimed or seen by the claimant. */
    uint32_t top = max_u32(max_u32(m->nnodes, m->id_floor), max_u32(claim->seen_max, claim->id));
    *id = kind == MM_REG_NEW ? top + 1 : claim->id;
    return kind;
}

/* Another process claims (--node-id) the id of a node that still has its
 * own connection: a copied configuration, not that node restarted. A
 * node that restarted for real has lost its connection (the kernel
 * closed it), or will be declared dead if it is only half-open. */
static int claim_in_use(const mm_node *n, const mm_node_claim *claim) {
    return claim->id && claim->restarted && n && n->joined && n->state != NODE_DEAD &&
           n->instance != claim->instance && n->conn_id != 0;
}

/* The id a registration gets, and how. */
static proto_status pick_id(master_meta *m, const mm_node_claim *claim, uint64_t segment_size, uint64_t now_ms,
                            uint32_t *id, mm_reg_kind *kind, char *err, size_t errlen) {
    *kind = mm_node_pick(m, claim, id);
    /* a segment of another size is another segment */
    if (*kind == MM_REG_RESTORED && mm_node_get(m, *id)->segment_size != segment_size) *kind = MM_REG_REJOINED;
    mm_node_id_taken(m, claim->seen_max);
    mm_node_id_taken(m, claim->id);
    /* A restarted node process: its bytes went with it. */
    if (*kind == MM_REG_REJOINED) mm_node_fail(m, *id, "restarted", now_ms);
    return grow_to(m, *id, err, errlen) ? PROTO_ERR : PROTO_OK;
}

proto_status mm_node_register_as(master_meta *m, const mm_node_claim *claim, uint64_t segment_size,
                                 const char *const *addrs, int naddrs, uint64_t now_ms,
                                 uint32_t *id, mm_reg_kind *kind, char *err, size_t errlen) {
    if (segment_size < MM_MIN_SEGMENT || segment_size > MM_MAX_SEGMENT)
        return mm_fail(err, errlen, PROTO_ERR, "segment size must be %d bytes to 1PiB",
                       MM_MIN_SEGMENT);
    proto_status st = check_addrs(addrs, naddrs, err, errlen);
    const mm_node *held = node_at(m, claim->id);
    if (st == PROTO_OK && claim_in_use(held, claim)) {
        log_warning("node %u: a process at %s claims its id while it is alive on its connection "
                    "(at %s): refused", claim->id, addrs[0], held->addrs[0]);
        return mm_fail(err, errlen, PROTO_IDINUSE, "node %u is alive on another connection (at %s): "
                       "two nodes share a --node-id, or the old process is not gone yet",
                       claim->id, held->addrs[0]);
    }
    if (st == PROTO_OK) st = pick_id(m, claim, segment_size, now_ms, id, kind, err, errlen);
    if (st != PROTO_OK) return st;
    mm_node *n = mm_node_get(m, *id);
    if (*kind == MM_REG_RESTORED) {
        for (int i = 0; i < naddrs; i++) memcpy(n->addrs[i], addrs[i], strlen(addrs[i]) + 1);
        n->naddrs = naddrs;
        n->instance = claim->instance;
        n->suspect = 0;
        n->registered_ms = n->last_seen_ms = now_ms;
        mm_restore_begin(m, n, now_ms);
        return PROTO_OK;
    }
    if (*kind == MM_REG_RESUMED) {
        n->last_seen_ms = now_ms;
        log_notice("node %u is back on a new connection", n->id);
        return PROTO_OK;
    }
    /* Untracked: the table knows where each allocation lies (a tree node
     * of 40 bytes per object otherwise, and an insert per put). */
    seg_alloc *a = seg_alloc_create_untracked(segment_size, MM_ALIGN);
    if (!a) return mm_fail(err, errlen, PROTO_ERR, "cannot manage a segment of that size");
    node_start(m, n, a, segment_size, addrs, naddrs, claim->instance, now_ms);
    log_notice("node %u %s: %s, segment %llu bytes", n->id,
               *kind == MM_REG_NEW ? "joined" : "joined again", n->addrs[0],
               (unsigned long long)segment_size);
    return PROTO_OK;
}

proto_status mm_node_register(master_meta *m, uint64_t segment_size, const char *const *addrs,
                           int naddrs, uint64_t now_ms, uint32_t *id, char *err, size_t errlen) {
    mm_node_claim none = {0};
    mm_reg_kind kind;
    return mm_node_register_as(m, &none, segment_size, addrs, naddrs, now_ms, id, &kind, err, errlen);
}

/* The node must exist and still be a member. */
static proto_status live_node(master_meta *m, uint32_t id, mm_node **out, char *err, size_t errlen) {
    mm_node *n = mm_node_get(m, id);
    if (!n) return mm_fail(err, errlen, PROTO_NOTFOUND, "no node with id %u", id);
    if (n->state == NODE_DEAD)
        return mm_fail(err, errlen, PROTO_NODEDEAD, "node %u left the cluster (%s): register again",
                       id, n->dead_reason);
    *out = n;
    return PROTO_OK;
}

proto_status mm_node_heartbeat(master_meta *m, uint32_t id, uint64_t used, uint64_t now_ms,
                            char *err, size_t errlen) {
    mm_node *n = NULL;
    proto_status st = live_node(m, id, &n, err, errlen);
    if (st != PROTO_OK) return st;
    n->last_seen_ms = now_ms;
    n->reported_used = used;
    return PROTO_OK;
}

void mm_node_seen(master_meta *m, uint32_t id, uint64_t now_ms) {
    mm_node *n = id && id <= m->nnodes ? m->nodes[id - 1] : NULL;   /* an empty slot is dead */
    if (n && n->state != NODE_DEAD && n->last_seen_ms < now_ms) n->last_seen_ms = now_ms;
}

proto_status mm_node_drain(master_meta *m, uint32_t id, uint64_t now_ms, char *err, size_t errlen) {
    mm_node *n = NULL;
    proto_status st = live_node(m, id, &n, err, errlen);
    if (st != PROTO_OK) return st;
    if (n->state == NODE_ALIVE) log_notice("node %u draining", id);
    n->state = NODE_DRAINING;
    m->repair_dirty = 1;
    m->repair_next_ms = 0;
    return PROTO_OK;
}

/* Strip the node out of one object: replicas touching it go, a copy
 * reading from or writing to it fails, an object left bare is removed. */
void mm_forget_node_in(master_meta *m, object *o, uint32_t id, uint64_t now_ms) {
    mm_job *job = mm_obj_job(o);
    if (job) {
        int touches = mm_replica_on_node(&job->rep, id);
        for (uint32_t i = 0; i < o->nreplicas && !touches; i++) touches = mm_obj_on_node(o, i, id);
        if (touches) mm_job_fail(m, job, now_ms);
    }
    for (uint32_t i = o->nreplicas; i-- > 0;)
        if (mm_obj_on_node(o, i, id)) mm_drop_replica(m, o, i, now_ms);
    if (o->nreplicas > 0) return;
    if (o->state == OBJ_COMPLETE) {
        m->objects_lost++;
        log_warning("object lost with node %u: every replica was there", id);
    } else {
        m->puts_revoked++;
    }
    mm_drop_object(m, o, now_ms);
}

int mm_replica_bad(master_meta *m, uint32_t id, const void *key, size_t keylen, uint64_t seg_off,
                   uint64_t now_ms) {
    object *o = mm_find(m, key, keylen);
    if (!o || o->state != OBJ_COMPLETE) return 0;
    int found = 0;
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t i = 0; i < o->nreplicas && !found; i++) {
        const obj_replica *r = &reps[i];
        for (uint32_t k = 0; k < r->nextents && !found; k++)
            found = r->extents[k].node == id && r->extents[k].offset == seg_off;
    }
    if (!found) return 0;   /* removed, or placed again elsewhere, since the node looked */
    log_warning("node %u holds a corrupt replica of a %llu-byte object: dropped", id,
                (unsigned long long)o->size);
    m->replicas_corrupt++;
    mm_forget_node_in(m, o, id, now_ms);
    m->repair_dirty = 1;
    m->repair_next_ms = 0;
    return 1;
}

void mm_node_fail(master_meta *m, uint32_t id, const char *reason, uint64_t now_ms) {
    mm_node *n = mm_node_get(m, id);
    if (!n || n->state == NODE_DEAD) return;
    log_notice("node %u left the cluster: %s", id, reason);
    mm_restore_abort(m, n);
    n->state = NODE_DEAD;
    snprintf(n->dead_reason, sizeof n->dead_reason, "%s", reason);
    size_t count;
    object **all = mm_all_objects(m, &count);
    for (size_t i = 0; i < count; i++) mm_forget_node_in(m, all[i], id, now_ms);
    free(all);
    /* Quarantined extents there will never be reused: forget them. */
    mm_forget_held_on(m, id);
    seg_alloc_destroy(n->alloc);
    n->alloc = NULL;
    mm_notes_reset(n);
    m->repair_dirty = 1;
    m->repair_next_ms = 0;
}

proto_status mm_node_suspect(master_meta *m, uint32_t id, uint64_t now_ms, char *err, size_t errlen) {
    mm_node *n = mm_node_get(m, id);
    if (!n) return mm_fail(err, errlen, PROTO_NOTFOUND, "no node with id %u", id);
    if (n->state == NODE_DEAD) return PROTO_OK;   /* already out: nothing to avoid */
    if (!n->suspect) log_notice("node %u suspect: a client cannot reach it", id);
    n->suspect = 1;
    n->suspect_until_ms = now_ms + m->cfg.node_timeout_ms;
    m->suspicions++;
    return PROTO_OK;
}

int mm_check_nodes(master_meta *m, uint64_t now_ms) {
    int failed = 0;
    for (uint32_t i = 0; i < m->nnodes; i++) {
        mm_node *n = m->nodes[i];
        if (!n) continue;   /* never had a node */
        if (n->suspect && now_ms >= n->suspect_until_ms) {
            n->suspect = 0;
            if (n->state != NODE_DEAD) log_notice("node %u no longer suspect", n->id);
        }
        if (n->state != NODE_DEAD && n->notes_overflow) {
            mm_node_fail(m, n->id, "holdings not taken", now_ms);
            failed++;
            continue;
        }
        if (n->state == NODE_DEAD || now_ms < n->last_seen_ms + m->cfg.node_timeout_ms) continue;
        /* A warning, not a notice: servers in tests log warnings only, and
         * a node lost under load is what a failed test needs said. */
        log_warning("node %u silent for %llu ms (node timeout %llu ms): declared dead", n->id,
                    (unsigned long long)(now_ms - n->last_seen_ms), (unsigned long long)m->cfg.node_timeout_ms);
        mm_node_fail(m, n->id, "heartbeat timeout", now_ms);
        failed++;
    }
    return failed;
}
