/* core/objtable.c - the object table: chained hashing, incremental rehash.
 *
 * Two bucket arrays as in Redis's dict: while t[1] exists, every insert,
 * find and delete first moves a couple of buckets from t[0] to t[1], so a
 * resize is spread over many operations. Grow at load 1, shrink below
 * load 1/8. Keys are hashed with SipHash-2-4 under a random per-process
 * key so peers cannot choose colliding keys.
 *
 * Each object is embedded at the start of an entry that also holds the
 * chain link, the hash, the state the per-state counters saw and the key, so
 * object_free(o) frees the whole entry and the counters stay exact even
 * if an owner writes o->state by hand (it then just goes stale). */
#include "core/objtable.h"
#include "core/log.h"
#include "core/siphash.h"
#include "core/util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HT_MIN_SIZE 16
#define REHASH_BUCKETS 2        /* buckets moved per operation */
#define REHASH_EMPTY_VISITS 20  /* empty buckets skipped per operation */

/* 88 bytes with the object: a million of them are the table's memory.
 * The hash's low 32 bits pick the bucket (no table has 2^32 buckets)
 * and are compared before the key. */
typedef struct entry {
    object obj;             /* first, so &entry->obj == entry */
    struct entry *next;
    uint32_t hash;
    uint16_t room;          /* bytes for the owner after the key (objtable_insert_room) */
    uint8_t counted;        /* the obj_state nstate[] has this entry under */
    uint8_t linked;
} entry;

#define ROOM_ALIGN 8        /* what an owner's data needs (8-byte fields, pointers) */
/* The room after the key is aligned from the entry's end. */
_Static_assert(sizeof(entry) % ROOM_ALIGN == 0, "entry size keeps the room aligned");
_Static_assert(OBJTABLE_ROOM_MAX <= UINT16_MAX, "room fits the entry's field");

static size_t room_at(size_t keylen) { return (keylen + 1 + ROOM_ALIGN - 1) & ~(size_t)(ROOM_ALIGN - 1); }

typedef struct ht {
    entry **b;
    uint64_t size, mask, used;
} ht;

struct objtable {
    ht t[2];
    int64_t rehashidx;      /* next t[0] bucket to move; -1 when not rehashing */
    int paused;             /* scans in progress: no bucket moves meanwhile */
    uint64_t floor;         /* objtable_reserve: no shrinking below this many buckets */
    size_t nstate[2];
    objtable_free_fn *free_fn;
    void *ctx;
};

/* ---- hashing ---- */

static uint8_t hash_key[SIPHASH_KEY_LEN];
static pthread_once_t hash_key_once = PTHREAD_ONCE_INIT;

static void hash_key_init(void) {
    if (random_bytes(hash_key, sizeof hash_key) == 0) return;
    /* No CSPRNG: still vary per process, but say so. */
    log_warning("objtable: getrandom failed, hash key is predictable");
    uint64_t seed[2] = {mono_us() ^ (uint64_t)getpid(), wall_ms()};
    memcpy(hash_key, seed, sizeof hash_key);
}

static uint64_t hash_of(const void *key, size_t keylen) {
    pthread_once(&hash_key_once, hash_key_init);
    return siphash24(key, keylen, hash_key);
}

/* ---- bucket arrays ---- */

static int rehashing(const objtable *t) { return t->rehashidx >= 0; }

/* Large arrays on huge pages (xhuge_alloc): a rebuild fills a fresh one
 * in random order, a 4 KiB page fault per first touch otherwise. */
static void ht_init(ht *h, uint64_t size) {
    h->b = xhuge_alloc(size * sizeof *h->b);
    h->size = size;
    h->mask = size - 1;
    h->used = 0;
}

static void ht_free(ht *h) { xhuge_free(h->b, h->size * sizeof *h->b); }

static void ht_link(ht *h, entry *e) {
    entry **head = &h->b[e->hash & h->mask];
    e->next = *head;
    *head = e;
    h->used++;
}

/* How many buckets ahead a rehash starts its cache misses: the entries of
 * a big table are misses one at a time otherwise (a master taking a
 * stream of new keys spent a seventh of its time moving them). First the
 * bucket's first entry, then, half way, the new table's bucket it goes to
 * (its hash is in by then): moving it links it there, a miss of its own;
 * and the chain's second entry, if any. */
#define REHASH_AHEAD 8

/* Move up to n non-empty buckets from t[0] to t[1]. */
static void rehash_step(objtable *t, int n) {
    int empty = REHASH_EMPTY_VISITS;
    if (!rehashing(t) || t->paused) return;
    while (n > 0 && t->t[0].used > 0) {
        uint64_t ahead = (uint64_t)t->rehashidx + REHASH_AHEAD, near = ahead - REHASH_AHEAD / 2;
        if (ahead < t->t[0].size && t->t[0].b[ahead]) __builtin_prefetch(&t->t[0].b[ahead]->next);   /* and hash */
        const entry *first = near < t->t[0].size ? t->t[0].b[near] : NULL;
        if (first) {
            __builtin_prefetch(&t->t[1].b[first->hash & t->t[1].mask], 1);
            if (first->next) __builtin_prefetch(&first->next->next);   /* a chain's second entry */
        }
        entry *e = t->t[0].b[t->rehashidx];
        if (!e) {
            t->rehashidx++;
            if (--empty == 0) return;
            continue;
        }
        while (e) {
            entry *next = e->next;
            ht_link(&t->t[1], e);
            t->t[0].used--;
            e = next;
        }
        t->t[0].b[t->rehashidx++] = NULL;
        n--;
    }
    if (t->t[0].used == 0) {
        ht_free(&t->t[0]);
        t->t[0] = t->t[1];
        memset(&t->t[1], 0, sizeof t->t[1]);
        t->rehashidx = -1;
    }
}

static uint64_t pow2_at_least(uint64_t n) {
    uint64_t s = HT_MIN_SIZE;
    while (s < n) s <<= 1;
    return s;
}

/* Start a rehash when the load leaves [1/8, 1]. */
static void maybe_resize(objtable *t) {
    const ht *h = &t->t[0];
    if (rehashing(t)) return;
    uint64_t want;
    if (h->used >= h->size) want = pow2_at_least(h->used * 2);
    else if (h->size > HT_MIN_SIZE && h->size > t->floor && h->used * 8 < h->size)
        want = pow2_at_least(h->used * 2 > t->floor ? h->used * 2 : t->floor);
    else return;
    if (want == h->size) return;
    ht_init(&t->t[1], want);
    t->rehashidx = 0;
}

/* The link pointing at the key's entry, or NULL; *where is its table. */
static entry **lookup(objtable *t, const void *key, size_t keylen, uint64_t hash, ht **where) {
    for (int i = 0; i <= rehashing(t); i++) {
        ht *h = &t->t[i];
        for (entry **link = &h->b[hash & h->mask]; *link; link = &(*link)->next) {
            entry *e = *link;
            if (e->hash == (uint32_t)hash && e->obj.keylen == keylen && memcmp(e->obj.key, key, keylen) == 0) {
                if (where) *where = h;
                return link;
            }
        }
    }
    return NULL;
}

/* ---- public API ---- */

objtable *objtable_create(objtable_free_fn *free_fn, void *ctx) {
    objtable *t = xcalloc(1, sizeof *t);
    ht_init(&t->t[0], HT_MIN_SIZE);
    t->rehashidx = -1;
    t->free_fn = free_fn;
    t->ctx = ctx;
    return t;
}

static void hand_over(objtable *t, object *o) {
    if (t->free_fn) t->free_fn(o, t->ctx);
    else object_free(o);
}

void objtable_destroy(objtable *t) {
    if (!t) return;
    for (int i = 0; i < 2; i++) {
        ht *h = &t->t[i];
        for (uint64_t j = 0; j < h->size; j++) {
            for (entry *e = h->b[j], *next; e; e = next) {
                next = e->next;
                e->linked = 0;
                hand_over(t, &e->obj);
            }
        }
        ht_free(h);
    }
    free(t);
}

object *objtable_find(objtable *t, const void *key, size_t keylen) {
    return objtable_find_hashed(t, key, keylen, hash_of(key, keylen));
}

object *objtable_find_hashed(objtable *t, const void *key, size_t keylen, uint64_t hash) {
    rehash_step(t, REHASH_BUCKETS);
    entry **link = lookup(t, key, keylen, hash, NULL);
    return link ? &(*link)->obj : NULL;
}

object *objtable_insert(objtable *t, const void *key, size_t keylen, int *existed) {
    return objtable_insert_room(t, key, keylen, 0, existed);
}

uint64_t objtable_hash(const void *key, size_t keylen) { return hash_of(key, keylen); }

void objtable_prefetch(const objtable *t, uint64_t hash) {
    for (int i = 0; i <= rehashing(t); i++) __builtin_prefetch(&t->t[i].b[hash & t->t[i].mask]);
}

/* The first entry of the key's chains (their buckets are cached by now):
 * the lines with its hash and link, its key, and its start. */
void objtable_prefetch_chain(const objtable *t, uint64_t hash) {
    for (int i = 0; i <= rehashing(t); i++) {
        const entry *e = t->t[i].b[hash & t->t[i].mask];
        if (!e) continue;
        __builtin_prefetch(e);
        __builtin_prefetch(&e->hash);
        __builtin_prefetch(e + 1);
    }
}

void objtable_prefetch_chain_next(const objtable *t, uint64_t hash) {
    for (int i = 0; i <= rehashing(t); i++) {
        const entry *e = t->t[i].b[hash & t->t[i].mask];
        if (e && e->next) __builtin_prefetch(&e->next->next);   /* and hash */
    }
}

#define FIND_GROUP 16   /* keys whose misses overlap */

void objtable_find_many(objtable *t, objtable_probe *p, size_t n) {
    for (size_t at = 0; at < n; at += FIND_GROUP) {
        objtable_probe *g = p + at;
        size_t k = n - at < FIND_GROUP ? n - at : FIND_GROUP;
        /* the buckets k finds would move, before any is located */
        for (size_t i = 0; i < k; i++) rehash_step(t, REHASH_BUCKETS);
        for (size_t i = 0; i < k; i++) {
            g[i].hash = hash_of(g[i].key, g[i].keylen);
            objtable_prefetch(t, g[i].hash);
        }
        for (size_t i = 0; i < k; i++) objtable_prefetch_chain(t, g[i].hash);
        for (size_t i = 0; i < k; i++) {
            entry **link = lookup(t, g[i].key, g[i].keylen, g[i].hash, NULL);
            g[i].found = link ? &(*link)->obj : NULL;
        }
    }
}

object *objtable_insert_room(objtable *t, const void *key, size_t keylen, size_t room, int *existed) {
    return objtable_insert_hashed(t, key, keylen, hash_of(key, keylen), room, existed);
}

object *objtable_insert_hashed(objtable *t, const void *key, size_t keylen, uint64_t hash, size_t room,
                               int *existed) {
    if (existed) *existed = 0;
    if (lookup(t, key, keylen, hash, NULL)) {
        if (existed) *existed = 1;
        return NULL;
    }
    return objtable_insert_absent(t, key, keylen, hash, room);
}

/* the entry (max-aligned), the key and its NUL, then the room */
size_t objtable_entry_bytes(size_t keylen, size_t room) {
    return sizeof(entry) + (room ? room_at(keylen) + room : keylen + 1);
}

object *objtable_insert_absent(objtable *t, const void *key, size_t keylen, uint64_t hash, size_t room) {
    rehash_step(t, REHASH_BUCKETS);
    if (keylen > UINT32_MAX / 2 || room > OBJTABLE_ROOM_MAX) return NULL;

    entry *e = xcalloc(1, objtable_entry_bytes(keylen, room));
    e->room = (uint16_t)room;
    e->obj.key = (char *)(e + 1);
    memcpy(e->obj.key, key, keylen);
    e->obj.key[keylen] = '\0';
    e->obj.keylen = keylen;
    e->obj.state = OBJ_PENDING;
    e->hash = (uint32_t)hash;
    e->counted = OBJ_PENDING;
    e->linked = 1;
    t->nstate[OBJ_PENDING]++;
    ht_link(&t->t[rehashing(t) ? 1 : 0], e);
    maybe_resize(t);
    return &e->obj;
}

void *objtable_room(object *o) {
    entry *e = (entry *)o;
    return e->room ? (char *)(e + 1) + room_at(o->keylen) : NULL;
}

void objtable_reserve(objtable *t, size_t n) {
    t->floor = n ? pow2_at_least(n) : 0;
    if (n == 0 || rehashing(t) || t->t[0].size >= t->floor) return;
    ht_init(&t->t[1], t->floor);
    t->rehashidx = 0;
    if (t->t[0].used == 0) rehash_step(t, 1);   /* nothing to move: switch now */
}

object *objtable_unlink(objtable *t, const void *key, size_t keylen) {
    uint64_t hash = hash_of(key, keylen);
    rehash_step(t, REHASH_BUCKETS);
    ht *h;
    entry **link = lookup(t, key, keylen, hash, &h);
    if (!link) return NULL;
    entry *e = *link;
    *link = e->next;
    e->next = NULL;
    h->used--;
    t->nstate[e->counted]--;
    e->linked = 0;
    maybe_resize(t);
    return &e->obj;
}

int objtable_delete(objtable *t, const void *key, size_t keylen) {
    object *o = objtable_unlink(t, key, keylen);
    if (!o) return 0;
    hand_over(t, o);
    return 1;
}

void objtable_set_state(objtable *t, object *o, obj_state s) {
    entry *e = (entry *)o;
    if (s != OBJ_PENDING && s != OBJ_COMPLETE) return;
    if (e->linked) {
        t->nstate[e->counted]--;
        t->nstate[s]++;
        e->counted = s;
    }
    o->state = s;
}

size_t objtable_size(const objtable *t) {
    return t->t[0].used + t->t[1].used;
}

size_t objtable_buckets(const objtable *t) {
    return t->t[0].size + t->t[1].size;
}

int objtable_rehashing(const objtable *t) {
    return rehashing(t);
}

size_t objtable_count_state(const objtable *t, obj_state s) {
    return s == OBJ_PENDING || s == OBJ_COMPLETE ? t->nstate[s] : 0;
}

/* ---- SCAN ---- */

static uint64_t rev64(uint64_t v) {
    v = ((v >> 1) & 0x5555555555555555ULL) | ((v & 0x5555555555555555ULL) << 1);
    v = ((v >> 2) & 0x3333333333333333ULL) | ((v & 0x3333333333333333ULL) << 2);
    v = ((v >> 4) & 0x0f0f0f0f0f0f0f0fULL) | ((v & 0x0f0f0f0f0f0f0f0fULL) << 4);
    return __builtin_bswap64(v);
}

/* Increments the cursor's masked bits in reverse-binary order. */
static uint64_t next_cursor(uint64_t v, uint64_t mask) {
    v |= ~mask;
    return rev64(rev64(v) + 1);
}

/* The callback may delete the object it is handed, hence the saved next. */
static void scan_bucket(const ht *h, uint64_t idx, objtable_scan_fn *fn, void *ctx) {
    for (entry *e = h->b[idx & h->mask], *next; e; e = next) {
        next = e->next;
        fn(&e->obj, ctx);
    }
}

/* Reverse-binary cursor (Redis's dictScan): incrementing the high bits
 * first means a bucket's expansions in a larger table, and its merge in
 * a smaller one, are visited together, so resizes between calls neither
 * skip buckets nor restart the scan. While rehashing, one cursor covers
 * its bucket in the small table and every bucket it splits into in the
 * large one. */
uint64_t objtable_scan(objtable *t, uint64_t v, objtable_scan_fn *fn, void *ctx) {
    if (objtable_size(t) == 0) return 0;
    t->paused++;
    if (!rehashing(t)) {
        scan_bucket(&t->t[0], v, fn, ctx);
        v = next_cursor(v, t->t[0].mask);
    } else {
        const ht *small = &t->t[0], *large = &t->t[1];
        if (small->size > large->size) {
            const ht *tmp = small;
            small = large;
            large = tmp;
        }
        uint64_t m0 = small->mask, m1 = large->mask;
        scan_bucket(small, v, fn, ctx);
        /* The large table's buckets under this cursor go in the cursor's
         * own reverse-binary order, so the carry out of the extra bits is
         * the step to the next small bucket. An in-order step here skipped
         * buckets when the large table was the one shrinking away (the
         * flaw Redis fixed in dictScan, its issue 4906). */
        do {
            scan_bucket(large, v, fn, ctx);
            v = next_cursor(v, m1);
        } while (v & (m0 ^ m1));
    }
    t->paused--;
    return v;
}

/* ---- replicas ---- */

#define REP_NODE_MASK  ((1ULL << OBJ_REP_NODE_BITS) - 1)
#define REP_UNITS_MAX  ((1ULL << (64 - OBJ_REP_NODE_BITS)) - 1)   /* all ones: UINT64_MAX */

/* r as a word into *w: 1, or 0 if it does not fit one. */
static int rep_word(const object *o, const obj_replica *r, uint64_t *w) {
    if (r->nextents != 1) return 0;
    const obj_extent *e = &r->extents[0];
    if (e->length != o->size || e->node > REP_NODE_MASK) return 0;
    uint64_t units;
    if (e->offset == UINT64_MAX) units = REP_UNITS_MAX;
    else if (e->offset % OBJ_REP_UNIT || e->offset / OBJ_REP_UNIT >= REP_UNITS_MAX) return 0;
    else units = e->offset / OBJ_REP_UNIT;
    *w = units << OBJ_REP_NODE_BITS | e->node;
    return 1;
}

static obj_extent word_extent(const object *o, uint64_t w) {
    uint64_t units = w >> OBJ_REP_NODE_BITS;
    return (obj_extent){(uint32_t)(w & REP_NODE_MASK),
                        units == REP_UNITS_MAX ? UINT64_MAX : units * OBJ_REP_UNIT, o->size};
}

const obj_replica *object_reps(const object *o, obj_reps *v) {
    if (o->nreplicas == 0) return NULL;
    if (o->rep_list) return o->rep.list;
    for (uint32_t i = 0; i < o->nreplicas; i++) {
        v->e[i] = word_extent(o, o->rep.word[i]);
        v->r[i] = (obj_replica){1, &v->e[i]};
    }
    return v->r;
}

obj_extent object_replica_first(const object *o, uint32_t i) {
    if (o->rep_list) return o->rep.list[i].extents[0];
    return word_extent(o, o->rep.word[i]);
}

static size_t replicas_bytes(const obj_replica *reps, uint32_t n) {
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += reps[i].nextents;
    return (size_t)n * sizeof(obj_replica) + total * sizeof(obj_extent);
}

/* A list: the replica array and every replica's extents in one block
 * (one allocation instead of 1 + replicas): extents follow the array. */
static obj_replica *rep_list_copy(const obj_replica *reps, uint32_t n) {
    obj_replica *copy = xcalloc(1, replicas_bytes(reps, n));
    obj_extent *ext = (obj_extent *)(copy + n);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t ne = reps[i].nextents;
        copy[i].nextents = ne;
        copy[i].extents = ne ? ext : NULL;
        if (ne) memcpy(ext, reps[i].extents, (size_t)ne * sizeof(obj_extent));
        ext += ne;
    }
    return copy;
}

int object_set_replicas(object *o, const obj_replica *reps, uint32_t n) {
    if (n > UINT8_MAX || (n > 0 && !reps)) return -1;
    for (uint32_t i = 0; i < n; i++)
        if (reps[i].nextents > 0 && !reps[i].extents) return -1;
    uint64_t w[OBJ_REP_WORDS] = {0};
    int words = n <= OBJ_REP_WORDS;
    for (uint32_t i = 0; words && i < n; i++) words = rep_word(o, &reps[i], &w[i]);
    /* Copy first, free after: reps may point into o's own replicas. */
    obj_replica *list = n > 0 && !words ? rep_list_copy(reps, n) : NULL;
    object_free_replicas(o);
    if (list) {
        o->rep.list = list;
        o->rep_list = 1;
    } else {
        memcpy(o->rep.word, w, sizeof w);
    }
    o->nreplicas = (uint8_t)n;
    return 0;
}

void object_free_replicas(object *o) {
    if (o->rep_list) free(o->rep.list);
    o->rep_list = 0;
    memset(&o->rep, 0, sizeof o->rep);
    o->nreplicas = 0;
}

void object_free(object *o) {
    if (!o) return;
    object_free_replicas(o);
    free(o);   /* the key lives in the same block */
}
