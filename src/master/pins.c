/* master/pins.c - pins on prefix hits: see pins.h.
 *
 * Three side tables (core/objtable, keyed by bytes): pinned keys, whose
 * entry's `pins` counts the pins holding it; pins by id (8 bytes), whose
 * entry's owner is the pin; owners by id (8 bytes), whose entry's size is
 * the keys they hold pinned. Expired pins go in a walk that runs only once
 * the earliest expiry has passed. */
#include <stdlib.h>
#include <string.h>

#include "core/objtable.h"
#include "core/util.h"
#include "master/meta_internal.h"
#include "master/pins.h"
#include "proto/pins.h"

typedef struct pin {
    uint64_t id, owner, until;
    size_t n, cap;
    object **keys;                /* entries of the pinned-keys table (one per key pinned) */
    int due;                      /* taken by the expiry walk */
} pin;

struct mm_pins {
    objtable *keys, *pins, *owners;
    uint64_t nkeys;               /* keys pinned over all pins (a key twice counts twice) */
    uint64_t next_due;            /* no pin expires before (UINT64_MAX: none) */
    uint64_t refused;
};

static void free_entry(object *o, void *ctx) {
    (void)ctx;
    object_free(o);
}

static void free_pin_entry(object *o, void *ctx) {
    (void)ctx;
    pin *x = o->owner;
    if (x) free(x->keys);
    free(x);
    object_free(o);
}

mm_pins *mm_pins_create(void) {
    mm_pins *p = xcalloc(1, sizeof *p);
    p->keys = objtable_create(free_entry, NULL);
    p->pins = objtable_create(free_pin_entry, NULL);
    p->owners = objtable_create(free_entry, NULL);
    p->next_due = UINT64_MAX;
    return p;
}

mm_pins *mm_pins_of(master_meta *m) { return m->pins; }

void mm_pins_destroy(mm_pins *p) {
    if (!p) return;
    objtable_destroy(p->pins);
    objtable_destroy(p->keys);
    objtable_destroy(p->owners);
    free(p);
}

/* The owners table's entry of owner (created with 0 keys if asked). */
static object *owner_entry(mm_pins *p, uint64_t owner, int create) {
    object *o = objtable_find(p->owners, &owner, sizeof owner);
    int existed;
    if (!o && create) o = objtable_insert(p->owners, &owner, sizeof owner, &existed);
    return o;
}

static void owner_sub(mm_pins *p, uint64_t owner, size_t n) {
    object *o = owner_entry(p, owner, 0);
    if (!o) return;
    o->size -= n < o->size ? n : o->size;
    if (o->size == 0) objtable_delete(p->owners, &owner, sizeof owner);
}

/* Drop the pin x (found under its id): its keys unpinned, its owner's count down. */
static size_t pin_drop(mm_pins *p, pin *x) {
    size_t n = x->n;
    for (size_t i = 0; i < n; i++) {
        object *k = x->keys[i];
        if (--k->pins == 0) objtable_delete(p->keys, k->key, k->keylen);
    }
    p->nkeys -= n;
    owner_sub(p, x->owner, n);
    uint64_t id = x->id;
    objtable_delete(p->pins, &id, sizeof id);   /* frees x */
    return n;
}

static void pin_key(mm_pins *p, pin *x, const void *key, size_t keylen) {
    int existed;
    object *k = objtable_find(p->keys, key, keylen);
    if (!k) k = objtable_insert(p->keys, key, keylen, &existed);
    k->pins++;
    if (x->until > k->expire_ms) k->expire_ms = x->until;
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 16;
        x->keys = xrealloc(x->keys, x->cap * sizeof *x->keys);
    }
    x->keys[x->n++] = k;
}

proto_status mm_pins_add(mm_pins *p, uint64_t id, uint64_t owner, const mm_item *keys, size_t n,
                         uint64_t until_ms, uint64_t now_ms, char *err, size_t errlen) {
    if (id == 0) return mm_fail(err, errlen, PROTO_ERR, "pin id must be nonzero");
    mm_pins_expire(p, now_ms);
    object *e = objtable_find(p->pins, &id, sizeof id);
    pin *x = e ? e->owner : NULL;
    if (x) owner = x->owner;   /* a pooled client may add on another connection */
    object *oe = owner_entry(p, owner, 0);
    uint64_t held = oe ? oe->size : 0;
    if (held + n > PROTO_PIN_MAX_PER_CONN)
        return mm_fail(err, errlen, PROTO_ERR, "pin limit: this connection holds %llu keys pinned, at most %u",
                       (unsigned long long)held, PROTO_PIN_MAX_PER_CONN);
    if (p->nkeys + n > PROTO_PIN_MAX_KEYS)
        return mm_fail(err, errlen, PROTO_ERR, "pin limit: %llu keys pinned in all, at most %u",
                       (unsigned long long)p->nkeys, PROTO_PIN_MAX_KEYS);
    if (n == 0) return PROTO_OK;   /* nothing to hold: no pin made */
    if (!x) {
        int existed;
        e = objtable_insert(p->pins, &id, sizeof id, &existed);
        x = xcalloc(1, sizeof *x);
        *x = (pin){.id = id, .owner = owner};
        e->owner = x;
    }
    if (until_ms > x->until) {
        x->until = until_ms;
        for (size_t i = 0; i < x->n; i++)
            if (x->keys[i]->expire_ms < until_ms) x->keys[i]->expire_ms = until_ms;
    }
    if (x->until < p->next_due) p->next_due = x->until;
    for (size_t i = 0; i < n; i++) pin_key(p, x, keys[i].key, keys[i].keylen);
    p->nkeys += n;
    owner_entry(p, owner, 1)->size += n;
    return PROTO_OK;
}

size_t mm_pins_release(mm_pins *p, uint64_t id, uint64_t now_ms) {
    mm_pins_expire(p, now_ms);
    object *e = objtable_find(p->pins, &id, sizeof id);
    return e ? pin_drop(p, e->owner) : 0;
}

uint64_t mm_pins_left(mm_pins *p, const void *key, size_t keylen, uint64_t now_ms) {
    if (p->nkeys == 0) return 0;   /* the common case: not even a hash */
    mm_pins_expire(p, now_ms);
    object *k = objtable_find(p->keys, key, keylen);
    if (!k) return 0;
    /* expire_ms: the latest time of any pin that held it (an upper bound
     * once that one is released early) */
    return k->expire_ms > now_ms ? k->expire_ms - now_ms : 1;
}

typedef struct due_walk {
    uint64_t now_ms, next_due;
    pin **v;
    size_t n, cap;
} due_walk;

static void take_due(object *o, void *ctx) {
    due_walk *w = ctx;
    pin *x = o->owner;
    if (x->until > w->now_ms) {
        if (x->until < w->next_due) w->next_due = x->until;
        return;
    }
    if (x->due) return;   /* a scan may give an entry twice across a rehash */
    x->due = 1;
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 16;
        w->v = xrealloc(w->v, w->cap * sizeof *w->v);
    }
    w->v[w->n++] = x;
}

void mm_pins_expire(mm_pins *p, uint64_t now_ms) {
    if (now_ms < p->next_due) return;
    due_walk w = {now_ms, UINT64_MAX, NULL, 0, 0};
    uint64_t cursor = 0;
    do cursor = objtable_scan(p->pins, cursor, take_due, &w);
    while (cursor);
    for (size_t i = 0; i < w.n; i++) pin_drop(p, w.v[i]);
    free(w.v);
    p->next_due = w.next_due;
}

void mm_pins_stats(const mm_pins *p, mm_pin_stats *st) {
    st->pins = objtable_size(p->pins);
    st->keys = p->nkeys;
    st->refused = p->refused;
}

void mm_pins_refused(mm_pins *p) { p->refused++; }
