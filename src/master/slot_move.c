/* master/slot_move.c - see slot_move.h: giving a moved slot's objects
 * away (loop), pulling and adopting them (thread, then loop). */
#include "master/slot_move.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/log.h"
#include "core/util.h"
#include "etcd/slotmap.h"
#include "link/master_link.h"
#include "master/master.h"
#include "master/migrate.h"
#include "master/slots.h"
#include "proto/cmd.h"
#include "server/commands.h"
#include "server/info.h"

#define GIVE_TICK_MS    5      /* a stretch of the table per tick while a pass runs */
#define GIVE_STEPS      8      /* stretches per tick */
#define GIVE_AGAIN_MS   100    /* a pass that met copies in flight runs again after */
#define PULL_IO_MS      5000
#define PULL_WAIT_MS    200    /* how often a wait for the loop looks at stop */
#define PULL_BACKOFF_MS 2000   /* after a pull whose objects wait for nodes we lack */
#define PULL_DURABLE_MS 10000  /* for the nodes' acks of what was adopted, at most */
#define PULL_DURABLE_STEP_MS 10

/* What one group adopting our slots has not acknowledged yet: records
 * [base, base + its out.len) of a byte stream that started at 0. */
typedef struct outbox {
    char group[PROTO_GROUP_LEN];
    uint64_t base;
    uint64_t objects;          /* given to it, ever */
} outbox;

/* The pulling thread's connection to one giving group's leader. */
typedef struct pull_link {
    char group[PROTO_GROUP_LEN];
    char addr[256];            /* the leader it is connected to */
    redisContext *rc;          /* NULL: not connected */
    uint64_t epoch, off;       /* what of the giver's outbox we adopted */
} pull_link;

/* An adoption the thread hands to the loop. */
typedef struct adopt_call {
    const uint8_t *blob;       /* NULL: a probe (may we adopt now?), or with marks: are they met? */
    size_t len;
    int asked, answered, abandoned;
    int rc;                    /* 0, -1 malformed, -2 not now (not leading, rebuilding); marks: 1 met */
    mm_adopt_stats st;
    mm_note_mark *marks;       /* adopting: the notes given to nodes (the caller frees them) */
    size_t nmarks;
} adopt_call;

struct slot_move {
    server *srv;
    char cluster[64], group[PROTO_GROUP_LEN];
    /* Loop: giving. */
    outbox box[MM_GIVE_DESTS];
    resp_buf out[MM_GIVE_DESTS];   /* box[i]'s records */
    int nbox;
    uint64_t lent;             /* extent bytes given away, ever */
    mm_give_pass pass;
    int passing;               /* a pass is under way */
    uint64_t pass_version;     /* the map version the running pass gives for */
    uint64_t swept_version;    /* a pass over this map version met no copy in flight */
    uint64_t want_version;     /* the newest map that moves slots away from us */
    uint64_t epoch;            /* names the outboxes: a new term starts new ones */
    uint64_t term_ms;          /* the term they belong to (master.term_start_ms) */
    proto_slotmap *map;        /* the loop's copy of the map (slots.c's) */
    int mine;
    loop_timer *tick;
    uint64_t given;            /* objects given away, ever */
    /* Thread <-> loop: adopting. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    adopt_call *call;
    loop_wake *wake;
    atomic_int stop;
    _Atomic uint64_t adopted, waiting, refused, pulled_bytes;
    /* Thread only: a connection to each group we pull from. */
    pthread_t th;
    etcd_client *ec;
    pull_link links[MM_GIVE_DESTS];
    int nlinks;
    uint64_t pull_after;       /* mono ms: no pull before (objects waited for nodes) */
    char said[ETCD_ERR_LEN];   /* the last trouble logged (once until it changes) */
};

static master *role(const slot_move *mv) { return mv->srv->role; }

/* ---- giving (loop) ---- */

/* Not in the gap after an election won and before the rebuild opens
 * (the members are read from etcd, or nodes claim, a moment later): a
 * pass there would sweep an empty table and count the move given. */
static int leading_and_built(const slot_move *mv) {
    const master *m = role(mv);
    return master_may_lead(m) && !master_rebuild_awaits_nodes(m);
}

/* A new term: what the last one gave away is rebuilt from the nodes'
 * reports, and given again by a pass. */
static void check_term(slot_move *mv) {
    const master *m = role(mv);
    if (mv->term_ms == m->term_start_ms && mv->epoch) return;
    for (int i = 0; i < mv->nbox; i++) resp_buf_free(&mv->out[i]);
    mv->nbox = 0;
    mv->term_ms = m->term_start_ms;
    mv->epoch = ((uint64_t)random() << 31 ^ (uint64_t)random() ^ mono_ms()) & ((1ULL << 62) - 1);
    mv->swept_version = 0;
    mv->passing = 0;
    mv->pass.cursor = 0;
}

static outbox *box_of(slot_move *mv, const char *group, int make) {
    for (int i = 0; i < mv->nbox; i++)
        if (strcmp(mv->box[i].group, group) == 0) return &mv->box[i];
    if (!make || mv->nbox == MM_GIVE_DESTS) return NULL;
    outbox *b = &mv->box[mv->nbox];
    memset(b, 0, sizeof *b);
    snprintf(b->group, sizeof b->group, "%s", group);
    resp_buf_init(&mv->out[mv->nbox++]);
    return b;
}

/* mm_give_fn: o's slot left us with its objects: to its owner's outbox. */
static int leaves(const object *o, void *ctx, int *dest) {
    slot_move *mv = ctx;
    uint16_t slot = proto_key_slot(o->key, o->keylen);
    if (!mv->mine || mv->map->from[slot] != mv->mine || !mv->map->owner[slot] || mv->map->owner[slot] == mv->mine)
        return 0;
    outbox *b = box_of(mv, mv->map->groups[mv->map->owner[slot] - 1], 1);
    if (!b) return 0;
    *dest = (int)(b - mv->box);
    return 1;
}

static void give_tick(event_loop *el, void *data) {
    slot_move *mv = data;
    (void)el;
    check_term(mv);
    if (!mv->map || !leading_and_built(mv)) {   /* looked at again shortly, not every tick */
        loop_timer_start(mv->tick, GIVE_AGAIN_MS, GIVE_TICK_MS);
        return;
    }
    if (!mv->passing) {
        if (mv->want_version <= mv->swept_version) {
            loop_timer_stop(mv->tick);
            return;
        }
        mv->passing = 1;
        mv->pass_version = mv->map->version;
        mv->pass.busy = 0;
    }
    size_t objects[MM_GIVE_DESTS] = {0};
    uint64_t lent = mv->pass.lent_bytes;
    int more = 1;
    for (int s = 0; s < GIVE_STEPS && more; s++)
        more = mm_give_step(role(mv)->meta, &mv->pass, leaves, mv, mv->out, objects);
    mv->lent += mv->pass.lent_bytes - lent;
    for (int i = 0; i < mv->nbox; i++) mv->box[i].objects += objects[i], mv->given += objects[i];
    if (more) return;
    mv->passing = 0;
    if (mv->pass.busy) {   /* copies in flight: a pass again shortly */
        loop_timer_start(mv->tick, GIVE_AGAIN_MS, GIVE_TICK_MS);
        return;
    }
    if (mv->pass_version > mv->swept_version) mv->swept_version = mv->pass_version;
    log_notice("master: slot map version %llu: every object of slots leaving group %s with their objects "
               "is given away (%llu so far)", (unsigned long long)mv->pass_version, mv->group,
               (unsigned long long)mv->given);
}

void slot_move_map(slot_move *mv, const proto_slotmap *m, int mine) {
    mv->map = (proto_slotmap *)m;
    mv->mine = mine;
    int leaving = 0;
    for (int s = 0; mine && s < PROTO_SLOTS && !leaving; s++)
        leaving = m->from[s] == mine && m->owner[s] != mine;
    if (!leaving) return;
    mv->want_version = m->version;
    if (mv->passing) mv->passing = 0, mv->pass.cursor = 0;   /* anew over this map */
    loop_timer_start(mv->tick, 0, GIVE_TICK_MS);
}

/* MOON.SLOTEXPORT group version epoch offset max: records [offset, ...)
 * of group's outbox are what it adopted already (when epoch is the
 * outbox's); answers [epoch, first, next, done, records] with records of
 * whole objects from first, at most about max bytes; done 1 when nothing
 * is left for it and a pass over a map of version >= version ended. */
static void slotexport_command(client *c) {
    slot_move *mv = master_slots_move(((master *)c->srv->role)->slots);
    uint64_t version, epoch, off, max;
    if (!mv) {
        master_reply_fail(c, PROTO_ERR, "this master is in no group");
        return;
    }
    if (!proto_group_ok(c->argv[1].ptr, c->argv[1].len) || master_arg_u64(c, 2, 0, INT64_MAX, &version) < 0 ||
        master_arg_u64(c, 3, 0, INT64_MAX, &epoch) < 0 || master_arg_u64(c, 4, 0, INT64_MAX, &off) < 0 ||
        master_arg_u64(c, 5, 1, 64u << 20, &max) < 0)
        return;
    check_term(mv);
    if (!leading_and_built(mv)) {
        master_reply_fail(c, PROTO_TRYAGAIN, "this master is rebuilding its table");
        return;
    }
    char group[PROTO_GROUP_LEN];
    snprintf(group, sizeof group, "%.*s", (int)c->argv[1].len, c->argv[1].ptr);
    outbox *b = box_of(mv, group, 0);
    resp_buf *o = b ? &mv->out[b - mv->box] : NULL;
    if (b && epoch == mv->epoch && off > b->base) {   /* adopted: forgotten */
        size_t drop = off - b->base < o->len ? (size_t)(off - b->base) : o->len;
        memmove(o->data, o->data + drop, o->len - drop);
        o->len -= drop;
        b->base += drop;
    }
    size_t len = b ? mm_give_cut((const uint8_t *)o->data, o->len, max) : 0;
    int done = (!b || o->len == 0) && mv->swept_version >= version && !mv->passing;
    reply_array(c, 5);
    reply_integer(c, (long long)mv->epoch);
    reply_integer(c, (long long)(b ? b->base : 0));
    reply_integer(c, (long long)(b ? b->base + len : 0));
    reply_integer(c, done);
    reply_bulk(c, b ? o->data : "", len);
}

/* ---- adopting (loop, asked by the thread) ---- */

/* 1 if every node acknowledged its note of marks (or its notes were
 * reset: it died or registered anew, and gets what it holds again). */
static int marks_met(master_meta *meta, const mm_note_mark *marks, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const mm_node *nd = mm_node_get(meta, marks[i].node);
        if (nd && nd->notes_epoch == marks[i].epoch && nd->notes_seq < marks[i].seq) return 0;
    }
    return 1;
}

static void adopt_wake(event_loop *el, void *data) {
    slot_move *mv = data;
    (void)el;
    pthread_mutex_lock(&mv->mu);
    adopt_call *a = mv->call;
    if (a && a->asked && !a->answered && !a->abandoned) {
        if (!leading_and_built(mv)) {
            a->rc = -2;
        } else if (!a->blob && a->nmarks) {
            a->rc = marks_met(role(mv)->meta, a->marks, a->nmarks);
        } else if (!a->len) {   /* a probe: may we adopt now? */
            a->rc = 0;
        } else {
            const master *m = role(mv);
            mm_notes_track(m->meta);
            a->rc = mm_adopt(m->meta, a->blob, a->len, (uint64_t)mv->srv->cfg.lease_ms, wall_ms(), &a->st);
            const mm_note_mark *mk = mm_notes_touched(m->meta, &a->nmarks);
            a->marks = a->nmarks ? xmalloc(a->nmarks * sizeof *mk) : NULL;
            if (a->nmarks) memcpy(a->marks, mk, a->nmarks * sizeof *mk);
        }
        a->answered = 1;
        pthread_cond_broadcast(&mv->cv);
    }
    pthread_mutex_unlock(&mv->mu);
}

/* Thread: a on the loop; its rc, -3 if stopping. */
static int loop_call(slot_move *mv, adopt_call *ap) {
    adopt_call a = *ap;
    a.asked = 1;
    pthread_mutex_lock(&mv->mu);
    mv->call = &a;
    loop_wake_send(mv->wake);
    while (!a.answered && !atomic_load(&mv->stop)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += PULL_WAIT_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&mv->cv, &mv->mu, &ts);
    }
    if (!a.answered) a.abandoned = 1, a.rc = -3;
    mv->call = NULL;
    pthread_mutex_unlock(&mv->mu);
    *ap = a;
    return a.rc;
}

/* Thread: blob adopted on the loop; rc as adopt_call's, -3 if stopping.
 * With blob, returns only once the nodes acknowledged the notes of what
 * was adopted (a holds the records until we acknowledge them: until the
 * nodes know the objects are ours, a new leader of ours would not find
 * them in their reports, and a new leader of a still would), or -4 after
 * PULL_DURABLE_MS without. */
static int adopt(slot_move *mv, const void *blob, size_t len, mm_adopt_stats *st) {
    adopt_call a = {.blob = blob, .len = len};
    int rc = loop_call(mv, &a);
    *st = a.st;
    mm_note_mark *marks = a.marks;
    size_t n = a.nmarks;
    uint64_t end = mono_ms() + PULL_DURABLE_MS;
    while (rc == 0 && n) {
        adopt_call q = {.marks = marks, .nmarks = n};
        int met = loop_call(mv, &q);
        if (met == 1) break;
        if (met < 0 || mono_ms() >= end) rc = met < 0 ? met : -4;
        else master_slots_nap(&mv->stop, PULL_DURABLE_STEP_MS);
    }
    free(marks);
    return rc;
}

/* ---- pulling (thread) ---- */

static void say(slot_move *mv, const char *from, const char *what) {
    char line[ETCD_ERR_LEN];
    snprintf(line, sizeof line, "slot move from group %s: %s", from, what);
    if (strcmp(line, mv->said) == 0) return;
    snprintf(mv->said, sizeof mv->said, "%s", line);
    log_warning("master: %s", line);
}

static void drop_link(pull_link *l) {
    if (l->rc) redisFree(l->rc);
    l->rc = NULL;
    l->addr[0] = '\0';
}

/* A connection to from's leader as etcd names it now: kept while that
 * leader leads and answers, made anew when the group's leader changed
 * (each giving group its own: a move from several groups at once pulls
 * from each leader in turn without reconnecting). NULL with err. */
static pull_link *link_to(slot_move *mv, etcd_client *ec, const char *from, char *err, size_t errlen) {
    pull_link *l = NULL;
    for (int i = 0; i < mv->nlinks && !l; i++)
        if (strcmp(mv->links[i].group, from) == 0) l = &mv->links[i];
    if (!l && mv->nlinks == MM_GIVE_DESTS) {
        snprintf(err, errlen, "pulling from %d groups already", MM_GIVE_DESTS);
        return NULL;
    }
    if (!l) {
        l = &mv->links[mv->nlinks++];
        memset(l, 0, sizeof *l);
        snprintf(l->group, sizeof l->group, "%s", from);
    }
    char cl[ETCD_KEY_MAX], addr[256];
    int found = 0;
    int64_t term;
    if (etcd_group_cluster(mv->cluster, from, cl, sizeof cl) != 0 ||
        etcd_leader_lookup(ec, cl, &found, addr, sizeof addr, &term, err, errlen) != 0)
        return NULL;
    if (!found) {
        snprintf(err, errlen, "group %s has no leader", from);
        return NULL;
    }
    if (l->rc && strcmp(l->addr, addr) == 0) return l;
    if (l->rc) log_notice("master: slot move from group %s: its leader is %s now", from, addr);
    drop_link(l);
    const mkv_config *cfg = &mv->srv->cfg;
    const char *pass = cfg->master_auth[0] ? cfg->master_auth : cfg->requirepass;
    if (proto_master_open(&l->rc, addr, pass, cfg->cluster_secret, PULL_IO_MS, PULL_IO_MS, err, errlen) !=
        PROTO_LINK_OK)
        return NULL;
    snprintf(l->addr, sizeof l->addr, "%s", addr);
    l->epoch = l->off = 0;   /* a new leader's outbox has an epoch of its own */
    return l;
}

typedef struct settle_ctx {
    uint64_t version;
    const char *group, *from;
} settle_ctx;

/* etcd_slotmap_fn: the marks cleared only on the map the pull was for
 * (a newer one may move more slots, whose objects were not given yet). */
static int settle_fn(proto_slotmap *m, void *arg, char *err, size_t errlen) {
    const settle_ctx *s = arg;
    if (m->version != s->version) return 0;
    return proto_slotmap_settle(m, 0, PROTO_SLOTS - 1, s->group, s->from);
}

/* One round trip: 1 while more is to come, 0 when from has nothing left
 * for us (the marks cleared), -1 to try again at the next poll. */
static int pull_once(slot_move *mv, etcd_client *ec, pull_link *l, uint64_t version) {
    const char *from = l->group;
    proto_cmd cmd;
    proto_cmd_init(&cmd, 6);
    proto_cmd_slotexport(&cmd, mv->group, version, l->epoch, l->off, SLOT_MOVE_PULL_BYTES);
    redisReply *r = redisCommandArgv(l->rc, cmd.argc, cmd.argv, cmd.lens);
    proto_cmd_free(&cmd);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 5 || r->element[4]->type != REDIS_REPLY_STRING) {
        say(mv, from, r && r->type == REDIS_REPLY_ERROR ? r->str : l->rc->err ? l->rc->errstr : "bad reply");
        if (r) freeReplyObject(r);
        drop_link(l);
        return -1;
    }
    uint64_t epoch = (uint64_t)r->element[0]->integer, first = (uint64_t)r->element[1]->integer,
             next = (uint64_t)r->element[2]->integer;
    int done = r->element[3]->integer != 0;
    const redisReply *blob = r->element[4];
    int rc = 1;
    if (blob->len) {
        mm_adopt_stats st;
        int a = adopt(mv, blob->str, blob->len, &st);
        if (a == 0) {
            atomic_fetch_add(&mv->adopted, st.objects);
            atomic_store(&mv->waiting, st.waiting);
            atomic_fetch_add(&mv->refused, st.refused);
            atomic_fetch_add(&mv->pulled_bytes, blob->len);
        }
        if (a == -1) say(mv, from, "malformed records");
        if (a == -4) say(mv, from, "the nodes did not acknowledge the adopted objects' notes in time: pulled again");
        if (a == 0 && st.waiting) say(mv, from, "objects on nodes this group does not have wait (no shared nodes?)");
        if (a == 0 && st.waiting) mv->pull_after = mono_ms() + PULL_BACKOFF_MS;
        if (a != 0 || st.waiting) rc = -1;   /* not acknowledged: asked again later */
        else l->epoch = epoch, l->off = next;
    } else {
        l->epoch = epoch, l->off = first;
        if (done) {
            char err[ETCD_ERR_LEN];
            settle_ctx s = {version, mv->group, from};
            int changed = 0;
            uint64_t v = 0;
            if (etcd_slotmap_change(ec, mv->cluster, settle_fn, &s, &changed, &v, err, sizeof err) != 0)
                log_warning("master: slot move from %s: %s", from, err);
            else if (changed)
                log_notice("master: %d slots moved from group %s with their objects (slot map version %llu)",
                           changed, from, (unsigned long long)v);
            rc = 0;
        } else {
            rc = -1;   /* the giver's pass is not over: next poll */
        }
    }
    freeReplyObject(r);
    return rc;
}

static void pull_all(slot_move *mv, etcd_client *ec, const proto_slotmap *m) {
    int mine = proto_slotmap_group(m, mv->group), coming = 0;
    for (int s = 0; mine && s < PROTO_SLOTS && !coming; s++) coming = m->owner[s] == mine && m->from[s];
    mm_adopt_stats st;
    /* a standby or a rebuilding leader pulls nothing; nor, for a while,
     * one whose last pull found objects it cannot adopt (nodes it lacks) */
    if (!coming || mono_ms() < mv->pull_after || adopt(mv, NULL, 0, &st) != 0) return;
    uint8_t seen[PROTO_MAX_GROUPS + 1] = {0};
    for (int s = 0; s < PROTO_SLOTS && !atomic_load(&mv->stop); s++) {
        int f = m->from[s];
        if (m->owner[s] != mine || !f || seen[f]) continue;
        seen[f] = 1;
        const char *from = m->groups[f - 1];
        char err[ETCD_ERR_LEN];
        pull_link *l = link_to(mv, ec, from, err, sizeof err);
        if (!l) {
            say(mv, from, err);
            continue;
        }
        for (int i = 0; i < SLOT_MOVE_PULLS && !atomic_load(&mv->stop); i++)
            if (pull_once(mv, ec, l, m->version) <= 0) break;
    }
}

/* The thread: the map read every SLOTS_POLL_MS while slots come to us
 * with their objects (its own etcd client: a pull that waits on a slow
 * peer never delays the map's own reads, by which the group's keys are
 * served). */
static void *pull_main(void *arg) {
    slot_move *mv = arg;
    proto_slotmap *m = xmalloc(sizeof *m);
    char err[ETCD_ERR_LEN];
    do {
        int found = 0;
        if (etcd_slotmap_read(mv->ec, mv->cluster, m, &found, err, sizeof err) == 0 && found) pull_all(mv, mv->ec, m);
    } while (!master_slots_nap(&mv->stop, SLOTS_POLL_MS));
    free(m);
    return NULL;
}

/* ---- life ---- */

slot_move *slot_move_create(server *srv, const char *cluster, const char *group, char *err, size_t errlen) {
    slot_move *mv = xcalloc(1, sizeof *mv);
    if (!(mv->ec = etcd_create(srv->cfg.etcd, PULL_IO_MS, err, errlen))) {
        free(mv);
        return NULL;
    }
    mv->srv = srv;
    snprintf(mv->cluster, sizeof mv->cluster, "%s", cluster);
    snprintf(mv->group, sizeof mv->group, "%s", group);
    pthread_mutex_init(&mv->mu, NULL);
    pthread_cond_init(&mv->cv, NULL);
    mv->wake = loop_wake_create(srv->loop, adopt_wake, mv);
    mv->tick = loop_timer_create(srv->loop, give_tick, mv);
    pthread_create(&mv->th, NULL, pull_main, mv);
    return mv;
}

void slot_move_free(slot_move *mv) {
    if (!mv) return;
    atomic_store(&mv->stop, 1);
    pthread_mutex_lock(&mv->mu);
    pthread_cond_broadcast(&mv->cv);
    pthread_mutex_unlock(&mv->mu);
    pthread_join(mv->th, NULL);
    etcd_free(mv->ec);
    loop_timer_free(mv->tick);
    loop_wake_free(mv->wake);
    for (int i = 0; i < mv->nlinks; i++) drop_link(&mv->links[i]);
    for (int i = 0; i < mv->nbox; i++) resp_buf_free(&mv->out[i]);
    pthread_cond_destroy(&mv->cv);
    pthread_mutex_destroy(&mv->mu);
    free(mv);
}

void slot_move_info(const slot_move *mv, resp_buf *out) {
    if (!mv) return;
    size_t bytes = 0;
    for (int i = 0; i < mv->nbox; i++) bytes += mv->out[i].len;
    info_field(out, "slots_given_objects", "%llu", (unsigned long long)mv->given);
    info_field(out, "slots_outbox_bytes", "%zu", bytes);
    info_field(out, "slots_adopted_objects", "%llu", (unsigned long long)atomic_load(&mv->adopted));
    info_field(out, "slots_adopt_waiting", "%llu", (unsigned long long)atomic_load(&mv->waiting));
    info_field(out, "slots_adopt_refused", "%llu", (unsigned long long)atomic_load(&mv->refused));
    info_field(out, "slots_lent_bytes", "%llu", (unsigned long long)mv->lent);
    uint64_t away, back;   /* of that, what the nodes say they lent to the adopters, and got back */
    mm_lent_stats(role(mv)->meta, &away, &back);
    info_field(out, "slots_lent_away_bytes", "%llu", (unsigned long long)away);
    info_field(out, "slots_lent_back_bytes", "%llu", (unsigned long long)back);
}

/* MOON.LENT id L|B off len ...: ranges of our chunks a shared node lent
 * to another group or got back (mm_node_lent); TRYAGAIN while the table
 * is rebuilt (the node sends them again after its next heartbeat). */
static void lent_command(client *c) {
    master *m = c->srv->role;
    uint32_t id;
    if ((c->argc - 2) % 3 != 0 || c->argc < 5) {
        master_reply_fail(c, PROTO_ERR, "wrong number of arguments for '%s'", PROTO_VERB_LENT);
        return;
    }
    if (master_own_node(c, 1, &id) != 0) return;
    if (master_rebuild_busy(m) || master_rebuild_awaits_nodes(m)) {
        master_reply_fail(c, PROTO_TRYAGAIN, "this master is rebuilding its table");
        return;
    }
    uint64_t off, len;
    for (int i = 2; i + 2 < c->argc; i += 3) {   /* all well formed before any is taken */
        const resp_arg *k = &c->argv[i];
        if (k->len != 1 || !k->ptr[0] || !strchr("LlBb", k->ptr[0])) {
            master_reply_fail(c, PROTO_ERR, "each range is L|B off len");
            return;
        }
        if (master_arg_u64(c, i + 1, 0, INT64_MAX, &off) < 0 || master_arg_u64(c, i + 2, 1, INT64_MAX, &len) < 0)
            return;
    }
    for (int i = 2; i + 2 < c->argc; i += 3) {
        char err[PROTO_ERR_LEN];
        int back = c->argv[i].ptr[0] == 'B' || c->argv[i].ptr[0] == 'b';
        (void)master_arg_u64(c, i + 1, 0, INT64_MAX, &off);
        (void)master_arg_u64(c, i + 2, 1, INT64_MAX, &len);
        proto_status st = mm_node_lent(m->meta, id, back, off, len, wall_ms(), err, sizeof err);
        if (st == PROTO_NODEDEAD || st == PROTO_TRYAGAIN) {   /* all again later (taking one twice changes nothing) */
            master_reply_fail(c, st, "%s", err);
            return;
        }
        if (st != PROTO_OK) log_warning("master: %s: %s", PROTO_VERB_LENT, err);   /* the others still count */
    }
    reply_ok(c);
}

static const command slot_move_commands[] = {
    {"moon.slotexport", slotexport_command, 6, CMD_WRITE | CMD_MEMBER, 0, 0, 0, 0, "moonkv", "0.7.0",
     "A moved slot's objects as records for the group adopting them; acknowledges those before offset",
     "group version epoch offset max"},
    {"moon.lent", lent_command, -5, CMD_WRITE | CMD_MEMBER, 0, 0, 0, 0, "moonkv", "0.7.0",
     "A shared node's ranges of our chunks lent to another group (L) or given back (B)", "id L|B off len ..."},
};

void slot_move_register_commands(server *srv) {
    commands_register(srv, slot_move_commands, sizeof slot_move_commands / sizeof slot_move_commands[0]);
}
