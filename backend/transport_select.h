/* backend/transport_select.h - pick a transport by name. */
#ifndef MKV_TRANSPORT_SELECT_H
#define MKV_TRANSPORT_SELECT_H

#include <stddef.h>

#include "backend/transport.h"

/* "tcp", "shm", "rdma" or "auto" (RDMA when a device is usable, else TCP,
 * with one log line saying why). NULL with a message in err. */
te_transport *te_transport_create(const char *name, const te_config *cfg, char *err, size_t errlen);

#endif
