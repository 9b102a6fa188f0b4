/* gateway/master_link.c - see master_link.h. */
#include "gateway/master_link.h"

#include "core/log.h"
#include "link/master_link.h"

redisContext *master_link(redisContext **conn, const char *master, const char *password,
                          const char *secret, int timeout_ms) {
    if (*conn && !(*conn)->err) return *conn;
    if (*conn) redisFree(*conn);
    char err[512];
    /* a refused password or proof is worth a line; an unreachable master is not */
    if (proto_master_open(conn, master, password, secret, timeout_ms, timeout_ms, err, sizeof err) ==
        PROTO_LINK_EAUTH)
        log_warning("gateway: %s", err);
    return *conn;
}
