/* Unit tests for the master's metadata (src/master/meta.h): membership,
 * placement, the object life cycle, leases, repair, drain and rebuild.
 * Time is a plain number passed in: no sleeps. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/crc32c.h"
#include "core/evict.h"
#include "core/util.h"
#include "master/meta.h"
#include "proto/pins.h"
#include "proto/notes.h"
#include "test.h"

/* o's replicas, decoded for the statement (object_reps) */
#define REPS(o) object_reps((o), &(obj_reps){.r = {{0, NULL}}})

#define KB 1024ULL

static char err[PROTO_ERR_LEN];

static mm_config test_config(void) {
    mm_config c;
    mm_config_defaults(&c);
    c.put_timeout_ms = 1000;
    c.lease_ms = 5000;
    c.node_timeout_ms = 3000;
    c.stripe_threshold = 4 * KB;
    c.stripe_unit = 1 * KB;
    c.stripe_width = 2;
    c.repair_retry_ms = 100;
    return c;
}

/* n nodes of seg bytes each, registered at time 0. */
static master_meta *cluster(int n, uint64_t seg) {
    mm_config c = test_config();
    master_meta *m = mm_create(&c);
    for (int i = 0; i < n; i++) {
        char addr[32];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", 9000 + i);
        const char *addrs[] = {addr};
        uint32_t id;
        if (mm_node_register(m, seg, addrs, 1, 0, &id, err, sizeof err) != PROTO_OK) return NULL;
    }
    return m;
}

static uint64_t node_used(master_meta *m, uint32_t id) {
    seg_alloc_stats st;
    seg_alloc_get_stats(mm_node_get(m, id)->alloc, &st);
    return st.used;
}

static int replica_node_set(const obj_replica *r, uint32_t *nodes, int max) {
    int n = 0;
    for (uint32_t i = 0; i < r->nextents; i++) {
        int seen = 0;
        for (int k = 0; k < n; k++) seen |= nodes[k] == r->extents[i].node;
        if (!seen && n < max) nodes[n++] = r->extents[i].node;
    }
    return n;
}

/* put_start + put_end in one step. */
static object *put(master_meta *m, const char *key, uint64_t size, uint32_t reps, uint64_t now) {
    object *o = NULL;
    if (mm_put_start(m, key, strlen(key), size, reps, now, &o, err, sizeof err) != PROTO_OK) return NULL;
    if (mm_put_end(m, key, strlen(key), 0xabcd, NULL, now, err, sizeof err) != PROTO_OK) return NULL;
    return o;
}

/* ---- membership ---- */

static void count_complete(object *o, void *ctx) {
    uint64_t *n = ctx;
    n[0]++;
    n[1] += o->nreplicas < mm_obj_of(o)->want;
}

/* mm_get_stats, whose counts (kept as objects change) must be what a
 * walk of the complete objects finds. */
static void stats(master_meta *m, mm_stats *st) {
    mm_get_stats(m, st);
    uint64_t walked[2] = {0, 0}, cursor = 0;   /* complete, under-replicated */
    do cursor = mm_scan(m, cursor, 1000, count_complete, walked);
    while (cursor);
    ASSERT_EQ(st->objects_complete, walked[0]);
    ASSERT_EQ(st->under_replicated, walked[1]);
}

static void test_register(void) {
    mm_config c = test_config();
    master_meta *m = mm_create(&c);
    const char *good[] = {"127.0.0.1:1"};
    char longaddr[TE_ADDR_LEN + 8];
    memset(longaddr, 'a', sizeof longaddr - 1);
    longaddr[sizeof longaddr - 1] = 0;
    const char *bad[] = {longaddr};
    uint32_t id = 0;
    ASSERT_EQ(mm_node_register(m, 0, good, 1, 0, &id, err, sizeof err), PROTO_ERR);
    ASSERT_EQ(mm_node_register(m, 1 << 20, good, 0, 0, &id, err, sizeof err), PROTO_ERR);
    ASSERT_EQ(mm_node_register(m, 1 << 20, bad, 1, 0, &id, err, sizeof err), PROTO_ERR);
    ASSERT_EQ(mm_node_register(m, 1 << 20, good, 1, 0, &id, err, sizeof err), PROTO_OK);
    ASSERT_EQ(id, 1);
    ASSERT_EQ(mm_node_register(m, 1 << 20, good, 1, 0, &id, err, sizeof err), PROTO_OK);
    ASSERT_EQ(id, 2);
    ASSERT_STREQ(mm_node_get(m, 2)->addrs[0], "127.0.0.1:1");
    ASSERT_EQ(mm_node_heartbeat(m, 7, 0, 10, err, sizeof err), PROTO_NOTFOUND);
    ASSERT_EQ(mm_node_heartbeat(m, 2, 123, 10, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_node_get(m, 2)->reported_used, 123);
    mm_destroy(m);
}

/* More than 1024 nodes in the growable table; a dead node's id is not
 * given to anyone else, however long ago it died. */
static void test_many_nodes(void) {
    enum { N = 1100 };
    master_meta *m = cluster(N, 64 * KB);
    ASSERT(m);
    ASSERT_EQ(mm_node_count(m), N);
    ASSERT_EQ(mm_node_get(m, N)->id, N);
    object *o = put(m, "on-many", 1000, 2, 0);
    ASSERT(o);
    uint32_t victim = REPS(o)[0].extents[0].node;
    mm_node_fail(m, victim, "test", 100);
    ASSERT_EQ(o->nreplicas, 1);   /* its replica went with it */
    const char *addrs[] = {"10.0.0.1:1"};
    uint32_t id = 0;
    ASSERT_EQ(mm_node_register(m, 64 * KB, addrs, 1, 1000000, &id, err, sizeof err), PROTO_OK);
    ASSERT_EQ(id, N + 1);
    ASSERT_EQ(mm_node_get(m, victim)->state, NODE_DEAD);
    ASSERT_EQ(mm_node_heartbeat(m, N + 1, 0, 1000001, err, sizeof err), PROTO_OK);
    mm_destroy(m);
}

static void test_heartbeat_timeout_kills(void) {
    master_meta *m = cluster(2, 64 * KB);
    ASSERT(m);
    ASSERT_EQ(mm_node_heartbeat(m, 1, 0, 2000, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_check_nodes(m, 2999), 0);
    ASSERT_EQ(mm_check_nodes(m, 3000), 1);   /* node 2 silent since 0 */
    ASSERT_EQ(mm_node_get(m, 2)->state, NODE_DEAD);
    ASSERT_EQ(mm_node_get(m, 1)->state, NODE_ALIVE);
    ASSERT_EQ(mm_node_heartbeat(m, 2, 0, 3001, err, sizeof err), PROTO_NODEDEAD);
    ASSERT_STREQ(err, "node 2 left the cluster (heartbeat timeout): register again");
    mm_destroy(m);
}

/* ---- placement ---- */

static void test_replicas_on_distinct_nodes(void) {
    master_meta *m = cluster(3, 64 * KB);
    ASSERT(m);
    object *o = put(m, "k", 1000, 3, 0);
    ASSERT(o);
    ASSERT_EQ(o->nreplicas, 3);
    uint32_t seen = 0;
    for (uint32_t i = 0; i < 3; i++) {
        ASSERT_EQ(REPS(o)[i].nextents, 1);
        ASSERT_EQ(REPS(o)[i].extents[0].length, 1000);
        seen |= 1u << REPS(o)[i].extents[0].node;
    }
    ASSERT_EQ(seen, (1u << 1) | (1u << 2) | (1u << 3));
    ASSERT_EQ(mm_put_start(m, "k2", 2, 1000, 4, 0, &o, err, sizeof err), PROTO_NOREPLICAS);
    ASSERT(strncmp(err, "4 replicas need", 15) == 0);
    mm_destroy(m);
}

static void test_striping_layout(void) {
    master_meta *m = cluster(4, 64 * KB);
    ASSERT(m);
    object *o = put(m, "big", 5000, 2, 0);   /* above 4K: 5 slices of 1K, last 904 */
    ASSERT(o);
    ASSERT_EQ(o->nreplicas, 2);
    uint32_t nodes[2][8];
    for (int r = 0; r < 2; r++) {
        const obj_replica *rep = &REPS(o)[r];
        ASSERT_EQ(rep->nextents, 5);
        uint64_t total = 0;
        for (uint32_t i = 0; i < 5; i++) {
            ASSERT_EQ(rep->extents[i].length, i < 4 ? 1024 : 904);
            /* slices alternate between the replica's two nodes */
            ASSERT_EQ(rep->extents[i].node, rep->extents[i % 2].node);
            total += rep->extents[i].length;
        }
        ASSERT_EQ(total, 5000);
        ASSERT_EQ(replica_node_set(rep, nodes[r], 8), 2);
    }
    /* no node holds slices of both replicas */
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) ASSERT(nodes[0][a] != nodes[1][b]);
    /* with 3 nodes and 2 replicas each replica stripes over one node */
    master_meta *m3 = cluster(3, 64 * KB);
    object *o3 = put(m3, "big", 5000, 2, 0);
    ASSERT(o3);
    uint32_t n3[8];
    ASSERT_EQ(replica_node_set(&REPS(o3)[0], n3, 8), 1);
    ASSERT_EQ(replica_node_set(&REPS(o3)[1], n3, 8), 1);
    mm_destroy(m3);
    mm_destroy(m);
}

static void test_balance_most_free_first(void) {
    master_meta *m = cluster(3, 64 * KB);
    ASSERT(m);
    uint32_t hits[4] = {0};
    for (int i = 0; i < 9; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        object *o = put(m, key, 1024, 1, 0);
        ASSERT(o);
        hits[REPS(o)[0].extents[0].node]++;
    }
    ASSERT_EQ(hits[1], 3);
    ASSERT_EQ(hits[2], 3);
    ASSERT_EQ(hits[3], 3);
    /* a bigger node with more free space gets the next object */
    const char *addrs[] = {"127.0.0.1:9999"};
    uint32_t id;
    ASSERT_EQ(mm_node_register(m, 1024 * KB, addrs, 1, 0, &id, err, sizeof err), PROTO_OK);
    object *o = put(m, "next", 1024, 1, 0);
    ASSERT(o);
    ASSERT_EQ(REPS(o)[0].extents[0].node, id);
    mm_destroy(m);
}

/* With many nodes placement keeps its order of the nodes between puts
 * (placement.c): still most free first, so equal puts spread evenly; a
 * release (a remove) makes its node the emptiest again and the next put
 * goes there; a suspect or dead node gets nothing. */
static void test_placement_order_kept(void) {
    enum { N = 200, PUTS = 2000 };
    master_meta *m = cluster(N, 64 * KB);
    ASSERT(m);
    char key[32];
    for (int i = 0; i < PUTS; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ASSERT(put(m, key, 1024, 2, 0));
    }
    for (uint32_t id = 1; id <= N; id++) ASSERT_EQ(node_used(m, id), PUTS * 2 / N * 1024);
    object *o = mm_find(m, "k7", 2);
    ASSERT(o);
    uint32_t freed = REPS(o)[0].extents[0].node, other = REPS(o)[1].extents[0].node;
    ASSERT_EQ(mm_remove(m, "k7", 2, 1, err, sizeof err), PROTO_OK);
    o = put(m, "after-remove", 1024, 2, 1);
    ASSERT(o);
    uint32_t got[2] = {REPS(o)[0].extents[0].node, REPS(o)[1].extents[0].node};
    ASSERT((got[0] == freed && got[1] == other) || (got[0] == other && got[1] == freed));
    /* the emptiest nodes now: every one but the two just used; one suspect, one dead */
    uint32_t skip1 = freed % N + 1, skip2 = (freed + 1) % N + 1;
    if (skip1 == other) skip1 = (freed + 2) % N + 1;
    if (skip2 == other) skip2 = (freed + 3) % N + 1;
    ASSERT_EQ(mm_node_suspect(m, skip1, 2, err, sizeof err), PROTO_OK);
    mm_node_fail(m, skip2, "test", 2);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "late%d", i);
        o = put(m, key, 1024, 1, 3);
        ASSERT(o);
        ASSERT(REPS(o)[0].extents[0].node != skip1);
        ASSERT(REPS(o)[0].extents[0].node != skip2);
    }
    mm_destroy(m);
}

static void test_placement_errors(void) {
    mm_config c = test_config();
    master_meta *empty = mm_create(&c);
    object *o;
    ASSERT_EQ(mm_put_start(empty, "k", 1, 10, 1, 0, &o, err, sizeof err), PROTO_NOREPLICAS);
    mm_destroy(empty);

    master_meta *m = cluster(2, 4 * KB);
    ASSERT(m);
    ASSERT_EQ(mm_put_start(m, "k", 1, 0, 1, 0, &o, err, sizeof err), PROTO_ERR);
    ASSERT(strstr(err, "size"));
    ASSERT_EQ(mm_put_start(m, "k", 1, 10, 0, 0, &o, err, sizeof err), PROTO_ERR);
    ASSERT_EQ(mm_put_start(m, "", 0, 10, 1, 0, &o, err, sizeof err), PROTO_ERR);
    /* 4K is not above the stripe threshold: one extent that no node can hold */
    ASSERT(put(m, "a", 1024, 2, 0));
    ASSERT_EQ(mm_put_start(m, "huge", 4, 4 * KB, 1, 0, &o, err, sizeof err), PROTO_NOSPACE);
    ASSERT(strstr(err, "largest free extent"));
    /* an absurd size is refused from the free totals, before any layout */
    ASSERT_EQ(mm_put_start(m, "giant", 5, 1ULL << 49, 1, 0, &o, err, sizeof err), PROTO_NOSPACE);
    ASSERT(strncmp(err, "cluster full", 12) == 0 && strstr(err, "exceed"));
    for (int i = 0; i < 5; i++) {
        char key[16];
        snprintf(key, sizeof key, "f%d", i);
        ASSERT(put(m, key, 1024, 1, 0));
    }
    /* room for one 1K copy: two replicas fail and nothing stays taken */
    ASSERT_EQ(mm_put_start(m, "y", 1, 1024, 2, 0, &o, err, sizeof err), PROTO_NOSPACE);
    ASSERT(strncmp(err, "cluster full", 12) == 0);
    ASSERT_EQ(node_used(m, 1) + node_used(m, 2), 7 * KB);
    ASSERT(put(m, "x", 1024, 1, 0));
    /* the cluster is full: a put fails cleanly and stored objects stay */
    ASSERT_EQ(mm_put_start(m, "z", 1, 1024, 1, 0, &o, err, sizeof err), PROTO_NOSPACE);
    ASSERT(err[0] != 0);
    ASSERT_EQ(node_used(m, 1) + node_used(m, 2), 8 * KB);
    ASSERT(mm_exists(m, "a", 1));
    uint64_t lease;
    ASSERT_EQ(mm_get(m, "a", 1, 0, &o, &lease, err, sizeof err), PROTO_OK);
    ASSERT_EQ(o->size, 1024);
    mm_destroy(m);
}

/* ---- life cycle ---- */

static void test_exists_in_flight(void) {
    master_meta *m = cluster(1, 64 * KB);
    ASSERT(m);
    object *o;
    uint64_t lease;
    ASSERT_EQ(mm_put_start(m, "k", 1, 100, 1, 0, &o, err, sizeof err), PROTO_OK);
    ASSERT_EQ(o->state, OBJ_PENDING);
    ASSERT_EQ(mm_write_expiry(m, o), 1000);
    ASSERT_EQ(mm_put_start(m, "k", 1, 100, 1, 0, &o, err, sizeof err), PROTO_EXISTS);
    ASSERT_STREQ(err, "key is being written");
    ASSERT(!mm_exists(m, "k", 1));
    ASSERT_EQ(mm_get(m, "k", 1, 0, &o, &lease, err, sizeof err), PROTO_NOTFOUND);
    ASSERT_EQ(mm_remove(m, "k", 1, 0, err, sizeof err), PROTO_ERR);
    ASSERT_EQ(mm_put_end(m, "nope", 4, 1, NULL, 0, err, sizeof err), PROTO_NOTFOUND);
    ASSERT_EQ(mm_put_end(m, "k", 1, 77, NULL, 10, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_put_end(m, "k", 1, 77, NULL, 10, err, sizeof err), PROTO_ERR);
    ASSERT_EQ(mm_put_revoke(m, "k", 1, 10, err, sizeof err), PROTO_ERR);
    ASSERT(mm_exists(m, "k", 1));
    ASSERT_EQ(mm_put_start(m, "k", 1, 100, 1, 0, &o, err, sizeof err), PROTO_EXISTS);
    ASSERT_STREQ(err, "key already exists");
    ASSERT_EQ(mm_get(m, "k", 1, 20, &o, &lease, err, sizeof err), PROTO_OK);
    ASSERT_EQ(o->crc, 77);
    ASSERT_EQ(lease, 20 + 5000);
    ASSERT_EQ(mm_remove(m, "k", 1, 30, err, sizeof err), PROTO_OK);
    ASSERT(!mm_exists(m, "k", 1));
    ASSERT_EQ(mm_remove(m, "k", 1, 30, err, sizeof err), PROTO_NOTFOUND);
    mm_destroy(m);
}

static void test_timeout_revokes_and_frees(void) {
    master_meta *m = cluster(1, 2 * KB);
    ASSERT(m);
    object *o;
    ASSERT_EQ(mm_put_start(m, "slow", 4, 2 * KB, 1, 0, &o, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_put_start(m, "other", 5, 1 * KB, 1, 10, &o, err, sizeof err), PROTO_NOSPACE);
    mm_sweep(m, 999);
    ASSERT(mm_find(m, "slow", 4));
    mm_sweep(m, 1000);
    ASSERT(!mm_find(m, "slow", 4));
    ASSERT_EQ(node_used(m, 1), 0);
    mm_stats st;
    stats(m, &st);
    ASSERT_EQ(st.puts_timed_out, 1);
    ASSERT_EQ(mm_put_start(m, "slow", 4, 2 * KB, 1, 1000, &o, err, sizeof err), PROTO_OK);
    /* put_end after the caps expired, before any sweep: revoked on the spot */
    ASSERT_EQ(mm_put_end(m, "slow", 4, 1, NULL, 2000, err, sizeof err), PROTO_TIMEDOUT);
    ASSERT(strstr(err, "timed out"));
    ASSERT_EQ(node_used(m, 1), 0);
    mm_destroy(m);
}

static void test_revoke_frees_at_once_with_a_newer_grant(void) {
    master_meta *m = cluster(1, 2 * KB);
    ASSERT(m);
    object *o;
    ASSERT_EQ(mm_put_start(m, "k", 1, 2 * KB, 1, 0, &o, err, sizeof err), PROTO_OK);
    uint64_t first = mm_obj_issued(o);
    ASSERT_EQ(mm_put_revoke(m, "k", 1, 100, err, sizeof err), PROTO_OK);
    ASSERT(!mm_find(m, "k", 1));
    /* the write caps pin nothing: key and bytes are free at once, and the
     * next grant is newer, so the nodes refuse the old one there */
    ASSERT_EQ(node_used(m, 1), 0);
    ASSERT_EQ(mm_put_start(m, "k", 1, 2 * KB, 1, 100, &o, err, sizeof err), PROTO_OK);
    ASSERT(mm_obj_issued(o) > first);
    /* same millisecond: still strictly newer */
    uint64_t second = mm_obj_issued(o);
    ASSERT_EQ(mm_put_revoke(m, "k", 1, 100, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_put_start(m, "k", 1, 2 * KB, 1, 100, &o, err, sizeof err), PROTO_OK);
    ASSERT(mm_obj_issued(o) > second);
    mm_stats st;
    stats(m, &st);
    ASSERT_EQ(st.puts_revoked, 2);
    ASSERT_EQ(st.held_extents, 0);
    mm_destroy(m);
}

static void test_returned_lease_frees_at_once(void) {
    master_meta *m = cluster(1, 2 * KB);
    ASSERT(m);
    object *o;
    uint64_t l1, l2;
    ASSERT(put(m, "k", 2 * KB, 1, 0));
    ASSERT_EQ(mm_get(m, "k", 1, 1000, &o, &l1, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_get(m, "k", 1, 1500, &o, &l2, err, sizeof err), PROTO_OK);
    /* a lease nobody holds, and one given back, count for nothing */
    ASSERT_EQ(mm_lease_return(m, "k", 1, 4242, 1600), 0);
    ASSERT_EQ(mm_lease_return(m, "k", 1, l1, 1600), 1);
    ASSERT_EQ(mm_lease_return(m, "k", 1, l1, 1600), 0);
    ASSERT_EQ(mm_hold_until(o, 1600), l2);
    ASSERT_EQ(mm_lease_return(m, "k", 1, l2, 1700), 1);
    ASSERT_EQ(mm_hold_until(o, 1700), 0);
    ASSERT_EQ(mm_remove(m, "k", 1, 1800, err, sizeof err), PROTO_OK);
    ASSERT_EQ(node_used(m, 1), 0);
    mm_stats st;
    stats(m, &st);
    ASSERT_EQ(st.held_extents, 0);
    /* with one read still out, the bytes wait for exactly that lease */
    ASSERT(put(m, "k", 2 * KB, 1, 2000));
    ASSERT_EQ(mm_get(m, "k", 1, 2000, &o, &l1, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_get(m, "k", 1, 2100, &o, &l2, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_lease_return(m, "k", 1, l2, 2200), 1);
    ASSERT_EQ(mm_remove(m, "k", 1, 2300, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_release_held(m, l1 - 1), 0);
    ASSERT_EQ(mm_release_held(m, l1), 1);
    mm_destroy(m);
}

/* ---- pins on prefix hits (core/pinset.h) ---- */

static pin_key key_item(const char *k) { return (pin_key){k, strlen(k)}; }

/* A pinned key is not removed until its pin is released or runs out;
 * two pins on one key both must go; an unpinned key goes as before. */
static void test_pin_refuses_remove_until_release_or_expiry(void) {
    master_meta *m = cluster(1, 64 * KB);
    ASSERT(m);
    pinset *p = mm_pins_of(m);
    ASSERT(put(m, "a", KB, 1, 0) && put(m, "b", KB, 1, 0) && put(m, "c", KB, 1, 0));
    pin_key ab[2] = {key_item("a"), key_item("b")};
    ASSERT_EQ(pinset_add(p, 7, 1, ab, 2, 1000, 0, err, sizeof err), 0);
    ASSERT_EQ(pinset_add(p, 8, 1, ab, 1, 5000, 0, err, sizeof err), 0);   /* "a" twice */
    ASSERT_EQ(mm_remove(m, "a", 1, 10, err, sizeof err), PROTO_TRYAGAIN);
    ASSERT(strstr(err, "pinned"));
    ASSERT_EQ(mm_remove(m, "b", 1, 10, err, sizeof err), PROTO_TRYAGAIN);
    ASSERT_EQ(mm_remove(m, "c", 1, 10, err, sizeof err), PROTO_OK);   /* unpinned: unchanged */
    ASSERT(mm_exists(m, "a", 1) && mm_exists(m, "b", 1));
    ASSERT_EQ(pinset_release(p, 7, 20), 2);
    ASSERT_EQ(pinset_release(p, 7, 20), 0);                          /* once */
    ASSERT_EQ(mm_remove(m, "b", 1, 30, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_remove(m, "a", 1, 30, err, sizeof err), PROTO_TRYAGAIN);   /* pin 8 still holds it */
    ASSERT_EQ(mm_remove(m, "a", 1, 4999, err, sizeof err), PROTO_TRYAGAIN);
    ASSERT_EQ(mm_remove(m, "a", 1, 5000, err, sizeof err), PROTO_OK);       /* its time ran out */
    pinset_stats st;
    pinset_get_stats(p, &st);
    ASSERT_EQ(st.pins, 0);
    ASSERT_EQ(st.keys, 0);
    ASSERT_EQ(st.refused, 4);
    ASSERT_EQ(pinset_release(p, 8, 6000), 0);   /* expired: nothing to release */
    mm_destroy(m);
}

/* Distinct keys "k<i>" for the bounds (a pin holds each key once). */
static pin_key *many_keys(size_t n, size_t from) {
    pin_key *v = xmalloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        char *k = xmalloc(16);
        v[i] = (pin_key){k, (size_t)snprintf(k, 16, "k%zu", from + i)};
    }
    return v;
}

static void free_keys(pin_key *v, size_t n) {
    for (size_t i = 0; i < n; i++) free((void *)v[i].key);
    free(v);
}

/* The same id adds keys (a lookup in chunks) and keeps the later time;
 * a key it holds already is not added again (a re-pin); the bounds per
 * owner and in all refuse a pin whole. */
static void test_pin_bounds(void) {
    master_meta *m = cluster(1, 64 * KB);
    ASSERT(m);
    pinset *p = mm_pins_of(m);
    ASSERT(put(m, "a", KB, 1, 0) && put(m, "b", KB, 1, 0));
    pin_key a = key_item("a"), b = key_item("b"), aab[3] = {a, a, b};
    ASSERT_EQ(pinset_add(p, 0, 1, &a, 1, 100, 0, err, sizeof err), -1);   /* id 0 */
    ASSERT_EQ(pinset_add(p, 5, 1, &a, 1, 100, 0, err, sizeof err), 0);
    ASSERT_EQ(pinset_add(p, 5, 2, &b, 1, 900, 50, err, sizeof err), 0);   /* another connection adds */
    ASSERT_EQ(pinset_add(p, 5, 1, aab, 3, 900, 60, err, sizeof err), 0);  /* held already: no more */
    ASSERT_EQ(mm_remove(m, "a", 1, 500, err, sizeof err), PROTO_TRYAGAIN);       /* the later time holds both */
    ASSERT_EQ(pinset_release(p, 5, 600), 2);
    /* owner 1 fills its bound */
    const size_t per = PROTO_PIN_MAX_PER_CONN;
    pin_key *many = many_keys(per, 0);
    ASSERT_EQ(pinset_add(p, 9, 1, many, per, 10000, 1000, err, sizeof err), 0);
    ASSERT_EQ(pinset_add(p, 9, 1, many, per, 10000, 1000, err, sizeof err), 0);   /* again: held, fits */
    ASSERT_EQ(pinset_add(p, 10, 1, &b, 1, 10000, 1000, err, sizeof err), -1);
    ASSERT(strstr(err, "pin limit"));
    ASSERT_EQ(pinset_add(p, 9, 2, &b, 1, 10000, 1000, err, sizeof err), -1);   /* counted to pin 9's owner */
    ASSERT_EQ(pinset_add(p, 11, 2, &b, 1, 10000, 1000, err, sizeof err), 0);   /* another owner may */
    ASSERT_EQ(mm_remove(m, "b", 1, 1000, err, sizeof err), PROTO_TRYAGAIN);
    ASSERT_EQ(pinset_release(p, 9, 2000), per);
    ASSERT_EQ(pinset_add(p, 10, 1, &b, 1, 10000, 2000, err, sizeof err), 0);   /* room again */
    /* the bound over all owners: 16 owners fill it, the next is refused */
    for (uint64_t o = 100; o < 100 + PROTO_PIN_MAX_KEYS / per; o++) {
        int rc = pinset_add(p, o, o, many, per, 10000, 2000, err, sizeof err);
        ASSERT_EQ(rc, o < 99 + PROTO_PIN_MAX_KEYS / per ? 0 : -1);
    }
    pinset_stats st;
    pinset_get_stats(p, &st);
    ASSERT(st.keys <= PROTO_PIN_MAX_KEYS);
    pinset_expire(p, 10000);   /* every pin's time ran out at once */
    pinset_get_stats(p, &st);
    ASSERT_EQ(st.pins, 0);
    ASSERT_EQ(st.keys, 0);
    free_keys(many, per);
    mm_destroy(m);
}

/* Keys are names: one pinned before the table holds it (a new leader
 * that has not heard of it from the nodes yet) is held once it comes. */
static void test_pin_before_the_key(void) {
    master_meta *m = cluster(1, 64 * KB);
    ASSERT(m);
    pin_key a = key_item("later");
    ASSERT_EQ(pinset_add(mm_pins_of(m), 4, 1, &a, 1, 1000, 0, err, sizeof err), 0);
    ASSERT(put(m, "later", KB, 1, 10));
    ASSERT_EQ(mm_remove(m, "later", 5, 20, err, sizeof err), PROTO_TRYAGAIN);
    ASSERT_EQ(mm_remove(m, "later", 5, 1000, err, sizeof err), PROTO_OK);
    mm_destroy(m);
}

/* Garbage collection passes a pinned object over: the put finds no room
 * until the pin goes, then the object is collected for it. */
static void test_pin_stops_collection(void) {
    mm_config c = test_config();
    c.gc_policy = EVICT_LRU;
    master_meta *m = mm_create(&c);
    const char *addrs[] = {"127.0.0.1:9000"};
    uint32_t id;
    ASSERT_EQ(mm_node_register(m, 2 * KB, addrs, 1, 0, &id, err, sizeof err), PROTO_OK);
    ASSERT(put(m, "old", 2 * KB, 1, 0));
    pin_key old = key_item("old");
    ASSERT_EQ(pinset_add(mm_pins_of(m), 3, 1, &old, 1, 60000, 0, err, sizeof err), 0);
    object *o;
    ASSERT_EQ(mm_put_start(m, "new", 3, 2 * KB, 1, 100, &o, err, sizeof err), PROTO_NOSPACE);
    ASSERT(mm_exists(m, "old", 3));
    ASSERT_EQ(pinset_release(mm_pins_of(m), 3, 200), 1);
    ASSERT(put(m, "new", 2 * KB, 1, 300));
    ASSERT(!mm_exists(m, "old", 3));
    mm_destroy(m);
}

/* A reader that gives its lease back after the remove frees the bytes
 * then, not at the lease's expiry; a put that found no room may wait. */
static void test_lease_returned_after_remove(void) {
    master_meta *m = cluster(1, 2 * KB);
    ASSERT(m);
    object *o;
    uint64_t l1, l2;
    mm_stats st;
    ASSERT(put(m, "k", 2 * KB, 1, 0));
    ASSERT_EQ(mm_get(m, "k", 1, 100, &o, &l1, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_get(m, "k", 1, 200, &o, &l2, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_remove(m, "k", 1, 300, err, sizeof err), PROTO_OK);
    stats(m, &st);
    ASSERT_EQ(st.held_extents, 1);
    ASSERT_EQ(mm_put_start(m, "n", 1, 2 * KB, 1, 300, &o, err, sizeof err), PROTO_NOSPACE);
    /* held by leases their readers may give back: worth a wait */
    ASSERT(mm_space_due(m, 2 * KB, 1, 301));
    ASSERT(!mm_space_due(m, 4 * KB, 1, 301));
    uint64_t freed = mm_space_freed(m);
    ASSERT_EQ(mm_lease_return(m, "k", 1, l2, 400), 1);
    ASSERT_EQ(node_used(m, 1), 2 * KB);   /* one read still out */
    ASSERT_EQ(mm_next_release(m), l1);
    ASSERT_EQ(mm_lease_return(m, "k", 1, l2, 400), 0);
    ASSERT_EQ(mm_lease_return(m, "k", 1, l1, 500), 1);
    ASSERT_EQ(node_used(m, 1), 0);
    ASSERT(mm_space_freed(m) > freed);
    stats(m, &st);
    ASSERT_EQ(st.held_extents, 0);
    ASSERT_EQ(mm_next_release(m), UINT64_MAX);
    ASSERT(!mm_space_due(m, 2 * KB, 1, 501));   /* nothing held: nothing to wait for */
    /* a lease of a removed generation and of the live one alike: neither
     * is given back (it could be either's reader) */
    ASSERT(put(m, "j", KB, 1, 1000));
    ASSERT_EQ(mm_get(m, "j", 1, 1000, &o, &l1, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_remove(m, "j", 1, 1000, err, sizeof err), PROTO_OK);
    ASSERT(put(m, "j", KB, 1, 1000));
    ASSERT_EQ(mm_get(m, "j", 1, 1000, &o, &l2, err, sizeof err), PROTO_OK);
    ASSERT_EQ(l1, l2);
    ASSERT_EQ(mm_lease_return(m, "j", 1, l1, 1100), 0);
    ASSERT_EQ(node_used(m, 1), 2 * KB);
    /* a node that dies forgets its held extents and their tombs */
    mm_node_fail(m, 1, "test", 1200);
    stats(m, &st);
    ASSERT_EQ(st.held_extents, 0);
    ASSERT_EQ(mm_lease_return(m, "j", 1, l1, 1300), 0);
    mm_destroy(m);
}

static void test_many_leases_pin_until_expiry(void) {
    master_meta *m = cluster(1, 2 * KB);
    ASSERT(m);
    object *o;
    uint64_t l = 0, last = 0;
    ASSERT(put(m, "k", 2 * KB, 1, 0));
    for (int i = 0; i < MM_LEASES + 4; i++) {
        ASSERT_EQ(mm_get(m, "k", 1, 100 + (uint64_t)i, &o, &l, err, sizeof err), PROTO_OK);
        last = l;
    }
    /* the untracked ones cannot be given back: they pin until they expire */
    ASSERT_EQ(mm_lease_return(m, "k", 1, last, 200), 0);
    ASSERT_EQ(mm_hold_until(o, 200), last);
    mm_destroy(m);
}

static void test_lease_quarantine_delays_reuse(void) {
    master_meta *m = cluster(1, 2 * KB);
    ASSERT(m);
    object *o;
    uint64_t lease;
    ASSERT(put(m, "k", 2 * KB, 1, 0));
    ASSERT_EQ(mm_get(m, "k", 1, 2000, &o, &lease, err, sizeof err), PROTO_OK);
    ASSERT_EQ(lease, 7000);
    ASSERT_EQ(mm_remove(m, "k", 1, 3000, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_put_start(m, "n", 1, 2 * KB, 1, 3000, &o, err, sizeof err), PROTO_NOSPACE);
    ASSERT_EQ(mm_release_held(m, 6999), 0);
    ASSERT_EQ(mm_put_start(m, "n", 1, 2 * KB, 1, 6999, &o, err, sizeof err), PROTO_NOSPACE);
    ASSERT_EQ(mm_release_held(m, 7000), 1);
    ASSERT_EQ(mm_put_start(m, "n", 1, 2 * KB, 1, 7000, &o, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_put_end(m, "n", 1, 1, NULL, 7000, err, sizeof err), PROTO_OK);
    /* never read and write caps expired: the space is free right away */
    ASSERT_EQ(mm_remove(m, "n", 1, 8000, err, sizeof err), PROTO_OK);
    ASSERT_EQ(node_used(m, 1), 0);
    mm_destroy(m);
}

static void test_batch_forms(void) {
    master_meta *m = cluster(2, 64 * KB);
    ASSERT(m);
    mm_item it[3] = {{.key = "a", .keylen = 1, .size = 10},
                     {.key = "b", .keylen = 1, .size = 0},
                     {.key = "a", .keylen = 1, .size = 10}};
    mm_put_start_batch(m, it, 3, 2, 0);
    ASSERT_EQ(it[0].status, PROTO_OK);
    ASSERT_EQ(it[0].obj->nreplicas, 2);
    ASSERT_EQ(it[1].status, PROTO_ERR);
    ASSERT_EQ(it[2].status, PROTO_EXISTS);
    mm_item end[2] = {{.key = "a", .keylen = 1, .crc = 5}, {.key = "b", .keylen = 1, .crc = 6}};
    mm_put_end_batch(m, end, 2, 1);
    ASSERT_EQ(end[0].status, PROTO_OK);
    ASSERT_EQ(end[1].status, PROTO_NOTFOUND);
    mm_item get[2] = {{.key = "a", .keylen = 1}, {.key = "zz", .keylen = 2}};
    mm_get_batch(m, get, 2, 2);
    ASSERT_EQ(get[0].status, PROTO_OK);
    ASSERT_EQ(get[0].obj->crc, 5);
    ASSERT_EQ(get[0].lease_until, 5002);
    ASSERT_EQ(get[1].status, PROTO_NOTFOUND);
    mm_exists_batch(m, get, 2);
    ASSERT_EQ(get[0].status, PROTO_OK);
    ASSERT_EQ(get[1].status, PROTO_NOTFOUND);
    mm_destroy(m);
}

/* ---- node death, re-replication, drain ---- */

static uint32_t node_of(const object *o, uint32_t replica) {
    return REPS(o)[replica].extents[0].node;
}

static void heartbeat_all_but(master_meta *m, uint32_t dead, uint64_t now) {
    for (uint32_t id = 1; id <= mm_node_count(m); id++)
        if (id != dead) mm_node_heartbeat(m, id, 0, now, err, sizeof err);
}

static void test_dead_node_drops_replicas_and_counts_lost(void) {
    master_meta *m = cluster(3, 64 * KB);
    ASSERT(m);
    object *two = put(m, "two", 100, 2, 0);
    ASSERT(two);
    uint32_t victim = node_of(two, 0);
    /* a single-replica object on the victim too */
    object *one = NULL;
    for (int i = 0; i < 3 && !one; i++) {
        char key[16];
        snprintf(key, sizeof key, "one%d", i);
        object *o = put(m, key, 100, 1, 0);
        ASSERT(o);
        if (node_of(o, 0) == victim) one = o;
    }
    ASSERT(one);
    char onekey[8];
    memcpy(onekey, one->key, one->keylen + 1);
    heartbeat_all_but(m, victim, 2500);
    ASSERT_EQ(mm_check_nodes(m, 3000), 1);
    ASSERT_EQ(mm_node_get(m, victim)->state, NODE_DEAD);
    ASSERT(!mm_find(m, onekey, strlen(onekey)));
    object *o;
    uint64_t lease;
    ASSERT_EQ(mm_get(m, "two", 3, 3000, &o, &lease, err, sizeof err), PROTO_OK);
    ASSERT_EQ(o->nreplicas, 1);
    ASSERT(node_of(o, 0) != victim);
    mm_stats st;
    stats(m, &st);
    ASSERT_EQ(st.objects_lost, 1);
    ASSERT_EQ(st.nodes_dead, 1);
    ASSERT_EQ(st.under_replicated, 1);
    mm_destroy(m);
}

static void test_rereplication_task_flow(void) {
    master_meta *m = cluster(3, 64 * KB);
    ASSERT(m);
    object *o = put(m, "obj", 5000, 2, 0);   /* striped: 5 slices per replica */
    ASSERT(o);
    uint32_t used[3], nused = 0;
    nused += replica_node_set(&REPS(o)[0], used, 3);
    nused += replica_node_set(&REPS(o)[1], used + nused, 3 - nused);
    ASSERT_EQ(nused, 2);   /* 3 nodes, 2 replicas: one node each */
    uint32_t spare = 6 - used[0] - used[1];
    mm_node_fail(m, used[0], "test", 100);
    ASSERT_EQ(o->nreplicas, 1);
    ASSERT_EQ(mm_repair(m, 100), 1);
    ASSERT_EQ(mm_repair(m, 100), 0);   /* one copy in flight at a time */
    mm_task *t[4];
    ASSERT_EQ(mm_node_tasks(m, used[1], t, 4), 0);
    ASSERT_EQ(mm_node_tasks(m, spare, t, 4), 1);
    ASSERT_EQ(mm_node_tasks(m, spare, t, 4), 0);   /* handed out once */
    uint64_t src = 0, dst = 0;
    for (uint32_t i = 0; i < t[0]->nsrc; i++) {
        ASSERT_EQ(t[0]->src[i].node, used[1]);
        src += t[0]->src[i].length;
    }
    for (uint32_t i = 0; i < t[0]->ndst; i++) dst += t[0]->dst[i].length;
    ASSERT_EQ(src, 5000);
    ASSERT_EQ(dst, 5000);
    ASSERT_EQ(mm_task_expiry(t[0]), 1100);
    ASSERT(t[0]->obj == o);
    /* not visible before the copy is done */
    ASSERT_EQ(o->nreplicas, 1);
    uint64_t id = t[0]->id;
    ASSERT_EQ(mm_copy_done(m, used[1], id, 1, 200, err, sizeof err), PROTO_ERR);
    ASSERT_EQ(mm_copy_done(m, spare, id + 100, 1, 200, err, sizeof err), PROTO_NOTFOUND);
    ASSERT_EQ(mm_copy_done(m, spare, id, 1, 200, err, sizeof err), PROTO_OK);
    ASSERT_EQ(o->nreplicas, 2);
    ASSERT_EQ(node_of(o, 1), spare);
    mm_stats st;
    stats(m, &st);
    ASSERT_EQ(st.under_replicated, 0);
    ASSERT_EQ(st.tasks_pending, 0);
    ASSERT_EQ(st.tasks_done, 1);
    mm_destroy(m);
}

static void test_copy_failure_and_expiry_retry(void) {
    master_meta *m = cluster(3, 64 * KB);
    ASSERT(m);
    object *o = put(m, "obj", 1000, 2, 0);
    ASSERT(o);
    uint32_t spare = 6 - node_of(o, 0) - node_of(o, 1);
    mm_node_fail(m, node_of(o, 0), "test", 0);
    uint64_t before = node_used(m, spare);
    ASSERT_EQ(mm_repair(m, 0), 1);
    mm_task *t;
    ASSERT_EQ(mm_node_tasks(m, spare, &t, 1), 1);
    ASSERT(node_used(m, spare) > before);
    ASSERT_EQ(mm_copy_done(m, spare, t->id, 0, 10, err, sizeof err), PROTO_OK);
    ASSERT_EQ(o->nreplicas, 1);
    /* the failed destination is held until its write caps expire */
    mm_release_held(m, 999);
    ASSERT(node_used(m, spare) > before);
    mm_release_held(m, 1000);
    ASSERT_EQ(node_used(m, spare), before);
    /* a new attempt, which then times out */
    ASSERT_EQ(mm_repair(m, 1000), 1);
    ASSERT_EQ(mm_node_tasks(m, spare, &t, 1), 1);
    uint64_t id = t->id;
    mm_sweep(m, 1999);
    ASSERT_EQ(mm_copy_done(m, spare, id, 1, 1999, err, sizeof err), PROTO_OK);
    ASSERT_EQ(o->nreplicas, 2);
    mm_stats st;
    stats(m, &st);
    ASSERT_EQ(st.tasks_failed, 1);
    mm_destroy(m);
}

/* A drain of thousands of small objects is one wave: every copy is
 * scheduled in one pass, handed out PROTO_MAX_TASKS per reply, and
 * outcomes in any order (some failed, some late) each settle their own
 * object; a failed copy's object is scheduled again, the rest moved. */
static void test_drain_wave_of_small_objects(void) {
    enum { N = 5000 };
    master_meta *m = cluster(2, 4 * 1024 * KB);
    ASSERT(m);
    object **objs = calloc(N, sizeof *objs);
    uint32_t d = 0;
    int on_d = 0;
    for (int i = 0; i < N; i++) {
        char key[16];
        snprintf(key, sizeof key, "s%d", i);
        ASSERT((objs[i] = put(m, key, 64, 1, 0)) != NULL);
        if (!d) d = node_of(objs[i], 0);
        on_d += node_of(objs[i], 0) == d;
    }
    uint32_t to = 3 - d;
    ASSERT_EQ(mm_node_drain(m, d, 10, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_repair(m, 10), on_d);   /* all in one pass */
    mm_task **t = calloc(on_d, sizeof *t);
    size_t got = 0, n;
    while ((n = mm_node_tasks(m, to, t + got, PROTO_MAX_TASKS)) > 0) {
        ASSERT(n <= PROTO_MAX_TASKS);
        got += n;
    }
    ASSERT_EQ(got, (size_t)on_d);
    /* backwards; every 7th fails */
    int failed = 0;
    for (size_t i = got; i-- > 0;) {
        int ok = i % 7 != 0;
        failed += !ok;
        ASSERT_EQ(mm_copy_done(m, to, t[i]->id, ok, 20, err, sizeof err), PROTO_OK);
    }
    mm_stats st;
    stats(m, &st);
    ASSERT_EQ(st.tasks_pending, 0);
    ASSERT_EQ(st.tasks_done, (uint64_t)(on_d - failed));
    ASSERT_EQ(st.tasks_failed, (uint64_t)failed);
    ASSERT_EQ(mm_repair(m, 30), failed);   /* only the failed ones again */
    ASSERT_EQ(mm_node_tasks(m, to, t, PROTO_MAX_TASKS), (size_t)failed);
    for (int i = 0; i < failed; i++) ASSERT_EQ(mm_copy_done(m, to, t[i]->id, 1, 40, err, sizeof err), PROTO_OK);
    mm_repair(m, 50);
    ASSERT_EQ(mm_node_get(m, d)->state, NODE_DEAD);
    for (int i = 0; i < N; i++) ASSERT_EQ(node_of(objs[i], 0), to);
    stats(m, &st);
    ASSERT_EQ(st.objects_lost, 0);
    ASSERT_EQ(st.tasks_pending, 0);
    free(t);
    free(objs);
    mm_destroy(m);
}

static void test_task_timeout(void) {
    master_meta *m = cluster(3, 64 * KB);
    ASSERT(m);
    object *o = put(m, "obj", 1000, 2, 0);
    ASSERT(o);
    mm_node_fail(m, node_of(o, 0), "test", 0);
    ASSERT_EQ(mm_repair(m, 0), 1);
    mm_sweep(m, 999);
    mm_stats st;
    stats(m, &st);
    ASSERT_EQ(st.tasks_pending, 1);
    /* deadline passes: the task fails and the next pass schedules anew */
    mm_sweep(m, 1000);
    stats(m, &st);
    ASSERT_EQ(st.tasks_failed, 1);
    ASSERT_EQ(st.tasks_pending, 1);
    ASSERT_EQ(o->nreplicas, 1);
    mm_destroy(m);
}

static void test_drain_moves_then_leaves(void) {
    master_meta *m = cluster(3, 64 * KB);
    ASSERT(m);
    object *o = put(m, "obj", 1000, 1, 0);
    ASSERT(o);
    uint32_t d = node_of(o, 0);
    ASSERT_EQ(mm_node_drain(m, d, 10, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_node_get(m, d)->state, NODE_DRAINING);
    for (int i = 0; i < 6; i++) {   /* nothing new lands on a draining node */
        char key[16];
        snprintf(key, sizeof key, "n%d", i);
        object *n = put(m, key, 100, 2, 10);
        ASSERT(n);
        ASSERT(node_of(n, 0) != d && node_of(n, 1) != d);
    }
    ASSERT_EQ(mm_repair(m, 20), 1);
    mm_task *t;
    uint32_t target = 0;
    for (uint32_t id = 1; id <= 3 && !target; id++)
        if (mm_node_tasks(m, id, &t, 1) == 1) target = id;
    ASSERT(target && target != d);
    ASSERT_EQ(t->src[0].node, d);   /* the draining node is still the source */
    mm_repair(m, 30);
    ASSERT_EQ(mm_node_get(m, d)->state, NODE_DRAINING);   /* waits for the copy */
    ASSERT_EQ(mm_copy_done(m, target, t->id, 1, 40, err, sizeof err), PROTO_OK);
    ASSERT_EQ(o->nreplicas, 1);
    ASSERT_EQ(node_of(o, 0), target);
    mm_repair(m, 50);
    ASSERT_EQ(mm_node_get(m, d)->state, NODE_DEAD);
    ASSERT_STREQ(mm_node_get(m, d)->dead_reason, "drained");
    mm_stats st;
    stats(m, &st);
    ASSERT_EQ(st.objects_lost, 0);
    ASSERT_EQ(mm_node_drain(m, d, 60, err, sizeof err), PROTO_NODEDEAD);
    mm_destroy(m);
}

static void test_drain_without_room_loses_only_sole_copies(void) {
    master_meta *m = cluster(1, 64 * KB);
    ASSERT(m);
    ASSERT(put(m, "solo", 1000, 1, 0));
    ASSERT_EQ(mm_node_drain(m, 1, 0, err, sizeof err), PROTO_OK);
    mm_repair(m, 0);
    ASSERT_EQ(mm_node_get(m, 1)->state, NODE_DEAD);
    mm_stats st;
    stats(m, &st);
    ASSERT_EQ(st.objects_lost, 1);
    mm_destroy(m);
}

/* ---- rebuild ---- */

/* Reports for every extent of every object in m, as nodes would send. */
static size_t reports_of(master_meta *m, const char *const *keys, size_t nkeys, mm_report *out) {
    size_t n = 0;
    for (size_t k = 0; k < nkeys; k++) {
        object *o = mm_find(m, keys[k], strlen(keys[k]));
        for (uint32_t r = 0; o && r < o->nreplicas; r++) {
            uint64_t pos = 0;
            for (uint32_t i = 0; i < REPS(o)[r].nextents; i++) {
                const obj_extent *e = &REPS(o)[r].extents[i];
                out[n++] = (mm_report){e->node, (uint32_t)o->keylen, o->key, o->size, o->crc, 2, pos,
                                       e->offset, e->length, NULL};
                pos += e->length;
            }
        }
    }
    return n;
}

static void test_rebuild_from_reports(void) {
    master_meta *a = cluster(4, 64 * KB);
    ASSERT(a);
    ASSERT(put(a, "small", 100, 2, 0));
    ASSERT(put(a, "striped", 5000, 2, 0));
    const char *keys[] = {"small", "striped"};
    mm_report rep[32];
    size_t n = reports_of(a, keys, 2, rep);
    ASSERT_EQ(n, 2 + 10);
    /* junk: outside the segment, overlapping a real extent, orphan slice */
    rep[n++] = (mm_report){1, 3, "bad", 10, 1, 1, 0, 64 * KB, 10, NULL};
    rep[n++] = (mm_report){rep[0].node, 4, "zdup", 10, 1, 1, 0, rep[0].seg_off, 10, NULL};
    rep[n++] = (mm_report){2, 6, "orphan", 2048, 1, 1, 1024, 32 * KB, 1024, NULL};

    master_meta *b = cluster(4, 64 * KB);
    mm_rebuild_stats st;
    mm_rebuild(b, rep, n, 50, &st, NULL, NULL);
    ASSERT_EQ(st.objects, 2);
    ASSERT_EQ(st.replicas, 4);
    ASSERT_EQ(st.extents, 12);
    ASSERT_EQ(st.extents_rejected, 3);
    for (uint32_t id = 1; id <= 4; id++) ASSERT_EQ(node_used(a, id), node_used(b, id));
    object *o;
    uint64_t lease;
    ASSERT_EQ(mm_get(b, "striped", 7, 60, &o, &lease, err, sizeof err), PROTO_OK);
    ASSERT_EQ(o->size, 5000);
    ASSERT_EQ(o->crc, 0xabcd);
    ASSERT_EQ(o->nreplicas, 2);
    /* Slices of equal offset hold equal bytes, so any chain is a valid
     * replica; what matters: whole, in order, and on disjoint nodes. */
    uint32_t nodes[2][8];
    for (uint32_t r = 0; r < 2; r++) {
        ASSERT_EQ(REPS(o)[r].nextents, 5);
        uint64_t total = 0;
        for (uint32_t i = 0; i < 5; i++) total += REPS(o)[r].extents[i].length;
        ASSERT_EQ(total, 5000);
        ASSERT_EQ(REPS(o)[r].extents[4].length, 904);
        ASSERT_EQ(replica_node_set(&REPS(o)[r], nodes[r], 8), 2);
    }
    for (int x = 0; x < 2; x++)
        for (int y = 0; y < 2; y++) ASSERT(nodes[0][x] != nodes[1][y]);
    ASSERT(!mm_find(b, "orphan", 6));
    /* claimed space is not handed out again */
    object *fresh = put(b, "fresh", 100, 1, 100);
    ASSERT(fresh);
    for (size_t i = 0; i < 12; i++) {
        const obj_extent *e = &REPS(fresh)[0].extents[0];
        if (e->node != rep[i].node) continue;
        ASSERT(e->offset + e->length <= rep[i].seg_off || rep[i].seg_off + rep[i].length <= e->offset);
    }
    /* a second rebuild of the same reports changes nothing */
    mm_rebuild(b, rep, n, 70, &st, NULL, NULL);
    ASSERT_EQ(st.objects, 0);
    mm_destroy(b);
    mm_destroy(a);
}

/* A new term's grace (mm_repin_grace): objects rebuilt from the nodes
 * may be an old leader's pinned keys whose clients have not pinned them
 * again yet, so their removes are refused (TRYAGAIN) until it ends;
 * objects put in the term are not held, nor anything after the grace. */
static void test_repin_grace_holds_rebuilt(void) {
    master_meta *a = cluster(2, 64 * KB);
    ASSERT(a);
    ASSERT(put(a, "old1", 100, 1, 0));
    ASSERT(put(a, "old2", 100, 1, 0));
    const char *keys[] = {"old1", "old2"};
    mm_report rep[8];
    size_t n = reports_of(a, keys, 2, rep);
    master_meta *b = cluster(2, 64 * KB);
    mm_repin_grace(b, 5000);   /* the term began at 0 */
    mm_rebuild_stats st;
    mm_rebuild(b, rep, n, 50, &st, NULL, NULL);
    ASSERT_EQ(st.objects, 2);
    ASSERT(put(b, "new", 100, 1, 100));   /* put in this term */
    ASSERT_EQ(mm_remove(b, "old1", 4, 200, err, sizeof err), PROTO_TRYAGAIN);
    ASSERT(strstr(err, "pin again"));
    ASSERT_EQ(mm_remove(b, "new", 3, 200, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_repin_left(b, mm_find(b, "old2", 4), 4000), 1000);
    ASSERT_EQ(mm_remove(b, "old1", 4, 5000, err, sizeof err), PROTO_OK);   /* the grace is over */
    ASSERT_EQ(mm_repin_left(b, mm_find(b, "old2", 4), 5000), 0);
    mm_destroy(b);
    mm_destroy(a);
}

/* Disk records of an object striped over nodes 1 and 2 (each node's
 * share reported piece by piece, where each lies in the object) beside a
 * whole record on node 3: the pieces chain into one disk replica of the
 * striped layout, claiming no segment space. With node 2's share
 * missing, or a piece of node 1's missing, no replica of the shares is
 * whole: its pieces are refused (their nodes drop the records), the
 * object stands on the whole record, or is not built without it. */
static void count_refused(const mm_report *r, void *ctx) { (*(int *)ctx) += r->seg_off == MM_ON_DISK; }

static void test_rebuild_disk_shares(void) {
    const uint64_t D = MM_ON_DISK;
    mm_report rep[] = {
        {1, 4, "cold", 5000, 0xabcd, 1, 0, D, 1024, NULL},    {2, 4, "cold", 5000, 0xabcd, 1, 1024, D, 1024, NULL},
        {1, 4, "cold", 5000, 0xabcd, 1, 2048, D, 1024, NULL}, {2, 4, "cold", 5000, 0xabcd, 1, 3072, D, 1024, NULL},
        {1, 4, "cold", 5000, 0xabcd, 1, 4096, D, 904, NULL},  {3, 4, "cold", 5000, 0xabcd, 1, 0, D, 5000, NULL},
    };
    const uint32_t want_node[] = {1, 2, 1, 2, 1};
    for (int c = 0; c < 4; c++) {   /* all; node 2's share gone; node 1's middle piece gone; only the shares */
        mm_report v[6];
        size_t n = 0;
        for (size_t i = 0; i < 6; i++)
            if (!(c == 1 && rep[i].node == 2) && !(c == 2 && i == 2) && !(c == 3 && i == 5)) v[n++] = rep[i];
        master_meta *b = cluster(3, 64 * KB);
        ASSERT(b);
        mm_rebuild_stats st;
        int refused = 0;
        mm_rebuild(b, v, n, 10, &st, count_refused, &refused);
        object *o = mm_find(b, "cold", 4);
        int shares = c == 0 || c == 3;
        ASSERT_MSG(o != NULL, "case %d", c);
        ASSERT_EQ(o->state, OBJ_COMPLETE);
        ASSERT_EQ(o->nreplicas, (uint32_t)shares + (c != 3));
        ASSERT_EQ(refused, shares ? 0 : (int)n - 1);
        for (uint32_t r = 0; r < o->nreplicas; r++) {
            const obj_replica *x = &REPS(o)[r];
            if (x->extents[0].node == 3) {
                ASSERT(x->nextents == 1 && x->extents[0].offset == D && x->extents[0].length == 5000);
                continue;
            }
            ASSERT_EQ(x->nextents, 5);
            for (uint32_t i = 0; i < 5; i++)
                ASSERT(x->extents[i].node == want_node[i] && x->extents[i].offset == D &&
                       x->extents[i].length == (i == 4 ? 904 : 1024));
        }
        for (uint32_t id = 1; id <= 3; id++) ASSERT_EQ(node_used(b, id), 0);
        mm_destroy(b);
    }
    /* without the whole record, a share missing leaves nothing */
    master_meta *b = cluster(3, 64 * KB);
    mm_rebuild_stats st;
    int refused = 0;
    mm_rebuild(b, rep, 3, 10, &st, count_refused, &refused);   /* node 1's first two, node 2's first */
    ASSERT(!mm_find(b, "cold", 4));
    ASSERT_EQ(st.keys_incomplete, 1);
    ASSERT_EQ(refused, 3);
    mm_destroy(b);
}

/* An object rebuilt with fewer replicas than it was put with is copied
 * again; one that came back whole costs no repair pass. */
static void test_rebuild_repairs_only_short_objects(void) {
    master_meta *a = cluster(3, 64 * KB);
    ASSERT(a);
    ASSERT(put(a, "k", 100, 2, 0));
    const char *keys[] = {"k"};
    mm_report rep[4];
    ASSERT_EQ(reports_of(a, keys, 1, rep), 2);
    for (int whole = 0; whole < 2; whole++) {
        master_meta *b = cluster(3, 64 * KB);
        mm_repair(b, 0);   /* what the nodes' joining asked for */
        mm_rebuild_stats st;
        mm_rebuild(b, rep, whole ? 2 : 1, 10, &st, NULL, NULL);
        ASSERT_EQ(st.objects, 1);
        ASSERT_EQ(st.objects_short, whole ? 0 : 1);
        mm_stats ms;
        stats(b, &ms);
        ASSERT_EQ(ms.under_replicated, whole ? 0 : 1);
        ASSERT_EQ(mm_repair(b, 20), whole ? 0 : 1);
        mm_destroy(b);
    }
    mm_destroy(a);
}

/* Every tree of two allocators holds the same pairs. */
static int same_alloc(const seg_alloc *x, const seg_alloc *y) {
    static uint64_t px[2 * 4096], py[2 * 4096];
    for (int t = SEG_TREE_FREE_OFF; t <= SEG_TREE_LIVE; t++) {
        long nx = seg_alloc_dump(x, (seg_alloc_tree)t, px, 4096), ny = seg_alloc_dump(y, (seg_alloc_tree)t, py, 4096);
        if (nx < 0 || nx != ny || nx > 4096 || memcmp(px, py, 2 * (size_t)nx * sizeof *px) != 0) return 0;
    }
    return 1;
}

static int same_object(const object *x, const object *y) {
    if (!x || !y) return x == y;
    if (x->size != y->size || x->crc != y->crc || x->nreplicas != y->nreplicas) return 0;
    for (uint32_t r = 0; r < x->nreplicas; r++) {
        if (REPS(x)[r].nextents != REPS(y)[r].nextents) return 0;
        for (uint32_t i = 0; i < REPS(x)[r].nextents; i++) {
            const obj_extent *e = &REPS(x)[r].extents[i], *f = &REPS(y)[r].extents[i];
            if (e->node != f->node || e->offset != f->offset || e->length != f->length) return 0;
        }
    }
    return 1;
}

/* A rebuild into empty allocators claims every reported extent in one
 * pass and gives back what it refuses; one into allocators in use claims
 * replica by replica. Both end with the same objects and the same trees. */
static void test_rebuild_claims_in_one_pass(void) {
    enum { KEYS = 300 };
    master_meta *a = cluster(3, 1024 * KB);
    ASSERT(a);
    static char names[KEYS][16];
    const char *keys[KEYS];
    for (int k = 0; k < KEYS; k++) {
        snprintf(names[k], sizeof names[k], "k%d", k);
        keys[k] = names[k];
        ASSERT(put(a, keys[k], k % 7 == 0 ? 5000 + (uint64_t)k : 64 + (uint64_t)k * 3, 2, 0));
    }
    for (int k = 0; k < KEYS; k += 5) ASSERT_EQ(mm_remove(a, keys[k], strlen(keys[k]), 1, err, sizeof err), PROTO_OK);
    static mm_report rep[KEYS * 16];
    size_t n = reports_of(a, keys, KEYS, rep);
    ASSERT(n > KEYS);
    /* refused, in free space: a lone slice, a copy with another CRC, an empty key */
    rep[n++] = (mm_report){2, 6, "orphan", 2048, 1, 1, 1024, 900 * KB, 1024, NULL};
    rep[n] = rep[0], rep[n].crc ^= 1, rep[n].node = rep[0].node % 3 + 1, rep[n++].seg_off = 960 * KB;
    rep[n++] = (mm_report){3, 0, "", 64, 1, 1, 0, 1000 * KB, 64, NULL};
    master_meta *b = cluster(3, 1024 * KB), *c = cluster(3, 1024 * KB);
    for (uint32_t id = 1; id <= 3; id++)   /* in use: claims one by one */
        ASSERT_EQ(seg_alloc_reserve_at(mm_node_get(c, id)->alloc, 1023 * KB, 64), ALLOC_OK);
    mm_rebuild_stats sb, sc;
    mm_rebuild(b, rep, n, 10, &sb, NULL, NULL);
    mm_rebuild(c, rep, n, 10, &sc, NULL, NULL);
    ASSERT(memcmp(&sb, &sc, sizeof sb) == 0);
    ASSERT_EQ(sb.objects, KEYS - KEYS / 5);
    ASSERT_EQ(sb.extents_rejected, 3);
    for (uint32_t id = 1; id <= 3; id++) {
        ASSERT_EQ(seg_alloc_release(mm_node_get(c, id)->alloc, 1023 * KB, 64), ALLOC_OK);
        ASSERT(same_alloc(mm_node_get(b, id)->alloc, mm_node_get(c, id)->alloc));
        ASSERT(node_used(b, id) > 0);
    }
    for (int k = 0; k < KEYS; k++)
        ASSERT(same_object(mm_find(b, keys[k], strlen(keys[k])), mm_find(c, keys[k], strlen(keys[k]))));
    mm_destroy(c);
    mm_destroy(b);
    mm_destroy(a);
}

/* A grouping prepared ahead (mm_rebuild_prepare) builds what a plain
 * rebuild builds; reports added after it undo it, and the job groups
 * them all again. */
static void test_rebuild_prepared(void) {
    enum { KEYS = 200 };
    master_meta *a = cluster(3, 1024 * KB);
    ASSERT(a);
    static char names[KEYS][16];
    const char *keys[KEYS];
    for (int k = 0; k < KEYS; k++) {
        snprintf(names[k], sizeof names[k], "p%d", k);
        keys[k] = names[k];
        ASSERT(put(a, keys[k], 64 + (uint64_t)k, 2, 0));
    }
    static mm_report rep[KEYS * 4];
    size_t n = reports_of(a, keys, KEYS, rep);
    ASSERT(n > 20);
    master_meta *b = cluster(3, 1024 * KB), *c = cluster(3, 1024 * KB), *d = cluster(3, 1024 * KB);
    mm_rebuild_stats sb, sc = {0}, sd = {0};
    mm_rebuild(b, rep, n, 10, &sb, NULL, NULL);
    mm_groups *gc = mm_groups_create(), *gd = mm_groups_create();
    mm_groups_add(gc, rep, 0, n - 20);
    mm_rebuild_prepare(c, rep, n - 20, gc);
    mm_groups_add(gc, rep, n - 20, n);   /* undoes it */
    mm_groups_add(gd, rep, 0, n);
    mm_rebuild_prepare(d, rep, n - 1, gd);   /* not every report hashed: nothing */
    mm_rebuild_prepare(d, rep, n, gd);
    mm_rebuild_prepare(d, rep, n, gd);       /* done already */
    mm_stats st;
    mm_get_stats(d, &st);
    ASSERT_EQ(st.objects_complete, 0);       /* prepared, nothing built */
    ASSERT(!mm_find(d, keys[0], strlen(keys[0])));
    mm_rebuild_job *jc = mm_rebuild_begin(c, rep, n, gc), *jd = mm_rebuild_begin(d, rep, n, gd);
    while (mm_rebuild_step(c, jc, 7, 10, &sc, NULL, NULL)) {}
    while (mm_rebuild_step(d, jd, 7, 10, &sd, NULL, NULL)) {}
    mm_rebuild_end(c, jc);
    mm_rebuild_end(d, jd);
    ASSERT_EQ(sb.objects, KEYS);
    ASSERT(memcmp(&sb, &sc, sizeof sb) == 0);
    ASSERT(memcmp(&sb, &sd, sizeof sb) == 0);
    for (int k = 0; k < KEYS; k++) {
        object *o = mm_find(b, keys[k], strlen(keys[k]));
        ASSERT(same_object(o, mm_find(c, keys[k], strlen(keys[k]))));
        ASSERT(same_object(o, mm_find(d, keys[k], strlen(keys[k]))));
    }
    for (uint32_t id = 1; id <= 3; id++) {
        ASSERT(same_alloc(mm_node_get(b, id)->alloc, mm_node_get(c, id)->alloc));
        ASSERT(same_alloc(mm_node_get(b, id)->alloc, mm_node_get(d, id)->alloc));
    }
    mm_destroy(d);
    mm_destroy(c);
    mm_destroy(b);
    mm_destroy(a);
}

/* A node that dies while the table is built in steps: its extents
 * claimed when the job began are gone with its allocator; the rest of
 * the job refuses them and claims nothing there. */
static void test_rebuild_node_dies_mid_job(void) {
    master_meta *a = cluster(3, 1024 * KB);
    ASSERT(a);
    static char names[64][16];
    const char *keys[64];
    for (int k = 0; k < 64; k++) {
        snprintf(names[k], sizeof names[k], "d%d", k);
        keys[k] = names[k];
        ASSERT(put(a, keys[k], 100, 2, 0));
    }
    static mm_report rep[256];
    size_t n = reports_of(a, keys, 64, rep);
    master_meta *b = cluster(3, 1024 * KB);
    mm_rebuild_job *j = mm_rebuild_begin(b, rep, n, NULL);
    mm_rebuild_stats st = {0};
    ASSERT_EQ(mm_rebuild_step(b, j, 10, 10, &st, NULL, NULL), 1);
    mm_node_fail(b, 1, "test", 10);
    while (mm_rebuild_step(b, j, 10, 10, &st, NULL, NULL)) {}
    mm_rebuild_end(b, j);
    ASSERT_EQ(st.objects, 64);   /* every key had a replica off node 1 */
    uint64_t used[4] = {0};
    for (int k = 0; k < 64; k++) {
        object *o = mm_find(b, keys[k], strlen(keys[k]));
        ASSERT(o);
        for (uint32_t r = 0; r < o->nreplicas; r++) {
            ASSERT_EQ(REPS(o)[r].nextents, 1);
            ASSERT(REPS(o)[r].extents[0].node != 1);
            used[REPS(o)[r].extents[0].node] += 128;   /* 100 bytes, aligned to 64 */
        }
    }
    for (uint32_t id = 2; id <= 3; id++) ASSERT_EQ(node_used(b, id), used[id]);
    mm_destroy(b);
    mm_destroy(a);
}

/* ---- holdings and ids claimed back ---- */

/* Node id's notes from ack on, decoded into v (up to max; their extents
 * into a shared room, the last note's valid); how many, *next the ack. */
static obj_extent note_ext[PROTO_MAX_EXTENTS];
static size_t notes_from(master_meta *m, uint32_t id, uint64_t ack, proto_note *v, size_t max, uint64_t *next) {
    const uint8_t *p;
    size_t len;
    size_t n = mm_node_holdings(m, id, ack, max, SIZE_MAX, &p, &len, next);
    const uint8_t *end = p + len;
    for (size_t i = 0; i < n; i++)
        if (proto_note_next(&p, end, note_ext, &v[i]) != 0) return (size_t)-1;
    return p == end ? n : (size_t)-1;
}

/* Notes for node id (acknowledging nothing): how many, holds and drops. */
static size_t notes_of(master_meta *m, uint32_t id, size_t *holds, size_t *drops) {
    proto_note v[64];
    uint64_t next;
    size_t n = notes_from(m, id, 0, v, 64, &next);
    *holds = *drops = 0;
    for (size_t i = 0; i < n && n != (size_t)-1; i++) (v[i].drop ? (*drops)++ : (*holds)++);
    return n;
}

static void test_holdings_follow_put_end_and_remove(void) {
    master_meta *m = cluster(3, 64 * KB);
    ASSERT(m);
    object *o = NULL;
    ASSERT_EQ(mm_put_start(m, "k", 1, 100, 2, 0, &o, err, sizeof err), PROTO_OK);
    size_t holds, drops, total = 0;
    for (uint32_t id = 1; id <= 3; id++) total += notes_of(m, id, &holds, &drops);
    ASSERT_EQ(total, 0);   /* a pending put tells no node */
    ASSERT_EQ(mm_put_end(m, "k", 1, 7, NULL, 0, err, sizeof err), PROTO_OK);
    uint32_t a = REPS(o)[0].extents[0].node, b = REPS(o)[1].extents[0].node;
    ASSERT_EQ(notes_of(m, a, &holds, &drops), 1);
    ASSERT_EQ(holds, 1);
    ASSERT_EQ(notes_of(m, b, &holds, &drops), 1);
    proto_note v[4];
    uint64_t next;
    ASSERT_EQ(notes_from(m, a, 0, v, 4, &next), 1);
    ASSERT_EQ(v[0].crc, 7);
    ASSERT_EQ(v[0].want, 2);
    ASSERT_EQ(v[0].size, 100);
    ASSERT(v[0].keylen == 1 && v[0].key[0] == 'k');
    ASSERT_EQ(v[0].rep.extents[0].node, a);
    ASSERT_EQ(mm_remove(m, "k", 1, 10, err, sizeof err), PROTO_OK);
    /* unacknowledged notes are sent again, in order: hold then drop */
    ASSERT_EQ(notes_from(m, a, 0, v, 4, &next), 2);
    ASSERT(!v[0].drop && v[1].drop);
    ASSERT_EQ(next, 2);
    ASSERT_EQ(notes_from(m, a, 1, v, 4, &next), 1);   /* the hold acknowledged: the drop stays */
    ASSERT(v[0].drop && v[0].keylen == 1 && v[0].key[0] == 'k');
    ASSERT_EQ(next, 2);
    ASSERT_EQ(notes_from(m, a, next, v, 4, &next), 0);   /* acknowledged: freed */
    ASSERT_EQ(next, 2);
    /* a byte bound stops a reply after the note that reaches it */
    for (int i = 0; i < 3; i++) {
        char key[16];
        snprintf(key, sizeof key, "b%d", i);
        ASSERT_EQ(mm_put_start(m, key, 2, 100, 3, 20, &o, err, sizeof err), PROTO_OK);
        ASSERT_EQ(mm_put_end(m, key, 2, 9, NULL, 20, err, sizeof err), PROTO_OK);
    }
    const uint8_t *p;
    size_t len;
    ASSERT_EQ(mm_node_holdings(m, a, 2, 64, 1, &p, &len, &next), 1);
    ASSERT_EQ(next, 3);
    ASSERT_EQ(len, (size_t)PROTO_NOTE_HOLD_HDR + 2 + PROTO_NOTE_EXTENT);
    ASSERT_EQ(mm_node_holdings(m, a, 3, 64, SIZE_MAX, &p, &len, &next), 2);
    ASSERT_EQ(next, 5);
    mm_destroy(m);
}

/* The extent of o on node id (its only one here: small objects are one extent). */
static const obj_extent *extent_on(const object *o, uint32_t id) {
    static obj_reps v[4];   /* what it returns points here: valid for the next three calls */
    static unsigned turn;
    const obj_replica *reps = object_reps(o, &v[turn++ % 4]);
    for (uint32_t i = 0; i < o->nreplicas; i++)
        for (uint32_t e = 0; e < reps[i].nextents; e++)
            if (reps[i].extents[e].node == id) return &reps[i].extents[e];
    return NULL;
}

/* A node process restarted with its segment (KEPT): its replicas stay
 * while it reports; the ones it reports as the table has them are kept,
 * the others dropped, unknown extents become drop notes; an unfinished
 * put there loses its replica; nothing new is placed there meanwhile. */
static void test_restored_node_keeps_what_it_proves(void) {
    mm_config c = test_config();
    master_meta *m = mm_create(&c);
    const char *addr[] = {"127.0.0.1:1"};
    uint32_t a, b, id;
    mm_reg_kind kind;
    ASSERT_EQ(mm_node_register(m, 64 * KB, addr, 1, 0, &a, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_node_register(m, 64 * KB, addr, 1, 0, &b, err, sizeof err), PROTO_OK);
    ASSERT(put(m, "x", 100, 2, 10) && put(m, "y", 100, 2, 10));
    object *p = NULL, *q = NULL;
    ASSERT_EQ(mm_put_start(m, "p", 1, 100, 2, 10, &p, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_put_start(m, "q", 1, 100, 2, 10, &q, err, sizeof err), PROTO_OK);
    mm_node_claim kept = {a, 0x5151, 2, 1, 0, 1};
    ASSERT_EQ(mm_node_register_as(m, &kept, 64 * KB, addr, 1, 20, &id, &kind, err, sizeof err), PROTO_OK);
    ASSERT_EQ(kind, MM_REG_RESTORED);
    ASSERT_EQ(id, a);
    ASSERT(mm_node_restoring(m, a));
    ASSERT_EQ(mm_find(m, "x", 1)->nreplicas, 2);
    object *z = put(m, "z", 100, 1, 30);
    ASSERT(z && !extent_on(z, a));   /* placed elsewhere while a restores */
    /* q's writer had written it all before the crash: completed meanwhile, it stays */
    ASSERT_EQ(mm_put_end(m, "q", 1, 0xabcd, NULL, 35, err, sizeof err), PROTO_OK);
    const object *x = mm_find(m, "x", 1), *y = mm_find(m, "y", 1);
    const obj_extent *xe = extent_on(x, a), *ye = extent_on(y, a);
    ASSERT(xe && ye);
    ASSERT_EQ(mm_restore_report(m, a, "x", 1, x->size, x->crc, 0, xe->offset, xe->length), 1);
    ASSERT_EQ(mm_restore_report(m, a, "y", 1, y->size, y->crc ^ 1, 0, ye->offset, ye->length), 0);
    ASSERT_EQ(mm_restore_report(m, a, "w", 1, 100, 7, 0, 4096, 128), 0);
    ASSERT_EQ(mm_restore_done(m, a, 40), 1);
    ASSERT(!mm_node_restoring(m, a));
    ASSERT(!extent_on(mm_find(m, "p", 1), a));   /* the unfinished put lost its replica there */
    ASSERT(extent_on(mm_find(m, "q", 1), a));
    ASSERT_EQ(mm_find(m, "x", 1)->nreplicas, 2);
    ASSERT_EQ(mm_find(m, "y", 1)->nreplicas, 1);
    ASSERT(!extent_on(mm_find(m, "y", 1), a));
    mm_restore_stats st;
    mm_restore_totals(m, &st);
    ASSERT_EQ(st.nodes, 1);
    ASSERT_EQ(st.kept, 2);
    ASSERT_EQ(st.dropped, 1);
    ASSERT_EQ(st.unknown, 2);
    /* a segment of another size is not the same segment: dropped as before */
    mm_node_claim resized = {b, 0x6161, 2, 1, 0, 1};
    ASSERT_EQ(mm_node_register_as(m, &resized, 128 * KB, addr, 1, 50, &id, &kind, err, sizeof err), PROTO_OK);
    ASSERT_EQ(kind, MM_REG_REJOINED);
    mm_destroy(m);
}

static void test_claimed_ids(void) {
    mm_config c = test_config();
    master_meta *m = mm_create(&c);
    const char *addr[] = {"127.0.0.1:1"};
    uint32_t id;
    mm_reg_kind kind;
    /* a restarted master: node 3 claims its id first; 1 and 2 wait as dead */
    mm_node_claim three = {3, 0x33, 3, 0, 0, 0};
    ASSERT_EQ(mm_node_register_as(m, &three, 64 * KB, addr, 1, 0, &id, &kind, err, sizeof err), PROTO_OK);
    ASSERT_EQ(id, 3);
    ASSERT_EQ(kind, MM_REG_RECLAIMED);
    ASSERT_EQ(mm_node_get(m, 1)->state, NODE_DEAD);
    /* a new node gets an id above every id claimed or seen */
    mm_node_claim fresh = {0, 0x44, 0, 0, 0, 0}, seen5 = {1, 0x11, 5, 0, 0, 0};
    ASSERT_EQ(mm_node_register_as(m, &seen5, 64 * KB, addr, 1, 0, &id, &kind, err, sizeof err), PROTO_OK);
    ASSERT_EQ(id, 1);
    ASSERT_EQ(mm_node_register_as(m, &fresh, 64 * KB, addr, 1, 0, &id, &kind, err, sizeof err), PROTO_OK);
    ASSERT_EQ(id, 6);
    ASSERT_EQ(kind, MM_REG_NEW);
    /* the same process on a new connection keeps its objects */
    ASSERT(put(m, "x", 100, 2, 10));
    object *o = mm_find(m, "x", 1);
    uint32_t holder = REPS(o)[0].extents[0].node;
    mm_node_claim same = {holder, mm_node_get(m, holder)->instance, 6, 0, 0, 0};
    ASSERT_EQ(mm_node_register_as(m, &same, 64 * KB, addr, 1, 20, &id, &kind, err, sizeof err), PROTO_OK);
    ASSERT_EQ(kind, MM_REG_RESUMED);
    ASSERT_EQ(mm_find(m, "x", 1)->nreplicas, 2);
    /* another process claiming from memory a live id: the id is not its */
    mm_node_claim stale = {holder, 0x77, 6, 0, 0, 0};
    ASSERT_EQ(mm_node_register_as(m, &stale, 64 * KB, addr, 1, 25, &id, &kind, err, sizeof err), PROTO_OK);
    ASSERT_EQ(kind, MM_REG_NEW);
    ASSERT(id != holder);
    /* a restarted process under the same id (--node-id): its replica goes */
    mm_node_claim again = {holder, 0x99, 6, 1, 0, 0};
    ASSERT_EQ(mm_node_register_as(m, &again, 64 * KB, addr, 1, 30, &id, &kind, err, sizeof err), PROTO_OK);
    ASSERT_EQ(id, holder);
    ASSERT_EQ(kind, MM_REG_REJOINED);
    ASSERT_EQ(mm_node_get(m, holder)->state, NODE_ALIVE);
    ASSERT_EQ(mm_find(m, "x", 1)->nreplicas, 1);
    /* a node declared dead comes back: it starts empty too */
    mm_node_fail(m, 3, "heartbeat timeout", 40);
    ASSERT_EQ(mm_node_register_as(m, &three, 64 * KB, addr, 1, 50, &id, &kind, err, sizeof err), PROTO_OK);
    ASSERT_EQ(kind, MM_REG_REJOINED);
    mm_destroy(m);
}

/* mm_node_pick says what a registration would get without changing
 * anything; an id reserved for a new node (assign, while the master
 * records it in etcd) is the one it gets, and later new nodes go above. */
static void test_pick_and_assign(void) {
    mm_config c = test_config();
    master_meta *m = mm_create(&c);
    const char *addr[] = {"127.0.0.1:1"};
    uint32_t id, id2;
    mm_reg_kind kind;
    mm_node_claim two = {2, 0x22, 4, 0, 0, 0}, fresh = {0, 0x55, 0, 0, 0, 0};
    ASSERT_EQ(mm_node_pick(m, &two, &id), MM_REG_RECLAIMED);
    ASSERT_EQ(id, 2);
    ASSERT_EQ(mm_node_pick(m, &fresh, &id), MM_REG_NEW);
    ASSERT_EQ(id, 1);
    ASSERT_EQ(mm_node_count(m), 0);   /* nothing changed */
    ASSERT_EQ(mm_node_register_as(m, &two, 64 * KB, addr, 1, 0, &id, &kind, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_node_pick(m, &fresh, &id), MM_REG_NEW);
    ASSERT_EQ(id, 5);   /* above the 4 node 2 has seen */
    /* reserved for fresh: the next new node goes above it */
    mm_node_id_taken(m, id);
    mm_node_claim other = {0, 0x66, 0, 0, 0, 0};
    ASSERT_EQ(mm_node_pick(m, &other, &id2), MM_REG_NEW);
    ASSERT_EQ(id2, 6);
    fresh.assign = id;
    ASSERT_EQ(mm_node_register_as(m, &fresh, 64 * KB, addr, 1, 0, &id2, &kind, err, sizeof err), PROTO_OK);
    ASSERT_EQ(id2, 5);
    ASSERT_EQ(kind, MM_REG_NEW);
    /* an assigned id a node holds by now is not given twice */
    other.assign = 5;
    ASSERT_EQ(mm_node_pick(m, &other, &id2), MM_REG_NEW);
    ASSERT_EQ(id2, 6);
    mm_destroy(m);
}

/* Slice CRCs: refused unless they fit the object (the put stays pending),
 * kept with it, counted, and gone with it. */
static void test_put_end_slices(void) {
    master_meta *m = cluster(2, 4096 * KB);
    uint64_t size = 3 * 65536 + 1;   /* four slices of 64 KiB, the last of 1 byte */
    object *o = NULL;
    ASSERT_EQ(mm_put_start(m, "s", 1, size, 1, 0, &o, err, sizeof err), PROTO_OK);
    uint32_t crc[4] = {11, 22, 33, 44};
    uint32_t whole = crc[0];
    for (int i = 1; i < 4; i++) whole = crc32c_combine(whole, crc[i], i < 3 ? 65536 : 1);
    proto_slices sl = {65536, 3, crc};
    ASSERT_EQ(mm_put_end(m, "s", 1, whole, &sl, 0, err, sizeof err), PROTO_ERR);
    ASSERT_STREQ(err, "3 slice CRCs for 4 slices of 65536 bytes");
    sl.count = 4;
    ASSERT_EQ(mm_put_end(m, "s", 1, whole + 1, &sl, 0, err, sizeof err), PROTO_ERR);
    ASSERT(!mm_exists(m, "s", 1));   /* still pending: the writer may end it right */
    mm_stats st;
    stats(m, &st);
    ASSERT_EQ(st.slice_crc_bytes, 0);
    ASSERT_EQ(mm_put_end(m, "s", 1, whole, &sl, 0, err, sizeof err), PROTO_OK);
    crc[2] = 0;   /* the master kept its own copy */
    uint64_t lease;
    ASSERT_EQ(mm_get(m, "s", 1, 1, &o, &lease, err, sizeof err), PROTO_OK);
    const proto_slices *kept = mm_obj_slices(o);
    ASSERT_EQ(kept->size, 65536);
    ASSERT_EQ(kept->count, 4);
    ASSERT_EQ(kept->crc[2], 33);
    stats(m, &st);
    ASSERT_EQ(st.slice_crc_bytes, 16);
    ASSERT(put(m, "plain", size, 1, 2) != NULL);   /* none: nothing kept */
    stats(m, &st);
    ASSERT_EQ(st.slice_crc_bytes, 16);
    ASSERT_EQ(mm_remove(m, "s", 1, 3, err, sizeof err), PROTO_OK);
    stats(m, &st);
    ASSERT_EQ(st.slice_crc_bytes, 0);
    mm_destroy(m);
}

/* The node table: ids past the old fixed cap (65,536) when max_nodes
 * allows them, ids below a claimed one left as empty slots (no node made
 * for them), and max_nodes refusing the next id. */
static void test_node_table_bounds(void) {
    mm_config c = test_config();
    c.max_nodes = 200000;
    master_meta *m = mm_create(&c);
    const char *addrs[] = {"127.0.0.1:9000"};
    mm_node_claim claim = {.id = 100000, .instance = 7};
    mm_reg_kind kind;
    uint32_t id = 0;
    ASSERT_EQ(mm_node_register_as(m, &claim, 64 * KB, addrs, 1, 0, &id, &kind, err, sizeof err), PROTO_OK);
    ASSERT_EQ(id, 100000);
    ASSERT_EQ(mm_node_count(m), 100000);
    ASSERT_EQ(mm_node_view(m, 100000)->state, NODE_ALIVE);
    /* the ids below: dead, not registered, and one shared stand-in (nothing allocated per id) */
    ASSERT_EQ(mm_node_view(m, 5)->state, NODE_DEAD);
    ASSERT(mm_node_view(m, 5) == mm_node_view(m, 99999));
    ASSERT(mm_node_view(m, 100001) == NULL);
    mm_stats st;
    mm_get_stats(m, &st);
    ASSERT_EQ(st.nodes_alive, 1);
    ASSERT_EQ(st.nodes_dead, 99999);
    /* a new node takes the next id; asking for an empty slot makes it */
    ASSERT_EQ(mm_node_register(m, 64 * KB, addrs, 1, 0, &id, err, sizeof err), PROTO_OK);
    ASSERT_EQ(id, 100001);
    ASSERT_EQ(mm_node_get(m, 5)->state, NODE_DEAD);
    ASSERT(mm_node_view(m, 5) != mm_node_view(m, 6));
    mm_destroy(m);

    c.max_nodes = 3;
    m = mm_create(&c);
    for (int i = 0; i < 3; i++) ASSERT_EQ(mm_node_register(m, 64 * KB, addrs, 1, 0, &id, err, sizeof err), PROTO_OK);
    ASSERT_EQ(mm_node_register(m, 64 * KB, addrs, 1, 0, &id, err, sizeof err), PROTO_ERR);
    ASSERT(strstr(err, "node limit of 3") != NULL);
    claim = (mm_node_claim){.id = 4, .instance = 8};
    ASSERT_EQ(mm_node_register_as(m, &claim, 64 * KB, addrs, 1, 0, &id, &kind, err, sizeof err), PROTO_ERR);
    ASSERT_EQ(mm_node_count(m), 3);
    mm_destroy(m);
}

int main(void) {
    RUN_TEST(test_put_end_slices);
    RUN_TEST(test_register);
    RUN_TEST(test_many_nodes);
    RUN_TEST(test_holdings_follow_put_end_and_remove);
    RUN_TEST(test_claimed_ids);
    RUN_TEST(test_restored_node_keeps_what_it_proves);
    RUN_TEST(test_pick_and_assign);
    RUN_TEST(test_heartbeat_timeout_kills);
    RUN_TEST(test_replicas_on_distinct_nodes);
    RUN_TEST(test_striping_layout);
    RUN_TEST(test_balance_most_free_first);
    RUN_TEST(test_placement_order_kept);
    RUN_TEST(test_placement_errors);
    RUN_TEST(test_exists_in_flight);
    RUN_TEST(test_timeout_revokes_and_frees);
    RUN_TEST(test_revoke_frees_at_once_with_a_newer_grant);
    RUN_TEST(test_returned_lease_frees_at_once);
    RUN_TEST(test_lease_returned_after_remove);
    RUN_TEST(test_pin_refuses_remove_until_release_or_expiry);
    RUN_TEST(test_pin_bounds);
    RUN_TEST(test_pin_before_the_key);
    RUN_TEST(test_pin_stops_collection);
    RUN_TEST(test_many_leases_pin_until_expiry);
    RUN_TEST(test_lease_quarantine_delays_reuse);
    RUN_TEST(test_batch_forms);
    RUN_TEST(test_dead_node_drops_replicas_and_counts_lost);
    RUN_TEST(test_rereplication_task_flow);
    RUN_TEST(test_copy_failure_and_expiry_retry);
    RUN_TEST(test_task_timeout);
    RUN_TEST(test_drain_wave_of_small_objects);
    RUN_TEST(test_drain_moves_then_leaves);
    RUN_TEST(test_drain_without_room_loses_only_sole_copies);
    RUN_TEST(test_rebuild_from_reports);
    RUN_TEST(test_repin_grace_holds_rebuilt);
    RUN_TEST(test_rebuild_repairs_only_short_objects);
    RUN_TEST(test_rebuild_disk_shares);
    RUN_TEST(test_rebuild_claims_in_one_pass);
    RUN_TEST(test_rebuild_prepared);
    RUN_TEST(test_rebuild_node_dies_mid_job);
    RUN_TEST(test_node_table_bounds);
    TEST_EXIT();
}
