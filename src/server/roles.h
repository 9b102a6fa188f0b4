/* server/roles.h - what each role does with an initialised server.
 *
 * main() parses the config, calls server_init, then role_main, then
 * server_cleanup. A role entry creates its store (if any), registers its
 * commands, listens and runs the loop; it returns the process exit code. */
#ifndef MKV_ROLES_H
#define MKV_ROLES_H

#include "server/server.h"

/* Runs the role named by srv->cfg.role. */
int role_main(server *srv);

int standalone_role_main(server *srv);   /* roles.c */
int master_role_main(server *srv);       /* src/master */
int node_role_main(server *srv);         /* src/node */
int gateway_role_main(server *srv);      /* src/gateway */

#endif
