/* master/get_wait.c - a get of an object on disk waits, bounded, for
 * its load.
 *
 * A MOON.GET, MGET or MGETPACKED with keys whose objects have no DRAM
 * replica starts their loads (offload.c) and is parked: its client is
 * blocked (its later commands wait; the loop does not), its loading keys
 * are looked up again whenever a load lands or fails or space frees (a
 * load that found no room), and it is answered once none is loading or
 * get_wait_ms has passed (then as without waiting: GET's TRYAGAIN, a
 * batch's miss). Readers see a hit, later, instead of an error to retry. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "master/master.h"
#include "server/info.h"
#include "server/networking.h"

#define GET_WAIT_POLL_MS 100   /* a lookup at least this often, whatever woke us */

struct get_wait {
    master *m;
    master_park_queue q;
    uint64_t seen_loads, seen_freed;   /* mm_loads_landed, mm_space_freed at the last lookup */
    uint64_t waited, timed_out;        /* requests parked, and answered with keys still loading */
    uint64_t relooked;                 /* keys found, then offloaded while parked: looked up again */
};

static int loading(const mm_item *it, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (it[i].status == PROTO_TRYAGAIN) return 1;
    return 0;
}

int get_wait_park(get_wait *w, client *c, mm_item *it, size_t n, int form, uint64_t now_ms) {
    uint64_t bound = (uint64_t)w->m->srv->cfg.get_wait_ms;
    if (bound == 0 || !loading(it, n)) return 0;
    master_park_queue_add(&w->q, c, it, n, form, now_ms, bound);
    w->waited++;
    return 1;
}

/* A key found before the wait is answered only if its object is still
 * the one found, readable: another client may have removed it (its
 * lease keeps it from going to disk meanwhile). */
static void recheck_found(master_meta *meta, master_parked *p) {
    for (size_t i = 0; i < p->n; i++) {
        mm_item *it = &p->it[i];
        if (it->status != PROTO_OK) continue;
        object *o = mm_find(meta, it->key, it->keylen);
        if (o == it->obj && o->state == OBJ_COMPLETE && mm_obj_stamp(o) == p->stamp[i] &&
            proto_replicas_for_reader(o) > 0)
            continue;
        it->status = PROTO_NOTFOUND;
    }
}

/* Whether p's key i, found before the wait, is still its object but has
 * no DRAM replica any more: an offload in flight when it was found (one
 * a load of the same batch may start, finding no room) ended meanwhile,
 * dropping the replica the reply would have named. Its lease is given
 * back and it is looked up again (a load), not answered as a miss. */
static int offloaded_meanwhile(master_meta *meta, master_parked *p, size_t i, uint64_t now_ms) {
    mm_item *it = &p->it[i];
    if (it->status != PROTO_OK) return 0;
    object *o = mm_find(meta, it->key, it->keylen);
    if (o != it->obj || o->state != OBJ_COMPLETE || mm_obj_stamp(o) != p->stamp[i] ||
        proto_replicas_for_reader(o) > 0)   /* a whole record left: read from the disk */
        return 0;
    mm_lease_return(meta, it->key, it->keylen, it->lease_until, now_ms);
    return 1;
}

/* Look p's loading keys up again; 1 when none is loading. Their leases
 * end when the first lookup's do, while that leaves at least half a
 * lease: a batch's keys share one expiry (MOON.MRELEASE gives them back
 * together). */
static int retry(void *owner, master_parked *p, uint64_t now_ms) {
    get_wait *w = owner;
    master_meta *meta = w->m->meta;
    uint64_t lease = mm_get_config(meta)->lease_ms, real_ms = now_ms;
    if (now_ms - p->t0_ms < lease / 2) now_ms = p->t0_ms;
    for (size_t i = 0; i < p->n; i++) {
        mm_item *it = &p->it[i];
        if (offloaded_meanwhile(meta, p, i, real_ms)) {
            it->status = PROTO_TRYAGAIN;
            w->relooked++;
        }
        if (it->status != PROTO_TRYAGAIN) continue;
        it->status = mm_get(meta, it->key, it->keylen, now_ms, &it->obj, &it->lease_until, it->err,
                            sizeof it->err);
        if (it->status == PROTO_OK) p->stamp[i] = mm_obj_stamp(it->obj);
    }
    return !loading(p->it, p->n);
}

static void finish(void *owner, master_parked *p) {
    get_wait *w = owner;
    recheck_found(w->m->meta, p);
    if (!master_refuse_unless_leading(p->c)) {   /* else -READONLY: a stall past our lease */
        if (loading(p->it, p->n)) w->timed_out++;
        master_reply_gets(p->c, p->it, p->n, p->form);
    }
    client_unblock(p->c);
    master_parked_free(p);
}

/* A run looks again at every parked get; loads that land or space that
 * frees (a load that found no room) wake it before the loop sleeps. */
static void before(void *owner, uint64_t now_ms) {
    get_wait *w = owner;
    w->seen_loads = mm_loads_landed(w->m->meta);
    w->seen_freed = mm_space_freed(w->m->meta);
}

static void after(void *owner) {}

static uint64_t wake_by(void *owner, uint64_t now_ms) { return now_ms + GET_WAIT_POLL_MS; }

static int changed(void *owner) {
    get_wait *w = owner;
    return mm_loads_landed(w->m->meta) != w->seen_loads || mm_space_freed(w->m->meta) != w->seen_freed;
}

static const master_park_ops get_ops = {before, retry, finish, after, wake_by, changed, NULL};

get_wait *get_wait_create(master *m) {
    get_wait *w = xcalloc(1, sizeof *w);
    w->m = m;
    master_park_queue_init(&w->q, m->srv->loop, &get_ops, w);
    return w;
}

void get_wait_destroy(get_wait *w) {
    if (!w) return;
    master_park_queue_fini(&w->q);
    free(w);
}

/* Its leases run out on their own. */
void get_wait_forget(get_wait *w, client *c) { master_park_queue_forget(&w->q, c); }

void get_wait_info(const get_wait *w, resp_buf *out) {
    info_field(out, "gets_waiting", "%zu", w ? master_parked_count(w->q.head) : 0);
    info_field(out, "gets_waited", "%llu", (unsigned long long)(w ? w->waited : 0));
    info_field(out, "gets_waited_timeout", "%llu", (unsigned long long)(w ? w->timed_out : 0));
    info_field(out, "gets_waited_relooked", "%llu", (unsigned long long)(w ? w->relooked : 0));
}
