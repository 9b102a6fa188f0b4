/* master/otable.c - the master's object table (otable.h).
 *
 * Records: 2 MiB slabs, aligned to their size, each headed by the record
 * number of its first record, so an object's number is found from its
 * address alone (o & ~(SLAB - 1)); freed records are chained through
 * their size field and reused first. Keys: per size class (8-byte steps)
 * a list of 64 KiB chunks and a free chain through freed slots. Index:
 * slots of (hash bits << 32 | record number + 1), 0 empty. While a
 * resize is under way the old array only loses entries (moved ones
 * become tombstones, so probe runs stay whole) and every insert goes to
 * the new one; each operation moves a few more. Deletes in the current
 * array shift later entries back (no tombstones there). */
#include "master/otable.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/log.h"
#include "core/util.h"

#define SLAB            (2u << 20)
#define SLAB_HEAD       64        /* a cache line: the first record number */
#define KEY_CLASSES     (OTABLE_KEY_ARENA_MAX / 8)
#define KEY_CHUNK       (64u << 10)
#define INDEX_MIN       64
#define MOVE_SLOTS      32        /* old slots moved per operation while resizing */
#define TOMB            0xffffffffu   /* a record number + 1 no record has */
#define SCAN_STEP       32        /* records a scan call looks at */

/* object.table: where the record is */
#define REC_FREE        0
#define REC_LIVE        1         /* allocated, not in the index */
#define REC_LINKED      2         /* and in it; bit 2: the state it is counted under */
#define REC_COUNTED     4

typedef struct slab_head {
    uint64_t first;               /* record number of the slab's first record */
} slab_head;

typedef struct oindex {
    uint64_t *s;
    uint64_t size, mask, used;
} oindex;

typedef struct key_class {
    char **chunks;
    size_t nchunks;
    size_t left;                  /* slots not yet handed out in the last chunk */
    char *next;                   /* the next of them */
    char *free;                   /* chain of freed slots */
} key_class;

struct otable {
    size_t rsize;                 /* bytes of a record: the object and its room */
    uint32_t per;                 /* records per slab */
    char **slabs;
    size_t nslabs;
    uint64_t hw;                  /* records ever handed out (numbers below it) */
    uint64_t free;                /* freed records' chain: number + 1, 0 none */
    key_class keys[KEY_CLASSES];
    size_t key_bytes;             /* arena chunks, and keys on the heap */
    oindex cur, old;              /* old.s while resizing */
    uint64_t moved;               /* the next old slot to move */
    uint64_t floor;               /* otable_reserve */
    size_t count, nstate[2];
};

/* ---- records ---- */

static char *slab_new(void) {
    /* twice the size, trimmed to an aligned slab */
    char *p = mmap(NULL, 2 * (size_t)SLAB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        log_warning("otable: out of memory for a slab");
        abort();
    }
    char *a = (char *)(((uintptr_t)p + SLAB - 1) & ~(uintptr_t)(SLAB - 1));
    if (a > p) munmap(p, (size_t)(a - p));
    munmap(a + SLAB, (size_t)(p + SLAB - a));
    (void)madvise(a, SLAB, MADV_HUGEPAGE);   /* a hint: without THP, plain pages */
    return a;
}

static object *rec_at(const otable *t, uint64_t n) {
    return (object *)(t->slabs[n / t->per] + SLAB_HEAD + (n % t->per) * t->rsize);
}

static uint64_t rec_no(const otable *t, const object *o) {
    const char *base = (const char *)((uintptr_t)o & ~(uintptr_t)(SLAB - 1));
    return ((const slab_head *)base)->first + (uint64_t)((const char *)o - base - SLAB_HEAD) / t->rsize;
}

static object *rec_alloc(otable *t, uint64_t *no) {
    object *o;
    if (t->free) {
        *no = t->free - 1;
        o = rec_at(t, *no);
        t->free = o->size;
    } else {
        if (t->hw >= (uint64_t)TOMB - 1) return NULL;
        if (t->hw == (uint64_t)t->nslabs * t->per) {
            t->slabs = xrealloc(t->slabs, (t->nslabs + 1) * sizeof *t->slabs);
            char *s = slab_new();
            ((slab_head *)s)->first = t->hw;
            t->slabs[t->nslabs++] = s;
        }
        *no = t->hw++;
        o = rec_at(t, *no);
    }
    memset(o, 0, t->rsize);
    return o;
}

static void rec_release(otable *t, object *o) {
    uint64_t no = rec_no(t, o);
    o->table = REC_FREE;
    o->size = t->free;
    t->free = no + 1;
}

/* ---- keys ---- */

static size_t key_slot(size_t keylen) { return (keylen + 1 + 7) & ~(size_t)7; }

static char *key_alloc(otable *t, size_t keylen) {
    size_t bytes = key_slot(keylen);
    if (bytes > OTABLE_KEY_ARENA_MAX) {
        t->key_bytes += bytes;
        return xmalloc(bytes);
    }
    key_class *c = &t->keys[bytes / 8 - 1];
    if (c->free) {
        char *k = c->free;
        memcpy(&c->free, k, sizeof c->free);
        return k;
    }
    if (c->left == 0) {
        c->chunks = xrealloc(c->chunks, (c->nchunks + 1) * sizeof *c->chunks);
        c->next = c->chunks[c->nchunks++] = xmalloc(KEY_CHUNK);
        c->left = KEY_CHUNK / bytes;
        t->key_bytes += KEY_CHUNK;
    }
    char *k = c->next;
    c->next += bytes;
    c->left--;
    return k;
}

static void key_release(otable *t, char *k, size_t keylen) {
    size_t bytes = key_slot(keylen);
    if (bytes > OTABLE_KEY_ARENA_MAX) {
        t->key_bytes -= bytes;
        free(k);
        return;
    }
    key_class *c = &t->keys[bytes / 8 - 1];
    memcpy(k, &c->free, sizeof c->free);
    c->free = k;
}

/* ---- index ---- */

static uint64_t slot_of(uint64_t hash, uint64_t no) { return (uint64_t)(uint32_t)hash << 32 | (no + 1); }
static uint32_t slot_no1(uint64_t s) { return (uint32_t)s; }   /* number + 1; 0 empty, TOMB */
static uint32_t slot_hash(uint64_t s) { return (uint32_t)(s >> 32); }

static void index_init(oindex *x, uint64_t size) {
    x->s = xhuge_alloc(size * sizeof *x->s);   /* zeroed: every slot empty */
    x->size = size;
    x->mask = size - 1;
    x->used = 0;
}

static void index_free(oindex *x) {
    xhuge_free(x->s, x->size * sizeof *x->s);
    memset(x, 0, sizeof *x);
}

static void index_put(oindex *x, uint64_t s) {
    uint64_t i = slot_hash(s) & x->mask;
    while (x->s[i]) i = (i + 1) & x->mask;
    x->s[i] = s;
    x->used++;
}

/* Delete slot i of the current array: later entries of its run that may
 * sit earlier move back into the hole. */
static void index_shift_out(oindex *x, uint64_t i) {
    uint64_t j = i;
    for (;;) {
        j = (j + 1) & x->mask;
        uint64_t s = x->s[j];
        if (!s) break;
        uint64_t home = slot_hash(s) & x->mask;
        /* the entry stays if its home lies cyclically in (i, j] */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays) continue;
        x->s[i] = s;
        i = j;
    }
    x->s[i] = 0;
    x->used--;
}

static int resizing(const otable *t) { return t->old.s != NULL; }

static void move_some(otable *t, uint64_t n) {
    if (!resizing(t)) return;
    uint64_t end = t->moved + n < t->old.size ? t->moved + n : t->old.size;
    for (; t->moved < end; t->moved++) {
        uint64_t s = t->old.s[t->moved];
        if (!s || slot_no1(s) == TOMB) continue;
        index_put(&t->cur, s);
        t->old.s[t->moved] = (uint64_t)TOMB;
        t->old.used--;
    }
    if (t->moved == t->old.size) index_free(&t->old);
}

static uint64_t pow2_at_least(uint64_t n) {
    uint64_t s = INDEX_MIN;
    while (s < n) s <<= 1;
    return s;
}

static void resize_to(otable *t, uint64_t size) {
    if (resizing(t)) move_some(t, t->old.size);   /* finish the last one first */
    if (size == t->cur.size) return;
    t->old = t->cur;
    index_init(&t->cur, size);
    t->moved = 0;
    if (t->old.used == 0) index_free(&t->old);
}

/* Load kept between 3/8 and 3/4; no shrinking below the floor. */
static void maybe_resize(otable *t) {
    if (resizing(t)) {
        if (t->cur.used * 8 >= t->cur.size * 7) move_some(t, t->old.size);   /* never overfill */
        return;
    }
    if (t->cur.used * 4 >= t->cur.size * 3) resize_to(t, t->cur.size * 2);
    else if (t->cur.size > INDEX_MIN && t->cur.size > t->floor && t->cur.used * 8 < t->cur.size)
        resize_to(t, pow2_at_least(t->cur.used * 2 > t->floor ? t->cur.used * 2 : t->floor));
}

/* The slot of key in x (NULL if absent). */
static uint64_t *index_find(const otable *t, const oindex *x, const void *key, size_t keylen, uint64_t hash) {
    if (!x->s) return NULL;
    uint32_t h = (uint32_t)hash;
    for (uint64_t i = h & x->mask;; i = (i + 1) & x->mask) {
        uint64_t s = x->s[i];
        if (!s) return NULL;
        if (slot_hash(s) != h || slot_no1(s) == TOMB) continue;
        const object *o = rec_at(t, slot_no1(s) - 1);
        if (o->keylen == keylen && memcmp(o->key, key, keylen) == 0) return &x->s[i];
    }
}

/* ---- the table ---- */

otable *otable_create(size_t room) {
    otable *t = xcalloc(1, sizeof *t);
    t->rsize = (sizeof(object) + room + 7) & ~(size_t)7;
    t->per = (uint32_t)((SLAB - SLAB_HEAD) / t->rsize);
    index_init(&t->cur, INDEX_MIN);
    return t;
}

void otable_destroy(otable *t, objtable_scan_fn *fn, void *ctx) {
    if (!t) return;
    for (uint64_t n = 0; n < t->hw; n++) {
        object *o = rec_at(t, n);
        if (o->table == REC_FREE) continue;
        if (fn && (o->table & REC_LINKED)) fn(o, ctx);
        if (key_slot(o->keylen) > OTABLE_KEY_ARENA_MAX) free(o->key);
    }
    for (size_t i = 0; i < t->nslabs; i++) munmap(t->slabs[i], SLAB);
    free(t->slabs);
    for (int c = 0; c < KEY_CLASSES; c++) {
        for (size_t i = 0; i < t->keys[c].nchunks; i++) free(t->keys[c].chunks[i]);
        free(t->keys[c].chunks);
    }
    index_free(&t->cur);
    if (resizing(t)) index_free(&t->old);
    free(t);
}

object *otable_find(otable *t, const void *key, size_t keylen, uint64_t hash) {
    move_some(t, MOVE_SLOTS);
    uint64_t *s = index_find(t, &t->cur, key, keylen, hash);
    if (!s) s = index_find(t, &t->old, key, keylen, hash);
    return s ? rec_at(t, slot_no1(*s) - 1) : NULL;
}

object *otable_insert(otable *t, const void *key, size_t keylen, uint64_t hash) {
    if (keylen == 0 || keylen > UINT16_MAX) return NULL;
    move_some(t, MOVE_SLOTS);
    uint64_t no;
    object *o = rec_alloc(t, &no);
    if (!o) return NULL;
    o->key = key_alloc(t, keylen);
    memcpy(o->key, key, keylen);
    o->key[keylen] = '\0';
    o->keylen = (uint32_t)keylen;
    o->state = OBJ_PENDING;
    o->table = REC_LIVE | REC_LINKED;   /* counted PENDING */
    index_put(&t->cur, slot_of(hash, no));
    t->count++;
    t->nstate[OBJ_PENDING]++;
    maybe_resize(t);
    return o;
}

void otable_unlink(otable *t, object *o) {
    if (!(o->table & REC_LINKED)) return;
    uint64_t hash = objtable_hash(o->key, o->keylen);
    move_some(t, MOVE_SLOTS);
    uint64_t *s = index_find(t, &t->cur, o->key, o->keylen, hash);
    if (s) {
        index_shift_out(&t->cur, (uint64_t)(s - t->cur.s));
    } else if ((s = index_find(t, &t->old, o->key, o->keylen, hash)) != NULL) {
        *s = (uint64_t)TOMB;
        t->old.used--;
    } else {
        log_warning("otable: a linked object was not in the index");
    }
    t->count--;
    t->nstate[(o->table & REC_COUNTED) ? OBJ_COMPLETE : OBJ_PENDING]--;
    o->table = REC_LIVE;
    maybe_resize(t);
}

void otable_free(otable *t, object *o) {
    otable_unlink(t, o);
    key_release(t, o->key, o->keylen);
    rec_release(t, o);
}

void otable_set_state(otable *t, object *o, obj_state s) {
    if (s != OBJ_PENDING && s != OBJ_COMPLETE) return;
    if (o->table & REC_LINKED) {
        t->nstate[(o->table & REC_COUNTED) ? OBJ_COMPLETE : OBJ_PENDING]--;
        t->nstate[s]++;
        o->table = (uint8_t)(s == OBJ_COMPLETE ? o->table | REC_COUNTED : o->table & ~REC_COUNTED);
    }
    o->state = (uint8_t)s;
}

size_t otable_size(const otable *t) { return t->count; }

size_t otable_count_state(const otable *t, obj_state s) {
    return s == OBJ_PENDING || s == OBJ_COMPLETE ? t->nstate[s] : 0;
}

size_t otable_slots(const otable *t) { return t->cur.size + t->old.size; }

int otable_resizing(const otable *t) { return resizing(t); }

void otable_reserve(otable *t, size_t n) {
    t->floor = n ? pow2_at_least(n + n / 3 + 1) : 0;   /* n at load 3/4 at most */
    if (n && t->cur.size < t->floor) resize_to(t, t->floor);
}

void otable_prefetch(const otable *t, uint64_t hash) {
    __builtin_prefetch(&t->cur.s[(uint32_t)hash & t->cur.mask]);
    if (resizing(t)) __builtin_prefetch(&t->old.s[(uint32_t)hash & t->old.mask]);
}

void otable_prefetch_record(const otable *t, uint64_t hash) {
    for (int i = 0; i < 2; i++) {
        const oindex *x = i ? &t->old : &t->cur;
        if (!x->s) continue;
        uint64_t s = x->s[(uint32_t)hash & x->mask];
        if (!s || slot_hash(s) != (uint32_t)hash || slot_no1(s) == TOMB) continue;
        const object *o = rec_at(t, slot_no1(s) - 1);
        __builtin_prefetch(o);
        __builtin_prefetch((const char *)o + 64);   /* a record spans two lines */
    }
}

#define FIND_GROUP 16   /* keys whose misses overlap */

void otable_find_many(otable *t, objtable_probe *p, size_t n) {
    for (size_t at = 0; at < n; at += FIND_GROUP) {
        objtable_probe *g = p + at;
        size_t k = n - at < FIND_GROUP ? n - at : FIND_GROUP;
        move_some(t, MOVE_SLOTS * k);   /* before any slot is located */
        for (size_t i = 0; i < k; i++) {
            g[i].hash = objtable_hash(g[i].key, g[i].keylen);
            otable_prefetch(t, g[i].hash);
        }
        for (size_t i = 0; i < k; i++) otable_prefetch_record(t, g[i].hash);
        for (size_t i = 0; i < k; i++) {
            uint64_t *s = index_find(t, &t->cur, g[i].key, g[i].keylen, g[i].hash);
            if (!s) s = index_find(t, &t->old, g[i].key, g[i].keylen, g[i].hash);
            g[i].found = s ? rec_at(t, slot_no1(*s) - 1) : NULL;
        }
    }
}

uint64_t otable_scan(otable *t, uint64_t cursor, objtable_scan_fn *fn, void *ctx) {
    if (t->hw == 0) return 0;
    if (cursor >= t->hw) cursor %= t->hw;
    uint64_t end = cursor + SCAN_STEP < t->hw ? cursor + SCAN_STEP : t->hw;
    for (uint64_t n = cursor; n < end; n++) {
        object *o = rec_at(t, n);
        if (o->table & REC_LINKED) fn(o, ctx);
    }
    return end < t->hw ? end : 0;
}

size_t otable_object_bytes(const otable *t, size_t keylen) {
    size_t k = key_slot(keylen);
    return t->rsize + (k > OTABLE_KEY_ARENA_MAX ? k + 16 : k);   /* a heap block's header */
}

size_t otable_bytes(const otable *t) {
    return t->nslabs * (size_t)SLAB + t->key_bytes + (t->cur.size + t->old.size) * sizeof(uint64_t);
}
