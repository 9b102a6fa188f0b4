#!/usr/bin/env bash
# tests/bench/run.sh BUILD_DIR - the `make bench` side-by-side benchmarks.
#
#   tests/bench/run.sh build/rel            full run, under 15 minutes on 2 cores
#   BENCH_QUICK=1 tests/bench/run.sh build/rel    about 2 minutes
#   BENCH_STEPS="1 3" tests/bench/run.sh build/rel  only some steps
#
# Steps: 1 small objects through RESP, 2 large objects through RESP,
# 3 libmoonkv zero-copy (with iperf3, memcpy, hiredis references),
# 4 striping over shaped links in network namespaces (root only),
# 5 KV-cache batch pattern, 6 master metadata rate and the rebuild rate
# after a master restart, the master's RSS per object at 10^6 and 10^7
# objects and its CPU among 1,000 simulated nodes (scale.sh), 7 the KV-cache
# pattern with 100 us of added round-trip time (network namespaces and a
# delaying relay, bench_relay: this kernel has no netem; root only),
# 8 master failover time through etcd (needs etcd, package etcd-server),
# the put rate kept while the master is killed with the acknowledged and
# readable counts, and the put rows next to the previous commit's build
# (BENCH_PREV_BUILD=DIR, a build dir of it; unset: those rows say so),
# 9 the calls inference engines make (multi-buffer batches through the
# Mooncake shim, the prefix count, the SGLang adapter; needs make python),
# 10 the node's disk tier store vs fio on the same disk (tests/bench/disk.sh),
# 11 libmoonkv from 1, 2 and 4 threads, one shared client vs a client per
# thread (tests/bench/threads.sh).
#
# A step whose prerequisite is missing (a role not built, no root, ...)
# leaves "skipped: <why>" rows; the run itself fails only on a broken
# script. Every server it starts is stopped on exit, ports are in
# 25000-25999 (bench_acked's from h_free_ports, as the tests'), traffic
# stays on 127.0.0.1 and our own namespaces.
# Output: one progress line per step, then the table, also saved with a
# CSV and a PNG plot in build/bench-results/ (not committed, so runs do not
# pile up in the tree). BENCH_KEEP=1: this run's three files replace those
# in tests/bench/results/, which holds only the run the docs cite (git
# keeps the earlier ones); commit them with the docs that quote them.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$ROOT" && cd "${1:-build/rel}" && pwd) || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
SERVER=$BUILD/moonkv-server
BENCH_BIN=$BUILD/tests/bench
LIBMOONKV=$BUILD/libmoonkv.so
QUICK=${BENCH_QUICK:-0}
STEPS=${BENCH_STEPS:-1 2 3 4 5 6 7 8 9 10 11}
RESULTS=$ROOT/build/bench-results
KEPT=$ROOT/tests/bench/results
WORK=$(mktemp -d /tmp/moonkv-bench.XXXXXX)
export BENCH_SECONDS=${BENCH_SECONDS:-$([ "$QUICK" = 1 ] && echo 0.5 || echo 1.5)}

. "$ROOT/tests/bench/lib.sh"
. "$ROOT/tests/bench/report.sh"
. "$ROOT/tests/bench/cluster.sh"
. "$ROOT/tests/bench/resp.sh"
. "$ROOT/tests/bench/capi.sh"
. "$ROOT/tests/bench/netns.sh"
. "$ROOT/tests/bench/failover.sh"
. "$ROOT/tests/bench/engines.sh"
. "$ROOT/tests/bench/disk.sh"
. "$ROOT/tests/bench/scale.sh"
. "$ROOT/tests/bench/groups.sh"
. "$ROOT/tests/bench/threads.sh"

on_exit() {
  bench_cleanup
  # Keep the logs of the last run for reading; the scratch dir goes.
  mkdir -p "$RESULTS" && cp "$WORK/run.log" "$RESULTS/last-run.log" 2>/dev/null
  rm -rf "$WORK"
}
trap on_exit EXIT
trap 'exit 130' INT TERM HUP
: >"$WORK/meas.tsv"; : >"$WORK/rows.tsv"; : >"$WORK/run.log"

for tool in redis-benchmark redis-cli ss; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is required (make deps)" >&2; exit 1; }
done
for bin in bench_client bench_meta bench_preload bench_rebuild; do
  [ -x "$BENCH_BIN/$bin" ] || { echo "bench: $BENCH_BIN/$bin missing: run make first" >&2; exit 1; }
done
# Run copies: the build directory is shared, and a `make` elsewhere during
# the run would relink (or remove) the binaries under us. A binary missing
# now stays missing, and its steps say so.
mkdir -p "$WORK/bin"
cp "$BENCH_BIN"/bench_client "$BENCH_BIN"/bench_meta "$BENCH_BIN"/bench_preload "$BENCH_BIN"/bench_rebuild "$WORK/bin/"
[ -x "$BENCH_BIN/bench_failover" ] && cp "$BENCH_BIN/bench_failover" "$WORK/bin/"
[ -x "$BENCH_BIN/bench_node_restart" ] && cp "$BENCH_BIN/bench_node_restart" "$WORK/bin/"
[ -x "$BENCH_BIN/bench_relay" ] && cp "$BENCH_BIN/bench_relay" "$WORK/bin/"
[ -x "$BENCH_BIN/bench_acked" ] && cp "$BENCH_BIN/bench_acked" "$WORK/bin/"
[ -x "$BENCH_BIN/bench_disk" ] && cp "$BENCH_BIN/bench_disk" "$WORK/bin/"
[ -x "$BENCH_BIN/bench_disk_zipf" ] && cp "$BENCH_BIN/bench_disk_zipf" "$WORK/bin/"
[ -x "$BENCH_BIN/bench_meta_scale" ] && cp "$BENCH_BIN/bench_meta_scale" "$WORK/bin/"
[ -x "$BENCH_BIN/bench_groups" ] && cp "$BENCH_BIN/bench_groups" "$WORK/bin/"
[ -x "$BENCH_BIN/bench_route" ] && cp "$BENCH_BIN/bench_route" "$WORK/bin/"
[ -x "$BUILD/tests/sim/node_sim" ] && cp "$BUILD/tests/sim/node_sim" "$WORK/bin/"
BENCH_BIN=$WORK/bin
[ -x "$SERVER" ] && cp "$SERVER" "$WORK/bin/" && SERVER=$WORK/bin/moonkv-server
[ -f "$LIBMOONKV" ] && cp "$LIBMOONKV" "$WORK/bin/" && LIBMOONKV=$WORK/bin/libmoonkv.so
# The Python binding (make python), copied the same way; missing: its rows skip.
BENCH_PY=$WORK/bin/python
[ -d "$BUILD/python/moonkv" ] && cp -r "$BUILD/python" "$BENCH_PY"
BENCH_SHIM=$WORK/bin/mooncake-shim
[ -d "$BUILD/mooncake-shim/mooncake" ] && cp -r "$BUILD/mooncake-shim" "$BENCH_SHIM"

echo "moonkv benchmarks ($([ "$QUICK" = 1 ] && echo quick || echo full)), logs in $RESULTS/last-run.log"
rows_before=0
run_step() {   # run_step N TITLE FUNCTION
  case " $STEPS " in *" $1 "*) ;; *) return 0;; esac
  step_begin "$1/11" "$2"
  "$3"
  local total skipped
  total=$(wc -l <"$WORK/rows.tsv")
  skipped=$(tail -n $((total - rows_before)) "$WORK/rows.tsv" | awk -F'\t' '$2 ~ /^skipped/' | wc -l)
  step_end "$((total - rows_before)) rows$([ "$skipped" -gt 0 ] && echo ", $skipped skipped")"
  rows_before=$total
}

run_step 1 "small objects through RESP (redis-benchmark, 64 B)" step_resp_small
run_step 2 "large objects through RESP (1 MiB, 4 MiB)" step_resp_large
run_step 3 "libmoonkv zero-copy put/get (tcp, shm) vs iperf3, memcpy, hiredis" step_capi
run_step 4 "striping over 1, 2, 4 shaped links (network namespaces)" step_stripe
run_step 5 "KV-cache pattern: 1000 x 256 KiB, batch vs loop" step_kvcache
run_step 6 "master metadata: put pairs per second, rebuild after kill -9, RSS per object, 1,000 nodes" step_meta
run_step 7 "KV-cache pattern with 100 us added RTT (relay-delayed), batch vs loop" step_kv_rtt
run_step 8 "master failover through etcd, puts kept through kills, put rows vs the previous build" step_failover
run_step 9 "inference engines' calls: multi-buffer batches, prefix exists, SGLang adapter" step_engines
run_step 10 "the node's disk tier store vs fio (O_DIRECT, same dir, bs, depth)" step_disk
run_step 11 "libmoonkv 256 KiB from 1, 2, 4 threads: one shared client vs a client per thread" step_threads

write_report "$RESULTS"
if [ "${BENCH_KEEP:-0}" = 1 ]; then
  rm -f "$KEPT"/*.md "$KEPT"/*.csv "$KEPT"/*.png && mkdir -p "$KEPT" &&
    cp "$RESULTS/$REPORT_STAMP".* "$KEPT/" && echo "kept: $KEPT/$REPORT_STAMP.* (the earlier ones removed from the tree)"
fi
