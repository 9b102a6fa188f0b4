/* fuzz_node_task - the node's decoding of copy tasks from the master's
 * MOON.HEARTBEAT reply (src/node/task.c): arbitrary RESP, parsed by
 * hiredis, refused whole or turned into a task whose source and
 * destination extents carry the same number of bytes (t->len), at most the
 * object's (a node's share of a striped replica is less). The same bytes
 * as a whole reply: at most PROTO_MAX_TASKS tasks, each as above, with at
 * most PROTO_MAX_TASK_EXTENTS extents together unless there is one. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_reply.h"
#include "node/task.h"

static void check(const node_task *t) {
    uint64_t src = 0, dst = 0;
    if (t->nsrc <= 0 || t->ndst <= 0 || t->nsrc > PROTO_MAX_EXTENTS ||
        t->ndst > PROTO_MAX_EXTENTS)
        abort();
    for (int i = 0; i < t->nsrc; i++) src += t->src[i].length;
    for (int i = 0; i < t->ndst; i++) dst += t->dst[i].length;
    if (src != t->len || dst != t->len || t->len > t->size) abort();
    /* Any window of the task's bytes maps onto source extents inside it. */
    te_extent *out = calloc((size_t)t->nsrc, sizeof *out);
    uint64_t pos = t->len / 3, len = t->len - pos;
    int n = node_task_src_range(t, pos, len, out);
    uint64_t got = 0;
    for (int i = 0; i < n; i++) got += out[i].length;
    if (n < 0 || n > t->nsrc || got != len) abort();
    free(out);
}

static void check_reply(const redisReply *r) {
    uint64_t refused[PROTO_MAX_TASKS];
    size_t nrefused = 0, n = 0, extents = 0;
    node_task *head = node_tasks_parse(r, refused, &nrefused);
    for (node_task *t = head, *next; t; t = next) {
        next = t->next;
        check(t);
        n++;
        extents += (size_t)t->nsrc + (size_t)t->ndst;
        node_task_free(t);
    }
    if (n > PROTO_MAX_TASKS || nrefused > PROTO_MAX_TASKS || (n > 1 && extents > PROTO_MAX_TASK_EXTENTS))
        abort();
    for (size_t i = 0; i < nrefused; i++)
        if (refused[i] == 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536) return 0;
    redisReply *r = fuzz_reply_parse(data, size);
    if (r) {
        uint64_t id = 0;
        node_task *t = node_task_parse(r, &id);
        if (t) {
            check(t);
            node_task_free(t);
        }
        check_reply(r);
        freeReplyObject(r);
    }
    return 0;
}
