/* gateway/master_ask.c - see master_ask.h. The answer is read from the
 * reply inside its callback (a scan page's keys point into it while done
 * runs), so nothing is copied or kept. */
#include "gateway/master_ask.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/moonkv_internal.h"
#include "core/log.h"
#include "core/util.h"
#include "proto/cmd.h"
#include "proto/replies.h"

enum { ASK_STAT, ASK_SCAN, ASK_FLUSH };

typedef struct ask {
    gw_job job;               /* first: the workers' link (no asynchronous connection) */
    int kind;
    uint64_t cursor;          /* ASK_SCAN */
    long count;
    void *out;                /* store_stat, store_page or store_flushed */
    store_got_fn *done;
    void *ctx;
    redisReply *reply;        /* the worker's answer */
} ask;

static void ask_cmd(const ask *a, proto_cmd *cmd) {
    if (a->kind == ASK_STAT) {
        proto_cmd_init(cmd, 2);
        proto_cmd_str(cmd, "INFO");
        proto_cmd_str(cmd, "cluster");
    } else if (a->kind == ASK_FLUSH) {
        proto_cmd_bare(cmd, PROTO_VERB_FLUSH);
    } else {
        proto_cmd_scan(cmd, a->cursor, a->count);
    }
}

/* A numeric field of INFO's text; -1 if absent. */
static long long info_field_of(const char *text, const char *field) {
    size_t flen = strlen(field);
    for (const char *line = text; line && *line; line = strchr(line, '\n')) {
        if (*line == '\n') line++;
        if (strncmp(line, field, flen) == 0 && line[flen] == ':') return strtoll(line + flen + 1, NULL, 10);
    }
    return -1;
}

static int unreachable(char *errstr, const redisReply *r, const char *why) {
    snprintf(errstr, STORE_ERRSTR, "TRYAGAIN the master is unreachable (%.160s)",
             r && r->type == REDIS_REPLY_ERROR ? r->str : why);
    return STORE_REFUSED;
}

static void take_stat(store_stat *st, const redisReply *r) {
    long long n = r && r->type == REDIS_REPLY_STRING ? info_field_of(r->str, "objects_complete") : -1;
    st->errstr[0] = '\0';
    st->objects = n > 0 ? (uint64_t)n : 0;
    if (n < 0) {
        st->rc = unreachable(st->errstr, r, "no INFO cluster");
        st->bytes_used = st->bytes_total = 0;
        st->evicted = -1;
        return;
    }
    long long used = info_field_of(r->str, "bytes_used"), total = info_field_of(r->str, "bytes_total");
    st->rc = STORE_OK;
    st->bytes_used = used > 0 ? (uint64_t)used : 0;
    st->bytes_total = total > 0 ? (uint64_t)total : 0;
    st->evicted = info_field_of(r->str, "evicted_keys");
}

#define KEYS_ON_STACK 64

/* A MOON.SCAN page: its keys point into the reply while done runs. */
static void answer_page(ask *a, const redisReply *r) {
    store_page *pg = a->out;
    const redisReply *keys;
    uint64_t next = 0;
    pg->keys = NULL;
    pg->nkeys = 0;
    pg->errstr[0] = '\0';
    if (proto_dec_scan(r, &next, &keys) != 0) {
        if (r) log_warning("gateway: %s failed: %s", PROTO_VERB_SCAN, r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
        pg->rc = unreachable(pg->errstr, r, "no " PROTO_VERB_SCAN " reply");
        pg->next = 0;
        a->done(a->ctx);
        return;
    }
    store_key buf[KEYS_ON_STACK], *k = keys->elements <= KEYS_ON_STACK ? buf : xmalloc(keys->elements * sizeof *k);
    size_t n = 0;
    for (size_t i = 0; i < keys->elements; i++)
        if (keys->element[i]->type == REDIS_REPLY_STRING) k[n++] = (store_key){keys->element[i]->str, keys->element[i]->len};
    pg->rc = STORE_OK;
    pg->next = next;
    pg->keys = k;
    pg->nkeys = n;
    a->done(a->ctx);
    if (k != buf) free(k);
}

static void take_flush(store_flushed *f, const redisReply *r) {
    f->errstr[0] = '\0';
    f->removed = 0;
    f->rc = STORE_REFUSED;   /* the master's words, or an unreachable master */
    if (r && r->type == REDIS_REPLY_INTEGER) {
        f->rc = STORE_OK;
        f->removed = r->integer > 0 ? (uint64_t)r->integer : 0;
    } else if (r && r->type == REDIS_REPLY_ERROR) {
        snprintf(f->errstr, sizeof f->errstr, "%s", r->str);
    } else {   /* nothing was removed, or it all was: asking again is safe */
        unreachable(f->errstr, NULL, "connection lost before its reply");
    }
}

/* The answer (r NULL: none came) into a's out, done, a freed. */
static void answered(const redisReply *r, void *ctx) {
    ask *a = ctx;
    if (a->kind == ASK_SCAN) {
        answer_page(a, r);
    } else {
        if (a->kind == ASK_STAT) take_stat(a->out, r);
        else take_flush(a->out, r);
        a->done(a->ctx);
    }
    free(a);
}

static void ask_run(gw_job *j, mkv_client *mc) {
    ask *a = (ask *)j;
    proto_cmd cmd;
    int code;
    ask_cmd(a, &cmd);
    a->reply = mkv_command(mc, cmd.argc, cmd.argv, cmd.lens, &code);
    proto_cmd_free(&cmd);
}

/* Back on the loop; a cancelled job (the gateway is stopping) asked nothing. */
static void ask_ran(gw_job *j) {
    redisReply *r = ((ask *)j)->reply;
    answered(r, j);
    freeReplyObject(r);
}

static void ask_send(master_async *ma, workers *w, ask *a) {
    if (!ma) {
        a->job = (gw_job){.run = ask_run, .done = ask_ran};
        workers_submit(w, &a->job);
        return;
    }
    proto_cmd cmd;
    ask_cmd(a, &cmd);
    int sent = master_async_send(ma, cmd.argc, cmd.argv, cmd.lens, answered, a) == 0;
    proto_cmd_free(&cmd);
    if (!sent) answered(NULL, a);   /* no connection now: the master is unreachable */
}

static ask *ask_new(int kind, void *out, store_got_fn *done, void *ctx) {
    ask *a = xcalloc(1, sizeof *a);
    a->kind = kind;
    a->out = out;
    a->done = done;
    a->ctx = ctx;
    return a;
}

void master_ask_stat(master_async *ma, workers *w, store_stat *st, store_got_fn *done, void *ctx) {
    ask_send(ma, w, ask_new(ASK_STAT, st, done, ctx));
}

void master_ask_scan(master_async *ma, workers *w, uint64_t cursor, long count, store_page *pg,
                     store_got_fn *done, void *ctx) {
    ask *a = ask_new(ASK_SCAN, pg, done, ctx);
    a->cursor = cursor;
    a->count = count;
    ask_send(ma, w, a);
}

void master_ask_flush(master_async *ma, workers *w, store_flushed *f, store_got_fn *done, void *ctx) {
    ask_send(ma, w, ask_new(ASK_FLUSH, f, done, ctx));
}
