/* tests/unit/test_objtable.c - object table: CRUD, rehash, SCAN, counts. */
#include "core/objtable.h"
#include "test.h"

#include <stdint.h>

static int freed;

static void count_free(object *o, void *ctx) {
    freed++;
    object_free(o);
}

static void key_of(uint64_t i, uint8_t out[8]) {
    memcpy(out, &i, 8);   /* binary keys, mostly full of NUL bytes */
}

static void test_insert_find_delete(void) {
    objtable *t = objtable_create(count_free, NULL);
    int existed = -1;
    object *o = objtable_insert(t, "alpha", 5, &existed);
    ASSERT(o);
    ASSERT_EQ(existed, 0);
    ASSERT_EQ(o->keylen, 5);
    ASSERT_STREQ(o->key, "alpha");
    ASSERT_EQ(o->state, OBJ_PENDING);
    ASSERT_EQ(o->nreplicas, 0);
    ASSERT(objtable_find(t, "alpha", 5) == o);
    ASSERT(objtable_find(t, "alph", 4) == NULL);
    ASSERT(objtable_find(t, "alphab", 6) == NULL);
    ASSERT(objtable_insert(t, "alpha", 5, &existed) == NULL);
    ASSERT_EQ(existed, 1);
    ASSERT_EQ(objtable_size(t), 1);
    freed = 0;
    ASSERT_EQ(objtable_delete(t, "alpha", 5), 1);
    ASSERT_EQ(freed, 1);
    ASSERT_EQ(objtable_delete(t, "alpha", 5), 0);
    ASSERT(objtable_find(t, "alpha", 5) == NULL);
    ASSERT_EQ(objtable_size(t), 0);

    ASSERT(objtable_insert(t, "", 0, &existed) != NULL);   /* empty key is a key */
    ASSERT(objtable_find(t, "", 0) != NULL);
    o = objtable_unlink(t, "", 0);
    ASSERT(o);
    ASSERT_EQ(objtable_size(t), 0);
    object_free(o);
    objtable_destroy(t);
}

static void test_binary_keys(void) {
    objtable *t = objtable_create(NULL, NULL);
    const char a[] = {'k', 0, 'x'}, b[] = {'k', 0, 'y'}, c[] = {'k', 0};
    ASSERT(objtable_insert(t, a, 3, NULL));
    ASSERT(objtable_insert(t, b, 3, NULL));
    ASSERT(objtable_insert(t, c, 2, NULL));
    ASSERT(objtable_insert(t, "k", 1, NULL));
    ASSERT_EQ(objtable_size(t), 4);
    object *o = objtable_find(t, b, 3);
    ASSERT(o);
    ASSERT_MEMEQ(o->key, b, 3);
    ASSERT_EQ(o->key[3], 0);
    ASSERT_EQ(objtable_delete(t, a, 3), 1);
    ASSERT(objtable_find(t, a, 3) == NULL);
    ASSERT(objtable_find(t, b, 3) && objtable_find(t, c, 2) && objtable_find(t, "k", 1));
    objtable_destroy(t);   /* NULL free_fn: the table frees with object_free */
}

static void test_grow_shrink_1m(void) {
    enum { N = 1000000 };
    objtable *t = objtable_create(count_free, NULL);
    uint8_t k[8];
    int bad = 0, saw_rehash = 0;
    for (uint64_t i = 0; i < N; i++) {
        key_of(i, k);
        bad |= objtable_insert(t, k, 8, NULL) == NULL;
        saw_rehash |= objtable_rehashing(t);
    }
    ASSERT_EQ(bad, 0);
    ASSERT(saw_rehash);
    ASSERT_EQ(objtable_size(t), N);
    ASSERT(objtable_buckets(t) >= N);
    for (uint64_t i = 0; i < N; i++) {
        key_of(i, k);
        object *o = objtable_find(t, k, 8);
        bad |= !o || memcmp(o->key, k, 8) != 0;
    }
    key_of(N, k);
    ASSERT(objtable_find(t, k, 8) == NULL);
    ASSERT_EQ(bad, 0);
    freed = 0;
    for (uint64_t i = 0; i < N; i += 2) {
        key_of(i, k);
        bad |= objtable_delete(t, k, 8) != 1;
    }
    for (uint64_t i = 1; i < N; i += 2) {   /* the survivors, across shrinks */
        key_of(i, k);
        bad |= objtable_find(t, k, 8) == NULL;
    }
    for (uint64_t i = 1; i < N; i += 2) {
        key_of(i, k);
        bad |= objtable_delete(t, k, 8) != 1;
    }
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(freed, N);
    ASSERT_EQ(objtable_size(t), 0);
    for (int i = 0; i < 100; i++) objtable_find(t, "x", 1);   /* let the shrink finish */
    ASSERT(objtable_buckets(t) <= 64);
    objtable_destroy(t);
}

/* ---- SCAN ---- */

typedef struct seen {
    uint8_t *hits;   /* per key index */
    uint64_t n;
    uint64_t calls;
} seen;

static void mark_seen(object *o, void *ctx) {
    seen *s = ctx;
    uint64_t i;
    memcpy(&i, o->key, 8);
    if (o->keylen == 8 && i < s->n && s->hits[i] < 255) s->hits[i]++;
    s->calls++;
}

/* Scan while inserting keys [n0, n1) (growth) or deleting them (shrink)
 * between calls; every key in [0, n0) must be returned. */
static int scan_with_churn(uint64_t n0, uint64_t n1, int grow_first) {
    objtable *t = objtable_create(NULL, NULL);
    seen s = {calloc(n1, 1), n1, 0};
    uint8_t k[8];
    uint64_t next = n0;
    int missing = 0;
    for (uint64_t i = 0; i < (grow_first ? n0 : n1); i++) {
        key_of(i, k);
        objtable_insert(t, k, 8, NULL);
    }
    uint64_t cursor = 0;
    int rehash_during = 0;
    do {
        cursor = objtable_scan(t, cursor, mark_seen, &s);
        for (int j = 0; j < 7 && next < n1; j++, next++) {
            key_of(next, k);
            if (grow_first) objtable_insert(t, k, 8, NULL);
            else objtable_delete(t, k, 8);
        }
        rehash_during |= objtable_rehashing(t);
    } while (cursor != 0);
    for (uint64_t i = 0; i < n0; i++) missing += s.hits[i] == 0;
    free(s.hits);
    objtable_destroy(t);
    if (!rehash_during) return -1;
    return missing;
}

/* find_many answers as objtable_find one by one would, also while the
 * table rehashes under it (groups of 16 with a rehash step per key). */
static void test_find_many(void) {
    objtable *t = objtable_create(count_free, NULL);
    enum { N = 3000, ASK = 100 };
    uint8_t keys[2 * ASK][8];
    objtable_probe p[2 * ASK];
    for (uint64_t i = 0; i < N; i++) {
        uint8_t k[8];
        key_of(i, k);
        ASSERT(objtable_insert(t, k, 8, NULL));
        if (i % 997 != 0) continue;
        /* every few inserts: half present keys, half absent ones */
        for (uint64_t j = 0; j < 2 * ASK; j++) {
            key_of(j % 2 ? N + j : (j * 7919) % (i + 1), keys[j]);
            p[j] = (objtable_probe){.key = keys[j], .keylen = 8};
        }
        objtable_find_many(t, p, 2 * ASK);
        for (uint64_t j = 0; j < 2 * ASK; j++) {
            ASSERT_EQ(p[j].hash, objtable_hash(keys[j], 8));
            if (j % 2) ASSERT(p[j].found == NULL);
            else ASSERT(p[j].found && p[j].found == objtable_find(t, keys[j], 8));
        }
    }
    objtable_find_many(t, p, 0);
    objtable_destroy(t);
}

static void test_scan_plain(void) {
    objtable *t = objtable_create(NULL, NULL);
    seen s = {calloc(1000, 1), 1000, 0};
    uint8_t k[8];
    ASSERT_EQ(objtable_scan(t, 0, mark_seen, &s), 0);   /* empty */
    for (uint64_t i = 0; i < 1000; i++) {
        key_of(i, k);
        objtable_insert(t, k, 8, NULL);
    }
    for (int i = 0; i < 5000; i++) objtable_find(t, "x", 1);   /* finish rehash */
    ASSERT(!objtable_rehashing(t));
    uint64_t cursor = 0;
    do cursor = objtable_scan(t, cursor, mark_seen, &s); while (cursor);
    int wrong = 0;
    for (int i = 0; i < 1000; i++) wrong += s.hits[i] != 1;   /* stable table: exactly once */
    free(s.hits);
    objtable_destroy(t);
    ASSERT_EQ(wrong, 0);
}

static void test_scan_across_growth(void) {
    ASSERT_EQ(scan_with_churn(3000, 60000, 1), 0);
    ASSERT_EQ(scan_with_churn(100, 5000, 1), 0);
}

/* The hash seed is per process, so rounds vary the sizes (and with them
 * where the shrinks fall); a scan that skipped a shrinking table's buckets
 * failed about one round in thirty. */
static void test_scan_across_shrink(void) {
    int bad_rounds = 0;
    for (uint64_t round = 0; round < 40; round++)
        bad_rounds += scan_with_churn(300 + 50 * round, 30000 + 997 * round, 0) != 0;
    ASSERT_EQ(bad_rounds, 0);
}

static void delete_self(object *o, void *ctx) {
    objtable_delete(ctx, o->key, o->keylen);
}

static void test_scan_callback_deletes(void) {
    objtable *t = objtable_create(count_free, NULL);
    uint8_t k[8];
    for (uint64_t i = 0; i < 5000; i++) {
        key_of(i, k);
        objtable_insert(t, k, 8, NULL);
    }
    freed = 0;
    uint64_t cursor = 0;
    do cursor = objtable_scan(t, cursor, delete_self, t); while (cursor);
    ASSERT_EQ(freed, 5000);
    ASSERT_EQ(objtable_size(t), 0);
    objtable_destroy(t);
}

/* ---- counts and replicas ---- */

static void test_count_state(void) {
    objtable *t = objtable_create(NULL, NULL);
    char k[16];
    for (int i = 0; i < 10; i++) {
        int n = snprintf(k, sizeof k, "key%d", i);
        objtable_insert(t, k, (size_t)n, NULL);
    }
    ASSERT_EQ(objtable_count_state(t, OBJ_PENDING), 10);
    ASSERT_EQ(objtable_count_state(t, OBJ_COMPLETE), 0);
    for (int i = 0; i < 4; i++) {
        int n = snprintf(k, sizeof k, "key%d", i);
        objtable_set_state(t, objtable_find(t, k, (size_t)n), OBJ_COMPLETE);
    }
    object *o = objtable_find(t, "key0", 4);
    ASSERT_EQ(o->state, OBJ_COMPLETE);
    objtable_set_state(t, o, OBJ_COMPLETE);   /* idempotent */
    ASSERT_EQ(objtable_count_state(t, OBJ_PENDING), 6);
    ASSERT_EQ(objtable_count_state(t, OBJ_COMPLETE), 4);
    ASSERT_EQ(objtable_delete(t, "key1", 4), 1);
    ASSERT_EQ(objtable_delete(t, "key9", 4), 1);
    ASSERT_EQ(objtable_count_state(t, OBJ_COMPLETE), 3);
    ASSERT_EQ(objtable_count_state(t, OBJ_PENDING), 5);
    o = objtable_unlink(t, "key2", 4);
    objtable_set_state(t, o, OBJ_PENDING);    /* unlinked: counts untouched */
    ASSERT_EQ(o->state, OBJ_PENDING);
    ASSERT_EQ(objtable_count_state(t, OBJ_COMPLETE), 2);
    ASSERT_EQ(objtable_count_state(t, OBJ_PENDING), 5);
    object_free(o);
    ASSERT_EQ(objtable_count_state(t, (obj_state)7), 0);
    objtable_destroy(t);
}

static void test_replicas_deep_copy(void) {
    objtable *t = objtable_create(NULL, NULL);
    object *o = objtable_insert(t, "r", 1, NULL);
    obj_extent ext[3] = {{1, 0, 100}, {2, 4096, 50}, {3, 64, 150}};
    obj_replica reps[2] = {{2, ext}, {1, ext + 2}};
    obj_reps v;
    ASSERT_EQ(object_set_replicas(o, reps, 2), 0);
    ext[0].offset = 999;   /* the object kept its own copy */
    ASSERT_EQ(o->nreplicas, 2);
    ASSERT_EQ(o->rep_list, 1);   /* striped: a list */
    const obj_replica *r = object_reps(o, &v);
    ASSERT_EQ(r[0].nextents, 2);
    ASSERT_EQ(r[0].extents[0].offset, 0);
    ASSERT_EQ(r[0].extents[1].node, 2);
    ASSERT_EQ(r[1].extents[0].length, 150);
    ASSERT(r[1].extents != ext + 2);
    /* setting from its own arrays works (copy before free) */
    ASSERT_EQ(object_set_replicas(o, r + 1, 1), 0);
    ASSERT_EQ(o->nreplicas, 1);
    ASSERT_EQ(object_replica_first(o, 0).node, 3);
    obj_replica bad = {1, NULL};
    ASSERT_EQ(object_set_replicas(o, &bad, 1), -1);
    ASSERT_EQ(o->nreplicas, 1);   /* unchanged on error */
    ASSERT_EQ(object_set_replicas(o, NULL, 0), 0);
    ASSERT_EQ(o->nreplicas, 0);
    ASSERT(object_reps(o, &v) == NULL);
    ASSERT_EQ(object_set_replicas(o, reps, 2), 0);   /* destroy frees these */
    objtable_destroy(t);
}

/* Unstriped replicas holding the whole object are words in the object;
 * what does not fit a word (a length other than the size, an offset off
 * the unit, a node id past the word's bits, a third replica) is a list,
 * and both read back the same. */
static int same_extent(const obj_extent *a, const obj_extent *b) {
    return a->node == b->node && a->offset == b->offset && a->length == b->length;
}

static void test_replicas_words(void) {
    objtable *t = objtable_create(NULL, NULL);
    object *o = objtable_insert(t, "w", 1, NULL);
    o->size = 1000;
    obj_extent ext[3] = {{7, 64 * 5, 1000}, {(1u << OBJ_REP_NODE_BITS) - 1, UINT64_MAX, 1000}, {9, 1ULL << 40, 1000}};
    obj_replica reps[3] = {{1, ext}, {1, ext + 1}, {1, ext + 2}};
    obj_reps v;
    ASSERT_EQ(object_set_replicas(o, reps, 2), 0);
    ASSERT_EQ(o->rep_list, 0);
    const obj_replica *r = object_reps(o, &v);
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(r[i].nextents, 1);
        ASSERT(same_extent(&r[i].extents[0], &ext[i]));
    }
    ASSERT_EQ(object_replica_first(o, 1).offset, UINT64_MAX);   /* the disk tier's mark */
    ASSERT_EQ(object_set_replicas(o, reps, 3), 0);   /* three: a list */
    ASSERT_EQ(o->rep_list, 1);
    ASSERT_EQ(object_replica_first(o, 2).offset, 1ULL << 40);
    /* each of these does not fit a word */
    obj_extent odd[3] = {{7, 64, 999}, {7, 65, 1000}, {1u << OBJ_REP_NODE_BITS, 64, 1000}};
    for (int i = 0; i < 3; i++) {
        obj_replica one = {1, &odd[i]};
        ASSERT_EQ(object_set_replicas(o, &one, 1), 0);
        ASSERT_EQ(o->rep_list, 1);
        r = object_reps(o, &v);
        ASSERT(same_extent(&r[0].extents[0], &odd[i]));
    }
    ASSERT_EQ(object_set_replicas(o, reps, 1), 0);   /* back to a word: the list freed */
    ASSERT_EQ(o->rep_list, 0);
    ASSERT_EQ(object_replica_first(o, 0).node, 7);
    objtable_destroy(t);
}

int main(void) {
    RUN_TEST(test_insert_find_delete);
    RUN_TEST(test_binary_keys);
    RUN_TEST(test_grow_shrink_1m);
    RUN_TEST(test_find_many);
    RUN_TEST(test_scan_plain);
    RUN_TEST(test_scan_across_growth);
    RUN_TEST(test_scan_across_shrink);
    RUN_TEST(test_scan_callback_deletes);
    RUN_TEST(test_count_state);
    RUN_TEST(test_replicas_deep_copy);
    RUN_TEST(test_replicas_words);
    TEST_EXIT();
}
