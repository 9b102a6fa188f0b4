/* tests/integration/test_groups.c - the key space cut over master
 * groups (docs/SCALE.md "Master groups"): an etcd from the Debian package
 * (etcd-server; the test says SKIP without it), group a (a leader and a
 * standby, --slots 0-8191), group b (--slots 8192-16383) and group c (no
 * slots at first), two nodes in each group, and a libmoonkv client with
 * mkv_options.groups.
 *
 * The masters claim their slots in the map in etcd; a master answers a
 * key of the other group's slot -MOVED <slot> <group> and runs nothing of
 * the command; the client puts a batch whose keys fall in both groups
 * (split, the parts at once) and every key lands on its slot's master,
 * reads back byte-exact (batch and single gets), and removes; after a
 * slot is moved in etcd the client, still routing by its old map, is
 * answered MOVED, reads the map again and lands on the new owner (single
 * puts and a batch); group c given the last quarter of the key space by
 * the operator takes the new keys there (a batch over three groups, each
 * key on its owner, read back byte-exact); the leader of group a killed
 * -9 while group b keeps serving, and group a serves new keys once its
 * standby leads. A gateway with --groups routes RESP traffic the same
 * way (pipelined SETs, MGET, GET, EXISTS, DEL byte-exact, each key on its
 * group's master, a MOVED followed). Ports
 * (etcd's too): one block of h_free_ports. */
#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "client/moonkv_internal.h"
#include "cluster_harness.h"
#include "core/crc32c.h"
#include "core/util.h"
#include "etcd/slotmap.h"
#include "etcd_harness.h"
#include "groups_harness.h"
#include "proto/slots.h"
#include "test.h"

static int port0;
#define MASTER_A     (port0 + 0)
#define MASTER_A2    (port0 + 1)    /* group a's standby */
#define MASTER_B     (port0 + 2)
#define MASTER_C     (port0 + 5)    /* group c, added with no slots */
#define GATEWAY_PORT (port0 + 6)    /* a gateway over the groups */
#define ETCD_PORT    (port0 + 3)    /* and its peers on + 4 */
#define NODE_PORT    (port0 + 10)   /* + 2 i; data plane on + 1 */
#define NODES        6              /* 0, 1 in group a; 2, 3 in group b; 4, 5 in group c */
#define CLUSTER      "groups-test"
#define LEASE_S      2
#define SETUP_WAIT_MS 30000
#define TIME_LIMIT_S 360   /* a slot move and two elections under TSan at load 25 */
#define NKEYS        200
#define MAX_VAL      (48 << 10)

static h_etcd etcd;
static pid_t master_a, master_a2;
static mkv_client *mc;
static char *src, *dst;   /* registered: NKEYS values of up to MAX_VAL each */

static void remove_datadir(void) { h_etcd_remove(&etcd); }

static int c_first = PROTO_SLOTS;   /* group c's first slot, once it has any */

static const char *group_of(const char *key) {
    int slot = proto_key_slot(key, strlen(key));
    return slot < 8192 ? "a" : slot < c_first ? "b" : "c";
}
static int port_of(const char *group) { return group[0] == 'a' ? MASTER_A : group[0] == 'b' ? MASTER_B : MASTER_C; }

static pid_t start_master(int port, const char *group, const char *slots) {
    char g[48], s[48];
    snprintf(g, sizeof g, "--group=%s", group);
    snprintf(s, sizeof s, "--slots=%s", slots);
    const char *extra[] = {g, slots[0] ? s : NULL, NULL};
    return h_start_etcd_role("master", port, etcd.url, CLUSTER, LEASE_S, extra);
}

static pid_t start_node(int i) {
    char g[32], data[48];
    snprintf(g, sizeof g, "--group=%s", i < 2 ? "a" : i < 4 ? "b" : "c");
    snprintf(data, sizeof data, "--data-addrs=127.0.0.1:%d", NODE_PORT + 2 * i + 1);
    const char *extra[] = {g, "--segment-size", "32MB", data, "--prefault", "no", NULL};
    return h_start_etcd_role("node", NODE_PORT + 2 * i, etcd.url, CLUSTER, LEASE_S, extra);
}

/* A master's answer to cmd (printf-style, one key) as "TYPE:text". */
static void ask(int port, char *out, size_t len, const char *fmt, const char *key) {
    redisContext *c = h_redis(port);
    redisReply *r = c ? redisCommand(c, fmt, key) : NULL;
    if (!r) snprintf(out, len, "none");
    else if (r->type == REDIS_REPLY_ERROR) snprintf(out, len, "err:%s", r->str);
    else if (r->type == REDIS_REPLY_INTEGER) snprintf(out, len, "int:%lld", r->integer);
    else snprintf(out, len, "type:%d", r->type);
    freeReplyObject(r);
    if (c) redisFree(c);
}

/* 1 if the master of port has key as a complete object (MOON.EXISTS). */
static int holds(int port, const char *key) {
    char a[160];
    ask(port, a, sizeof a, "MOON.EXISTS %s", key);
    return strcmp(a, "int:1") == 0;
}

/* MOON.REMOVE and MOON.MREMOVE commands the groups' masters ran. */
static long long removes_asked(void) {
    return h_port_info(MASTER_A, "cluster", "remove_requests") + h_port_info(MASTER_A2, "cluster", "remove_requests") +
           h_port_info(MASTER_B, "cluster", "remove_requests");
}

/* Until INFO cluster slots_version of port is at least v. */
static int wait_version(int port, long long v, int timeout_ms) {
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    while (h_port_info(port, "cluster", "slots_version") < v)
        if (mono_ms() >= end) return -1;
        else usleep(20000);
    return 0;
}

/* The i-th value: its size and bytes (a pattern of i and the offset). */
static size_t fill(char *buf, int i) {
    size_t n = 1 + ((size_t)i * 7919u) % MAX_VAL;
    for (size_t j = 0; j < n; j++) buf[j] = (char)(i * 31 + j * 7 + (j >> 8));
    return n;
}

static void key_name(char *out, size_t len, const char *prefix, int i) { snprintf(out, len, "%s:%d", prefix, i); }

/* ---- cases ---- */

static void test_slots_claimed(void) {
    ASSERT_EQ(h_port_info(MASTER_A, "cluster", "slots_owned"), 8192);
    ASSERT_EQ(h_port_info(MASTER_B, "cluster", "slots_owned"), 8192);
    char err[ETCD_ERR_LEN];
    etcd_client *ec = etcd_create(etcd.url, 1000, err, sizeof err);
    proto_slotmap *m = malloc(sizeof *m);
    int found = 0;
    ASSERT(ec && etcd_slotmap_read(ec, CLUSTER, m, &found, err, sizeof err) == 0 && found);
    ASSERT_STREQ(proto_slotmap_owner(m, 0), "a");
    ASSERT_STREQ(proto_slotmap_owner(m, 8191), "a");
    ASSERT_STREQ(proto_slotmap_owner(m, 8192), "b");
    ASSERT_STREQ(proto_slotmap_owner(m, 16383), "b");
    ASSERT(m->version >= 2);   /* one claim each */
    free(m);
    etcd_free(ec);
}

static void test_master_answers_moved(void) {
    /* "foo" is slot 12182 (group b), "bar" 5061 (group a) */
    char a[160], want[64];
    ask(MASTER_A, a, sizeof a, "MOON.EXISTS %s", "foo");
    ASSERT_STREQ(a, "err:MOVED 12182 b");
    ask(MASTER_B, a, sizeof a, "MOON.GET %s", "bar");
    ASSERT_STREQ(a, "err:MOVED 5061 a");
    ask(MASTER_A, a, sizeof a, "MOON.EXISTS %s", "bar");
    ASSERT_STREQ(a, "int:0");
    /* a batch with one key of the other group does nothing */
    redisContext *c = h_proven(h_redis(MASTER_A), "");
    ASSERT(c);
    redisReply *r = redisCommand(c, "MOON.MPUTSTART REPLICAS 1 bar 10 foo 10");
    snprintf(want, sizeof want, "MOVED 12182 b");
    int moved = r && r->type == REDIS_REPLY_ERROR && strcmp(r->str, want) == 0;
    freeReplyObject(r);
    redisFree(c);
    ASSERT(moved);
    ASSERT(!holds(MASTER_A, "bar"));
}

static void test_routed_batch(void) {
    mkv_obj objs[NKEYS];
    char keys[NKEYS][32];
    int in_a = 0;
    for (int i = 0; i < NKEYS; i++) {
        key_name(keys[i], sizeof keys[i], "k", i);
        objs[i] = (mkv_obj){.key = keys[i], .keylen = strlen(keys[i]), .buf = src + (size_t)i * MAX_VAL};
        objs[i].len = fill(objs[i].buf, i);
        in_a += strcmp(group_of(keys[i]), "a") == 0;
    }
    ASSERT_MSG(in_a > 20 && in_a < NKEYS - 20, "%d of %d keys in group a: the batch must span both", in_a, NKEYS);
    ASSERT_EQ(mkv_put_batch(mc, objs, NKEYS, 1), MKV_OK);
    for (int i = 0; i < NKEYS; i++) ASSERT_MSG(objs[i].status == MKV_OK, "put %.31s: %d %s", keys[i], objs[i].status, mkv_last_error(mc));
    /* each key on its slot's master, and only there */
    for (int i = 0; i < NKEYS; i++) ASSERT_MSG(holds(port_of(group_of(keys[i])), keys[i]), "%.31s not on group %s", keys[i], group_of(keys[i]));
    for (int i = 0; i < NKEYS; i++) {
        objs[i].buf = dst + (size_t)i * MAX_VAL;
        objs[i].len = MAX_VAL;
        objs[i].status = -99;
    }
    memset(dst, 0, (size_t)NKEYS * MAX_VAL);
    ASSERT_EQ(mkv_get_batch(mc, objs, NKEYS), MKV_OK);
    for (int i = 0; i < NKEYS; i++) {
        ASSERT_MSG(objs[i].status == MKV_OK, "get %.31s: %d", keys[i], objs[i].status);
        size_t n = fill(src, i);
        ASSERT_EQ(objs[i].len, n);
        ASSERT_MSG(memcmp(objs[i].buf, src, n) == 0, "%.31s: bytes differ", keys[i]);
    }
    /* singles, one of each group */
    for (int i = 0; i < 6; i++) {
        size_t got = 0, n = fill(src, i);
        ASSERT_EQ(mkv_get(mc, keys[i], strlen(keys[i]), dst, MAX_VAL, &got), MKV_OK);
        ASSERT_EQ(got, n);
        ASSERT(memcmp(dst, src, n) == 0);
    }
    size_t prefix = 0;
    ASSERT_EQ(mkv_exists_prefix(mc, objs, NKEYS, &prefix), MKV_OK);
    ASSERT_EQ(prefix, NKEYS);
}

static void test_routed_remove(void) {
    mkv_obj objs[NKEYS];
    char keys[NKEYS][32];
    int res[NKEYS];
    for (int i = 0; i < NKEYS; i++) {
        key_name(keys[i], sizeof keys[i], "k", i);
        objs[i] = (mkv_obj){.key = keys[i], .keylen = strlen(keys[i])};
        if (i % 2 == 0) ASSERT_MSG(mkv_remove(mc, keys[i], strlen(keys[i])) == MKV_OK, "remove %.31s: %s", keys[i], mkv_last_error(mc));
    }
    ASSERT_EQ(mkv_exists_batch(mc, objs, NKEYS, res), MKV_OK);
    for (int i = 0; i < NKEYS; i++) ASSERT_MSG(res[i] == (i % 2), "%.31s exists: %d", keys[i], res[i]);
    size_t got;
    ASSERT_EQ(mkv_get(mc, keys[0], strlen(keys[0]), dst, MAX_VAL, &got), MKV_ENOTFOUND);
    ASSERT_EQ(mkv_exists(mc, keys[1], strlen(keys[1])), 1);
    ASSERT(!holds(port_of(group_of(keys[0])), keys[0]));
}

/* Until every operation submitted to f is done and drained (30 s at most). */
static int face_wait(mkv_async *f) {
    uint64_t end = mono_ms() + 30000;
    while (mkv_async_pending(f) > 0 && mono_ms() < end) {
        struct pollfd p = {.fd = mkv_async_fd(f), .events = POLLIN};
        poll(&p, 1, 100);
        mkv_async_drain(f);
    }
    return mkv_async_pending(f) == 0 ? 0 : -1;
}

#define FACE_KEYS 40

static size_t *placed0;
static void *place_at(void *ctx, uint64_t size);

/* The async face over the router: a put batch, a get batch (byte-exact),
 * one whose memory is placed once each size is known, an exists batch and
 * a remove batch of keys of both groups, each split by group (a remove
 * batch is one MOON.MREMOVE per group), single-key operations and stats
 * routed to their group; a command of the caller's own has no group to
 * go to and is refused. */
static void test_routed_face(void) {
    mkv_async *f = NULL;
    ASSERT_EQ(mkv_async_open(&f, mc, 1, 0), MKV_OK);
    if (!f) return;
    mkv_obj objs[FACE_KEYS + 1];
    char keys[FACE_KEYS + 1][32];
    int res[FACE_KEYS + 1], in_a = 0;
    for (int i = 0; i <= FACE_KEYS; i++) {   /* the last one is never put */
        key_name(keys[i], sizeof keys[i], "face", i);
        objs[i] = (mkv_obj){.key = keys[i], .keylen = strlen(keys[i]), .buf = src + (size_t)i * MAX_VAL};
        objs[i].len = fill(objs[i].buf, i);
        in_a += i < FACE_KEYS && strcmp(group_of(keys[i]), "a") == 0;
    }
    ASSERT_MSG(in_a > 5 && in_a < FACE_KEYS - 5, "%d of %d keys in group a: they must span both", in_a, FACE_KEYS);
    mkv_op put = {.kind = MKV_OP_PUT_BATCH, .objs = objs, .n = FACE_KEYS, .replicas = 1};
    ASSERT_EQ(mkv_async_submit(f, &put), MKV_OK);
    ASSERT_EQ(face_wait(f), 0);
    ASSERT_MSG(put.status == MKV_OK, "put batch: %d", put.status);
    for (int i = 0; i < FACE_KEYS; i++) {
        ASSERT_MSG(objs[i].status == MKV_OK, "put %.31s: %d", keys[i], objs[i].status);
        ASSERT_MSG(holds(port_of(group_of(keys[i])), keys[i]), "%.31s not on group %s", keys[i], group_of(keys[i]));
        objs[i].buf = dst + (size_t)i * MAX_VAL;
        objs[i].len = MAX_VAL;
        objs[i].status = -99;
    }
    memset(dst, 0, (size_t)FACE_KEYS * MAX_VAL);
    mkv_op get = {.kind = MKV_OP_GET_BATCH, .objs = objs, .n = FACE_KEYS};
    mkv_op exists = {.kind = MKV_OP_EXISTS_BATCH, .objs = objs, .n = FACE_KEYS + 1, .results = res};
    char one[MAX_VAL];
    mkv_op get1 = {.kind = MKV_OP_GET, .key = keys[3], .keylen = strlen(keys[3]), .buf = dst + (size_t)FACE_KEYS * MAX_VAL,
                   .len = MAX_VAL};
    ASSERT_EQ(mkv_async_submit(f, &get), MKV_OK);
    ASSERT_EQ(face_wait(f), 0);   /* the exists batch shares objs: after the gets */
    ASSERT_EQ(mkv_async_submit(f, &exists), MKV_OK);
    ASSERT_EQ(mkv_async_submit(f, &get1), MKV_OK);
    ASSERT_EQ(face_wait(f), 0);
    ASSERT_EQ(get.status, MKV_OK);
    for (int i = 0; i < FACE_KEYS; i++) {
        size_t n = fill(one, i);
        ASSERT_MSG(objs[i].len == n && memcmp(objs[i].buf, one, n) == 0, "get %.31s: %d, %zu bytes", keys[i],
                   objs[i].status, objs[i].len);
    }
    /* the same keys with their memory placed once located (place gets
     * obj.buf as its ctx): the gateway's batch get over groups */
    size_t placed[FACE_KEYS];
    placed0 = placed;
    memset(dst, 0, (size_t)FACE_KEYS * MAX_VAL);
    for (int i = 0; i < FACE_KEYS; i++) objs[i] = (mkv_obj){.key = keys[i], .keylen = strlen(keys[i]), .buf = &placed[i], .status = -99};
    mkv_op pget = {.kind = MKV_OP_GET_BATCH, .objs = objs, .n = FACE_KEYS, .place = place_at};
    ASSERT_EQ(mkv_async_submit(f, &pget), MKV_OK);
    ASSERT_EQ(face_wait(f), 0);
    ASSERT_EQ(pget.status, MKV_OK);
    for (int i = 0; i < FACE_KEYS; i++) {
        size_t n = fill(one, i);
        ASSERT_MSG(objs[i].status == MKV_OK && objs[i].buf == dst + (size_t)i * MAX_VAL && objs[i].len == n &&
                       placed[i] == n && memcmp(objs[i].buf, one, n) == 0,
                   "placed get %.31s: %d, %zu bytes", keys[i], objs[i].status, objs[i].len);
    }
    size_t n3 = fill(one, 3);
    ASSERT(get1.status == MKV_OK && get1.len == n3 && memcmp(dst + (size_t)FACE_KEYS * MAX_VAL, one, n3) == 0);
    ASSERT_EQ(exists.status, MKV_OK);
    for (int i = 0; i <= FACE_KEYS; i++) ASSERT_MSG(res[i] == (i < FACE_KEYS), "exists %.31s: %d", keys[i], res[i]);
    /* the first half and the key never put: one MOON.MREMOVE per group */
    long long asked = removes_asked();
    mkv_obj gone[FACE_KEYS / 2 + 1];
    for (int i = 0; i <= FACE_KEYS / 2; i++)
        gone[i] = (mkv_obj){.key = keys[i ? i - 1 : FACE_KEYS], .keylen = strlen(keys[i ? i - 1 : FACE_KEYS])};
    mkv_op rm = {.kind = MKV_OP_REMOVE_BATCH, .objs = gone, .n = FACE_KEYS / 2 + 1};
    ASSERT_EQ(mkv_async_submit(f, &rm), MKV_OK);
    ASSERT_EQ(face_wait(f), 0);
    ASSERT_EQ(rm.status, MKV_OK);
    ASSERT_EQ(gone[0].status, MKV_ENOTFOUND);
    for (int i = 1; i <= FACE_KEYS / 2; i++) ASSERT_MSG(gone[i].status == MKV_OK, "remove %.31s: %d", keys[i - 1], gone[i].status);
    long long rm_asked = removes_asked() - asked;
    ASSERT_MSG(rm_asked == 2, "a remove batch over 2 groups was %lld commands", rm_asked);
    for (int i = 0; i < FACE_KEYS; i++) ASSERT_MSG(holds(port_of(group_of(keys[i])), keys[i]) == (i >= FACE_KEYS / 2), "%.31s", keys[i]);
    /* a stat of a key on each group and of one never put: size and CRC, no bytes */
    mkv_op st[3];
    int st_of[3] = {FACE_KEYS - 1, -1, FACE_KEYS};
    for (int i = FACE_KEYS / 2; i < FACE_KEYS && st_of[1] < 0; i++)
        if (strcmp(group_of(keys[i]), group_of(keys[FACE_KEYS - 1])) != 0) st_of[1] = i;
    ASSERT(st_of[1] >= 0);
    for (int i = 0; i < 3; i++) {
        st[i] = (mkv_op){.kind = MKV_OP_STAT, .key = keys[st_of[i]], .keylen = strlen(keys[st_of[i]])};
        ASSERT_EQ(mkv_async_submit(f, &st[i]), MKV_OK);
    }
    ASSERT_EQ(face_wait(f), 0);
    for (int i = 0; i < 2; i++) {
        size_t sn = fill(one, st_of[i]);
        ASSERT_MSG(st[i].status == MKV_OK && st[i].len == sn && st[i].crc == crc32c(0, one, sn),
                   "stat %.31s: %d, %zu bytes", keys[st_of[i]], st[i].status, st[i].len);
    }
    ASSERT_EQ(st[2].status, MKV_ENOTFOUND);
    mkv_op ex1 = {.kind = MKV_OP_EXISTS, .key = keys[0], .keylen = strlen(keys[0])};
    mkv_op rm1 = {.kind = MKV_OP_REMOVE, .key = keys[FACE_KEYS - 1], .keylen = strlen(keys[FACE_KEYS - 1])};
    ASSERT_EQ(mkv_async_submit(f, &ex1), MKV_OK);
    ASSERT_EQ(mkv_async_submit(f, &rm1), MKV_OK);
    ASSERT_EQ(face_wait(f), 0);
    ASSERT_EQ(ex1.status, 0);
    ASSERT_EQ(rm1.status, MKV_OK);
    ASSERT(!holds(port_of(group_of(keys[FACE_KEYS - 1])), keys[FACE_KEYS - 1]));
    mkv_cmd_op cmd = {0};
    const char *argv[] = {"PING"};
    size_t lens[] = {4};
    ASSERT_EQ(mkv_async_command(f, &cmd, 1, argv, lens), MKV_EINVAL);
    mkv_async_close(f);
    printf("# async face over 2 groups: %d of %d keys on a; a remove batch of %d keys: %lld commands\n", in_a,
           FACE_KEYS, FACE_KEYS / 2 + 1, rm_asked);
}

/* A key of group from, not used yet. */
static void fresh_key(char *out, size_t len, const char *prefix, const char *from, int *next) {
    do key_name(out, len, prefix, (*next)++);
    while (strcmp(group_of(out), from) != 0);
}

/* Give key's slot to group in etcd (the operator's move) and wait until
 * both masters follow: the map's new version. */
static long long move_slot(const char *key, const char *group) {
    char err[ETCD_ERR_LEN], list[16];
    snprintf(list, sizeof list, "%u", proto_key_slot(key, strlen(key)));
    etcd_client *ec = etcd_create(etcd.url, 1000, err, sizeof err);
    int changed = 0;
    uint64_t v = 0;
    int rc = ec ? etcd_slotmap_assign(ec, CLUSTER, list, group, 0, &changed, &v, err, sizeof err) : -1;
    etcd_free(ec);
    if (rc != 0 || changed != 1) {
        printf("# move of slot %s to %s: %s (changed %d)\n", list, group, rc ? err : "", changed);
        return -1;
    }
    if (wait_version(MASTER_A, (long long)v, 10000) != 0 || wait_version(MASTER_B, (long long)v, 10000) != 0) return -1;
    return (long long)v;
}

static void test_moved_refresh(void) {
    int next = 0;
    char key[32], other[32];
    fresh_key(key, sizeof key, "mv", "a", &next);
    /* the client has routed by the current map already (the cases above) */
    ASSERT(move_slot(key, "b") > 0);
    long long moved_a = h_port_info(MASTER_A, "cluster", "slots_moved");
    size_t n = fill(src, 1000);
    ASSERT_MSG(mkv_put(mc, key, strlen(key), src, n, 1) == MKV_OK, "put %s: %s", key, mkv_last_error(mc));
    ASSERT_MSG(h_port_info(MASTER_A, "cluster", "slots_moved") > moved_a, "group a never answered MOVED");
    ASSERT(holds(MASTER_B, key));
    printf("# a moved slot: group b held it back %lld times before serving it\n",
           h_port_info(MASTER_B, "cluster", "slots_held"));
    char a[160];
    ask(MASTER_A, a, sizeof a, "MOON.EXISTS %s", key);
    ASSERT(strncmp(a, "err:MOVED ", 10) == 0);
    size_t got = 0;
    ASSERT_EQ(mkv_get(mc, key, strlen(key), dst, MAX_VAL, &got), MKV_OK);
    ASSERT_EQ(got, n);
    ASSERT(memcmp(dst, src, n) == 0);
    /* a batch after the slot went back: its part for b is answered MOVED
     * whole and sent again to a, the other keys as they were */
    fresh_key(other, sizeof other, "mv", "b", &next);   /* stays in b */
    char again[40];
    snprintf(again, sizeof again, "{%s}x", key);   /* the moved slot (hash tag) */
    ASSERT(move_slot(key, "a") > 0);
    moved_a = h_port_info(MASTER_B, "cluster", "slots_moved");
    mkv_obj objs[2] = {{.key = again, .keylen = strlen(again), .buf = src, .len = n},
                       {.key = other, .keylen = strlen(other), .buf = src, .len = n}};
    ASSERT_EQ(mkv_put_batch(mc, objs, 2, 1), MKV_OK);
    ASSERT_MSG(objs[0].status == MKV_OK && objs[1].status == MKV_OK, "statuses %d %d: %s", objs[0].status,
               objs[1].status, mkv_last_error(mc));
    ASSERT(h_port_info(MASTER_B, "cluster", "slots_moved") > moved_a);
    ASSERT(holds(MASTER_A, again));
    ASSERT(holds(MASTER_B, other));
}

/* count replies of c (pipelined), each checked by ok(r, i); how many were. */
static int replies_ok(redisContext *c, int count, int (*ok)(const redisReply *r, int i)) {
    int good = 0;
    for (int i = 0; i < count; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK) break;
        good += ok(r, i);
        freeReplyObject(r);
    }
    return good;
}

static int is_ok_status(const redisReply *r, int i) {
    (void)i;
    return r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
}

/* Element i of an MGET (or a GET's reply, i its key's index) is value i. */
static int is_value(const redisReply *r, int i) {
    size_t n = fill(src, i);
    return r && r->type == REDIS_REPLY_STRING && (size_t)r->len == n && memcmp(r->str, src, n) == 0;
}

#define GW_KEYS 60


/* A gateway with --groups: pipelined SETs go as batches split by group
 * and land each key on its slot's master, in both groups; MGET, GET, EXISTS and DEL come back right and
 * byte-exact; a slot moved in etcd behind the gateway's back is answered
 * MOVED by the old group, and the gateway's SET lands on the new one. */
static void test_gateway_routes(void) {
    const char *extra[] = {"--groups", "yes", "--replicas", "1", NULL};
    ASSERT(h_start_etcd_role("gateway", GATEWAY_PORT, etcd.url, CLUSTER, LEASE_S, extra) > 0);
    redisContext *gw = h_redis(GATEWAY_PORT);
    ASSERT(gw);
    char keys[GW_KEYS][32];
    int in_a = 0;
    long long set_waits0 = h_info_field(gw, "gateway", "worker_master_waits");
    for (int i = 0; i < GW_KEYS; i++) {
        key_name(keys[i], sizeof keys[i], "gw", i);
        in_a += strcmp(group_of(keys[i]), "a") == 0;
        size_t n = fill(src, i);
        redisAppendCommand(gw, "SET %s %b", keys[i], src, n);
    }
    ASSERT_MSG(in_a > 5 && in_a < GW_KEYS - 5, "%d of %d keys in group a: they must span both", in_a, GW_KEYS);
    ASSERT_EQ(replies_ok(gw, GW_KEYS, is_ok_status), GW_KEYS);
    size_t n;
    for (int i = 0; i < GW_KEYS; i++)
        ASSERT_MSG(holds(port_of(group_of(keys[i])), keys[i]), "%.31s not on group %s", keys[i], group_of(keys[i]));
    /* the SETs went as batches split by group, not one by one, each a
     * batch put on the router's async face: no worker waited for them
     * (each batch was a blocking call on a worker) */
    long long batches = h_info_field(gw, "gateway", "cluster_put_batches_routed");
    ASSERT_MSG(batches > 0 && batches < GW_KEYS, "%lld routed put batches for %d SETs", batches, GW_KEYS);
    long long sets_waits = h_info_field(gw, "gateway", "worker_master_waits") - set_waits0;
    ASSERT_MSG(sets_waits == 0, "%d SETs made %lld blocking calls", GW_KEYS, sets_waits);
    const char *argv[GW_KEYS + 1];
    argv[0] = "MGET";
    for (int i = 0; i < GW_KEYS; i++) argv[i + 1] = keys[i];
    long long waits = h_info_field(gw, "gateway", "worker_master_waits");
    long long fetched = h_info_field(gw, "gateway", "cluster_get_batches_fetched");
    ASSERT(waits >= 0 && fetched >= 0);
    redisReply *r = redisCommandArgv(gw, GW_KEYS + 1, argv, NULL);
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == GW_KEYS);
    int same = 0;
    for (int i = 0; i < GW_KEYS; i++) same += is_value(r->element[i], i);
    freeReplyObject(r);
    ASSERT_EQ(same, GW_KEYS);
    /* the MGET's keys went as one batch get on the router's async face,
     * split by group there (its parts at once): no worker's blocking
     * call (was 1, one library batch on a worker, and 60 before that) */
    long long mget_waits = h_info_field(gw, "gateway", "worker_master_waits") - waits;
    ASSERT_EQ(h_info_field(gw, "gateway", "cluster_get_batches_fetched"), fetched + 1);
    ASSERT_MSG(mget_waits == 0, "the MGET of %d keys made %lld blocking calls", GW_KEYS, mget_waits);
    for (int i = 0; i < 4; i++) redisAppendCommand(gw, "GET %s", keys[i]);
    ASSERT_EQ(replies_ok(gw, 4, is_value), 4);
    r = redisCommand(gw, "GET gw:never");
    ASSERT(r && r->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    ASSERT_EQ(h_info_field(gw, "gateway", "worker_master_waits") - waits, 0);   /* GETs: on the face too */
    argv[0] = "EXISTS";
    waits = h_info_field(gw, "gateway", "worker_master_waits");
    r = redisCommandArgv(gw, GW_KEYS + 1, argv, NULL);
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == GW_KEYS);
    freeReplyObject(r);
    /* its keys asked as one operation on the router's async face (split
     * by group there, a MOON.MEXISTS each): no blocking call (was 1, and
     * 60 before that) */
    long long exists_waits = h_info_field(gw, "gateway", "worker_master_waits") - waits;
    ASSERT_MSG(exists_waits == 0, "the EXISTS of %d keys made %lld blocking calls", GW_KEYS, exists_waits);
    r = redisCommand(gw, "TYPE %s", keys[0]);
    ASSERT(r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "string") == 0);
    freeReplyObject(r);
    r = redisCommand(gw, "TTL %s", keys[1]);
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == -1);
    freeReplyObject(r);
    ASSERT_EQ(h_info_field(gw, "gateway", "worker_master_waits") - waits, 0);   /* TYPE, TTL: on the face too */
    /* STRLEN, and a SET of a stored key's own bytes (its size and CRC
     * asked): a stat on the face each (MOON.OBJECT), where each was a
     * blocking call on a worker */
    for (int i = 0; i < 4; i++) redisAppendCommand(gw, "STRLEN %s", keys[i]);
    for (int i = 0; i < 4; i++) {
        r = NULL;
        ASSERT(redisGetReply(gw, (void **)&r) == REDIS_OK && r && r->type == REDIS_REPLY_INTEGER &&
               (size_t)r->integer == fill(src, i));
        freeReplyObject(r);
    }
    r = redisCommand(gw, "STRLEN gw:never");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0);
    freeReplyObject(r);
    long long strlen_waits = h_info_field(gw, "gateway", "worker_master_waits") - waits;
    ASSERT_MSG(strlen_waits == 0, "5 STRLENs made %lld blocking calls", strlen_waits);
    n = fill(src, 2);
    r = redisCommand(gw, "SET %s %b", keys[2], src, n);
    ASSERT_MSG(is_ok_status(r, 0), "SET of %s's own bytes again: %s", keys[2], r && r->str ? r->str : "no reply");
    freeReplyObject(r);
    /* its put batch and the ask of the stored size and CRC: on the face */
    long long set_waits = h_info_field(gw, "gateway", "worker_master_waits") - waits;
    ASSERT_MSG(set_waits == 0, "a SET of stored bytes made %lld blocking calls", set_waits);
    /* MOON.PREFIX of 10 stored keys, one never stored, one more stored:
     * 10, by one exists batch on the face (was a blocking call) */
    const char *pargv[13] = {"MOON.PREFIX"};
    for (int i = 0; i < 10; i++) pargv[i + 1] = keys[i];
    pargv[11] = "gw:never";
    pargv[12] = keys[10];
    r = redisCommandArgv(gw, 13, pargv, NULL);
    ASSERT_MSG(r && r->type == REDIS_REPLY_INTEGER && r->integer == 10, "MOON.PREFIX: %s",
               r && r->type == REDIS_REPLY_ERROR ? r->str : "not 10");
    freeReplyObject(r);
    ASSERT_EQ(h_info_field(gw, "gateway", "worker_master_waits") - waits, 0);
    argv[0] = "DEL";
    waits = h_info_field(gw, "gateway", "worker_master_waits");
    long long asked = removes_asked();
    r = redisCommandArgv(gw, GW_KEYS / 2 + 1, argv, NULL);   /* the first half */
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == GW_KEYS / 2);
    freeReplyObject(r);
    /* one operation on the face (was a blocking call per key), one
     * MOON.MREMOVE per group */
    long long del_waits = h_info_field(gw, "gateway", "worker_master_waits") - waits;
    long long del_asked = removes_asked() - asked;
    ASSERT_MSG(del_waits == 0, "the DEL of %d keys made %lld blocking calls", GW_KEYS / 2, del_waits);
    ASSERT_MSG(del_asked == 2, "the DEL of %d keys over 2 groups was %lld remove commands", GW_KEYS / 2, del_asked);
    for (int i = 0; i < GW_KEYS; i++)
        ASSERT_MSG(holds(port_of(group_of(keys[i])), keys[i]) == (i >= GW_KEYS / 2), "%.31s after DEL", keys[i]);
    for (int i = GW_KEYS / 2; i < GW_KEYS; i++) redisAppendCommand(gw, "GET %s", keys[i]);
    for (int i = GW_KEYS / 2; i < GW_KEYS; i++) {   /* the rest byte-exact */
        r = NULL;
        ASSERT(redisGetReply(gw, (void **)&r) == REDIS_OK && is_value(r, i));
        freeReplyObject(r);
    }
    /* a moved slot: the gateway routes by the map it read, a answers MOVED */
    int next = 0;
    char key[32];
    fresh_key(key, sizeof key, "gwmv", "a", &next);
    ASSERT(move_slot(key, "b") > 0);
    long long moved_a = h_port_info(MASTER_A, "cluster", "slots_moved");
    n = fill(src, 5);
    r = redisCommand(gw, "SET %s %b", key, src, n);
    ASSERT_MSG(is_ok_status(r, 0), "SET %s: %s", key, r && r->str ? r->str : "no reply");
    freeReplyObject(r);
    ASSERT(holds(MASTER_B, key));
    ASSERT_MSG(h_port_info(MASTER_A, "cluster", "slots_moved") > moved_a, "group a never answered MOVED");
    r = redisCommand(gw, "GET %s", key);
    ASSERT(is_value(r, 5));
    freeReplyObject(r);
    ASSERT(move_slot(key, "a") > 0);   /* as the other cases expect it */
    /* the gateway's map still says b: b answers MOVED, the face reads the
     * map again and asks a, with no blocking call */
    long long moved_b = h_port_info(MASTER_B, "cluster", "slots_moved");
    waits = h_info_field(gw, "gateway", "worker_master_waits");
    r = redisCommand(gw, "EXISTS %s", key);
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1));
    freeReplyObject(r);
    ASSERT_MSG(h_port_info(MASTER_B, "cluster", "slots_moved") > moved_b, "group b never answered MOVED");
    ASSERT_EQ(h_info_field(gw, "gateway", "worker_master_waits") - waits, 0);
    /* a DEL of all 60 (30 of them stored): one operation, a MOON.MREMOVE per group */
    waits = h_info_field(gw, "gateway", "worker_master_waits");
    asked = removes_asked();
    r = redisCommandArgv(gw, GW_KEYS + 1, argv, NULL);
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == GW_KEYS - GW_KEYS / 2);
    freeReplyObject(r);
    long long all_waits = h_info_field(gw, "gateway", "worker_master_waits") - waits;
    long long all_asked = removes_asked() - asked;
    ASSERT_MSG(all_waits == 0 && all_asked == 2, "the DEL of %d keys: %lld blocking calls, %lld remove commands",
               GW_KEYS, all_waits, all_asked);
    for (int i = 0; i < GW_KEYS; i++) ASSERT_MSG(!holds(port_of(group_of(keys[i])), keys[i]), "%.31s after DEL", keys[i]);
    printf("# gateway over groups: %d of %d keys on group a, the rest on b; %lld routed put batches, %lld blocking "
           "calls; "
           "MGET of %d keys: %lld blocking call(s), EXISTS: %lld; 5 STRLENs: %lld; a SET again: %lld; DEL of %d: %lld "
           "blocking call(s), %lld remove commands; DEL of %d: %lld, %lld\n", in_a, GW_KEYS, batches, sets_waits, GW_KEYS,
           mget_waits, exists_waits, strlen_waits, set_waits, GW_KEYS / 2,
           del_waits, del_asked, GW_KEYS, all_waits, all_asked);
    redisFree(gw);
}

/* Group c joins with no slots; the operator gives it the last quarter
 * of the key space (b's): new keys there go to c, the rest stay. */
/* mkv_get_batch_placed's memory: object i (ctx = &placed[i], in an
 * array starting at placed0) at dst + i * MAX_VAL; the size asked kept
 * in *ctx. Parts of a batch ask at once, each for its own objects. */
static size_t *placed0;

static void *place_at(void *ctx, uint64_t size) {
    size_t *sz = ctx;
    if (size > MAX_VAL) return NULL;
    *sz = (size_t)size;
    return dst + (size_t)(sz - placed0) * MAX_VAL;
}

static void test_group_added(void) {
    char err[ETCD_ERR_LEN];
    etcd_client *ec = etcd_create(etcd.url, 1000, err, sizeof err);
    int changed = 0;
    uint64_t v = 0;
    ASSERT(ec);
    int rc = etcd_slotmap_assign(ec, CLUSTER, "12288-16383", "c", 0, &changed, &v, err, sizeof err);
    etcd_free(ec);
    ASSERT_MSG(rc == 0 && changed == 4096, "assign: %s (%d changed)", err, changed);
    ASSERT(wait_version(MASTER_A, (long long)v, 10000) == 0);
    ASSERT(wait_version(MASTER_B, (long long)v, 10000) == 0);
    ASSERT(wait_version(MASTER_C, (long long)v, 10000) == 0);
    c_first = 12288;
    ASSERT_EQ(h_port_info(MASTER_B, "cluster", "slots_owned"), 4096);
    ASSERT_EQ(h_port_info(MASTER_C, "cluster", "slots_owned"), 4096);
    enum { N = 90 };
    mkv_obj objs[N];
    char keys[N][32];
    int per[3] = {0, 0, 0};
    for (int i = 0; i < N; i++) {
        key_name(keys[i], sizeof keys[i], "three", i);
        objs[i] = (mkv_obj){.key = keys[i], .keylen = strlen(keys[i]), .buf = src + (size_t)i * MAX_VAL};
        objs[i].len = fill(objs[i].buf, 500 + i);
        per[group_of(keys[i])[0] - 'a']++;
    }
    ASSERT_MSG(per[0] && per[1] && per[2], "keys per group %d %d %d", per[0], per[1], per[2]);
    ASSERT_EQ(mkv_put_batch(mc, objs, N, 1), MKV_OK);
    for (int i = 0; i < N; i++) {
        ASSERT_MSG(objs[i].status == MKV_OK, "put %.31s: %d", keys[i], objs[i].status);
        ASSERT_MSG(holds(port_of(group_of(keys[i])), keys[i]), "%.31s not on group %s", keys[i], group_of(keys[i]));
        objs[i].buf = dst + (size_t)i * MAX_VAL;
        objs[i].len = MAX_VAL;
    }
    ASSERT_EQ(mkv_get_batch(mc, objs, N), MKV_OK);
    for (int i = 0; i < N; i++) {
        size_t n = fill(src, 500 + i);
        ASSERT_MSG(objs[i].status == MKV_OK && objs[i].len == n && memcmp(objs[i].buf, src, n) == 0,
                   "get %.31s: %d", keys[i], objs[i].status);
    }
    /* the same keys with sizes unknown (mkv_get_batch_placed): each
     * object's memory asked once located, over the three groups at once;
     * a key never put is not found and asks for none */
    mkv_pobj p[N + 1];
    size_t placed[N + 1];
    placed0 = placed;
    memset(dst, 0, (size_t)(N + 1) * MAX_VAL);
    for (int i = 0; i <= N; i++) {
        placed[i] = 0;
        p[i] = (mkv_pobj){.key = keys[i < N ? i : 0], .keylen = strlen(keys[i < N ? i : 0]), .place = place_at,
                          .ctx = &placed[i]};
    }
    p[N].key = "three-never-put";
    p[N].keylen = strlen(p[N].key);
    ASSERT_EQ(mkv_get_batch_placed(mc, p, N + 1), MKV_OK);
    for (int i = 0; i < N; i++) {
        size_t n = fill(src, 500 + i);
        ASSERT_MSG(p[i].status == MKV_OK && p[i].len == n && placed[i] == n && memcmp(p[i].buf, src, n) == 0,
                   "placed get %.31s: %d", keys[i], p[i].status);
    }
    ASSERT_EQ(p[N].status, MKV_ENOTFOUND);
    ASSERT_EQ(placed[N], 0);
    printf("# three groups: %d, %d, %d keys of the batch on a, b, c\n", per[0], per[1], per[2]);
}

/* MOON.FLUSH in every group: the keys of all three go. */
static void test_remove_all(void) {
    uint64_t removed = 0;
    ASSERT_MSG(mkv_remove_all(mc, &removed) == MKV_OK, "%s", mkv_last_error(mc));
    ASSERT_MSG(removed >= 90 + NKEYS / 2, "removed %llu", (unsigned long long)removed);   /* three groups' batch, k:* left */
    char key[32];
    for (int i = 0; i < 90; i++) {
        key_name(key, sizeof key, "three", i);
        ASSERT_MSG(mkv_exists(mc, key, strlen(key)) == 0, "%s still exists", key);
    }
}

/* Complete objects over the three groups' masters. */
static long long objects_in_groups(void) {
    return h_port_info(MASTER_A, "cluster", "objects_complete") + h_port_info(MASTER_B, "cluster", "objects_complete") +
           h_port_info(MASTER_C, "cluster", "objects_complete");
}

/* A SCAN walk through the gateway, COUNT 7: keys of prefix "ks:" below
 * k marked in seen (times each), all keys counted; the pages it took,
 * -1 on an error or a walk past 1000 pages. */
static int scan_walk(redisContext *gw, int k, int *seen, long long *all) {
    char cursor[32] = "0";
    int pages = 0;
    do {
        redisReply *r = redisCommand(gw, "SCAN %s COUNT 7", cursor);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING) {
            printf("# SCAN %s: %s\n", cursor, r && r->type == REDIS_REPLY_ERROR ? r->str : "not a page");
            freeReplyObject(r);
            return -1;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        const redisReply *keys = r->element[1];
        for (size_t i = 0; i < keys->elements; i++) {
            int at;
            (*all)++;
            if (sscanf(keys->element[i]->str, "ks:%d", &at) == 1 && at >= 0 && at < k) seen[at]++;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0 && ++pages < 1000);
    return pages < 1000 ? pages : -1;
}

/* DBSIZE, SCAN, KEYS and FLUSHALL through a gateway over three master
 * groups (were refused there): each group's master asked in turn, the
 * counts summed, the walk from group to group, the flush in every group. */
static void test_gateway_keyspace(void) {
    enum { K = 45 };
    redisContext *gw = h_redis(GATEWAY_PORT);
    ASSERT(gw);
    long long base = objects_in_groups();
    redisReply *r = redisCommand(gw, "DBSIZE");
    ASSERT_MSG(r && r->type == REDIS_REPLY_INTEGER && r->integer == base, "DBSIZE: %s (groups hold %lld)",
               r && r->type == REDIS_REPLY_ERROR ? r->str : "not their sum", base);
    freeReplyObject(r);
    char keys[K][32];
    int per[3] = {0, 0, 0}, seen[K] = {0};
    for (int i = 0; i < K; i++) {
        key_name(keys[i], sizeof keys[i], "ks", i);
        per[group_of(keys[i])[0] - 'a']++;
        size_t n = fill(src, i);
        redisAppendCommand(gw, "SET %s %b", keys[i], src, n);
    }
    ASSERT_MSG(per[0] && per[1] && per[2], "keys per group %d %d %d", per[0], per[1], per[2]);
    ASSERT_EQ(replies_ok(gw, K, is_ok_status), K);
    r = redisCommand(gw, "DBSIZE");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == base + K);
    freeReplyObject(r);
    long long all = 0;
    int pages = scan_walk(gw, K, seen, &all);
    ASSERT(pages > 0);
    for (int i = 0; i < K; i++) ASSERT_MSG(seen[i] == 1, "SCAN returned %s %d times", keys[i], seen[i]);
    ASSERT_EQ(all, base + K);   /* nothing twice: no slot moved meanwhile */
    printf("# SCAN COUNT 7 over 3 groups: %lld keys in %d pages (%d + %d + %d of ours)\n", all, pages + 1, per[0],
           per[1], per[2]);
    r = redisCommand(gw, "KEYS ks:*");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == K);
    freeReplyObject(r);
    /* a cursor naming no group: an empty last page, and the gateway serves on */
    r = redisCommand(gw, "SCAN 18446744073709551615");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && strcmp(r->element[0]->str, "0") == 0 &&
           r->element[1]->elements == 0);
    freeReplyObject(r);
    r = redisCommand(gw, "FLUSHALL");
    ASSERT_MSG(is_ok_status(r, 0), "FLUSHALL: %s", r && r->str ? r->str : "no reply");
    freeReplyObject(r);
    ASSERT_EQ(objects_in_groups(), 0);
    r = redisCommand(gw, "DBSIZE");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0);
    freeReplyObject(r);
    redisFree(gw);
}

static int put_ok(const char *key) {
    size_t n = fill(src, 7);
    return mkv_put(mc, key, strlen(key), src, n, 1) == MKV_OK;
}

static void test_leader_killed_other_group_serves(void) {
    int next = 0, served_b = 0, tried_b = 0;
    char key[32];
    h_kill(master_a);
    uint64_t t0 = mono_ms();
    /* group b serves throughout group a's election */
    while (h_wait_role(MASTER_A2, "leader", 0) != 0 && mono_ms() - t0 < 30000) {
        fresh_key(key, sizeof key, "fb", "b", &next);
        tried_b++;
        served_b += put_ok(key);
    }
    ASSERT_MSG(served_b == tried_b, "group b served %d of %d puts while group a elected", served_b, tried_b);
    ASSERT(h_wait_role(MASTER_A2, "leader", 5000) == 0);
    long long elect = (long long)(mono_ms() - t0);
    fresh_key(key, sizeof key, "fa", "a", &next);
    long long first = -1;
    while (mono_ms() - t0 < 45000 && first < 0)
        if (put_ok(key)) first = (long long)(mono_ms() - t0);
        else usleep(50000);
    ASSERT_MSG(first >= 0, "group a's new leader took no put within 45 s: %s", mkv_last_error(mc));
    ASSERT(holds(MASTER_A2, key));
    printf("# group a: standby led %lld ms after kill -9, first put %lld ms; group b served %d puts meanwhile "
           "(its keys held back %lld times in all)\n", elect, first, served_b,
           h_port_info(MASTER_B, "cluster", "slots_held"));
}

/* ---- a slot moved with its objects ---- */

#define MOVE_KEYS 40

/* The operator's tool on our etcd: its exit code; what it said into out (may be NULL). */
static int slots_tool(const char *args, char *out, size_t len) { return h_slots_tool(&etcd, CLUSTER, args, out, len); }

/* Until INFO cluster field of port is at least v. */
static long long wait_info(int port, const char *field, long long v, int timeout_ms) {
    uint64_t end = mono_ms() + (uint64_t)timeout_ms;
    long long got;
    while ((got = h_port_info(port, "cluster", field)) < v && mono_ms() < end) usleep(50000);
    return got;
}

/* A slot of group a's moved to group b with its objects, while the two
 * groups share no node: b must not adopt records naming nodes it does
 * not have (its own nodes carry the same ids, other bytes), so the move
 * waits. Meanwhile nothing is lost and nothing wrong is read: group a
 * gave every object away and answers MOVED, group b answers TRYAGAIN
 * (never a miss, never another object's bytes) and takes no new object
 * of the slot; both groups serve other slots throughout (puts and
 * byte-exact gets); group a's leader killed -9, its standby rebuilds the
 * objects from its nodes and gives them again. */
static void test_slot_move_waits_for_shared_nodes(void) {
    char tag[16], key[MOVE_KEYS][32], a[200], want[96];
    int slot = -1, leader = h_wait_role(MASTER_A2, "leader", 0) == 0 ? MASTER_A2 : MASTER_A;
    for (int t = 0; slot < 0 || slot >= 8192; t++) {   /* a slot of a's no other case uses */
        snprintf(tag, sizeof tag, "mv%d", t);
        slot = proto_key_slot(tag, strlen(tag));
        if (slot >= 8192 || strcmp(group_of(tag), "a") != 0) slot = -1;
    }
    for (int i = 0; i < MOVE_KEYS; i++) {
        snprintf(key[i], sizeof key[i], "{%s}:%d", tag, i);
        ASSERT_MSG(put_ok(key[i]), "put %.31s: %.200s", key[i], mkv_last_error(mc));
    }
    long long given0 = h_port_info(leader, "cluster", "slots_given_objects");
    char args[64];
    snprintf(args, sizeof args, "move %d b", slot);
    ASSERT_EQ(slots_tool(args, NULL, 0), 0);
    /* both groups keep serving other slots while a gives (a bounded load:
     * puts and byte-exact gets, 2-20 s), and a gives them all away once it
     * read the map, and answers MOVED */
    int next = 0, served = 0, tried = 0;
    uint64_t t0 = mono_ms();
    while (mono_ms() - t0 < 20000 &&
           (mono_ms() - t0 < 2000 || h_port_info(leader, "cluster", "slots_given_objects") < given0 + MOVE_KEYS)) {
        char k[32];
        fresh_key(k, sizeof k, "ld", tried % 2 ? "b" : "a", &next);
        if (proto_key_slot(k, strlen(k)) == slot) continue;
        size_t n = 1 + fill(src, tried++) % 4096, got = 0;   /* small, and removed: the segments stay free */
        served += mkv_put(mc, k, strlen(k), src, n, 1) == MKV_OK &&
                  mkv_get(mc, k, strlen(k), dst, MAX_VAL, &got) == MKV_OK && got == n && memcmp(src, dst, n) == 0 &&
                  mkv_remove(mc, k, strlen(k)) == MKV_OK;
    }
    ASSERT_MSG(served == tried, "%d of %d puts, byte-exact gets and removes of other slots served during the move: %.200s",
               served, tried, mkv_last_error(mc));
    ASSERT_MSG(h_port_info(leader, "cluster", "slots_given_objects") >= given0 + MOVE_KEYS,
               "group a gave %lld of %d objects away", h_port_info(leader, "cluster", "slots_given_objects") - given0,
               MOVE_KEYS);
    snprintf(want, sizeof want, "err:MOVED %d b", slot);
    for (int i = 0; i < MOVE_KEYS; i++) {
        ask(leader, a, sizeof a, "MOON.EXISTS %s", key[i]);
        ASSERT_STREQ(a, want);
    }
    /* group b pulled them and adopted none: their nodes are not its */
    ASSERT(wait_info(MASTER_B, "slots_adopt_waiting", 1, 20000) >= 1);
    ASSERT_EQ(h_port_info(MASTER_B, "cluster", "slots_adopted_objects"), 0);
    snprintf(want, sizeof want, "err:TRYAGAIN slot %d is moving here from group a", slot);
    uint64_t end = mono_ms() + 20000;   /* b read the map, and the hold of a slot just arrived passed */
    do ask(MASTER_B, a, sizeof a, "MOON.GET %s", key[0]);
    while ((strstr(a, "just moved") || strstr(a, "MOVED")) && mono_ms() < end && usleep(50000) == 0);
    for (int i = 0; i < MOVE_KEYS; i++) {
        ask(MASTER_B, a, sizeof a, "MOON.GET %s", key[i]);
        ASSERT_MSG(strncmp(a, want, strlen(want)) == 0, "group b answered a GET of %.31s: %.200s", key[i], a);
    }
    snprintf(key[0], sizeof key[0], "{%s}:new", tag);   /* no second object of a key a may hold */
    ask(MASTER_B, a, sizeof a, "MOON.EXISTS %s", key[0]);
    ASSERT_MSG(strncmp(a, want, strlen(want)) == 0, "group b answered EXISTS of a new key: %.200s", a);
    /* the move stays marked, and the tool moves it no further, nor back */
    snprintf(args, sizeof args, "assign %d a", slot);
    ASSERT(slots_tool(args, NULL, 0) != 0);
    char said[512];
    snprintf(args, sizeof args, "move %d a", slot);
    int rc = slots_tool(args, said, sizeof said);
    ASSERT_MSG(rc == 1 && strstr(said, "is being moved to b from a"), "moving the slot back: %d %.300s", rc, said);
    /* group a's leader killed: the standby rebuilds them from the nodes and gives them again */
    int standby = leader == MASTER_A2 ? MASTER_A : MASTER_A2;
    pid_t spid = start_master(standby, "a", "0-8191");
    ASSERT(spid > 0 && h_wait_role(standby, "standby", 30000) == 0);
    h_kill(leader == MASTER_A ? master_a : master_a2);
    ASSERT(h_wait_role(standby, "leader", 40000) == 0);
    long long again = wait_info(standby, "slots_given_objects", MOVE_KEYS - 1, 60000);   /* election, rebuild window */
    ASSERT_MSG(again >= MOVE_KEYS - 1,
               "the new leader of group a gave %lld objects of the slot again (it has %lld objects, recovered %lld "
               "from %lld nodes' reports)", again, h_port_info(standby, "cluster", "objects_complete"),
               h_port_info(standby, "cluster", "rebuild_recovered"),
               h_port_info(standby, "cluster", "rebuild_nodes_reported"));
    printf("# slot %d moved to group b with %d objects: group a gave them away (again %lld after its leader "
           "was killed), group b waits (%lld objects not adopted: no shared nodes), answered TRYAGAIN %lld times; "
           "%d puts and gets of other slots meanwhile\n",
           slot, MOVE_KEYS, again, h_port_info(MASTER_B, "cluster", "slots_adopt_waiting"),
           h_port_info(MASTER_B, "cluster", "slots_unadopted"), tried);
}

/* ---- setup ---- */

static int setup(void) {
    char step[160] = "";
    if ((master_a = start_master(MASTER_A, "a", "0-8191")) < 0 || h_wait_role(MASTER_A, "leader", SETUP_WAIT_MS) != 0)
        snprintf(step, sizeof step, "master of group a on %d", MASTER_A);
    else if ((master_a2 = start_master(MASTER_A2, "a", "0-8191")) < 0)
        snprintf(step, sizeof step, "standby of group a on %d", MASTER_A2);
    else if (start_master(MASTER_B, "b", "8192-16383") < 0 || h_wait_role(MASTER_B, "leader", SETUP_WAIT_MS) != 0)
        snprintf(step, sizeof step, "master of group b on %d", MASTER_B);
    else if (start_master(MASTER_C, "c", "") < 0 || h_wait_role(MASTER_C, "leader", SETUP_WAIT_MS) != 0)
        snprintf(step, sizeof step, "master of group c on %d", MASTER_C);
    for (int i = 0; i < NODES && !step[0]; i++)
        if (start_node(i) < 0) snprintf(step, sizeof step, "node %d on %d", i, NODE_PORT + 2 * i);
    if (!step[0] && (h_wait_nodes(MASTER_A, "alive", 2, SETUP_WAIT_MS) != 0 ||
                     h_wait_nodes(MASTER_B, "alive", 2, SETUP_WAIT_MS) != 0 ||
                     h_wait_nodes(MASTER_C, "alive", 2, SETUP_WAIT_MS) != 0))
        snprintf(step, sizeof step, "two nodes alive in each group");
    uint64_t end = mono_ms() + SETUP_WAIT_MS;
    while (!step[0] && (h_port_info(MASTER_A, "cluster", "slots_owned") != 8192 ||
                        h_port_info(MASTER_B, "cluster", "slots_owned") != 8192))
        if (mono_ms() >= end) snprintf(step, sizeof step, "each master owns its 8192 slots");
        else usleep(50000);
    if (!step[0] && h_groups_client(&mc, &etcd, CLUSTER, NULL, NULL) != MKV_OK)
        snprintf(step, sizeof step, "client over groups: %.100s", mkv_last_error(NULL));
    src = malloc((size_t)NKEYS * MAX_VAL);
    dst = malloc((size_t)NKEYS * MAX_VAL);
    if (!step[0] && (mkv_register_buffer(mc, src, (size_t)NKEYS * MAX_VAL) != MKV_OK ||
                     mkv_register_buffer(mc, dst, (size_t)NKEYS * MAX_VAL) != MKV_OK))
        snprintf(step, sizeof step, "register buffers: %.100s", mkv_last_error(mc));
    if (!step[0]) return 0;
    printf("not ok - groups/setup: %s\n", step);
    return -1;
}

int main(void) {
    int begun = h_groups_begin("test_groups", TIME_LIMIT_S, remove_datadir, 10 + 2 * NODES, &port0, &etcd, ETCD_PORT - port0);
    if (begun != 0) return begun > 0 ? 0 : 1;
    if (setup() != 0) {
        h_stop_all();
        return 1;
    }
    RUN_TEST(test_slots_claimed);
    RUN_TEST(test_master_answers_moved);
    RUN_TEST(test_routed_batch);
    RUN_TEST(test_routed_remove);
    RUN_TEST(test_routed_face);
    RUN_TEST(test_moved_refresh);
    RUN_TEST(test_gateway_routes);
    RUN_TEST(test_group_added);
    RUN_TEST(test_remove_all);
    RUN_TEST(test_gateway_keyspace);
    RUN_TEST(test_leader_killed_other_group_serves);
    RUN_TEST(test_slot_move_waits_for_shared_nodes);
    mkv_close(mc);
    free(src);
    free(dst);
    h_stop_all();
    TEST_EXIT();
}
