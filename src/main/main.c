/* main/main.c - moonkv-server: settings, then the role's loop.
 *
 *   moonkv-server --config conf/standalone.json --port 7400
 *
 * Any bad setting stops start-up with one message and exit code 1. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "core/crash.h"
#include "core/log.h"
#include "main/roles.h"
#include "server/config.h"
#include "server/server.h"

int main(int argc, char **argv) {
    mkv_config cfg;
    char err[512];
    config_defaults(&cfg);
    int rc = config_from_args(&cfg, argc - 1, argv + 1, err, sizeof err);
    if (rc != 0) {
        if (rc < 0) fprintf(stderr, "%s\n", err);
        return rc < 0 ? 1 : 0;
    }
    log_set_level((log_level)cfg.log_level);
    log_set_role(config_role_name(cfg.role));
    signal(SIGPIPE, SIG_IGN);
    crash_handlers_install();

    server srv;
    if (server_init(&srv, &cfg, err, sizeof err) < 0) {
        log_warning("%s", err);
        return 1;
    }
    log_notice("moonkv v%s starting, role %s, pid %d%s%s", MOONKV_VERSION, config_role_name(cfg.role),
               (int)getpid(), cfg.config_file[0] ? ", config " : "", cfg.config_file);
    rc = role_main(&srv);
    server_cleanup(&srv);
    if (rc != 0) log_warning("exiting with status %d (see the lines above)", rc);
    return rc;
}
