#!/usr/bin/env bash
# tests/bench/gateway_groups_ab.sh BUILD [BEFORE_BUILD] - a gateway over
# master groups (--groups yes, docs/GATEWAY.md "Over master groups"):
# redis-benchmark SET then GET through the gateway of BUILD and, given,
# the gateway of BEFORE_BUILD (a build dir of an earlier commit), the two
# alternated ROUNDS times (default 3) in one run, so each after/before
# ratio compares gateways measured at the same moment. One etcd, two
# groups (a: slots 0-8191, b: the rest), one master and one node each,
# all on BUILD's server; both gateways on the same cluster, replicas 1.
# N requests per measurement (default 20000), SIZE bytes (default 64),
# P pipeline depth (default 16), C clients (default 50), keys from a
# space of KEYS (default 10000: the GETs find what the SETs stored, a
# SET of a stored key with the same bytes answers OK). Prints one line
# per round with the load. Needs etcd (package etcd-server).
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build/rel}" && pwd)
BEFORE=${2:+$(cd "$2" && pwd)}
WORK=$(mktemp -d /tmp/moonkv-gab.XXXXXX)
. "$ROOT/tests/bench/lib.sh"
trap 'bench_cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM HUP
: >"$WORK/run.log"
N=${N:-20000} ROUNDS=${ROUNDS:-3} SIZE=${SIZE:-64} P=${P:-16} C=${C:-50} KEYS=${KEYS:-10000}
CLUSTER=gab
command -v etcd >/dev/null || { echo "gateway_groups_ab: etcd not installed" >&2; exit 1; }
# Run copies: a make elsewhere must not relink them under us.
cp "$BUILD/moonkv-server" "$WORK/after" || exit 1
[ -n "$BEFORE" ] && { cp "$BEFORE/moonkv-server" "$WORK/before" || exit 1; }

die() { echo "gateway_groups_ab: $*" >&2; exit 1; }
next_port && EP=$PORT && next_port && PP=$PORT || die "no free port"
ETCD=http://127.0.0.1:$EP
start_bg etcd etcd --data-dir "$WORK/etcd" --listen-client-urls "$ETCD" --advertise-client-urls "$ETCD" \
  --listen-peer-urls "http://127.0.0.1:$PP" --initial-advertise-peer-urls "http://127.0.0.1:$PP" \
  --initial-cluster "default=http://127.0.0.1:$PP"
for ((i = 0; i < 100; i++)); do curl -sf "$ETCD/health" >/dev/null && break; sleep 0.1; done
# role NAME BIN ROLE FLAGS...: a server on a fresh port, through etcd; its port in $PORT.
role() {
  local name=$1 bin=$2 r=$3; shift 3
  next_port || die "no free port"
  local port=$PORT
  start_bg "$name" "$bin" --role "$r" --port "$port" --etcd "$ETCD" --cluster-name "$CLUSTER" "$@"
  wait_resp 127.0.0.1 "$port" "$BG_PID" || die "$name did not start: $(log_tail "$name")"
  PORT=$port
}
role master-a "$WORK/after" master --group=a --slots=0-8191
role master-b "$WORK/after" master --group=b --slots=8192-16383
for g in a b; do
  next_port || die "no free port"
  role "node-$g" "$WORK/after" node --group="$g" --segment-size 512MB --data-addrs "127.0.0.1:$PORT" \
    --segment-persist no   # no segment file left in /dev/shm per run
done
sleep 3   # the nodes register and the masters read the slot map
role gw-after "$WORK/after" gateway --groups yes --replicas 1; A=$PORT
B=; [ -n "$BEFORE" ] && { role gw-before "$WORK/before" gateway --groups yes --replicas 1; B=$PORT; }

rate() {   # rate PORT OP
  redis-benchmark -h 127.0.0.1 -p "$1" -t "$2" -d "$SIZE" -n "$N" -c "$C" -P "$P" -r "$KEYS" --csv 2>/dev/null |
    awk -F, -v op="${2^^}" '{ gsub(/"/, "") } $1 == op { print $2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
rate "$A" set >/dev/null; [ -n "$B" ] && rate "$B" set >/dev/null   # warm, and the keys stored
for ((i = 1; i <= ROUNDS; i++)); do
  for op in set get; do
    a=$(rate "$A" "$op"); line="round $i $op ${SIZE}B -P $P -c $C: after $a/s"
    [ -n "$B" ] && { b=$(rate "$B" "$op"); line+=", before $b/s, after/before $(ratio "$a" "$b")"; }
    echo "$line, load $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
