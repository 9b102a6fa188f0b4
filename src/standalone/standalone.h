/* standalone/standalone.h - the standalone role: the whole cache in one
 * process, the local segment store (store_local.h) behind the standard
 * command tables. */
#ifndef MKV_STANDALONE_H
#define MKV_STANDALONE_H

#include "server/server.h"

/* Creates the store, registers the commands, listens and runs the loop;
 * returns the process exit code. */
int standalone_role_main(server *srv);

#endif
