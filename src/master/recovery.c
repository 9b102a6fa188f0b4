/* master/recovery.c - a restarted master gets its table back from the nodes.
 *
 * Nodes keep an index of what they hold (fed by MOON.HOLDINGS). A node
 * that claims its id back from a master that did not know it (a new
 * process, a new leader) reports that index (MOON.REPORT, in batches) and
 * says MOON.REPORTDONE naming the nodes it knew as members. The first
 * such claim opens the rebuild window: puts get -TRYAGAIN (a node may
 * still report the key) and gets of unreported keys miss, until every
 * node known to have been a member reported or 2 * node_timeout_ms
 * passed; then mm_rebuild makes the whole replicas COMPLETE objects and
 * repair brings them back to their replica counts. A node reporting
 * after the window is rebuilt at once (keys present are left alone).
 * Extents that were refused are dropped from their node's index.
 *
 * Who is waited for: the nodes that claimed, the peers they name, and
 * with etcd every member the last leader recorded (members.c). Without
 * etcd a node that joined just before the master died may be named by
 * nobody, so the window also waits out the rejoin grace, in which every
 * live node claims; with the records read, it closes as soon as every
 * expected node reported. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/log.h"
#include "core/util.h"
#include "master/master.h"
#include "proto/notes.h"
#include "proto/register.h"
#include "proto/report.h"
#include "proto/verbs.h"
#include "server/commands.h"
#include "server/info.h"
#include "server/networking.h"

#define REPORT_FIELDS 7   /* key size crc want obj_offset seg_offset length */

/* What closed the window (INFO rebuild_closed_by). */
enum { REBUILD_CLOSED_NOT, REBUILD_CLOSED_MEMBERS, REBUILD_CLOSED_GRACE, REBUILD_CLOSED_DEADLINE,
       REBUILD_CLOSED_COMMAND };
static const char *const closed_words[] = {"none", "members_reported", "grace_over", "deadline", "command"};
static const char *const closed_texts[] = {
    "", "every node expected, recorded in etcd or named, reported",
    "every node reported and the rejoin grace is over", "deadline: not every node reported",
    PROTO_VERB_REBUILD};

static master *master_of(client *c) { return c->srv->role; }

/* CPU time of this thread: the table build's cost on a busy machine. */
static uint64_t cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- the expected nodes ---- */

/* Why a node is expected (bits): it claimed its id (it is alive), the
 * last leader recorded it in etcd, a reporting node named it a peer. */
enum { EXP_CLAIMED = 1, EXP_RECORDED = 2, EXP_NAMED = 4 };

static void expect(master_rebuild *rb, uint32_t id, int done, int why) {
    for (size_t i = 0; i < rb->nexpect; i++) {
        if (rb->expect[i] != id) continue;
        rb->done[i] |= done;
        rb->why[i] |= why;
        return;
    }
    rb->expect = xrealloc(rb->expect, (rb->nexpect + 1) * sizeof *rb->expect);
    rb->done = xrealloc(rb->done, rb->nexpect + 1);
    rb->why = xrealloc(rb->why, rb->nexpect + 1);
    rb->expect[rb->nexpect] = id;
    rb->why[rb->nexpect] = (uint8_t)why;
    rb->done[rb->nexpect++] = (uint8_t)done;
}

static int expected(const master_rebuild *rb, uint32_t id) {
    for (size_t i = 0; i < rb->nexpect; i++)
        if (rb->expect[i] == id) return 1;
    return 0;
}

/* How long a node not reported yet is waited for. With the member
 * records read, they say who the members are: a peer named by some
 * node's view but not recorded is dead (its record was deleted), often
 * a stale view's or a last window's EXPECTED listing carried on, and
 * is not waited for at all; a record nobody claimed or named is either
 * a node dead before the last leader could delete its record, or one
 * that never got its MOON.REGISTER reply: waited for during the rejoin
 * grace only, in which every live node claims (or, without its id,
 * registers again and gets it: members_recorded_as). */
enum { WAIT_NOT, WAIT_GRACE, WAIT_FULL };

static int wait_kind(const master_rebuild *rb, size_t i) {
    if (rb->done[i]) return WAIT_NOT;
    int why = rb->why[i];
    if (!rb->members_known || (why & EXP_CLAIMED)) return WAIT_FULL;
    if (!(why & EXP_RECORDED)) return WAIT_NOT;
    return why & EXP_NAMED ? WAIT_FULL : WAIT_GRACE;
}

/* The strongest wait any expected node still asks for. */
static int still_waiting(const master_rebuild *rb) {
    int most = WAIT_NOT;
    for (size_t i = 0; i < rb->nexpect && most != WAIT_FULL; i++) {
        int k = wait_kind(rb, i);
        if (k > most) most = k;
    }
    return most;
}

/* ---- rebuilding ---- */

/* Keys built per look at the clock, and how long one turn may run
 * before the loop serves others (nodes time out a silent master). */
#define BUILD_KEYS_PER_CHECK 1024
#define BUILD_TURN_US 20000

static void note_refused(const mm_report *r, void *ctx) {
    master_rebuild *rb = ctx;
    if (rb->nrefused == rb->caprefused) {
        rb->caprefused = rb->caprefused ? rb->caprefused * 2 : 256;
        rb->refused = xrealloc(rb->refused, rb->caprefused * sizeof *rb->refused);
    }
    rb->refused[rb->nrefused++] = r;
}

/* o keeps what r reported on its node: a segment replica there, or for
 * a disk record the disk replica there. */
static int object_keeps(const object *o, const mm_report *r) {
    int disk = r->seg_off == MM_ON_DISK;
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t i = 0; i < o->nreplicas; i++)
        for (uint32_t k = 0; k < reps[i].nextents; k++)
            if (reps[i].extents[k].node == r->node && (reps[i].extents[k].offset == MM_ON_DISK) == disk)
                return 1;
    return 0;
}

static void reports_clear(master_reports *b) {
    for (size_t i = 0; i < b->nchunks; i++) xhuge_free(b->chunks[i].base, b->chunks[i].len);
    free(b->chunks);
    xhuge_free(b->v, b->cap * sizeof *b->v);
    mm_groups_free(b->groups);
    memset(b, 0, sizeof *b);
}

static void build_turn(event_loop *el, void *data);

/* Heartbeats waited while we grouped the reports: that silence was ours. */
static void heard_all(master *m) {
    uint64_t now = wall_ms();
    for (uint32_t id = 1; id <= mm_node_count(m->meta); id++) mm_node_seen(m->meta, id, now);
}

/* Every node expected reported and the loop would idle out the grace:
 * the build's grouping and memory are made ready now instead of after
 * the window closes (mm_rebuild_prepare). */
static void build_prepare(master *m) {
    master_rebuild *rb = &m->rebuild;
    uint64_t t0 = mono_ms(), cpu0 = cpu_ms();
    mm_rebuild_prepare(m->meta, rb->buf.v, rb->buf.n, rb->buf.groups);
    rb->table_ms += mono_ms() - t0;
    rb->table_cpu_ms += cpu_ms() - cpu0;
    heard_all(m);
}

/* The buffered reports become the running job's (new ones buffer anew). */
static void build_start(master *m) {
    master_rebuild *rb = &m->rebuild;
    uint64_t t0 = mono_ms(), cpu0 = cpu_ms();
    rb->building = rb->buf;
    memset(&rb->buf, 0, sizeof rb->buf);
    memset(&rb->job_st, 0, sizeof rb->job_st);
    rb->job = mm_rebuild_begin(m->meta, rb->building.v, rb->building.n, rb->building.groups);
    rb->building.groups = NULL;   /* the job's now */
    rb->table_ms += mono_ms() - t0;
    rb->table_cpu_ms += cpu_ms() - cpu0;
    heard_all(m);
    if (!rb->build_wake) rb->build_wake = loop_wake_create(m->srv->loop, build_turn, m);
    loop_wake_send(rb->build_wake);
}

static void build_done(master *m) {
    master_rebuild *rb = &m->rebuild;
    rb->state = REBUILD_DONE;
    rb->finished_ms = mono_ms();
    log_notice("master: table rebuilt (%s) in %llu ms (%llu building it, %llu ms of CPU): %llu objects recovered, "
               "%llu incomplete dropped, %llu lost, from %llu nodes", closed_texts[rb->closed_by],
               (unsigned long long)(rb->finished_ms - rb->opened_ms), (unsigned long long)rb->table_ms,
               (unsigned long long)rb->table_cpu_ms,
               (unsigned long long)rb->recovered,
               (unsigned long long)rb->incomplete, (unsigned long long)rb->lost,
               (unsigned long long)rb->nodes_reported);
}

/* The job built every key: refused extents leave their node's index
 * (unless that node holds a replica of the key after all). */
static void build_end(master *m) {
    master_rebuild *rb = &m->rebuild;
    const mm_rebuild_stats *st = &rb->job_st;
    uint64_t t0 = mono_ms(), cpu0 = cpu_ms();
    mm_rebuild_end(m->meta, rb->job);
    rb->job = NULL;
    for (size_t i = 0; i < rb->nrefused; i++) {
        const mm_report *r = rb->refused[i];
        const object *o = mm_find(m->meta, r->key, r->keylen);
        if (!o || !object_keeps(o, r)) mm_note_drop_key(m->meta, r->node, r->key, r->keylen, r->seg_off == MM_ON_DISK);
    }
    rb->nrefused = 0;
    reports_clear(&rb->building);
    rb->table_ms += mono_ms() - t0;
    rb->table_cpu_ms += cpu_ms() - cpu0;
    rb->recovered += st->objects;
    rb->incomplete += st->keys_incomplete;
    rb->lost += st->keys_refused;
    rb->extents_refused += st->extents_rejected;
    if (rb->state == REBUILD_BUILDING) build_done(m);
    if (rb->again) {   /* nodes that finished reporting during the build */
        rb->again = 0;
        if (rb->buf.n) build_start(m);
    }
}

/* Up to n keys of the running job (SIZE_MAX: all); 1 while keys remain. */
static int build_some(master *m, size_t n) {
    master_rebuild *rb = &m->rebuild;
    uint64_t t0 = mono_ms(), cpu0 = cpu_ms();
    int more = mm_rebuild_step(m->meta, rb->job, n, wall_ms(), &rb->job_st, note_refused, rb);
    rb->table_ms += mono_ms() - t0;
    rb->table_cpu_ms += cpu_ms() - cpu0;
    return more;
}

static void build_turn(event_loop *el, void *data) {
    master *m = data;
    master_rebuild *rb = &m->rebuild;
    if (!rb->job) return;
    uint64_t until = mono_us() + BUILD_TURN_US;
    int more;
    do more = build_some(m, BUILD_KEYS_PER_CHECK);
    while (more && mono_us() < until);
    if (more) loop_wake_send(rb->build_wake);
    else build_end(m);
}

/* Build everything reported so far before returning (MOON.REBUILD, a
 * node reporting after the window). */
static void build_now(master *m, mm_rebuild_stats *st) {
    master_rebuild *rb = &m->rebuild;
    memset(st, 0, sizeof *st);
    for (int round = 0; round < 2; round++) {
        if (!rb->job && rb->buf.n == 0) continue;
        if (!rb->job) build_start(m);
        while (build_some(m, SIZE_MAX)) {}
        mm_rebuild_stats got = rb->job_st;
        build_end(m);
        st->objects += got.objects, st->replicas += got.replicas, st->extents += got.extents;
        st->extents_rejected += got.extents_rejected;
        st->keys_incomplete += got.keys_incomplete, st->keys_refused += got.keys_refused;
    }
}

/* The window closes: what was reported is built, in slices. */
static void finish(master *m, int closed_by) {
    master_rebuild *rb = &m->rebuild;
    rb->state = REBUILD_BUILDING;
    rb->closed_by = closed_by;
    log_notice("master: building the table (%s) from %zu reported extents", closed_texts[closed_by],
               rb->buf.n);
    build_start(m);
}

static void open_window(master *m) {
    master_rebuild *rb = &m->rebuild;
    rb->state = REBUILD_COLLECTING;
    rb->opened_ms = mono_ms();
    rb->deadline_ms = rb->opened_ms + 2 * (uint64_t)m->srv->cfg.node_timeout_ms;
}

static void close_if_reported(master *m);

int master_rebuild_joined(master *m, uint32_t id, mm_reg_kind kind) {
    master_rebuild *rb = &m->rebuild;
    if (kind == MM_REG_REJOINED) return MASTER_REG_FORGET;
    if (kind == MM_REG_NEW && rb->state == REBUILD_COLLECTING && expected(rb, id)) {
        /* Given the id it was recorded with (members_recorded_as): it never
         * served as it, so it has nothing to report. */
        expect(rb, id, 1, EXP_CLAIMED);
        close_if_reported(m);
        return MASTER_REG_KEEP;
    }
    if (kind == MM_REG_RESTORED) return PROTO_REG_RECONCILE;
    if (kind != MM_REG_RECLAIMED) return MASTER_REG_KEEP;
    if (rb->state == REBUILD_NONE) {
        open_window(m);
        log_notice("master: node %u claims its id: rebuilding the table from node reports", id);
    }
    if (rb->state == REBUILD_COLLECTING) expect(rb, id, 0, EXP_CLAIMED);
    return MASTER_REG_REPORT;
}

/* What is left of the rejoin grace: live nodes of the past try to join
 * every PROTO_REJOIN_MS, so within it each claims its id. */
static uint64_t grace_left_ms(const master *m) {
    uint64_t now = mono_ms(), end = m->term_start_ms + (uint64_t)m->srv->cfg.rejoin_grace_ms;
    return end > now ? end - now : 0;
}

/* How long a new node should still wait (0: not at all): the grace
 * (unless the members were read from etcd: their ids are taken), or
 * once a node claimed, the window, which lasts until every member it
 * knew reported, so the ids they hold are known (mm_node_id_taken). */
static uint64_t join_hold_ms(const master *m) {
    const master_rebuild *rb = &m->rebuild;
    uint64_t now = mono_ms();
    if (rb->state == REBUILD_COLLECTING) return rb->deadline_ms > now ? rb->deadline_ms - now : 1;
    return rb->state == REBUILD_NONE && !rb->members_known ? grace_left_ms(m) : 0;
}

static void grace_over(event_loop *el, void *data);

/* The window closes once every node expected reported and, unless the
 * members were read from etcd, the grace is over: a node's view of the
 * members may lack one that joined just before the last master died
 * (views are refreshed, not pushed), and that node, alive, claims within
 * the grace and is expected from then. */
static void close_if_reported(master *m) {
    master_rebuild *rb = &m->rebuild;
    if (rb->state != REBUILD_COLLECTING) return;
    int wait = still_waiting(rb);
    if (wait == WAIT_FULL) return;
    if (rb->members_known && wait == WAIT_NOT) {
        finish(m, REBUILD_CLOSED_MEMBERS);
        return;
    }
    uint64_t left = grace_left_ms(m);
    if (left == 0) {
        finish(m, REBUILD_CLOSED_GRACE);
        return;
    }
    build_prepare(m);
    if (!rb->grace_timer) rb->grace_timer = loop_timer_create(m->srv->loop, grace_over, m);
    if (!loop_timer_active(rb->grace_timer)) loop_timer_start(rb->grace_timer, (long long)left, 0);
}

static void grace_over(event_loop *el, void *data) { close_if_reported(data); }

void master_rebuild_members(master *m, const uint32_t *ids, size_t n) {
    master_rebuild *rb = &m->rebuild;
    rb->members_known = 1;
    for (size_t i = 0; i < n; i++) mm_node_id_taken(m->meta, ids[i]);
    if (n && rb->state == REBUILD_NONE) {
        open_window(m);
        log_notice("master: %zu members recorded in etcd: rebuilding the table from their reports", n);
    }
    if (rb->state != REBUILD_COLLECTING) return;
    for (size_t i = 0; i < n; i++) expect(rb, ids[i], 0, EXP_RECORDED);
    close_if_reported(m);
}

int master_rebuild_holds_join(client *c, uint32_t claim_id) {
    master *m = master_of(c);
    uint64_t left = claim_id ? 0 : join_hold_ms(m);
    if (!left) return 0;
    m->rebuild.joins_held++;
    master_reply_fail(c, PROTO_TRYAGAIN, "nodes of the cluster may still claim their ids: "
                      "register within %llu ms", (unsigned long long)left);
    return 1;
}

uint64_t master_rebuild_awaits_nodes(const master *m) {
    if (master_rebuild_busy(m)) return 1;
    return m->rebuild.state == REBUILD_NONE && !m->rebuild.members_known ? grace_left_ms(m) : 0;
}

void master_rebuild_soften(const master *m, mm_item *it, size_t n) {
    uint64_t left = 0;
    for (size_t i = 0; i < n; i++) {
        if (it[i].status != PROTO_NOREPLICAS) continue;
        if (!left && !(left = master_rebuild_awaits_nodes(m))) return;
        it[i].status = PROTO_TRYAGAIN;
        snprintf(it[i].err, sizeof it[i].err, "the master is waiting for its nodes to join (%llu ms of "
                 "the rejoin grace left)", (unsigned long long)left);
    }
}

int master_rebuild_busy(const master *m) {
    return m->rebuild.state == REBUILD_COLLECTING || m->rebuild.state == REBUILD_BUILDING;
}

int master_rebuild_refuses(client *c) {
    if (!master_rebuild_busy(master_of(c))) return 0;
    master_reply_fail(c, PROTO_TRYAGAIN, "the master is rebuilding its table from the nodes");
    return 1;
}

void master_rebuild_tick(master *m) {
    if (m->rebuild.state == REBUILD_COLLECTING && mono_ms() >= m->rebuild.deadline_ms)
        finish(m, REBUILD_CLOSED_DEADLINE);
}

void master_rebuild_reset(master *m) {
    master_rebuild *rb = &m->rebuild;
    mm_rebuild_free(rb->job);   /* the table it filled is gone or going */
    loop_wake_free(rb->build_wake);
    loop_timer_free(rb->grace_timer);
    reports_clear(&rb->buf);
    reports_clear(&rb->building);
    free(rb->refused);
    free(rb->expect);
    free(rb->done);
    free(rb->why);
    memset(rb, 0, sizeof *rb);
}

void master_rebuild_info(master *m, resp_buf *out) {
    static const char *const names[] = {"none", "collecting", "building", "done"};
    const master_rebuild *rb = &m->rebuild;
    uint64_t end = master_rebuild_busy(m) ? mono_ms() : rb->finished_ms;
    info_field(out, "rebuild_state", "%s", names[rb->state]);
    info_field(out, "rebuild_ms", "%llu",
               (unsigned long long)(rb->state == REBUILD_NONE ? 0 : end - rb->opened_ms));
    info_field(out, "rebuild_table_ms", "%llu", (unsigned long long)rb->table_ms);
    info_field(out, "rebuild_closed_by", "%s", closed_words[rb->closed_by]);
    info_field(out, "rebuild_members_known", "%d", rb->members_known);
    info_field(out, "rebuild_joins_held", "%llu", (unsigned long long)rb->joins_held);
    info_field(out, "rebuild_nodes_reported", "%llu", (unsigned long long)rb->nodes_reported);
    info_field(out, "rebuild_reports", "%llu", (unsigned long long)rb->reports_total);
    info_field(out, "rebuild_recovered", "%llu", (unsigned long long)rb->recovered);
    info_field(out, "rebuild_incomplete", "%llu", (unsigned long long)rb->incomplete);
    info_field(out, "rebuild_lost", "%llu", (unsigned long long)rb->lost);
    info_field(out, "rebuild_extents_refused", "%llu", (unsigned long long)rb->extents_refused);
}

void master_rebuild_expected(master *m, resp_buf *out) {
    const master_rebuild *rb = &m->rebuild;
    if (rb->state != REBUILD_COLLECTING) return;
    for (size_t i = 0; i < rb->nexpect; i++) {
        const mm_node *n = mm_node_get(m->meta, rb->expect[i]);
        if (n && n->state != NODE_DEAD) continue;   /* listed as a member */
        if (wait_kind(rb, i) == WAIT_NOT && !rb->done[i]) continue;   /* dead: not carried on */
        char line[48];
        int len = snprintf(line, sizeof line, "%u - expected 0 0\n", rb->expect[i]);
        resp_buf_append(out, line, (size_t)len);
    }
}

/* ---- commands ---- */

static uint32_t reporting_node(client *c) {
    uint32_t id = master_conn_node(c);
    if (!id) master_reply_fail(c, PROTO_ERR, "only a registered node reports extents");
    return id;
}

/* One group of REPORT_FIELDS arguments from argv[a]; -1 after replying. */
static int parse_report(client *c, int a, uint32_t node, mm_report *r) {
    static const uint64_t max[6] = {PROTO_MAX_SEGMENT, UINT32_MAX, PROTO_MAX_REPLICAS,
                                    PROTO_MAX_SEGMENT, PROTO_MAX_SEGMENT, PROTO_MAX_SEGMENT};
    uint64_t v[6];
    for (int k = 0; k < 6; k++)
        if (master_arg_u64(c, a + 1 + k, 0, max[k], &v[k]) != 0) return -1;
    /* a bulk argument is far below 4 GiB: keylen keeps it whole (the build refuses a long key) */
    *r = (mm_report){node, (uint32_t)c->argv[a].len, c->argv[a].ptr, v[0], (uint32_t)v[1], (uint32_t)v[2],
                     v[3], v[4], v[5], NULL};
    return 0;
}

#define KEY_CHUNK (64u << 20)   /* bytes of reported keys per chunk */

/* Room for n more reports, or -1 after replying (the buffer bound). */
static int reports_reserve(client *c, master_reports *b, size_t n, size_t bytes) {
    if (b->bytes + bytes > MASTER_MAX_REPORT_BYTES) {
        master_reply_fail(c, PROTO_ERR, "report buffer full: run " PROTO_VERB_REBUILD " first");
        return -1;
    }
    if (b->n + n > b->cap) {
        size_t cap = (b->n + n) * 2;
        b->v = xhuge_realloc(b->v, b->cap * sizeof *b->v, cap * sizeof *b->v);
        b->cap = cap;
    }
    return 0;
}

/* len bytes in the key chunks. */
static char *keys_room(master_reports *b, size_t len) {
    master_key_chunk *last = b->nchunks ? &b->chunks[b->nchunks - 1] : NULL;
    if (!last || last->len - last->used < len) {
        if (b->nchunks == b->capchunks) {
            b->capchunks = b->capchunks ? b->capchunks * 2 : 16;
            b->chunks = xrealloc(b->chunks, b->capchunks * sizeof *b->chunks);
        }
        last = &b->chunks[b->nchunks++];
        last->len = len > KEY_CHUNK ? len : KEY_CHUNK;
        last->base = xhuge_alloc(last->len);
        last->used = 0;
    }
    last->used += len;
    return last->base + last->used - len;
}

/* The bytes of r's key and the slice CRCs that follow it (checked). */
static size_t key_and_slices(const mm_report *r) {
    proto_slices_ref s = {0, 0, NULL};
    if (r->slices) proto_slices_ref_get(r->slices, proto_slices_ref_len(PROTO_MAX_SLICES), r->size, &s);
    return r->keylen + (s.count ? proto_slices_ref_len(s.count) : 0);
}

/* Keep n parsed reports (at b->v + b->n, their keys, each followed by
 * its slice CRCs if any, still in the command's arguments, keys bytes
 * in all): the keys and CRCs are copied. */
static void reports_keep(master *m, uint32_t node, size_t n, size_t keys) {
    master_reports *b = &m->rebuild.buf;
    mm_report *at = b->v + b->n;
    char *k = keys ? keys_room(b, keys) : NULL;
    for (size_t i = 0; i < n; i++) {
        size_t len = key_and_slices(&at[i]);
        memcpy(k, at[i].key, len);
        at[i].key = k;
        if (at[i].slices) at[i].slices = (const uint8_t *)k + at[i].keylen;
        k += len;
    }
    if (!b->groups) b->groups = mm_groups_create();
    mm_groups_add(b->groups, b->v, b->n, b->n + n);
    b->n += n;
    b->bytes += n * sizeof(mm_report) + keys;
    m->rebuild.reports_total += n;
    mm_node_seen(m->meta, node, wall_ms());   /* reporting, not silent */
}

/* MOON.REPORT key size crc want obj_off seg_off length [...] */
static void report_text(client *c, master_rebuild *rb, uint32_t node) {
    if ((c->argc - 1) % REPORT_FIELDS) {
        reply_syntax_error(c);
        return;
    }
    size_t n = (size_t)(c->argc - 1) / REPORT_FIELDS, keys = 0;
    for (size_t i = 0; i < n; i++) keys += c->argv[1 + REPORT_FIELDS * i].len;
    if (reports_reserve(c, &rb->buf, n, n * sizeof(mm_report) + keys) != 0) return;
    mm_report *at = rb->buf.v + rb->buf.n;
    for (size_t i = 0; i < n; i++)
        if (parse_report(c, 1 + REPORT_FIELDS * (int)i, node, &at[i]) != 0) return;
    reports_keep(master_of(c), node, n, keys);
    reply_integer(c, (long long)rb->buf.n);
}

/* A restarted node's report (restore.c): each record checked against
 * the table as it comes; the reply is how many it confirmed. */
static void report_restore(client *c, uint32_t node) {
    const resp_arg *blob = &c->argv[2];
    if (blob->len > PROTO_REPORT_MAX_BLOB) {
        master_reply_fail(c, PROTO_ERR, "packed report over %d bytes", PROTO_REPORT_MAX_BLOB);
        return;
    }
    const uint8_t *p = (const uint8_t *)blob->ptr, *end = p + blob->len;
    long long kept = 0;
    size_t got = 0;
    proto_report_rec r;
    while (p < end) {
        if (proto_report_next(&p, end, &r) != 0) {
            master_reply_fail(c, PROTO_ERR, "malformed packed report record %zu", got);
            return;
        }
        got++;
        kept += mm_restore_report(master_of(c)->meta, node, r.key, r.keylen, r.size, r.crc, r.obj_off, r.seg_off,
                                  r.length);
    }
    mm_node_seen(master_of(c)->meta, node, wall_ms());   /* reporting, not silent */
    reply_integer(c, kept);
}

void master_restore_info(master *m, resp_buf *out) {
    mm_restore_stats st;
    mm_restore_totals(m->meta, &st);
    info_field(out, "node_restores", "%llu", (unsigned long long)st.nodes);
    info_field(out, "restore_kept", "%llu", (unsigned long long)st.kept);
    info_field(out, "restore_dropped", "%llu", (unsigned long long)st.dropped);
    info_field(out, "restore_unknown", "%llu", (unsigned long long)st.unknown);
}

/* MOON.REPORT PACKED blob (proto/report.h): every record is checked
 * before any is kept. */
static void report_packed(client *c, master_rebuild *rb, uint32_t node) {
    const resp_arg *blob = &c->argv[2];
    if (blob->len > PROTO_REPORT_MAX_BLOB) {
        master_reply_fail(c, PROTO_ERR, "packed report over %d bytes", PROTO_REPORT_MAX_BLOB);
        return;
    }
    size_t n = blob->len / PROTO_REPORT_HDR;   /* at most this many records */
    if (reports_reserve(c, &rb->buf, n, n * sizeof(mm_report) + blob->len) != 0) return;
    const uint8_t *p = (const uint8_t *)blob->ptr, *end = p + blob->len;
    mm_report *at = rb->buf.v + rb->buf.n;
    size_t got = 0, keys = 0;
    proto_report_rec r;
    while (p < end) {
        if (proto_report_next(&p, end, &r) != 0) {
            master_reply_fail(c, PROTO_ERR, "malformed packed report record %zu", got);
            return;
        }
        /* the record's slice CRCs follow its key in the blob: kept with it */
        const uint8_t *sl = r.slices.count ? (const uint8_t *)r.key + r.keylen : NULL;
        at[got] = (mm_report){node, (uint32_t)r.keylen, r.key, r.size, r.crc, r.want, r.obj_off, r.seg_off, r.length, sl};
        keys += key_and_slices(&at[got++]);
    }
    reports_keep(master_of(c), node, got, keys);
    reply_integer(c, (long long)rb->buf.n);
}

/* MOON.REPORT key size crc want obj_off seg_off length [...]
 * MOON.REPORT PACKED blob */
static void report_command(client *c) {
    master_rebuild *rb = &master_of(c)->rebuild;
    uint32_t node = reporting_node(c);
    if (!node) return;
    int packed = c->argc == 3 && c->argv[1].len == 6 && strncasecmp(c->argv[1].ptr, "packed", 6) == 0;
    if (mm_node_restoring(master_of(c)->meta, node)) {
        if (packed) report_restore(c, node);
        else master_reply_fail(c, PROTO_ERR, "a restarted node reports PACKED");
    } else if (packed) {
        report_packed(c, rb, node);
    } else {
        report_text(c, rb, node);
    }
}

/* MOON.REPORTDONE [peer_id ...]: this node reported all it holds; the
 * peers are the other members it knew. Answered at once: the build
 * runs in slices after the reply. */
static void reportdone_command(client *c) {
    master *m = master_of(c);
    master_rebuild *rb = &m->rebuild;
    uint32_t node = reporting_node(c);
    if (!node) return;
    uint64_t peer;
    for (int i = 1; i < c->argc; i++)
        if (master_arg_u64(c, i, 1, PROTO_MAX_NODES, &peer) != 0) return;
    if (mm_restore_done(m->meta, node, wall_ms())) {   /* a restarted node, not a rebuild */
        reply_ok(c);
        return;
    }
    rb->nodes_reported++;
    reply_ok(c);
    if (rb->state != REBUILD_COLLECTING) {   /* after the window: built on its own */
        if (rb->job) rb->again = 1;
        else if (rb->buf.n) build_start(m);
        return;
    }
    expect(rb, node, 1, EXP_CLAIMED);
    for (int i = 1; i < c->argc; i++) {
        master_arg_u64(c, i, 1, PROTO_MAX_NODES, &peer);
        expect(rb, (uint32_t)peer, 0, EXP_NAMED);
        mm_node_id_taken(m->meta, (uint32_t)peer);
    }
    close_if_reported(m);
}

/* MOON.REBUILD (admin): rebuild from what was reported so far, now. */
static void rebuild_command(client *c) {
    master *m = master_of(c);
    mm_rebuild_stats st;
    if (m->rebuild.state == REBUILD_COLLECTING) finish(m, REBUILD_CLOSED_COMMAND);
    build_now(m, &st);
    reply_array(c, 4);
    reply_integer(c, (long long)st.objects);
    reply_integer(c, (long long)st.replicas);
    reply_integer(c, (long long)st.extents);
    reply_integer(c, (long long)st.extents_rejected);
}

/* One of our own records as [key, size, crc, want, [[node, offset,
 * length] ...]] or [key]; ext has room for PROTO_MAX_EXTENTS. */
static void reply_note(client *c, const uint8_t **p, const uint8_t *end, obj_extent *ext) {
    proto_note note;
    if (proto_note_next(p, end, ext, &note) != 0) {   /* never: we wrote it */
        reply_null(c);
        *p = end;
        return;
    }
    reply_array(c, note.drop ? 1 : 5);
    reply_bulk(c, note.key, note.keylen);
    if (note.drop) return;
    reply_integer(c, (long long)note.size);
    reply_integer(c, note.crc);
    reply_integer(c, note.want);
    reply_array(c, note.rep.nextents);
    for (uint32_t i = 0; i < note.rep.nextents; i++) {
        reply_array(c, 3);
        reply_integer(c, ext[i].node);
        reply_integer(c, (long long)ext[i].offset);
        reply_integer(c, (long long)ext[i].length);
    }
}

void master_holdings_reply(client *c, uint32_t id, uint64_t ack, int form) {
    const uint8_t *recs;
    size_t len;
    uint64_t next;
    size_t n = mm_node_holdings(master_of(c)->meta, id, ack, MASTER_MAX_HOLDINGS,
                                form != MASTER_HOLDINGS_ARRAY ? PROTO_NOTES_BLOB : SIZE_MAX, &recs, &len, &next);
    int tasks = form & MASTER_HOLDINGS_TASKS;
    form &= ~MASTER_HOLDINGS_TASKS;
    mm_node *node = mm_node_get(master_of(c)->meta, id);
    int push = tasks && node && node->chunks_push;   /* ask for chunks now (shares.c) */
    if (push) node->chunks_push = 0;
    reply_array(c, tasks ? 3 + push : 2);
    reply_integer(c, (long long)next);
    if (form == MASTER_HOLDINGS_SLICES) {
        reply_bulk(c, recs, len);
    } else if (form == MASTER_HOLDINGS_PACKED) {   /* a node that keeps no slice CRCs */
        resp_buf plain;
        resp_buf_init(&plain);
        proto_notes_plain(recs, len, &plain);
        reply_bulk(c, plain.data, plain.len);
        resp_buf_free(&plain);
    } else {
        reply_array(c, (long long)n);
        obj_extent *ext = xmalloc(PROTO_MAX_EXTENTS * sizeof *ext);
        for (size_t i = 0; i < n; i++) reply_note(c, &recs, recs + len, ext);
        free(ext);
    }
    if (tasks) master_reply_tasks(c, id);
    if (push) reply_integer(c, 1);
}

static int arg_is(const client *c, int i, const char *word) {
    return i < c->argc && strieq_len(c->argv[i].ptr, c->argv[i].len, word);
}

/* MOON.HOLDINGS id ack [PACKED [SLICES] [TASKS]] [WAIT ms]: [next_ack, [note ...]]
 * or [next_ack, blob] (the notes are kept as the packed records: that
 * form sends them as they are, at most about PROTO_NOTES_BLOB bytes of
 * them; without SLICES they are sent without their slice CRCs). TASKS:
 * a third element, the node's tasks as a heartbeat hands them out (the
 * link proved the cluster secret, MOON.HOLDLINK), and a fourth, 1, when a
 * put found our group's chunks of a shared node full: the node should
 * ask for chunks (MOON.CHUNKS) now. WAIT: with nothing to
 * send, the reply waits up to ms for a note or a task
 * (holdings_wait.c). The ack may release answers waiting on it (acks.c). */
static void holdings_command(client *c) {
    uint32_t id;
    uint64_t ack, wait_ms = 0;
    int form = MASTER_HOLDINGS_ARRAY, i = 3;
    if (arg_is(c, i, "packed")) form = MASTER_HOLDINGS_PACKED, i++;
    if (form == MASTER_HOLDINGS_PACKED && arg_is(c, i, "slices")) form = MASTER_HOLDINGS_SLICES, i++;
    if (form != MASTER_HOLDINGS_ARRAY && arg_is(c, i, "tasks")) form |= MASTER_HOLDINGS_TASKS, i++;
    if (arg_is(c, i, "wait") && i + 1 < c->argc) {
        if (master_arg_u64(c, i + 1, 0, MASTER_HOLDINGS_WAIT_MAX, &wait_ms) != 0) return;
        i += 2;
    }
    if (i != c->argc) {
        reply_syntax_error(c);
        return;
    }
    if (master_holdings_node(c, 1, &id) != 0 || master_arg_u64(c, 2, 0, UINT64_MAX >> 1, &ack) != 0) return;
    master *m = master_of(c);
    mm_node_holdings_ack(m->meta, id, ack);
    acks_node_acked(m->acks, id);
    mm_node *n = mm_node_get(m->meta, id);
    if (n && wait_ms) n->acks_awaited = 1;
    int idle = n && !n->notes_n && !((form & MASTER_HOLDINGS_TASKS) && (n->tasks_waiting || n->chunks_push));
    if (wait_ms && m->pulls && idle) holdings_wait_park(m->pulls, c, id, form, wait_ms);
    else master_holdings_reply(c, id, 0, form);
}

/* A bad replica's place: a segment offset, or DISK (its disk record). */
static int bad_place(client *c, int i, uint64_t *off) {
    if (arg_is(c, i, "disk")) {
        *off = MM_ON_DISK;
        return 0;
    }
    return master_arg_u64(c, i, 0, PROTO_MAX_SEGMENT, off);
}

/* MOON.BADREPLICA id key seg_offset|DISK [...]: the node found these
 * replicas rotten, by its scrub or a read of its disk tier (and dropped
 * them). Reply: how many the master dropped (the others were gone or
 * moved already). */
static void badreplica_command(client *c) {
    uint32_t id;
    if (master_own_node(c, 1, &id) != 0) return;
    if ((c->argc - 2) % 2 || c->argc - 2 > 2 * PROTO_MAX_BATCH) {
        reply_syntax_error(c);
        return;
    }
    long long dropped = 0;
    uint64_t off;
    for (int i = 2; i < c->argc; i += 2) {
        if (bad_place(c, i + 1, &off) != 0) return;
        if (c->argv[i].len == 0 || c->argv[i].len > PROTO_MAX_KEY_LEN) {
            master_reply_fail(c, PROTO_ERR, "bad key length");
            return;
        }
    }
    for (int i = 2; i < c->argc; i += 2) {
        bad_place(c, i + 1, &off);
        dropped += mm_replica_bad(master_of(c)->meta, id, c->argv[i].ptr, c->argv[i].len, off, wall_ms());
    }
    reply_integer(c, dropped);
}

#define NOKEY 0, 0, 0
static const command recovery_commands[] = {
    {"moon.report", report_command, -3, CMD_WRITE | CMD_MEMBER, NOKEY, 0, "moonkv", "0.1.0",
     "Node reports extents it holds (after a master restart)",
     "key size crc replicas obj-offset seg-offset length [...] | PACKED blob"},
    {"moon.reportdone", reportdone_command, -1, CMD_WRITE | CMD_MEMBER, NOKEY, 0, "moonkv", "0.3.0",
     "Node finished reporting; names the members it knew", "[peer-id ...]"},
    {"moon.rebuild", rebuild_command, 1, CMD_WRITE | CMD_ADMIN | CMD_MEMBER, NOKEY, 0, "moonkv", "0.1.0",
     "Re-create objects from the reported extents now", ""},
    {"moon.badreplica", badreplica_command, -4, CMD_WRITE | CMD_MEMBER, NOKEY, 0, "moonkv", "0.4.0",
     "Node's scrub found replicas rotten: drop them so repair copies them again",
     "id key seg-offset [key seg-offset ...]"},
    {"moon.holdings", holdings_command, -3, CMD_FAST | CMD_MEMBER, NOKEY, 0, "moonkv", "0.3.0",
     "Node pulls the changes of what it holds, acknowledging the last ones",
     "id ack [PACKED [SLICES] [TASKS]] [WAIT ms]"},
};

void master_register_recovery_commands(server *srv) {
    commands_register(srv, recovery_commands, sizeof recovery_commands / sizeof recovery_commands[0]);
}
