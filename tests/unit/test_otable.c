/* tests/unit/test_otable.c - the master's object table: find, insert,
 * unlink and free through incremental resizes, records and key slots
 * reused, state counts, scans across resizes, the room. */
#include "master/otable.h"
#include "test.h"

#include <stdint.h>
#include <stdio.h>

static size_t key_of(uint64_t i, char *out, size_t cap) {
    return (size_t)snprintf(out, cap, "key-%llu", (unsigned long long)i);
}

static object *put(otable *t, uint64_t i) {
    char k[32];
    size_t n = key_of(i, k, sizeof k);
    return otable_insert(t, k, n, objtable_hash(k, n));
}

static object *get(otable *t, uint64_t i) {
    char k[32];
    size_t n = key_of(i, k, sizeof k);
    return otable_find(t, k, n, objtable_hash(k, n));
}

/* Through several grows and shrinks: every key found, with its room,
 * gone keys not; records and key slots come back. */
#define MANY 200000
static void test_grow_shrink(void) {
    otable *t = otable_create(24);
    for (uint64_t i = 0; i < MANY; i++) {
        object *o = put(t, i);
        ASSERT(o);
        o->size = i;
        memcpy(otable_room(o), &i, sizeof i);
    }
    ASSERT_EQ(otable_size(t), MANY);
    ASSERT(otable_slots(t) >= MANY);
    for (uint64_t i = 0; i < MANY; i++) {
        object *o = get(t, i);
        ASSERT(o && o->size == i && memcmp(otable_room(o), &i, sizeof i) == 0);
    }
    ASSERT(get(t, MANY) == NULL);
    size_t bytes = otable_bytes(t);
    /* drop all but every 100th: the index shrinks as they go */
    for (uint64_t i = 0; i < MANY; i++)
        if (i % 100) otable_free(t, get(t, i));
    ASSERT_EQ(otable_size(t), MANY / 100);
    for (int i = 0; i < 64; i++) get(t, 0);   /* lets a resize under way finish */
    ASSERT(otable_slots(t) < MANY / 10);
    for (uint64_t i = 0; i < MANY; i++) ASSERT((get(t, i) != NULL) == (i % 100 == 0));
    /* the same number again: the freed records and key slots are reused */
    for (uint64_t i = MANY; i < 2 * MANY - MANY / 100; i++) ASSERT(put(t, i));
    ASSERT(otable_bytes(t) <= bytes + bytes / 4);   /* the index may be sized apart */
    for (uint64_t i = MANY; i < 2 * MANY - MANY / 100; i++) ASSERT(get(t, i) && get(t, i)->size == 0);
    otable_destroy(t, NULL, NULL);
}

static void count(object *o, void *ctx) {
    uint8_t *seen = ctx;
    seen[o->size]++;
}

static void free_odd(object *o, void *ctx) {
    otable *t = ctx;
    if (o->size % 2) otable_free(t, o);
}

/* A scan in steps, with inserts making the index grow in between, hands
 * out every object present throughout exactly once; a callback may free
 * the object it is handed. */
static void test_scan_across_resize(void) {
    otable *t = otable_create(8);
    enum { N = 5000, MORE = 20000 };
    uint8_t *seen = calloc(N + MORE, 1);
    for (uint64_t i = 0; i < N; i++) put(t, i)->size = i;
    uint64_t cursor = 0, added = N;
    int resized = 0;
    do {
        cursor = otable_scan(t, cursor, count, seen);
        for (int k = 0; k < 8 && added < N + MORE; k++) put(t, added)->size = added, added++;
        resized |= otable_resizing(t);
    } while (cursor);
    ASSERT(resized);
    for (uint64_t i = 0; i < N; i++) ASSERT_EQ(seen[i], 1);
    for (uint64_t i = N; i < added; i++) ASSERT(seen[i] <= 1);
    cursor = 0;
    do cursor = otable_scan(t, cursor, free_odd, t);
    while (cursor);
    for (uint64_t i = 0; i < added; i++) ASSERT((get(t, i) != NULL) == (i % 2 == 0));
    /* a cursor past the end starts from its remainder */
    ASSERT(otable_scan(t, UINT64_MAX, count, seen) < UINT64_MAX);
    free(seen);
    otable_destroy(t, NULL, NULL);
}

static int destroyed;
static void on_destroy(object *o, void *ctx) { destroyed++; }

/* PENDING and COMPLETE counted through state changes, unlinks and frees;
 * an unlinked object keeps its key until freed; long keys live apart. */
static void test_states_and_keys(void) {
    otable *t = otable_create(0);
    object *a = put(t, 1), *b = put(t, 2);
    char big[1000];
    memset(big, 'x', sizeof big);
    object *c = otable_insert(t, big, sizeof big, objtable_hash(big, sizeof big));
    ASSERT(a && b && c);
    ASSERT(otable_find(t, big, sizeof big, objtable_hash(big, sizeof big)) == c);
    ASSERT(otable_insert(t, big, 0, 0) == NULL);
    ASSERT_EQ(otable_count_state(t, OBJ_PENDING), 3);
    otable_set_state(t, a, OBJ_COMPLETE);
    ASSERT_EQ(otable_count_state(t, OBJ_PENDING), 2);
    ASSERT_EQ(otable_count_state(t, OBJ_COMPLETE), 1);
    otable_unlink(t, a);
    ASSERT_EQ(otable_count_state(t, OBJ_COMPLETE), 0);
    ASSERT(get(t, 1) == NULL);
    ASSERT_STREQ(a->key, "key-1");   /* still its own until freed */
    otable_set_state(t, a, OBJ_PENDING);   /* unlinked: counts untouched */
    ASSERT_EQ(otable_count_state(t, OBJ_PENDING), 2);
    otable_free(t, a);
    ASSERT_EQ(otable_size(t), 2);
    otable_free(t, b);
    ASSERT_EQ(otable_size(t), 1);
    destroyed = 0;
    otable_destroy(t, on_destroy, NULL);
    ASSERT_EQ(destroyed, 1);   /* c, its key freed with it */
}

int main(void) {
    RUN_TEST(test_grow_shrink);
    RUN_TEST(test_scan_across_resize);
    RUN_TEST(test_states_and_keys);
    TEST_EXIT();
}
