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

/* c->role_ctx, a zeroed block of size bytes made on first use. When c is
 * freed, on_free(c, ctx) runs first (a role that keeps c's pointer drops
 * it there), then the block is freed. One role per client: size and
 * on_free must be the same on every call. */
void *client_role_ctx(client *c, size_t size, void (*on_free)(client *c, void *ctx));

/* Abort c's streaming put (its space is freed now), reply msg and close
 * c once that is written; nothing more is read from c. */
void client_drop_put(client *c, const char *msg);

/* Pipelined asynchronous replies (the gateway). A command that answers
 * later opens a reply slot and returns; the client's next commands run
 * and their replies queue behind the slot, and nothing after an open
 * slot is written. Later, on the loop: client_slot_begin sends c's
 * replies into the slot, client_slot_end closes it (the output up to the
 * next open slot goes). A slot is freed with its client: whoever holds
 * one forgets it in the client's on_free hook. At most a bound of slots
 * is open per client; reading pauses while it is reached. */
typedef struct reply_slot reply_slot;
reply_slot *client_slot_open(client *c);
void client_slot_begin(client *c, reply_slot *s);
void client_slot_end(client *c, reply_slot *s);
/* A reply that must wait after it was written (the master answers a put
 * once its nodes know it): client_slot_hold after client_slot_begin and
 * the replies keeps them with the slot, not sent and not filling, until
 * client_slot_end; client_slot_clear drops them first, so the slot can
 * be filled with another answer (begin, reply, end). */
void client_slot_hold(client *c, reply_slot *s);
void client_slot_clear(client *c, reply_slot *s);
/* A reply that streams (a value sent as it arrives): what was added to
 * the slot since client_slot_begin goes out now, ahead of it, and the
 * slot stays open for more (begin again; end it when the reply is
 * whole). */
void client_slot_part(client *c, reply_slot *s);
unsigned client_slots_open(const client *c);
/* The slot just opened belongs to a measured command (metrics): it is
 * recorded when the slot ends (commands_slot_done). */
void client_slot_measure(client *c, uint64_t since_ns, size_t cmd, uint64_t value);
/* The command being dispatched must not run before c's open slots are
 * done (it would overtake them): it runs again, with the same arguments,
 * once they are. Dispatch's call, when srv->role_pipelined says so. */
void client_defer(client *c);

/* The TCP port the server listens on (the real one when cfg port is 0). */
int server_port(const server *srv);

#endif
