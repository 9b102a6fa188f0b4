/* core/pinset.c - pins on prefix hits: see pinset.h.
 *
 * Three side tables (core/objtable, keyed by bytes): pinned keys, whose
 * entry's `pins` counts the pins holding it; pins by id (8 bytes), whose
 * entry's owner is the pin; owners by id (8 bytes), whose entry's size is
 * the keys they hold pinned. Expired pins go in a walk that runs only once
 * the earliest expiry has passed. A pinned key's entry keeps in its
 * created_ms the stamp of the last add to a pin holding it, so an add
 * tells the keys its pin holds already without a set per pin. */
#include "core/pinset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/objtable.h"
#include "core/util.h"

typedef struct pin {
    uint64_t id, owner, until;
    size_t n, cap;
    object **keys;                /* entries of the pinned-keys table (one per key pinned) */
    int due;                      /* taken by the expiry walk */
} pin;

struct pinset {
    objtable *keys, *pins, *owners;
    uint64_t nkeys;               /* keys pinned over all pins (a key in two pins counts twice) */
    uint64_t next_due;            /* no pin expires before (UINT64_MAX: none) */
    uint64_t refused;
    uint64_t stamp;               /* the last add's mark (key entries' created_ms) */
    uint32_t max_per_owner, max_keys;
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

pinset *pinset_create(uint32_t max_per_owner, uint32_t max_keys) {
    pinset *p = xcalloc(1, sizeof *p);
    p->keys = objtable_create(free_entry, NULL);
    p->pins = objtable_create(free_pin_entry, NULL);
    p->owners = objtable_create(free_entry, NULL);
    p->next_due = UINT64_MAX;
    p->max_per_owner = max_per_owner;
    p->max_keys = max_keys;
    return p;
}

void pinset_destroy(pinset *p) {
    if (!p) return;
    objtable_destroy(p->pins);
    objtable_destroy(p->keys);
    objtable_destroy(p->owners);
    free(p);
}

/* The owners table's entry of owner (created with 0 keys if asked). */
static object *owner_entry(pinset *p, uint64_t owner, int create) {
    object *o = objtable_find(p->owners, &owner, sizeof owner);
    int existed;
    if (!o && create) o = objtable_insert(p->owners, &owner, sizeof owner, &existed);
    return o;
}

static void owner_sub(pinset *p, uint64_t owner, size_t n) {
    object *o = owner_entry(p, owner, 0);
    if (!o) return;
    o->size -= n < o->size ? n : o->size;
    if (o->size == 0) objtable_delete(p->owners, &owner, sizeof owner);
}

/* Drop the pin x (found under its id): its keys unpinned, its owner's count down. */
static size_t pin_drop(pinset *p, pin *x) {
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

/* Pin key under x unless x held it before this add (marked): 1 if added.
 * A key given twice in one add is pinned twice, as a lookup counted it. */
static int hold_key(pinset *p, pin *x, const void *key, size_t keylen) {
    int existed;
    object *k = objtable_find(p->keys, key, keylen);
    if (!k) k = objtable_insert(p->keys, key, keylen, &existed);
    if (k->created_ms == p->stamp) return 0;
    k->pins++;
    if (x->until > k->expire_ms) k->expire_ms = x->until;
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 16;
        x->keys = xrealloc(x->keys, x->cap * sizeof *x->keys);
    }
    x->keys[x->n++] = k;
    return 1;
}

/* Of keys[0..n), how many x does not hold yet (at most; a key given twice
 * counts twice). Marks x's keys with this add's stamp. */
static size_t count_new(pinset *p, pin *x, const pin_key *keys, size_t n) {
    if (!x) return n;
    for (size_t i = 0; i < x->n; i++) x->keys[i]->created_ms = p->stamp;
    size_t fresh = 0;
    for (size_t i = 0; i < n; i++) {
        object *k = objtable_find(p->keys, keys[i].key, keys[i].keylen);
        fresh += !k || k->created_ms != p->stamp;
    }
    return fresh;
}

int pinset_add(pinset *p, uint64_t id, uint64_t owner, const pin_key *keys, size_t n, uint64_t until_ms,
               uint64_t now_ms, char *err, size_t errlen) {
    if (id == 0) {
        snprintf(err, errlen, "pin id must be nonzero");
        return -1;
    }
    pinset_expire(p, now_ms);
    object *e = objtable_find(p->pins, &id, sizeof id);
    pin *x = e ? e->owner : NULL;
    if (x) owner = x->owner;   /* a pooled client may add on another connection */
    p->stamp++;
    size_t fresh = count_new(p, x, keys, n);
    object *oe = owner_entry(p, owner, 0);
    uint64_t held = oe ? oe->size : 0;
    if (held + fresh > p->max_per_owner) {
        snprintf(err, errlen, "pin limit: this connection holds %llu keys pinned, at most %u",
                 (unsigned long long)held, p->max_per_owner);
        return -1;
    }
    if (p->nkeys + fresh > p->max_keys) {
        snprintf(err, errlen, "pin limit: %llu keys pinned in all, at most %u", (unsigned long long)p->nkeys,
                 p->max_keys);
        return -1;
    }
    if (n == 0) return 0;   /* nothing to hold: no pin made */
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
    size_t added = 0;
    for (size_t i = 0; i < n; i++) added += (size_t)hold_key(p, x, keys[i].key, keys[i].keylen);
    p->nkeys += added;
    if (added) owner_entry(p, owner, 1)->size += added;
    return 0;
}

size_t pinset_release(pinset *p, uint64_t id, uint64_t now_ms) {
    pinset_expire(p, now_ms);
    object *e = objtable_find(p->pins, &id, sizeof id);
    return e ? pin_drop(p, e->owner) : 0;
}

uint64_t pinset_left(pinset *p, const void *key, size_t keylen, uint64_t now_ms) {
    if (p->nkeys == 0) return 0;   /* the common case: not even a hash */
    pinset_expire(p, now_ms);
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

void pinset_expire(pinset *p, uint64_t now_ms) {
    if (now_ms < p->next_due) return;
    due_walk w = {now_ms, UINT64_MAX, NULL, 0, 0};
    uint64_t cursor = 0;
    do cursor = objtable_scan(p->pins, cursor, take_due, &w);
    while (cursor);
    for (size_t i = 0; i < w.n; i++) pin_drop(p, w.v[i]);
    free(w.v);
    p->next_due = w.next_due;
}

void pinset_get_stats(const pinset *p, pinset_stats *st) {
    st->pins = objtable_size(p->pins);
    st->keys = p->nkeys;
    st->refused = p->refused;
}

void pinset_refused(pinset *p) { p->refused++; }
