/* client/keys.c - the calls that need no data transfer: remove and
 * exists (single and batch). */
#include <stdlib.h>

#include "client/client.h"
#include "core/util.h"

/* A command on one key whose answer is an integer. */
static int key_integer(mkv_client *c, const char *name, const void *key, size_t keylen,
                       long long *out) {
    int rc = mkv_check_key(c, key, keylen);
    if (rc != MKV_OK) return rc;
    mkv_cmd cmd;
    mkv_cmd_init(&cmd, 2);
    mkv_cmd_str(&cmd, name);
    mkv_cmd_bin(&cmd, key, keylen);
    redisReply *r = mkv_cmd_run(c, &cmd, &rc);
    mkv_cmd_free(&cmd);
    if (!r) return rc;
    if (r->type == REDIS_REPLY_INTEGER) *out = r->integer;
    else rc = mkv_bad_reply(c, name, r);
    freeReplyObject(r);
    return rc;
}

int mkv_remove(mkv_client *c, const void *key, size_t keylen) {
    if (!c) return MKV_EINVAL;
    MKV_ON_LANE(c);
    long long removed;
    int rc = key_integer(c, "MOON.REMOVE", key, keylen, &removed);
    if (rc == MKV_OK && !removed) rc = mkv_fail(c, MKV_ENOTFOUND, "no such object");
    return rc;
}

int mkv_exists(mkv_client *c, const void *key, size_t keylen) {
    if (!c) return MKV_EINVAL;
    MKV_ON_LANE(c);
    long long found;
    int rc = key_integer(c, "MOON.EXISTS", key, keylen, &found);
    return rc != MKV_OK ? rc : found != 0;
}

static int exists_run(mkv_client *c, mkv_obj *objs, size_t n, int *results) {
    mkv_cmd cmd;
    mkv_cmd_init(&cmd, (int)(1 + n));
    mkv_cmd_str(&cmd, "MOON.MEXISTS");
    for (size_t i = 0; i < n; i++) {
        int rc = mkv_check_key(c, objs[i].key, objs[i].keylen);
        if (rc != MKV_OK) {
            mkv_cmd_free(&cmd);
            return rc;
        }
        mkv_cmd_bin(&cmd, objs[i].key, objs[i].keylen);
    }
    int rc;
    redisReply *r = mkv_cmd_run(c, &cmd, &rc);
    mkv_cmd_free(&cmd);
    if (!r) return rc;
    int shape_ok = r->type == REDIS_REPLY_ARRAY && r->elements == n;
    for (size_t i = 0; shape_ok && i < n; i++) shape_ok = r->element[i]->type == REDIS_REPLY_INTEGER;
    if (!shape_ok) rc = mkv_bad_reply(c, "MOON.MEXISTS", r);
    for (size_t i = 0; shape_ok && i < n; i++) {
        results[i] = r->element[i]->integer != 0;
        objs[i].status = MKV_OK;
    }
    freeReplyObject(r);
    return rc;
}

int mkv_exists_batch(mkv_client *c, mkv_obj *objs, size_t n, int *results) {
    if (!c || ((!objs || !results) && n)) return MKV_EINVAL;
    MKV_ON_LANE(c);
    int rc = MKV_OK;
    for (size_t i = 0; rc == MKV_OK && i < n; i += PROTO_MAX_BATCH)
        rc = exists_run(c, objs + i, n - i < PROTO_MAX_BATCH ? n - i : PROTO_MAX_BATCH, results + i);
    return rc;
}

/* MOON.PREFIX over one chunk: how many leading keys are present. */
static int prefix_run(mkv_client *c, const mkv_obj *objs, size_t n, size_t *count) {
    mkv_cmd cmd;
    mkv_cmd_init(&cmd, (int)(1 + n));
    mkv_cmd_str(&cmd, "MOON.PREFIX");
    for (size_t i = 0; i < n; i++) {
        int rc = mkv_check_key(c, objs[i].key, objs[i].keylen);
        if (rc != MKV_OK) {
            mkv_cmd_free(&cmd);
            return rc;
        }
        mkv_cmd_bin(&cmd, objs[i].key, objs[i].keylen);
    }
    int rc;
    redisReply *r = mkv_cmd_run(c, &cmd, &rc);
    mkv_cmd_free(&cmd);
    if (!r) return rc;
    if (r->type == REDIS_REPLY_INTEGER && r->integer >= 0 && (unsigned long long)r->integer <= n)
        *count = (size_t)r->integer;
    else if (r->type == REDIS_REPLY_ERROR)
        rc = mkv_reply_error(c, r->str, r->len);
    else
        rc = mkv_bad_reply(c, "MOON.PREFIX", r);
    freeReplyObject(r);
    return rc;
}

int mkv_exists_prefix(mkv_client *c, const mkv_obj *objs, size_t n, size_t *count) {
    if (!c || !count || (!objs && n)) return MKV_EINVAL;
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
    MKV_ON_LANE(c);
    const char *argv[1] = {"MOON.FLUSH"};
    size_t lens[1] = {10};
    int rc;
    redisReply *r = mkv_command(c, 1, argv, lens, &rc);
    if (!r) return rc;
    if (r->type == REDIS_REPLY_INTEGER && r->integer >= 0) {
        if (removed) *removed = (uint64_t)r->integer;
    } else if (r->type == REDIS_REPLY_ERROR) {
        rc = mkv_reply_error(c, r->str, r->len);
    } else {
        rc = mkv_bad_reply(c, "MOON.FLUSH", r);
    }
    freeReplyObject(r);
    return rc;
}
