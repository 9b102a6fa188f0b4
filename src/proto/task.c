/* proto/task.c - see task.h. */
#include "proto/task.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "proto/extents.h"
#include "proto/limits.h"
#include "proto/verbs.h"

void proto_task_free(proto_task *t) {
    free(t->src);
    free(t->dst);
    free(t->obj_off);
    t->src = t->dst = NULL;
    t->obj_off = NULL;
}

static int word_is(const redisReply *w, const char *word) {
    return (w->type == REDIS_REPLY_STRING || w->type == REDIS_REPLY_STATUS) && w->len == strlen(word) &&
           memcmp(w->str, word, w->len) == 0;
}

static uint64_t earliest(const te_extent *e, uint32_t n) {
    uint64_t at = UINT64_MAX;
    for (uint32_t i = 0; i < n; i++)
        if (e[i].cap.expiry_ms < at) at = e[i].cap.expiry_ms;
    return at;
}

/* An offload's share: where each of its n extents lies in the object of
 * size bytes (in order, none overlapping the next, none past the end). */
static int dec_places(const redisReply *r, const te_extent *e, uint32_t n, uint64_t size, uint64_t **out) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n || n == 0) return -1;
    uint64_t *at = xmalloc(n * sizeof *at), end = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (proto_int_in(r->element[i], (long long)end, (long long)size, &at[i]) != 0 || e[i].length > size - at[i]) {
            free(at);
            return -1;
        }
        end = at[i] + e[i].length;
    }
    *out = at;
    return 0;
}

/* An offload, a load or a push: the object between the one extent list
 * and the disk store; whole, or for an object striped over nodes, this
 * node's share of it (fewer bytes than the object's size). */
static int dec_disk(const redisReply *r, proto_task *t) {
    uint64_t crc, len;
    t->kind = word_is(r->element[4], PROTO_TASK_DISK) ? PROTO_OFFLOAD_TASK
            : word_is(r->element[4], PROTO_TASK_LOAD) ? PROTO_LOAD_TASK
            : word_is(r->element[4], PROTO_TASK_PUSH) ? PROTO_PUSH_TASK : -1;
    if (t->kind < 0 || proto_int_in(r->element[5], 0, UINT32_MAX, &crc) != 0 || r->element[1]->len > PROTO_MAX_KEY_LEN)
        return -1;
    int off = t->kind == PROTO_OFFLOAD_TASK;
    te_extent **ext = off ? &t->src : &t->dst;
    uint32_t *n = off ? &t->nsrc : &t->ndst;
    if (proto_extents_decode_share(r->element[3], t->kind == PROTO_LOAD_TASK ? PROTO_EXT_LOCAL : PROTO_EXT_REMOTE,
                                   t->size, off ? TE_CAP_READ : TE_CAP_WRITE, ext, n, &len) != 0)
        return -1;
    if (len > t->size) {
        proto_task_free(t);
        return -1;
    }
    t->len = len;
    t->crc = (uint32_t)crc;
    t->key = r->element[1]->str;
    t->keylen = r->element[1]->len;
    t->expiry_ms = earliest(*ext, *n);
    if (r->elements == 7 &&
        (!off || len == t->size || dec_places(r->element[6], t->src, t->nsrc, t->size, &t->obj_off) != 0)) {
        proto_task_free(t);
        return -1;
    }
    return 0;
}

/* A copy (of a share of the object): both sides agree on its length. */
static int dec_copy(const redisReply *r, proto_task *t) {
    uint64_t len_src, len_dst;
    t->kind = PROTO_COPY_TASK;
    if (proto_extents_decode_share(r->element[3], PROTO_EXT_REMOTE, t->size, TE_CAP_READ, &t->src, &t->nsrc,
                                   &len_src) != 0)
        return -1;
    if (proto_extents_decode_share(r->element[4], PROTO_EXT_LOCAL, t->size, TE_CAP_WRITE, &t->dst, &t->ndst,
                                   &len_dst) != 0 ||
        len_src != len_dst) {
        proto_task_free(t);
        return -1;
    }
    t->len = len_dst;
    t->expiry_ms = earliest(t->dst, t->ndst);
    return 0;
}

int proto_dec_task(const redisReply *r, proto_task *out) {
    memset(out, 0, sizeof *out);
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 5 || r->elements > 7 ||
        proto_int_in(r->element[0], 1, INT64_MAX, &out->id) != 0) {
        out->id = 0;
        return -1;
    }
    uint64_t id = out->id;
    int rc = r->element[1]->type == REDIS_REPLY_STRING && proto_int_in(r->element[2], 1, INT64_MAX, &out->size) == 0
                 ? (r->elements >= 6 ? dec_disk(r, out) : dec_copy(r, out))
                 : -1;
    if (rc != 0) {
        memset(out, 0, sizeof *out);
        out->id = id;
    }
    return rc;
}
