/* client/topology.c - the nodes of the cluster and their data addresses,
 * from MOON.TOPOLOGY: [[id, state, [addr ...]] ...], ids 1..n in order.
 * Node ids are a master's: the table is valid for one master term, which
 * every capability carries (backend/cap.h). */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "core/util.h"

static int is_str(const redisReply *r) {
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

static int parse_state(const redisReply *r, mkv_node_state *st) {
    if (!is_str(r)) return -1;
    if (strcmp(r->str, "alive") == 0) *st = MKV_NODE_ALIVE;
    else if (strcmp(r->str, "draining") == 0) *st = MKV_NODE_DRAINING;
    else if (strcmp(r->str, "dead") == 0) *st = MKV_NODE_DEAD;
    else return -1;
    return 0;
}

static int parse_node(const redisReply *r, uint32_t want_id, mkv_node *n) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) return -1;
    const redisReply *id = r->element[0], *addrs = r->element[2];
    if (id->type != REDIS_REPLY_INTEGER || id->integer != (long long)want_id) return -1;
    if (parse_state(r->element[1], &n->state) != 0) return -1;
    if (addrs->type != REDIS_REPLY_ARRAY || addrs->elements > TE_MAX_PATHS) return -1;
    for (size_t i = 0; i < addrs->elements; i++) {
        const redisReply *a = addrs->element[i];
        if (!is_str(a) || a->len == 0 || a->len >= TE_ADDR_LEN) return -1;
        memcpy(n->addrs[i], a->str, a->len);
        n->addrs[i][a->len] = 0;
    }
    n->naddrs = (int)addrs->elements;
    n->id = want_id;
    return 0;
}

static int same_addrs(const mkv_node *a, const mkv_node *b) {
    if (a->naddrs != b->naddrs) return 0;
    for (int i = 0; i < a->naddrs; i++)
        if (strcmp(a->addrs[i], b->addrs[i]) != 0) return 0;
    return 1;
}

/* Bring the engine's node table from the old topology to the new one. A
 * node the engine refuses (bad address) loses its addresses here, so a
 * placement on it fails cleanly in mkv_topology_cover. */
static void sync_engine(mkv_client *c, mkv_node *nodes, uint32_t count) {
    for (uint32_t id = 1; id <= count; id++) {
        mkv_node *n = &nodes[id - 1];
        const mkv_node *old = mkv_topology_node(&c->topo, id);
        int was_up = old && old->state != MKV_NODE_DEAD && old->naddrs > 0;
        if (n->state == MKV_NODE_DEAD) {
            if (was_up) mkv_engine_drop(c, id);
        } else if (!was_up || !same_addrs(old, n)) {
            if (mkv_engine_node(c, n) != MKV_OK) n->naddrs = 0;
        }
    }
}

int mkv_topology_refresh(mkv_client *c) {
    const char *argv[1] = {"MOON.TOPOLOGY"};
    size_t lens[1] = {13};
    int code;
    redisReply *r = mkv_command(c, 1, argv, lens, &code);
    if (!r) return code;
    if (r->type != REDIS_REPLY_ARRAY || r->elements > PROTO_MAX_NODES) {
        code = mkv_bad_reply(c, "MOON.TOPOLOGY", r);
        freeReplyObject(r);
        return code;
    }
    mkv_node *nodes = xcalloc(r->elements ? r->elements : 1, sizeof *nodes);
    for (size_t i = 0; i < r->elements; i++) {
        if (parse_node(r->element[i], (uint32_t)i + 1, &nodes[i]) != 0) {
            free(nodes);
            freeReplyObject(r);
            return mkv_fail(c, MKV_EPROTO, "master: malformed MOON.TOPOLOGY entry %zu", i + 1);
        }
    }
    sync_engine(c, nodes, (uint32_t)r->elements);
    free(c->topo.nodes);
    c->topo.nodes = nodes;
    c->topo.count = (uint32_t)r->elements;
    c->topo.version++;
    c->topo.conn = c->conns;
    freeReplyObject(r);
    return MKV_OK;
}

const mkv_node *mkv_topology_node(const mkv_topology *t, uint32_t id) {
    if (id == 0 || id > t->count) return NULL;
    return &t->nodes[id - 1];
}

void mkv_topology_free(mkv_topology *t) {
    free(t->nodes);
    t->nodes = NULL;
    t->count = 0;
}

void mkv_topology_forget(mkv_client *c) {
    for (uint32_t id = 1; id <= c->topo.count; id++) {
        const mkv_node *n = &c->topo.nodes[id - 1];
        if (n->state != MKV_NODE_DEAD && n->naddrs > 0) mkv_engine_drop(c, id);
    }
    mkv_topology_free(&c->topo);
    c->topo.version++;
    c->topo.term = 0;
}

static int placement_known(const mkv_topology *t, const mkv_placement *pl) {
    for (uint32_t r = 0; r < pl->nreplicas; r++)
        for (uint32_t i = 0; i < pl->replicas[r].nextents; i++) {
            const mkv_node *n = mkv_topology_node(t, pl->replicas[r].extents[i].node_id);
            if (!n || n->naddrs == 0) return 0;
        }
    return 1;
}

/* A topology read on the connection the placement came over is that
 * master's: adopt its term. Otherwise a term we have not seen means
 * another master (process or leader) numbered the nodes. */
static int same_master(mkv_client *c, const mkv_placement *pl) {
    if (pl->term == c->topo.term) return 1;
    if (c->topo.term != 0 || c->topo.conn != c->conns || c->topo.count == 0) return 0;
    c->topo.term = pl->term;
    return 1;
}

int mkv_topology_cover(mkv_client *c, const mkv_placement *pl) {
    if (!same_master(c, pl)) {
        mkv_topology_forget(c);
        int rc = mkv_topology_refresh(c);
        if (rc != MKV_OK) return rc;
        c->topo.term = pl->term;
    }
    if (placement_known(&c->topo, pl)) return MKV_OK;
    int rc = mkv_topology_refresh(c);
    if (rc != MKV_OK) return rc;
    if (!placement_known(&c->topo, pl))
        return mkv_fail(c, MKV_ECONN, "a node of the placement is not in the topology or has no usable data address");
    return MKV_OK;
}
