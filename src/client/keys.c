/* client/keys.c - the calls that need no data transfer: remove and
 * exists (single and batch). */
#include <stdlib.h>

#include "client/client.h"
#include "core/util.h"
#include "proto/replies.h"

/* A command on one key whose answer is an integer. */
static int key_integer(mkv_client *c, const char *name, const void *key, size_t keylen,
                       long long *out) {
    int rc = mkv_check_key(c, key, keylen);
    if (rc != MKV_OK) return rc;
    proto_cmd cmd;
    proto_cmd_key(&cmd, name, key, keylen);
    redisReply *r = mkv_cmd_run(c, &cmd, &rc);
    if (!r) return rc;
    if (proto_dec_int(r, INT64_MIN, INT64_MAX, out) != 0) rc = mkv_bad_reply(c, name, r);
    freeReplyObject(r);
    return rc;
}

int mkv_remove(mkv_client *c, const void *key, size_t keylen) {
    if (!c) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_remove(c, key, keylen));
    MKV_ON_LANE(c);
    long long removed;
    int rc = key_integer(c, PROTO_VERB_REMOVE, key, keylen, &removed);
    if (rc == MKV_OK && !removed) rc = mkv_fail(c, MKV_ENOTFOUND, "no such object");
    return rc;
}

int mkv_exists(mkv_client *c, const void *key, size_t keylen) {
    if (!c) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_exists(c, key, keylen));
    MKV_ON_LANE(c);
    long long found;
    int rc = key_integer(c, PROTO_VERB_EXISTS, key, keylen, &found);
    return rc != MKV_OK ? rc : found != 0;
}

redisReply *mkv_keys_run(mkv_client *c, proto_cmd *cmd, const mkv_obj *objs, size_t n, int *rc) {
    for (size_t i = 0; i < n; i++) {
        if ((*rc = mkv_check_key(c, objs[i].key, objs[i].keylen)) != MKV_OK) {
            proto_cmd_free(cmd);
            return NULL;
        }
        proto_cmd_bin(cmd, objs[i].key, objs[i].keylen);
    }
    return mkv_cmd_run(c, cmd, rc);
}

/* verb (MOON.MEXISTS, MOON.PREFIX) over the keys of objs[0..n). */
static redisReply *keys_run(mkv_client *c, const char *verb, const mkv_obj *objs, size_t n, int *rc) {
    proto_cmd cmd;
    proto_cmd_keys_begin(&cmd, verb, n);
    return mkv_keys_run(c, &cmd, objs, n, rc);
}

int mkv_prefix_count(mkv_client *c, const char *verb, const redisReply *r, size_t n, size_t *count) {
    long long hit;
    if (proto_dec_int(r, 0, (long long)n, &hit) == 0) {
        *count = (size_t)hit;
        return MKV_OK;
    }
    if (r->type == REDIS_REPLY_ERROR) return mkv_reply_error(c, r->str, r->len);
    return mkv_bad_reply(c, verb, r);
}

static int exists_run(mkv_client *c, mkv_obj *objs, size_t n, int *results) {
    int rc;
    redisReply *r = keys_run(c, PROTO_VERB_MEXISTS, objs, n, &rc);
    if (!r) return rc;
    if (proto_dec_flags(r, n, results) != 0) rc = mkv_bad_reply(c, PROTO_VERB_MEXISTS, r);
    for (size_t i = 0; rc == MKV_OK && i < n; i++) objs[i].status = MKV_OK;
    freeReplyObject(r);
    return rc;
}

int mkv_exists_batch(mkv_client *c, mkv_obj *objs, size_t n, int *results) {
    if (!c || ((!objs || !results) && n)) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_exists_batch(c, objs, n, results));
    MKV_ON_LANE(c);
    int rc = MKV_OK;
    for (size_t i = 0; rc == MKV_OK && i < n; i += PROTO_MAX_BATCH)
        rc = exists_run(c, objs + i, n - i < PROTO_MAX_BATCH ? n - i : PROTO_MAX_BATCH, results + i);
    return rc;
}

int mkv_removed_statuses(mkv_client *c, const redisReply *r, mkv_obj *objs, size_t n) {
    int rc = MKV_OK, *got = xcalloc(n ? n : 1, sizeof *got);
    if (proto_dec_removed(r, n, got) != 0)
        rc = r->type == REDIS_REPLY_ERROR ? mkv_reply_error(c, r->str, r->len) : mkv_bad_reply(c, PROTO_VERB_MREMOVE, r);
    for (size_t i = 0; rc == MKV_OK && i < n; i++) {
        const redisReply *e = r->element[i];
        objs[i].status = got[i] == 1 ? MKV_OK : got[i] == 0 ? MKV_ENOTFOUND : mkv_reply_error(c, e->str, e->len);
    }
    free(got);
    return rc;
}

static int remove_run(mkv_client *c, mkv_obj *objs, size_t n) {
    int rc;
    redisReply *r = keys_run(c, PROTO_VERB_MREMOVE, objs, n, &rc);
    if (!r) return rc;
    rc = mkv_removed_statuses(c, r, objs, n);
    freeReplyObject(r);
    return rc;
}

int mkv_remove_batch(mkv_client *c, mkv_obj *objs, size_t n) {
    if (!c || (!objs && n)) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_remove_batch(c, objs, n));
    MKV_ON_LANE(c);
    int rc = MKV_OK;
    for (size_t i = 0; rc == MKV_OK && i < n; i += PROTO_MAX_BATCH)
        rc = remove_run(c, objs + i, n - i < PROTO_MAX_BATCH ? n - i : PROTO_MAX_BATCH);
    return rc;
}

/* MOON.PREFIX over one chunk: how many leading keys are present. */
static int prefix_run(mkv_client *c, const mkv_obj *objs, size_t n, size_t *count) {
    int rc;
    redisReply *r = keys_run(c, PROTO_VERB_PREFIX, objs, n, &rc);
    if (!r) return rc;
    rc = mkv_prefix_count(c, PROTO_VERB_PREFIX, r, n, count);
    freeReplyObject(r);
    return rc;
}

int mkv_exists_prefix(mkv_client *c, const mkv_obj *objs, size_t n, size_t *count) {
    if (!c || !count || (!objs && n)) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_exists_prefix(c, objs, n, count));
    MKV_ON_LANE(c);
    *count = 0;
    for (size_t i = 0; i < n; i += PROTO_MAX_BATCH) {
        size_t chunk = n - i < PROTO_MAX_BATCH ? n - i : PROTO_MAX_BATCH, hit = 0;
        int rc = prefix_run(c, objs + i, chunk, &hit);
        if (rc != MKV_OK) return rc;
        *count += hit;
        if (hit < chunk) break;   /* the prefix ended in this chunk */
    }
    return MKV_OK;
}

int mkv_remove_all(mkv_client *c, uint64_t *removed) {
    if (!c) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_remove_all(c, removed));
    MKV_ON_LANE(c);
    proto_cmd cmd;
    proto_cmd_bare(&cmd, PROTO_VERB_FLUSH);
    int rc;
    redisReply *r = mkv_cmd_run(c, &cmd, &rc);
    if (!r) return rc;
    long long n;
    if (proto_dec_int(r, 0, INT64_MAX, &n) == 0) {
        if (removed) *removed = (uint64_t)n;
    } else if (r->type == REDIS_REPLY_ERROR) {
        rc = mkv_reply_error(c, r->str, r->len);
    } else {
        rc = mkv_bad_reply(c, PROTO_VERB_FLUSH, r);
    }
    freeReplyObject(r);
    return rc;
}
