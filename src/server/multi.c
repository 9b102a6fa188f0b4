/* server/multi.c - MULTI, EXEC, DISCARD, WATCH, UNWATCH.
 *
 * A transaction is a list of commands, each one allocation holding its
 * argv and argument bytes (the parser's buffer is reused, so arguments
 * are copied). The queue is bounded in commands and bytes so a client
 * cannot make the server hold more than it could send as one value. */
#include "server/multi.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "server/commands.h"

#define MULTI_MAX_COMMANDS (1u << 20)

typedef struct queued {
    const command *cmd;
    int argc;
    resp_arg *argv;            /* into the same allocation */
} queued;

typedef struct multi_state {
    queued **q;
    size_t n, cap;
    size_t bytes;              /* argument bytes held */
    int dirty;                 /* a command was refused while queuing */
    int executing;             /* EXEC started: q[next..] still to run */
    size_t next;
} multi_state;

static multi_state *state_of(const client *c) { return c->multi; }

int multi_queuing(const client *c) {
    const multi_state *m = state_of(c);
    return m && !m->executing;
}

static void state_free(client *c) {
    multi_state *m = state_of(c);
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) free(m->q[i]);
    free(m->q);
    free(m);
    c->multi = NULL;
}

void multi_free(client *c) { state_free(c); }

void multi_refused(client *c) {
    if (multi_queuing(c)) state_of(c)->dirty = 1;
}

static queued *queued_copy(const command *cmd, int argc, const resp_arg *argv, size_t bytes) {
    queued *q = xmalloc(sizeof *q + (size_t)argc * sizeof(resp_arg) + bytes);
    q->cmd = cmd;
    q->argc = argc;
    q->argv = (resp_arg *)(q + 1);
    char *p = (char *)(q->argv + argc);
    for (int i = 0; i < argc; i++) {
        memcpy(p, argv[i].ptr, argv[i].len);
        p[argv[i].len] = '\0';
        q->argv[i] = (resp_arg){.ptr = p, .len = argv[i].len, .external = 1};   /* freed with q */
        p += argv[i].len + 1;
    }
    return q;
}

/* Commands a queuing client runs at once, as in Redis. */
static int runs_now(const command *cmd) {
    static const char *const now[] = {"exec", "discard", "multi", "watch", "unwatch", "quit", "reset"};
    for (size_t i = 0; i < sizeof now / sizeof now[0]; i++)
        if (strcmp(cmd->name, now[i]) == 0) return 1;
    return 0;
}

int multi_queue(client *c, const command *cmd) {
    multi_state *m = state_of(c);
    if (!multi_queuing(c) || runs_now(cmd)) return 0;
    size_t bytes = 0;
    for (int i = 0; i < c->argc; i++) bytes += c->argv[i].len + 1;
    uint64_t limit = (uint64_t)c->srv->cfg.proto_max_bulk_len;
    if (m->n >= MULTI_MAX_COMMANDS || m->bytes + bytes > limit) {
        m->dirty = 1;
        reply_errorf(c, "ERR transaction too large: at most %u commands and %llu bytes of "
                        "arguments (proto-max-bulk-len) may be queued",
                     MULTI_MAX_COMMANDS, (unsigned long long)limit);
        return 1;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 16;
        m->q = xrealloc(m->q, m->cap * sizeof *m->q);
    }
    m->q[m->n++] = queued_copy(cmd, c->argc, c->argv, bytes);
    m->bytes += bytes;
    reply_simple(c, "QUEUED");
    return 1;
}

/* Runs queued commands from m->next until one blocks the client or all
 * have run. */
static int exec_run(client *c) {
    multi_state *m = state_of(c);
    int argc = c->argc;
    resp_arg *argv = c->argv;
    while (m->next < m->n && !(c->flags & CLIENT_BLOCKED)) {
        queued *q = m->q[m->next++];
        c->argc = q->argc;
        c->argv = q->argv;
        commands_call(c, q->cmd);
    }
    c->argc = argc;
    c->argv = argv;
    if (c->flags & CLIENT_BLOCKED) return 1;
    state_free(c);
    return 0;
}

int multi_exec_continue(client *c) {
    multi_state *m = state_of(c);
    if (!m || !m->executing || (c->flags & CLIENT_BLOCKED)) return m && m->executing;
    return exec_run(c);
}

static void multi_command(client *c) {
    if (c->multi) {
        reply_error(c, "ERR MULTI calls can not be nested");
        return;
    }
    c->multi = xcalloc(1, sizeof(multi_state));
    reply_ok(c);
}

static void exec_command(client *c) {
    multi_state *m = state_of(c);
    if (!m) {
        reply_error(c, "ERR EXEC without MULTI");
        return;
    }
    if (m->dirty) {
        state_free(c);
        reply_error(c, "EXECABORT Transaction discarded because of previous errors.");
        return;
    }
    m->executing = 1;
    reply_array(c, (long long)m->n);
    exec_run(c);
}

static void discard_command(client *c) {
    if (!c->multi) {
        reply_error(c, "ERR DISCARD without MULTI");
        return;
    }
    state_free(c);
    reply_ok(c);
}

/* Keys are write-once, but a key can be deleted and set again with other
 * bytes, and the gateway's keys change on other gateways: honest WATCH
 * needs change tracking the cluster does not have, so it is refused. */
static void watch_command(client *c) {
    if (c->multi) reply_error(c, "ERR WATCH inside MULTI is not allowed");
    else reply_error(c, "ERR WATCH is not supported by moonkv (objects are write-once; "
                        "use SET ... NX to create a key only if absent)");
}

static void unwatch_command(client *c) { reply_ok(c); }   /* nothing is ever watched */

static const command multi_commands[] = {
    {"multi", multi_command, 1, CMD_FAST, 0, 0, 0, 0, "transactions", "0.2.0",
     "Start a transaction: commands are queued until EXEC", ""},
    {"exec", exec_command, 1, 0, 0, 0, 0, 0, "transactions", "0.2.0",
     "Run the queued commands in order; one array of their replies", ""},
    {"discard", discard_command, 1, CMD_FAST, 0, 0, 0, 0, "transactions", "0.2.0",
     "Drop the queued commands", ""},
    {"watch", watch_command, -2, CMD_FAST, 1, -1, 1, 0, "transactions", "0.2.0",
     "Not supported: answers an error", "key [key ...]"},
    {"unwatch", unwatch_command, 1, CMD_FAST, 0, 0, 0, 0, "transactions", "0.2.0",
     "Nothing is ever watched: OK", ""},
};

void t_multi_register(server *srv) {
    commands_register(srv, multi_commands, sizeof multi_commands / sizeof multi_commands[0]);
}
