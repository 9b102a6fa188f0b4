/* gateway/announce.h - telling the master this gateway's RESP address,
 * and learning the other gateways', for CLUSTER SLOTS (server/t_cluster.c). */
#ifndef MKV_GATEWAY_ANNOUNCE_H
#define MKV_GATEWAY_ANNOUNCE_H

#include <stddef.h>

#include "server/server.h"

typedef struct gw_announce gw_announce;

/* Announces now and every cfg.heartbeat_ms on srv's loop. */
gw_announce *gw_announce_start(server *srv);
void gw_announce_stop(gw_announce *a);
/* The gateways the master listed at the last announce (this one too). */
size_t gw_announce_peers(gw_announce *a, resp_endpoint *out, size_t max);

#endif
