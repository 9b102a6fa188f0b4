/* backend/tcp_transport.h - te_transport over TCP (one connection per
 * path, backend/wire.h framing). Thread-safety: one thread drives a
 * transport at a time (the engine holds its lock around every call). */
#ifndef MKV_TCP_TRANSPORT_H
#define MKV_TCP_TRANSPORT_H

#include <stddef.h>

#include "backend/transport.h"

te_transport *te_tcp_create(const te_config *cfg, char *err, size_t errlen);

#endif
