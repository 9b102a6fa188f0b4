/* node/shares.c - see shares.h. */
#include "node/shares.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cond.h"
#include "core/log.h"
#include "core/util.h"
#include "proto/extents.h"
#include "etcd/etcd.h"
#include "etcd/slotmap.h"
#include "node/control.h"
#include "node/persist.h"

#define SHARES_ETCD_TIMEOUT_MS 2000
#define SHARES_ID_TRIES        64    /* compare-and-swap attempts for our id */

/* Group name into n->groups[g] (not counted in ngroups yet): 0; 1 if
 * we serve it already; -1 with a message. */
static int fill_group(node *n, int g, const char *name, size_t len, char *err, size_t errlen) {
    if (g == NODE_MAX_GROUPS) {
        snprintf(err, errlen, "a node serves at most %d groups", NODE_MAX_GROUPS);
        return -1;
    }
    node_group *ng = &n->groups[g];
    const char *cluster = n->srv->cfg.cluster_name;
    if (len >= sizeof ng->name || (len && !proto_group_ok(name, len))) {
        snprintf(err, errlen, "bad group '%.*s'", (int)(len > 40 ? 40 : len), name);
        return -1;
    }
    for (int i = 0; i < g; i++)
        if (strlen(n->groups[i].name) == len && memcmp(n->groups[i].name, name, len) == 0) return 1;
    memcpy(ng->name, name, len);
    ng->name[len] = 0;
    if (!len) snprintf(ng->cluster, sizeof ng->cluster, "%s", cluster);
    else if (etcd_group_cluster(cluster, ng->name, ng->cluster, sizeof ng->cluster) != 0) {
        snprintf(err, errlen, "group '%s': cluster name too long", ng->name);
        return -1;
    }
    ng->st = g ? &ng->own : &n->status;
    return 0;
}

/* One group at start ("" for the node of one master; named twice: once). */
static int add_group(node *n, const char *name, size_t len, char *err, size_t errlen) {
    int rc = fill_group(n, n->ngroups, name, len, err, errlen);
    if (rc == 0) n->ngroups++;   /* no other thread yet */
    return rc < 0 ? -1 : 0;
}

/* "a,b,..." or "map": every group the slot map names. */
static int list_groups(node *n, etcd_client *ec, char *err, size_t errlen) {
    const char *list = n->srv->cfg.shared_groups;
    if (strcmp(list, "map") != 0) {
        for (const char *p = list; *p;) {
            size_t len = strcspn(p, ",");
            if (add_group(n, p, len, err, errlen) != 0) return -1;
            p += len + (p[len] == ',');
        }
        return 0;
    }
    proto_slotmap *m = xmalloc(sizeof *m);
    int found = 0, rc = etcd_slotmap_read(ec, n->srv->cfg.cluster_name, m, &found, err, errlen);
    for (int i = 0; rc == 0 && i < m->ngroups; i++)
        rc = add_group(n, m->groups[i], strlen(m->groups[i]), err, errlen);
    free(m);
    if (rc == 0 && n->ngroups == 0) snprintf(err, errlen, "the slot map names no group yet"), rc = -1;
    return rc;
}

/* Our id, the next of a counter in etcd that every shared node takes
 * from: no group's leader names ids for shared nodes. */
static int take_id(node *n, etcd_client *ec, char *err, size_t errlen) {
    char key[ETCD_KEY_MAX], val[32], next[32];
    if (etcd_cluster_key(n->srv->cfg.cluster_name, "node-ids", key, sizeof key) != 0) {
        snprintf(err, errlen, "cluster name too long");
        return -1;
    }
    for (int tries = 0; tries < SHARES_ID_TRIES; tries++) {
        int found = 0, ok = 0;
        int64_t rev;
        if (etcd_get(ec, key, &found, val, sizeof val, &rev, err, errlen) != 0) return -1;
        unsigned long long v = found ? strtoull(val, NULL, 10) : 0;
        if (v + 1 > PROTO_MAX_NODES) {
            snprintf(err, errlen, "node ids used up (%llu)", v);
            return -1;
        }
        snprintf(next, sizeof next, "%llu", v + 1);
        if (etcd_put_if_value(ec, key, next, found ? val : NULL, &ok, err, errlen) != 0) return -1;
        if (ok) {
            n->shared_id = (uint32_t)(v + 1);
            return 0;
        }
    }
    snprintf(err, errlen, "could not take a node id from etcd (%d tries)", SHARES_ID_TRIES);
    return -1;
}

/* ---- the chunks' file: which group held which chunk, beside the segment's ---- */

#define SHARES_FILE ".chunks"
#define SHARES_FILE_MAX ((size_t)NODE_MAX_GROUPS * (40 + PROTO_CHUNKS_TEXT))

static void set_of(node *n, int g, proto_chunks *c);

/* Every group's chunks to the segment's side file (persist.h), so a
 * restarted node gives each group back the chunks its objects lie in. */
static void shares_save(node *n) {
    if (!n->persist || !n->shares) return;
    pthread_mutex_lock(&n->shares_mu);   /* the newest state lands last */
    char *text = xmalloc(SHARES_FILE_MAX);
    size_t len = 0;
    for (int g = 0, ng = node_ngroups(n); g < ng; g++) {
        proto_chunks c;
        set_of(n, g, &c);
        if (!proto_chunks_count(&c)) continue;
        len += (size_t)snprintf(text + len, SHARES_FILE_MAX - len, "%s ", n->groups[g].name);
        len += proto_chunks_format(&c, text + len, SHARES_FILE_MAX - len);
        text[len++] = '\n';
    }
    (void)node_persist_side_write(n->persist, SHARES_FILE, text, len);
    free(text);
    pthread_mutex_unlock(&n->shares_mu);
}

static int group_named(node *n, const char *name, size_t len) {
    for (int g = 0; g < n->ngroups; g++)
        if (strlen(n->groups[g].name) == len && memcmp(n->groups[g].name, name, len) == 0) return g;
    return -1;
}

/* A line "<group> <chunks>" of the file back into the table: how many
 * chunks it gave (a group we no longer serve: none). */
static uint32_t restore_line(node *n, const char *line, size_t len) {
    const char *sp = memchr(line, ' ', len);
    proto_chunks c;
    int g = sp ? group_named(n, line, (size_t)(sp - line)) : -1;
    if (g < 0 || proto_chunks_parse(sp + 1, len - (size_t)(sp + 1 - line), n->seg.size, &c) != 0 ||
        c.chunk_size != te_shares_chunk_size(n->shares))
        return 0;
    uint32_t k = 0;
    for (uint32_t i = 0; i < c.n; i++)
        if (proto_chunks_has(&c, i) && te_shares_owner(n->shares, i) == -1) k += te_shares_set_owner(n->shares, i, g) == -1;
    return k;
}

static int in_free_chunk(uint64_t seg_off, void *ctx) { return te_shares_whose(ctx, seg_off) < 0; }

/* A segment kept in a file: its groups' chunks as they were. What lies
 * in a chunk no group has now (no file, a group we no longer serve) is
 * nobody's: out of the index, or a later owner of the chunk would report
 * it as its own. */
static void shares_restore(node *n) {
    if (!n->persist) return;
    char *text = NULL;
    uint32_t k = 0;
    if (node_persist_side_read(n->persist, SHARES_FILE, &text, SHARES_FILE_MAX) == 0) {
        for (const char *p = text; *p;) {
            size_t len = strcspn(p, "\n");
            k += restore_line(n, p, len);
            p += len + (p[len] == '\n');
        }
        free(text);
    }
    node_index_clear_where(n->index, in_free_chunk, n->shares);
    if (node_persist_restored(n->persist))
        log_notice("node: %u chunk(s) given back to their groups from the segment's file", k);
}

static int setup_shared(node *n, char *err, size_t errlen) {
    const mkv_config *cfg = &n->srv->cfg;
    etcd_client *ec = etcd_create(cfg->etcd, SHARES_ETCD_TIMEOUT_MS, err, errlen);
    if (!ec) return -1;
    int rc = list_groups(n, ec, err, errlen);
    /* --node-id, the id of the node whose segment file we took over, or a new one */
    uint32_t had = cfg->node_id ? (uint32_t)cfg->node_id : node_persist_node_id(n->persist);
    if (rc == 0) rc = had ? (n->shared_id = had, 0) : take_id(n, ec, err, errlen);
    etcd_free(ec);
    if (rc != 0) return -1;
    /* the segment file's id now, before the groups' threads: they only read it */
    node_persist_set_node_id(n->persist, n->shared_id);
    n->shares = te_shares_create(n->seg.size, proto_chunk_size_for(n->seg.size));
    if (!n->shares) {
        snprintf(err, errlen, "cannot cut the segment in chunks");
        return -1;
    }
    shares_restore(n);
    log_notice("node: node %u, serving %d group(s), the segment in %u chunks of %llu bytes", n->shared_id,
               n->ngroups, te_shares_nchunks(n->shares), (unsigned long long)te_shares_chunk_size(n->shares));
    return node_data_set_shares(n->data, n->shared_id, n->shares, wall_ms(), err, errlen);
}

int node_shares_setup(node *n, char *err, size_t errlen) {
    if (!n->srv->cfg.shared_groups[0]) return add_group(n, "", 0, err, errlen);
    return setup_shared(n, err, errlen);
}

void node_shares_free(node *n) {
    te_shares_free(n->shares);
    n->shares = NULL;
}

static void set_of(node *n, int g, proto_chunks *c) {
    proto_chunks_init(c, n->seg.size, te_shares_chunk_size(n->shares));
    for (uint32_t i = 0; i < c->n; i++)
        if (te_shares_owner(n->shares, i) == g) proto_chunks_set(c, i, 1);
}

void node_shares_text(node *n, int g, char *out, size_t cap) {
    proto_chunks c;
    set_of(n, g, &c);
    proto_chunks_format(&c, out, cap);
}

uint32_t node_shares_count(node *n, int g) {
    if (!n->shares) return 0;
    proto_chunks c;
    set_of(n, g, &c);
    return proto_chunks_count(&c);
}

uint32_t node_shares_grant(node *n, int g, uint32_t k) {
    uint32_t got = n->shares ? te_shares_grant(n->shares, g, k) : 0;
    if (got) shares_save(n);
    return got;
}

uint32_t node_shares_take_back(node *n, int g, const char *text, size_t len) {
    proto_chunks back;
    if (!n->shares || proto_chunks_parse(text, len, n->seg.size, &back) != 0 ||
        back.chunk_size != te_shares_chunk_size(n->shares))
        return 0;
    uint32_t k = 0;
    for (uint32_t i = 0; i < back.n; i++) {
        if (!proto_chunks_has(&back, i) || te_shares_owner(n->shares, i) != g) continue;
        uint64_t off, len;
        proto_chunk_range(&back, n->seg.size, i, &off, &len);
        /* another group's objects lie in it (a moved slot's): kept, and
         * named ours again in the next MOON.CHUNKS (a master that did not
         * know of them yet thought it empty) */
        if (te_shares_lent_in(n->shares, off, len)) continue;
        te_shares_set_owner(n->shares, i, -1);
        node_data_forget_claims(n->data, off, off + len);
        k++;
    }
    if (k) shares_save(n);
    return k;
}

int node_shares_mine(node *n, int g, uint64_t seg_off) {
    if (!n->shares) return 1;
    return te_shares_whose(n->shares, seg_off) == g;
}

#define NOTED_EXT 16   /* extents looked up without the heap */

/* The extents of key's index entry: in room (NOTED_EXT) or on the heap
 * (*ext != room: the caller frees it); how many. */
static size_t key_extents(node *n, const void *key, size_t keylen, uint32_t self, obj_extent *room,
                          obj_extent **ext) {
    *ext = room;
    size_t k = node_index_extents(n->index, key, keylen, self, room, NOTED_EXT);
    if (k > NOTED_EXT) {   /* the entry may change between the calls: at most what was allocated */
        size_t cap = k;
        *ext = xmalloc(cap * sizeof **ext);
        k = node_index_extents(n->index, key, keylen, self, *ext, cap);
        if (k > cap) k = cap;
    }
    return k;
}

/* 1 if the index holds key with extent e (ours) among its extents. */
static int indexed(node *n, const void *key, size_t keylen, uint32_t self, const obj_extent *e) {
    obj_extent room[NOTED_EXT], *ext;
    size_t k = key_extents(n, key, keylen, self, room, &ext);
    int found = 0;
    for (size_t i = 0; i < k && !found; i++)
        found = ext[i].node == e->node && ext[i].offset == e->offset && ext[i].length == e->length;
    if (ext != room) free(ext);
    return found;
}

static void unlend_key(node *n, int g, const void *key, size_t keylen, uint32_t self) {
    obj_extent room[NOTED_EXT], *ext;
    size_t k = key_extents(n, key, keylen, self, room, &ext);
    for (size_t i = 0; i < k; i++)
        if (ext[i].node == self && ext[i].offset != PROTO_ON_DISK) (void)te_shares_unlend(n->shares, ext[i].offset, g);
    if (ext != room) free(ext);
}

void node_shares_noted(node *n, int g, const void *key, size_t keylen, const obj_replica *rep, int drop,
                       uint32_t self) {
    if (!n->shares) return;
    if (drop) {
        unlend_key(n, g, key, keylen, self);
        return;
    }
    for (uint32_t i = 0; i < rep->nextents; i++) {
        const obj_extent *e = &rep->extents[i];
        if (e->node != self || e->offset == PROTO_ON_DISK || node_shares_mine(n, g, e->offset)) continue;
        int own = te_shares_owner(n->shares, (uint32_t)(e->offset / te_shares_chunk_size(n->shares))) == g;
        if (!indexed(n, key, keylen, self, e) ||
            (own ? te_shares_reclaim(n->shares, e->offset, g) == 0   /* g adopted it back */
                 : te_shares_lend(n->shares, e->offset, e->length, g) != 0))
            log_warning("node: group %s noted %.*s at %llu+%llu in another group's chunk: not lent",
                        n->groups[g].name, (int)(keylen > 64 ? 64 : keylen), (const char *)key,
                        (unsigned long long)e->offset, (unsigned long long)e->length);
    }
}

typedef struct mine_ctx {
    node *n;
    int g;
} mine_ctx;

static int mine_cb(uint64_t seg_off, void *ctx) {
    mine_ctx *m = ctx;
    return node_shares_mine(m->n, m->g, seg_off);
}

void node_shares_forget_index(node *n, int g) {
    if (!n->shares) {
        node_index_clear(n->index);
        return;
    }
    mine_ctx m = {n, g};
    node_index_clear_where(n->index, mine_cb, &m);
}

/* ---- --shared-groups map: following the slot map ---- */

#define SHARES_FOLLOW_MS 1000   /* between reads of the map */

struct shares_follow {
    node *n;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    etcd_client *ec;
    int full_logged;        /* a group past NODE_MAX_GROUPS was logged */
};

/* Serve group name too: its control thread first, then counted (so
 * whoever loops over the groups finds it whole); a node asked to leave
 * meanwhile asks this group too. Only this thread adds groups. */
static void join_group(struct shares_follow *f, const char *name) {
    node *n = f->n;
    int g = n->ngroups;   /* written by this thread alone */
    char err[160];
    int rc = fill_group(n, g, name, strlen(name), err, sizeof err);
    if (rc < 0 && !f->full_logged++) log_warning("node: group %s of the slot map: %s", name, err);
    if (rc != 0) return;
    if (!node_control_start(n, g)) {
        log_warning("node: cannot start serving group %s", name);
        return;
    }
    pthread_mutex_lock(&n->mu);
    int leaving = n->leaving;
    n->ngroups++;
    pthread_mutex_unlock(&n->mu);
    log_notice("node: group %s is in the slot map now: serving it too", name);
    if (leaving) node_control_request_leave(n->groups[g].ctl);
}

static void follow_once(struct shares_follow *f, proto_slotmap *m) {
    char err[256];
    int found = 0;
    if (etcd_slotmap_read(f->ec, f->n->srv->cfg.cluster_name, m, &found, err, sizeof err) != 0) {
        log_info("node: reading the slot map: %s", err);
        return;
    }
    for (int i = 0; found && i < m->ngroups; i++) join_group(f, m->groups[i]);
}

static void *follow_main(void *arg) {
    struct shares_follow *f = arg;
    proto_slotmap *m = xmalloc(sizeof *m);
    pthread_mutex_lock(&f->mu);
    while (!f->stop) {
        pthread_mutex_unlock(&f->mu);
        follow_once(f, m);
        pthread_mutex_lock(&f->mu);
        struct timespec ts = cond_deadline_ms(SHARES_FOLLOW_MS);
        while (!f->stop && pthread_cond_timedwait(&f->cv, &f->mu, &ts) == 0) {}
    }
    pthread_mutex_unlock(&f->mu);
    free(m);
    return NULL;
}

void node_shares_follow_start(node *n) {
    if (!n->shares || strcmp(n->srv->cfg.shared_groups, "map") != 0) return;
    char err[256];
    struct shares_follow *f = xcalloc(1, sizeof *f);
    f->n = n;
    if (!(f->ec = etcd_create(n->srv->cfg.etcd, SHARES_ETCD_TIMEOUT_MS, err, sizeof err))) {
        log_warning("node: not following the slot map: %s", err);
        free(f);
        return;
    }
    pthread_mutex_init(&f->mu, NULL);
    cond_init_mono(&f->cv);
    n->follow = f;
    pthread_create(&f->th, NULL, follow_main, f);
}

void node_shares_follow_stop(node *n) {
    struct shares_follow *f = n->follow;
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->th, NULL);
    etcd_free(f->ec);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
    n->follow = NULL;
}
