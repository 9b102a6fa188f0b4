/* fuzz_config - the JSON config loader (src/server/config.c): any text
 * loads or fails with one "config error in ..." message, and a loaded
 * config keeps every value inside the bounds its row declares. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "server/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 64 * 1024) return 0;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    mkv_config cfg;
    config_defaults(&cfg);
    char err[512] = "";
    int rc = config_load_text(&cfg, text, "fuzz.json", err, sizeof err);
    free(text);
    if (rc != 0) {
        if (strncmp(err, "config error in fuzz.json: ", 27) != 0) abort();
        return 0;
    }
    /* Spot checks of the table's bounds and of string termination. */
    if (cfg.port < 0 || cfg.port > 65535 || cfg.maxclients < 1) abort();
    if (cfg.preauth_max_multibulk < 1 || cfg.put_timeout_ms < 100) abort();
    if (cfg.ndata_addrs < 0 || cfg.ndata_addrs > CONFIG_MAX_ADDRS) abort();
    if (strnlen(cfg.bind, sizeof cfg.bind) == sizeof cfg.bind) abort();
    if (strnlen(cfg.requirepass, sizeof cfg.requirepass) == sizeof cfg.requirepass) abort();
    for (int i = 0; i < cfg.ndata_addrs; i++)
        if (strnlen(cfg.data_addrs[i], CONFIG_STR_MAX) == CONFIG_STR_MAX) abort();
    /* Every key reads back through CONFIG GET. */
    char buf[512];
    for (int i = 0; config_key_name(i); i++) (void)config_get_value(&cfg, config_key_name(i), buf, sizeof buf);
    return 0;
}
