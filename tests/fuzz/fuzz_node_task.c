/* fuzz_node_task - the node's decoding of copy tasks from the master's
 * MOON.HEARTBEAT reply (src/node/task.c): arbitrary RESP, parsed by
 * hiredis, refused whole or turned into a task whose source and
 * destination extents carry the same number of bytes (t->len), at most the
 * object's (a node's share of a striped replica is less). */
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
        freeReplyObject(r);
    }
    return 0;
}
