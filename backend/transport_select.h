/* backend/transport_select.h - pick a transport by name. */
#ifndef MKV_TRANSPORT_SELECT_H
#define MKV_TRANSPORT_SELECT_H

#include <stddef.h>

#include "backend/engine.h"
#include "backend/transport.h"

/* "tcp", "shm", "rdma" or "auto" (RDMA when a device is usable, else TCP,
 * with one log line saying why). NULL with a message in err. */
te_transport *te_transport_create(const char *name, const te_config *cfg, char *err, size_t errlen);

/* A transfer engine (engine.h) for `name`: one transport for "tcp", "shm"
 * or "rdma" (each uses only its own kind of node address: TCP never a
 * unix: one, shm only those); for "auto" the RDMA-or-TCP pick above plus
 * shm, so a node whose unix: address connects (it is on this host) is
 * served over shm and every other over the network. */
te_engine *te_engine_create_named(const char *name, const te_config *cfg, const te_engine_config *ecfg,
                                  char *err, size_t errlen);

#endif
