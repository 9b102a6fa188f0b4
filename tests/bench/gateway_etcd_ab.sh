#!/usr/bin/env bash
# tests/bench/gateway_etcd_ab.sh BUILD [BEFORE_BUILD] - a gateway whose
# master is found through etcd (--etcd, no --master): SETs and GETs of
# 4 KiB with 16 clients (redis-benchmark -c 16, -P 1 and -P 16) through
# the gateway of BUILD and, given, the gateway of BEFORE_BUILD (a build
# dir of an earlier commit), alternated ROUNDS times (default 3), so each
# ratio compares gateways measured at the same moment. One etcd; each
# build its own cluster name, master, 2 nodes and gateway (replicas 1).
# Prints one line per round and row with the load, and the gateways'
# INFO gateway worker_master_waits (blocking calls on a worker that wait
# for the master) after the rounds. N requests per measurement (default
# 4000). Ports from the bench's range (lib.sh).
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build/rel}" && pwd)
BEFORE=${2:+$(cd "$2" && pwd)}
WORK=$(mktemp -d /tmp/moonkv-etcd-ab.XXXXXX)
. "$ROOT/tests/bench/lib.sh"
trap 'bench_cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM HUP
: >"$WORK/run.log"; : >"$WORK/meas.tsv"
N=${N:-4000} ROUNDS=${ROUNDS:-3}
command -v etcd >/dev/null || { echo "gateway_etcd_ab: etcd not installed (package etcd-server)" >&2; exit 1; }
command -v redis-benchmark >/dev/null || { echo "gateway_etcd_ab: redis-benchmark not installed" >&2; exit 1; }
cp "$BUILD/moonkv-server" "$WORK/after" || exit 1
[ -n "$BEFORE" ] && { cp "$BEFORE/moonkv-server" "$WORK/before" || exit 1; }

next_port && ECP=$PORT && next_port && EPP=$PORT || exit 1
ETCD=http://127.0.0.1:$ECP
start_bg etcd-$ECP etcd --data-dir "$WORK/etcd" --listen-client-urls "$ETCD" --advertise-client-urls "$ETCD" \
  --listen-peer-urls "http://127.0.0.1:$EPP" --initial-advertise-peer-urls "http://127.0.0.1:$EPP" \
  --initial-cluster "default=http://127.0.0.1:$EPP"
for ((i = 0; i < 150; i++)); do curl -s "$ETCD/health" 2>/dev/null | grep -q true && break; sleep 0.1; done

# cluster BIN NAME: master, 2 nodes and a gateway on BIN under cluster NAME; ADDR the gateway.
cluster() {
  local bin=$1 name=$2 mport rport dport i
  local common=(--etcd "$ETCD" --cluster-name "$name" --bind 127.0.0.1 --log-level warning)
  next_port && mport=$PORT || exit 1
  start_bg master-$mport "$bin" --role master --port "$mport" "${common[@]}"
  wait_resp 127.0.0.1 "$mport" "$BG_PID" || { echo "master did not start: $(log_tail master-$mport)" >&2; exit 1; }
  for ((i = 0; i < 2; i++)); do
    next_port && rport=$PORT && next_port && dport=$PORT || exit 1
    start_bg node-$rport "$bin" --role node --port "$rport" "${common[@]}" --segment-size 256MB \
      --data-addrs "127.0.0.1:$dport" --segment-persist no
    wait_resp 127.0.0.1 "$rport" "$BG_PID" || { echo "node did not start: $(log_tail node-$rport)" >&2; exit 1; }
  done
  for ((i = 0; i < 150; i++)); do
    [ "$(redis-cli -p "$mport" info cluster 2>/dev/null | awk -F: '/^nodes_alive:/ { print $2 + 0 }')" = 2 ] && break
    sleep 0.1
  done
  next_port || exit 1
  start_bg gateway-$PORT "$bin" --role gateway --port "$PORT" "${common[@]}" --replicas 1
  wait_resp 127.0.0.1 "$PORT" "$BG_PID" || { echo "gateway did not start: $(log_tail gateway-$PORT)" >&2; exit 1; }
  ADDR=127.0.0.1:$PORT
}

# rate ADDR TEST PIPELINE: requests per second.
rate() {
  redis-benchmark -h 127.0.0.1 -p "${1##*:}" -t "$2" -d 4096 -n "$N" -c 16 -P "$3" -r 1000 --csv 2>/dev/null |
    awk -F, -v t="${2^^}" '{ gsub(/"/, "") } $1 == t { print $2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
waits() { redis-cli -p "${1##*:}" info gateway 2>/dev/null | awk -F: '/^worker_master_waits:/ { print $2 + 0 }'; }

cluster "$WORK/after" ab-after; A=$ADDR
B=; [ -n "$BEFORE" ] && { cluster "$WORK/before" ab-before; B=$ADDR; }
rate "$A" set 16 >/dev/null; [ -n "$B" ] && rate "$B" set 16 >/dev/null   # keys for the GETs, warm
for ((i = 1; i <= ROUNDS; i++)); do
  for row in "set 1" "get 1" "set 16" "get 16"; do
    set -- $row
    a=$(rate "$A" "$1" "$2"); line="round $i: ${1^^} -c 16 -P $2: after $a/s"
    [ -n "$B" ] && { b=$(rate "$B" "$1" "$2"); line+=", before $b/s, after/before $(ratio "$a" "$b")"; }
    echo "$line, load $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
echo "worker_master_waits: after $(waits "$A")${B:+, before $(waits "$B" | grep . || echo "(no such field)")}"
