/* transports/registry.h - the one place that lists every transport.
 *
 * TCP and shm (backend/) and RDMA verbs (rdma/) each come in two halves:
 * a client transport (backend/transport.h) and a node-side data server
 * (backend/data_server.h). This folder sits above both so neither needs
 * the other: the engine, the node's data plane and the client choose by
 * the names below and never include a transport themselves.
 *
 * Names: "tcp", "shm", "rdma", or "auto" (RDMA when a device is usable,
 * else TCP, with shm beside it for same-host nodes). */
#ifndef MKV_TRANSPORT_REGISTRY_H
#define MKV_TRANSPORT_REGISTRY_H

#include <stddef.h>

#include "backend/data_server.h"
#include "backend/engine.h"
#include "backend/transport.h"

#define TE_MAX_DATA_SERVERS 4

/* One client transport: "tcp", "shm", "rdma" or "auto" (RDMA when a
 * device is usable, else TCP, with one log line saying why). NULL with
 * a message in err. */
te_transport *te_transport_create(const char *name, const te_config *cfg, char *err, size_t errlen);

/* A transfer engine (engine.h) for `name`: one transport for "tcp", "shm"
 * or "rdma" (each uses only its own kind of node address: TCP never a
 * unix: one, shm only those); for "auto" the RDMA-or-TCP pick above plus
 * shm, so a node whose unix: address connects (it is on this host) is
 * served over shm and every other over the network. */
te_engine *te_engine_create_named(const char *name, const te_config *cfg, const te_engine_config *ecfg,
                                  char *err, size_t errlen);

/* The data servers a node runs for `name` ("" = "auto"), in the order
 * their addresses are registered: TCP always (clients and the RDMA
 * set-up find the node through it), shm for "shm" and "auto", RDMA for
 * "rdma" (an error without a device) and for "auto" when a device is
 * usable. How many, or -1 with a message. */
int te_data_servers_for(const char *name, const te_data_server_ops **out, int max, char *err,
                        size_t errlen);

#endif
