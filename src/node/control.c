/* node/control.c - see control.h. */
#include "node/control.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cond.h"
#include "core/heap_huge.h"
#include "core/log.h"
#include "core/siphash.h"
#include "core/util.h"
#include "etcd/etcd.h"
#include "etcd/leader_watch.h"
#include "node/copier.h"
#include "node/disk_store.h"
#include "node/disk_tier.h"
#include "node/holdings_link.h"
#include "node/persist.h"
#include "node/scrub.h"
#include "node/shares.h"
#include "proto/limits.h"
#include "proto/cmd.h"
#include "link/master_link.h"
#include "proto/register.h"
#include "proto/replies.h"
#include "proto/report.h"
#include "proto/status.h"

#define CTL_CONNECT_MS      2000
/* One master round trip. A timeout costs the connection and so our
 * registration: be patient with a master that stalls (a huge request,
 * a sanitizer build) rather than quick to re-register. */
#define CTL_IO_TIMEOUT_MS   5000
#define CTL_RETRY_MIN_MS    100    /* between attempts to join, doubling */
/* Capped low: after a master restart every node should claim its id
 * back within the master's rejoin grace (new nodes wait for it). */
#define CTL_RETRY_MAX_MS    PROTO_REJOIN_MS
#define CTL_ETCD_RETRY_MS   100    /* with etcd: a new leader is expected within a lease */
#define CTL_ETCD_TIMEOUT_MS 1000
#define CTL_REFRESH_MS      1000   /* MOON.NODES for INFO and the members we know */
/* Members join together (a master's rejoin grace holds new nodes, then
 * lets them in at once): a view younger than this is refreshed every
 * CTL_REFRESH_YOUNG_MS, so if the master dies now, our MOON.REPORTDONE
 * names them all and its successor waits for their reports. */
#define CTL_REFRESH_YOUNG_MS 100
#define CTL_YOUNG_MS        2000
#define CTL_LEAVING_BEAT_MS 100    /* heartbeat while drained: hear "drained" soon */
#define CTL_LENT_ROUNDS     16     /* MOON.LENT calls per heartbeat (PROTO_LENT_MAX ranges each) */
/* What the scrub found told (and holdings pulls from a master without
 * MOON.HOLDLINK: holdings_link.h). */
#define CTL_TICK_MS         100
/* Packed MOON.REPORT batches: extents (>= PROTO_MAX_EXTENTS, so any
 * entry fits), their key bytes, and how many go before a reply is read. */
#define CTL_REPORT_BATCH    16384
#define CTL_REPORT_KEYBYTES (4 << 20)
#define CTL_REPORT_WINDOW   4
#define CTL_REPORT_HEAD     PROTO_REPORT_HEAD_MAX   /* room for the RESP header of one */
#define CTL_REPORT_AHEAD    8    /* extents whose key is fetched ahead while packing */
_Static_assert(CTL_REPORT_BATCH >= PROTO_MAX_EXTENTS, "an entry must fit a batch");
_Static_assert((uint64_t)CTL_REPORT_BATCH * PROTO_REPORT_HDR + (uint64_t)PROTO_MAX_EXTENTS * PROTO_MAX_KEY_LEN +
                   CTL_REPORT_KEYBYTES <= PROTO_REPORT_MAX_BLOB, "a batch must fit the master's bound");
/* The master answers MOON.REPORTDONE at once and builds after it, but
 * the last REPORTDONE closes the window and its reply then waits for the
 * grouping of every report on the master's loop (seconds with 10^6
 * objects on a starved CPU): wait that long for it. */
#define CTL_REPORTDONE_TIMEOUT_MS 120000
#define CTL_MAX_PEERS       1024

typedef struct task_result {
    uint64_t gen, id;
    int ok;
} task_result;

struct node_control {
    node *n;
    int g;                      /* the group we speak for (node->groups[g]) */
    node_status *st;            /* its status (under n->mu) */
    const char *cluster;        /* its etcd prefix */
    int chunks_refused;         /* a master without MOON.CHUNKS (logged once) */
    int lent_refused;           /* MOON.LENT refused (said once) */
    int plain_chunks;           /* a master from before MOON.CHUNKS ... FREE */
    int chunks_now;             /* its master asked for a MOON.CHUNKS now (a put found no room; under n->mu) */
    pthread_t th;
    pthread_cond_t wake;        /* with n->mu */
    int stop, leave_wanted, leave_sent;
    int joined;                 /* the thread is gone */
    /* Task outcomes waiting for MOON.COPYDONE, and the ones being sent.
     * Each task taken gives one, and the copier's queue bounds the tasks
     * taken and not yet reported: so does it these. */
    task_result *results, *sending;
    int nresults, capresults, capsending;
    int single_copydone;        /* a master from before batched MOON.COPYDONE */
    /* Control thread only. */
    redisContext *rc;
    uint64_t gen;               /* registrations so far (= status.registrations): tags tasks */
    uint8_t cap_key[TE_CAP_KEY_LEN];   /* of the current registration */
    uint64_t term;              /* its master's term; the newest we have seen */
    int heartbeat_ms;
    uint64_t next_refresh_ms, registered_ms;
    char host[CONFIG_STR_MAX];
    int port;
    etcd_client *etcd;          /* --etcd: the master is whoever leads */
    int64_t leader_term;        /* the term etcd named with host:port */
    leader_watch *watch;        /* --etcd: breaks our connection to a leader that was replaced */
    lw_conn *watched;
    /* Identity across registrations: the id we had (claimed back), this
     * process's token, and the members we last saw (for MOON.REPORTDONE). */
    uint32_t claim_id;
    char instance_hex[17];
    uint32_t seen_max;
    uint32_t peers[CTL_MAX_PEERS];
    int npeers;
    uint64_t next_tick_ms;
    /* A master from before slice CRCs: it refused a report carrying them. */
    int plain_reports;
    node_holdings *hl;          /* the index's notes, on a thread of their own */
    int plain_register;         /* a master from before KEPT (restarted nodes keeping their segment) */
    node_scrub *scrub;
};

/* ---- helpers ---- */

static void set_phase(node_control *c, node_phase p) {
    pthread_mutex_lock(&c->n->mu);
    c->st->phase = p;
    pthread_mutex_unlock(&c->n->mu);
}

/* Out of the cluster; drained: the master moved our objects away, so
 * the segment file has nothing anyone wants (node_role removes it). */
static void set_left(node_control *c, int drained) {
    pthread_mutex_lock(&c->n->mu);
    c->st->phase = NODE_GONE;
    c->st->left |= drained;
    pthread_mutex_unlock(&c->n->mu);
}

static void disconnect(node_control *c) {
    char now[CONFIG_STR_MAX];
    if (leader_watch_fired(c->watched, now, sizeof now))
        log_notice("node: etcd names another leader (%s): left the master %s:%d", now, c->host, c->port);
    leader_watch_remove(c->watched);   /* before the fd goes */
    c->watched = NULL;
    if (c->rc) redisFree(c->rc);
    c->rc = NULL;
    node_holdings_pause(c->hl);   /* its link follows ours */
}

/* --etcd: host:port of the current leader. */
static int leader_lookup(node_control *c) {
    char addr[CONFIG_STR_MAX], err[ETCD_ERR_LEN];
    int found = 0;
    int64_t term = 0;
    if (etcd_leader_lookup(c->etcd, c->cluster, &found, addr, sizeof addr, &term, err,
                           sizeof err) != 0) {
        log_info("node: %s", err);
        return -1;
    }
    if (!found || parse_hostport(addr, c->host, sizeof c->host, &c->port) != 0) {
        log_info("node: no usable leader in etcd yet");
        return -1;
    }
    c->leader_term = term;
    return 0;
}

/* Every (re)connection AUTHs when master_auth is set and proves the
 * cluster secret. A refused password or proof is a warning: the node
 * cannot join until its configuration changes. */
static int master_connect(node_control *c) {
    const mkv_config *cfg = &c->n->srv->cfg;
    char addr[CONFIG_STR_MAX], err[512];
    if (c->etcd && leader_lookup(c) != 0) return -1;
    snprintf(addr, sizeof addr, "%.200s:%d", c->host, c->port);
    pthread_mutex_lock(&c->n->mu);
    snprintf(c->st->master, sizeof c->st->master, "%s", addr);
    pthread_mutex_unlock(&c->n->mu);
    int rc = proto_master_open(&c->rc, addr, cfg->master_auth, cfg->cluster_secret, CTL_CONNECT_MS,
                               CTL_IO_TIMEOUT_MS, err, sizeof err);
    if (rc == PROTO_LINK_EAUTH) log_warning("node: %s", err);
    else if (rc != PROTO_LINK_OK) log_info("node: %s", err);
    if (rc == PROTO_LINK_OK) c->watched = leader_watch_add(c->watch, c->rc->fd, addr, c->leader_term);
    return rc == PROTO_LINK_OK ? 0 : -1;
}

/* A reply, or NULL after dropping a broken connection. */
static redisReply *master_cmd_argv(node_control *c, int argc, const char **argv, const size_t *lens) {
    leader_watch_busy(c->watched, 1);
    redisReply *r = redisCommandArgv(c->rc, argc, argv, lens);
    leader_watch_busy(c->watched, 0);
    if (!r) {
        log_warning("node: master connection lost: %s", c->rc->errstr);
        disconnect(c);
    }
    return r;
}

/* The same for cmd (proto/cmd.h), which it frees. */
static redisReply *master_send(node_control *c, proto_cmd *cmd) {
    redisReply *r = master_cmd_argv(c, cmd->argc, cmd->argv, cmd->lens);
    proto_cmd_free(cmd);
    return r;
}

/* ---- the index: holdings in, reports out ---- */

static uint32_t my_id(node_control *c);
static void node_dead(node_control *c, const char *msg);
static int is_nodedead(const redisReply *r);

/* A reply that is not an error, or -1 after dropping the connection. */
static int send_checked(node_control *c, int argc, const char **argv, const size_t *lens) {
    redisReply *r = master_cmd_argv(c, argc, argv, lens);
    if (!r) return -1;
    int bad = r->type == REDIS_REPLY_ERROR;
    if (bad) log_warning("node: %s refused: %s", argv[0], r->str);
    freeReplyObject(r);
    if (bad) disconnect(c);
    return bad ? -1 : 0;
}

/* Replicas the scrub (its own thread, node/scrub.h) found rotten go to
 * the master (MOON.BADREPLICA), which has them copied again. */
static void scrub_tell(node_control *c) {
    node_index_mark bad[SCRUB_MAX_MARKS];
    size_t n = c->rc ? node_scrub_take(c->scrub, bad, SCRUB_MAX_MARKS) : 0;
    if (n == 0) return;
    proto_cmd cmd;
    proto_cmd_badreplica_begin(&cmd, my_id(c), n);
    for (size_t i = 0; i < n; i++) proto_cmd_badreplica_add(&cmd, bad[i].key, bad[i].keylen, bad[i].seg_off);
    log_warning("node: the scrub found %zu object(s) whose bytes no longer match their CRC32C", n);
    send_checked(c, cmd.argc, cmd.argv, cmd.lens);
    proto_cmd_free(&cmd);
    for (size_t i = 0; i < n; i++) node_index_mark_free(&bad[i]);
}

static uint64_t pulls_of(void *hl) { return node_holdings_pulls(hl); }

/* Records of the disk tier that a read found rotten (and the store
 * dropped): the master drops those replicas (MOON.BADREPLICA ... DISK)
 * and repairs from another, or counts the object lost: a miss, never
 * the bytes. A node of several groups tells each group its own records'
 * (their keys name the group: disk_tier.h). */
static void rotten_tell(node_control *c) {
    disk_key k[64];
    size_t n = c->rc && c->n->disk ? node_disk_take_rotten(c->n->disk, c->n->groups[c->g].name, k, 64) : 0;
    if (n == 0) return;
    proto_cmd cmd;
    proto_cmd_badreplica_begin(&cmd, my_id(c), n);
    for (size_t i = 0; i < n; i++) proto_cmd_badreplica_add_disk(&cmd, k[i].key, k[i].keylen);
    log_warning("node: %zu disk record(s) failed their CRC32C on a read: dropped, the master told", n);
    send_checked(c, cmd.argc, cmd.argv, cmd.lens);
    proto_cmd_free(&cmd);
    for (size_t i = 0; i < n; i++) free(k[i].key);
}

/* MOON.REPORTDONE naming the other members we last saw. */
static int report_done(node_control *c, uint32_t self) {
    proto_cmd cmd;
    proto_cmd_reportdone_begin(&cmd, (size_t)c->npeers);
    for (int i = 0; i < c->npeers; i++)
        if (c->peers[i] != self) proto_cmd_u64(&cmd, c->peers[i]);
    struct timeval slow = {CTL_REPORTDONE_TIMEOUT_MS / 1000, 0};
    struct timeval usual = {CTL_IO_TIMEOUT_MS / 1000, (CTL_IO_TIMEOUT_MS % 1000) * 1000};
    redisSetTimeout(c->rc, slow);
    int rc = send_checked(c, cmd.argc, cmd.argv, cmd.lens);
    proto_cmd_free(&cmd);
    if (c->rc) redisSetTimeout(c->rc, usual);
    return rc;
}

/* The reply to a MOON.REPORT sent earlier: 0, or -1 after dropping the
 * connection. */
static int report_reply(node_control *c) {
    redisReply *r = NULL;
    leader_watch_busy(c->watched, 1);
    int got = redisGetReply(c->rc, (void **)&r) == REDIS_OK && r;
    leader_watch_busy(c->watched, 0);
    if (!got) {
        log_warning("node: master connection lost: %s", c->rc->errstr);
        disconnect(c);
        return -1;
    }
    int bad = r->type == REDIS_REPLY_ERROR;
    if (bad) log_warning("node: %s refused: %s", PROTO_VERB_REPORT, r->str);
    if (bad && !c->plain_reports && strstr(r->str, "malformed packed report")) {
        log_notice("node: reporting again without slice CRCs (a master from before them?)");
        c->plain_reports = 1;
    }
    freeReplyObject(r);
    if (bad) disconnect(c);
    return bad ? -1 : 0;
}

/* All of [p, p+len) to the master's socket; 0, or -1 after dropping the
 * connection (the socket keeps hiredis's timeout). */
static int write_all(node_control *c, const uint8_t *p, size_t len) {
    leader_watch_busy(c->watched, 1);
    while (len > 0) {
        ssize_t w = write(c->rc->fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            log_warning("node: master connection lost: %s", w < 0 ? strerror(errno) : "write returned 0");
            disconnect(c);
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    leader_watch_busy(c->watched, 0);
    return 0;
}

/* MOON.REPORT PACKED with batch, framed in place behind a RESP header
 * (*buf keeps CTL_REPORT_HEAD bytes for it) and written at once: the
 * master works on it while we prove and pack the next one. Nothing else
 * is queued on the hiredis context, so the replies stay in order. */
static int report_send(node_control *c, node_index_extent *batch, size_t n, uint8_t **buf,
                       size_t *cap) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (c->plain_reports) batch[i].slices.count = 0;
        len += proto_report_len(&batch[i]);
    }
    if (CTL_REPORT_HEAD + len + 2 > *cap) *buf = xrealloc(*buf, *cap = CTL_REPORT_HEAD + len + 2);
    uint8_t *blob = *buf + CTL_REPORT_HEAD;
    len = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + CTL_REPORT_AHEAD < n) __builtin_prefetch(batch[i + CTL_REPORT_AHEAD].key);   /* the walk's were evicted */
        len += proto_report_put(blob + len, &batch[i]);
    }
    memcpy(blob + len, "\r\n", 2);
    char head[CTL_REPORT_HEAD];
    size_t hl = proto_report_head(head, sizeof head, len);
    memcpy(blob - hl, head, hl);
    return write_all(c, blob - hl, hl + len + 2);
}

/* The disk tier's records (node_disk_reports), a batch's worth at a
 * time, in batches as the index's; 0, or -1 after dropping the
 * connection. */
static int report_disk(node_control *c, uint8_t **buf, size_t *cap, int *inflight, uint64_t *total) {
    uint64_t cursor = 0;
    int rc = 0;
    do {
        proto_report_rec *r;
        char *keys;
        size_t n = node_disk_reports(c->n->disk, c->n->groups[c->g].name, &cursor, CTL_REPORT_BATCH, &r, &keys);
        for (size_t at = 0, k; at < n && rc == 0; at += k) {
            size_t bytes = 0;
            for (k = 0; at + k < n && k < CTL_REPORT_BATCH && bytes < CTL_REPORT_KEYBYTES; k++)
                bytes += r[at + k].keylen;
            rc = report_send(c, r + at, k, buf, cap);
            *total += k;
            if (rc == 0 && ++*inflight == CTL_REPORT_WINDOW) rc = report_reply(c), (*inflight)--;
        }
        free(r);
        free(keys);
    } while (cursor && rc == 0);
    return rc;
}

/* A shared node reports to a group only what lies in its chunks. */
static size_t only_ours(node_control *c, node_index_extent *batch, size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (node_shares_mine(c->n, c->g, batch[i].seg_off)) batch[w++] = batch[i];
    return w;
}

/* Everything the index holds and the disk tier's records, in packed
 * MOON.REPORT batches with up to CTL_REPORT_WINDOW unanswered, then
 * REPORTDONE. */
static int report_index(node_control *c) {
    node_index_extent *batch = xmalloc(CTL_REPORT_BATCH * sizeof *batch);
    uint8_t *buf = NULL;
    size_t cap = 0;
    uint64_t cursor = 0, total = 0, on_disk = 0;
    int rc = 0, inflight = 0;
    do {
        size_t n = node_index_report(c->n->index, &cursor, batch, CTL_REPORT_BATCH, CTL_REPORT_KEYBYTES);
        n = only_ours(c, batch, n);
        if (n == 0) continue;
        rc = report_send(c, batch, n, &buf, &cap);
        total += n;
        if (rc == 0 && ++inflight == CTL_REPORT_WINDOW) rc = report_reply(c), inflight--;
    } while (cursor && rc == 0);
    if (rc == 0) rc = report_disk(c, &buf, &cap, &inflight, &on_disk);
    while (rc == 0 && inflight-- > 0) rc = report_reply(c);
    free(buf);
    free(batch);
    if (rc == 0) rc = report_done(c, my_id(c));
    if (rc == 0)
        log_notice("node: reported %llu extents and %llu of disk records (a share piece by piece) to the master",
                   (unsigned long long)total, (unsigned long long)on_disk);
    return rc;
}

/* ---- registration ---- */

static uint64_t disk_records(node *n) {
    disk_store_stats st = {0};
    if (n->disk) disk_store_get_stats(n->disk, &st);
    return st.objects;
}

static void forget_disk(node *n, int g) {
    size_t gone = n->disk ? node_disk_forget(n->disk, n->groups[g].name) : 0;
    if (gone) log_notice("node: %zu disk records the master does not know removed", gone);
}

/* CHALLENGE, REGISTER; on success (0) the data plane serves as the new
 * id. 1: the master asks us to try again shortly, -1: it failed. */
static int do_register(node_control *c) {
    node *n = c->n;
    c->single_copydone = 0;   /* a new leader may take batches again */
    node_holdings_pause(c->hl);   /* no note of the last registration lands after this */
    /* Write grants the master made before we asked are not ours to honour. */
    uint64_t asked_ms = wall_ms();
    proto_cmd cmd;
    proto_cmd_bare(&cmd, PROTO_VERB_CHALLENGE);
    redisReply *r = master_send(c, &cmd);
    if (!r) return -1;
    const uint8_t *nonce = proto_dec_nonce(r);
    if (!nonce) {
        if (r->type == REDIS_REPLY_ERROR)
            log_warning("node: the master refused %s: %s%s", PROTO_VERB_CHALLENGE, r->str,
                        proto_master_hint(r->str));
        else
            log_warning("node: bad %s reply from the master", PROTO_VERB_CHALLENGE);
        freeReplyObject(r);
        disconnect(c);
        return -1;
    }
    uint8_t reg_key[PROTO_REG_KEY_LEN], proof[PROTO_PROOF_LEN];
    char proof_hex[2 * PROTO_PROOF_LEN + 1];
    proto_reg_key(n->srv->cfg.cluster_secret, reg_key);
    proto_reg_proof(reg_key, nonce, proof);
    freeReplyObject(r);
    hex_encode(proof, sizeof proof, proof_hex);

    char addrs[TE_MAX_PATHS][TE_ADDR_LEN];
    const char *addrp[TE_MAX_PATHS];
    int naddrs = node_data_addrs(n->data, addrs, TE_MAX_PATHS);
    for (int i = 0; i < naddrs; i++) addrp[i] = addrs[i];
    /* Who we were: our id (claimed back), this process, the highest id
     * seen. --node-id: this new process takes its id over; later, the id
     * is ours. Back with the segment and index of the last process, the
     * master may keep the replicas we prove (report 3); so with records
     * on our disk tier under the id we claim (the segment's are then
     * dropped if its index was not kept). */
    int kept = !c->gen && !c->plain_register &&
               (node_persist_restored(n->persist) || (c->claim_id && disk_records(n)));
    /* Shared by groups: our one id, and the chunks the group has (one
     * to start with); its master places in nothing else. */
    char chunks[PROTO_CHUNKS_TEXT];
    if (n->shares && node_shares_count(n, c->g) == 0) node_shares_grant(n, c->g, 1);
    if (n->shares) node_shares_text(n, c->g, chunks, sizeof chunks);
    proto_register_args ra = {.proof_hex = proof_hex, .segment_size = n->seg.size, .addrs = addrp,
                              .naddrs = naddrs, .claim_id = c->claim_id, .claim_again = c->gen != 0 || n->shares,
                              .kept = kept, .instance_hex = c->instance_hex, .seen_max = c->seen_max,
                              .chunks = n->shares ? chunks : NULL};
    proto_cmd_register(&cmd, &ra);
    r = master_send(c, &cmd);
    if (!r) return -1;
    proto_registered reg;
    int ok = proto_dec_registered(r, &reg) == 0;
    if (!ok && kept && r->type == REDIS_REPLY_ERROR && strstr(r->str, "syntax error")) {
        log_notice("node: the master does not take KEPT: our segment's objects will be copied again");
        c->plain_register = 1;
    }
    if (!ok) {
        /* TRYAGAIN: a restarted master lets the cluster's old nodes claim
         * their ids before it names new ones. */
        int held = r->type == REDIS_REPLY_ERROR &&
                   proto_status_of_reply(r->str, r->len) == PROTO_TRYAGAIN;
        if (held) log_info("node: not registered yet: %s", r->str);
        else log_warning("node: registration refused: %s",
                         r->type == REDIS_REPLY_ERROR ? r->str : "malformed reply");
        freeReplyObject(r);
        disconnect(c);
        return held ? 1 : -1;
    }
    uint32_t id = reg.id;
    uint64_t term = reg.term;
    c->heartbeat_ms = reg.heartbeat_ms;
    int report = reg.reconcile;
    uint8_t *key = reg.cap_key;
    freeReplyObject(r);
    /* With etcd terms only grow: a master of an older one was deposed
     * (and is not to be served), whatever it still believes. */
    if (c->etcd && term < c->term) {
        log_warning("node: the master %s:%d is of term %llu, older than %llu: not serving it",
                    c->host, c->port, (unsigned long long)term, (unsigned long long)c->term);
        disconnect(c);
        return -1;
    }

    char err[256];
    if (n->shares && id != n->shared_id) {
        log_warning("node: the master %s:%d named us node %u, not %u", c->host, c->port, id, n->shared_id);
        disconnect(c);
        return -1;
    }
    if (n->shares) te_shares_set_group(n->shares, c->g, key, term);
    if (n->shares) te_shares_events_resync(n->shares, c->g);   /* a new leader learns every range lent away */
    else if (node_data_set_identity(n->data, id, key, term, asked_ms, err, sizeof err) != 0) {
        log_warning("node: data plane cannot serve as node %u: %s", id, err);
        disconnect(c);   /* the id dies by timeout; try again later */
        return -1;
    }
    c->leave_sent = 0;
    c->next_refresh_ms = 0;
    c->registered_ms = mono_ms();
    c->claim_id = id;
    c->next_tick_ms = 0;
    pthread_mutex_lock(&n->mu);   /* the tasks' tag: the holdings link takes tasks too */
    c->gen++;
    memcpy(c->cap_key, key, sizeof c->cap_key);
    c->term = term;
    c->st->id = id;
    c->st->registrations++;
    c->st->master_term = term;
    c->st->phase = NODE_MEMBER;
    pthread_mutex_unlock(&n->mu);
    log_notice("node: registered as node %u with the master %s:%d%s%s (heartbeat %d ms)", id, c->host,
               c->port, n->groups[c->g].name[0] ? " of group " : "", n->groups[c->g].name, c->heartbeat_ms);
    /* 1: a master that lost its table wants our index; 2: one that
     * dropped what we held (we were declared dead) wants it forgotten. */
    if (!n->shares) node_persist_set_node_id(n->persist, id);   /* a shared node's is written once (shares.c) */
    /* A restored index the master does not take (0: we are new to it) is
     * nothing it knows of: gone, or a later rebuild would bring it back. */
    if (report == 2 || (kept && report == 0)) node_shares_forget_index(n, c->g);
    /* Our disk records are the master's only if it takes our report. */
    if (report == 2 || (c->gen == 1 && report == 0)) forget_disk(n, c->g);
    if ((report == 1 || report == PROTO_REG_RECONCILE) && report_index(c) != 0) return -1;
    /* the master resends what we did not acknowledge: from ack 0 */
    node_holdings_resume(c->hl, id, c->gen, c->host, c->port, c->leader_term, c->instance_hex);
    return 0;
}

/* ---- chunks of a shared node ---- */

/* MOON.CHUNKS: tell the master the chunks its group has and how many no
 * group holds; take back what it gives back, give what it wants, and tell
 * it again at once. */
static void chunks_exchange(node_control *c) {
    node *n = c->n;
    for (int round = 0; n->shares && c->rc && round < 4; round++) {
        char text[PROTO_CHUNKS_TEXT];
        node_shares_text(n, c->g, text, sizeof text);
        proto_cmd cmd;
        proto_cmd_chunks(&cmd, my_id(c), text, c->plain_chunks ? -1 : (long)node_shares_count(n, -1));
        redisReply *r = master_send(c, &cmd);
        if (!r) return;
        if (r->type == REDIS_REPLY_ERROR && !c->plain_chunks &&
            (strstr(r->str, "wrong number of arguments") || strstr(r->str, "syntax error"))) {
            log_notice("node: the master takes %s without FREE", PROTO_VERB_CHUNKS);
            c->plain_chunks = 1;
            freeReplyObject(r);
            round--;
            continue;
        }
        long long want = 0;
        uint32_t back = 0, got = 0;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
            r->element[1]->type == REDIS_REPLY_STRING) {
            want = r->element[0]->integer;
            back = node_shares_take_back(n, c->g, r->element[1]->str, r->element[1]->len);
        } else if (is_nodedead(r)) {
            log_info("node: %s: %s", PROTO_VERB_CHUNKS, r->str);   /* the heartbeat hears it too */
        } else if (!c->chunks_refused++) {
            log_warning("node: %s refused: %s", PROTO_VERB_CHUNKS, r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
        }
        freeReplyObject(r);
        if (want > 0) got = node_shares_grant(n, c->g, want > PROTO_MAX_CHUNKS ? PROTO_MAX_CHUNKS : (uint32_t)want);
        if (back || got)
            log_info("node: group %s: %u chunk(s) given back, %u more given (%u now)", n->groups[c->g].name, back,
                     got, node_shares_count(n, c->g));
        if (!got) return;
    }
}

/* MOON.LENT: tell the master which ranges of its group's chunks we lent
 * to another group (a moved slot's objects adopted there) or got back, so
 * it places nothing over the ones lent and has the ones back as room. */
static void lent_exchange(node_control *c) {
    node *n = c->n;
    for (int round = 0; n->shares && c->rc && round < CTL_LENT_ROUNDS; round++) {
        te_lent_event ev[PROTO_LENT_MAX];
        uint64_t gen;
        size_t k = te_shares_events(n->shares, c->g, ev, PROTO_LENT_MAX, &gen);
        if (!k) return;
        proto_cmd cmd;
        proto_cmd_lent_begin(&cmd, my_id(c), k);
        for (size_t i = 0; i < k; i++) proto_cmd_lent_add(&cmd, ev[i].back, ev[i].off, ev[i].len);
        redisReply *r = master_send(c, &cmd);
        if (!r) return;
        int ok = r->type == REDIS_REPLY_STATUS;
        if (!ok && !is_nodedead(r) && !c->lent_refused++)   /* TRYAGAIN while it rebuilds: next heartbeat */
            log_info("node: %s: %s", PROTO_VERB_LENT, r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
        freeReplyObject(r);
        if (!ok) return;
        te_shares_events_done(n->shares, c->g, gen, k);
    }
}

/* ---- tasks ---- */

static void queue_result(node_control *c, uint64_t gen, uint64_t id, int ok) {
    if (c->nresults == c->capresults) {
        c->capresults = c->capresults ? c->capresults * 2 : 1024;
        c->results = xrealloc(c->results, (size_t)c->capresults * sizeof *c->results);
    }
    c->results[c->nresults++] = (task_result){gen, id, ok};
}

void node_control_take_tasks(node_control *c, const redisReply *r, uint64_t gen) {
    node *n = c->n;
    node_task tag;   /* what the registration gives every task */
    pthread_mutex_lock(&n->mu);
    int cur = gen == c->gen;
    tag.node_id = c->st->id;
    memcpy(tag.cap_key, c->cap_key, sizeof tag.cap_key);
    tag.cap_term = c->term;
    if (cur) c->st->tasks_received += r->elements;
    pthread_mutex_unlock(&n->mu);
    if (!cur) return;   /* registered again meanwhile: the master fails them by deadline */
    uint64_t refused[PROTO_MAX_TASKS];
    size_t nrefused;
    node_task *head = node_tasks_parse(r, refused, &nrefused);
    if (nrefused) log_warning("node: %zu malformed or excess copy task(s) from the master", nrefused);
    pthread_mutex_lock(&n->mu);
    for (size_t i = 0; i < nrefused; i++) queue_result(c, gen, refused[i], 0);
    if (nrefused) pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&n->mu);
    for (node_task *t = head; t; t = t->next) {
        t->ctl = c;
        t->gen = gen;
        t->node_id = tag.node_id;
        memcpy(t->cap_key, tag.cap_key, sizeof t->cap_key);
        t->cap_term = tag.cap_term;
    }
    if (head) node_copier_submit(n->copier, head);
}

/* MOON.COPYDONE for res (of the current registration), many per command
 * (one per command to a master from before that). */
static void send_copydone(node_control *c, const task_result *res, int n) {
    int per = c->single_copydone ? 1 : PROTO_MAX_COPYDONE;
    for (int at = 0; at < n && c->rc;) {
        int k = 0, start = at;
        proto_cmd cmd;
        proto_cmd_copydone_begin(&cmd, (size_t)per);
        for (; at < n && k < per; at++) {
            if (res[at].gen != c->gen) continue;   /* for an id that is gone */
            proto_cmd_copydone_add(&cmd, res[at].id, res[at].ok);
            k++;
        }
        if (k == 0) {
            proto_cmd_free(&cmd);
            break;
        }
        redisReply *r = master_send(c, &cmd);
        if (!r) break;
        if (r->type == REDIS_REPLY_ERROR && k > 1 && strstr(r->str, "wrong number of arguments")) {
            log_notice("node: the master takes one %s outcome at a time", PROTO_VERB_COPYDONE);
            c->single_copydone = 1;
            at = start;   /* again, one by one */
            per = 1;
        } else if (r->type == REDIS_REPLY_ERROR) {
            log_info("node: %s: %s", PROTO_VERB_COPYDONE, r->str);
        } else if (r->type == REDIS_REPLY_ARRAY) {
            for (size_t i = 0; i < r->elements; i++)
                if (r->element[i]->type == REDIS_REPLY_ERROR)
                    log_info("node: %s: %s", PROTO_VERB_COPYDONE, r->element[i]->str);
        }
        freeReplyObject(r);
    }
}

/* COPYDONE for every finished task of the current registration; 1 if
 * there were any (the master may have more for us now). */
static int report_results(node_control *c) {
    pthread_mutex_lock(&c->n->mu);
    int nres = c->nresults;
    task_result *res = c->results;
    int cap = c->capresults;
    c->results = c->sending, c->capresults = c->capsending;
    c->sending = res, c->capsending = cap;
    c->nresults = 0;
    pthread_mutex_unlock(&c->n->mu);
    send_copydone(c, res, nres);
    return nres > 0;
}

/* ---- heartbeat, leave, refresh ---- */

static int flag(node_control *c, const int *f) {
    pthread_mutex_lock(&c->n->mu);
    int v = *f;
    pthread_mutex_unlock(&c->n->mu);
    return v;
}

/* *f's value, cleared. */
static int take_flag(node_control *c, int *f) {
    pthread_mutex_lock(&c->n->mu);
    int v = *f;
    *f = 0;
    pthread_mutex_unlock(&c->n->mu);
    return v;
}

/* A NODEDEAD answer: drained means we are done, anything else re-registers. */
static void node_dead(node_control *c, const char *msg) {
    int drained = strstr(msg, "(drained") != NULL;
    log_notice("node: master says: %s", msg);
    if (drained || flag(c, &c->leave_wanted)) {
        set_left(c, drained);
        return;
    }
    set_phase(c, NODE_JOINING);
    if (do_register(c) != 0) disconnect(c);
}

static int is_nodedead(const redisReply *r) {
    return r->type == REDIS_REPLY_ERROR && proto_status_of_reply(r->str, r->len) == PROTO_NODEDEAD;
}

static int is_readonly(const redisReply *r) {
    return r->type == REDIS_REPLY_ERROR && proto_status_of_reply(r->str, r->len) == PROTO_READONLY;
}

static uint32_t my_id(node_control *c) {
    pthread_mutex_lock(&c->n->mu);
    uint32_t id = c->st->id;
    pthread_mutex_unlock(&c->n->mu);
    return id;
}

/* 1 if the reply carried tasks: more may wait (a master hands out at
 * most PROTO_MAX_TASKS at a time, an older one fewer). */
static int heartbeat(node_control *c) {
    node *n = c->n;
    /* Clients write with the master's caps, so only the master knows what
     * is allocated here: we echo its last figure. */
    pthread_mutex_lock(&n->mu);
    uint64_t used = c->st->master_used;
    pthread_mutex_unlock(&n->mu);
    /* The master offloads to our disk tier while it says it has room. */
    uint64_t disk_free = 0;
    if (n->disk) {
        disk_store_stats ds;
        disk_store_get_stats(n->disk, &ds);
        disk_free = ds.capacity > ds.used ? ds.capacity - ds.used : 1;
    }
    proto_cmd cmd;
    proto_cmd_heartbeat(&cmd, my_id(c), used, disk_free);
    redisReply *r = master_send(c, &cmd);
    if (!r) return 0;
    int full = r->type == REDIS_REPLY_ARRAY && r->elements > 0;
    pthread_mutex_lock(&n->mu);
    if (r->type == REDIS_REPLY_ARRAY) c->st->heartbeats++;
    else c->st->heartbeat_errors++;
    pthread_mutex_unlock(&n->mu);
    if (r->type == REDIS_REPLY_ARRAY) node_control_take_tasks(c, r, c->gen);
    else if (is_nodedead(r)) node_dead(c, r->str);
    else if (is_readonly(r)) {
        log_notice("node: master %s:%d is not the leader: %s", c->host, c->port, r->str);
        disconnect(c);   /* etcd names the new one */
    }
    else log_warning("node: heartbeat refused: %s", r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
    freeReplyObject(r);
    return full;
}

static void send_leave(node_control *c) {
    proto_cmd cmd;
    proto_cmd_node(&cmd, PROTO_VERB_LEAVE, my_id(c));
    redisReply *r = master_send(c, &cmd);
    if (!r) return;
    c->leave_sent = 1;   /* asked once per registration; refused: the bounded wait ends it */
    if (r->type == REDIS_REPLY_STATUS) {
        set_phase(c, NODE_LEAVING);
        log_notice("node: leaving: the master is moving our objects away");
    } else if (is_nodedead(r)) {
        set_left(c, strstr(r->str, "(drained") != NULL);
    } else {
        log_warning("node: %s refused: %s", PROTO_VERB_LEAVE, r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
    }
    freeReplyObject(r);
}

/* Our line of MOON.NODES: "<id> <addr> <state> <segment_size> <used>".
 * EXPECTED: a master still collecting reports lists the nodes it waits
 * for too, so a view taken from it keeps the members it does not know
 * yet (else, should it die, our next MOON.REPORTDONE would forget them). */
static void refresh_view(node_control *c) {
    uint32_t id = my_id(c);
    proto_cmd cmd;
    proto_cmd_nodes(&cmd, 1);
    redisReply *r = master_send(c, &cmd);
    if (!r) return;
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        c->npeers = 0;
        for (const char *line = r->str; line && *line;) {
            proto_node_line nl;
            int ok = proto_dec_node_line(line, &nl) == 0;
            uint32_t lid = nl.id;
            if (ok && lid > c->seen_max) c->seen_max = lid;
            /* Members a restarted master should wait for. */
            if (ok && strcmp(nl.state, "dead") != 0 && c->npeers < CTL_MAX_PEERS) c->peers[c->npeers++] = lid;
            if (ok && lid == id) {
                pthread_mutex_lock(&c->n->mu);
                memcpy(c->st->master_state, nl.state, sizeof nl.state);
                c->st->master_segment = nl.segment_size;
                c->st->master_used = nl.used;
                pthread_mutex_unlock(&c->n->mu);
            }
            line = strchr(line, '\n');
            if (line) line++;
        }
    }
    freeReplyObject(r);
}

/* ---- the thread ---- */

/* Sleep up to ms, waking for stop, a leave to send and (when there is a
 * connection to send them on) finished tasks. */
static void wait_ms(node_control *c, int ms) {
    struct timespec ts = cond_deadline_ms(ms);
    pthread_mutex_lock(&c->n->mu);
    while (!c->stop && !(c->leave_wanted && !c->leave_sent) && !(c->rc && (c->nresults > 0 || c->chunks_now)))
        if (pthread_cond_timedwait(&c->wake, &c->n->mu, &ts) == ETIMEDOUT) break;
    pthread_mutex_unlock(&c->n->mu);
}

/* The node is gone when every group's thread is. */
static void gone(node_control *c) {
    set_phase(c, NODE_GONE);
    pthread_mutex_lock(&c->n->mu);
    int all = ++c->n->ngone == c->n->ngroups;   /* under mu */
    pthread_mutex_unlock(&c->n->mu);
    if (all) loop_wake_send(c->n->gone);
}

/* The longest step of the control loop since the last heartbeat: what a
 * late heartbeat names. */
typedef struct slow_step {
    const char *what;
    uint64_t ms;
} slow_step;

static void step_took(slow_step *s, const char *what, uint64_t since) {
    uint64_t now = mono_ms(), ms = now > since ? now - since : 0;   /* a wait may end early */
    if (ms > s->ms) *s = (slow_step){what, ms};
}

static void *control_main(void *arg) {
    node_control *c = arg;
    uint64_t next_beat = 0;
    slow_step slow = {"none", 0};
    int retry_ms = CTL_RETRY_MIN_MS;
    while (!flag(c, &c->stop)) {
        int leaving = flag(c, &c->leave_wanted);
        if (!c->rc) {
            set_phase(c, NODE_JOINING);
            if (leaving) break;   /* nobody to hand our objects to */
            int rc = master_connect(c) == 0 ? do_register(c) : -1;
            if (rc > 0) {   /* held: the master expects us soon */
                wait_ms(c, CTL_RETRY_MIN_MS);
                continue;
            }
            if (rc < 0) {
                wait_ms(c, retry_ms);
                retry_ms = retry_ms * 2 < CTL_RETRY_MAX_MS ? retry_ms * 2 : CTL_RETRY_MAX_MS;
                if (c->etcd) retry_ms = CTL_ETCD_RETRY_MS;
                continue;
            }
            retry_ms = CTL_RETRY_MIN_MS;
            next_beat = 0;
        }
        /* Copies reported: the master may have the next ones for us. */
        uint64_t t = mono_ms();
        if (report_results(c)) next_beat = 0;
        step_took(&slow, "copy results", t);
        if (c->rc && leaving && !c->leave_sent) send_leave(c);
        uint64_t now = mono_ms();
        if (c->rc && now >= next_beat) {
            /* copy tasks (re-replication, drain): ask for more at once;
             * while we are drained, hear the end soon */
            int beat = c->heartbeat_ms;
            if (c->leave_sent && beat > CTL_LEAVING_BEAT_MS) beat = CTL_LEAVING_BEAT_MS;
            /* Said when it may cost us our membership (a loaded machine,
             * a slow master round trip): the master's side says "silent". */
            if (next_beat && now > next_beat + 2 * (uint64_t)c->heartbeat_ms)
                log_warning("node: heartbeat %llu ms late (the longest step since the last: %s, %llu ms)",
                            (unsigned long long)(now - next_beat), slow.what, (unsigned long long)slow.ms);
            slow = (slow_step){"none", 0};
            next_beat = heartbeat(c) ? now : now + (uint64_t)beat;
            lent_exchange(c);   /* first: a chunk holding only ranges lent away is not empty */
            take_flag(c, &c->chunks_now);   /* this exchange answers it */
            chunks_exchange(c);
        } else if (c->rc && take_flag(c, &c->chunks_now)) {
            t = mono_ms();
            lent_exchange(c);
            chunks_exchange(c);   /* a put waits for room: now, not after the next heartbeat */
            step_took(&slow, PROTO_VERB_CHUNKS, t);
        }
        if (c->rc && now >= c->next_refresh_ms) {
            t = mono_ms();
            refresh_view(c);
            step_took(&slow, PROTO_VERB_NODES, t);
            int young = now < c->registered_ms + CTL_YOUNG_MS;
            c->next_refresh_ms = now + (young ? CTL_REFRESH_YOUNG_MS : CTL_REFRESH_MS);
        }
        if (c->rc && now >= c->next_tick_ms) {
            t = mono_ms();
            if (node_holdings_fallback(c->hl, c->rc, my_id(c)) != 0) disconnect(c);
            step_took(&slow, "holdings fallback", t);
            heap_huge_advise();   /* the index's growth on huge pages (node_role.c) */
            t = mono_ms();
            scrub_tell(c);
            step_took(&slow, "scrub's findings", t);
            t = mono_ms();
            rotten_tell(c);
            step_took(&slow, "rotten disk records", t);
            c->next_tick_ms = now + CTL_TICK_MS;
        }
        pthread_mutex_lock(&c->n->mu);
        node_phase p = c->st->phase;
        pthread_mutex_unlock(&c->n->mu);
        if (p == NODE_GONE) break;
        now = mono_ms();
        uint64_t next = next_beat < c->next_tick_ms ? next_beat : c->next_tick_ms;
        if (c->rc && next > now) {
            wait_ms(c, (int)(next - now));
            step_took(&slow, "waking past the wait", next);   /* the scheduler's lateness */
        }
    }
    if (!flag(c, &c->stop)) gone(c);
    disconnect(c);
    return NULL;
}

node_control *node_control_start(node *n, int g) {
    node_control *c = xcalloc(1, sizeof *c);
    c->n = n;
    c->g = g;
    c->st = n->groups[g].st;
    c->cluster = n->groups[g].cluster;
    c->heartbeat_ms = n->srv->cfg.heartbeat_ms > 0 ? n->srv->cfg.heartbeat_ms : 1000;
    /* --node-id, or the id of the node whose segment file we took over */
    /* a shared node: the one id of every group (shares.c wrote it to the segment file before any thread) */
    if (n->shares) c->claim_id = n->shared_id;
    else c->claim_id = n->srv->cfg.node_id ? (uint32_t)n->srv->cfg.node_id : node_persist_node_id(n->persist);
    /* One token for the process, the same in every group it serves: a
     * group adopting another's objects knows the node by it. */
    if (g > 0) {
        memcpy(c->instance_hex, n->groups[0].ctl->instance_hex, sizeof c->instance_hex);
    } else {
        uint8_t token[8];
        if (random_bytes(token, sizeof token) != 0) {
            uint64_t t = mono_ms() ^ ((uint64_t)getpid() << 32);
            memcpy(token, &t, sizeof token);
        }
        hex_encode(token, sizeof token, c->instance_hex);
    }
    char err[ETCD_ERR_LEN];
    if (n->srv->cfg.etcd[0]) {
        if (!(c->etcd = etcd_create(n->srv->cfg.etcd, CTL_ETCD_TIMEOUT_MS, err, sizeof err)) ||
            !(c->watch = leader_watch_open(n->srv->cfg.etcd, c->cluster, err, sizeof err))) {
            log_warning("node: %s", err);
            etcd_free(c->etcd);
            free(c);
            return NULL;
        }
    } else if (parse_hostport(n->srv->cfg.master, c->host, sizeof c->host, &c->port) != 0) {
        log_warning("node: bad master address '%s' (want host:port)", n->srv->cfg.master);
        free(c);
        return NULL;
    }
    cond_init_mono(&c->wake);
    c->hl = node_holdings_start(n, c, c->g, c->st, c->cluster);
    c->scrub = node_scrub_start(n->index, n->srv->cfg.scrub_mb_per_s, pulls_of, c->hl);
    n->groups[g].ctl = c;
    if (g == 0) n->ctl = c;
    pthread_create(&c->th, NULL, control_main, c);
    return c;
}

static void poke(node_control *c, int *f) {
    pthread_mutex_lock(&c->n->mu);
    *f = 1;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->n->mu);
}

void node_control_request_leave(node_control *c) { poke(c, &c->leave_wanted); }

void node_control_ask_chunks(node_control *c) { poke(c, &c->chunks_now); }

int node_control_current(node_control *c, uint64_t gen) {
    pthread_mutex_lock(&c->n->mu);
    int cur = c->st->registrations == gen;
    pthread_mutex_unlock(&c->n->mu);
    return cur;
}

void node_control_tasks_done(node_control *c, uint64_t gen, const uint64_t *ids, const int *oks, int n) {
    pthread_mutex_lock(&c->n->mu);
    for (int i = 0; i < n; i++) {
        queue_result(c, gen, ids[i], oks[i]);
        if (oks[i]) c->st->tasks_ok++;
        else c->st->tasks_failed++;
    }
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->n->mu);
}

int node_control_group(const node_control *c) { return c->g; }

void node_control_stop(node_control *c) {
    if (!c || c->joined) return;
    poke(c, &c->stop);
    pthread_join(c->th, NULL);
    c->joined = 1;
}

void node_control_free(node_control *c) {
    if (!c) return;
    node_control_stop(c);
    pthread_cond_destroy(&c->wake);
    leader_watch_close(c->watch);
    etcd_free(c->etcd);
    node_scrub_free(c->scrub);
    node_holdings_free(c->hl);
    free(c->results);
    free(c->sending);
    free(c);
}
