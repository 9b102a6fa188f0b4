/* node/reply.h - checks on hiredis replies from the master. */
#ifndef MKV_NODE_REPLY_H
#define MKV_NODE_REPLY_H

#include <hiredis/hiredis.h>

/* 1 if r is an integer reply in [min, max]. */
static inline int reply_int_in(const redisReply *r, long long min, long long max) {
    return r && r->type == REDIS_REPLY_INTEGER && r->integer >= min && r->integer <= max;
}

#endif
