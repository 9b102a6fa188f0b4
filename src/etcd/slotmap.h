/* etcd/slotmap.h - the slot map of a cluster cut over master groups, in etcd.
 *
 * The map (proto/slots.h's text) is the one key /moonkv/<cluster>/slots;
 * every change raises its version and is written with a compare of the
 * value read (a compare-and-swap), so two writers never lose a change.
 * A group's own keys (its leader, its members) live under
 * /moonkv/<cluster>/g/<group>/: the group's name as a cluster is
 * "<cluster>/g/<group>" (etcd_group_cluster). Blocking calls, as etcd.h. */
#ifndef MKV_ETCD_SLOTMAP_H
#define MKV_ETCD_SLOTMAP_H

#include <stddef.h>
#include <stdint.h>

#include "etcd/etcd.h"
#include "proto/slots.h"

#define SLOTMAP_CAS_TRIES 16   /* compare-and-swap attempts of one change */

/* "<cluster>/g/<group>" into buf: 0, or -1 if it does not fit or the group is bad. */
int etcd_group_cluster(const char *cluster, const char *group, char *buf, size_t len);
/* The map of cluster into m (*found 0 and m empty if there is none);
 * -1 with err if etcd fails or the map is malformed. */
int etcd_slotmap_read(etcd_client *ec, const char *cluster, proto_slotmap *m, int *found, char *err,
                      size_t errlen);
/* One change of the map, as a compare-and-swap retried while another
 * writer comes first: fn changes m (read just now; its version is raised
 * after) and returns how many slots changed (0: nothing is written), or
 * -1 with err. *changed is fn's answer, *version the map's after. */
typedef int etcd_slotmap_fn(proto_slotmap *m, void *ctx, char *err, size_t errlen);
int etcd_slotmap_change(etcd_client *ec, const char *cluster, etcd_slotmap_fn *fn, void *ctx, int *changed,
                        uint64_t *version, char *err, size_t errlen);
/* Give the slots of list ("a-b[,c-d...]" or "all") to group, only those
 * without a group when only_free, as one new version (none written when
 * nothing changes): *changed slots, *version the map's after. */
int etcd_slotmap_assign(etcd_client *ec, const char *cluster, const char *list, const char *group,
                        int only_free, int *changed, uint64_t *version, char *err, size_t errlen);

#endif
