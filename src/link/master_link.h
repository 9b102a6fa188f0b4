/* link/master_link.h - a control connection to the master from a node, a
 * gateway or a client: connect, set the I/O timeout, AUTH when
 * master_auth is set, then prove the cluster secret (MOON.CHALLENGE,
 * MOON.PROVE) so the master takes the connection for a member's.
 *
 * Every connection to the master goes through here (also reconnects), so
 * a master with requirepass sees AUTH first on each of them, and a wrong
 * or missing password or secret ends in one message that says which. */
#ifndef MKV_LINK_MASTER_LINK_H
#define MKV_LINK_MASTER_LINK_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#include "proto/limits.h"

enum { PROTO_LINK_OK = 0, PROTO_LINK_EUNREACH = -1, PROTO_LINK_EAUTH = -2 };

/* Opens *out (connect within connect_ms, then I/O timeout io_ms), AUTHs
 * with password unless it is NULL or "", and proves secret unless it is
 * NULL ("" is a secret: the cluster's when it has none). On failure *out
 * is NULL, err says why, and the code tells an unreachable master from a
 * refused password or proof. */
int proto_master_open(redisContext **out, const char *hostport, const char *password,
                      const char *secret, int connect_ms, int io_ms, char *err, size_t errlen);
/* MOON.CHALLENGE, then MOON.PROVE for secret, on rc (blocking): a
 * PROTO_LINK_* code, err set on failure. */
int proto_master_prove(redisContext *rc, const char *secret, char *err, size_t errlen);
/* The steps of that proof for a caller that sends them itself (the
 * gateway's pipelined link): MOON.PROVE's argument for the reply to
 * MOON.CHALLENGE (0, or -1 with err), and whether MOON.PROVE's reply
 * accepted it (1, or 0 with err). r may be NULL (the link was lost). */
int proto_prove_arg(const redisReply *r, const char *secret, char hex[2 * PROTO_PROOF_LEN + 1],
                    char *err, size_t errlen);
int proto_prove_accepted(const redisReply *r, char *err, size_t errlen);
/* The hint for an error reply of the master: NOAUTH means no password was
 * given (or it was lost), so the caller's log line can say what to set. */
const char *proto_master_hint(const char *error_reply);

#endif
