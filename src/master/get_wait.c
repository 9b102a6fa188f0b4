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

typedef struct parked {
    client *c;
    mm_item *it;              /* keys point into keys */
    uint64_t *stamp;          /* found items: their object's write stamp */
    char *keys;
    size_t n;
    int form;                 /* the reply's, MASTER_GETS_* */
    uint64_t t0_ms;           /* the first lookup's time */
    uint64_t deadline_ms;
    struct parked *next;
} parked;

struct get_wait {
    master *m;
    parked *head;
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

static void parked_free(parked *p) {
    free(p->it);
    free(p->stamp);
    free(p->keys);
    free(p);
}

void get_wait_destroy(get_wait *w) {
    if (!w) return;
    while (w->head) {
        parked *p = w->head;
        w->head = p->next;
        parked_free(p);   /* the clients go with the server */
    }
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
    uint64_t next = now_ms + GET_WAIT_POLL_MS;
    for (const parked *p = w->head; p; p = p->next)
        if (p->deadline_ms < next) next = p->deadline_ms;
    loop_timer_start(w->timer, next > now_ms ? (long long)(next - now_ms) : 1, 0);
}

int get_wait_park(get_wait *w, client *c, mm_item *it, size_t n, int form, uint64_t now_ms) {
    uint64_t bound = (uint64_t)w->m->srv->cfg.get_wait_ms;
    if (bound == 0 || !loading(it, n)) return 0;
    parked *p = xcalloc(1, sizeof *p);
    size_t keybytes = 0;
    for (size_t i = 0; i < n; i++) keybytes += it[i].keylen;
    p->keys = xmalloc(keybytes ? keybytes : 1);   /* the arguments go when the command returns */
    p->it = xmemdup(it, n * sizeof *it);
    p->stamp = xcalloc(n, sizeof *p->stamp);
    for (size_t i = 0, off = 0; i < n; off += it[i].keylen, i++) {
        memcpy(p->keys + off, it[i].key, it[i].keylen);
        p->it[i].key = p->keys + off;
        if (it[i].status == PROTO_OK) p->stamp[i] = mm_obj_of(it[i].obj)->write_issued_us;
    }
    p->c = c;
    p->n = n;
    p->form = form;
    p->t0_ms = now_ms;
    p->deadline_ms = now_ms + bound;
    parked **tail = &w->head;
    while (*tail) tail = &(*tail)->next;
    *tail = p;
    w->waited++;
    client_block(c);
    rearm(w, now_ms);
    return 1;
}

/* A key found before the wait is answered only if its object is still
 * the one found, readable: another client may have removed it (its
 * lease keeps it from going to disk meanwhile). */
static void recheck_found(master_meta *meta, parked *p) {
    for (size_t i = 0; i < p->n; i++) {
        mm_item *it = &p->it[i];
        if (it->status != PROTO_OK) continue;
        object *o = mm_find(meta, it->key, it->keylen);
        if (o == it->obj && o->state == OBJ_COMPLETE && mm_obj_of(o)->write_issued_us == p->stamp[i] &&
            proto_replicas_readable(o) > 0)
            continue;
        it->status = PROTO_NOTFOUND;
    }
}

/* Look p's loading keys up again; 1 when none is loading. Their leases
 * end when the first lookup's do, while that leaves at least half a
 * lease: a batch's keys share one expiry (MOON.MRELEASE gives them back
 * together). */
static int retry(master_meta *meta, parked *p, uint64_t now_ms) {
    uint64_t lease = mm_get_config(meta)->lease_ms;
    if (now_ms - p->t0_ms < lease / 2) now_ms = p->t0_ms;
    for (size_t i = 0; i < p->n; i++) {
        mm_item *it = &p->it[i];
        if (it->status != PROTO_TRYAGAIN) continue;
        it->status = mm_get(meta, it->key, it->keylen, now_ms, &it->obj, &it->lease_until, it->err,
                            sizeof it->err);
        if (it->status == PROTO_OK) p->stamp[i] = mm_obj_of(it->obj)->write_issued_us;
    }
    return !loading(p->it, p->n);
}

static void finish(get_wait *w, parked *p) {
    recheck_found(w->m->meta, p);
    if (!master_refuse_unless_leading(p->c)) {   /* else -READONLY: a stall past our lease */
        if (loading(p->it, p->n)) w->timed_out++;
        master_reply_gets(p->c, p->it, p->n, p->form);
    }
    client_unblock(p->c);
    parked_free(p);
}

static void get_wait_run(get_wait *w) {
    master_meta *meta = w->m->meta;
    uint64_t now = wall_ms();
    w->seen_loads = mm_loads_landed(meta);
    w->seen_freed = mm_space_freed(meta);
    for (parked **pp = &w->head; *pp;) {
        parked *p = *pp;
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
    for (parked **pp = &w->head; *pp;) {
        parked *p = *pp;
        if (p->c != c) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;   /* its leases run out on their own */
        parked_free(p);
    }
}

void get_wait_info(const get_wait *w, resp_buf *out) {
    size_t n = 0;
    for (const parked *p = w ? w->head : NULL; p; p = p->next) n++;
    info_field(out, "gets_waiting", "%zu", n);
    info_field(out, "gets_waited", "%llu", (unsigned long long)(w ? w->waited : 0));
    info_field(out, "gets_waited_timeout", "%llu", (unsigned long long)(w ? w->timed_out : 0));
}
