#!/usr/bin/env bash
# tests/bench/gateway_ab.sh BUILD [BEFORE_BUILD] - 1 MiB GETs with 4 clients
# (redis-benchmark -c 4, the row of make bench step 2) through redis-server,
# the gateway of BUILD and, given, the gateway of BEFORE_BUILD (a build dir
# of an earlier commit), alternated ROUNDS times (default 5) in one run, so
# every ratio compares servers measured at the same moment. Each gateway
# has its own master and 2 nodes (replicas 1, default transport); 20 keys
# preloaded. Prints one line per round with the load; N requests per
# measurement (default 1000); SIZE (bytes, default 1048576), P (pipeline
# depth, default 1) and C (clients, default 4) change the row measured.
# Ports from the bench's range (lib.sh).
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build/rel}" && pwd)
BEFORE=${2:+$(cd "$2" && pwd)}
WORK=$(mktemp -d /tmp/moonkv-ab.XXXXXX)
. "$ROOT/tests/bench/lib.sh"
. "$ROOT/tests/bench/cluster.sh"
trap 'bench_cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM HUP
: >"$WORK/run.log"; : >"$WORK/meas.tsv"
N=${N:-1000} ROUNDS=${ROUNDS:-5} KEYS=20 SIZE=${SIZE:-1048576} P=${P:-1} C=${C:-4}
# Run copies: a make elsewhere must not relink them under us.
cp "$BUILD/moonkv-server" "$WORK/after" && cp "$BUILD/tests/bench/bench_preload" "$WORK/" || exit 1
[ -n "$BEFORE" ] && { cp "$BEFORE/moonkv-server" "$WORK/before" || exit 1; }

rate() {
  redis-benchmark -h 127.0.0.1 -p "${1##*:}" -t get -d "$SIZE" -n "$N" -c "$C" -P "$P" -r "$KEYS" --csv 2>/dev/null |
    awk -F, '{ gsub(/"/, "") } $1 == "GET" { print $2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
# gateway BIN: a cluster with a gateway on BIN, its address in ADDR, preloaded.
gateway() {
  SERVER=$1 cluster_start 2 512MB 1 || { echo "gateway_ab: $SKIP_WHY" >&2; exit 1; }
  "$WORK/bench_preload" "$ADDR" "$KEYS" "$SIZE" >>"$WORK/run.log" 2>&1 || { echo "gateway_ab: preload failed" >&2; exit 1; }
}

start_redis || { echo "gateway_ab: $SKIP_WHY" >&2; exit 1; }
R=$ADDR
"$WORK/bench_preload" "$R" "$KEYS" "$SIZE" >>"$WORK/run.log" 2>&1
gateway "$WORK/after"; A=$ADDR
B=; [ -n "$BEFORE" ] && { gateway "$WORK/before"; B=$ADDR; }
rate "$R" >/dev/null; rate "$A" >/dev/null; [ -n "$B" ] && rate "$B" >/dev/null   # warm
for ((i = 1; i <= ROUNDS; i++)); do
  r=$(rate "$R"); a=$(rate "$A"); line="round $i: redis-server $r/s, gateway $a/s ($(ratio "$a" "$r"))"
  [ -n "$B" ] && { b=$(rate "$B"); line+=", before $b/s ($(ratio "$b" "$r")), after/before $(ratio "$a" "$b")"; }
  echo "$line, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
