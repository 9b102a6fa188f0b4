/* test_evict - garbage collection's victim choice (core/evict.c) on an
 * object table, and the standalone store collecting under a full segment
 * without ever touching a pinned (being read) value. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/evict.h"
#include "core/util.h"
#include "standalone/store_local.h"
#include "test.h"

#define NOBJ 10   /* fewer than a sample: every pick sees every object */

static objtable *t;
static object *objs[NOBJ];

static void free_cb(object *o, void *ctx) { object_free(o); }

/* Objects k0..k9, COMPLETE, last used at 1..10 ms. */
static void setup(void) {
    t = objtable_create(free_cb, NULL);
    for (int i = 0; i < NOBJ; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        objs[i] = objtable_insert(t, key, strlen(key), NULL);
        objtable_set_state(t, objs[i], OBJ_COMPLETE);
        objs[i]->atime_ms = (uint64_t)i + 1;
    }
}

static void teardown(void) { objtable_destroy(t); }

static int veto_k1(const object *o, void *ctx) { return o != objs[1]; }

static void test_lru_order_and_vetoes(void) {
    setup();
    evictor e;
    evictor_init(&e, EVICT_LRU, 90, 80);
    ASSERT(evictor_pick(&e, t, 100, NULL, NULL) == objs[0]);
    objs[0]->pins = 1;                                   /* being read: stays */
    ASSERT(evictor_pick(&e, t, 100, NULL, NULL) == objs[1]);
    ASSERT(evictor_pick(&e, t, 100, veto_k1, NULL) == objs[2]);   /* the owner's veto */
    objtable_set_state(t, objs[2], OBJ_PENDING);         /* not complete: stays */
    ASSERT(evictor_pick(&e, t, 100, veto_k1, NULL) == objs[3]);
    ASSERT_EQ(e.evicted, 4);
    ASSERT_EQ(e.evicted_expired, 0);
    teardown();
}

static void test_expiry_ranks(void) {
    setup();
    evictor e;
    evictor_init(&e, EVICT_LRU, 90, 80);
    objs[0]->expire_ms = 1000;   /* least recently used, but its hint is ahead */
    objs[7]->expire_ms = 50;     /* passed at now = 100 */
    objs[8]->expire_ms = 40;     /* passed longer ago: first */
    ASSERT(evictor_pick(&e, t, 100, NULL, NULL) == objs[8]);
    objs[8]->pins = 1;
    ASSERT(evictor_pick(&e, t, 100, NULL, NULL) == objs[7]);
    ASSERT_EQ(e.evicted_expired, 2);
    objs[7]->pins = 1;
    /* No expired one left: keys without a hint go before k0's future one. */
    ASSERT(evictor_pick(&e, t, 100, NULL, NULL) == objs[1]);
    for (int i = 1; i < NOBJ; i++) objs[i]->pins = 1;
    ASSERT(evictor_pick(&e, t, 100, NULL, NULL) == objs[0]);
    objs[0]->pins = 1;
    ASSERT(evictor_pick(&e, t, 100, NULL, NULL) == NULL);   /* everything pinned */
    teardown();
}

static void test_random_and_off(void) {
    setup();
    evictor e;
    evictor_init(&e, EVICT_RANDOM, 90, 80);
    objs[4]->pins = 1;
    int seen[NOBJ] = {0};
    for (int i = 0; i < 200; i++) {
        object *v = evictor_pick(&e, t, 100, NULL, NULL);
        ASSERT(v && v != objs[4]);
        for (int j = 0; j < NOBJ; j++) seen[j] += v == objs[j];
    }
    int distinct = 0;
    for (int j = 0; j < NOBJ; j++) distinct += seen[j] > 0;
    ASSERT(distinct >= 2);   /* not always the same one */
    evictor_init(&e, EVICT_NONE, 90, 80);
    ASSERT(evictor_pick(&e, t, 100, NULL, NULL) == NULL);
    teardown();
}

static void test_watermarks(void) {
    evictor e;
    evictor_init(&e, EVICT_LRU, 90, 80);
    ASSERT_EQ(evictor_excess(&e, 90, 100), 0);
    ASSERT_EQ(evictor_excess(&e, 95, 100), 15);
    ASSERT_EQ(evictor_excess(&e, 10, 0), 0);
    uint64_t big = 100ULL << 40;   /* no overflow on a 100 TiB total */
    ASSERT_EQ(evictor_excess(&e, big, big), big / 5);
    evictor_init(&e, EVICT_NONE, 90, 80);
    ASSERT_EQ(evictor_excess(&e, 100, 100), 0);
    ASSERT_STREQ(evict_policy_name(EVICT_RANDOM), "allkeys-random");
}

/* A full segment keeps taking puts; the value being read survives. */
static void test_store_collects_but_not_pinned(void) {
    char err[256];
    store *s = store_local_create(1 << 20, 0, err, sizeof err);
    ASSERT(s);
    store_local_gc(s, EVICT_LRU, 90, 80);
    enum { LEN = 64 * 1024, PUTS = 64 };
    unsigned char val[LEN];
    const void *pinned_data = NULL;
    uint64_t pinned_len = 0;
    store_pin *pin = NULL;
    for (int i = 0; i < PUTS; i++) {
        char key[16];
        snprintf(key, sizeof key, "v%d", i);
        memset(val, i + 1, LEN);
        void *dst;
        store_put *p;
        ASSERT_EQ(s->ops->put_start(s, key, strlen(key), LEN, &dst, &p), STORE_OK);
        memcpy(dst, val, LEN);
        ASSERT_EQ(s->ops->put_end(s, p), STORE_OK);
        if (i == 0) ASSERT_EQ(s->ops->get(s, "v0", 2, &pinned_data, &pinned_len, &pin), STORE_OK);
    }
    ASSERT(s->ops->count(s) < PUTS);                  /* some were collected */
    ASSERT_EQ(s->ops->exists(s, "v0", 2), 1);         /* the oldest, but pinned */
    memset(val, 1, LEN);
    ASSERT(pinned_len == LEN && memcmp(pinned_data, val, LEN) == 0);
    s->ops->release(s, pin);
    ASSERT_EQ(s->ops->exists(s, "v63", 3), 1);
    s->ops->destroy(s);
}

int main(void) {
    RUN_TEST(test_lru_order_and_vetoes);
    RUN_TEST(test_expiry_ranks);
    RUN_TEST(test_random_and_off);
    RUN_TEST(test_watermarks);
    RUN_TEST(test_store_collects_but_not_pinned);
    TEST_EXIT();
}
