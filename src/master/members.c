/* master/members.c - see master.h: the member records in etcd.
 *
 * The loop asks, a job queue of one thread (core/jobqueue.h) runs the
 * etcd calls one at a time in the order asked (a delete then a put of
 * the same id land in that order), and each result comes back through a
 * cross-thread wake. The loop alone knows which ids are recorded (rec[])
 * and which clients wait; the thread only sees jobs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jobqueue.h"
#include "core/log.h"
#include "core/util.h"
#include "etcd/etcd.h"
#include "master/master.h"
#include "server/info.h"
#include "server/networking.h"

#define MEMBERS_ETCD_TIMEOUT_MS 500   /* one call per endpoint: a join waits at most this */
#define MEMBERS_MAX_JOBS 256          /* queued at once; beyond, a join gets TRYAGAIN at once */

typedef enum { JOB_LOAD, JOB_PUT, JOB_DEL } job_kind;

typedef struct job {
    jq_job q;                     /* first: the queue's */
    master_members *ms;
    job_kind kind;
    uint32_t id;
    int64_t term;                 /* the leader key's create revision the write is guarded by */
    uint64_t seq;                 /* a waiting registration names its job by this */
    char addr[TE_ADDR_LEN];       /* the record's value: the node's first data address, */
    uint64_t instance;            /* then its process token (MOON.REGISTER INSTANCE) */
    /* The outcome, filled by the thread. */
    int rc;                       /* 0 done, -1 etcd failed (err), 1 not our term any more */
    char err[ETCD_ERR_LEN];
    uint32_t *ids;                /* JOB_LOAD: the recorded ids */
    uint64_t *insts;              /* and their nodes' process tokens (0: not recorded) */
    size_t nids, capids;
} job;

/* A registration waiting for its record (seq), or for the records to be
 * read (seq 0). */
typedef struct waiter {
    client *c;
    uint64_t seq;
    master_join j;
    struct waiter *next;
} waiter;

struct master_members {
    master *m;
    etcd_client *ec;              /* the queue's thread's */
    char prefix[ETCD_KEY_MAX];    /* /moonkv/<cluster>/nodes/ */
    char leader_key[ETCD_KEY_MAX];
    jobqueue *q;
    loop_wake *wake;
    /* The loop's. */
    int64_t term;                 /* 0: not leading */
    int loaded, loading;          /* this term's records read / being read */
    uint8_t *rec;                 /* rec[id]: REC_YES recorded in this term, REC_MAYBE unknown */
    uint64_t *inst;               /* inst[id]: the process token the record names */
    uint32_t caprec;
    waiter *waiters;
    uint64_t next_seq;
    uint64_t recorded, deleted, failed;   /* INFO */
};

/* ---- on the queue's thread ---- */

/* "addr instance": the token (16 hex digits) after the address, 0 if
 * there is none (a record of a leader from before them). */
static uint64_t record_instance(const char *val) {
    const char *sp = strrchr(val, ' ');
    uint8_t tok[8];
    uint64_t inst = 0;
    if (sp && hex_decode(sp + 1, strlen(sp + 1), tok, sizeof tok) == 0) memcpy(&inst, tok, sizeof inst);
    return inst;
}

static void note_id(const char *key, const char *val, void *ctx) {
    job *jb = ctx;
    const char *tail = strrchr(key, '/');
    char *end;
    unsigned long id = tail ? strtoul(tail + 1, &end, 10) : 0;
    if (id == 0 || id > PROTO_MAX_NODES || *end) return;   /* not ours: left alone */
    if (jb->nids == jb->capids) {
        jb->capids = jb->capids ? jb->capids * 2 : 16;
        jb->ids = xrealloc(jb->ids, jb->capids * sizeof *jb->ids);
        jb->insts = xrealloc(jb->insts, jb->capids * sizeof *jb->insts);
    }
    jb->insts[jb->nids] = record_instance(val);
    jb->ids[jb->nids++] = (uint32_t)id;
}

static void run_job(jq_job *q, void *thread_arg) {
    job *jb = (job *)q;
    master_members *ms = jb->ms;
    char key[ETCD_KEY_MAX];
    int ok = 1, len = snprintf(key, sizeof key, "%s%u", ms->prefix, jb->id);
    if (len < 0 || (size_t)len >= sizeof key) {   /* members_create left room: never */
        snprintf(jb->err, sizeof jb->err, "key too long");
        jb->rc = -1;
        return;
    }
    char val[TE_ADDR_LEN + 24], hex[17];
    hex_encode((const uint8_t *)&jb->instance, sizeof jb->instance, hex);
    snprintf(val, sizeof val, "%s %s", jb->addr, hex);
    if (jb->kind == JOB_LOAD)
        jb->rc = etcd_list(ms->ec, ms->prefix, note_id, jb, jb->err, sizeof jb->err);
    else if (jb->kind == JOB_PUT)
        jb->rc = etcd_put_guarded(ms->ec, key, val, ms->leader_key, jb->term, &ok, jb->err, sizeof jb->err);
    else
        jb->rc = etcd_delete_guarded(ms->ec, key, ms->leader_key, jb->term, &ok, jb->err,
                                     sizeof jb->err);
    if (jb->rc == 0 && !ok) jb->rc = 1;   /* the guard failed: not our term any more */
}

static void job_finished(void *arg) { loop_wake_send(arg); }

/* ---- the loop side ---- */

static void job_free(job *jb) {
    free(jb->ids);
    free(jb->insts);
    free(jb);
}

static void jobs_free(jq_job *list) {
    while (list) {
        jq_job *next = list->next;
        job_free((job *)list);
        list = next;
    }
}

/* Queue a job of this term: its seq, 0 if MEMBERS_MAX_JOBS wait already. */
static uint64_t enqueue(master_members *ms, job_kind kind, uint32_t id, const char *addr, uint64_t instance) {
    job *jb = xcalloc(1, sizeof *jb);
    jb->q.run = run_job;
    jb->ms = ms;
    jb->kind = kind;
    jb->id = id;
    jb->term = ms->term;
    jb->seq = ++ms->next_seq;
    if (addr) snprintf(jb->addr, sizeof jb->addr, "%s", addr);
    jb->instance = instance;
    if (jobqueue_submit(ms->q, &jb->q) == 0) return jb->seq;
    job_free(jb);
    return 0;
}

/* An etcd call that failed by its timeout may still be applied: etcd
 * stopped (SIGSTOP, a stall) runs the request it had already received
 * once it goes on, after we gave up (a put refused TRYAGAIN landed 3
 * times of 5 in a test). Such an id is REC_MAYBE: never taken for
 * recorded (a join puts it again), and deleted by the sweep unless its
 * node joined meanwhile. */
enum { REC_NO, REC_YES, REC_MAYBE };

static int recorded(const master_members *ms, uint32_t id) { return id < ms->caprec && ms->rec[id] == REC_YES; }

static void set_recorded(master_members *ms, uint32_t id, int on, uint64_t instance) {
    if (id >= ms->caprec) {
        if (!on) return;
        uint32_t cap = id * 2 + 16;
        ms->rec = xrealloc(ms->rec, cap);
        ms->inst = xrealloc(ms->inst, cap * sizeof *ms->inst);
        memset(ms->rec + ms->caprec, 0, cap - ms->caprec);
        memset(ms->inst + ms->caprec, 0, (cap - ms->caprec) * sizeof *ms->inst);
        ms->caprec = cap;
    }
    ms->rec[id] = (uint8_t)on;
    if (on) ms->inst[id] = instance;
}

enum { PARK_NO, PARK_WAITS, PARK_REFUSED };

static int park(master_members *ms, client *c, master_join *j) {
    uint32_t id;
    mm_reg_kind kind = mm_node_pick(ms->m->meta, &j->claim, &id);
    if (ms->term && recorded(ms, id)) return PARK_NO;
    uint64_t seq = 0;   /* the records are being read: it may be there */
    if (ms->term && (ms->loaded || !ms->loading)) seq = enqueue(ms, JOB_PUT, id, j->addrs[0], j->claim.instance);
    /* Its put decides (after any delete queued before it): the sweep
     * must not queue a delete behind it. */
    if (seq && id < ms->caprec && ms->rec[id] == REC_MAYBE) ms->rec[id] = REC_NO;
    if (!ms->term || (!seq && !ms->loading)) {
        ms->failed++;
        master_reply_fail(c, PROTO_TRYAGAIN, "cannot record the node in etcd now: register again");
        return PARK_REFUSED;
    }
    if (seq && kind == MM_REG_NEW) {   /* its id, kept for it while etcd records it */
        j->claim.assign = id;
        mm_node_id_taken(ms->m->meta, id);
    }
    waiter *w = xcalloc(1, sizeof *w);
    w->c = c;
    w->seq = seq;
    w->j = *j;
    w->next = ms->waiters;
    ms->waiters = w;
    client_block(c);
    return PARK_WAITS;
}

uint32_t members_recorded_as(master_members *ms, uint64_t instance) {
    if (!ms || !ms->term || !instance) return 0;
    for (uint32_t id = 1; id < ms->caprec; id++) {
        if (ms->rec[id] != REC_YES || ms->inst[id] != instance) continue;
        const mm_node *n = mm_node_view(ms->m->meta, id);
        return n && n->joined ? 0 : id;   /* joined: it had its reply after all, and claims by ID */
    }
    return 0;
}

int members_park(master_members *ms, client *c, master_join *j) {
    return ms ? park(ms, c, j) != PARK_NO : 0;
}

void members_forget(master_members *ms, client *c) {
    if (!ms) return;
    for (waiter **wp = &ms->waiters; *wp;) {
        waiter *w = *wp;
        if (w->c != c) {
            wp = &w->next;
            continue;
        }
        *wp = w->next;
        free(w);
    }
}

/* Take the waiters for seq off the list. */
static waiter *take_waiters(master_members *ms, uint64_t seq) {
    waiter *got = NULL;
    for (waiter **wp = &ms->waiters; *wp;) {
        waiter *w = *wp;
        if (w->seq != seq) {
            wp = &w->next;
            continue;
        }
        *wp = w->next;
        w->next = got;
        got = w;
    }
    return got;
}

/* The registrations of w go on as MOON.REGISTER does (held again if a
 * rebuild window opened meanwhile): registered if their id is recorded
 * now, parked again if it changed, refused (why) if etcd failed. */
static void resume(master_members *ms, waiter *w, const char *why) {
    while (w) {
        waiter *next = w->next;
        client *c = w->c;
        int st = PARK_REFUSED;
        if (why) master_reply_fail(c, PROTO_TRYAGAIN, "%s", why);
        else if (!master_rebuild_holds_join(c, w->j.claim.id) && (st = park(ms, c, &w->j)) == PARK_NO)
            master_register_join(c, &w->j);
        if (st != PARK_WAITS) client_unblock(c);
        free(w);
        w = next;
    }
}

static void loaded(master_members *ms, job *jb) {
    ms->loading = 0;
    if (jb->rc != 0) {
        ms->failed++;
        log_warning("master: cannot read the members recorded in etcd (the rejoin grace applies): %s",
                    jb->err);
    } else {
        ms->loaded = 1;
        for (size_t i = 0; i < jb->nids; i++) set_recorded(ms, jb->ids[i], REC_YES, jb->insts[i]);
        master_rebuild_members(ms->m, jb->ids, jb->nids);
    }
    resume(ms, take_waiters(ms, 0), NULL);   /* failed: they record themselves */
}

static void put_done(master_members *ms, job *jb) {
    char why[ETCD_ERR_LEN + 64];
    if (jb->rc == 0 && !master_may_lead(ms->m)) jb->rc = 1;   /* our lease ran out meanwhile */
    if (jb->rc == 0) {
        ms->recorded++;
        set_recorded(ms, jb->id, REC_YES, jb->instance);
    } else {
        ms->failed++;
        if (jb->rc < 0) set_recorded(ms, jb->id, REC_MAYBE, jb->instance);   /* the sweep deletes it */
        snprintf(why, sizeof why, "node %u not recorded in etcd (%s): register again", jb->id,
                 jb->rc > 0 ? "no longer the leader" : jb->err);
        log_warning("master: %s", why);
    }
    resume(ms, take_waiters(ms, jb->seq), jb->rc == 0 ? NULL : why);
}

static void del_done(master_members *ms, job *jb) {
    if (jb->rc == 0) {
        ms->deleted++;
        return;
    }
    ms->failed++;
    log_warning("master: the record of node %u stays in etcd: %s", jb->id,
                jb->rc > 0 ? "no longer the leader" : jb->err);
    /* Tried again at the next sweep, unless it registered again since. */
    const mm_node *n = mm_node_get(ms->m->meta, jb->id);
    if (jb->rc < 0 && (!n || n->state == NODE_DEAD)) set_recorded(ms, jb->id, REC_MAYBE, ms->inst[jb->id]);
}

/* Results of another term are dropped (their waiters were refused). */
static void wake_cb(event_loop *el, void *data) {
    master_members *ms = data;
    jq_job *list = jobqueue_take_finished(ms->q);
    while (list) {
        job *jb = (job *)list;
        list = list->next;
        if (jb->term == ms->term) {
            if (jb->kind == JOB_LOAD) loaded(ms, jb);
            else if (jb->kind == JOB_PUT) put_done(ms, jb);
            else del_done(ms, jb);
        }
        job_free(jb);
    }
}

void members_term(master_members *ms, int64_t term) {
    if (!ms || term == ms->term) return;
    /* Whoever waited for the last term's etcd: refused (the jobs' results are dropped). */
    waiter *all = ms->waiters;
    ms->waiters = NULL;
    resume(ms, all, "the leadership changed while the node was being recorded: register again");
    ms->term = term;
    ms->loaded = ms->loading = 0;
    if (ms->rec) memset(ms->rec, 0, ms->caprec);
    if (term) ms->loading = enqueue(ms, JOB_LOAD, 0, NULL, 0) != 0;
}

void members_tick(master_members *ms) {
    if (!ms || !ms->term) return;
    if (!ms->loaded && !ms->loading) ms->loading = enqueue(ms, JOB_LOAD, 0, NULL, 0) != 0;
    /* Nodes a window waits for stay recorded: if we die too, the next leader waits for them. */
    if (ms->m->rebuild.state == REBUILD_COLLECTING) return;
    for (uint32_t id = 1; id < ms->caprec; id++) {
        const mm_node *n = mm_node_view(ms->m->meta, id);
        if (!ms->rec[id] || (n && n->joined && n->state != NODE_DEAD)) continue;
        if (!enqueue(ms, JOB_DEL, id, NULL, 0)) return;   /* the queue is full: next sweep */
        ms->rec[id] = REC_NO;   /* dead, or never came back: gone for good */
    }
}

void members_info(const master_members *ms, resp_buf *out) {
    size_t n = 0;
    for (uint32_t id = 0; ms && id < ms->caprec; id++) n += ms->rec[id] == REC_YES;
    info_field(out, "members_recorded", "%zu", n);
    info_field(out, "members_records_written", "%llu", (unsigned long long)(ms ? ms->recorded : 0));
    info_field(out, "members_records_deleted", "%llu", (unsigned long long)(ms ? ms->deleted : 0));
    info_field(out, "members_etcd_failures", "%llu", (unsigned long long)(ms ? ms->failed : 0));
}

master_members *members_create(master *m, char *err, size_t errlen) {
    const mkv_config *cfg = &m->srv->cfg;
    master_members *ms = xcalloc(1, sizeof *ms);
    ms->m = m;
    ms->ec = etcd_create(cfg->etcd, MEMBERS_ETCD_TIMEOUT_MS, err, errlen);
    /* Room for the id after the prefix. */
    if (!ms->ec || etcd_cluster_key(cfg->cluster_name, "nodes/", ms->prefix, sizeof ms->prefix - 12) != 0 ||
        etcd_leader_key(cfg->cluster_name, ms->leader_key, sizeof ms->leader_key) != 0) {
        if (ms->ec) snprintf(err, errlen, "cluster name too long");
        etcd_free(ms->ec);
        free(ms);
        return NULL;
    }
    ms->wake = loop_wake_create(m->srv->loop, wake_cb, ms);
    jobqueue_config qc = {.nthreads = 1, .max_pending = MEMBERS_MAX_JOBS, .finished = job_finished,
                          .finished_arg = ms->wake};
    if (!(ms->q = jobqueue_start(&qc, err, errlen))) {
        members_free(ms);
        return NULL;
    }
    return ms;
}

void members_free(master_members *ms) {
    if (!ms) return;
    if (ms->q) {
        jobqueue_stop(ms->q);   /* the running call ends within its bound */
        jobs_free(jobqueue_cancel(ms->q));
        jobs_free(jobqueue_take_finished(ms->q));
        jobqueue_free(ms->q);
    }
    loop_wake_free(ms->wake);
    while (ms->waiters) {   /* their clients go with the server */
        waiter *w = ms->waiters;
        ms->waiters = w->next;
        free(w);
    }
    etcd_free(ms->ec);
    free(ms->rec);
    free(ms->inst);
    free(ms);
}
