/* backend/transport.c - what every transport shares: status names,
 * configuration defaults, address schemes. */
#include "backend/transport.h"

#include <ctype.h>
#include <string.h>

const char *te_strerror(int status) {
    switch (status) {
    case TE_OK:        return "ok";
    case TE_EIO:       return "path broken";
    case TE_ETIMEDOUT: return "timed out";
    case TE_EAUTH:     return "not authorized (secret or capability refused)";
    case TE_ERANGE:    return "range outside the capability or segment";
    case TE_ECLOSED:   return "path closed";
    case TE_EINVAL:    return "malformed request";
    case TE_EFAULT:    return "local buffer not readable or writable (bad address)";
    default:           return "unknown transfer error";
    }
}

void te_config_defaults(te_config *cfg) {
    if (cfg->window <= 0) cfg->window = 64;
    if (cfg->timeout_ms <= 0) cfg->timeout_ms = 5000;
    if (cfg->connect_timeout_ms <= 0) cfg->connect_timeout_ms = 2000;
}

size_t te_addr_scheme_len(const char *addr) {
    const char *colon = strchr(addr, ':');
    if (!colon || colon == addr) return 0;
    for (const char *c = addr; c < colon; c++)
        if (!islower((unsigned char)*c)) return 0;
    const char *rest = colon + 1;
    if (*rest && strspn(rest, "0123456789") == strlen(rest)) return 0;   /* "localhost:7000" */
    return (size_t)(colon - addr);
}
