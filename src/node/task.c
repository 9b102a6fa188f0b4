/* node/task.c - see task.h: the node's side of a task; its wire form is
 * decoded by proto/task.c. */
#include "node/task.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "proto/limits.h"
#include "proto/task.h"

void node_task_free(node_task *t) {
    if (!t) return;
    free(t->src);
    free(t->dst);
    free(t->key);
    free(t->obj_off);
    free(t);
}

_Static_assert(NODE_TASK_OFFLOAD == PROTO_OFFLOAD_TASK && NODE_TASK_LOAD == PROTO_LOAD_TASK &&
                   NODE_TASK_PUSH == PROTO_PUSH_TASK && PROTO_COPY_TASK == 0,
               "to_disk is the wire task's kind");

node_task *node_task_parse(const redisReply *r, uint64_t *id) {
    proto_task p;
    int rc = proto_dec_task(r, &p);
    *id = p.id;
    if (rc != 0) return NULL;
    node_task *t = xcalloc(1, sizeof *t);
    t->id = p.id;
    t->size = p.size;
    t->len = p.len;
    t->src = p.src;
    t->dst = p.dst;
    t->nsrc = (int)p.nsrc;
    t->ndst = (int)p.ndst;
    t->expiry_ms = p.expiry_ms;
    t->to_disk = p.kind;   /* NODE_TASK_* (0: a copy) as PROTO_*_TASK */
    t->obj_off = p.obj_off;
    if (p.kind != PROTO_COPY_TASK) {
        t->crc = p.crc;
        t->keylen = p.keylen;
        t->key = xmemdup(p.key, p.keylen + 1);
    }
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

