/* proto/reply_bound.c - see reply_bound.h. The reader's own object
 * functions do the work; only createArray gets a check in front. */
#include "proto/reply_bound.h"

#include <stddef.h>

/* hiredis's default functions: the same table for every reader, so the
 * first reader seen supplies it (atomics: readers open on any thread). */
static redisReplyObjectFunctions *default_fn;

static void *bounded_array(const redisReadTask *task, int elements) {
    redisReplyObjectFunctions *fn = __atomic_load_n(&default_fn, __ATOMIC_ACQUIRE);
    if (elements < 0 || elements > PROTO_MAX_REPLY_ELEMENTS || !fn) return NULL;
    return fn->createArray(task, elements);
}

static void *bounded_string(const redisReadTask *task, char *s, size_t len) {
    return __atomic_load_n(&default_fn, __ATOMIC_ACQUIRE)->createString(task, s, len);
}

static void *bounded_integer(const redisReadTask *task, long long v) {
    return __atomic_load_n(&default_fn, __ATOMIC_ACQUIRE)->createInteger(task, v);
}

static void *bounded_nil(const redisReadTask *task) {
    return __atomic_load_n(&default_fn, __ATOMIC_ACQUIRE)->createNil(task);
}

static void bounded_free(void *obj) {
    __atomic_load_n(&default_fn, __ATOMIC_ACQUIRE)->freeObject(obj);
}

static redisReplyObjectFunctions bounded_fn = {
    bounded_string, bounded_array, bounded_integer, bounded_nil, bounded_free,
};

void proto_reader_bound(redisReader *r) {
    if (!r || !r->fn || r->fn == &bounded_fn) return;
    redisReplyObjectFunctions *expected = NULL;
    __atomic_compare_exchange_n(&default_fn, &expected, r->fn, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&default_fn, __ATOMIC_ACQUIRE) != r->fn) return;   /* not hiredis's table */
    r->fn = &bounded_fn;
}
