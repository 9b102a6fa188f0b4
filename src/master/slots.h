/* master/slots.h - a master of one group of a key space cut into hash
 * slots (docs/SCALE.md "Master groups").
 *
 * A thread reads the slot map from etcd every SLOTS_POLL_MS (polling, as
 * the standbys poll the leader key) and, while the master's --slots are
 * not claimed yet, gives the ones without a group to ours (a
 * compare-and-swap on the map). A new version is handed to the loop
 * through a wake; the loop keeps its own copy, so commands never wait on
 * etcd. At command entry (master_gate) every key of a MOON.* command must
 * lie in a slot of our group, else the command is answered
 * "-MOVED <slot> <group>" and does nothing; before the first map is read,
 * "-TRYAGAIN", and for a key of a slot moving here with its objects that
 * is not adopted yet (slot_move.h), "-TRYAGAIN" too. */
#ifndef MKV_MASTER_SLOTS_H
#define MKV_MASTER_SLOTS_H

#include <stdatomic.h>

#include "server/server.h"

#define SLOTS_POLL_MS 200

typedef struct master_slots master_slots;

/* NULL without a group (cfg->group empty), or with err on a bad setting. */
master_slots *master_slots_start(server *srv, char *err, size_t errlen);
void master_slots_stop(master_slots *s);   /* NULL is fine */
/* 1 if c's command names a key of another group's slot (or no map is
 * known yet): replied. */
int master_slots_refuse(master_slots *s, client *c);
/* INFO cluster: group, slots_version, slots_owned, slots_moved,
 * slots_held, slots_moving, slots_unadopted and slot_move_info's. */
void master_slots_info(const master_slots *s, resp_buf *out);
/* A thread's sleep of ms, cut short (in steps of 50 ms) once *stop is
 * set: its value. */
int master_slots_nap(atomic_int *stop, int ms);
/* The moves of slots with their objects (slot_move.h); NULL without a group. */
struct slot_move *master_slots_move(master_slots *s);

#endif
