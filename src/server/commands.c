/* server/commands.c - the command table and the dispatcher.
 *
 * Rows from every registered table live in one array (registration order,
 * for COMMAND) indexed by an open-addressing hash of the lower-cased name,
 * so a lookup is one hash and usually one compare. */
#include "server/commands.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "server/multi.h"
#include "server/networking.h"

#define CMD_NAME_MAX 64   /* longer names cannot be commands */

typedef struct cmd_table {
    const command **rows;   /* registration order */
    size_t nrows, caprows;
    size_t *slots;          /* index + 1 into rows, 0 = empty */
    size_t nslots;          /* power of two, kept at most half full */
} cmd_table;

static uint64_t name_hash(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a over lower case */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)tolower((unsigned char)s[i]);
        h *= 1099511628211ULL;
    }
    return h;
}

/* The slot holding name, or the empty slot where it would go. */
static size_t *find_slot(cmd_table *t, const char *name, size_t len) {
    size_t mask = t->nslots - 1;
    for (size_t i = name_hash(name, len) & mask;; i = (i + 1) & mask) {
        size_t *slot = &t->slots[i];
        if (*slot == 0 || strieq_len(name, len, t->rows[*slot - 1]->name)) return slot;
    }
}

static void rehash(cmd_table *t, size_t nslots) {
    free(t->slots);
    t->slots = xcalloc(nslots, sizeof *t->slots);
    t->nslots = nslots;
    for (size_t i = 0; i < t->nrows; i++) {
        const char *n = t->rows[i]->name;
        *find_slot(t, n, strlen(n)) = i + 1;
    }
}

static void table_add(cmd_table *t, const command *cmd) {
    size_t *slot = find_slot(t, cmd->name, strlen(cmd->name));
    if (*slot) {                     /* a role overriding a default */
        t->rows[*slot - 1] = cmd;
        return;
    }
    if (t->nrows == t->caprows) {
        t->caprows = t->caprows ? t->caprows * 2 : 64;
        t->rows = xrealloc(t->rows, t->caprows * sizeof *t->rows);
    }
    t->rows[t->nrows++] = cmd;
    if (t->nrows * 2 > t->nslots) rehash(t, t->nslots * 2);
    else *find_slot(t, cmd->name, strlen(cmd->name)) = t->nrows;
}

void commands_register(server *srv, const command *table, size_t n) {
    cmd_table *t = srv->commands;
    if (!t) {
        t = srv->commands = xcalloc(1, sizeof *t);
        t->nslots = 128;
        t->slots = xcalloc(t->nslots, sizeof *t->slots);
    }
    for (size_t i = 0; i < n; i++) table_add(t, &table[i]);
}

/* The row index of name, or -1. */
static long lookup_index(server *srv, const char *name, size_t len) {
    cmd_table *t = srv->commands;
    if (!t || len == 0 || len > CMD_NAME_MAX) return -1;
    size_t *slot = find_slot(t, name, len);
    return *slot ? (long)*slot - 1 : -1;
}

const command *commands_lookup(server *srv, const char *name, size_t len) {
    long i = lookup_index(srv, name, len);
    return i < 0 ? NULL : ((cmd_table *)srv->commands)->rows[i];
}

size_t commands_count(server *srv) {
    cmd_table *t = srv->commands;
    return t ? t->nrows : 0;
}

const command *commands_at(server *srv, size_t i) {
    cmd_table *t = srv->commands;
    return t && i < t->nrows ? t->rows[i] : NULL;
}

void commands_free(server *srv) {
    cmd_table *t = srv->commands;
    if (!t) return;
    free(t->rows);
    free(t->slots);
    free(t);
    srv->commands = NULL;
}

int commands_arity_ok(const command *cmd, int argc) {
    return cmd->arity >= 0 ? argc == cmd->arity : argc >= -cmd->arity;
}

int arg_to_ll(const resp_arg *a, long long min, long long max, long long *out) {
    char buf[32], *end;
    if (a->len == 0 || a->len >= sizeof buf) return -1;
    memcpy(buf, a->ptr, a->len);   /* argv may not be NUL terminated */
    buf[a->len] = '\0';
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end || v < min || v > max) return -1;
    *out = v;
    return 0;
}

int arg_to_u64(const resp_arg *a, uint64_t *out) {
    char buf[32], *end;
    if (a->len == 0 || a->len >= sizeof buf || a->ptr[0] == '-' || a->ptr[0] == '+') return -1;
    memcpy(buf, a->ptr, a->len);
    buf[a->len] = '\0';
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

void commands_abort_put(client *c) {
    if (!c->pending_put) return;
    c->srv->store->ops->put_abort(c->srv->store, c->pending_put);
    c->pending_put = NULL;
    c->srv->stats.aborted_puts++;
}

/* Redis 7: "ERR unknown command 'x', with args beginning with: 'a' 'b' ",
 * the argument list capped near 128 bytes. */
static void reply_unknown_command(client *c) {
    char args[256];
    size_t used = 0;
    args[0] = '\0';
    for (int i = 1; i < c->argc && used < 128; i++) {
        size_t n = c->argv[i].len < 128 - used ? c->argv[i].len : 128 - used;
        int w = snprintf(args + used, sizeof args - used, "'%.*s' ", (int)n, c->argv[i].ptr);
        if (w < 0) break;
        used += (size_t)w;
    }
    size_t nlen = c->argv[0].len < 128 ? c->argv[0].len : 128;
    reply_errorf(c, "ERR unknown command '%.*s', with args beginning with: %s",
                 (int)nlen, c->argv[0].ptr, args);
}

static int needs_auth(client *c, const command *cmd) {
    return c->srv->cfg.requirepass[0] != '\0' && !c->authenticated &&
           !(cmd->flags & CMD_NOAUTH);
}

/* ---- Measuring (metrics) ---- */

static uint64_t value_bytes(const client *c, const command *cmd) {
    if (cmd->value_arg <= 0 || cmd->value_arg >= c->argc) return 0;
    return c->argv[cmd->value_arg].len;
}

/* The larger of the value sent and the reply queued since reply_mark. */
static uint64_t moved_bytes(uint64_t value, uint64_t reply_mark, const client *c) {
    uint64_t reply = c->reply_bytes - reply_mark;
    return value > reply ? value : reply;
}

/* Run cmd, timed; a command that blocks is measured when it unblocks. */
static void run_measured(client *c, const command *cmd, size_t idx) {
    uint64_t t0 = metrics_now_ns(), mark = c->reply_bytes, value = value_bytes(c, cmd);
    unsigned slots = client_slots_open(c);
    cmd->proc(c);
    if (client_slots_open(c) > slots) {   /* answers later, into the slot it opened */
        client_slot_measure(c, t0, idx, value);
        return;
    }
    if (c->flags & CLIENT_BLOCKED) {
        c->blocked_since_ns = t0;
        c->blocked_cmd = idx;
        c->blocked_value_bytes = value;
        c->blocked_reply_bytes = mark;
        return;
    }
    metrics_record(c->srv->metrics, idx, moved_bytes(value, mark, c), metrics_now_ns() - t0);
}

void commands_unblocked(client *c) {
    if (!c->srv->metrics || !c->blocked_since_ns) return;
    metrics_record(c->srv->metrics, c->blocked_cmd,
                   moved_bytes(c->blocked_value_bytes, c->blocked_reply_bytes, c),
                   metrics_now_ns() - c->blocked_since_ns);
    c->blocked_since_ns = 0;
}

void commands_slot_done(client *c, size_t cmd, uint64_t since_ns, uint64_t value, uint64_t reply) {
    if (!c->srv->metrics) return;
    metrics_record(c->srv->metrics, cmd, value > reply ? value : reply, metrics_now_ns() - since_ns);
}

void commands_call(client *c, const command *cmd) {
    c->last_cmd = cmd;
    long idx = c->srv->metrics ? lookup_index(c->srv, cmd->name, strlen(cmd->name)) : -1;
    if (idx >= 0) run_measured(c, cmd, (size_t)idx);
    else cmd->proc(c);
    c->srv->stats.commands_processed++;
    /* A value streamed in for a command whose proc did not take it must
     * not stay PENDING. */
    commands_abort_put(c);
}

/* c has pipelined commands in flight that cmd must not overtake. */
static int must_wait(client *c, const command *cmd) {
    return client_slots_open(c) && !(c->srv->role_pipelined && c->srv->role_pipelined(c, cmd));
}

void commands_dispatch(client *c) {
    if (c->argc <= 0) return;
    if (c->put_discarding) {   /* answered at its value's header (networking.c) */
        c->srv->stats.commands_processed++;
        return;
    }
    const command *cmd = commands_lookup(c->srv, c->argv[0].ptr, c->argv[0].len);
    int refused = 1;
    if (!cmd) reply_unknown_command(c);
    else if (!commands_arity_ok(cmd, c->argc)) reply_wrong_arity(c, cmd->name);
    else if (needs_auth(c, cmd)) reply_error(c, "NOAUTH Authentication required.");
    else refused = 0;
    if (!refused && must_wait(c, cmd)) {
        client_defer(c);   /* dispatched again once they are done: a streamed value stays */
        return;
    }
    if (refused) multi_refused(c);
    else if (c->srv->role_gate && c->srv->role_gate(c, cmd)) c->srv->stats.commands_processed++;
    else if (!multi_queue(c, cmd)) commands_call(c, cmd);
    /* A value streamed in for a command that was refused must not stay
     * PENDING. */
    commands_abort_put(c);
}
