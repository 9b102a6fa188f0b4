/* server/io_threads.h - more event loops behind one listening socket
 * (--io-threads N).
 *
 * The first server (the one that listens) accepts every connection and
 * hands them out round-robin: the 1st stays, the 2nd goes to loop 1, ...
 * Each other loop is a whole server of its own (its own loop, store,
 * command state and client list) on its own thread, set up by the role;
 * they share nothing but the process, so a role's store must let several
 * instances serve one data set (the gateway's cluster store does: the
 * data lives in the cluster). */
#ifndef MKV_IO_THREADS_H
#define MKV_IO_THREADS_H

#include <stddef.h>
#include <sys/socket.h>

#include "server/server.h"

typedef struct io_threads io_threads;

/* setup(srv) makes a fresh server (server_init done, io_thread set)
 * ready to serve: store, commands. teardown(srv) undoes what setup
 * started beyond the server itself, after its loop stopped. */
typedef struct io_role {
    int (*setup)(server *srv, char *err, size_t errlen);
    void (*teardown)(server *srv);
} io_role;

/* Starts first->cfg.io_threads - 1 more loops and makes first hand out
 * connections. NULL with the reason in err (nothing left running). */
io_threads *io_threads_start(server *first, const io_role *role, char *err, size_t errlen);
/* Stops and frees the other loops; their clients are closed. NULL is fine. */
void io_threads_stop(io_threads *io);

/* On first's loop: 1 when fd went to another loop (it owns fd now), 0
 * when first keeps it. */
int io_threads_handoff(io_threads *io, int fd, const struct sockaddr_storage *peer);

#endif
