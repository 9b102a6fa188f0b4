/* gateway/master_said.c - see master_said.h. Answers are copied out of
 * the replies (a reply lives only during its callback); a KEYS walk asks
 * for its next page from the callback of the one before. Without the
 * asynchronous connection the questions queue, and one worker job asks
 * them in turn with its client's blocking calls (which follow the leader
 * through etcd); the loop learns of the answers when the job is done. */
#include "gateway/master_said.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "client/client.h"
#include "core/util.h"
#include "proto/cmd.h"
#include "proto/replies.h"
#include "server/glob.h"

#define KEYS_PAGE 1000   /* the page keys_command asks the store for */

typedef struct said_page {
    uint64_t cursor, next;
    char *keys;               /* per key: its length (size_t), then its bytes */
    size_t len, nkeys;
} said_page;

enum { ASK_INFO, ASK_SCAN, ASK_FLUSH };

typedef struct said_req {
    gw_said *s;
    int kind;
    uint64_t cursor;          /* ASK_SCAN */
    long count;
    struct said_req *next;    /* queued for the worker */
} said_req;

struct gw_said {
    gw_job job;               /* first: the workers' link (the questions asked there) */
    master_async *ma;         /* NULL: asked on a worker */
    workers *w;
    said_req *queue, *queue_tail;
    void (*done)(void *ctx);
    void *ctx;
    size_t pending;           /* questions sent, not answered yet */
    int asking;               /* said_end not called yet */
    int info_asked, scan_asked, flush_asked;
    char *info;               /* INFO cluster's text; NULL: none came */
    said_page *pages;
    size_t npages, cap;
    int flushed_ok;           /* MOON.FLUSH answered */
    long long removed;
    char *flush_err;          /* its error text */
    /* a KEYS walk: pages are asked until the walk ends or more than
     * keys_max keys matched */
    int keys;
    char *pat;
    size_t plen;
    uint64_t keys_max, matched;
};

gw_said *said_create(master_async *ma, workers *w, void (*done)(void *ctx), void *ctx) {
    gw_said *s = xcalloc(1, sizeof *s);
    s->ma = ma;
    s->w = w;
    s->done = done;
    s->ctx = ctx;
    s->asking = 1;
    return s;
}

/* The last answer is in: done may free s. */
static void maybe_done(gw_said *s) {
    if (!s->asking && !s->pending) s->done(s->ctx);
}

static void on_reply(const redisReply *r, void *ctx);

/* q's command. */
static void req_cmd(const said_req *q, proto_cmd *cmd) {
    if (q->kind == ASK_INFO) {
        proto_cmd_init(cmd, 2);
        proto_cmd_str(cmd, "INFO");
        proto_cmd_str(cmd, "cluster");
    } else if (q->kind == ASK_FLUSH) {
        proto_cmd_bare(cmd, PROTO_VERB_FLUSH);
    } else {
        proto_cmd_scan(cmd, q->cursor, q->count);
    }
}

static void said_send(gw_said *s, int kind, uint64_t cursor, long count) {
    said_req *q = xmalloc(sizeof *q);
    *q = (said_req){.s = s, .kind = kind, .cursor = cursor, .count = count};
    s->pending++;
    if (!s->ma) {   /* for the worker, in order */
        if (s->queue_tail) s->queue_tail->next = q;
        else s->queue = q;
        s->queue_tail = q;
        return;
    }
    proto_cmd cmd;
    req_cmd(q, &cmd);
    int failed = master_async_send(s->ma, cmd.argc, cmd.argv, cmd.lens, on_reply, q) != 0;
    proto_cmd_free(&cmd);
    if (failed) {
        s->pending--;
        free(q);   /* asked, never answered: the master is unreachable */
    }
}

void said_ask_info(gw_said *s) {
    s->info_asked = 1;
    said_send(s, ASK_INFO, 0, 0);
}

void said_ask_scan(gw_said *s, uint64_t cursor, long count) {
    s->scan_asked = 1;
    said_send(s, ASK_SCAN, cursor, count);
}

void said_ask_keys(gw_said *s, const char *pat, size_t plen, uint64_t max) {
    s->keys = 1;
    s->scan_asked = 1;   /* a walk that cannot start is an empty one */
    s->keys_max = max;
    if (!(plen == 1 && pat[0] == '*')) {   /* match-all needs no test */
        s->pat = xmalloc(plen ? plen : 1);
        memcpy(s->pat, pat, plen);
        s->plen = plen;
    }
    said_ask_info(s);
}

void said_ask_flush(gw_said *s) {
    s->flush_asked = 1;
    said_send(s, ASK_FLUSH, 0, 0);
}

static void take_reply(said_req *q, const redisReply *r);

/* On the worker: the queue, in turn (a KEYS walk queues its next page
 * from the answer before). */
static void ask_queued(gw_job *j, mkv_client *mc) {
    gw_said *s = (gw_said *)j;
    for (said_req *q; (q = s->queue);) {
        s->queue = q->next;
        if (!s->queue) s->queue_tail = NULL;
        proto_cmd cmd;
        req_cmd(q, &cmd);
        int code;
        redisReply *r = j->cancelled ? NULL : mkv_command(mc, cmd.argc, cmd.argv, cmd.lens, &code);
        proto_cmd_free(&cmd);
        take_reply(q, r);
        freeReplyObject(r);
    }
}

/* Back on the loop; a cancelled job (the gateway is stopping) asked none. */
static void asked_queued(gw_job *j) {
    if (j->cancelled) ask_queued(j, NULL);
    maybe_done((gw_said *)j);
}

void said_end(gw_said *s) {
    s->asking = 0;
    if (s->queue) {
        s->job = (gw_job){.run = ask_queued, .done = asked_queued};
        workers_submit(s->w, &s->job);
        return;
    }
    maybe_done(s);
}

long long info_text_field(const char *text, const char *field) {
    size_t flen = strlen(field);
    for (const char *line = text; line && *line; line = strchr(line, '\n')) {
        if (*line == '\n') line++;
        if (strncmp(line, field, flen) == 0 && line[flen] == ':') return strtoll(line + flen + 1, NULL, 10);
    }
    return -1;
}

static void keep_info(gw_said *s, const redisReply *r) {
    if (!r || r->type != REDIS_REPLY_STRING) return;
    s->info = xmalloc(r->len + 1);
    memcpy(s->info, r->str, r->len);
    s->info[r->len] = '\0';
    /* KEYS: a keyspace above the bound is refused without a walk */
    if (s->keys) {
        long long n = info_text_field(s->info, "objects_complete");
        if (n >= 0 && (uint64_t)n <= s->keys_max) said_send(s, ASK_SCAN, 0, KEYS_PAGE);
    }
}

static void keep_flush(gw_said *s, const redisReply *r) {
    if (r && r->type == REDIS_REPLY_INTEGER) {
        s->flushed_ok = 1;
        s->removed = r->integer > 0 ? r->integer : 0;
    } else if (r && r->type == REDIS_REPLY_ERROR) {
        s->flush_err = xstrdup(r->str);
    }
}

static void page_add(said_page *p, const char *key, size_t len) {
    memcpy(p->keys + p->len, &len, sizeof len);
    memcpy(p->keys + p->len + sizeof len, key, len);
    p->len += sizeof len + len;
    p->nkeys++;
}

/* Whether a page keeps key: a KEYS walk keeps only the keys its pattern
 * matches (the command would drop the others), so it holds what it
 * replies, not the keyspace. */
static int page_keeps(const gw_said *s, const redisReply *k) {
    return k->type == REDIS_REPLY_STRING && (!s->keys || !s->pat || glob_match(s->pat, s->plen, k->str, k->len, 0));
}

/* A MOON.SCAN page, copied; a KEYS walk asks for the next. */
static void keep_page(gw_said *s, const said_req *q, const redisReply *r) {
    uint64_t next;
    const redisReply *keys;
    if (proto_dec_scan(r, &next, &keys) != 0) {
        if (r)
            log_warning("gateway: %s failed: %s", PROTO_VERB_SCAN, r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
        return;   /* the walk ends here, as a failed scan ends it */
    }
    size_t bytes = 0;
    for (size_t i = 0; i < keys->elements; i++)
        if (page_keeps(s, keys->element[i])) bytes += sizeof(size_t) + keys->element[i]->len;
    if (s->npages == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4;
        s->pages = xrealloc(s->pages, s->cap * sizeof *s->pages);
    }
    said_page *p = &s->pages[s->npages++];
    *p = (said_page){.cursor = q->cursor, .next = next};
    p->keys = xmalloc(bytes ? bytes : 1);
    for (size_t i = 0; i < keys->elements; i++) {
        const redisReply *k = keys->element[i];
        if (page_keeps(s, k)) page_add(p, k->str, k->len);
    }
    s->matched += p->nkeys;
    if (s->keys && p->next != 0 && s->matched <= s->keys_max) said_send(s, ASK_SCAN, p->next, KEYS_PAGE);
}

/* q's answer (r NULL: none came) kept, q freed. */
static void take_reply(said_req *q, const redisReply *r) {
    gw_said *s = q->s;
    if (q->kind == ASK_INFO) keep_info(s, r);
    else if (q->kind == ASK_FLUSH) keep_flush(s, r);
    else keep_page(s, q, r);
    free(q);
    s->pending--;
}

static void on_reply(const redisReply *r, void *ctx) {
    gw_said *s = ((said_req *)ctx)->s;
    take_reply(ctx, r);
    maybe_done(s);
}

int said_info(const gw_said *s, const char **text) {
    if (!s || !s->info_asked) return -1;
    *text = s->info;
    return s->info != NULL;
}

int said_scan(const gw_said *s, uint64_t cursor, uint64_t *next, store_scan_fn *fn, void *ctx) {
    if (!s || !s->scan_asked) return -1;
    for (size_t i = 0; i < s->npages; i++) {
        const said_page *p = &s->pages[i];
        if (p->cursor != cursor) continue;
        for (size_t off = 0; off < p->len;) {
            size_t len;
            memcpy(&len, p->keys + off, sizeof len);
            fn(p->keys + off + sizeof len, len, ctx);
            off += sizeof len + len;
        }
        *next = p->next;
        return 1;
    }
    return 0;
}

int said_flush(const gw_said *s, long long *removed, const char **err) {
    if (!s || !s->flush_asked) return -1;
    *removed = s->removed;
    *err = s->flush_err;
    return s->flushed_ok || s->flush_err;
}

void said_free(gw_said *s) {
    if (!s) return;
    for (said_req *q = s->queue, *next; q; q = next) {
        next = q->next;
        free(q);
    }
    for (size_t i = 0; i < s->npages; i++) free(s->pages[i].keys);
    free(s->pages);
    free(s->info);
    free(s->flush_err);
    free(s->pat);
    free(s);
}
