/* gateway/master_link.c - see master_link.h. */
#include "gateway/master_link.h"

#include <sys/time.h>

#include "core/util.h"
#include "server/config.h"

redisContext *master_link(redisContext **conn, const char *master, int timeout_ms) {
    if (*conn && !(*conn)->err) return *conn;
    if (*conn) redisFree(*conn);
    *conn = NULL;
    char host[CONFIG_STR_MAX];
    int port;
    if (parse_hostport(master, host, sizeof host, &port) != 0) return NULL;
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *rc = redisConnectWithTimeout(host, port, tv);
    if (!rc || rc->err || redisSetTimeout(rc, tv) != REDIS_OK) {
        if (rc) redisFree(rc);
        return NULL;
    }
    *conn = rc;
    return rc;
}
