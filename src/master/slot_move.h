/* master/slot_move.h - a slot moved between master groups with its
 * objects, by their metadata (docs/SCALE.md "Moving a slot").
 *
 * The map marks such a slot "group<from" (proto/slots.h). The group it
 * leaves (from) gives the slot's objects away (master/migrate.h) into an
 * outbox per group they go to, a pass over its table at a time, once it
 * read the map that moved them (it answers MOVED for their keys from
 * then on). The group it reaches pulls them from from's leader
 * (MOON.SLOTEXPORT, which also acknowledges what was pulled before, so
 * the giver forgets it only once it was adopted), adopts them, and once
 * from's outbox for it is empty after a pass over a map at least as new
 * as its own, clears the marks (a compare-and-swap that holds only if the
 * map is still the one the pass was for). Meanwhile it answers a key of
 * such a slot it has not adopted yet TRYAGAIN, so nothing is read as
 * missing and no put makes a second object of a key the other group
 * still holds.
 *
 * Two threads: the loop (giving, the outbox, adopting) and the slot map's
 * thread (pulling over a blocking connection, clearing the marks); an
 * adoption is handed to the loop and waited for. */
#ifndef MKV_MASTER_SLOT_MOVE_H
#define MKV_MASTER_SLOT_MOVE_H

#include "etcd/etcd.h"
#include "proto/slots.h"
#include "server/server.h"

#define SLOT_MOVE_PULL_BYTES (4u << 20)   /* records asked per MOON.SLOTEXPORT */
#define SLOT_MOVE_PULLS      64           /* round trips per read of the map */

typedef struct slot_move slot_move;

/* Starts the pulling thread (its own etcd client); NULL with err. */
slot_move *slot_move_create(server *srv, const char *cluster, const char *group, char *err, size_t errlen);
void slot_move_free(slot_move *mv);   /* stops the thread; NULL is fine */
/* Loop: map m is ours now (mine: our group's index + 1, 0: none); objects
 * of slots leaving us with their objects start going to the outboxes. */
void slot_move_map(slot_move *mv, const proto_slotmap *m, int mine);
void slot_move_register_commands(server *srv);
/* INFO cluster: objects given, adopted, waiting, the outbox. */
void slot_move_info(const slot_move *mv, resp_buf *out);

#endif
