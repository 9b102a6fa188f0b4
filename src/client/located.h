/* client/located.h - gets in two halves, for a caller that asks the
 * master itself (the gateway, over its own asynchronous connection).
 *
 * The caller sends MOON.MGET (or MOON.GET), hands each key's element of
 * the reply to mkv_located_parse, finds memory for the sizes it learns,
 * and later, on any thread with that thread's client, moves the bytes
 * with mkv_read_located: one engine batch for all keys, checksums
 * verified, another replica read after a mismatch. The read leases stay
 * the caller's to give back (MOON.RELEASE key lease_until). */
#ifndef MKV_CLIENT_LOCATED_H
#define MKV_CLIENT_LOCATED_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "client/moonkv.h"

typedef struct mkv_located mkv_located;

/* One element of a MOON.MGET reply (or a MOON.GET reply): MKV_OK with
 * *out and the object's size, MKV_ENOTFOUND for nil, or the error the
 * master sent / MKV_EPROTO (message in mkv_last_error(c)). */
int mkv_located_parse(mkv_client *c, const redisReply *r, mkv_located **out, uint64_t *size);
/* The read lease's expiry, for MOON.RELEASE; 0 if it has none. */
uint64_t mkv_located_lease(const mkv_located *l);
void mkv_located_free(mkv_located *l);

/* Read objs[i] (buf registered, len at least the size) from loc[i]; sets
 * every objs[i].status and len. MKV_EAUTH for an object means its lease
 * ran out before the read: locate it again. MKV_OK when the batch ran. */
int mkv_read_located(mkv_client *c, mkv_obj *objs, mkv_located *const *loc, size_t n);

/* Ask the master for the node table again (after the caller's own master
 * connection was reopened: a new master may number nodes afresh). */
int mkv_topology_relearn(mkv_client *c);

#endif
