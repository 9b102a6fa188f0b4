/* client/route.c - see route.h: keys routed to their master group. */
#include "client/route.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client.h"
#include "core/util.h"
#include "etcd/slotmap.h"
#include "proto/slots.h"

#define ROUTE_ETCD_TIMEOUT_MS 1000
#define ROUTE_NAP_MS 20   /* a MOVED the map in etcd does not explain yet: the masters lag it */

typedef struct route_group {
    char name[PROTO_GROUP_LEN];
    mkv_client *cl;
} route_group;

typedef struct route_region {
    void *addr;
    size_t len;
    int warm;
} route_region;

typedef struct mkv_route {
    mkv_options opt;                     /* the group clients'; strings in strs */
    char *strs[MKV_OPTION_STRS];
    char cluster[64];
    int timeout_ms;
    etcd_client *ec;
    pthread_mutex_t refresh_mu;          /* one etcd read at a time */
    pthread_mutex_t mu;                  /* map, groups */
    proto_slotmap *map;
    route_group groups[PROTO_MAX_GROUPS];
    int ngroups;
    pthread_rwlock_t regions_lock;       /* regions; taken before mu */
    route_region regions[MKV_MAX_REGIONS];
    int nregions;
} mkv_route;

static void nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the slot map ---- */

static uint64_t map_version(mkv_route *r) {
    pthread_mutex_lock(&r->mu);
    uint64_t v = r->map ? r->map->version : 0;
    pthread_mutex_unlock(&r->mu);
    return v;
}

/* Read the map again unless one newer than seen was read meanwhile. */
static int refresh(mkv_client *c, uint64_t seen) {
    mkv_route *r = c->route;
    pthread_mutex_lock(&r->refresh_mu);
    int rc = MKV_OK;
    if (map_version(r) <= seen) {
        proto_slotmap *m = xmalloc(sizeof *m);
        char err[ETCD_ERR_LEN];
        int found = 0;
        if (etcd_slotmap_read(r->ec, r->cluster, m, &found, err, sizeof err) != 0)
            rc = mkv_fail(c, MKV_ECONN, "slot map: %s", err);
        else if (!found)
            rc = mkv_fail(c, MKV_ECONN, "no slot map in etcd for cluster '%s' (no master group claimed slots)",
                          r->cluster);
        pthread_mutex_lock(&r->mu);
        if (rc == MKV_OK && (!r->map || m->version > r->map->version)) {
            proto_slotmap *old = r->map;
            r->map = m;
            m = old;
        }
        pthread_mutex_unlock(&r->mu);
        free(m);
    }
    pthread_mutex_unlock(&r->refresh_mu);
    return rc;
}

/* What is sent again: MOVED, and TRYAGAIN (a slot still arriving at its
 * new group, a master whose map is too old, a rebuild): neither did
 * anything. */
static int again(int rc) { return rc == MKV_EMOVED || rc == MKV_ETRYAGAIN; }

/* A MOVED after routing by version seen: read the map again; if etcd
 * says nothing newer, the masters have not followed it yet: wait a bit. */
static void moved(mkv_client *c, uint64_t seen) {
    if (refresh(c, seen) != MKV_OK || map_version(c->route) <= seen) nap_ms(ROUTE_NAP_MS);
}

/* The owner group of each slots[i] into owner[i] (as an index + 1 of the
 * map, 0: none) and their names into names (only theirs); the map's version. */
static int owners(mkv_client *c, const uint16_t *slots, size_t n, uint8_t *owner,
                  char names[PROTO_MAX_GROUPS][PROTO_GROUP_LEN], uint64_t *version) {
    mkv_route *r = c->route;
    if (map_version(r) == 0) {
        int rc = refresh(c, 0);
        if (rc != MKV_OK) return rc;
    }
    uint8_t named[PROTO_MAX_GROUPS + 1] = {0};   /* only the names used are copied */
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < n; i++) {
        uint8_t o = owner[i] = r->map->owner[slots[i]];
        if (o && !named[o]) memcpy(names[o - 1], r->map->groups[o - 1], PROTO_GROUP_LEN), named[o] = 1;
    }
    *version = r->map->version;
    pthread_mutex_unlock(&r->mu);
    return MKV_OK;
}

/* ---- the group clients ---- */

static mkv_client *group_find(mkv_route *r, const char *name) {
    for (int i = 0; i < r->ngroups; i++)
        if (strcmp(r->groups[i].name, name) == 0) return r->groups[i].cl;
    return NULL;
}

/* A new client of group name with every registered region (regions_lock held). */
static int group_open(mkv_client *c, const char *name, mkv_client **out) {
    mkv_route *r = c->route;
    char cluster[sizeof r->cluster + PROTO_GROUP_LEN + 4];
    if (etcd_group_cluster(r->cluster, name, cluster, sizeof cluster) != 0)
        return mkv_fail(c, MKV_EINVAL, "group '%s' of cluster '%s': name too long", name, r->cluster);
    mkv_options o = r->opt;
    o.groups = 0;
    o.cluster_name = cluster;
    int rc = mkv_connect(out, &o);
    for (int i = 0; rc == MKV_OK && i < r->nregions; i++) {
        const route_region *g = &r->regions[i];
        rc = g->warm ? mkv_register_buffer(*out, g->addr, g->len) : mkv_register_buffer_cold(*out, g->addr, g->len);
    }
    if (rc != MKV_OK) {
        mkv_close(*out);
        *out = NULL;
    }
    return rc;
}

/* The client of group name, made at its first use. */
static int group_client(mkv_client *c, const char *name, mkv_client **out) {
    mkv_route *r = c->route;
    pthread_rwlock_rdlock(&r->regions_lock);
    pthread_mutex_lock(&r->mu);
    *out = group_find(r, name);
    pthread_mutex_unlock(&r->mu);
    int rc = MKV_OK;
    if (!*out && (rc = group_open(c, name, out)) == MKV_OK) {
        pthread_mutex_lock(&r->mu);
        mkv_client *won = group_find(r, name);   /* another thread's, made meanwhile */
        if (!won && r->ngroups < PROTO_MAX_GROUPS) {
            snprintf(r->groups[r->ngroups].name, PROTO_GROUP_LEN, "%s", name);
            r->groups[r->ngroups++].cl = *out;
        }
        pthread_mutex_unlock(&r->mu);
        if (won) {
            mkv_close(*out);
            *out = won;
        }
    }
    pthread_rwlock_unlock(&r->regions_lock);
    return rc;
}

/* ---- one key ---- */

typedef int key_fn(mkv_client *g, void *arg);

/* fn on the client of key's group, again after each MOVED until timeout_ms. */
static int on_key(mkv_client *c, const void *key, size_t keylen, key_fn *fn, void *arg) {
    int rc = mkv_check_key(c, key, keylen);
    if (rc != MKV_OK) return rc;
    uint16_t slot = proto_key_slot(key, keylen);
    uint64_t deadline = mono_ms() + (uint64_t)c->route->timeout_ms;
    for (;;) {
        uint8_t owner;
        uint64_t version = 0;
        char names[PROTO_MAX_GROUPS][PROTO_GROUP_LEN];
        mkv_client *g = NULL;
        rc = owners(c, &slot, 1, &owner, names, &version);
        if (rc == MKV_OK && !owner) rc = mkv_fail(c, MKV_EMOVED, "slot %u has no group in the slot map", slot);
        if (rc == MKV_OK) rc = group_client(c, names[owner - 1], &g);
        if (rc == MKV_OK) rc = fn(g, arg);
        if (!again(rc) || mono_ms() >= deadline) return rc;
        moved(c, version);
    }
}

typedef struct key_args {
    const void *key;
    size_t keylen;
    void *buf;
    size_t len;
    int replicas;
    size_t *got;
    uint64_t off, *size;
    uint32_t *crc;
    mkv_place_fn *place;
    void *ctx;
} key_args;

static int do_put(mkv_client *g, void *arg) {
    key_args *a = arg;
    return mkv_put(g, a->key, a->keylen, a->buf, a->len, a->replicas);
}
static int do_get(mkv_client *g, void *arg) {
    key_args *a = arg;
    return mkv_get(g, a->key, a->keylen, a->buf, a->len, a->got);
}
static int do_get_placed(mkv_client *g, void *arg) {
    key_args *a = arg;
    return mkv_get_placed(g, a->key, a->keylen, a->place, a->ctx, a->size);
}
static int do_stat(mkv_client *g, void *arg) {
    key_args *a = arg;
    return mkv_stat(g, a->key, a->keylen, a->size, a->crc);
}
static int do_remove(mkv_client *g, void *arg) {
    key_args *a = arg;
    return mkv_remove(g, a->key, a->keylen);
}
static int do_exists(mkv_client *g, void *arg) {
    key_args *a = arg;
    return mkv_exists(g, a->key, a->keylen);
}
static int do_range(mkv_client *g, void *arg) {
    key_args *a = arg;
    return mkv_get_range(g, a->key, a->keylen, a->off, a->buf, a->len, a->got);
}

int mkv_route_put(mkv_client *c, const void *key, size_t keylen, const void *buf, size_t len, int replicas) {
    key_args a = {.key = key, .keylen = keylen, .buf = (void *)buf, .len = len, .replicas = replicas};
    return on_key(c, key, keylen, do_put, &a);
}
int mkv_route_get(mkv_client *c, const void *key, size_t keylen, void *buf, size_t buflen, size_t *len_out) {
    key_args a = {.key = key, .keylen = keylen, .buf = buf, .len = buflen, .got = len_out};
    return on_key(c, key, keylen, do_get, &a);
}
int mkv_route_get_placed(mkv_client *c, const void *key, size_t keylen, mkv_place_fn *place, void *ctx,
                         uint64_t *len_out) {
    key_args a = {.key = key, .keylen = keylen, .place = place, .ctx = ctx, .size = len_out};
    return on_key(c, key, keylen, do_get_placed, &a);
}
int mkv_route_stat(mkv_client *c, const void *key, size_t keylen, uint64_t *size, uint32_t *crc) {
    key_args a = {.key = key, .keylen = keylen, .size = size, .crc = crc};
    return on_key(c, key, keylen, do_stat, &a);
}
int mkv_route_remove(mkv_client *c, const void *key, size_t keylen) {
    key_args a = {.key = key, .keylen = keylen};
    return on_key(c, key, keylen, do_remove, &a);
}
int mkv_route_exists(mkv_client *c, const void *key, size_t keylen) {
    key_args a = {.key = key, .keylen = keylen};
    return on_key(c, key, keylen, do_exists, &a);
}
int mkv_route_get_range(mkv_client *c, const void *key, size_t keylen, uint64_t off, void *buf, size_t len,
                        size_t *got) {
    key_args a = {.key = key, .keylen = keylen, .off = off, .buf = buf, .len = len, .got = got};
    return on_key(c, key, keylen, do_range, &a);
}

/* ---- batches: split by group, the parts at once ---- */

/* A batch call of one element type (mkv_obj or mkv_objv). */
typedef struct batch_kind {
    size_t size;
    const void *(*key)(const void *el, size_t *len);
    int *(*status)(void *el);
    int (*run)(mkv_client *g, void *els, size_t n, int *results, int replicas);
} batch_kind;

typedef struct part {
    const batch_kind *k;
    mkv_client *g;
    char *els;                           /* copies of the items, in order */
    size_t *idx;                         /* their places in the caller's batch */
    int *res;
    size_t n;
    int replicas, rc;
    pthread_t th;
    int threaded;
} part;

static void *part_main(void *arg) {
    part *p = arg;
    p->rc = p->k->run(p->g, p->els, p->n, p->res, p->replicas);
    return NULL;
}

/* The items todo[0..n) of els into parts, one per group (*np of them);
 * an item whose slot has no group or whose group cannot be reached is
 * settled at once (its status). */
static int split(mkv_client *c, const batch_kind *k, char *els, int *results, const size_t *todo, size_t n,
                 part *parts, int *np, uint64_t *version) {
    uint16_t *slots = xmalloc(n * sizeof *slots);
    uint8_t *owner = xmalloc(n);
    char (*names)[PROTO_GROUP_LEN] = xmalloc(sizeof(char[PROTO_MAX_GROUPS][PROTO_GROUP_LEN]));
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const void *key = k->key(els + todo[i] * k->size, &len);
        slots[i] = key && len ? proto_key_slot(key, len) : 0;
    }
    int rc = owners(c, slots, n, owner, names, version);
    int at[PROTO_MAX_GROUPS + 1];   /* part of each group index, -1 none yet */
    memset(at, -1, sizeof at);
    for (size_t i = 0; rc == MKV_OK && i < n; i++) {
        int o = owner[i];
        if (o && at[o] < 0) {
            part *p = &parts[*np];
            memset(p, 0, sizeof *p);
            p->k = k;
            int grc = group_client(c, names[o - 1], &p->g);
            if (grc != MKV_OK) p->rc = grc;   /* its items fail with it */
            p->els = xmalloc(n * k->size);
            p->idx = xmalloc(n * sizeof *p->idx);
            p->res = xcalloc(n, sizeof *p->res);
            at[o] = (*np)++;
        }
        if (!o) {
            *k->status(els + todo[i] * k->size) = mkv_fail(c, MKV_EMOVED, "slot %u has no group in the slot map", slots[i]);
            if (results) results[todo[i]] = MKV_EMOVED;
            continue;
        }
        part *p = &parts[at[o]];
        memcpy(p->els + p->n * k->size, els + todo[i] * k->size, k->size);
        p->idx[p->n++] = todo[i];
    }
    free(slots);
    free(owner);
    free(names);
    return rc;
}

/* Runs every part (the first on this thread), then puts the items back;
 * the ones to send again (again()) into todo (*n of them). How many parts
 * ran without an error of their own. */
static int run_parts(const batch_kind *k, char *els, int *results, part *parts, int np, size_t *todo,
                     size_t *n) {
    for (int i = 1; i < np; i++)
        if (!parts[i].rc) parts[i].threaded = pthread_create(&parts[i].th, NULL, part_main, &parts[i]) == 0;
    for (int i = 0; i < np; i++)   /* threaded first: a running part writes its rc */
        if (!parts[i].threaded && !parts[i].rc) part_main(&parts[i]);
    int ran = 0;
    *n = 0;
    for (int i = 0; i < np; i++) {
        part *p = &parts[i];
        if (p->threaded) pthread_join(p->th, NULL);
        ran += p->rc == MKV_OK;
        for (size_t j = 0; j < p->n; j++) {
            char *el = els + p->idx[j] * k->size;
            memcpy(el, p->els + j * k->size, k->size);
            if (p->rc != MKV_OK) *k->status(el) = p->rc;   /* an error of the whole part */
            if (results) results[p->idx[j]] = p->rc != MKV_OK ? p->rc : p->res[j];
            if (again(*k->status(el))) todo[(*n)++] = p->idx[j];
        }
        free(p->els);
        free(p->idx);
        free(p->res);
    }
    return ran;
}

static int on_batch(mkv_client *c, const batch_kind *k, void *items, size_t n, int *results, int replicas) {
    if (!items && n) return MKV_EINVAL;
    char *els = items;
    size_t *todo = xmalloc((n ? n : 1) * sizeof *todo), left = n;
    for (size_t i = 0; i < n; i++) todo[i] = i;
    part *parts = xmalloc(sizeof(part) * PROTO_MAX_GROUPS);
    uint64_t deadline = mono_ms() + (uint64_t)c->route->timeout_ms;
    int rc = MKV_OK, ran = 0;
    while (left > 0) {
        int np = 0;
        uint64_t version = 0;
        if ((rc = split(c, k, els, results, todo, left, parts, &np, &version)) != MKV_OK) break;
        for (int i = 0; i < np; i++) parts[i].replicas = replicas;
        ran += run_parts(k, els, results, parts, np, todo, &left);
        if (left == 0 || mono_ms() >= deadline) break;
        moved(c, version);
    }
    free(parts);
    free(todo);
    if (rc == MKV_OK && !ran && n) rc = *k->status(els);   /* no part ran: what failed them all */
    return rc;
}

static const void *obj_key(const void *el, size_t *len) {
    const mkv_obj *o = el;
    *len = o->keylen;
    return o->key;
}
static int *obj_status(void *el) { return &((mkv_obj *)el)->status; }
static const void *objv_key(const void *el, size_t *len) {
    const mkv_objv *o = el;
    *len = o->keylen;
    return o->key;
}
static int *objv_status(void *el) { return &((mkv_objv *)el)->status; }

static const void *pobj_key(const void *el, size_t *len) {
    const mkv_pobj *o = el;
    *len = o->keylen;
    return o->key;
}
static int *pobj_status(void *el) { return &((mkv_pobj *)el)->status; }

static int run_put(mkv_client *g, void *els, size_t n, int *res, int replicas) { return mkv_put_batch(g, els, n, replicas); }
static int run_get(mkv_client *g, void *els, size_t n, int *res, int replicas) { return mkv_get_batch(g, els, n); }
static int run_exists(mkv_client *g, void *els, size_t n, int *res, int replicas) {
    return mkv_exists_batch(g, els, n, res);
}
static int run_remove(mkv_client *g, void *els, size_t n, int *res, int replicas) {
    return mkv_remove_batch(g, els, n);
}
static int run_putv(mkv_client *g, void *els, size_t n, int *res, int replicas) {
    return mkv_put_batchv(g, els, n, replicas);
}
static int run_getv(mkv_client *g, void *els, size_t n, int *res, int replicas) { return mkv_get_batchv(g, els, n); }

static int run_getp(mkv_client *g, void *els, size_t n, int *res, int replicas) {
    return mkv_get_batch_placed(g, els, n);
}
static const batch_kind put_kind = {sizeof(mkv_obj), obj_key, obj_status, run_put};
static const batch_kind get_kind = {sizeof(mkv_obj), obj_key, obj_status, run_get};
static const batch_kind exists_kind = {sizeof(mkv_obj), obj_key, obj_status, run_exists};
static const batch_kind remove_kind = {sizeof(mkv_obj), obj_key, obj_status, run_remove};
static const batch_kind putv_kind = {sizeof(mkv_objv), objv_key, objv_status, run_putv};
static const batch_kind getv_kind = {sizeof(mkv_objv), objv_key, objv_status, run_getv};
static const batch_kind getp_kind = {sizeof(mkv_pobj), pobj_key, pobj_status, run_getp};

int mkv_route_put_batch(mkv_client *c, mkv_obj *objs, size_t n, int replicas) {
    return on_batch(c, &put_kind, objs, n, NULL, replicas);
}
int mkv_route_get_batch(mkv_client *c, mkv_obj *objs, size_t n) { return on_batch(c, &get_kind, objs, n, NULL, 0); }
int mkv_route_exists_batch(mkv_client *c, mkv_obj *objs, size_t n, int *results) {
    if (!results && n) return MKV_EINVAL;
    return on_batch(c, &exists_kind, objs, n, results, 0);
}
int mkv_route_remove_batch(mkv_client *c, mkv_obj *objs, size_t n) {
    return on_batch(c, &remove_kind, objs, n, NULL, 0);
}
int mkv_route_put_batchv(mkv_client *c, mkv_objv *objs, size_t n, int replicas) {
    return on_batch(c, &putv_kind, objs, n, NULL, replicas);
}
int mkv_route_get_batchv(mkv_client *c, mkv_objv *objs, size_t n) { return on_batch(c, &getv_kind, objs, n, NULL, 0); }
int mkv_route_get_batch_placed(mkv_client *c, mkv_pobj *objs, size_t n) {
    return on_batch(c, &getp_kind, objs, n, NULL, 0);
}

/* The prefix over groups: every key asked at once (EXISTS by group), the
 * leading hits counted. */
int mkv_route_exists_prefix(mkv_client *c, const mkv_obj *objs, size_t n, size_t *count) {
    if (!count || (!objs && n)) return MKV_EINVAL;
    *count = 0;
    mkv_obj *o = xmalloc((n ? n : 1) * sizeof *o);
    int *res = xcalloc(n ? n : 1, sizeof *res);
    memcpy(o, objs, n * sizeof *o);
    int rc = mkv_route_exists_batch(c, o, n, res);
    for (size_t i = 0; rc == MKV_OK && i < n && res[i] != 0; i++) {
        if (res[i] < 0) rc = res[i];
        else ++*count;
    }
    free(o);
    free(res);
    return rc;
}

/* ---- the whole cluster ---- */

/* MOON.FLUSH in every group that owns a slot. */
int mkv_route_remove_all(mkv_client *c, uint64_t *removed) {
    char (*names)[PROTO_GROUP_LEN] = xcalloc(PROTO_MAX_GROUPS, PROTO_GROUP_LEN);
    uint16_t *slots = xmalloc(PROTO_SLOTS * sizeof *slots);
    uint8_t *owner = xmalloc(PROTO_SLOTS);
    for (int i = 0; i < PROTO_SLOTS; i++) slots[i] = (uint16_t)i;
    uint64_t version, sum = 0;
    int rc = owners(c, slots, PROTO_SLOTS, owner, names, &version);
    for (int i = 0; rc == MKV_OK && i < PROTO_MAX_GROUPS; i++) {
        mkv_client *g;
        uint64_t one = 0;
        if (names[i][0] && (rc = group_client(c, names[i], &g)) == MKV_OK && (rc = mkv_remove_all(g, &one)) == MKV_OK)
            sum += one;
    }
    free(names);
    free(slots);
    free(owner);
    if (removed) *removed = sum;
    return rc;
}

/* Map index g's group may hold objects: it owns a slot, or one is
 * still moving away from it (r->mu held). */
static int group_holds(const proto_slotmap *m, int g) {
    for (int i = 0; i < PROTO_SLOTS; i++)
        if (m->owner[i] == g + 1 || m->from[i] == g + 1) return 1;
    return 0;
}

redisReply *mkv_route_command_group(mkv_client *c, int *group, int argc, const char **argv, const size_t *argvlen,
                                    int *code) {
    mkv_route *r = c->route;
    char name[PROTO_GROUP_LEN] = "";
    if (map_version(r) == 0 && (*code = refresh(c, 0)) != MKV_OK) return NULL;
    pthread_mutex_lock(&r->mu);
    int g = *group < 0 ? 0 : *group;
    while (g < r->map->ngroups && !group_holds(r->map, g)) g++;
    if (g < r->map->ngroups) memcpy(name, r->map->groups[g], PROTO_GROUP_LEN);
    pthread_mutex_unlock(&r->mu);
    mkv_client *gc = NULL;
    *group = g;
    *code = name[0] ? group_client(c, name, &gc) : mkv_fail(c, MKV_ENOTFOUND, "no group from index %d on", g);
    return *code == MKV_OK ? mkv_command(gc, argc, argv, argvlen, code) : NULL;
}

int mkv_route_register(mkv_client *c, void *addr, size_t len, int warm) {
    mkv_route *r = c->route;
    if (!addr || !len) return mkv_fail(c, MKV_EINVAL, "empty buffer");
    pthread_rwlock_wrlock(&r->regions_lock);
    int rc = r->nregions == MKV_MAX_REGIONS ? mkv_fail(c, MKV_ENOMEM, "at most %d registered regions", MKV_MAX_REGIONS)
                                            : MKV_OK;
    int done = 0;
    for (; rc == MKV_OK && done < r->ngroups; done++) {
        mkv_client *g = r->groups[done].cl;
        rc = warm ? mkv_register_buffer(g, addr, len) : mkv_register_buffer_cold(g, addr, len);
        if (rc != MKV_OK) break;
    }
    if (rc != MKV_OK)
        while (done-- > 0) mkv_unregister_buffer(r->groups[done].cl, addr);
    else r->regions[r->nregions++] = (route_region){addr, len, warm};
    pthread_rwlock_unlock(&r->regions_lock);
    return rc;
}

int mkv_route_unregister(mkv_client *c, void *addr) {
    mkv_route *r = c->route;
    pthread_rwlock_wrlock(&r->regions_lock);
    int rc = mkv_fail(c, MKV_EINVAL, "no region registered at %p", addr);
    for (int i = 0; i < r->nregions && rc != MKV_OK; i++) {
        if (r->regions[i].addr != addr) continue;
        for (int j = 0; j < r->ngroups; j++) mkv_unregister_buffer(r->groups[j].cl, addr);
        r->regions[i] = r->regions[--r->nregions];
        rc = MKV_OK;
    }
    pthread_rwlock_unlock(&r->regions_lock);
    return rc;
}

void mkv_route_stats(mkv_client *c, mkv_transfer_stats *sum) {
    mkv_route *r = c->route;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->ngroups; i++) mkv_transfer_stats_add(r->groups[i].cl, sum);
    pthread_mutex_unlock(&r->mu);
}

int mkv_route_refused(mkv_client *c, const char *what) {
    return mkv_fail(c, MKV_EINVAL, "%s is not supported over master groups yet", what);
}

/* ---- the async face (route.h mkv_route_face_*) ---- */

typedef struct route_sub {
    mkv_client *g;
    mkv_async *face;
} route_sub;

typedef struct mkv_route_face {
    mkv_async *a;                        /* the router's face */
    int threads;
    pthread_mutex_t mu;                  /* sub */
    route_sub sub[PROTO_MAX_GROUPS];
    int nsub;
} mkv_route_face;

/* One submitted operation, split by group. */
typedef struct rop {
    mkv_route_face *rf;
    mkv_op *op;                          /* the caller's */
    int batch;                           /* objs, n (else key) */
    uint64_t deadline;
    uint64_t version;                    /* the map it was split by */
    int left;                            /* parts not done yet (atomic) */
    int status;                          /* the first part's failure of all its keys */
    size_t *todo, ntodo;                 /* batch: the objs to send (again) */
    struct rpart *parts;
    int nparts;
} rop;

typedef struct rpart {
    mkv_op op;                           /* first: on the group's face */
    rop *o;
    mkv_obj *objs;                       /* batch: copies of the objs, in order */
    size_t *idx;                         /* their places in the caller's */
    int *res;                            /* exists batch */
} rpart;

/* The face of group client g, opened at its first use (inline: its
 * completions run on its thread). */
static mkv_async *sub_face(mkv_route_face *rf, mkv_client *g) {
    pthread_mutex_lock(&rf->mu);
    mkv_async *f = NULL;
    for (int i = 0; i < rf->nsub && !f; i++)
        if (rf->sub[i].g == g) f = rf->sub[i].face;
    if (!f && rf->nsub < PROTO_MAX_GROUPS && mkv_async_open(&f, g, rf->threads, MKV_ASYNC_INLINE) == MKV_OK)
        rf->sub[rf->nsub++] = (route_sub){g, f};
    pthread_mutex_unlock(&rf->mu);
    return f;
}

mkv_route_face *mkv_route_face_new(mkv_async *a, int threads) {
    mkv_route_face *rf = xcalloc(1, sizeof *rf);
    rf->a = a;
    rf->threads = threads ? threads : 1;
    pthread_mutex_init(&rf->mu, NULL);
    return rf;
}

void mkv_route_face_free(mkv_route_face *rf) {
    if (!rf) return;
    for (int i = 0; i < rf->nsub; i++) mkv_async_close(rf->sub[i].face);
    pthread_mutex_destroy(&rf->mu);
    free(rf);
}

/* The parts' copies of the objs (the parts themselves stay). */
static void parts_clear(rop *o) {
    for (int i = 0; i < o->nparts; i++) {
        free(o->parts[i].objs);
        free(o->parts[i].idx);
        free(o->parts[i].res);
    }
}

static void rop_free(rop *o) {
    parts_clear(o);
    free(o->parts);
    free(o->todo);
    free(o);
}

static void rop_finish(rop *o, int status) {
    mkv_async *a = o->rf->a;
    mkv_op *op = o->op;
    op->status = status;
    rop_free(o);
    mkv_async_finish(a, op);
}

static void rop_send(rop *o);

/* A part is back; the last one puts the items back, and sends what was
 * refused with MOVED or TRYAGAIN again (the map read anew) or finishes. */
static void part_done(mkv_op *sub) {
    rpart *p = (rpart *)sub;
    rop *o = p->o;
    if (__atomic_sub_fetch(&o->left, 1, __ATOMIC_ACQ_REL) > 0) return;
    mkv_op *op = o->op;
    int first = MKV_OK;
    o->ntodo = 0;
    for (int i = 0; i < o->nparts; i++) {
        rpart *q = &o->parts[i];
        int st = q->op.status;
        if (st != MKV_OK && first == MKV_OK && !again(st)) first = st;
        if (!o->batch) {
            op->status = st;
            if (op->kind == MKV_OP_GET || op->kind == MKV_OP_STAT) op->len = q->op.len;
            op->crc = q->op.crc;
            if (again(st)) o->ntodo = 1;
            continue;
        }
        for (size_t j = 0; j < q->op.n; j++) {
            mkv_obj *el = &op->objs[q->idx[j]];
            *el = q->objs[j];
            if (st != MKV_OK) el->status = st;   /* a failure of the whole part */
            if (op->results) op->results[q->idx[j]] = st != MKV_OK ? st : q->res[j];
            if (again(el->status)) o->todo[o->ntodo++] = q->idx[j];
        }
    }
    if (o->ntodo && mono_ms() < o->deadline) {
        moved(o->rf->a->c, o->version);
        return rop_send(o);
    }
    rop_finish(o, o->batch ? first : op->status);
}

static rpart *part_add(rop *o, mkv_client *g, size_t room) {
    rpart *p = &o->parts[o->nparts++];
    memset(p, 0, sizeof *p);
    p->o = o;
    p->op = *o->op;
    p->op.done = part_done;
    p->op.ctx = g;
    p->op.next = NULL;
    if (o->batch) {
        p->op.objs = p->objs = xmalloc(room * sizeof *p->objs);
        p->idx = xmalloc(room * sizeof *p->idx);
        p->op.results = o->op->results ? (p->res = xcalloc(room, sizeof *p->res)) : NULL;
        p->op.n = 0;
    }
    return p;
}

/* The parts of the objs in todo (every key's group), each submitted to
 * its group's face; a key whose group is unknown or unreachable fails. */
static int rop_split(rop *o) {
    mkv_client *c = o->rf->a->c;
    mkv_op *op = o->op;
    size_t n = o->batch ? o->ntodo : 1;
    uint16_t *slots = xmalloc(n * sizeof *slots);
    uint8_t *owner = xmalloc(n);
    char (*names)[PROTO_GROUP_LEN] = xmalloc(sizeof(char[PROTO_MAX_GROUPS][PROTO_GROUP_LEN]));
    for (size_t i = 0; i < n; i++) {
        const mkv_obj *el = o->batch ? &op->objs[o->todo[i]] : NULL;
        const void *key = el ? el->key : op->key;
        size_t len = el ? el->keylen : op->keylen;
        slots[i] = key && len ? proto_key_slot(key, len) : 0;
    }
    int rc = owners(c, slots, n, owner, names, &o->version), at[PROTO_MAX_GROUPS + 1];
    memset(at, -1, sizeof at);
    o->nparts = 0;
    for (size_t i = 0; rc == MKV_OK && i < n; i++) {
        int g = owner[i];
        mkv_client *gc = NULL;
        int st = !g ? mkv_fail(c, MKV_EMOVED, "slot %u has no group in the slot map", slots[i])
                    : at[g] >= 0 ? MKV_OK : group_client(c, names[g - 1], &gc);
        if (st == MKV_OK && at[g] < 0) {
            at[g] = o->nparts;
            part_add(o, gc, n);
        }
        if (st != MKV_OK && !o->batch) rc = st;
        if (!o->batch) continue;
        if (st != MKV_OK) {   /* this key fails; the others go */
            op->objs[o->todo[i]].status = st;
            if (op->results) op->results[o->todo[i]] = st;
            continue;
        }
        rpart *p = &o->parts[at[g]];
        p->objs[p->op.n] = op->objs[o->todo[i]];
        p->idx[p->op.n++] = o->todo[i];
    }
    free(slots);
    free(owner);
    free(names);
    return rc;
}

/* Split what is to send and submit the parts (all counted first: a part
 * may be done before the next is submitted). */
static void rop_send(rop *o) {
    parts_clear(o);
    int rc = rop_split(o);
    if (rc == MKV_OK && o->nparts == 0 && o->batch) rc = o->op->objs[o->todo[0]].status;   /* every key failed */
    if (rc != MKV_OK || o->nparts == 0) return rop_finish(o, rc);
    /* The last part done may free o: nothing of it is read after the
     * last submit. */
    int np = o->left = o->nparts;
    rpart *parts = o->parts;
    mkv_route_face *rf = o->rf;
    for (int i = 0; i < np; i++) {
        mkv_async *f = sub_face(rf, parts[i].op.ctx);
        if (!f || mkv_async_submit(f, &parts[i].op) != MKV_OK) {
            parts[i].op.status = mkv_fail(rf->a->c, MKV_ENOMEM, "no async face for a group");
            part_done(&parts[i].op);
        }
    }
}

void mkv_route_face_submit(mkv_route_face *rf, mkv_op *op) {
    rop *o = xcalloc(1, sizeof *o);
    o->rf = rf;
    o->op = op;
    o->batch = mkv_op_is_batch(op);
    o->deadline = mono_ms() + (uint64_t)rf->a->c->route->timeout_ms;
    o->parts = xcalloc(PROTO_MAX_GROUPS, sizeof *o->parts);
    if (mkv_op_batch_bad(op)) return rop_finish(o, MKV_EINVAL);
    if (o->batch) {
        o->todo = xmalloc((op->n ? op->n : 1) * sizeof *o->todo);
        for (size_t i = 0; i < op->n; i++) o->todo[o->ntodo++] = i;
        if (!op->n) return rop_finish(o, MKV_OK);
    }
    rop_send(o);
}

/* ---- connect / close ---- */

int mkv_route_connect(mkv_client **out, const mkv_options *opt) {
    if (!opt->etcd || !*opt->etcd)
        return mkv_fail(NULL, MKV_EINVAL, "groups need etcd (mkv_options.etcd): the slot map lives there");
    const char *name = opt->cluster_name && *opt->cluster_name ? opt->cluster_name : "moonkv";
    mkv_client *c = xcalloc(1, sizeof *c);
    mkv_route *r = c->route = xcalloc(1, sizeof *r);
    pthread_mutex_init(&r->refresh_mu, NULL);
    pthread_mutex_init(&r->mu, NULL);
    pthread_rwlock_init(&r->regions_lock, NULL);
    mkv_options_keep(&r->opt, r->strs, opt);
    r->timeout_ms = opt->timeout_ms > 0 ? opt->timeout_ms : 5000;
    char err[ETCD_ERR_LEN];
    int rc = MKV_OK;
    if (strlen(name) >= sizeof r->cluster) rc = mkv_fail(c, MKV_EINVAL, "cluster name too long");
    else snprintf(r->cluster, sizeof r->cluster, "%s", name);
    if (rc == MKV_OK && !(r->ec = etcd_create(opt->etcd, ROUTE_ETCD_TIMEOUT_MS, err, sizeof err)))
        rc = mkv_fail(c, MKV_EINVAL, "%s", err);
    if (rc == MKV_OK) rc = refresh(c, 0);   /* a cluster without a map is a setup error: said now */
    if (rc != MKV_OK) {
        mkv_route_close(c);
        return rc;
    }
    *out = c;
    return MKV_OK;
}

void mkv_route_close(mkv_client *c) {
    mkv_route *r = c->route;
    for (int i = 0; i < r->ngroups; i++) mkv_close(r->groups[i].cl);
    for (int i = 0; i < MKV_OPTION_STRS; i++) free(r->strs[i]);
    etcd_free(r->ec);
    free(r->map);
    pthread_mutex_destroy(&r->refresh_mu);
    pthread_mutex_destroy(&r->mu);
    pthread_rwlock_destroy(&r->regions_lock);
    free(r);
    free(c);
}
