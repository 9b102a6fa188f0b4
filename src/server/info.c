/* server/info.c - INFO text helpers (see info.h). */
#include "server/info.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int info_wants(const char *asked, const char *name, int is_default) {
    if (asked == NULL || strcasecmp(asked, "default") == 0) return is_default;
    if (strcasecmp(asked, "all") == 0 || strcasecmp(asked, "everything") == 0) return 1;
    return strcasecmp(asked, name) == 0;
}

void info_section(resp_buf *out, const char *title) {
    if (out->len > 0) resp_buf_append(out, "\r\n", 2);
    resp_buf_append(out, "# ", 2);
    resp_buf_append(out, title, strlen(title));
    resp_buf_append(out, "\r\n", 2);
}

void info_field(resp_buf *out, const char *key, const char *fmt, ...) {
    char val[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(val, sizeof val, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof val) n = sizeof val - 1;
    resp_buf_append(out, key, strlen(key));
    resp_buf_append(out, ":", 1);
    resp_buf_append(out, val, (size_t)n);
    resp_buf_append(out, "\r\n", 2);
}

void info_human_bytes(char *buf, size_t len, uint64_t n) {
    static const char units[] = "KMGTP";
    if (n < 1024) {
        snprintf(buf, len, "%lluB", (unsigned long long)n);
        return;
    }
    double d = (double)n / 1024;
    int u = 0;
    while (d >= 1024 && units[u + 1] != '\0') {
        d /= 1024;
        u++;
    }
    snprintf(buf, len, "%.2f%c", d, units[u]);
}

void info_field_bytes(resp_buf *out, const char *key, uint64_t n) {
    char human[32], hkey[64];
    info_field(out, key, "%llu", (unsigned long long)n);
    info_human_bytes(human, sizeof human, n);
    snprintf(hkey, sizeof hkey, "%s_human", key);
    info_field(out, hkey, "%s", human);
}
