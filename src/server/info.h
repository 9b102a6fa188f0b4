/* server/info.h - building INFO replies in Redis's text format.
 *
 * INFO is a list of sections ("# Memory\r\nused_memory:123\r\n...") with a
 * blank line between them. Every producer (t_server.c, the stores, role
 * hooks) appends through these helpers, so the layout is the same
 * everywhere and section selection follows one rule. */
#ifndef MKV_INFO_H
#define MKV_INFO_H

#include <stdint.h>

#include "resp/resp_parser.h"
#include "resp/resp_writer.h"

typedef struct server server;

/* The INFO reply for the sections in argv (none: default) appended to
 * out: what the INFO command answers, and what /metrics reads. st is the
 * store's answer to stat_async (store.h), or NULL when not asked. */
struct store_stat;
void info_build(server *srv, int argc, const resp_arg *argv, const struct store_stat *st, resp_buf *out);
/* Whether the sections in argv (none: default) read the store's stat
 * (Memory, Stats, Keyspace): INFO asks it first then. */
int info_reads_store(int argc, const resp_arg *argv);

/* 1 if a request for `asked` ("all", "default", "everything", NULL for
 * default, or a section name in any case) includes section `name`.
 * Sections that are not part of "default" pass is_default = 0. */
int info_wants(const char *asked, const char *name, int is_default);
/* "\r\n" separator (unless out is empty) and "# Title\r\n". */
void info_section(resp_buf *out, const char *title);
/* One "key:value\r\n" line. */
void info_field(resp_buf *out, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Redis's used_memory_human style: "1023B", "1.50K", "64.00M", "2.00G". */
void info_human_bytes(char *buf, size_t len, uint64_t n);
/* "key:n" and "key_human:1.50K", as Redis shows memory sizes. */
void info_field_bytes(resp_buf *out, const char *key, uint64_t n);

#endif
