/* server/t_server.c - connection and server commands: PING, ECHO, HELLO,
 * AUTH, QUIT, SELECT, INFO, CONFIG, CLIENT, COMMAND.
 *
 * Reply texts follow Redis 7 so clients and tools that match on them
 * (redis-cli, redis-benchmark, client libraries) behave as with Redis. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "core/log.h"
#include "core/util.h"
#include "server/commands.h"
#include "server/glob.h"
#include "server/info.h"
#include "server/networking.h"

#define REDIS_COMPAT_VERSION "7.0.0"

#ifndef MOONKV_VERSION
#define MOONKV_VERSION "0.0.0"
#endif

static int arg_is(const resp_arg *a, const char *s) { return strieq_len(a->ptr, a->len, s); }

/* ---- PING, ECHO, QUIT, SELECT ---- */

static void ping_command(client *c) {
    if (c->argc > 2) reply_wrong_arity(c, "ping");
    else if (c->argc == 2) reply_bulk(c, c->argv[1].ptr, c->argv[1].len);
    else reply_simple(c, "PONG");
}

static void echo_command(client *c) { reply_bulk(c, c->argv[1].ptr, c->argv[1].len); }

static void quit_command(client *c) {
    reply_ok(c);
    c->flags |= CLIENT_CLOSE_AFTER_REPLY;
}

static void select_command(client *c) {
    long long db;
    if (arg_to_ll(&c->argv[1], LLONG_MIN, LLONG_MAX, &db) < 0)
        reply_error(c, "ERR value is not an integer or out of range");
    else if (db != 0)
        reply_error(c, "ERR DB index is out of range");
    else
        reply_ok(c);
}

/* ---- AUTH, HELLO ---- */

/* Constant time over the password, so timing does not reveal a prefix. */
static int password_ok(const mkv_config *cfg, const resp_arg *pass) {
    size_t n = strlen(cfg->requirepass);
    unsigned char diff = pass->len != n;
    for (size_t i = 0; i < pass->len; i++)
        diff |= (unsigned char)pass->ptr[i] ^ (unsigned char)cfg->requirepass[i < n ? i : 0];
    return diff == 0;
}

/* The only user is "default" (as in Redis without ACLs). With no
 * requirepass it has no password and any password is accepted. */
static int credentials_ok(client *c, const resp_arg *user, const resp_arg *pass) {
    if (user && !arg_is(user, "default")) return 0;
    return c->srv->cfg.requirepass[0] == '\0' || password_ok(&c->srv->cfg, pass);
}

static void auth_command(client *c) {
    if (c->argc > 3) {
        reply_syntax_error(c);
        return;
    }
    if (c->argc == 2 && c->srv->cfg.requirepass[0] == '\0') {
        reply_error(c, "ERR AUTH <password> called without any password configured for the "
                       "default user. Are you sure your configuration is correct?");
        return;
    }
    const resp_arg *user = c->argc == 3 ? &c->argv[1] : NULL;
    if (!credentials_ok(c, user, &c->argv[c->argc - 1])) {
        reply_error(c, "WRONGPASS invalid username-password pair or user is disabled.");
        return;
    }
    c->authenticated = 1;
    reply_ok(c);
}

/* Redis accepts names of printable ASCII without spaces. */
static int name_ok(const resp_arg *a) {
    for (size_t i = 0; i < a->len; i++)
        if (a->ptr[i] < '!' || a->ptr[i] > '~') return 0;
    return 1;
}

/* Sets a client name; 0, or -1 after replying the error. */
static int set_client_name(client *c, const resp_arg *name) {
    if (!name_ok(name)) {
        reply_error(c, "ERR Client names cannot contain spaces, newlines or special characters.");
        return -1;
    }
    if (name->len >= sizeof c->name) {
        reply_errorf(c, "ERR Client names are limited to %zu bytes", sizeof c->name - 1);
        return -1;
    }
    memcpy(c->name, name->ptr, name->len);
    c->name[name->len] = '\0';
    return 0;
}

static void reply_hello_map(client *c) {
    reply_map(c, 7);
    reply_bulk_cstr(c, "server");
    reply_bulk_cstr(c, "moonkv");
    reply_bulk_cstr(c, "version");
    reply_bulk_cstr(c, MOONKV_VERSION);
    reply_bulk_cstr(c, "proto");
    reply_integer(c, c->resp);
    reply_bulk_cstr(c, "id");
    reply_integer(c, (long long)c->id);
    reply_bulk_cstr(c, "mode");
    reply_bulk_cstr(c, "standalone");
    reply_bulk_cstr(c, "role");
    reply_bulk_cstr(c, "master");
    reply_bulk_cstr(c, "modules");
    reply_array(c, 0);
}

static void hello_command(client *c) {
    long long proto = c->resp;
    int i = 1;
    if (c->argc >= 2) {
        if (arg_to_ll(&c->argv[1], LLONG_MIN, LLONG_MAX, &proto) < 0) {
            reply_error(c, "ERR Protocol version is not an integer or out of range");
            return;
        }
        if (proto < 2 || proto > 3) {
            reply_error(c, "NOPROTO unsupported protocol version");
            return;
        }
        i = 2;
    }
    const resp_arg *user = NULL, *pass = NULL, *name = NULL;
    for (; i < c->argc; i++) {
        int more = c->argc - i - 1;
        if (arg_is(&c->argv[i], "AUTH") && more >= 2) {
            user = &c->argv[i + 1];
            pass = &c->argv[i + 2];
            i += 2;
        } else if (arg_is(&c->argv[i], "SETNAME") && more >= 1) {
            name = &c->argv[++i];
        } else {
            reply_errorf(c, "ERR Syntax error in HELLO option '%.*s'",
                         (int)(c->argv[i].len < 128 ? c->argv[i].len : 128), c->argv[i].ptr);
            return;
        }
    }
    if (user && !credentials_ok(c, user, pass)) {
        reply_error(c, "WRONGPASS invalid username-password pair or user is disabled.");
        return;
    }
    if (user) c->authenticated = 1;
    if (c->srv->cfg.requirepass[0] && !c->authenticated) {
        reply_error(c, "NOAUTH HELLO must be called with the client already authenticated, "
                       "otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
                       "authenticate the client and select the RESP protocol version at the same time");
        return;
    }
    if (name && set_client_name(c, name) < 0) return;
    c->resp = (int)proto;
    reply_hello_map(c);
}

/* ---- INFO ---- */

typedef struct info_req {
    int argc;
    const resp_arg *argv;   /* the requested sections; none = "default" */
} info_req;

/* A section name argument as a C string, cut to the buffer. */
static const char *section_name(const resp_arg *a, char *buf, size_t len) {
    size_t n = a->len < len - 1 ? a->len : len - 1;
    memcpy(buf, a->ptr, n);
    buf[n] = '\0';
    return buf;
}

/* Does any requested section include `name`? */
static int req_wants(const info_req *r, const char *name, int is_default) {
    if (r->argc == 0) return is_default;
    for (int i = 0; i < r->argc; i++) {
        char sec[32];
        if (info_wants(section_name(&r->argv[i], sec, sizeof sec), name, is_default)) return 1;
    }
    return 0;
}

static void info_server(server *srv, resp_buf *out) {
    struct utsname un;
    char exe[PATH_MAX] = "";
    uint64_t up = (mono_ms() - srv->start_ms) / 1000;
    if (uname(&un) != 0) memset(&un, 0, sizeof un);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    info_section(out, "Server");
    info_field(out, "redis_version", "%s", REDIS_COMPAT_VERSION);
    info_field(out, "moonkv_version", "%s", MOONKV_VERSION);
    info_field(out, "moonkv_role", "%s", config_role_name(srv->cfg.role));
    info_field(out, "redis_mode", "standalone");
    info_field(out, "os", "%s %s %s", un.sysname, un.release, un.machine);
    info_field(out, "arch_bits", "%zu", sizeof(void *) * 8);
    info_field(out, "process_id", "%ld", (long)getpid());
    info_field(out, "tcp_port", "%d", srv->cfg.port);
    info_field(out, "io_threads", "%d", srv->cfg.io_threads);
    info_field(out, "io_thread", "%d", srv->io_thread);
    info_field(out, "server_time_usec", "%llu", (unsigned long long)wall_ms() * 1000);
    info_field(out, "uptime_in_seconds", "%llu", (unsigned long long)up);
    info_field(out, "uptime_in_days", "%llu", (unsigned long long)up / 86400);
    info_field(out, "executable", "%s", exe);
    info_field(out, "config_file", "%s", srv->cfg.config_file);
}

static void count_blocked(client *c, void *ctx) { *(unsigned *)ctx += (c->flags & CLIENT_BLOCKED) != 0; }

static void info_clients(server *srv, resp_buf *out) {
    unsigned blocked = 0;
    clients_foreach(srv, count_blocked, &blocked);
    info_section(out, "Clients");
    info_field(out, "connected_clients", "%u", srv->nclients);
    info_field(out, "maxclients", "%d", srv->cfg.maxclients);
    info_field(out, "blocked_clients", "%u", blocked);
}

static void info_stats(server *srv, const store_stat *asked, resp_buf *out) {
    const server_stats *st = &srv->stats;
    info_section(out, "Stats");
    info_field(out, "total_connections_received", "%llu", (unsigned long long)st->connections_received);
    info_field(out, "total_commands_processed", "%llu", (unsigned long long)st->commands_processed);
    info_field(out, "total_net_input_bytes", "%llu", (unsigned long long)st->net_input_bytes);
    info_field(out, "total_net_output_bytes", "%llu", (unsigned long long)st->net_output_bytes);
    info_field(out, "rejected_connections", "%llu", (unsigned long long)st->connections_rejected);
    info_field(out, "keyspace_hits", "%llu", (unsigned long long)st->keyspace_hits);
    info_field(out, "keyspace_misses", "%llu", (unsigned long long)st->keyspace_misses);
    info_field(out, "exists_rejections", "%llu", (unsigned long long)st->exists_rejections);
    info_field(out, "idempotent_puts", "%llu", (unsigned long long)st->idempotent_puts);
    info_field(out, "conflicts_kept", "%llu", (unsigned long long)st->conflicts_kept);
    info_field(out, "nospace_rejections", "%llu", (unsigned long long)st->nospace_rejections);
    info_field(out, "aborted_puts", "%llu", (unsigned long long)st->aborted_puts);
    info_field(out, "protocol_errors", "%llu", (unsigned long long)st->protocol_errors);
    /* Redis has it here; the store's own section says it too. */
    if (asked && asked->rc == STORE_OK && asked->evicted >= 0) info_field(out, "evicted_keys", "%lld", asked->evicted);
    else if (srv->store) info_field(out, "evicted_keys", "0");
}

/* Every front end with a store is a master without replicas as Redis
 * sees it (moonkv's replicas are copies of objects, not of servers). */
static void info_replication(resp_buf *out) {
    info_section(out, "Replication");
    info_field(out, "role", "master");
    info_field(out, "connected_slaves", "0");
    info_field(out, "master_failover_state", "no-failover");
    info_field(out, "master_repl_offset", "0");
}

static void info_keyspace(const store_stat *st, resp_buf *out) {
    info_section(out, "Keyspace");
    uint64_t keys = st && st->rc == STORE_OK ? st->objects : 0;
    if (keys > 0) info_field(out, "db0", "keys=%llu,expires=0,avg_ttl=0", (unsigned long long)keys);
}

/* A server with a store answers CLUSTER as one shard (t_cluster.c);
 * cluster clients check this field before asking CLUSTER SLOTS. */
static void info_cluster(resp_buf *out) {
    info_section(out, "Cluster");
    info_field(out, "cluster_enabled", "1");
}

static int req_all(const info_req *r) {
    for (int i = 0; i < r->argc; i++)
        if (arg_is(&r->argv[i], "all") || arg_is(&r->argv[i], "everything")) return 1;
    return 0;
}

/* Hands the request to a store or role hook: once with "everything" when
 * all is asked for, else once per distinct section named. */
static void info_delegate(const info_req *r, resp_buf *out,
                          void (*fn)(void *ctx, resp_buf *out, const char *section), void *ctx) {
    if (req_all(r)) {
        fn(ctx, out, "everything");
        return;
    }
    if (r->argc == 0) {
        fn(ctx, out, "default");
        return;
    }
    for (int i = 0; i < r->argc; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = r->argv[j].len == r->argv[i].len &&
                   strncasecmp(r->argv[j].ptr, r->argv[i].ptr, r->argv[i].len) == 0;
        char sec[32];
        if (!seen) fn(ctx, out, section_name(&r->argv[i], sec, sizeof sec));
    }
}

typedef struct store_info_ctx {
    store *s;
    const store_stat *st;
} store_info_ctx;

static void store_info_fn(void *ctx, resp_buf *out, const char *section) {
    store_info_ctx *si = ctx;
    si->s->ops->info(si->s, si->st, out, section);
}

static void role_info_fn(void *ctx, resp_buf *out, const char *section) {
    server *srv = ctx;
    srv->role_info(srv, out, section);
}

int info_reads_store(int argc, const resp_arg *argv) {
    info_req r = {.argc = argc, .argv = argv};
    return req_wants(&r, "memory", 1) || req_wants(&r, "stats", 1) || req_wants(&r, "keyspace", 1);
}

void info_build(server *srv, int argc, const resp_arg *argv, const store_stat *st, resp_buf *out) {
    info_req r = {.argc = argc, .argv = argv};
    store_info_ctx si = {.s = srv->store, .st = st};
    if (req_wants(&r, "server", 1)) info_server(srv, out);
    if (req_wants(&r, "clients", 1)) info_clients(srv, out);
    if (srv->store) info_delegate(&r, out, store_info_fn, &si);
    if (req_wants(&r, "stats", 1)) info_stats(srv, st, out);
    if (srv->store && req_wants(&r, "replication", 1)) info_replication(out);
    if (srv->role_info) info_delegate(&r, out, role_info_fn, srv);
    if (srv->store && req_wants(&r, "cluster", 1)) info_cluster(out);
    if (req_wants(&r, "keyspace", 1)) info_keyspace(st, out);
}

void t_server_reply_info(client *c, int argc, const resp_arg *argv, const store_stat *st) {
    resp_buf out;
    resp_buf_init(&out);
    info_build(c->srv, argc - 1, argv + 1, st, &out);
    reply_verbatim(c, out.data ? out.data : "", out.len);
    resp_buf_free(&out);
}

static void stat_inline(void *ctx) { *(int *)ctx = 1; }

/* The store is asked only when a section reads it; a store that answers
 * later (the cluster) has the role's own INFO (gateway_async.c). */
static void info_command(client *c) {
    store *s = c->srv->store;
    store_stat st;
    int done = 0;
    if (s && info_reads_store(c->argc - 1, c->argv + 1)) {
        s->ops->stat_async(s, &st, stat_inline, &done);
        if (!done) {   /* no reply could be written */
            log_warning("INFO: a store answered later without its role holding the reply");
            abort();
        }
    }
    t_server_reply_info(c, c->argc, c->argv, done ? &st : NULL);
}

/* ---- CONFIG ---- */

/* Keys redis-benchmark and tools ask for, with moonkv's fixed answers. */
static const struct {
    const char *name, *value;
} config_fixed[] = {{"save", ""}, {"appendonly", "no"}};

/* Secrets are not readable over RESP. */
static int config_secret(const char *name) {
    return strcmp(name, "requirepass") == 0 || strcmp(name, "cluster-secret") == 0 ||
           strcmp(name, "master-auth") == 0;
}

static int config_wanted(client *c, const char *name) {
    for (int i = 2; i < c->argc; i++)
        if (glob_match(c->argv[i].ptr, c->argv[i].len, name, strlen(name), 1)) return 1;
    return 0;
}

/* Walks every matching key: counts them when reply is 0, replies them
 * otherwise, so the map's length is known before it is written. */
static long long config_walk(client *c, int reply) {
    char buf[CONFIG_STR_MAX * CONFIG_MAX_ADDRS];
    long long n = 0;
    const char *name;
    for (int i = 0; (name = config_key_name(i)) != NULL; i++) {
        if (!config_wanted(c, name)) continue;
        n++;
        if (!reply) continue;
        const char *v = config_secret(name) ? "" : config_get_value(&c->srv->cfg, name, buf, sizeof buf);
        reply_bulk_cstr(c, name);
        reply_bulk_cstr(c, v ? v : "");
    }
    for (size_t i = 0; i < sizeof config_fixed / sizeof config_fixed[0]; i++) {
        if (!config_wanted(c, config_fixed[i].name)) continue;
        n++;
        if (!reply) continue;
        reply_bulk_cstr(c, config_fixed[i].name);
        reply_bulk_cstr(c, config_fixed[i].value);
    }
    return n;
}

static void config_get(client *c) {
    reply_map(c, config_walk(c, 0));
    config_walk(c, 1);
}

static void config_command(client *c) {
    const resp_arg *sub = &c->argv[1];
    if (arg_is(sub, "GET") && c->argc >= 3) {
        config_get(c);
    } else if (arg_is(sub, "SET") && c->argc >= 4) {
        reply_error(c, "ERR moonkv settings are read-only at runtime: change the config file "
                       "or command line and restart");
    } else if (arg_is(sub, "RESETSTAT") && c->argc == 2) {
        memset(&c->srv->stats, 0, sizeof c->srv->stats);
        reply_ok(c);
    } else {
        reply_errorf(c, "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
                        "Try CONFIG HELP.",
                     (int)(sub->len < 128 ? sub->len : 128), sub->ptr);
    }
}

/* ---- CLIENT ---- */

static void client_line(client *c, void *ctx) {
    resp_buf *out = ctx;
    uint64_t now = mono_ms();
    char flags[8], line[1024];
    size_t nf = 0;
    if (c->flags & CLIENT_BLOCKED) flags[nf++] = 'b';
    if (c->flags & CLIENT_CLOSE_AFTER_REPLY) flags[nf++] = 'c';
    if (c->flags & CLIENT_CLOSE_ASAP) flags[nf++] = 'A';
    if (nf == 0) flags[nf++] = 'N';
    flags[nf] = '\0';
    int n = snprintf(line, sizeof line,
                     "id=%llu addr=%s laddr=%s fd=%d name=%s age=%llu idle=%llu flags=%s db=0 "
                     "sub=0 psub=0 ssub=0 multi=-1 cmd=%s user=default redir=-1 resp=%d "
                     "lib-name=%s lib-ver=%s\n",
                     (unsigned long long)c->id, c->addr, c->laddr, c->fd, c->name,
                     (unsigned long long)(now > c->ctime_ms ? (now - c->ctime_ms) / 1000 : 0),
                     (unsigned long long)(now > c->last_ms ? (now - c->last_ms) / 1000 : 0),
                     flags, c->last_cmd ? c->last_cmd->name : "NULL", c->resp,
                     c->lib_name, c->lib_ver);
    if (n > 0) resp_buf_append(out, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static void reply_client_lines(client *c, int all) {
    resp_buf out;
    resp_buf_init(&out);
    if (all) clients_foreach(c->srv, client_line, &out);
    else client_line(c, &out);
    reply_verbatim(c, out.data ? out.data : "", out.len);
    resp_buf_free(&out);
}

static void client_setinfo(client *c) {
    const resp_arg *attr = &c->argv[2], *val = &c->argv[3];
    char *dst;
    size_t cap;
    if (arg_is(attr, "LIB-NAME")) {
        dst = c->lib_name;
        cap = sizeof c->lib_name;
    } else if (arg_is(attr, "LIB-VER")) {
        dst = c->lib_ver;
        cap = sizeof c->lib_ver;
    } else {
        reply_errorf(c, "ERR Unrecognized option '%.*s'", (int)(attr->len < 128 ? attr->len : 128),
                     attr->ptr);
        return;
    }
    if (!name_ok(val) || val->len >= cap) {
        reply_errorf(c, "ERR %s cannot contain spaces, newlines or special characters "
                        "and is limited to %zu bytes.",
                     dst == c->lib_name ? "LIB-NAME" : "LIB-VER", cap - 1);
        return;
    }
    memcpy(dst, val->ptr, val->len);
    dst[val->len] = '\0';
    reply_ok(c);
}

static void client_command(client *c) {
    const resp_arg *sub = &c->argv[1];
    if (arg_is(sub, "SETNAME") && c->argc == 3) {
        if (set_client_name(c, &c->argv[2]) == 0) reply_ok(c);
    } else if (arg_is(sub, "GETNAME") && c->argc == 2) {
        if (c->name[0]) reply_bulk_cstr(c, c->name);
        else reply_null(c);
    } else if (arg_is(sub, "ID") && c->argc == 2) {
        reply_integer(c, (long long)c->id);
    } else if (arg_is(sub, "SETINFO") && c->argc == 4) {
        client_setinfo(c);
    } else if (arg_is(sub, "LIST") && c->argc == 2) {
        reply_client_lines(c, 1);
    } else if (arg_is(sub, "INFO") && c->argc == 2) {
        reply_client_lines(c, 0);
    } else {
        reply_errorf(c, "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
                        "Try CLIENT HELP.",
                     (int)(sub->len < 128 ? sub->len : 128), sub->ptr);
    }
}

/* ---- the table ---- */

static const command server_commands[] = {
    {"ping", ping_command, -1, CMD_FAST | CMD_STALE, 0, 0, 0, 0, "connection", "0.1.0",
     "Returns PONG, or the message given", "[message]"},
    {"echo", echo_command, 2, CMD_FAST, 0, 0, 0, 0, "connection", "0.1.0",
     "Returns the message", "message"},
    {"hello", hello_command, -1, CMD_NOAUTH | CMD_FAST | CMD_STALE, 0, 0, 0, 0, "connection", "0.1.0",
     "Handshake: choose RESP2 or RESP3, optionally authenticate and name the connection",
     "[protover [AUTH username password] [SETNAME clientname]]"},
    {"auth", auth_command, -2, CMD_NOAUTH | CMD_FAST | CMD_STALE, 0, 0, 0, 0, "connection", "0.1.0",
     "Authenticate the connection", "[username] password"},
    {"quit", quit_command, -1, CMD_NOAUTH | CMD_FAST | CMD_STALE, 0, 0, 0, 0, "connection", "0.1.0",
     "Close the connection after the reply", ""},
    {"select", select_command, 2, CMD_FAST, 0, 0, 0, 0, "connection", "0.1.0",
     "Only database 0 exists", "index"},
    {"info", info_command, -1, CMD_STALE, 0, 0, 0, 0, "server", "0.1.0",
     "Server information and statistics", "[section ...]"},
    {"config", config_command, -2, CMD_ADMIN | CMD_STALE, 0, 0, 0, 0, "server", "0.1.0",
     "Read settings (CONFIG GET); settings are read-only at runtime", "GET parameter [parameter ...]"},
    {"client", client_command, -2, CMD_STALE, 0, 0, 0, 0, "connection", "0.1.0",
     "Connection management: SETNAME, GETNAME, ID, SETINFO, LIST, INFO", "subcommand [argument ...]"},
    {"command", command_command, -1, CMD_STALE, 0, 0, 0, 0, "server", "0.1.0",
     "Describe the commands: COUNT, DOCS, INFO, LIST", "[subcommand [command-name ...]]"},
};

void t_server_register(server *srv) {
    commands_register(srv, server_commands, sizeof server_commands / sizeof server_commands[0]);
}
