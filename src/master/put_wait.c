/* master/put_wait.c - a put that found no room waits, bounded, for
 * quarantined space.
 *
 * Extents of removed objects wait for the reads still using them
 * (quarantine.c); under churn those reads end within milliseconds. A
 * MOON.PUTSTART or MPUTSTART with items that found no room, while held
 * extents that may free within put_wait_ms would cover them, is parked:
 * its client is blocked (its later commands wait; the loop does not),
 * its NOSPACE items are placed again whenever extents go back to the
 * allocators or a hold runs out, and it is answered once every item is
 * placed or the bound has passed (then NOSPACE, as without waiting).
 * A node shared by master groups that may give more chunks is told to
 * ask for them at once (mm_chunks_ahead); with a disk tier, offloads
 * make the room (mm_offload_ahead). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "master/master.h"
#include "server/info.h"
#include "server/networking.h"

struct put_wait {
    master *m;
    master_park_queue q;
    uint64_t seen_freed;      /* mm_space_freed at the last retry */
    uint64_t waited, nospace; /* requests parked, and answered NOSPACE after all */
};

/* Room is on its way for size: held extents free by the horizon, a
 * shared node gives chunks (asked at once), or offloads to disk. */
static int room_coming(master_meta *meta, uint64_t size, uint32_t replicas, uint64_t now_ms, uint64_t horizon_ms) {
    return mm_space_due(meta, size, replicas, horizon_ms) || mm_chunks_ahead(meta, size) ||
           mm_offload_ahead(meta, size, now_ms);
}

static int any_due(master_meta *meta, const mm_item *it, size_t n, uint32_t replicas,
                   uint64_t now_ms, uint64_t horizon_ms) {
    for (size_t i = 0; i < n; i++)
        if (it[i].status == PROTO_NOSPACE && room_coming(meta, it[i].size, replicas, now_ms, horizon_ms)) return 1;
    return 0;
}

int put_wait_park(put_wait *w, client *c, mm_item *it, size_t n, uint32_t replicas, int form,
                  uint64_t now_ms) {
    uint64_t bound = (uint64_t)w->m->srv->cfg.put_wait_ms;
    if (bound == 0 || !any_due(w->m->meta, it, n, replicas, now_ms, now_ms + bound)) return 0;
    master_parked *p = master_park_queue_add(&w->q, c, it, n, form, now_ms, bound);
    p->replicas = replicas;
    w->waited++;
    return 1;
}

/* An item placed before the wait is answered only if its put is still
 * the one placed: another client may have revoked or ended it. */
static void recheck_placed(master_meta *meta, master_parked *p) {
    for (size_t i = 0; i < p->n; i++) {
        mm_item *it = &p->it[i];
        if (it->status != PROTO_OK) continue;
        object *o = mm_find(meta, it->key, it->keylen);
        if (o == it->obj && o->state == OBJ_PENDING && mm_obj_stamp(o) == p->stamp[i])
            continue;
        it->status = PROTO_ERR;
        snprintf(it->err, sizeof it->err, "put ended by another client while waiting for space");
    }
}

/* Place p's NOSPACE items again; 1 when none is left waiting. */
static int retry(void *owner, master_parked *p, uint64_t now_ms) {
    master_meta *meta = ((put_wait *)owner)->m->meta;
    int waiting = 0;
    for (size_t i = 0; i < p->n; i++) {
        mm_item *it = &p->it[i];
        if (it->status != PROTO_NOSPACE) continue;
        it->status = mm_put_start(meta, it->key, it->keylen, it->size, p->replicas, now_ms, &it->obj,
                                  it->err, sizeof it->err);
        if (it->status == PROTO_OK) p->stamp[i] = mm_obj_stamp(it->obj);
        /* keep asking for chunks, or shedding */
        if (it->status == PROTO_NOSPACE && !mm_chunks_ahead(meta, it->size)) mm_offload_ahead(meta, it->size, now_ms);
        waiting |= it->status == PROTO_NOSPACE;
    }
    return !waiting;
}

/* Released after a stall past our lease: nothing is answered as leader,
 * and what was placed for it goes back (the put never started for the client). */
static int refused_not_leading(put_wait *w, master_parked *p) {
    if (!master_refuse_unless_leading(p->c)) return 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->it[i].status == PROTO_OK)
            mm_put_revoke(w->m->meta, p->it[i].key, p->it[i].keylen, wall_ms(), NULL, 0);
    client_unblock(p->c);
    master_parked_free(p);
    return 1;
}

static void finish(void *owner, master_parked *p) {
    put_wait *w = owner;
    recheck_placed(w->m->meta, p);
    if (refused_not_leading(w, p)) return;
    for (size_t i = 0; i < p->n; i++)
        if (p->it[i].status == PROTO_NOSPACE) {
            w->nospace++;
            break;
        }
    master_reply_puts(p->c, p->it, p->n, p->form);
    client_unblock(p->c);
    master_parked_free(p);
}

/* A run first gives back the holds that ran out; frees by commands are
 * caught before the loop sleeps, hold expiries by the timer. */
static void before(void *owner, uint64_t now_ms) { mm_release_held(((put_wait *)owner)->m->meta, now_ms); }

static void after(void *owner) {
    put_wait *w = owner;
    w->seen_freed = mm_space_freed(w->m->meta);
}

static uint64_t wake_by(void *owner, uint64_t now_ms) { return mm_next_release(((put_wait *)owner)->m->meta); }

static int changed(void *owner) {
    put_wait *w = owner;
    return mm_space_freed(w->m->meta) != w->seen_freed;
}

/* Nobody will write its placed puts: their space goes back now. */
static void forget(void *owner, master_parked *p) {
    put_wait *w = owner;
    recheck_placed(w->m->meta, p);
    for (size_t i = 0; i < p->n; i++)
        if (p->it[i].status == PROTO_OK)
            mm_put_revoke(w->m->meta, p->it[i].key, p->it[i].keylen, wall_ms(), NULL, 0);
}

static const master_park_ops put_ops = {before, retry, finish, after, wake_by, changed, forget};

put_wait *put_wait_create(master *m) {
    put_wait *w = xcalloc(1, sizeof *w);
    w->m = m;
    master_park_queue_init(&w->q, m->srv->loop, &put_ops, w);
    return w;
}

void put_wait_destroy(put_wait *w) {
    if (!w) return;
    master_park_queue_fini(&w->q);
    free(w);
}

void put_wait_forget(put_wait *w, client *c) { master_park_queue_forget(&w->q, c); }

void put_wait_info(const put_wait *w, resp_buf *out) {
    info_field(out, "puts_waiting", "%zu", w ? master_parked_count(w->q.head) : 0);
    info_field(out, "puts_waited", "%llu", (unsigned long long)(w ? w->waited : 0));
    info_field(out, "puts_waited_nospace", "%llu", (unsigned long long)(w ? w->nospace : 0));
}
