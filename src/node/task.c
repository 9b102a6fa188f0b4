/* node/task.c - see task.h. */
#include "node/task.h"

#include <stdlib.h>

#include "core/util.h"
#include "node/reply.h"

void node_task_free(node_task *t) {
    if (!t) return;
    free(t->src);
    free(t->dst);
    free(t);
}

static int cap_of(const redisReply *r, te_cap *cap) {
    return r->type == REDIS_REPLY_STRING && te_cap_decode(cap, (const uint8_t *)r->str, r->len) == 0
               ? 0 : -1;
}

/* [task_id, key, size, [[node, off, len, rcap]...], [[off, len, wcap]...]] */
node_task *node_task_parse(const redisReply *r, uint64_t *id) {
    *id = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5 || !reply_int_in(r->element[0], 1, INT64_MAX))
        return NULL;
    *id = (uint64_t)r->element[0]->integer;
    const redisReply *src = r->element[3], *dst = r->element[4];
    if (r->element[1]->type != REDIS_REPLY_STRING || !reply_int_in(r->element[2], 1, INT64_MAX) ||
        src->type != REDIS_REPLY_ARRAY || dst->type != REDIS_REPLY_ARRAY || src->elements < 1 ||
        dst->elements < 1 ||
        src->elements > NODE_TASK_MAX_EXTENTS || dst->elements > NODE_TASK_MAX_EXTENTS)
        return NULL;
    node_task *t = xcalloc(1, sizeof *t);
    t->id = *id;
    t->size = (uint64_t)r->element[2]->integer;
    t->src = xcalloc(src->elements, sizeof *t->src);
    t->dst = xcalloc(dst->elements, sizeof *t->dst);
    uint64_t sum_src = 0, sum_dst = 0;
    for (size_t i = 0; i < src->elements; i++) {
        const redisReply *e = src->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 4 || !reply_int_in(e->element[0], 1, UINT32_MAX) ||
            !reply_int_in(e->element[1], 0, INT64_MAX) || !reply_int_in(e->element[2], 1, INT64_MAX) ||
            cap_of(e->element[3], &t->src[i].cap) != 0)
            goto bad;
        t->src[i].node_id = (uint32_t)e->element[0]->integer;
        t->src[i].offset = (uint64_t)e->element[1]->integer;
        t->src[i].length = (uint64_t)e->element[2]->integer;
        if (t->src[i].length > t->size - sum_src) goto bad;   /* more than the object */
        sum_src += t->src[i].length;
        t->nsrc++;
    }
    for (size_t i = 0; i < dst->elements; i++) {
        const redisReply *e = dst->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 3 || !reply_int_in(e->element[0], 0, INT64_MAX) ||
            !reply_int_in(e->element[1], 1, INT64_MAX) || cap_of(e->element[2], &t->dst[i].cap) != 0)
            goto bad;
        t->dst[i].offset = (uint64_t)e->element[0]->integer;
        t->dst[i].length = (uint64_t)e->element[1]->integer;
        if (t->dst[i].length > t->size - sum_dst) goto bad;
        sum_dst += t->dst[i].length;
        t->ndst++;
    }
    if (sum_src != t->size || sum_dst != t->size) goto bad;
    return t;
bad:
    node_task_free(t);
    return NULL;
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

