/* proto/master_link.h - a control connection to the master from a node or
 * a gateway: connect, set the I/O timeout, AUTH when master_auth is set.
 *
 * Every connection to the master goes through here (also reconnects), so
 * a master with requirepass sees AUTH first on each of them, and a wrong
 * or missing password ends in one message that says which. */
#ifndef MKV_PROTO_PROTO_LINK_H
#define MKV_PROTO_PROTO_LINK_H

#include <hiredis/hiredis.h>
#include <stddef.h>

enum { PROTO_LINK_OK = 0, PROTO_LINK_EUNREACH = -1, PROTO_LINK_EAUTH = -2 };

/* Opens *out (connect within connect_ms, then I/O timeout io_ms) and
 * AUTHs with password unless it is NULL or "". On failure *out is NULL,
 * err says why, and the code tells an unreachable master from a refused
 * password. */
int proto_master_open(redisContext **out, const char *hostport, const char *password,
                     int connect_ms, int io_ms, char *err, size_t errlen);
/* The hint for an error reply of the master: NOAUTH means no password was
 * given (or it was lost), so the caller's log line can say what to set. */
const char *proto_master_hint(const char *error_reply);

#endif
