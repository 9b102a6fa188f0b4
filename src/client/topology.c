/* client/topology.c - the nodes of the cluster and their data addresses,
 * from MOON.TOPOLOGY: [[id, state, [addr ...]] ...], ids 1..n in order.
 * Node ids are a master's: the table is valid for one master term, which
 * every capability carries (backend/cap.h). */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "core/util.h"
#include "proto/replies.h"

_Static_assert((int)MKV_NODE_ALIVE == (int)PROTO_NODE_ALIVE && (int)MKV_NODE_DRAINING == (int)PROTO_NODE_DRAINING &&
                   (int)MKV_NODE_DEAD == (int)PROTO_NODE_DEAD,
               "node states as the protocol numbers them");

/* Entry r of MOON.TOPOLOGY, which must name node want_id. */
static int parse_node(const redisReply *r, uint32_t want_id, mkv_node *n) {
    proto_topo_node t;
    if (proto_dec_topo_node(r, &t) != 0 || t.id != want_id) return -1;
    for (int i = 0; i < t.naddrs; i++) {
        memcpy(n->addrs[i], t.addrs[i], t.addrlen[i]);
        n->addrs[i][t.addrlen[i]] = 0;
    }
    n->state = (mkv_node_state)t.state;
    n->naddrs = t.naddrs;
    n->id = want_id;
    return 0;
}

static int same_addrs(const mkv_node *a, const mkv_node *b) {
    if (a->naddrs != b->naddrs) return 0;
    for (int i = 0; i < a->naddrs; i++)
        if (strcmp(a->addrs[i], b->addrs[i]) != 0) return 0;
    return 1;
}

static const mkv_node *node_in(const mkv_node *nodes, uint32_t count, uint32_t id) {
    return id == 0 || id > count ? NULL : &nodes[id - 1];
}

static int node_up(const mkv_node *n) { return n && n->state != MKV_NODE_DEAD && n->naddrs > 0; }

/* Bring the core's engine from the nodes it knows to the new ones. A
 * node the engine refuses (bad address) loses its addresses in the
 * core's copy, so a placement on it fails cleanly in mkv_topology_cover.
 * sync_mu held. */
static void sync_engine(mkv_client *c, mkv_node *nodes, uint32_t count) {
    mkv_core *k = c->core;
    for (uint32_t id = count + 1; id <= k->nknown; id++)
        if (node_up(&k->known[id - 1])) mkv_engine_drop(c, id);
    for (uint32_t id = 1; id <= count; id++) {
        mkv_node *n = &nodes[id - 1];
        const mkv_node *old = node_in(k->known, k->nknown, id);
        if (n->state == MKV_NODE_DEAD) {
            if (node_up(old)) mkv_engine_drop(c, id);
        } else if (!node_up(old) || !same_addrs(old, n)) {
            if (mkv_engine_node(c, n) != MKV_OK) n->naddrs = 0;
        }
    }
    free(k->known);
    k->known = nodes;
    k->nknown = count;
}

void mkv_topology_sync(mkv_client *c) {
    mkv_core *k = c->core;
    mkv_topology *t = &k->topo;
    pthread_mutex_lock(&k->sync_mu);   /* one thread tells the engine; the others wait for it */
    pthread_mutex_lock(&k->mu);
    if (k->synced == t->version && k->synced_epoch == t->epoch) {
        pthread_mutex_unlock(&k->mu);
        pthread_mutex_unlock(&k->sync_mu);
        return;
    }
    mkv_node *nodes = xmalloc((t->count ? t->count : 1) * sizeof *nodes);
    if (t->count) memcpy(nodes, t->nodes, t->count * sizeof *nodes);
    uint32_t count = t->count;
    int forgotten = k->synced_epoch != t->epoch;
    k->synced = t->version;
    k->synced_epoch = t->epoch;
    pthread_mutex_unlock(&k->mu);
    if (forgotten) sync_engine(c, NULL, 0);   /* ids may name other nodes now */
    sync_engine(c, nodes, count);
    pthread_mutex_unlock(&k->sync_mu);
}

int mkv_topology_refresh(mkv_client *c) {
    if (!c) return MKV_EINVAL;
    MKV_ON_LANE(c);
    proto_cmd cmd;
    proto_cmd_bare(&cmd, PROTO_VERB_TOPOLOGY);
    int code;
    redisReply *r = mkv_cmd_run(c, &cmd, &code);
    if (!r) return code;
    if (r->type != REDIS_REPLY_ARRAY || r->elements > PROTO_MAX_NODES) {
        code = mkv_bad_reply(c, PROTO_VERB_TOPOLOGY, r);
        freeReplyObject(r);
        return code;
    }
    mkv_node *nodes = xcalloc(r->elements ? r->elements : 1, sizeof *nodes);
    for (size_t i = 0; i < r->elements; i++) {
        if (parse_node(r->element[i], (uint32_t)i + 1, &nodes[i]) != 0) {
            free(nodes);
            freeReplyObject(r);
            return mkv_fail(c, MKV_EPROTO, "master: malformed %s entry %zu", PROTO_VERB_TOPOLOGY, i + 1);
        }
    }
    mkv_topology *t = &c->core->topo;
    pthread_mutex_lock(&c->core->mu);
    free(t->nodes);
    t->nodes = nodes;
    t->count = (uint32_t)r->elements;
    t->version++;
    t->conn = c->conn_id;
    pthread_mutex_unlock(&c->core->mu);
    freeReplyObject(r);
    mkv_topology_sync(c);
    return MKV_OK;
}

void mkv_topology_free(mkv_topology *t) {
    free(t->nodes);
    t->nodes = NULL;
    t->count = 0;
}

void mkv_topology_forget(mkv_client *c) {
    mkv_topology *t = &c->core->topo;
    pthread_mutex_lock(&c->core->mu);
    mkv_topology_free(t);
    t->version++;
    t->epoch++;
    t->term = 0;
    pthread_mutex_unlock(&c->core->mu);
    mkv_topology_sync(c);
}

int mkv_topology_readdressed(mkv_client *c, uint32_t id) {
    mkv_core *k = c->core;
    mkv_node *before = xcalloc(1, sizeof *before);
    pthread_mutex_lock(&k->sync_mu);
    const mkv_node *n = node_in(k->known, k->nknown, id);
    if (n) *before = *n;
    pthread_mutex_unlock(&k->sync_mu);
    int moved = 0;
    if (mkv_topology_refresh(c) == MKV_OK) {
        pthread_mutex_lock(&k->sync_mu);
        n = node_in(k->known, k->nknown, id);
        moved = node_up(n) && !same_addrs(before, n);
        pthread_mutex_unlock(&k->sync_mu);
    }
    free(before);
    return moved;
}

int mkv_topology_learnt(mkv_client *c, uint32_t id) {
    mkv_core *k = c->core;
    if (mkv_topology_refresh(c) != MKV_OK) return -1;
    pthread_mutex_lock(&k->sync_mu);
    int up = node_up(node_in(k->known, k->nknown, id));
    pthread_mutex_unlock(&k->sync_mu);
    return up;
}

/* Whether our table has every node pl names with addresses, and (up) not
 * dead: a node it has dead is not in the engine, though the master may
 * have seen it register again since, under the same id. */
static int placement_known(mkv_client *c, const mkv_placement *pl, int up) {
    mkv_core *k = c->core;
    int known = 1;
    pthread_mutex_lock(&k->sync_mu);
    for (uint32_t r = 0; r < pl->nreplicas && known; r++)
        for (uint32_t i = 0; i < pl->replicas[r].nextents && known; i++) {
            const mkv_node *n = node_in(k->known, k->nknown, pl->replicas[r].extents[i].node_id);
            known = up ? node_up(n) : n && n->naddrs != 0;
        }
    pthread_mutex_unlock(&k->sync_mu);
    return known;
}

/* A topology read on the connection the placement came over is that
 * master's: adopt its term. Otherwise a term we have not seen means
 * another master (process or leader) numbered the nodes. */
static int same_master(mkv_client *c, const mkv_placement *pl) {
    mkv_topology *t = &c->core->topo;
    pthread_mutex_lock(&c->core->mu);
    int same = pl->term == t->term;
    if (!same && t->term == 0 && t->conn == c->conn_id && t->count != 0) {
        t->term = pl->term;
        same = 1;
    }
    pthread_mutex_unlock(&c->core->mu);
    return same;
}

static void adopt_term(mkv_client *c, uint64_t term) {
    pthread_mutex_lock(&c->core->mu);
    c->core->topo.term = term;
    pthread_mutex_unlock(&c->core->mu);
}

int mkv_topology_cover(mkv_client *c, const mkv_placement *pl) {
    if (!same_master(c, pl)) {
        mkv_topology_forget(c);
        int rc = mkv_topology_refresh(c);
        if (rc != MKV_OK) return rc;
        adopt_term(c, pl->term);
    }
    mkv_topology_sync(c);
    if (placement_known(c, pl, 1)) return MKV_OK;
    int rc = mkv_topology_refresh(c);
    if (rc != MKV_OK) return rc;
    /* still dead after all: a read fails over to another replica */
    if (!placement_known(c, pl, 0))
        return mkv_fail(c, MKV_ECONN, "a node of the placement is not in the topology or has no usable data address");
    return MKV_OK;
}
