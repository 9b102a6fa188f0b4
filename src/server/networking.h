/* server/networking.h - what networking.c offers beyond server.h:
 * walking the connected clients (CLIENT LIST, INFO clients), their
 * buffer sizes, and closing or watching a client from elsewhere.
 * Time fields in client/server (ctime_ms, last_ms, start_ms) are
 * mono_ms() timestamps. */
#ifndef MKV_NETWORKING_H
#define MKV_NETWORKING_H

#include <stddef.h>

#include "server/server.h"

/* Calls fn for every connected client, in connection order. fn must not free
 * clients; use client_close_async. */
void clients_foreach(server *srv, void (*fn)(client *c, void *ctx), void *ctx);

/* Reply bytes queued and not yet written: owned copies plus referenced
 * (zero-copy) bodies. */
size_t client_output_bytes(const client *c);
/* Input read from the socket but not yet parsed (held while the client
 * is blocked or throttled). */
size_t client_query_bytes(const client *c);

/* Close c before the loop next sleeps (CLIENT KILL, or a role that gives
 * up on a peer). Safe to call from inside any command, even c's own. */
void client_close_async(client *c);

/* fn(c, ctx) runs once when c is freed, before its memory goes: a role
 * that keeps a blocked client's pointer drops it there. One hook per
 * client; NULL removes it. */
void client_set_on_free(client *c, void (*fn)(client *c, void *ctx), void *ctx);

/* Abort c's streaming put (its space is freed now), reply msg and close
 * c once that is written; nothing more is read from c. */
void client_drop_put(client *c, const char *msg);

/* The TCP port the server listens on (the real one when cfg port is 0). */
int server_port(const server *srv);

#endif
