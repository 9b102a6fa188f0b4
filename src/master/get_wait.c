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
    master_parked *head;
    loop_timer *timer;
    loop_hook *hook;
    uint64_t seen_loads, seen_freed;   /* mm_loads_landed, mm_space_freed at the last lookup */
    uint64_t waited, timed_out;        /* requests parked, and answered with keys still loading */
};

static void get_wait_run(get_wait *w);

static void on_timer(event_loop *el, void *data) { get_wait_run(data); }

/* Before the loop sleeps: look again if a load ended or space freed. */
static void on_before_sleep(event_loop *el, void *data) {
    get_wait *w = data;
    if (w->head && (mm_loads_landed(w->m->meta) != w->seen_loads || mm_space_freed(w->m->meta) != w->seen_freed))
        get_wait_run(w);
}

get_wait *get_wait_create(master *m) {
    get_wait *w = xcalloc(1, sizeof *w);
    w->m = m;
    w->timer = loop_timer_create(m->srv->loop, on_timer, w);
    w->hook = loop_hook_add(m->srv->loop, SERVER_HOOK_FLUSH - 1, on_before_sleep, w);
    return w;
}

void get_wait_destroy(get_wait *w) {
    if (!w) return;
    master_parked_free_all(&w->head);
    loop_timer_free(w->timer);
    loop_hook_del(w->hook);
    free(w);
}

static int loading(const mm_item *it, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (it[i].status == PROTO_TRYAGAIN) return 1;
    return 0;
}

static void rearm(get_wait *w, uint64_t now_ms) {
    if (!w->head) {
        loop_timer_stop(w->timer);
        return;
    }
    uint64_t next = master_parked_next(w->head, now_ms + GET_WAIT_POLL_MS);
    loop_timer_start(w->timer, next > now_ms ? (long long)(next - now_ms) : 1, 0);
}

int get_wait_park(get_wait *w, client *c, mm_item *it, size_t n, int form, uint64_t now_ms) {
    uint64_t bound = (uint64_t)w->m->srv->cfg.get_wait_ms;
    if (bound == 0 || !loading(it, n)) return 0;
    master_park(&w->head, c, it, n, form, now_ms, bound);
    w->waited++;
    rearm(w, now_ms);
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
            proto_replicas_readable(o) > 0)
            continue;
        it->status = PROTO_NOTFOUND;
    }
}

/* Look p's loading keys up again; 1 when none is loading. Their leases
 * end when the first lookup's do, while that leaves at least half a
 * lease: a batch's keys share one expiry (MOON.MRELEASE gives them back
 * together). */
static int retry(master_meta *meta, master_parked *p, uint64_t now_ms) {
    uint64_t lease = mm_get_config(meta)->lease_ms;
    if (now_ms - p->t0_ms < lease / 2) now_ms = p->t0_ms;
    for (size_t i = 0; i < p->n; i++) {
        mm_item *it = &p->it[i];
        if (it->status != PROTO_TRYAGAIN) continue;
        it->status = mm_get(meta, it->key, it->keylen, now_ms, &it->obj, &it->lease_until, it->err,
                            sizeof it->err);
        if (it->status == PROTO_OK) p->stamp[i] = mm_obj_stamp(it->obj);
    }
    return !loading(p->it, p->n);
}

static void finish(get_wait *w, master_parked *p) {
    recheck_found(w->m->meta, p);
    if (!master_refuse_unless_leading(p->c)) {   /* else -READONLY: a stall past our lease */
        if (loading(p->it, p->n)) w->timed_out++;
        master_reply_gets(p->c, p->it, p->n, p->form);
    }
    client_unblock(p->c);
    master_parked_free(p);
}

static void get_wait_run(get_wait *w) {
    master_meta *meta = w->m->meta;
    uint64_t now = wall_ms();
    w->seen_loads = mm_loads_landed(meta);
    w->seen_freed = mm_space_freed(meta);
    for (master_parked **pp = &w->head; *pp;) {
        master_parked *p = *pp;
        if (retry(meta, p, now) || now >= p->deadline_ms) {
            *pp = p->next;
            finish(w, p);
            continue;
        }
        pp = &p->next;
    }
    rearm(w, now);
}

void get_wait_forget(get_wait *w, client *c) {
    for (master_parked **pp = &w->head; *pp;) {
        master_parked *p = *pp;
        if (p->c != c) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;   /* its leases run out on their own */
        master_parked_free(p);
    }
}

void get_wait_info(const get_wait *w, resp_buf *out) {
    info_field(out, "gets_waiting", "%zu", w ? master_parked_count(w->head) : 0);
    info_field(out, "gets_waited", "%llu", (unsigned long long)(w ? w->waited : 0));
    info_field(out, "gets_waited_timeout", "%llu", (unsigned long long)(w ? w->timed_out : 0));
}
