/* server/multi.h - MULTI/EXEC/DISCARD: transactions as Redis clients
 * send them (redis-py's default pipeline() is one).
 *
 * After MULTI the dispatcher queues commands (copies of their arguments)
 * instead of running them and answers +QUEUED; a command refused while
 * queuing (unknown, wrong arity, no auth, over the queue limit) makes
 * EXEC answer EXECABORT and run nothing. EXEC runs the queue in order
 * and replies one array with their replies. A queued command may block
 * the client (the gateway's async GET/SET): EXEC then stops after it and
 * multi_exec_continue runs the rest once the client is unblocked, so the
 * array stays whole and in order. WATCH is refused (see README). */
#ifndef MKV_MULTI_H
#define MKV_MULTI_H

#include "server/server.h"

struct command;

/* 1 while c is between MULTI and EXEC/DISCARD. Networking does not
 * stream a queuing client's values into the store: they wait in argv. */
int multi_queuing(const client *c);
/* For a queuing client's command that passed the dispatcher's checks:
 * 1 if it was queued (and answered), 0 if it must run now (EXEC,
 * DISCARD, MULTI, WATCH, UNWATCH, QUIT, RESET). */
int multi_queue(client *c, const struct command *cmd);
/* The dispatcher refused a command: a queuing client's EXEC will abort. */
void multi_refused(client *c);
/* Runs what is left of an EXEC a blocking command interrupted. 1 if the
 * client is blocked again, 0 when the EXEC is finished (or none was). */
int multi_exec_continue(client *c);
/* Frees c's transaction state (the client is going away). */
void multi_free(client *c);

#endif
