/* tests/fuzz/fuzz_reply.h - fuzz input as a RESP reply, parsed by hiredis
 * exactly as a client or node reads one from the master.
 *
 * hiredis 0.14 (Debian 12) allocates an array's element table from its
 * declared count before any element arrives and has no maxelements knob,
 * so "*344444444\r\n" costs 2.7 GB inside hiredis: inputs declaring an
 * array above FUZZ_REPLY_MAX_ARRAY are skipped, leaving that limit of the
 * dependency out of what these harnesses judge (see the README, hostile
 * input). */
#ifndef MKV_FUZZ_REPLY_H
#define MKV_FUZZ_REPLY_H

#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#include <stddef.h>
#include <stdint.h>

#define FUZZ_REPLY_MAX_ARRAY 65536

static inline int fuzz_reply_huge_array(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '*') continue;
        unsigned long long v = 0;
        for (size_t k = i + 1; k < n && p[k] >= '0' && p[k] <= '9' && v <= FUZZ_REPLY_MAX_ARRAY; k++)
            v = v * 10 + (unsigned)(p[k] - '0');
        if (v > FUZZ_REPLY_MAX_ARRAY) return 1;
    }
    return 0;
}

/* The first reply in p[0..n), or NULL; free with freeReplyObject. */
static inline redisReply *fuzz_reply_parse(const uint8_t *p, size_t n) {
    if (fuzz_reply_huge_array(p, n)) return NULL;
    redisReader *rd = redisReaderCreate();
    if (!rd) return NULL;
    void *reply = NULL;
    if (redisReaderFeed(rd, (const char *)p, n) != REDIS_OK || redisReaderGetReply(rd, &reply) != REDIS_OK)
        reply = NULL;
    redisReaderFree(rd);
    return reply;
}

#endif
