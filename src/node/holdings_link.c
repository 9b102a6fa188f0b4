/* node/holdings_link.c - see holdings_link.h. */
#include "node/holdings_link.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "core/cond.h"
#include "core/log.h"
#include "core/util.h"
#include "etcd/leader_watch.h"
#include "node/control.h"
#include "node/copier.h"
#include "node/disk_store.h"
#include "node/disk_tier.h"
#include "node/shares.h"
#include "proto/cmd.h"
#include "link/master_link.h"
#include "proto/notes.h"
#include "proto/register.h"
#include "proto/replies.h"

#define HL_CONNECT_MS  2000
/* A pull waits HOLDINGS_WAIT_MS for its answer, then this for a master
 * that stalls (control's I/O timeout): a timeout costs only the link. */
#define HL_IO_SLACK_MS 5000
#define HL_RETRY_MS    100    /* between attempts to link */
#define HL_MAX_NOTES   4096   /* notes per reply (the master's MASTER_MAX_HOLDINGS) */
#define HL_ROUNDS      64     /* full fallback replies taken in one go */

/* Outcomes of one pull. */
enum { PULL_DONE = 0, PULL_MORE = 1, PULL_LOST = -1, PULL_REFUSED = -2 };

struct node_holdings {
    node *n;
    struct node_control *ctl;   /* its group's control thread (tasks pulled go there) */
    int g;                      /* its group (node->groups[g]) */
    node_status *st;            /* its group's (under n->mu) */
    pthread_t th;
    pthread_mutex_t mu;         /* the state below; held while notes are applied */
    pthread_cond_t cv;
    int stop;
    int active;                 /* resumed: a registration to pull for */
    uint64_t gen;               /* bumped by pause and resume: a reply of another is dropped */
    uint32_t id;
    uint64_t reg_gen;           /* control's registration the link serves (its tasks' tag) */
    char host[CONFIG_STR_MAX];
    int port;
    int64_t term;               /* the leader's, as etcd named it */
    leader_watch *watch;        /* --etcd: leaves a leader that was replaced */
    char instance[17];
    int fd;                     /* the link's socket (-1: none), shut down by pause */
    int old_master;             /* no MOON.HOLDLINK: control pulls (fallback); atomic, written under mu */
    int plain;                  /* the master keeps no slice CRCs: pull without SLICES */
    int no_tasks;               /* the master hands no tasks on pulls: pull without TASKS */
    uint64_t fb_ack;            /* the fallback's ack */
    uint64_t pulls;             /* atomic, written under mu */
    /* under mu, while applying */
    obj_extent *note_ext;       /* room for one note's extents (PROTO_MAX_EXTENTS) */
    char *disk_key;             /* room for a note's key as the disk tier keeps it (NODE_DISK_KEY_MAX) */
    node_index_batch *ix_batch;
};

/* ---- applying notes ---- */

/* A packed MOON.HOLDINGS blob (proto/notes.h) into the index, in order;
 * the number of notes, or -1 if one is malformed (those before it stay
 * applied) or there are more than a reply may hold. */
static long apply_notes(node_holdings *h, const uint8_t *p, const uint8_t *end, uint32_t self) {
    node_index *ix = h->n->index;
    long n = 0;
    for (; p < end && n < HL_MAX_NOTES; n++) {
        proto_note note;
        if (proto_note_next(&p, end, h->note_ext, &note) != 0) break;
        if (note.drop != PROTO_NOTE_DROP_DISK) node_shares_noted(h->n, h->g, note.key, note.keylen, &note.rep, note.drop, self);
        if (note.drop == PROTO_NOTE_DROP_DISK) {
            if (h->n->disk) (void)disk_store_remove(h->n->disk, h->disk_key,
                                                    node_disk_key(h->n->groups[h->g].name, note.key, note.keylen, h->disk_key));
        } else if (note.drop) node_index_batch_drop(ix, h->ix_batch, note.key, note.keylen);
        else node_index_batch_hold(ix, h->ix_batch, note.key, note.keylen, note.size, note.crc, note.want, &note.rep,
                                   &note.slices, self);
    }
    node_index_commit(ix, h->ix_batch);   /* before the blob its keys point into goes */
    return p == end ? n : -1;
}

/* Send MOON.HOLDINGS self ack on rc (not waiting for the reply); *form
 * is what it asked for (PROTO_HOLDINGS_*), for pull_take. 0, or -1 if
 * rc broke. */
static int pull_send(node_holdings *h, redisContext *rc, uint32_t self, uint64_t ack, int wait_ms, int *form) {
    int tasks = wait_ms > 0 && !h->no_tasks && !node_copier_busy(h->n->copier);
    *form = (h->plain ? 0 : PROTO_HOLDINGS_SLICES) | (tasks ? PROTO_HOLDINGS_TASKS : 0);
    proto_cmd cmd;
    proto_cmd_holdings(&cmd, self, ack, *form, wait_ms);
    int rc_ = redisAppendCommandArgv(rc, cmd.argc, cmd.argv, cmd.lens) == REDIS_OK ? 0 : -1;
    proto_cmd_free(&cmd);
    for (int done = 0; rc_ == 0 && !done;)
        if (redisBufferWrite(rc, &done) != REDIS_OK) rc_ = -1;
    return rc_;
}

/* The reply to the pull pull_send sent (as *form) for registration gen:
 * its notes go into the index and its tasks to the copier unless gen is
 * gone by then, *ack moves past them. chain: the next pull, carrying
 * that ack, leaves as soon as the notes are in (the master holds answers
 * until it comes: acks.c), before this thread's bookkeeping; its form
 * goes to *form. */
static int pull_take(node_holdings *h, redisContext *rc, lw_conn *watched, uint32_t self, uint64_t gen,
                     uint64_t *ack, int wait_ms, int *form, int chain) {
    void *reply = NULL;
    leader_watch_busy_within(watched, wait_ms);   /* waiting is its answer: only longer is a stall */
    int got = redisGetReply(rc, &reply);
    leader_watch_busy(watched, 0);
    redisReply *r = reply;
    if (got != REDIS_OK || !r) return PULL_LOST;
    int out = PULL_DONE;
    uint64_t acked;
    const uint8_t *blob;
    size_t len;
    long k = 0;
    size_t ntasks = 0;
    int applied = 0;
    if (r->type == REDIS_REPLY_ERROR && (*form & PROTO_HOLDINGS_TASKS) && strstr(r->str, "syntax error")) {
        log_notice("node: the master hands out no tasks on holdings pulls: heartbeats carry them");
        h->no_tasks = 1;
        out = PULL_MORE;   /* again, at once */
    } else if (r->type == REDIS_REPLY_ERROR && (*form & PROTO_HOLDINGS_SLICES) && strstr(r->str, "syntax error")) {
        log_notice("node: the master keeps no slice CRCs in holdings: pulling them without");
        h->plain = 1;
        out = PULL_MORE;   /* again, at once */
    } else if (proto_dec_holdings(r, &acked, &blob, &len) == 0) {
        pthread_mutex_lock(&h->mu);
        if (gen == h->gen) {
            k = apply_notes(h, blob, blob + len, self);
            const redisReply *ts = proto_holdings_tasks(r);
            ntasks = ts ? ts->elements : 0;
            if (ntasks) node_control_take_tasks(h->ctl, ts, h->reg_gen);
            if (proto_holdings_ask_chunks(r)) node_control_ask_chunks(h->ctl);
            /* Taken as read either way: a note we cannot parse would come back forever. */
            if (k < 0) log_warning("node: malformed holdings from the master: the rest of the reply is lost");
            *ack = acked;
            applied = 1;
            __atomic_add_fetch(&h->pulls, 1, __ATOMIC_RELEASE);
            out = k == HL_MAX_NOTES || len >= PROTO_NOTES_BLOB ? PULL_MORE : PULL_DONE;
        } else {
            out = PULL_REFUSED;   /* registered again meanwhile */
        }
        pthread_mutex_unlock(&h->mu);
    } else {
        log_info("node: %s: %s", PROTO_VERB_HOLDINGS, r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
        out = PULL_REFUSED;
    }
    if (chain && out >= 0 && pull_send(h, rc, self, *ack, wait_ms, form) != 0) out = PULL_LOST;
    if (applied) {
        pthread_mutex_lock(&h->n->mu);
        h->st->holdings_pulls++;
        h->st->holdings_notes += k > 0 ? (uint64_t)k : 0;
        h->st->tasks_pulled += ntasks;
        pthread_mutex_unlock(&h->n->mu);
    }
    freeReplyObject(r);
    return out;
}

/* One pull on rc, reply taken (nothing left in flight on rc). */
static int pull_once(node_holdings *h, redisContext *rc, uint32_t self, uint64_t gen, uint64_t *ack, int wait_ms) {
    int form;
    if (pull_send(h, rc, self, *ack, wait_ms, &form) != 0) return PULL_LOST;
    return pull_take(h, rc, NULL, self, gen, ack, wait_ms, &form, 0);
}

/* ---- the link ---- */

/* CHALLENGE, HOLDLINK on rc: 0, -1 refused, -2 a master without HOLDLINK. */
static int link_up(node_holdings *h, redisContext *rc, uint32_t id, const char *instance) {
    proto_cmd cmd;
    proto_cmd_bare(&cmd, PROTO_VERB_CHALLENGE);
    redisReply *r = redisCommandArgv(rc, cmd.argc, cmd.argv, cmd.lens);
    proto_cmd_free(&cmd);
    const uint8_t *nonce = proto_dec_nonce(r);
    if (!nonce) {
        if (r) freeReplyObject(r);
        return -1;
    }
    uint8_t reg_key[PROTO_REG_KEY_LEN], proof[PROTO_PROOF_LEN];
    char proof_hex[2 * PROTO_PROOF_LEN + 1];
    proto_reg_key(h->n->srv->cfg.cluster_secret, reg_key);
    proto_reg_proof(reg_key, nonce, proof);
    freeReplyObject(r);
    hex_encode(proof, sizeof proof, proof_hex);
    proto_cmd_holdlink(&cmd, proof_hex, id, instance);
    r = redisCommandArgv(rc, cmd.argc, cmd.argv, cmd.lens);
    proto_cmd_free(&cmd);
    if (!r) return -1;
    int rc_ = r->type == REDIS_REPLY_STATUS ? 0 : -1;
    if (r->type == REDIS_REPLY_ERROR && strstr(r->str, "unknown command")) rc_ = -2;
    else if (rc_)
        log_info("node: %s refused: %s", PROTO_VERB_HOLDLINK, r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
    freeReplyObject(r);
    return rc_;
}

/* Sleep up to ms unless stopped or gen moves on (mu held). */
static void nap_locked(node_holdings *h, int ms, uint64_t gen) {
    struct timespec ts = cond_deadline_ms(ms);
    while (!h->stop && h->gen == gen)
        if (pthread_cond_timedwait(&h->cv, &h->mu, &ts) == ETIMEDOUT) break;
}

/* Pull for registration gen until the link breaks or gen is over. */
static void serve(node_holdings *h, uint64_t gen, uint32_t id, const char *addr, int64_t term,
                  const char *instance) {
    char err[256];
    redisContext *rc = NULL;
    /* no MOON.PROVE: MOON.HOLDLINK carries its own proof of the secret */
    int open = proto_master_open(&rc, addr, h->n->srv->cfg.master_auth, NULL, HL_CONNECT_MS,
                                 HOLDINGS_WAIT_MS + HL_IO_SLACK_MS, err, sizeof err);
    int up = open == PROTO_LINK_OK ? link_up(h, rc, id, instance) : -1;
    pthread_mutex_lock(&h->mu);
    if (up == -2) {
        log_notice("node: the master has no " PROTO_VERB_HOLDLINK ": pulling holdings every 100 ms on the control connection");
        __atomic_store_n(&h->old_master, 1, __ATOMIC_RELEASE);
    }
    if (up != 0 || gen != h->gen) {
        pthread_mutex_unlock(&h->mu);
        if (rc) redisFree(rc);
        return;
    }
    h->fd = rc->fd;
    pthread_mutex_unlock(&h->mu);
    lw_conn *watched = leader_watch_add(h->watch, rc->fd, addr, term);
    pthread_mutex_lock(&h->n->mu);
    h->st->holdings_linked = 1;
    pthread_mutex_unlock(&h->n->mu);
    uint64_t ack = 0;
    int form, st = pull_send(h, rc, id, ack, HOLDINGS_WAIT_MS, &form) == 0 ? PULL_DONE : PULL_LOST;
    while (st >= 0 && (st = pull_take(h, rc, watched, id, gen, &ack, HOLDINGS_WAIT_MS, &form, 1)) >= 0) {
        pthread_mutex_lock(&h->mu);
        int over = h->stop || gen != h->gen;
        pthread_mutex_unlock(&h->mu);
        if (over) break;
    }
    if (st == PULL_LOST) log_info("node: holdings link lost: %s", rc->errstr);
    pthread_mutex_lock(&h->n->mu);
    h->st->holdings_linked = 0;
    pthread_mutex_unlock(&h->n->mu);
    pthread_mutex_lock(&h->mu);
    h->fd = -1;   /* before the close: pause shuts down only ours */
    pthread_mutex_unlock(&h->mu);
    leader_watch_remove(watched);   /* so does the watch */
    redisFree(rc);
}

static void *holdings_main(void *arg) {
    node_holdings *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        if (!h->active || h->old_master) {
            pthread_cond_wait(&h->cv, &h->mu);
            continue;
        }
        uint64_t gen = h->gen;
        uint32_t id = h->id;
        char addr[CONFIG_STR_MAX + 16], instance[sizeof h->instance];
        snprintf(addr, sizeof addr, "%.*s:%d", (int)sizeof h->host - 1, h->host, h->port);
        memcpy(instance, h->instance, sizeof instance);
        int64_t term = h->term;
        pthread_mutex_unlock(&h->mu);
        serve(h, gen, id, addr, term, instance);
        pthread_mutex_lock(&h->mu);
        if (h->active && gen == h->gen) nap_locked(h, HL_RETRY_MS, gen);   /* then link again, from ack 0 */
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

node_holdings *node_holdings_start(node *n, struct node_control *ctl, int g, node_status *st, const char *cluster) {
    node_holdings *h = xcalloc(1, sizeof *h);
    h->n = n;
    h->ctl = ctl;
    h->g = g;
    h->st = st;
    h->fd = -1;
    char err[256];
    const mkv_config *cfg = &n->srv->cfg;
    if (cfg->etcd[0] && !(h->watch = leader_watch_open(cfg->etcd, cluster, err, sizeof err)))
        log_warning("node: the holdings link will not watch the leader: %s", err);
    h->note_ext = xcalloc(PROTO_MAX_EXTENTS, sizeof *h->note_ext);
    h->disk_key = xmalloc(NODE_DISK_KEY_MAX);
    h->ix_batch = node_index_batch_new();
    pthread_mutex_init(&h->mu, NULL);
    cond_init_mono(&h->cv);
    pthread_create(&h->th, NULL, holdings_main, h);
    return h;
}

void node_holdings_free(node_holdings *h) {
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    h->gen++;
    if (h->fd >= 0) shutdown(h->fd, SHUT_RDWR);
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->th, NULL);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    leader_watch_close(h->watch);
    free(h->note_ext);
    free(h->disk_key);
    node_index_batch_free(h->ix_batch);
    free(h);
}

void node_holdings_pause(node_holdings *h) {
    pthread_mutex_lock(&h->mu);   /* waits out a reply being applied */
    h->gen++;
    h->active = 0;
    if (h->fd >= 0) shutdown(h->fd, SHUT_RDWR);   /* a pull waiting on the master ends now */
    pthread_mutex_unlock(&h->mu);
}

void node_holdings_resume(node_holdings *h, uint32_t id, uint64_t reg_gen, const char *host, int port,
                          int64_t term, const char *instance_hex) {
    pthread_mutex_lock(&h->mu);
    h->gen++;
    h->active = 1;
    h->id = id;
    h->reg_gen = reg_gen;
    snprintf(h->host, sizeof h->host, "%s", host);
    h->port = port;
    h->term = term;
    snprintf(h->instance, sizeof h->instance, "%s", instance_hex);
    __atomic_store_n(&h->old_master, 0, __ATOMIC_RELEASE);   /* a new master: try to link */
    h->plain = 0;
    h->no_tasks = 0;
    h->fb_ack = 0;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* The control thread asks without h->mu unless the master is an old one:
 * a pull holds it while it applies up to HL_MAX_NOTES notes (seconds
 * under TSan on a loaded machine), and heartbeats that waited for it
 * got nodes declared dead. */
int node_holdings_fallback(node_holdings *h, redisContext *rc, uint32_t self) {
    if (!__atomic_load_n(&h->old_master, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&h->mu);
    int old = h->old_master && h->active;
    uint64_t gen = h->gen;
    pthread_mutex_unlock(&h->mu);
    if (!old) return 0;
    int st = PULL_MORE;
    for (int i = 0; i < HL_ROUNDS && st == PULL_MORE; i++) st = pull_once(h, rc, self, gen, &h->fb_ack, 0);
    return st == PULL_LOST ? -1 : 0;
}

uint64_t node_holdings_pulls(node_holdings *h) { return __atomic_load_n(&h->pulls, __ATOMIC_ACQUIRE); }
