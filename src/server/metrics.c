/* server/metrics.c - per-command counters and latency histograms, and the
 * Prometheus text exposition of them and of the INFO fields the roles
 * export (see metrics.h). */
#include "server/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "server/commands.h"
#include "server/info.h"
#include "server/server.h"

#ifndef MOONKV_VERSION
#define MOONKV_VERSION "0.0.0"
#endif

/* Latency bucket upper bounds: 10 us to 10 s. */
#define NBUCKETS 18
static const uint64_t bucket_ns[NBUCKETS] = {
    10000,    25000,    50000,     100000,    250000,    500000,
    1000000,  2500000,  5000000,   10000000,  25000000,  50000000,
    100000000, 250000000, 500000000, 1000000000, 2500000000ULL, 10000000000ULL};
static const char *const bucket_le[NBUCKETS] = {
    "1e-05", "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005",
    "0.01",  "0.025",   "0.05",  "0.1",    "0.25",    "0.5",    "1",     "2.5",    "10"};

/* Size classes of the value a command moved (upper bounds, bytes). */
static const uint64_t size_max[METRICS_SIZE_CLASSES] = {
    4 << 10, 64 << 10, 1 << 20, 8 << 20, 64 << 20, UINT64_MAX};
static const char *const size_name[METRICS_SIZE_CLASSES] = {
    "0-4KiB", "4KiB-64KiB", "64KiB-1MiB", "1MiB-8MiB", "8MiB-64MiB", "64MiB+"};

/* The INFO fields every role has (t_server.c's Server, Clients, Stats). */
static const metrics_field server_fields[] = {
    {"uptime_in_seconds", "moonkv_uptime_seconds", METRIC_GAUGE, NULL, "Seconds since the server started."},
    {"connected_clients", "moonkv_connected_clients", METRIC_GAUGE, NULL, "RESP connections open."},
    {"blocked_clients", "moonkv_blocked_clients", METRIC_GAUGE, NULL,
     "RESP connections waiting for an asynchronous reply."},
    {"total_connections_received", "moonkv_connections_received_total", METRIC_COUNTER, NULL,
     "RESP connections accepted."},
    {"rejected_connections", "moonkv_connections_rejected_total", METRIC_COUNTER, NULL,
     "RESP connections refused at maxclients."},
    {"total_commands_processed", "moonkv_commands_processed_total", METRIC_COUNTER, NULL,
     "Commands executed, all commands."},
    {"total_net_input_bytes", "moonkv_net_input_bytes_total", METRIC_COUNTER, NULL,
     "Bytes read from RESP clients."},
    {"total_net_output_bytes", "moonkv_net_output_bytes_total", METRIC_COUNTER, NULL,
     "Bytes written to RESP clients."},
    {"keyspace_hits", "moonkv_keyspace_lookups_total", METRIC_COUNTER, "result=\"hit\"",
     "Key lookups, by result."},
    {"keyspace_misses", "moonkv_keyspace_lookups_total", METRIC_COUNTER, "result=\"miss\"",
     "Key lookups, by result."},
    {"exists_rejections", "moonkv_put_rejections_total", METRIC_COUNTER, "reason=\"exists\"",
     "Puts refused, by reason."},
    {"nospace_rejections", "moonkv_put_rejections_total", METRIC_COUNTER, "reason=\"nospace\"",
     "Puts refused, by reason."},
    {"idempotent_puts", "moonkv_idempotent_puts_total", METRIC_COUNTER, NULL,
     "SETs of the very bytes already stored (no-op success)."},
    {"conflicts_kept", "moonkv_conflicts_kept_total", METRIC_COUNTER, NULL,
     "SETs of other bytes answered OK keeping the first value (on_conflict keep)."},
    {"aborted_puts", "moonkv_aborted_puts_total", METRIC_COUNTER, NULL,
     "Half-written values dropped (client gone, command refused)."},
    {"protocol_errors", "moonkv_protocol_errors_total", METRIC_COUNTER, NULL,
     "RESP protocol errors (connection closed)."},
};

typedef struct cmd_hist {
    uint64_t count, sum_ns;
    uint64_t buckets[NBUCKETS];   /* not cumulative; +Inf is count */
} cmd_hist;

typedef struct cmd_metrics {
    uint64_t calls;
    cmd_hist by_size[METRICS_SIZE_CLASSES];
} cmd_metrics;

typedef struct field_table {
    const metrics_field *rows;
    size_t n;
} field_table;

struct metrics {
    cmd_metrics *cmds;            /* by command row index */
    size_t ncmds;
    field_table *tables;
    size_t ntables;
};

metrics *metrics_create(void) {
    metrics *m = xcalloc(1, sizeof *m);
    metrics_add_fields(m, server_fields, sizeof server_fields / sizeof server_fields[0]);
    return m;
}

void metrics_free(metrics *m) {
    if (!m) return;
    free(m->cmds);
    free(m->tables);
    free(m);
}

void metrics_add_fields(metrics *m, const metrics_field *table, size_t n) {
    if (!m) return;
    m->tables = xrealloc(m->tables, (m->ntables + 1) * sizeof *m->tables);
    m->tables[m->ntables++] = (field_table){table, n};
}

uint64_t metrics_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static size_t size_class(uint64_t bytes) {
    size_t i = 0;
    while (bytes > size_max[i]) i++;   /* the last bound is UINT64_MAX */
    return i;
}

void metrics_record(metrics *m, size_t cmd, uint64_t value_bytes, uint64_t ns) {
    if (!m) return;
    if (cmd >= m->ncmds) {   /* rows are few; grows a handful of times */
        size_t n = cmd + 16;
        m->cmds = xrealloc(m->cmds, n * sizeof *m->cmds);
        memset(m->cmds + m->ncmds, 0, (n - m->ncmds) * sizeof *m->cmds);
        m->ncmds = n;
    }
    cmd_metrics *cm = &m->cmds[cmd];
    cmd_hist *h = &cm->by_size[size_class(value_bytes)];
    cm->calls++;
    h->count++;
    h->sum_ns += ns;
    for (size_t b = 0; b < NBUCKETS; b++) {
        if (ns <= bucket_ns[b]) {
            h->buckets[b]++;
            break;
        }
    }
}

/* ---- Exposition ---- */

static void emitf(resp_buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emitf(resp_buf *out, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0) resp_buf_append(out, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static void family(resp_buf *out, const char *name, const char *type, const char *help) {
    emitf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One "key:value" line of the INFO text. */
typedef struct info_line {
    const char *key, *val;
    size_t keylen, vallen;
} info_line;

typedef struct info_index {
    info_line *lines;
    size_t n;
} info_index;

/* A numeric INFO value as Prometheus accepts it (integers and decimals). */
static int numeric(const char *v, size_t n) {
    if (n == 0 || n > 32) return 0;
    char buf[40], *end;
    memcpy(buf, v, n);
    buf[n] = '\0';
    strtod(buf, &end);
    return *end == '\0';
}

static void index_info(const resp_buf *text, info_index *ix) {
    size_t cap = 0;
    const char *p = text->data, *end = text->data + text->len;
    while (p && p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *stop = eol ? eol : end;
        const char *colon = memchr(p, ':', (size_t)(stop - p));
        if (*p != '#' && colon) {
            size_t vallen = (size_t)(stop - colon - 1);
            if (vallen && colon[vallen] == '\r') vallen--;
            if (ix->n == cap) {
                cap = cap ? cap * 2 : 128;
                ix->lines = xrealloc(ix->lines, cap * sizeof *ix->lines);
            }
            ix->lines[ix->n++] = (info_line){p, colon + 1, (size_t)(colon - p), vallen};
        }
        p = eol ? eol + 1 : NULL;
    }
}

static const info_line *find_line(const info_index *ix, const char *key) {
    size_t n = strlen(key);
    for (size_t i = 0; i < ix->n; i++)
        if (ix->lines[i].keylen == n && memcmp(ix->lines[i].key, key, n) == 0) return &ix->lines[i];
    return NULL;
}

/* Every row of a table whose INFO field is present and numeric; a family
 * header before the first sample of each name. */
static void write_fields(resp_buf *out, const field_table *t, const info_index *ix) {
    const char *open = NULL;
    for (size_t i = 0; i < t->n; i++) {
        const metrics_field *f = &t->rows[i];
        const info_line *l = find_line(ix, f->info_key);
        if (!l || !numeric(l->val, l->vallen)) continue;
        if (!open || strcmp(open, f->name) != 0) {
            family(out, f->name, f->type == METRIC_COUNTER ? "counter" : "gauge", f->help);
            open = f->name;
        }
        emitf(out, "%s%s%s%s %.*s\n", f->name, f->label ? "{" : "", f->label ? f->label : "",
              f->label ? "}" : "", (int)l->vallen, l->val);
    }
}

static void write_info_fields(server *srv, const store_stat *st, resp_buf *out) {
    metrics *m = srv->metrics;
    static char everything[] = "everything";
    resp_arg all = {.ptr = everything, .len = sizeof everything - 1};
    resp_buf text;
    resp_buf_init(&text);
    info_build(srv, 1, &all, st, &text);
    info_index ix = {0};
    index_info(&text, &ix);
    for (size_t t = 0; t < m->ntables; t++) write_fields(out, &m->tables[t], &ix);
    free(ix.lines);
    resp_buf_free(&text);
}

static void write_commands(server *srv, resp_buf *out) {
    metrics *m = srv->metrics;
    family(out, "moonkv_commands_total", "counter", "Commands executed, by command.");
    for (size_t i = 0; i < m->ncmds; i++)
        if (m->cmds[i].calls)
            emitf(out, "moonkv_commands_total{cmd=\"%s\"} %llu\n", commands_at(srv, i)->name,
                  (unsigned long long)m->cmds[i].calls);
    family(out, "moonkv_command_duration_seconds", "histogram",
           "Command latency, by command and size class of the value moved (request or reply).");
    for (size_t i = 0; i < m->ncmds; i++) {
        const char *name = m->cmds[i].calls ? commands_at(srv, i)->name : NULL;
        for (size_t s = 0; name && s < METRICS_SIZE_CLASSES; s++) {
            const cmd_hist *h = &m->cmds[i].by_size[s];
            if (!h->count) continue;
            uint64_t cum = 0;
            for (size_t b = 0; b < NBUCKETS; b++) {
                cum += h->buckets[b];
                emitf(out, "moonkv_command_duration_seconds_bucket{cmd=\"%s\",size=\"%s\",le=\"%s\"} %llu\n",
                      name, size_name[s], bucket_le[b], (unsigned long long)cum);
            }
            emitf(out, "moonkv_command_duration_seconds_bucket{cmd=\"%s\",size=\"%s\",le=\"+Inf\"} %llu\n",
                  name, size_name[s], (unsigned long long)h->count);
            emitf(out, "moonkv_command_duration_seconds_sum{cmd=\"%s\",size=\"%s\"} %.9f\n", name,
                  size_name[s], (double)h->sum_ns / 1e9);
            emitf(out, "moonkv_command_duration_seconds_count{cmd=\"%s\",size=\"%s\"} %llu\n", name,
                  size_name[s], (unsigned long long)h->count);
        }
    }
}

void metrics_write(server *srv, const store_stat *st, resp_buf *out) {
    if (!srv->metrics) return;
    family(out, "moonkv_info", "gauge", "Always 1; the labels name the role and version.");
    emitf(out, "moonkv_info{role=\"%s\",version=\"%s\"} 1\n", config_role_name(srv->cfg.role),
          MOONKV_VERSION);
    write_info_fields(srv, st, out);
    write_commands(srv, out);
}
