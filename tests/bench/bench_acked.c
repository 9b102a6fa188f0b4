/* bench_acked.c - the put rate kept while the master is killed, and
 * whether every acknowledged put is still there: a master and three
 * nodes (replicas 2) with a gateway; with "failover", etcd and a standby
 * master. A stream of 4 KiB SETs through the gateway, as fast as one
 * connection goes, and a stream of libmoonkv batch puts (16 x 4 KiB)
 * offered at LIB_RATE keys/s (as fast as it goes it took the cores from
 * the gateway's, and stored 10^5 keys a round to read back); each round
 * measures their rate for 2 s, kills the master (-9), restarts it with
 * the same flags (restart) or lets the standby take over (failover; the
 * killed one comes back as the standby), measures the rate over the
 * WINDOW_MS from the kill, stops, and reads every acknowledged key back
 * (within 10 s of the new master being ready). The streams and the
 * cluster are the fault-injection test's (test_acked_faults).
 *
 *   bench_acked restart|failover ROUNDS
 *
 * The server is $MOONKV_SERVER, etcd is etcd from PATH; ports from
 * h_free_ports. Output (bench.h), for MODE and KIND gw or lib:
 * faults.MODE.KIND.{rate_before,rate_kept} puts/s (summed over rounds
 * before / within the window), faults.MODE.KIND.{acked,readable} count,
 * faults.MODE.outage median longest pause in s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "integration/faults_harness.h"
#include "integration/stream_harness.h"

#define MAX_ROUNDS  10
#define BEFORE_MS   2000
#define WINDOW_MS   6000
#define READ_MS     10000
#define VAL_LEN     4096
#define LIB_RATE    4000
#define STREAM_MAX  100000   /* keys per stream per round; at 4 KiB and replicas 2, 800 MB at most */

enum { GW, LIB, KINDS };
static const char *const KIND[KINDS] = {"gw", "lib"};

typedef struct ab_sum {
    long long before[KINDS], kept[KINDS], acked[KINDS], readable[KINDS];
    uint64_t before_ms, window_ms;
    long long outage_ms[MAX_ROUNDS];
} ab_sum;

static fx_cluster cl;

static void cleanup(void) {
    if (cl.with_etcd) h_etcd_remove(&cl.etcd);
}

/* Acknowledgements of s in [from, to). */
static long long acks_between(const st_stream *s, uint64_t from, uint64_t to) {
    long long n = 0;
    for (int i = 0; i < s->tried; i++) n += s->ack_ms[i] >= from && s->ack_ms[i] < to;
    return n;
}

static int kill_master(fx_watch *w) {
    if (!cl.with_etcd) return fx_kill_restart(&cl) == 0 && fx_wait_ready(&cl, w, 1) >= 0 ? 0 : -1;
    return fx_kill_failover(&cl, w);
}

static int one_round(int round, ab_sum *sum) {
    st_stream s[KINDS];
    memset(s, 0, sizeof s);
    for (int k = 0; k < KINDS; k++) {
        s[k].kind = k == GW ? ST_GATEWAY : ST_LIBMOONKV;
        s[k].gw_port = fx_port(&cl, FX_P_GATEWAY);
        fx_client_options(&cl, &s[k].opt);
        s[k].replicas = 2;
        snprintf(s[k].name, sizeof s[k].name, "ab%d-%d%s", (int)getpid(), round, KIND[k]);
        s[k].vlen = VAL_LEN;
        s[k].max_keys = STREAM_MAX;
        s[k].rate = k == LIB ? LIB_RATE : 0;
        if (st_start(&s[k]) != 0) return -1;
    }
    uint64_t t0 = mono_ms();
    usleep(BEFORE_MS * 1000);
    fx_watch w;
    fx_watch_begin(&cl, &w);
    uint64_t kill_at = mono_ms();
    int rc = kill_master(&w);
    uint64_t end = kill_at + WINDOW_MS;
    while (mono_ms() < end) usleep(20 * 1000);
    for (int k = 0; k < KINDS; k++) st_stop(&s[k]);
    long long outage = 0;
    for (int k = 0; k < KINDS && rc == 0; k++) {
        st_result res;
        st_check(&s[k], w.ready_ms + READ_MS, kill_at, 0, &res);
        long long before = acks_between(&s[k], t0, kill_at), kept = acks_between(&s[k], kill_at, end);
        long long pause = (long long)st_longest_pause(&s[k], kill_at - 1000, end);
        if (pause > outage) outage = pause;
        sum->before[k] += before;
        sum->kept[k] += kept;
        sum->acked[k] += res.acked;
        sum->readable[k] += res.acked - res.lost - res.wrong;
        fprintf(stderr, "round %d %s: %.0f puts/s before the kill, %.0f in the %d ms from it; acknowledged %lld, "
                "lost %lld, wrong %lld; longest pause %lld ms\n", round, KIND[k],
                (double)before * 1000.0 / (double)(kill_at - t0), (double)kept * 1000.0 / WINDOW_MS, WINDOW_MS,
                res.acked, res.lost, res.wrong, pause);
    }
    sum->before_ms += kill_at - t0;
    sum->window_ms += WINDOW_MS;
    sum->outage_ms[round] = outage;
    for (int k = 0; k < KINDS; k++) st_free(&s[k]);
    return rc;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static void report(const char *mode, ab_sum *sum, int rounds) {
    char name[96];
    for (int k = 0; k < KINDS; k++) {
        snprintf(name, sizeof name, "faults.%s.%s.rate_before", mode, KIND[k]);
        bench_result(name, (double)sum->before[k] * 1000.0 / (double)sum->before_ms, "puts/s");
        snprintf(name, sizeof name, "faults.%s.%s.rate_kept", mode, KIND[k]);
        bench_result(name, (double)sum->kept[k] * 1000.0 / (double)sum->window_ms, "puts/s");
        snprintf(name, sizeof name, "faults.%s.%s.acked", mode, KIND[k]);
        bench_result(name, (double)sum->acked[k], "count");
        snprintf(name, sizeof name, "faults.%s.%s.readable", mode, KIND[k]);
        bench_result(name, (double)sum->readable[k], "count");
    }
    qsort(sum->outage_ms, (size_t)rounds, sizeof sum->outage_ms[0], cmp_ll);
    snprintf(name, sizeof name, "faults.%s.outage", mode);
    bench_result(name, (double)sum->outage_ms[rounds / 2] / 1000.0, "s");
}

static void skip_all(const char *mode, const char *why) {
    char name[96];
    static const char *const what[] = {"rate_before", "rate_kept", "acked", "readable"};
    for (int k = 0; k < KINDS; k++)
        for (int i = 0; i < 4; i++) {
            snprintf(name, sizeof name, "faults.%s.%s.%s", mode, KIND[k], what[i]);
            bench_skip(name, "%s", why);
        }
    snprintf(name, sizeof name, "faults.%s.outage", mode);
    bench_skip(name, "%s", why);
}

int main(int argc, char **argv) {
    int rounds = argc == 3 ? atoi(argv[2]) : 0;
    if (argc != 3 || (strcmp(argv[1], "restart") && strcmp(argv[1], "failover")) || rounds < 1 ||
        rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: bench_acked restart|failover ROUNDS(1..%d)\n", MAX_ROUNDS);
        return 2;
    }
    const char *mode = argv[1];
    h_init(600);
    h_cleanup_hook = cleanup;
    cl.with_etcd = !strcmp(mode, "failover");
    cl.lease_s = 2;
    cl.segment = "2GB";
    cl.cluster = "bench-acked";
    char why[160];
    if (fx_start(&cl, why, sizeof why) != 0) {
        skip_all(mode, why);
        fx_stop(&cl, 1);
        h_stop_all();
        return 0;
    }
    ab_sum sum;
    memset(&sum, 0, sizeof sum);
    int done = 0;
    while (done < rounds && one_round(done, &sum) == 0) done++;
    if (done < rounds) skip_all(mode, "the cluster did not come back after a kill: see the run log");
    else report(mode, &sum, rounds);
    fx_stop(&cl, done < rounds);
    h_stop_all();
    return 0;
}
