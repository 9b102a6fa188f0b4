/* server/server.h - the RESP front end shared by every role.
 *
 * One event loop (core/loop.h), non-blocking sockets, one client struct
 * per connection. networking.c owns sockets, reading/parsing and the
 * reply queue; commands.c owns the command table; t_*.c implement
 * commands. A role (standalone, master, node, gateway) adds its commands
 * with commands_register and sets srv->store before the loop starts; the
 * framework names no role. */
#ifndef MKV_SERVER_H
#define MKV_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "core/loop.h"
#include "resp/resp_parser.h"
#include "resp/resp_writer.h"
#include "server/config.h"
#include "server/metrics.h"
#include "server/store.h"

typedef struct server server;
/* A RESP address a client can reach: "host" and port. */
typedef struct resp_endpoint {
    char host[64];
    int port;
} resp_endpoint;
typedef struct client client;
typedef struct command command;

/* Before-sleep hook priority of the reply flush (networking.c); a role's
 * hook that must run before replies are written takes a lower one. */
#define SERVER_HOOK_FLUSH 100
#define SENTINEL_NAMES    16   /* master names MASTERS lists at most */
#define SENTINEL_NAME_LEN 64

/* client->flags */
#define CLIENT_CLOSE_AFTER_REPLY (1u << 0)  /* QUIT, protocol error */
#define CLIENT_CLOSE_ASAP        (1u << 1)  /* output limit hit, I/O error */
#define CLIENT_BLOCKED           (1u << 2)  /* waiting for an async reply */
#define CLIENT_DEFERRED          (1u << 3)  /* its command waits for its pipelined ones */

struct client {
    uint64_t id;
    int fd;
    server *srv;
    uint32_t flags;
    int resp;                 /* protocol of replies: 2 or 3 */
    int authenticated;
    char name[128];           /* CLIENT SETNAME */
    char lib_name[64], lib_ver[64];
    char addr[64], laddr[64]; /* "ip:port" of peer and local side */
    uint64_t ctime_ms, last_ms;
    const command *last_cmd;
    uint64_t reply_bytes;     /* every reply byte ever queued (metrics size class) */
    /* A blocked command, measured when it unblocks (metrics). */
    uint64_t blocked_since_ns, blocked_value_bytes, blocked_reply_bytes;
    size_t blocked_cmd;

    /* The command being executed. */
    int argc;
    resp_arg *argv;

    /* A value streaming from the socket into the store (SET/PUT). */
    store_put *pending_put;
    int pending_put_err;      /* STORE_* from put_start, 0 if none */
    uint64_t pending_put_size;
    uint64_t pending_put_landed;   /* value bytes arrived so far */
    uint64_t pending_put_start_ms, pending_put_last_ms;   /* reserved; last bytes */
    /* The value was refused at its header (NOSPACE, TOOBIG) and answered
     * then; its bytes are read and dropped, its command does not run. */
    int put_discarding;

    void *multi;              /* multi.c: the transaction, NULL outside MULTI */
    void *net;                /* networking.c private state */
    void *role_ctx;           /* per-connection state of a role's commands */
};

typedef struct server_stats {
    uint64_t connections_received, connections_rejected;
    uint64_t commands_processed;
    uint64_t net_input_bytes, net_output_bytes;
    uint64_t protocol_errors;
    uint64_t keyspace_hits, keyspace_misses;
    uint64_t exists_rejections;   /* SET of other bytes on an existing key */
    uint64_t idempotent_puts;     /* SET of the very bytes already stored: OK, no-op */
    uint64_t conflicts_kept;      /* SET of other bytes, on_conflict keep: OK, first value kept */
    uint64_t nospace_rejections;  /* SET that did not fit */
    uint64_t aborted_puts;        /* half-written values dropped */
} server_stats;

struct server {
    event_loop *loop;
    mkv_config cfg;
    store *store;
    server_stats stats;
    uint64_t start_ms;
    uint64_t next_client_id;
    unsigned nclients;
    void *net;                /* networking.c private state */
    void *commands;           /* commands.c private state (the table) */
    void *role;               /* the running role's state */
    int io_thread;            /* which of cfg.io_threads loops this is (0: the listening one) */
    void *io;                 /* io_threads.c, on the listening loop when io_threads > 1 */
    void *put_guard;          /* put_guard.c: the stalled-put sweep */
    metrics *metrics;         /* NULL unless cfg.metrics_port is set */
    void *metrics_http;       /* metrics_http.c private state */
    /* INFO hook for role-specific sections (e.g. "cluster"). */
    void (*role_info)(server *srv, resp_buf *out, const char *section);
    /* CLUSTER/SENTINEL hook (t_cluster.c): other RESP servers holding the
     * same keys (gateways of one master), at most max; NULL = none. */
    size_t (*role_peers)(server *srv, resp_endpoint *out, size_t max);
    /* A role may refuse a command before its proc runs (a standby master):
     * nonzero when it did, its reply sent. NULL: every command runs. */
    int (*role_gate)(client *c, const struct command *cmd);
    /* While a client has pipelined commands in flight (reply slots,
     * networking.h), a command waits for them unless the role says it may
     * start behind them: nonzero. NULL: every command waits. */
    int (*role_pipelined)(client *c, const struct command *cmd);
    /* Master names SENTINEL was asked about (t_cluster.c), listed by
     * MASTERS when sentinel_master_name is unset. */
    char sentinel_names[SENTINEL_NAMES][SENTINEL_NAME_LEN];
    int nsentinel_names;
};

/* Lifecycle (networking.c). */
int server_init(server *srv, const mkv_config *cfg, char *err, size_t errlen);
int server_listen(server *srv, char *err, size_t errlen);   /* binds cfg bind:port */
void server_run(server *srv);                                /* until SIGTERM/SIGINT */
struct sockaddr_storage;
/* A connection accepted elsewhere (io_threads.c) becomes srv's client;
 * on srv's thread. Refused (and closed) at maxclients. */
void server_adopt(server *srv, int fd, const struct sockaddr_storage *peer);
void server_stop(server *srv);
void server_cleanup(server *srv);

/* Replies (networking.c): queued in order, sent when the socket is writable. */
void reply_simple(client *c, const char *s);
void reply_error(client *c, const char *msg);          /* full text: "ERR ...", "EXISTS ..." */
void reply_errorf(client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void reply_integer(client *c, long long v);
void reply_bulk(client *c, const void *p, size_t n);
void reply_bulk_cstr(client *c, const char *s);
void reply_null(client *c);                            /* per c->resp */
void reply_array(client *c, long long n);
void reply_map(client *c, long long n);
void reply_set(client *c, long long n);
void reply_double(client *c, double d);
void reply_bool(client *c, int v);
void reply_verbatim(client *c, const char *s, size_t n); /* "txt" */
void reply_ok(client *c);
/* Append raw pre-encoded RESP bytes. */
void reply_raw(client *c, const void *p, size_t n);
/* Zero-copy bulk: the body is sent straight from p with writev; release
 * (may be NULL) is called with ctx once it has been written or the client
 * is gone, so the caller can unpin the memory. */
void reply_bulk_ref(client *c, const void *p, size_t n,
                    void (*release)(void *ctx), void *ctx);
/* reply_bulk_ref's body alone (no bulk header, no CRLF): a part of a
 * reply written piece by piece (client_slot_part). */
void reply_raw_ref(client *c, const void *p, size_t n, void (*release)(void *ctx), void *ctx);
/* reply_bulk_ref for a value with per-slice checksums (store_slices):
 * each slice is checked as the writer reaches it and sent only once it
 * passed; the next is checked while the client drains it. A slice that fails: corrupt(ctx, slice)
 * runs and the connection closes (the client sees a cut-off reply, never
 * a wrong byte). sl->count 0: a plain reply_bulk_ref. */
void reply_bulk_ref_sliced(client *c, const void *p, size_t n, const store_slices *sl,
                           void (*release)(void *ctx), void (*corrupt)(void *ctx, uint32_t slice),
                           void *ctx);
/* Async replies (gateway): a command that cannot answer yet calls
 * client_block; later replies are added and client_unblock resumes the
 * pipeline. A client freed while blocked calls on_free(ctx). */
void client_block(client *c);
void client_unblock(client *c);

/* Redis-exact error helpers used by the command dispatcher and commands. */
void reply_wrong_arity(client *c, const char *cmdname);
void reply_syntax_error(client *c);

#endif
