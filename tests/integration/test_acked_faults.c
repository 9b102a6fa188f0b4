/* test_acked_faults - acknowledged means kept (issue 26): while a stream
 * of 4 KiB SETs runs through a gateway (replicas 2, 3 nodes) and a stream
 * of libmoonkv batch puts beside it, each recording every key answered OK,
 *
 *   - the master is killed -9 at a random moment and started again with
 *     the same flags, 5 times;
 *   - with etcd, the leader is killed -9 and the standby takes over (the
 *     killed one comes back as the standby), 5 times;
 *   - with etcd, the leader is SIGSTOPped for twice its lease and
 *     continued; etcd is killed -9 and started again on its data dir;
 *     etcd is SIGSTOPped for 10 s and continued.
 *
 * After each, every acknowledged key must read back byte-exact within 10 s
 * of the new master being ready (and again at the end of each part, so a
 * later fault losing an earlier key is seen). In the stall cases, the old
 * leader must refuse to place anything once it runs again, and writes must
 * be acknowledged again within 2 s of a new leader's election. Counts are
 * printed as "# ..." lines; the processes' logs are kept when a case
 * fails. docs/FAULTS.md says more. MKV_FAULTS_SEED fixes the moments;
 * MKV_FAULTS_TRACE=1 prints every failed put and each fault's moments
 * (mono_ms) on stderr. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "faults_harness.h"
#include "stream_harness.h"
#include "test.h"

#define KILLS        5
#define LEASE_S      2          /* the SIGSTOP lasts twice this */
#define VAL_LEN      4096
#define STREAM_RATE  1000       /* keys per second per stream */
#define STREAM_MAX   30000      /* keys per stream per round: the bound of a round's stream */
/* The issue's bounds, in the plain build; a sanitizer build's servers
 * (2-5x slower) missed 2 s by 100-200 ms beside other binaries */
#define READ_BACK_MS (10000 * H_TIME_SCALE)   /* ready to every acknowledged key read */
#define WRITES_BACK_MS (2000 * H_TIME_SCALE)  /* a new leader to the first acknowledged put */
#define ETCD_STOP_MS 10000
#define MAX_ROUNDS   (KILLS + 3)
#define TIME_LIMIT_S 540

enum { GW, LIB, KINDS };
static const char *const KIND_NAME[KINDS] = {"gateway SETs", "libmoonkv batch puts"};

/* One fault with the streams running through it. */
typedef struct fa_round {
    st_stream s[KINDS];
    st_result res[KINDS];
    long long back_ms[KINDS];   /* the new leader (or the fault's end) to the first OK; -1: none */
    long long acked_before;     /* acknowledgements before the fault, both streams */
    uint64_t t_event, t_over, t_back, t_ready;   /* the fault, its end, writes due back, ready */
    fx_watch w;
    int old_refused;            /* the old leader refused a placement after the fault */
    char old_said[160];
} fa_round;

typedef int fa_fault(fx_cluster *c, fa_round *r);

static fx_cluster cl;
static fa_round rounds[MAX_ROUNDS];
static int nrounds, any_failed;   /* any_failed: keep the cluster's logs */

static void cleanup(void) {
    if (cl.with_etcd) h_etcd_remove(&cl.etcd);
}

/* ---- faults: each returns once the cluster has a ready master again ---- */

static int fault_restart(fx_cluster *c, fa_round *r) {
    int rc = fx_kill_restart(c);
    r->t_over = mono_ms();
    if (rc != 0) return -1;
    return fx_wait_ready(c, &r->w, 1) < 0 ? -1 : 0;
}

static int fault_failover(fx_cluster *c, fa_round *r) {
    r->t_over = mono_ms();   /* the kill is the fault: the standby is on its own from there */
    return fx_kill_failover(c, &r->w);
}

/* After SIGCONT: the old leader at once, then until it stands by (or it
 * exited, and comes back as the standby). */
static int old_leader_steps_down(fx_cluster *c, fa_round *r, int old) {
    r->old_refused = fx_refuses_placement(c, old, r->old_said, sizeof r->old_said);
    uint64_t end = mono_ms() + FX_WAIT_MS;
    char role[32] = "";
    while (mono_ms() < end && strcmp(role, "standby") != 0) {
        int status;
        if (fx_exited(c->master[old], &status)) {
            printf("# the old leader exited (status 0x%x): started again as the standby\n", status);
            c->master[old] = -1;
            return fx_start_master(c, old) > 0 && h_wait_role(fx_master_port(c, old), "standby", FX_WAIT_MS) == 0
                       ? 0 : -1;
        }
        h_ha_role(fx_master_port(c, old), role, sizeof role);
        usleep(50 * 1000);
    }
    return strcmp(role, "standby") == 0 ? 0 : -1;
}

static int fault_leader_sigstop(fx_cluster *c, fa_round *r) {
    int old = c->lead;
    if (h_sigstop(c->master[old]) != 0) return -1;
    r->w.skip = old;
    fx_watch_for(c, &r->w, 2 * LEASE_S * 1000);
    int ready = fx_wait_ready(c, &r->w, 1);
    kill(c->master[old], SIGCONT);
    r->t_over = mono_ms();
    r->w.skip = -1;
    int back = old_leader_steps_down(c, r, old);
    return ready >= 0 && back == 0 ? 0 : -1;
}

/* After etcd ran again: a lease lost meanwhile is noticed within the lease
 * (watched, to see a new term), then some master leads, rebuilt. The one
 * that does not lead must refuse placements. */
static int after_etcd_fault(fx_cluster *c, fa_round *r) {
    fx_watch_for(c, &r->w, LEASE_S * 1000 + 1000);
    if (fx_wait_ready(c, &r->w, 0) < 0) return -1;
    r->old_refused = fx_refuses_placement(c, !c->lead, r->old_said, sizeof r->old_said);
    return 0;
}

static int fault_etcd_kill(fx_cluster *c, fa_round *r) {
    h_kill(c->etcd.pid);
    c->etcd.pid = -1;
    int rc = h_etcd_spawn(&c->etcd);
    r->t_over = mono_ms();
    if (rc != 0) return -1;
    return after_etcd_fault(c, r);
}

static int fault_etcd_sigstop(fx_cluster *c, fa_round *r) {
    if (h_sigstop(c->etcd.pid) != 0) return -1;
    fx_watch_for(c, &r->w, ETCD_STOP_MS);
    kill(c->etcd.pid, SIGCONT);
    r->t_over = mono_ms();
    return after_etcd_fault(c, r);
}

/* ---- a round ---- */

static void stream_init(st_stream *s, int kind, const char *tag, int round) {
    memset(s, 0, sizeof *s);
    s->kind = kind == GW ? ST_GATEWAY : ST_LIBMOONKV;
    s->gw_port = fx_port(&cl, FX_P_GATEWAY);
    fx_client_options(&cl, &s->opt);
    s->replicas = 2;
    snprintf(s->name, sizeof s->name, "%s%d%s", tag, round, kind == GW ? "g" : "b");
    s->vlen = VAL_LEN;
    s->max_keys = STREAM_MAX;
    s->rate = STREAM_RATE;
}

/* Until both streams have min acknowledgements: 0, or -1 after 20 s. */
static int streams_flowing(fa_round *r, long long min) {
    uint64_t end = mono_ms() + 20000;
    while (mono_ms() < end && (st_acks(&r->s[GW]) < min || st_acks(&r->s[LIB]) < min)) usleep(20 * 1000);
    return st_acks(&r->s[GW]) >= min && st_acks(&r->s[LIB]) >= min ? 0 : -1;
}

/* The first acknowledgement of each stream at or after t_back, waited
 * for (bounded), in ms from t_back. */
static void writes_back(fa_round *r) {
    uint64_t end = mono_ms() + 15000;
    for (int k = 0; k < KINDS; k++) {
        uint64_t first;
        while (!(first = st_first_ack_since(&r->s[k], r->t_back)) && mono_ms() < end) usleep(20 * 1000);
        r->back_ms[k] = first ? (long long)(first - r->t_back) : -1;
    }
}

/* Streams through one fault (keys "<tag><round>g-N", "...b-N"), then the
 * check of their keys. 0, or -1 when the cluster did not come back (said
 * on a "#" line). */
static int run_round(const char *label, const char *tag, fa_fault *fault) {
    fa_round *r = &rounds[nrounds];
    memset(r, 0, sizeof *r);
    for (int k = 0; k < KINDS; k++) stream_init(&r->s[k], k, tag, nrounds);
    nrounds++;
    for (int k = 0; k < KINDS; k++)
        if (st_start(&r->s[k]) != 0) return -1;
    if (streams_flowing(r, 50) != 0) {
        printf("# %s: the streams did not flow: gateway \"%s\", libmoonkv \"%s\"\n", label, r->s[GW].last_err,
               r->s[LIB].last_err);
        return -1;
    }
    usleep((useconds_t)(200 + rand() % 800) * 1000);   /* a random moment */
    fx_watch_begin(&cl, &r->w);
    r->acked_before = st_acks(&r->s[GW]) + st_acks(&r->s[LIB]);
    r->t_event = mono_ms();
    int rc = fault(&cl, r);
    r->t_ready = r->w.ready_ms;
    r->t_back = r->w.elected_ms ? r->w.elected_ms : r->t_over;
    if (getenv("MKV_FAULTS_TRACE"))   /* the moments the streams' traces are read against */
        fprintf(stderr, "trace %s round %d: fault %llu, over %llu, elected %llu, ready %llu\n", label, nrounds,
                (unsigned long long)r->t_event, (unsigned long long)r->t_over, (unsigned long long)r->w.elected_ms,
                (unsigned long long)r->w.ready_ms);
    if (rc == 0) writes_back(r);
    usleep(300 * 1000);
    for (int k = 0; k < KINDS; k++) st_stop(&r->s[k]);
    if (rc != 0) {
        printf("# %s round %d: the cluster did not come back (no leader with its table rebuilt)\n", label, nrounds);
        return -1;
    }
    for (int k = 0; k < KINDS; k++) st_check(&r->s[k], r->t_ready + READ_BACK_MS, r->t_event, 0, &r->res[k]);
    printf("# %s round %d: fault after %lld acknowledged; %s %lld ms after it, ready after %lld ms (term %lld -> %lld)\n",
           label, nrounds, r->acked_before, r->w.elected_ms ? "new leader" : "no new term",
           r->w.elected_ms ? (long long)(r->w.elected_ms - r->t_event) : 0, (long long)(r->t_ready - r->t_event),
           r->w.term0, r->w.term);
    for (int k = 0; k < KINDS; k++) {
        const st_result *x = &r->res[k];
        printf("#   %s: acknowledged %lld, lost %lld", KIND_NAME[k], x->acked, x->lost);
        if (x->lost)
            printf(" (acknowledged %lld..%lld ms after the fault; %lld unanswered, the last error: %s)", x->lost_from,
                   x->lost_to, x->unanswered, x->unanswered ? x->last_err : "-");
        printf(", wrong %lld; first OK %lld ms after the %s; longest pause %llu ms\n", x->wrong, r->back_ms[k],
               r->w.elected_ms ? "election" : "fault's end",
               (unsigned long long)st_longest_pause(&r->s[k], r->t_event - 1000, r->t_ready));
    }
    return 0;
}

/* Totals of rounds [from, to) of kind k. */
static st_result totals(int from, int to, int k) {
    st_result t = {0};
    for (int i = from; i < to; i++) {
        t.acked += rounds[i].res[k].acked;
        t.lost += rounds[i].res[k].lost;
        t.wrong += rounds[i].res[k].wrong;
    }
    return t;
}

/* Every key of rounds [from, to) again, after all their faults: losses
 * that a later fault caused, counted into the rounds' results. */
static void recheck(int from, int to) {
    uint64_t now = mono_ms();
    for (int i = from; i < to; i++)
        for (int k = 0; k < KINDS; k++) {
            st_result again;
            st_check(&rounds[i].s[k], now + READ_BACK_MS, rounds[i].t_event, 1, &again);
            if (again.lost > rounds[i].res[k].lost || again.wrong > rounds[i].res[k].wrong)
                printf("# round %d %s: lost %lld, wrong %lld at the end of the part (after its own fault: %lld, %lld)\n",
                       i + 1, KIND_NAME[k], again.lost, again.wrong, rounds[i].res[k].lost, rounds[i].res[k].wrong);
            if (again.lost > rounds[i].res[k].lost) rounds[i].res[k].lost = again.lost;
            if (again.wrong > rounds[i].res[k].wrong) rounds[i].res[k].wrong = again.wrong;
        }
}

/* ---- the cases ---- */

/* A part: rounds [first, end) on one cluster. */
typedef struct fa_part {
    const char *name, *tag;
    int first, end, ok;
} fa_part;

static fa_part part;
static int case_kind;

/* The totals of a kills part for case_kind: 0 lost, 0 wrong. */
static void kills_case(void) {
    ASSERT_MSG(part.ok, "the cluster did not come back after a kill (see # lines)");
    st_result t = totals(part.first, part.end, case_kind);
    printf("# %s, %d kills: %s acknowledged %lld, lost %lld, wrong %lld\n", part.name, part.end - part.first,
           KIND_NAME[case_kind], t.acked, t.lost, t.wrong);
    ASSERT(t.acked > 0);
    ASSERT_EQ(t.lost, 0);
    ASSERT_EQ(t.wrong, 0);
}

/* KILLS kills of the master by fault, then a case per stream kind. */
static void run_kills(const char *name, const char *tag, fa_fault *fault) {
    static char names[2][KINDS][80];
    int at = !!cl.with_etcd;
    part = (fa_part){name, tag, nrounds, nrounds, 1};
    for (int i = 0; i < KILLS && part.ok; i++) part.ok = run_round(name, tag, fault) == 0;
    part.end = nrounds;
    if (part.ok) recheck(part.first, part.end);
    for (case_kind = 0; case_kind < KINDS; case_kind++) {
        snprintf(names[at][case_kind], sizeof names[at][case_kind], "%s/%s_survive_%d_kills", name,
                 case_kind == GW ? "gateway_sets" : "batch_puts", KILLS);
        RUN_TEST_NAMED(kills_case, names[at][case_kind]);
        any_failed |= test_case_failed;
    }
}

/* One stall round (the last one run): both streams kept every key, the
 * old leader refused, and writes came back within 2 s of the new leader. */
static void stall_case(void) {
    ASSERT_MSG(part.ok, "the cluster did not come back (see # lines)");
    fa_round *r = &rounds[nrounds - 1];
    for (int k = 0; k < KINDS; k++) {
        ASSERT(r->res[k].acked > 0);
        ASSERT_MSG(r->res[k].lost == 0 && r->res[k].wrong == 0,
                   "%s: %lld of %lld acknowledged not read back (%lld of them unanswered), %lld wrong", KIND_NAME[k],
                   r->res[k].lost, r->res[k].acked, r->res[k].unanswered, r->res[k].wrong);
    }
    ASSERT_MSG(r->old_refused, "the old leader answered a placement: %s", r->old_said);
    for (int k = 0; k < KINDS; k++)
        ASSERT_MSG(r->back_ms[k] >= 0 && r->back_ms[k] <= WRITES_BACK_MS, "%s: first OK %lld ms after the %s",
                   KIND_NAME[k], r->back_ms[k], r->w.elected_ms ? "election" : "fault's end");
}

static void run_stall(const char *name, const char *tag, fa_fault *fault) {
    part = (fa_part){name, tag, nrounds, nrounds + 1, 1};
    part.ok = run_round(name, tag, fault) == 0;
    RUN_TEST_NAMED(stall_case, name);
    any_failed |= test_case_failed;
}

/* Every key acknowledged on this cluster, read once more after all its
 * faults: a later fault must not lose an earlier key. */
static void everything_still_there(void) {
    recheck(0, nrounds);
    for (int k = 0; k < KINDS; k++) {
        st_result t = totals(0, nrounds, k);
        printf("# after all %d faults: %s acknowledged %lld, lost %lld, wrong %lld\n", nrounds, KIND_NAME[k],
               t.acked, t.lost, t.wrong);
        ASSERT_MSG(t.lost == 0 && t.wrong == 0, "%s: %lld lost, %lld wrong", KIND_NAME[k], t.lost, t.wrong);
    }
}

static void free_rounds(void) {
    for (int i = 0; i < nrounds; i++)
        for (int k = 0; k < KINDS; k++) st_free(&rounds[i].s[k]);
    nrounds = 0;
}

static int start_cluster(int with_etcd, const char *what) {
    char why[160] = "";
    memset(&cl, 0, sizeof cl);
    cl.with_etcd = with_etcd;
    cl.lease_s = LEASE_S;
    cl.segment = "1GB";
    cl.cluster = "acked-faults";
    any_failed = 0;
    if (fx_start(&cl, why, sizeof why) == 0) return 0;
    printf("not ok - %s/setup: %s\n", what, why);
    fx_stop(&cl, 1);
    return -1;
}

static void end_cluster(const char *what, uint64_t t0) {
    fx_stop(&cl, any_failed);
    free_rounds();
    printf("# %s: %.1f s\n", what, (double)(mono_ms() - t0) / 1000.0);
}

int main(void) {
    h_init(TIME_LIMIT_S);
    h_cleanup_hook = cleanup;
    const char *e = getenv("MKV_FAULTS_SEED");
    unsigned seed = e ? (unsigned)atoi(e) : (unsigned)time(NULL);
    srand(seed);
    printf("# MKV_FAULTS_SEED=%u\n", seed);
    int setup_failed = 0;

    uint64_t t0 = mono_ms();
    if (start_cluster(0, "restart") == 0) {
        run_kills("restart", "r", fault_restart);
        end_cluster("restart part", t0);
    } else {
        setup_failed = 1;
    }

    t0 = mono_ms();
    if (start_cluster(1, "failover") == 0) {
        run_kills("failover", "f", fault_failover);
        run_stall("stall/leader_sigstop_twice_the_lease", "s", fault_leader_sigstop);
        run_stall("stall/etcd_kill9_and_restart", "k", fault_etcd_kill);
        run_stall("stall/etcd_sigstop_10s", "e", fault_etcd_sigstop);
        RUN_TEST_NAMED(everything_still_there, "failover/every_key_readable_at_the_end");
        any_failed |= test_case_failed;
        end_cluster("failover and stall part", t0);
    } else {
        setup_failed = 1;
    }
    h_stop_all();
    if (setup_failed) return 1;
    TEST_EXIT();
}
