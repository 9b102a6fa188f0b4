/* gateway/proc_client.h - the gateway process's one libmoonkv client.
 *
 * A client is shared by threads (one master connection, pipelined; one
 * transfer engine; one node table), so every event loop of the process
 * (--io-threads) and every worker of each calls the same one: the
 * gateway's data path opens one master connection, not one per loop and
 * worker. The first loop's store connects it, the others take it, and
 * the last one to let go closes it. */
#ifndef MKV_GATEWAY_PROC_CLIENT_H
#define MKV_GATEWAY_PROC_CLIENT_H

#include <stddef.h>

#include "client/moonkv.h"

/* The process's client, connected with opt by the first call; MKV_OK or
 * the error (message in err). Every MKV_OK is paired with one put. */
int proc_client_take(const mkv_options *opt, mkv_client **out, char *err, size_t errlen);
void proc_client_put(mkv_client *mc);

#endif
