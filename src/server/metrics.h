/* server/metrics.h - Prometheus metrics of a server (any role).
 *
 * Two kinds of numbers. Per-command counts and latency histograms are
 * recorded here, in the dispatch path (commands.c), per command and per
 * size class of the value the command moved. Everything else is what
 * INFO already reports: a role names the INFO fields it exports with a
 * table of metrics_field rows, and a scrape builds the INFO text once and
 * turns those fields into samples, so INFO and /metrics share one source.
 *
 * The metrics struct exists only when metrics_port is set; every call
 * takes a NULL one and does nothing. Recording and scraping both run on
 * the server's loop thread, so the counters need no atomics. */
#ifndef MKV_METRICS_H
#define MKV_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "resp/resp_writer.h"

typedef struct server server;
typedef struct metrics metrics;

typedef enum { METRIC_COUNTER, METRIC_GAUGE } metric_type;

/* One INFO field exported as one sample. Rows of one metric (same name,
 * different label) must be adjacent in a table: they form one family. */
typedef struct metrics_field {
    const char *info_key;   /* "total_net_input_bytes" */
    const char *name;       /* "moonkv_net_input_bytes_total" */
    metric_type type;
    const char *label;      /* label pair(s) without braces, e.g. "state=\"alive\"", or NULL */
    const char *help;
} metrics_field;

#define METRICS_ADD_TABLE(srv, table) \
    metrics_add_fields((srv)->metrics, (table), sizeof(table) / sizeof((table)[0]))

/* Value size classes of the latency histogram (bytes, upper bounds). */
#define METRICS_SIZE_CLASSES 6

metrics *metrics_create(void);
void metrics_free(metrics *m);

/* Export the INFO fields of table (kept by pointer: static storage). */
void metrics_add_fields(metrics *m, const metrics_field *table, size_t n);

/* One command finished: cmd is its row index in the command table (see
 * commands_at), value_bytes the larger of its value argument and its
 * reply, ns the time it took. */
void metrics_record(metrics *m, size_t cmd, uint64_t value_bytes, uint64_t ns);
uint64_t metrics_now_ns(void);   /* CLOCK_MONOTONIC */

/* The whole exposition (Prometheus text format 0.0.4) appended to out;
 * st is the store's stat (store.h stat_async), NULL without a store. */
struct store_stat;
void metrics_write(server *srv, const struct store_stat *st, resp_buf *out);

/* The HTTP listener (metrics_http.c) on cfg.bind:cfg.metrics_port:
 * GET /metrics answers the exposition, anything else 404/405/400. */
int metrics_http_start(server *srv, char *err, size_t errlen);
void metrics_http_stop(server *srv);

#endif
