/* proto/master_link.c - see master_link.h. */
#include "proto/master_link.h"
#include "proto/reply_bound.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/util.h"

const char *proto_master_hint(const char *error_reply) {
    if (error_reply && strncasecmp(error_reply, "NOAUTH", 6) == 0)
        return " (the master has requirepass: set master_auth / --master-auth)";
    if (error_reply && strncasecmp(error_reply, "WRONGPASS", 9) == 0)
        return " (check master_auth / --master-auth)";
    return "";
}

static int link_auth(redisContext *rc, const char *password, char *err, size_t errlen) {
    const char *argv[2] = {"AUTH", password};
    size_t lens[2] = {4, strlen(password)};
    redisReply *r = redisCommandArgv(rc, 2, argv, lens);
    if (!r) {
        snprintf(err, errlen, "AUTH: %s", rc->errstr);
        return -1;
    }
    int ok = r->type == REDIS_REPLY_STATUS;
    if (!ok)
        snprintf(err, errlen, "the master refused AUTH: %s%s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply",
                 r->type == REDIS_REPLY_ERROR ? proto_master_hint(r->str) : "");
    freeReplyObject(r);
    return ok ? 0 : -1;
}

static struct timeval tv_ms(int ms) {
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

int proto_master_open(redisContext **out, const char *hostport, const char *password,
                     int connect_ms, int io_ms, char *err, size_t errlen) {
    char host[256];
    int port;
    *out = NULL;
    if (parse_hostport(hostport, host, sizeof host, &port) != 0) {
        snprintf(err, errlen, "bad master address '%s' (want host:port)", hostport);
        return PROTO_LINK_EUNREACH;
    }
    redisContext *rc = redisConnectWithTimeout(host, port, tv_ms(connect_ms));
    if (!rc || rc->err || redisSetTimeout(rc, tv_ms(io_ms)) != REDIS_OK) {
        snprintf(err, errlen, "cannot reach the master at %s: %s", hostport,
                 rc ? rc->errstr : "out of memory");
        if (rc) redisFree(rc);
        return PROTO_LINK_EUNREACH;
    }
    proto_reader_bound(rc->reader);
    if (password && password[0] && link_auth(rc, password, err, errlen) != 0) {
        int lost = rc->err != 0;
        redisFree(rc);
        return lost ? PROTO_LINK_EUNREACH : PROTO_LINK_EAUTH;
    }
    *out = rc;
    return PROTO_LINK_OK;
}
