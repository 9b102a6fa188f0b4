/* gateway/master_link.h - a plain hiredis connection to the master for
 * the gateway's control calls (INFO cluster, MOON.GATEWAY), separate from
 * libmoonkv's, reopened on the next call after an error, AUTHed with
 * master_auth and proven with the cluster secret like every connection to
 * the master (link/master_link.h). */
#ifndef MKV_GATEWAY_MASTER_LINK_H
#define MKV_GATEWAY_MASTER_LINK_H

#include <hiredis/hiredis.h>

/* *conn if healthy, else a new connection to master ("host:port") with
 * connect and command timeouts of timeout_ms, after AUTH password (NULL
 * or "": none) and the proof of secret, stored in *conn; NULL if the
 * master cannot be reached or refuses the password or the proof. */
redisContext *master_link(redisContext **conn, const char *master, const char *password,
                          const char *secret, int timeout_ms);

#endif
