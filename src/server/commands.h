/* server/commands.h - the command table and dispatch.
 *
 * Each role registers a static table of commands; lookup is
 * case-insensitive. The dispatcher checks, in Redis's order: unknown
 * command, arity, authentication; then calls proc. COMMAND COUNT/DOCS/INFO
 * are generated from the same rows. */
#ifndef MKV_COMMANDS_H
#define MKV_COMMANDS_H

#include <stddef.h>
#include <stdint.h>

#include "server/server.h"

typedef void command_proc(client *c);

/* command->flags */
#define CMD_WRITE    (1u << 0)
#define CMD_READONLY (1u << 1)
#define CMD_FAST     (1u << 2)
#define CMD_NOAUTH   (1u << 3)   /* allowed before AUTH (AUTH, HELLO, QUIT) */
#define CMD_ADMIN    (1u << 4)
#define CMD_STALE    (1u << 5)
/* Only a cluster member may run it: a role's gate (srv->role_gate) checks
 * it (the master: a connection that proved the cluster secret). */
#define CMD_MEMBER   (1u << 6)

struct command {
    const char *name;       /* lower case, e.g. "set", "moon.putstart" */
    command_proc *proc;
    int arity;              /* Redis rule: N exact, -N at least N (name counts) */
    uint32_t flags;
    int first_key, last_key, key_step;   /* for COMMAND INFO; 0 if no keys */
    int value_arg;          /* argv index of a value to stream into the store, 0 = none */
    const char *group;      /* "string", "generic", "connection", "server", "moonkv" */
    const char *since;      /* moonkv version that added it */
    const char *summary;
    const char *syntax;     /* argument synopsis for COMMAND DOCS, e.g. "key value [NX]" */
};

/* Register rows (the table must outlive the server). Later registration
 * of a name already present replaces it (a role overriding a default). */
void commands_register(server *srv, const command *table, size_t n);
const command *commands_lookup(server *srv, const char *name, size_t len);
/* Run the parsed command in c->argc/argv: checks and proc. */
void commands_dispatch(client *c);
/* A blocked command's client was unblocked (client_unblock): its
 * latency ends now (metrics). */
void commands_unblocked(client *c);
/* A command that answered into a reply slot (networking.h) is done:
 * measured from since_ns, with value bytes sent and reply bytes queued. */
void commands_slot_done(client *c, size_t cmd, uint64_t since_ns, uint64_t value, uint64_t reply);
/* Run cmd's proc on c->argc/argv (checks done): as dispatch does, and
 * as EXEC does for each queued command. */
void commands_call(client *c, const command *cmd);
/* 1 if argc satisfies cmd's arity (dispatch checks it before proc; a
 * value stream for a command of the wrong arity is not started). */
int commands_arity_ok(const command *cmd, int argc);
/* Abort the client's in-flight put (c->pending_put), if any, and count it
 * in stats.aborted_puts. Dispatch calls it after every command, so a proc
 * that keeps a put past its return must take it (set c->pending_put =
 * NULL); networking calls it when a client goes away mid-value. */
void commands_abort_put(client *c);
/* A decimal integer argument within [min, max]: 0, or -1 if it is not
 * one (callers reply "ERR value is not an integer or out of range"). */
int arg_to_ll(const resp_arg *a, long long min, long long max, long long *out);
/* An unsigned decimal (a SCAN cursor): 0, or -1 if it is not one. */
int arg_to_u64(const resp_arg *a, uint64_t *out);
size_t commands_count(server *srv);
/* Iterate every registered command (COMMAND, COMMAND DOCS). */
const command *commands_at(server *srv, size_t i);
void commands_free(server *srv);

/* COMMAND [COUNT|DOCS|INFO|LIST] from the rows (command_docs.c). */
void command_command(client *c);

/* The standard tables (t_object.c, t_server.c). */
void t_object_register(server *srv);
/* SET's answer to a put refused with rc (NOSPACE, TOOBIG) for a value of
 * size bytes: networking gives it at the value's header. */
void t_object_reply_put_refused(client *c, int rc, uint64_t size);
/* SET's reply to its put's outcome rc (put_end's; the store's errstr
 * says why) for a value of size bytes, NX or not. With STORE_EXISTS,
 * same says whether the stored value is the SET's bytes (an idempotent
 * OK), or -1: compare c->argv's value with the store's here. */
void t_object_reply_set(client *c, int rc, uint64_t size, int nx, int same);
/* DEL/REMOVE/UNLINK, EXISTS, STRLEN, TYPE, or TTL/PTTL of a store without
 * expiry hints, replied from each key's outcome n[i] (removed or exists:
 * 1 or 0; STRLEN: the size, -1 none), however the store found them. */
void t_object_reply_answers(client *c, const command *cmd, const long long *n, size_t nkeys);
/* A read's outcome (store.h get_async) as GET replies it; takes its pin. */
void t_object_reply_got(client *c, store_got *g);
/* GETRANGE key start end: its numbers (argv[2], argv[3]), -1 if one is
 * not; the reply from the value's read (takes its pin; a value with slice
 * CRCs has the slices the range touches checked). */
int t_object_getrange_args(const resp_arg *argv, long long *start, long long *end);
void t_object_reply_getrange(client *c, long long start, long long end, store_got *g);
void t_server_register(server *srv);
/* INFO's reply (argv[0] the name) from the store's stat (NULL: not asked,
 * info_reads_store said no). */
void t_server_reply_info(client *c, int argc, const resp_arg *argv, const store_stat *st);
/* CLUSTER and SENTINEL as one shard holding every slot (t_cluster.c). */
void t_cluster_register(server *srv);
void t_multi_register(server *srv);   /* multi.c */

/* What a front end that asks ahead for the object commands' store calls
 * needs to know of their arguments (t_object.c). */
#define KEYS_MAX 100000   /* KEYS is refused on a larger keyspace: use SCAN */
typedef struct scan_opts {
    uint64_t cursor;
    long count;               /* as the store's scan is asked */
    const resp_arg *match;    /* NULL = every key */
    int none;                 /* TYPE of no object: no key matches */
} scan_opts;
/* SCAN's arguments (argv[0] the name): NULL, or the text of the error
 * SCAN replies. o->match points into argv. */
const char *scan_parse(int argc, const resp_arg *argv, scan_opts *o);
/* FLUSHALL's arguments are valid (else it replies a syntax error). */
int flushall_args_ok(const client *c);

/* The keyspace commands' replies from their store's answers (store.h
 * stat_async, scan_async, flush_async), however late they came: the
 * standalone commands and the gateway's write the same bytes. */
void t_object_reply_dbsize(client *c, const store_stat *st);
/* A SCAN page, its keys filtered by o (MATCH, TYPE): while pg's keys are
 * valid (in the answer's done). */
void t_object_reply_scan(client *c, const scan_opts *o, const store_page *pg);
/* FLUSHALL|FLUSHDB (name for the log). */
void t_object_reply_flush(client *c, const char *name, const store_flushed *f);
/* MOON.PREFIX, MOON.PREFIXPIN, MOON.UNPIN (argv[0] the name; pins: the
 * store keeps pins): 0 with q filled (its keys or ids into argv, until
 * t_object_pinq_free; q NULL: only checked), or -1 with the error reply's
 * text in err. The reply from the store's answer (store_pin_ask). */
int t_object_pinq_parse(int argc, const resp_arg *argv, int pins, store_pinq *q, char *err, size_t errlen);
void t_object_pinq_free(store_pinq *q);
void t_object_reply_pinq(client *c, const store_pinq *q);
/* KEYS pattern as a walk over the store's answers (its stat, then its
 * pages; the pattern is copied): run calls done(ctx) once the reply is
 * known, before it returns for a store that answers at once; done may
 * free the walk. */
typedef struct keys_walk keys_walk;
keys_walk *t_object_keys_new(const resp_arg *pattern);
void t_object_keys_run(keys_walk *w, store *s, store_got_fn *done, void *ctx);
void t_object_reply_keys(client *c, const keys_walk *w);
void t_object_keys_free(keys_walk *w);

#endif
