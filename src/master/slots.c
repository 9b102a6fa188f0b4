/* master/slots.c - see slots.h: following the slot map, refusing keys of
 * other groups. */
#include "master/slots.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/util.h"
#include "etcd/slotmap.h"
#include "master/master.h"
#include "master/slot_move.h"
#include "proto/slots.h"
#include "proto/status.h"
#include "server/info.h"
#include "server/networking.h"

#define SLOTS_ETCD_TIMEOUT_MS 500
#define SLOTS_NAP_STEP_MS 50   /* how soon a stop is seen */

struct master_slots {
    server *srv;
    etcd_client *ec;
    char cluster[64], group[PROTO_GROUP_LEN], claim[CONFIG_STR_MAX];
    pthread_t th;
    atomic_int stop;
    pthread_mutex_t mu;
    proto_slotmap *shared;   /* the thread's newest map, under mu */
    _Atomic uint64_t fresh_ms;   /* mono ms of the thread's last good read of the map */
    uint64_t stale_ms;       /* past this age the map is not trusted: the lease TTL */
    loop_wake *wake;
    /* Thread only. */
    int claimed;             /* --slots given to us (or none asked) */
    uint64_t published;      /* the version handed over last */
    char err_said[ETCD_ERR_LEN];
    /* Loop only. */
    proto_slotmap *map;      /* NULL until the first map */
    int mine;                /* our group's index + 1 in map */
    int owned;               /* slots we own */
    uint64_t *arrive;        /* per slot: mono ms before which a slot just gained is not served */
    uint64_t moved;          /* commands answered MOVED */
    uint64_t held;           /* answered TRYAGAIN: a slot arriving, or the map too old */
    uint64_t unadopted;      /* answered TRYAGAIN: a key of a slot moving here, not adopted yet */
    slot_move *mv;           /* slots moved with their objects (slot_move.h) */
};

/* ---- the thread ---- */

int master_slots_nap(atomic_int *stop, int ms) {
    for (int slept = 0; slept < ms && !atomic_load(stop); slept += SLOTS_NAP_STEP_MS) {
        struct timespec ts = {0, SLOTS_NAP_STEP_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    return atomic_load(stop);
}

/* An etcd failure, logged once until it changes. */
static void say(master_slots *s, const char *err) {
    if (strcmp(s->err_said, err) == 0) return;
    snprintf(s->err_said, sizeof s->err_said, "%s", err);
    log_warning("master: slot map: %s", err);
}

static void claim(master_slots *s) {
    char err[ETCD_ERR_LEN];
    int changed = 0;
    uint64_t version = 0;
    if (etcd_slotmap_assign(s->ec, s->cluster, s->claim, s->group, 1, &changed, &version, err, sizeof err) != 0) {
        say(s, err);
        return;
    }
    s->claimed = 1;
    log_notice("master: group %s claimed %d free slots of %s (slot map version %llu)", s->group, changed,
               s->claim, (unsigned long long)version);
}

static void poll_once(master_slots *s, proto_slotmap *m) {
    char err[ETCD_ERR_LEN];
    int found = 0;
    if (!s->claimed) claim(s);
    if (etcd_slotmap_read(s->ec, s->cluster, m, &found, err, sizeof err) != 0) {
        say(s, err);
        return;
    }
    s->err_said[0] = '\0';
    atomic_store(&s->fresh_ms, mono_ms());
    if (!found || m->version == s->published) return;
    pthread_mutex_lock(&s->mu);
    if (!s->shared) s->shared = xmalloc(sizeof *s->shared);
    memcpy(s->shared, m, sizeof *m);
    pthread_mutex_unlock(&s->mu);
    s->published = m->version;
    loop_wake_send(s->wake);
}

static void *slots_main(void *arg) {
    master_slots *s = arg;
    proto_slotmap *m = xmalloc(sizeof *m);
    do poll_once(s, m);
    while (!master_slots_nap(&s->stop, SLOTS_POLL_MS));
    free(m);
    return NULL;
}

/* ---- the loop side ---- */

/* Slots m gives us that the map before gave another group are served
 * only after that group must have seen m: it polls every SLOTS_POLL_MS,
 * and serves nothing from a map older than stale_ms (master_slots_refuse),
 * so no key is accepted by two groups at once. The first map holds
 * nothing back (no owner before it is known). */
static void arrivals(master_slots *s, const proto_slotmap *m) {
    int now_mine = proto_slotmap_group(m, s->group);
    uint64_t until = mono_ms() + s->stale_ms + 2 * SLOTS_POLL_MS;
    for (int slot = 0; s->map && now_mine && slot < PROTO_SLOTS; slot++)
        if (m->owner[slot] == now_mine && !(s->mine && s->map->owner[slot] == s->mine)) s->arrive[slot] = until;
}

static void wake_cb(event_loop *el, void *data) {
    master_slots *s = data;
    pthread_mutex_lock(&s->mu);
    proto_slotmap *m = s->shared;
    s->shared = NULL;
    pthread_mutex_unlock(&s->mu);
    if (!m) return;
    if (s->map && m->version <= s->map->version) {   /* never go back to an older map */
        free(m);
        return;
    }
    arrivals(s, m);
    free(s->map);
    s->map = m;
    s->mine = proto_slotmap_group(m, s->group);
    int was = s->owned;
    s->owned = proto_slotmap_count(m, s->group);
    log_notice("master: slot map version %llu: group %s owns %d slots (had %d)",
               (unsigned long long)m->version, s->group, s->owned, was);
    slot_move_map(s->mv, s->map, s->mine);
}

master_slots *master_slots_start(server *srv, char *err, size_t errlen) {
    const mkv_config *cfg = &srv->cfg;
    if (!cfg->group[0]) return NULL;
    master_slots *s = xcalloc(1, sizeof *s);
    s->srv = srv;
    snprintf(s->cluster, sizeof s->cluster, "%s", cfg->slot_cluster);
    snprintf(s->group, sizeof s->group, "%s", cfg->group);
    snprintf(s->claim, sizeof s->claim, "%s", cfg->slots);
    s->claimed = !cfg->slots[0];
    s->stale_ms = (uint64_t)(cfg->etcd_lease_ttl > 0 ? cfg->etcd_lease_ttl : 2) * 1000;
    s->arrive = xcalloc(PROTO_SLOTS, sizeof *s->arrive);
    if (!(s->ec = etcd_create(cfg->etcd, SLOTS_ETCD_TIMEOUT_MS, err, errlen))) {
        free(s->arrive);
        free(s);
        return NULL;
    }
    if (cfg->slots[0]) {   /* the list checked now, not in the thread's log */
        proto_slotmap *t = xcalloc(1, sizeof *t);
        int changed;
        int bad = proto_slotmap_assign_list(t, cfg->slots, cfg->group, 0, &changed, err, errlen);
        free(t);
        if (bad) {
            etcd_free(s->ec);
            free(s->arrive);
            free(s);
            return NULL;
        }
    }
    if (!(s->mv = slot_move_create(srv, s->cluster, s->group, err, errlen))) {
        etcd_free(s->ec);
        free(s->arrive);
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->wake = loop_wake_create(srv->loop, wake_cb, s);
    pthread_create(&s->th, NULL, slots_main, s);
    return s;
}

void master_slots_stop(master_slots *s) {
    if (!s) return;
    atomic_store(&s->stop, 1);
    pthread_join(s->th, NULL);
    slot_move_free(s->mv);
    loop_wake_free(s->wake);
    pthread_mutex_destroy(&s->mu);
    etcd_free(s->ec);
    free(s->shared);
    free(s->map);
    free(s->arrive);
    free(s);
}

static void refuse(client *c, proto_status st, const char *msg) {
    char text[PROTO_GROUP_LEN + 128];
    proto_error_text(st, msg, text, sizeof text);
    reply_error(c, text);
}

int master_slots_refuse(master_slots *s, client *c) {
    if (!s) return 0;
    /* proto_cmd_key_span reads the verb and its first three arguments */
    const char *argv[4] = {0};
    size_t lens[4] = {0};
    for (int i = 0; i < 4 && i < c->argc; i++) argv[i] = c->argv[i].ptr, lens[i] = c->argv[i].len;
    int first, step;
    if (proto_cmd_key_span(c->argc, argv, lens, &first, &step) != 0 || first >= c->argc) return 0;
    if (!s->map) {
        refuse(c, PROTO_TRYAGAIN, "this master has not read the slot map from etcd yet");
        return 1;
    }
    char msg[PROTO_GROUP_LEN + 96];
    uint64_t now = mono_ms(), age = now - atomic_load(&s->fresh_ms);
    if (age > s->stale_ms) {   /* another group may own our slots by now */
        snprintf(msg, sizeof msg, "the slot map was last read from etcd %llu ms ago", (unsigned long long)age);
        refuse(c, PROTO_TRYAGAIN, msg);
        s->held++;
        return 1;
    }
    for (int i = first; i < c->argc; i += step) {
        uint16_t slot = proto_key_slot(c->argv[i].ptr, c->argv[i].len);
        if (s->mine && s->map->owner[slot] == s->mine && s->arrive[slot] > now) {
            snprintf(msg, sizeof msg, "slot %u was just moved to this group: served in %llu ms", slot,
                     (unsigned long long)(s->arrive[slot] - now));
            refuse(c, PROTO_TRYAGAIN, msg);
            s->held++;
            return 1;
        }
        if (s->mine && s->map->owner[slot] == s->mine && s->map->from[slot] &&
            !mm_find(((master *)s->srv->role)->meta, c->argv[i].ptr, c->argv[i].len)) {
            /* the group it comes from may still hold the key: no second object of it, no miss */
            snprintf(msg, sizeof msg, "slot %u is moving here from group %s: key not adopted yet", slot,
                     s->map->groups[s->map->from[slot] - 1]);
            refuse(c, PROTO_TRYAGAIN, msg);
            s->unadopted++;
            return 1;
        }
        if (s->mine && s->map->owner[slot] == s->mine) continue;
        proto_moved_text(slot, proto_slotmap_owner(s->map, slot), msg, sizeof msg);
        refuse(c, PROTO_MOVED, msg);
        s->moved++;
        return 1;
    }
    return 0;
}

void master_slots_info(const master_slots *s, resp_buf *out) {
    if (!s) return;
    info_field(out, "group", "%s", s->group);
    info_field(out, "slots_version", "%llu", (unsigned long long)(s->map ? s->map->version : 0));
    info_field(out, "slots_owned", "%d", s->owned);
    info_field(out, "slots_moved", "%llu", (unsigned long long)s->moved);
    info_field(out, "slots_held", "%llu", (unsigned long long)s->held);
    int moving = 0;
    for (int slot = 0; s->map && s->mine && slot < PROTO_SLOTS; slot++) moving += s->map->from[slot] != 0 &&
        (s->map->owner[slot] == s->mine || s->map->from[slot] == s->mine);
    info_field(out, "slots_moving", "%d", moving);
    info_field(out, "slots_unadopted", "%llu", (unsigned long long)s->unadopted);
    slot_move_info(s->mv, out);
}

slot_move *master_slots_move(master_slots *s) { return s ? s->mv : NULL; }
