/* etcd/leader_watch.h - leave a stalled leader for the elected one.
 *
 * A connection to a master that stopped (SIGSTOP, a long pause) is not
 * closed by anyone: a call on it waits out its whole I/O timeout, seconds
 * after a standby took over. A watch reads the leader key
 * (etcd_leader_lookup) from a thread of its own every LW_PERIOD_MS while a
 * call on a watched connection has been outstanding for LW_BUSY_MS or
 * more, and when etcd names another leader (another term: a new election,
 * even of the same master, which dropped its table meanwhile) it shuts the
 * connection down (shutdown(2), SHUT_RDWR): the call blocked on it
 * returns at once, as if the master had closed it, and the owner's usual
 * reconnect path reads the new leader. Fast calls cost no etcd request.
 *
 * One watch per (endpoints, cluster) per process, shared and counted:
 * the node's control and holdings threads and every libmoonkv client of
 * a gateway use the same thread. Any blocking connection can be watched:
 * register its fd with the leader it was opened to, mark calls busy, and
 * remove it before closing the fd (the watch never touches an fd it
 * does not hold). */
#ifndef MKV_LEADER_WATCH_H
#define MKV_LEADER_WATCH_H

#include <stddef.h>
#include <stdint.h>

#define LW_PERIOD_MS 200   /* between two looks at etcd while a call waits */
#define LW_BUSY_MS   150   /* a call waiting this long gets etcd looked at */
#define LW_KEEP_MS   500   /* between two looks for a kept connection */

typedef struct leader_watch leader_watch;
typedef struct lw_conn lw_conn;

/* The shared watch of cluster through endpoints (started by the first
 * open); NULL with the reason in err if endpoints do not parse. */
leader_watch *leader_watch_open(const char *endpoints, const char *cluster, char *err, size_t errlen);
/* The last close stops the thread. NULL is fine. */
void leader_watch_close(leader_watch *lw);

/* Watch fd, a connection to the leader addr of term (as etcd named it
 * when the connection was opened). */
lw_conn *leader_watch_add(leader_watch *lw, int fd, const char *addr, int64_t term);
/* Before fd is closed. NULL is fine. */
void leader_watch_remove(lw_conn *w);
/* A call on the connection is outstanding (1) or answered (0). NULL is fine. */
void leader_watch_busy(lw_conn *w, int busy);
/* A call that may rightly take up to expect_ms (a long poll): etcd is
 * looked at once it waited that long plus LW_BUSY_MS. */
void leader_watch_busy_within(lw_conn *w, int expect_ms);
/* Keep looking at etcd every LW_KEEP_MS while keep is set, calls or
 * none: the owner holds state the leader must have (libmoonkv's pins)
 * and wants to follow a new leader at once. NULL is fine. */
void leader_watch_keep(lw_conn *w, int keep);
/* 1 if the watch shut the connection down (the leader changed); who
 * leads now into addr[cap] if addr is not NULL. */
int leader_watch_fired(lw_conn *w, char *addr, size_t cap);
/* Connections shut down by this watch so far. */
uint64_t leader_watch_broken(leader_watch *lw);

#endif
