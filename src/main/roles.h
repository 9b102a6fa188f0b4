/* main/roles.h - which role an initialised server runs.
 *
 * main() parses the config, calls server_init, then role_main, then
 * server_cleanup. A role entry creates its store (if any), registers its
 * commands, listens and runs the loop; it returns the process exit code.
 * This is the one place that knows every role: it sits above them all. */
#ifndef MKV_ROLES_H
#define MKV_ROLES_H

#include "server/server.h"

/* Runs the role named by srv->cfg.role. */
int role_main(server *srv);

#endif
