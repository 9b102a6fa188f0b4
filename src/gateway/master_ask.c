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
#include "gateway/cluster_call.h"
#include "proto/cmd.h"
#include "proto/limits.h"
#include "proto/replies.h"

enum { ASK_STAT, ASK_SCAN, ASK_FLUSH, ASK_PIN };

/* Asked on a worker (over master groups), a SCAN cursor names its group
 * (the slot map's index) in its top byte and that group master's cursor
 * below: a master's cursor is a record number, far below 2^56. */
#define ASK_GROUP_SHIFT 56
#define ASK_CURSOR_MASK ((UINT64_C(1) << ASK_GROUP_SHIFT) - 1)

typedef struct ask {
    gw_job job;               /* first: the workers' link (no asynchronous connection) */
    int kind;
    uint64_t cursor;          /* ASK_SCAN */
    long count;
    void *out;                /* store_stat, store_page, store_flushed or store_pinq */
    size_t at;                /* ASK_PIN: the next chunk's first key, or the next id */
    size_t sent;              /* ASK_PIN: keys (or ids: 1) in the command out */
    master_async *ma;         /* ASK_PIN: where the chain's next command goes */
    store_got_fn *done;
    void *ctx;
    redisReply *reply;        /* the worker's answer */
    int group;                /* on a worker, ASK_SCAN: the group its page is of (-1: not on a worker) */
    int walked;               /* on a worker: every group asked, the answer already in out */
} ask;

static void pin_cmd(ask *a, proto_cmd *cmd);

static void ask_cmd(ask *a, proto_cmd *cmd) {
    if (a->kind == ASK_PIN) {
        pin_cmd(a, cmd);
    } else if (a->kind == ASK_STAT) {
        proto_cmd_init(cmd, 2);
        proto_cmd_str(cmd, "INFO");
        proto_cmd_str(cmd, "cluster");
    } else if (a->kind == ASK_FLUSH) {
        proto_cmd_bare(cmd, PROTO_VERB_FLUSH);
    } else {
        proto_cmd_scan(cmd, a->group >= 0 ? a->cursor & ASK_CURSOR_MASK : a->cursor, a->count);
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
    if (a->group >= 0 && next > ASK_CURSOR_MASK) {
        pg->rc = unreachable(pg->errstr, NULL, "a master's cursor past 2^56");
        pg->next = 0;
        a->done(a->ctx);
        return;
    }
    /* A group's walk done: the next group's, from its start. */
    if (a->group >= 0) next = next ? (uint64_t)a->group << ASK_GROUP_SHIFT | next
                                   : (uint64_t)(a->group + 1) << ASK_GROUP_SHIFT;
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

static int pin_answered(ask *a, const redisReply *r);
static void ask_send(master_async *ma, workers *w, ask *a);

/* The answer (r NULL: none came) into a's out, done, a freed. */
static void answered(const redisReply *r, void *ctx) {
    ask *a = ctx;
    if (a->kind == ASK_PIN) {
        if (!pin_answered(a, r)) return;   /* the next command is out */
        a->done(a->ctx);
    } else if (a->kind == ASK_SCAN) {
        answer_page(a, r);
    } else {
        if (a->kind == ASK_STAT) take_stat(a->out, r);
        else take_flush(a->out, r);
        a->done(a->ctx);
    }
    free(a);
}

static void pin_run(ask *a, mkv_client *mc);

/* The stat or flush answer of one group's master added to a's out;
 * STORE_OK, or the part's failure (then a's out). */
static int add_part(ask *a, const redisReply *r) {
    if (a->kind == ASK_STAT) {
        store_stat one, *st = a->out;
        take_stat(&one, r);
        if (one.rc != STORE_OK) {
            *st = one;
            return one.rc;
        }
        st->objects += one.objects;
        st->bytes_used += one.bytes_used;
        st->bytes_total += one.bytes_total;
        st->evicted = one.evicted >= 0 && st->evicted >= 0 ? st->evicted + one.evicted : -1;
        return STORE_OK;
    }
    store_flushed one, *f = a->out;
    take_flush(&one, r);
    if (one.rc != STORE_OK) *f = one;
    else f->removed += one.removed;
    return one.rc;
}

/* Every group's master asked in turn, the answers summed (a's rc the
 * first failure's: a FLUSHALL that failed in one group may have flushed
 * the ones before it). A client of one master is one group. */
static void walk_groups(ask *a, mkv_client *mc, const proto_cmd *cmd) {
    if (a->kind == ASK_STAT) *(store_stat *)a->out = (store_stat){.rc = STORE_OK};
    else *(store_flushed *)a->out = (store_flushed){.rc = STORE_OK};
    int rc = STORE_OK;
    for (int g = 0; rc == STORE_OK; g++) {
        int code;
        redisReply *r = mkv_command_group(mc, &g, cmd->argc, cmd->argv, cmd->lens, &code);
        if (!r && code == MKV_ENOTFOUND) break;
        rc = add_part(a, r);
        freeReplyObject(r);
    }
    a->walked = 1;
}

/* A SCAN page from the group its cursor names, or from the next group
 * whose walk has keys; past the last group the walk is over. */
static void scan_run(ask *a, mkv_client *mc) {
    a->group = (int)(a->cursor >> ASK_GROUP_SHIFT);
    for (;;) {
        proto_cmd cmd;
        int code;
        ask_cmd(a, &cmd);
        a->reply = mkv_command_group(mc, &a->group, cmd.argc, cmd.argv, cmd.lens, &code);
        proto_cmd_free(&cmd);
        if (!a->reply && code == MKV_ENOTFOUND) {
            store_page *pg = a->out;
            *pg = (store_page){.rc = STORE_OK};
            a->walked = 1;
            return;
        }
        uint64_t next;
        const redisReply *keys;
        if (proto_dec_scan(a->reply, &next, &keys) != 0 || next != 0 || keys->elements > 0) return;
        freeReplyObject(a->reply);   /* an empty group: on to the next */
        a->reply = NULL;
        a->group++;
        a->cursor = 0;
    }
}

static void ask_run(gw_job *j, mkv_client *mc) {
    ask *a = (ask *)j;
    cluster_master_wait();
    if (a->kind == ASK_PIN) {
        pin_run(a, mc);
        return;
    }
    if (a->kind == ASK_SCAN) {
        scan_run(a, mc);
        return;
    }
    proto_cmd cmd;
    ask_cmd(a, &cmd);
    walk_groups(a, mc, &cmd);
    proto_cmd_free(&cmd);
}

/* Back on the loop; a cancelled job (the gateway is stopping) asked nothing. */
static void ask_ran(gw_job *j) {
    ask *a = (ask *)j;
    if (a->kind == ASK_PIN) {   /* pin_run answered it, unless cancelled */
        store_pinq *q = a->out;
        if (j->cancelled) q->rc = unreachable(q->errstr, NULL, "the gateway is stopping");
        a->done(a->ctx);
        free(a);
        return;
    }
    if (a->walked) {
        a->done(a->ctx);
        free(a);
        return;
    }
    redisReply *r = a->reply;
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
    a->group = -1;
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

/* ---- MOON.PREFIX, PREFIXPIN, UNPIN (store.h pin_async) ----
 *
 * Over the asynchronous connection a question is a chain: PREFIX's keys
 * in chunks of PROTO_MAX_BATCH, the next sent once the one before was
 * all hits; UNPIN's ids one at a time, stopping at the first failure (as
 * the standalone command does). The pins are held by that connection,
 * so a loop's pins and unpins go the same way. Keys no object can have
 * end the counted prefix without being asked. */

/* Keys from the first that the cluster could hold. */
static size_t pin_usable(const store_pinq *q) {
    size_t n = 0;
    while (n < q->nkeys && cluster_key_ok(q->keys[n].len)) n++;
    return n;
}

static void pin_cmd(ask *a, proto_cmd *cmd) {
    store_pinq *q = a->out;
    if (q->kind == STORE_PQ_UNPIN) {
        proto_cmd_unpin(cmd, q->ids[a->at]);
        a->sent = 1;
        return;
    }
    size_t left = pin_usable(q) - a->at;
    a->sent = left < PROTO_MAX_BATCH ? left : PROTO_MAX_BATCH;
    if (q->kind == STORE_PQ_PREFIX) proto_cmd_keys_begin(cmd, PROTO_VERB_PREFIX, a->sent);
    else proto_cmd_prefixpin_begin(cmd, q->id, q->ms, a->sent);
    for (size_t i = 0; i < a->sent; i++) proto_cmd_bin(cmd, q->keys[a->at + i].ptr, q->keys[a->at + i].len);
}

/* Nothing (more) to ask: PREFIX past its usable keys, UNPIN past its ids. */
static int pin_over(const ask *a) {
    const store_pinq *q = a->out;
    return a->at >= (q->kind == STORE_PQ_UNPIN ? q->nids : pin_usable(q));
}

/* One reply of the chain into q: 1 when q is answered, 0 when the next
 * command went out (and will come back here). */
static int pin_answered(ask *a, const redisReply *r) {
    store_pinq *q = a->out;
    long long n;
    if (!r || proto_dec_int(r, 0, q->kind == STORE_PQ_UNPIN ? INT64_MAX : (long long)a->sent, &n) != 0) {
        q->rc = STORE_REFUSED;
        if (r && r->type == REDIS_REPLY_ERROR) snprintf(q->errstr, sizeof q->errstr, "%s", r->str);
        else unreachable(q->errstr, NULL, r ? "a reply that does not parse" : "connection lost before its reply");
        return 1;
    }
    q->count += (uint64_t)n;
    a->at += a->sent;
    if (pin_over(a) || (q->kind != STORE_PQ_UNPIN && (size_t)n < a->sent)) return 1;
    ask_send(a->ma, NULL, a);   /* back to answered, now or when the reply comes */
    return 0;
}

/* Without the asynchronous connection, and for pins: the library's
 * blocking calls, on a worker (the client follows the leader through
 * etcd; over master groups it routes PREFIX and refuses pins). */
static void pin_run(ask *a, mkv_client *mc) {
    store_pinq *q = a->out;
    size_t usable = q->kind == STORE_PQ_UNPIN ? 0 : pin_usable(q), n = 0;
    mkv_obj *o = xcalloc(usable ? usable : 1, sizeof *o);
    for (size_t i = 0; i < usable; i++) o[i] = (mkv_obj){.key = q->keys[i].ptr, .keylen = q->keys[i].len};
    uint64_t id = q->id;
    int rc = MKV_OK;
    if (q->kind == STORE_PQ_PREFIX) rc = mkv_exists_prefix(mc, o, usable, &n);
    else if (q->kind == STORE_PQ_PREFIXPIN) rc = mkv_exists_prefix_pin(mc, o, usable, q->ms, &id, &n);
    for (size_t i = 0; q->kind == STORE_PQ_UNPIN && rc == MKV_OK && i < q->nids; i++) {
        size_t k = 0;
        rc = mkv_unpin(mc, q->ids[i], &k);
        n += k;
    }
    free(o);
    q->count = n;
    q->rc = rc == MKV_OK ? STORE_OK : STORE_ERR;
    if (rc != MKV_OK) snprintf(q->errstr, sizeof q->errstr, "%s", mkv_last_error(mc));
}

/* Over master groups, MOON.PREFIX's keys as one exists batch on the
 * router's face (one MOON.MEXISTS per group, the parts at once): the
 * count is of the keys present from the first on; a key whose answer did
 * not come before the first missing one fails the question. */
static void prefix_answered(mkv_op *op) {
    gw_face_op *p = (gw_face_op *)op;
    store_pinq *q = p->owner;
    size_t n = 0;
    while (n < op->n && p->objs[n].status == MKV_OK && p->res[n] == 1) n++;
    q->count = n;
    if (n < op->n && p->objs[n].status != MKV_OK)
        q->rc = cluster_face_code(op, p->objs[n].status, q->errstr, sizeof q->errstr);
    p->then(p->ctx);
    free(p);
}

/* 1 if asked on the face (done comes from there). */
static int prefix_on_face(mkv_async *face, store_pinq *q, store_got_fn *done, void *ctx) {
    gw_face_op *p = cluster_face_op(MKV_OP_EXISTS_BATCH, pin_usable(q), 0, prefix_answered);
    for (p->op.n = 0; p->op.n < pin_usable(q); p->op.n++)
        p->objs[p->op.n] = (mkv_obj){.key = q->keys[p->op.n].ptr, .keylen = q->keys[p->op.n].len,
                                     .status = CLUSTER_UNTOLD};
    p->owner = q;
    p->then = done;
    p->ctx = ctx;
    if (mkv_async_submit(face, &p->op) == MKV_OK) return 1;
    free(p);
    return 0;
}

void master_ask_pin(master_async *ma, mkv_async *face, workers *w, store_pinq *q, store_got_fn *done, void *ctx) {
    q->rc = STORE_OK;
    q->count = 0;
    q->errstr[0] = '\0';
    if (q->kind == STORE_PQ_PREFIX && !ma && face && pin_usable(q) > 0 && prefix_on_face(face, q, done, ctx)) return;
    ask *a = ask_new(ASK_PIN, q, done, ctx);
    /* A pin is the client's own (its calls on a worker), so the client
     * pins it again on a new connection or leader (MOON.REPIN); a pin made
     * by a bare command on its connection would be gone there. */
    if (q->kind != STORE_PQ_PREFIX) ma = NULL;
    a->ma = ma;
    if (pin_over(a)) {   /* no key the master could count */
        done(ctx);
        free(a);
        return;
    }
    ask_send(ma, w, a);
}
