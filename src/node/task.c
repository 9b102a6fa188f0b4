/* node/task.c - see task.h. */
#include "node/task.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "proto/extents.h"
#include "proto/limits.h"
#include "proto/verbs.h"

void node_task_free(node_task *t) {
    if (!t) return;
    free(t->src);
    free(t->dst);
    free(t->key);
    free(t);
}

/* [task_id, key, size, [[node, off, len, rcap]...], [[off, len, wcap]...]] */
static int word_is(const redisReply *w, const char *word) {
    return (w->type == REDIS_REPLY_STRING || w->type == REDIS_REPLY_STATUS) && w->len == strlen(word) &&
           memcmp(w->str, word, w->len) == 0;
}

/* [id, key, size, [[node, off, len, rcap]], DISK, crc],
 * [id, key, size, [[off, len, wcap]...], LOAD, crc] or
 * [id, key, size, [[node, off, len, wcap]...], PUSH, crc]: the whole object. */
static node_task *parse_disk(const redisReply *r, uint64_t id, uint64_t size) {
    uint64_t crc, len;
    uint32_t n;
    int kind = word_is(r->element[4], PROTO_TASK_DISK)   ? NODE_TASK_OFFLOAD
             : word_is(r->element[4], PROTO_TASK_LOAD) ? NODE_TASK_LOAD
             : word_is(r->element[4], PROTO_TASK_PUSH) ? NODE_TASK_PUSH : 0;
    if (!kind || proto_int_in(r->element[5], 0, UINT32_MAX, &crc) != 0 || r->element[1]->len > PROTO_MAX_KEY_LEN)
        return NULL;
    node_task *t = xcalloc(1, sizeof *t);
    t->id = id;
    t->size = size;
    te_extent **ext = kind == NODE_TASK_OFFLOAD ? &t->src : &t->dst;
    if (proto_extents_decode_share(r->element[3], kind == NODE_TASK_LOAD ? PROTO_EXT_LOCAL : PROTO_EXT_REMOTE,
                                   size, kind == NODE_TASK_OFFLOAD ? TE_CAP_READ : TE_CAP_WRITE, ext, &n,
                                   &len) != 0 || len != size) {
        node_task_free(t);
        return NULL;
    }
    if (kind == NODE_TASK_OFFLOAD) t->nsrc = (int)n;
    else t->ndst = (int)n;
    t->len = size;
    t->to_disk = kind;
    t->crc = (uint32_t)crc;
    t->keylen = r->element[1]->len;
    t->key = xmemdup(r->element[1]->str, t->keylen + 1);
    t->expiry_ms = UINT64_MAX;
    for (uint32_t i = 0; i < n; i++)
        if ((*ext)[i].cap.expiry_ms < t->expiry_ms) t->expiry_ms = (*ext)[i].cap.expiry_ms;
    return t;
}

node_task *node_task_parse(const redisReply *r, uint64_t *id) {
    uint64_t size;
    *id = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 6 && proto_int_in(r->element[0], 1, INT64_MAX, id) == 0 &&
        r->element[1]->type == REDIS_REPLY_STRING && proto_int_in(r->element[2], 1, INT64_MAX, &size) == 0)
        return parse_disk(r, *id, size);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5 ||
        proto_int_in(r->element[0], 1, INT64_MAX, id) != 0)
        return NULL;
    if (r->element[1]->type != REDIS_REPLY_STRING ||
        proto_int_in(r->element[2], 1, INT64_MAX, &size) != 0)
        return NULL;
    node_task *t = xcalloc(1, sizeof *t);
    t->id = *id;
    t->size = size;
    uint32_t nsrc, ndst;
    uint64_t len_src, len_dst;
    /* A replica striped over nodes gives each node a task for its share
     * only: the two sides agree, and neither exceeds the object. */
    if (proto_extents_decode_share(r->element[3], PROTO_EXT_REMOTE, size, TE_CAP_READ, &t->src,
                                   &nsrc, &len_src) != 0 ||
        proto_extents_decode_share(r->element[4], PROTO_EXT_LOCAL, size, TE_CAP_WRITE, &t->dst,
                                   &ndst, &len_dst) != 0 ||
        len_src != len_dst) {
        node_task_free(t);
        return NULL;
    }
    t->nsrc = (int)nsrc;
    t->ndst = (int)ndst;
    t->len = len_dst;
    t->expiry_ms = UINT64_MAX;
    for (int i = 0; i < t->ndst; i++)
        if (t->dst[i].cap.expiry_ms < t->expiry_ms) t->expiry_ms = t->dst[i].cap.expiry_ms;
    return t;
}

node_task *node_tasks_parse(const redisReply *r, uint64_t *refused, size_t *nrefused) {
    node_task *head = NULL, **tail = &head;
    size_t extents = 0;
    *nrefused = 0;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        uint64_t id = 0;
        node_task *t = i < PROTO_MAX_TASKS ? node_task_parse(r->element[i], &id) : NULL;
        if (t && head && extents + (size_t)t->nsrc + (size_t)t->ndst > PROTO_MAX_TASK_EXTENTS) {
            node_task_free(t);
            t = NULL;
        }
        if (!t) {
            if (id && *nrefused < PROTO_MAX_TASKS) refused[(*nrefused)++] = id;
            continue;
        }
        extents += (size_t)t->nsrc + (size_t)t->ndst;
        *tail = t;
        tail = &t->next;
    }
    return head;
}

int node_task_src_range(const node_task *t, uint64_t pos, uint64_t len, te_extent *out) {
    int n = 0;
    uint64_t at = 0;
    for (int i = 0; i < t->nsrc && len > 0; i++) {
        const te_extent *s = &t->src[i];
        if (pos < at + s->length) {
            uint64_t skip = pos - at, take = s->length - skip < len ? s->length - skip : len;
            out[n] = *s;
            out[n].offset = s->offset + skip;
            out[n].length = take;
            n++;
            pos += take;
            len -= take;
        }
        at += s->length;
    }
    return n;
}

