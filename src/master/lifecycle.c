/* master/lifecycle.c - an object's life: put_start, put_end or revoke,
 * get with a read lease, remove.
 *
 * The master never touches bytes; it guards the space. A read cap (a get's
 * lease, a copy task's source) may be used until it expires or its reader
 * gives it back, so an extent taken out of use is held in quarantine
 * (quarantine.c) until the object's latest live lease (mm_hold_until),
 * and given back to the node's allocator at once if there is none. Write caps pin nothing:
 * a node refuses an older write grant on a range a newer one has written
 * (backend/claims.h), so space may go to the next put while the last
 * one's caps are unexpired. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "master/meta_internal.h"
#include "proto/verbs.h"

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }


mm_obj *mm_obj_new(master_meta *m, object *o, uint32_t want, uint64_t hold_until) {
    mm_obj *mo = memset(otable_room(o), 0, sizeof *mo);
    mo->stamp = ++m->obj_stamps;
    mo->want = want;
    if (hold_until) mm_more_get(o)->hold_until = hold_until;
    return mo;
}

void mm_obj_free(object *o) {
    mm_more *x = mm_more_of(o);
    if (x) proto_slices_free(&x->slices);
    free(x);
    o->owner = NULL;
}

mm_more *mm_more_get(object *o) {
    if (!o->owner) o->owner = xcalloc(1, sizeof(mm_more));
    return o->owner;
}

void mm_more_trim(object *o, uint64_t now_ms) {
    mm_more *x = mm_more_of(o);
    if (!x || x->pending || x->job || x->slices.count || x->hold_until > now_ms) return;
    for (uint32_t i = 0; i < x->nlease; i++)
        if (x->lease[i] > now_ms) return;
    free(x);
    o->owner = NULL;
}

void mm_obj_set_job(object *o, struct mm_job *j) {
    if (j) mm_more_get(o)->job = j;
    else if (mm_more_of(o)) mm_more_of(o)->job = NULL;
}

const proto_slices *mm_obj_slices(const object *o) {
    static const proto_slices none = {0, 0, NULL};
    const mm_more *x = mm_more_of(o);
    return x ? &x->slices : &none;
}

/* malloc's header and rounding per block (glibc: 8 bytes, 16-aligned) */
#define MALLOC_OVERHEAD 16

size_t mm_obj_bytes(size_t keylen, uint32_t nreplicas, size_t nextents) {
    size_t list = nreplicas <= OBJ_REP_WORDS && nextents == nreplicas ? 0   /* words, in the object */
        : (size_t)nreplicas * sizeof(obj_replica) + nextents * sizeof(obj_extent) + MALLOC_OVERHEAD;
    return ((keylen + 1 + 7) & ~(size_t)7) + list;   /* the key's arena slot; records are in slabs */
}

object *mm_obj_insert(master_meta *m, const void *key, size_t keylen, uint64_t hash, uint64_t size,
                      const obj_replica *reps, uint32_t n, uint32_t want, uint64_t hold_until) {
    object *o = otable_insert(m->objs, key, keylen, hash);
    if (!o) return NULL;
    o->size = size;
    object_set_replicas(o, reps, n);
    mm_obj_new(m, o, want, hold_until);
    return o;
}

/* A new put: in the pending list with its write grant stamp (both in
 * its side part, which the put's end gives back if nothing else is
 * there). */
static void pending_append(master_meta *m, object *o, uint64_t issued_us) {
    mm_more *x = mm_more_get(o);
    x->write_issued_us = issued_us;
    x->pending = 1;
    x->prev = m->pending_tail;
    x->next = NULL;
    if (m->pending_tail) mm_more_of(m->pending_tail)->next = o;
    else m->pending_head = o;
    m->pending_tail = o;
}

void mm_pending_unlink(master_meta *m, object *o) {
    mm_more *x = mm_more_of(o);
    if (!x || !x->pending) return;   /* not in the list */
    if (x->prev) mm_more_of(x->prev)->next = x->next;
    else m->pending_head = x->next;
    if (x->next) mm_more_of(x->next)->prev = x->prev;
    else m->pending_tail = x->prev;
    x->prev = x->next = NULL;
    x->pending = 0;
    x->write_issued_us = 0;
}

int mm_replica_on_node(const obj_replica *r, uint32_t node) {
    for (uint32_t i = 0; i < r->nextents; i++)
        if (r->extents[i].node == node) return 1;
    return 0;
}

int mm_obj_on_node(const object *o, uint32_t i, uint32_t node) {
    obj_reps v;
    return mm_replica_on_node(&object_reps(o, &v)[i], node);
}

static void collect(object *o, void *ctx) {
    struct { object **v; size_t n, cap; } *acc = ctx;
    if (acc->n == acc->cap) {
        acc->cap = acc->cap ? acc->cap * 2 : 64;
        acc->v = xrealloc(acc->v, acc->cap * sizeof *acc->v);
    }
    acc->v[acc->n++] = o;
}

object **mm_all_objects(master_meta *m, size_t *n) {
    struct { object **v; size_t n, cap; } acc = {NULL, 0, 0};
    uint64_t cursor = 0;
    do cursor = otable_scan(m->objs, cursor, collect, &acc);   /* by record number: each once */
    while (cursor);
    *n = acc.n;
    return acc.v;
}

/* ---- replicas of an object ---- */

uint64_t mm_hold_until(const object *o, uint64_t now_ms) {
    const mm_more *x = mm_more_of(o);
    if (!x) return 0;
    uint64_t until = x->hold_until;
    for (uint32_t i = 0; i < x->nlease; i++) until = max_u64(until, x->lease[i]);
    return until > now_ms ? until : 0;
}

void mm_drop_replica(master_meta *m, object *o, uint32_t i, uint64_t now_ms) {
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    m->under_replicated -= mm_under(o);
    mm_note_replica(m, o, &reps[i], 1);
    mm_hold_replica(m, &reps[i], mm_hold_until(o, now_ms), now_ms);
    uint32_t n = 0;
    obj_replica keep[UINT8_MAX];   /* object_set_replicas copies them before it lets o's go */
    for (uint32_t j = 0; j < o->nreplicas; j++)
        if (j != i) keep[n++] = reps[j];
    object_set_replicas(o, keep, n);
    m->under_replicated += mm_under(o);
}

void mm_add_replica(master_meta *m, object *o, const obj_replica *r) {
    uint32_t n = o->nreplicas;
    if (n == UINT8_MAX) return;   /* never: copies stop at the replica count asked for */
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    m->under_replicated -= mm_under(o);
    obj_replica all[UINT8_MAX];
    for (uint32_t j = 0; j < n; j++) all[j] = reps[j];
    all[n] = *r;
    object_set_replicas(o, all, n + 1);
    m->under_replicated += mm_under(o);
}

void mm_drop_object(master_meta *m, object *o, uint64_t now_ms) {
    mm_note_object(m, o, 1);
    if (mm_obj_job(o)) mm_job_fail(m, mm_obj_job(o), now_ms);
    mm_pending_unlink(m, o);
    m->under_replicated -= mm_under(o);
    otable_unlink(m->objs, o);
    mm_hold_object(m, o, now_ms);
    m->slice_crc_bytes -= (uint64_t)mm_obj_slices(o)->count * sizeof(uint32_t);
    mm_obj_free(o);
    object_free_replicas(o);
    otable_free(m->objs, o);
}

/* ---- read leases ---- */

/* Track the lease so its reader can give it back; when MM_LEASES are
 * live at once, the rest simply pin the bytes until they expire. */
static void lease_add(object *o, uint64_t until, uint64_t now_ms) {
    mm_more *x = mm_more_get(o);
    uint32_t w = 0;
    for (uint32_t i = 0; i < x->nlease; i++)
        if (x->lease[i] > now_ms) x->lease[w++] = x->lease[i];
    x->nlease = w;
    if (x->nlease < MM_LEASES) x->lease[x->nlease++] = until;
    else x->hold_until = max_u64(x->hold_until, until);
}

/* ---- the operations ---- */

static proto_status check_key(const void *key, size_t keylen, char *err, size_t errlen) {
    if (keylen == 0) return mm_fail(err, errlen, PROTO_ERR, "empty key");
    if (keylen > PROTO_MAX_KEY_LEN)
        return mm_fail(err, errlen, PROTO_ERR, "key longer than %d bytes", PROTO_MAX_KEY_LEN);
    return PROTO_OK;
}

object *mm_find(master_meta *m, const void *key, size_t keylen) {
    return otable_find(m->objs, key, keylen, objtable_hash(key, keylen));
}

uint64_t mm_issue_us(master_meta *m, uint64_t now_ms) {
    uint64_t us = now_ms * 1000;
    m->last_issued_us = us > m->last_issued_us ? us : m->last_issued_us + 1;
    return m->last_issued_us;
}

uint64_t mm_write_expiry(const master_meta *m, const object *o) {
    return o->created_ms + m->cfg.put_timeout_ms;
}

/* mm_put_start of a key whose objtable_hash is hash. */
static proto_status put_start_hashed(master_meta *m, const void *key, size_t keylen, uint64_t hash,
                                     uint64_t size, uint32_t replicas, uint64_t now_ms, object **out,
                                     char *err, size_t errlen) {
    proto_status st = check_key(key, keylen, err, errlen);
    if (st != PROTO_OK) return st;
    if (size == 0) return mm_fail(err, errlen, PROTO_ERR, "object size must be at least 1 byte");
    if (replicas == 0 || replicas > PROTO_MAX_REPLICAS)
        return mm_fail(err, errlen, PROTO_ERR, "replica count must be 1 to %d", PROTO_MAX_REPLICAS);
    object *o = otable_find(m->objs, key, keylen, hash);
    if (o)
        return mm_fail(err, errlen, PROTO_EXISTS, o->state == OBJ_PENDING
                       ? "key is being written" : "key already exists");
    obj_replica reps[PROTO_MAX_REPLICAS];
    memset(reps, 0, sizeof reps);
    st = mm_place_collecting(m, size, replicas, reps, now_ms, err, errlen);
    if (st != PROTO_OK) return st;
    /* No hold for the write caps: a node refuses them once a newer grant
     * has written there (backend/claims.h), so only reads pin space. */
    o = mm_obj_insert(m, key, keylen, hash, size, reps, replicas, replicas, 0);
    for (uint32_t i = 0; i < replicas; i++) mm_replica_clear(&reps[i]);
    o->created_ms = o->atime_ms = now_ms;
    pending_append(m, o, mm_issue_us(m, now_ms));
    *out = o;
    return PROTO_OK;
}

proto_status mm_put_start(master_meta *m, const void *key, size_t keylen, uint64_t size,
                       uint32_t replicas, uint64_t now_ms, object **out, char *err, size_t errlen) {
    return put_start_hashed(m, key, keylen, objtable_hash(key, keylen), size, replicas, now_ms, out, err,
                            errlen);
}

/* A pending put whose caps have expired is revoked on the spot, so a
 * put_end racing the sweep gets the same answer the sweep would give. */
static int put_expired(master_meta *m, object *o, uint64_t now_ms) {
    return now_ms >= mm_write_expiry(m, o);
}

static proto_status find_pending(master_meta *m, const void *key, size_t keylen, uint64_t hash,
                                 uint64_t now_ms, object **out, char *err, size_t errlen) {
    object *o = otable_find(m->objs, key, keylen, hash);
    if (!o) return mm_fail(err, errlen, PROTO_NOTFOUND, "no put in progress for this key");
    if (o->state == OBJ_COMPLETE)
        return mm_fail(err, errlen, PROTO_ERR, "object is already complete");
    if (put_expired(m, o, now_ms)) {
        m->puts_timed_out++;
        mm_drop_object(m, o, now_ms);
        return mm_fail(err, errlen, PROTO_TIMEDOUT, "put timed out and was revoked");
    }
    *out = o;
    return PROTO_OK;
}

/* The put's slice CRCs, checked against the object, kept with it. */
static proto_status keep_slices(master_meta *m, object *o, uint32_t crc, const proto_slices *sl,
                                char *err, size_t errlen) {
    if (!sl || sl->count == 0) return PROTO_OK;
    char why[PROTO_ERR_LEN];
    if (proto_slices_check(sl, o->size, crc, why, sizeof why) != 0)
        return mm_fail(err, errlen, PROTO_ERR, "%s", why);
    mm_more_get(o)->slices =
        (proto_slices){sl->size, sl->count, xmemdup(sl->crc, sl->count * sizeof *sl->crc)};
    m->slice_crc_bytes += (uint64_t)sl->count * sizeof *sl->crc;
    return PROTO_OK;
}

/* mm_put_end of a key whose objtable_hash is hash. */
static proto_status put_end_hashed(master_meta *m, const void *key, size_t keylen, uint64_t hash, uint32_t crc,
                                   const proto_slices *sl, uint64_t now_ms, char *err, size_t errlen) {
    object *o = NULL;
    proto_status st = find_pending(m, key, keylen, hash, now_ms, &o, err, errlen);
    if (st == PROTO_OK) st = keep_slices(m, o, crc, sl, err, errlen);
    if (st != PROTO_OK) return st;
    o->crc = crc;
    otable_set_state(m->objs, o, OBJ_COMPLETE);   /* counted: INFO reads the counts */
    m->under_replicated += mm_under(o);
    mm_pending_unlink(m, o);
    mm_more_trim(o, now_ms);   /* a plain object keeps no side part */
    mm_note_object(m, o, 0);   /* now its nodes may index it */
    if (mm_needs_repair(m, o)) {   /* a node died or started draining meanwhile */
        m->repair_dirty = 1;
        m->repair_next_ms = 0;
    }
    return PROTO_OK;
}

proto_status mm_put_end(master_meta *m, const void *key, size_t keylen, uint32_t crc,
                        const proto_slices *sl, uint64_t now_ms, char *err, size_t errlen) {
    return put_end_hashed(m, key, keylen, objtable_hash(key, keylen), crc, sl, now_ms, err, errlen);
}

proto_status mm_put_revoke(master_meta *m, const void *key, size_t keylen, uint64_t now_ms,
                        char *err, size_t errlen) {
    object *o = NULL;
    proto_status st = find_pending(m, key, keylen, objtable_hash(key, keylen), now_ms, &o, err, errlen);
    if (st != PROTO_OK) return st;
    m->puts_revoked++;
    mm_drop_object(m, o, now_ms);
    return PROTO_OK;
}

/* mm_get once its key's object (or NULL) was found. */
static proto_status get_found(master_meta *m, object *o, uint64_t now_ms, object **out,
                              uint64_t *lease_until, char *err, size_t errlen) {
    if (!o || o->state != OBJ_COMPLETE)
        return mm_fail(err, errlen, PROTO_NOTFOUND, "no such key");
    /* Offloaded, with no replica left in DRAM: read straight from a disk
     * record, or loaded back first (offload.c; the reader waits or tries
     * again). */
    if (proto_replicas_readable(o) == 0) {
        proto_status st = mm_load(m, o, now_ms, err, errlen);
        if (st != PROTO_OK) return st;
    } else {
        mm_disk_hit(m, o, now_ms);
    }
    *lease_until = now_ms + m->cfg.lease_ms;
    lease_add(o, *lease_until, now_ms);
    o->atime_ms = now_ms;
    *out = o;
    return PROTO_OK;
}

proto_status mm_get(master_meta *m, const void *key, size_t keylen, uint64_t now_ms,
                 object **out, uint64_t *lease_until, char *err, size_t errlen) {
    return get_found(m, otable_find(m->objs, key, keylen, objtable_hash(key, keylen)), now_ms, out, lease_until, err, errlen);
}

/* mm_lease_return once its key's object (or NULL) was found. */
static int lease_return_found(master_meta *m, object *o, const void *key, size_t keylen,
                              uint64_t lease_until, uint64_t now_ms) {
    mm_more *x = o && o->state == OBJ_COMPLETE ? mm_more_of(o) : NULL;
    for (uint32_t i = 0; x && i < x->nlease; i++) {
        if (x->lease[i] != lease_until) continue;
        /* A removed generation of the key holds the same expiry: the
         * lease could be either one's, so both stay. */
        if (mm_tomb_has_lease(m, key, keylen, lease_until)) return 0;
        x->lease[i] = x->lease[--x->nlease];
        mm_more_trim(o, now_ms);   /* the last one back: the object costs its plain size again */
        mm_drop_temp_copy(m, o, now_ms);   /* read from disk: its copy goes (offload.c) */
        return lease_until > now_ms;
    }
    return mm_tomb_lease_return(m, key, keylen, lease_until, now_ms);
}

int mm_lease_return(master_meta *m, const void *key, size_t keylen, uint64_t lease_until,
                    uint64_t now_ms) {
    return lease_return_found(m, otable_find(m->objs, key, keylen, objtable_hash(key, keylen)), key, keylen, lease_until, now_ms);
}

void mm_repin_grace(master_meta *m, uint64_t until_ms) { m->repin_until_ms = until_ms; }

/* Objects put in this term are nobody's old pin: only the rebuilt ones
 * (puts are refused while the table is rebuilt, so created_ms tells). */
uint64_t mm_repin_left(const master_meta *m, const object *o, uint64_t now_ms) {
    if (now_ms >= m->repin_until_ms || o->created_ms > m->rebuilt_last_ms) return 0;
    return m->repin_until_ms - now_ms;
}

proto_status mm_remove(master_meta *m, const void *key, size_t keylen, uint64_t now_ms,
                    char *err, size_t errlen) {
    object *o = otable_find(m->objs, key, keylen, objtable_hash(key, keylen));
    if (!o) return mm_fail(err, errlen, PROTO_NOTFOUND, "no such key");
    if (o->state == OBJ_PENDING)
        return mm_fail(err, errlen, PROTO_ERR, "put in progress: finish or revoke it first");
    uint64_t pinned = pinset_left(m->pins, key, keylen, now_ms);
    if (pinned) {   /* a lookup will load it: the remover may try again */
        pinset_refused(m->pins);
        return mm_fail(err, errlen, PROTO_TRYAGAIN, "key pinned by a prefix lookup for up to %llu ms (" PROTO_VERB_UNPIN ")",
                       (unsigned long long)pinned);
    }
    uint64_t grace = mm_repin_left(m, o, now_ms);
    if (grace) {
        pinset_refused(m->pins);
        return mm_fail(err, errlen, PROTO_TRYAGAIN, "key may be pinned by a prefix lookup: a new leader holds "
                       "removes for up to %llu ms while clients pin again (" PROTO_VERB_REPIN ")",
                       (unsigned long long)grace);
    }
    mm_drop_object(m, o, now_ms);
    return PROTO_OK;
}

int mm_exists(master_meta *m, const void *key, size_t keylen) {
    object *o = otable_find(m->objs, key, keylen, objtable_hash(key, keylen));
    return o && o->state == OBJ_COMPLETE;
}

int mm_expire_puts(master_meta *m, uint64_t now_ms) {
    int n = 0;
    /* Oldest first: stop at the first one still in time. */
    while (m->pending_head && put_expired(m, m->pending_head, now_ms)) {
        m->puts_timed_out++;
        mm_drop_object(m, m->pending_head, now_ms);
        n++;
    }
    return n;
}

/* ---- batch forms ---- */

/* Keys are hashed first so each one's bucket is fetched a few keys
 * ahead, and its chain's first entry half as far ahead: in a large
 * table most lookups of a key miss the cache twice. */
#define PREFETCH_AHEAD 8

static void hash_items(master_meta *m, mm_item *it, size_t n) {
    for (size_t i = 0; i < n; i++) {
        it[i].hash = objtable_hash(it[i].key, it[i].keylen);
        if (i < PREFETCH_AHEAD) otable_prefetch(m->objs, it[i].hash);
    }
}

static void prefetch_next(master_meta *m, const mm_item *it, size_t n, size_t i) {
    if (i + PREFETCH_AHEAD < n) otable_prefetch(m->objs, it[i + PREFETCH_AHEAD].hash);
    if (i + PREFETCH_AHEAD / 2 < n) otable_prefetch_record(m->objs, it[i + PREFETCH_AHEAD / 2].hash);
}

void mm_put_start_batch(master_meta *m, mm_item *it, size_t n, uint32_t replicas, uint64_t now_ms) {
    hash_items(m, it, n);
    for (size_t i = 0; i < n; i++) {
        prefetch_next(m, it, n, i);
        it[i].status = put_start_hashed(m, it[i].key, it[i].keylen, it[i].hash, it[i].size, replicas, now_ms,
                                        &it[i].obj, it[i].err, sizeof it[i].err);
    }
}

void mm_put_end_batch(master_meta *m, mm_item *it, size_t n, uint64_t now_ms) {
    hash_items(m, it, n);
    for (size_t i = 0; i < n; i++) {
        prefetch_next(m, it, n, i);
        it[i].status = put_end_hashed(m, it[i].key, it[i].keylen, it[i].hash, it[i].crc, &it[i].slices, now_ms,
                                      it[i].err, sizeof it[i].err);
    }
}

#define FIND_GROUP 32   /* keys looked up together (otable_find_many) */

/* The objects of it[at..at+k) (k <= FIND_GROUP) into found[], with what
 * the batch then reads of them on its way into the cache: their owners'
 * lines (leases, slice CRCs), lease arrays and replica lists. A reply
 * encodes every record after the whole batch was looked up, so each of
 * those was a miss of its own (a third of MOON.MGETPACKED's samples). */
static void find_group(master_meta *m, const mm_item *it, size_t k, object **found) {
    objtable_probe p[FIND_GROUP];
    for (size_t i = 0; i < k; i++) p[i] = (objtable_probe){.key = it[i].key, .keylen = it[i].keylen};
    otable_find_many(m->objs, p, k);
    for (size_t i = 0; i < k; i++) {
        found[i] = p[i].found;
        if (!found[i]) continue;
        __builtin_prefetch(&found[i]->owner);       /* its side part's pointer */
        if (found[i]->rep_list) __builtin_prefetch(found[i]->rep.list);   /* a reply's extents */
    }
    for (size_t i = 0; i < k; i++)   /* their side parts (leases, slice CRCs), once the objects' lines are on their way */
        if (found[i] && mm_more_of(found[i])) __builtin_prefetch(mm_more_of(found[i]));
}

void mm_get_batch(master_meta *m, mm_item *it, size_t n, uint64_t now_ms) {
    object *found[FIND_GROUP];
    for (size_t at = 0; at < n; at += FIND_GROUP) {
        size_t k = n - at < FIND_GROUP ? n - at : FIND_GROUP;
        find_group(m, it + at, k, found);
        for (size_t i = 0; i < k; i++) {
            mm_item *x = &it[at + i];
            x->status = get_found(m, found[i], now_ms, &x->obj, &x->lease_until, x->err, sizeof x->err);
        }
    }
}

size_t mm_lease_return_batch(master_meta *m, const mm_item *it, size_t n, uint64_t now_ms) {
    object *found[FIND_GROUP];
    size_t live = 0;
    for (size_t at = 0; at < n; at += FIND_GROUP) {
        size_t k = n - at < FIND_GROUP ? n - at : FIND_GROUP;
        find_group(m, it + at, k, found);
        for (size_t i = 0; i < k; i++) {
            const mm_item *x = &it[at + i];
            live += (size_t)lease_return_found(m, found[i], x->key, x->keylen, x->lease_until, now_ms);
        }
    }
    return live;
}

void mm_exists_batch(master_meta *m, mm_item *it, size_t n) {
    for (size_t i = 0; i < n; i++)
        it[i].status = mm_exists(m, it[i].key, it[i].keylen) ? PROTO_OK : PROTO_NOTFOUND;
}
