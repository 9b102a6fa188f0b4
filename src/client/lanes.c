/* client/lanes.c - one mkv_client shared by threads.
 *
 * The handle is the first lane of a core; a call takes a free lane for
 * its duration, so calls from different threads run at once, each with
 * its own per-call state, on the core's one transfer engine (which runs
 * their transfers on contexts of its own, backend/engine.h). Lanes are made when every
 * one is busy, up to the core's limit (mkv_options.lanes); past it a call
 * waits for one to come back. A thread that holds a lane (a call inside
 * a call, a place() callback calling in again) keeps using it. One
 * thread alone only ever uses the handle's lane: the single-thread path
 * costs a lock and an unlock more than before. */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "core/util.h"

#define GROW_RETRY_MS 1000   /* after a lane could not be made */

/* The lane this thread holds, if any (then calls inside stay on it). */
static __thread mkv_client *held;

/* The options' strings are kept as copies: new lanes are made from them
 * long after mkv_connect returned. */
static const char *keep(char **strs, int i, const char *s) { return s ? (strs[i] = xstrdup(s)) : NULL; }

void mkv_options_keep(mkv_options *dst, char *strs[MKV_OPTION_STRS], const mkv_options *opt) {
    *dst = *opt;
    dst->master = keep(strs, 0, opt->master);
    dst->password = keep(strs, 1, opt->password);
    dst->cluster_secret = keep(strs, 2, opt->cluster_secret);
    dst->transport = keep(strs, 3, opt->transport);
    dst->data_addrs = keep(strs, 4, opt->data_addrs);
    dst->shm_mode = keep(strs, 5, opt->shm_mode);
    dst->etcd = keep(strs, 6, opt->etcd);
    dst->cluster_name = keep(strs, 7, opt->cluster_name);
}

int mkv_core_start(mkv_client *c, const mkv_options *opt) {
    if (opt->lanes < 0 || opt->lanes > MKV_MAX_LANES)
        return mkv_fail(c, MKV_EINVAL, "lanes must be 0 to %d", MKV_MAX_LANES);
    mkv_core *k = xcalloc(1, sizeof *k);
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->idle_cv, NULL);
    pthread_rwlock_init(&k->regions_lock, NULL);
    pthread_mutex_init(&k->sync_mu, NULL);
    mkv_link_init(&k->link);
    mkv_pins_init(&k->pins);
    mkv_options_keep(&k->opt, k->strs, opt);
    k->max_lanes = opt->lanes ? opt->lanes : MKV_DEFAULT_LANES;
    k->lanes[k->nlanes++] = c;
    k->idle[k->nidle++] = c;
    c->core = k;
    return MKV_OK;
}

void mkv_core_stop(mkv_client *c) {
    mkv_core *k = c->core;
    if (!k) return;
    mkv_pinkeep_stop(k);   /* it opens the link with the handle's options */
    for (int i = 1; i < k->nlanes; i++) {
        mkv_lane_free(k->lanes[i]);
        free(k->lanes[i]);
    }
    mkv_link_free(&k->link);
    mkv_pins_free(&k->pins);
    if (k->engine) te_engine_destroy(k->engine);
    c->engine = NULL;
    free(k->known);
    mkv_topology_free(&k->topo);
    pthread_mutex_destroy(&k->sync_mu);
    for (int i = 0; i < MKV_OPTION_STRS; i++) free(k->strs[i]);
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->idle_cv);
    pthread_rwlock_destroy(&k->regions_lock);
    free(k);
    c->core = NULL;
}

mkv_client *mkv_lane_new(mkv_core *k) {
    mkv_client *l = xcalloc(1, sizeof *l);
    l->core = k;
    mkv_options o = k->opt;
    o.etcd = NULL;   /* the one master connection is the core's, opened with the handle's etcd client */
    o.master = NULL;   /* nor its address (with etcd, the option may hold anything) */
    int rc = mkv_lane_options(l, &o);
    if (rc == MKV_OK) {
        l->engine = k->engine;   /* the core's, one for every lane */
        pthread_mutex_lock(&k->mu);
        k->lanes[k->nlanes++] = l;
        pthread_mutex_unlock(&k->mu);
    }
    if (rc != MKV_OK) {
        mkv_lane_free(l);
        free(l);
        return NULL;
    }
    return l;
}

/* A new lane for the caller (k->mu held, released meanwhile), or NULL. */
static mkv_client *grow(mkv_core *k) {
    k->growing++;
    pthread_mutex_unlock(&k->mu);
    mkv_client *l = mkv_lane_new(k);
    pthread_mutex_lock(&k->mu);
    k->growing--;
    if (!l) k->grow_failed_ms = mono_ms();
    return l;
}

static int may_grow(const mkv_core *k) {
    return k->nlanes + k->growing < k->max_lanes &&
           (!k->grow_failed_ms || mono_ms() - k->grow_failed_ms >= GROW_RETRY_MS);
}

mkv_hold mkv_lane_take(mkv_client *c) {
    if (held && held->core == c->core) return (mkv_hold){held, NULL, 1};
    mkv_core *k = c->core;
    mkv_client *l = NULL;
    pthread_mutex_lock(&k->mu);
    while (!l) {
        if (k->nidle) l = k->idle[--k->nidle];
        else if (may_grow(k)) l = grow(k);
        else pthread_cond_wait(&k->idle_cv, &k->mu);
    }
    pthread_mutex_unlock(&k->mu);
    mkv_hold h = {l, held, 0};
    held = l;
    return h;
}

void mkv_lane_give(mkv_hold *h) {
    if (h->nested) return;
    mkv_core *k = h->lane->core;
    held = h->prev;
    pthread_mutex_lock(&k->mu);
    k->idle[k->nidle++] = h->lane;
    pthread_cond_signal(&k->idle_cv);
    pthread_mutex_unlock(&k->mu);
}

void mkv_lanes_each(mkv_client *c, void (*fn)(mkv_client *lane, void *arg), void *arg) {
    mkv_core *k = c->core;
    pthread_mutex_lock(&k->mu);
    for (int i = 0; i < k->nlanes; i++) fn(k->lanes[i], arg);
    pthread_mutex_unlock(&k->mu);
}
