/* server/networking.h - what networking.c offers beyond server.h.
 *
 * Declared here by the commands side (CLIENT LIST needs it); networking.c
 * implements it. Time fields in client/server (ctime_ms, last_ms,
 * start_ms) are mono_ms() timestamps. */
#ifndef MKV_NETWORKING_H
#define MKV_NETWORKING_H

#include "server/server.h"

/* Calls fn for every connected client, in connection order. fn must not
 * free clients. */
void clients_foreach(server *srv, void (*fn)(client *c, void *ctx), void *ctx);

#endif
