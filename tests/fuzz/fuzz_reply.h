/* tests/fuzz/fuzz_reply.h - fuzz input as a RESP reply, parsed by hiredis
 * exactly as a client or node reads one from the master: with the bound
 * of proto/reply_bound.h on the reader, so an array declaring millions of
 * elements is refused instead of allocated (hiredis 0.14 has no knob). */
#ifndef MKV_FUZZ_REPLY_H
#define MKV_FUZZ_REPLY_H

#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/reply_bound.h"

/* The first reply in p[0..n), or NULL; free with freeReplyObject. */
static inline redisReply *fuzz_reply_parse(const uint8_t *p, size_t n) {
    redisReader *rd = redisReaderCreate();
    if (!rd) return NULL;
    proto_reader_bound(rd);
    void *reply = NULL;
    if (redisReaderFeed(rd, (const char *)p, n) != REDIS_OK || redisReaderGetReply(rd, &reply) != REDIS_OK)
        reply = NULL;
    redisReaderFree(rd);
    return reply;
}

#endif
