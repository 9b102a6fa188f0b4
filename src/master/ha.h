/* master/ha.h - leadership of a master among standbys, through etcd.
 *
 * A thread of its own (etcd calls block) campaigns for the cluster's
 * leader key with a lease, keeps the lease alive while it leads, and
 * polls the key while it stands by (every HA_POLL_MS: polling, not an
 * etcd watch), campaigning as soon as the key is gone. Each change is
 * handed to the loop through a cross-thread wake; the loop keeps its own
 * copy (ha_view), so commands never wait on etcd.
 *
 * Fencing: the loop trusts its leadership only until the lease's
 * deadline (the send time of the last keep-alive that etcd acknowledged
 * plus the TTL), checked with the loop's own clock at every command. A
 * leader that stalls (SIGSTOP, a long pause) past its lease refuses
 * placement the moment it runs again, before its thread has noticed. */
#ifndef MKV_MASTER_HA_H
#define MKV_MASTER_HA_H

#include <stddef.h>
#include <stdint.h>

#include "core/loop.h"

#define HA_POLL_MS 100
#define HA_ADDR_MAX 256

typedef struct ha_view {
    int leader;                  /* this process leads (until deadline_ms) */
    uint64_t deadline_ms;        /* mono_ms() past which a leader must not place */
    int64_t term;                /* the leader key's create revision; 0 unknown */
    char leader_addr[HA_ADDR_MAX];   /* the leader's RESP address, "" unknown */
    uint64_t elections_won, leadership_lost;
} ha_view;

typedef struct master_ha master_ha;

/* on_change runs on the loop after the view changed (a term began or
 * ended). NULL with err if the etcd list is bad. */
master_ha *master_ha_start(event_loop *el, const char *etcd, const char *cluster, int ttl_s,
                           const char *self_addr, loop_proc *on_change, void *data, char *err,
                           size_t errlen);
/* Stops the thread and revokes our lease (a clean exit hands over at once). */
void master_ha_stop(master_ha *ha);
/* The loop's copy, refreshed by the wake. */
const ha_view *master_ha_view(const master_ha *ha);
/* 1 if this process may place now (leads and the lease has not run out). */
int master_ha_may_lead(const master_ha *ha);

#endif
