#!/usr/bin/env bash
# tests/rdma-e2e.sh - end-to-end check of the RDMA transport on a machine
# with a real, active RDMA port (IB or RoCE). Not run by `make test`.
#
# Starts a master, two nodes and a gateway with --transport rdma on
# 127.0.0.1 (set MKV_RDMA_IP to an address on the RDMA NIC for RoCE),
# stores and reads back large values through redis-cli, and checks the
# nodes really exported over RDMA. Refuses to run without a device.
#
#   tests/rdma-e2e.sh [build-dir]      (default build/rel)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/rel}
server="$build/moonkv-server"
ip=${MKV_RDMA_IP:-127.0.0.1}
base=${MKV_RDMA_PORT:-27400}        # uses base .. base+9
secret=e2e-secret

active=0
for s in /sys/class/infiniband/*/ports/*/state; do
  [ -r "$s" ] && grep -q ACTIVE "$s" && active=$((active + 1))
done
if [ "$active" -eq 0 ]; then
  echo "rdma-e2e: refusing to run: no active RDMA port found (/sys/class/infiniband)." >&2
  echo "rdma-e2e: this test needs a machine with an RDMA device; nothing was tested." >&2
  exit 2
fi
[ -x "$server" ] || { echo "rdma-e2e: $server not built (run make)" >&2; exit 2; }
command -v redis-cli >/dev/null || { echo "rdma-e2e: redis-cli missing" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM

start() {   # start NAME ARGS...
  local name=$1; shift
  "$server" "$@" --cluster-secret "$secret" --transport rdma --log-level verbose \
    >"$work/$name.log" 2>&1 &
  pids+=($!)
}
wait_port() {
  for _ in $(seq 100); do redis-cli -h "$ip" -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "rdma-e2e: port $1 never answered" >&2; exit 1
}

start master --role master --bind "$ip" --port "$base"
wait_port "$base"
start node1 --role node --bind "$ip" --port $((base + 1)) --master "$ip:$base" \
  --segment-size 256MB --data-addrs "$ip:$((base + 2))" --segment-persist no
start node2 --role node --bind "$ip" --port $((base + 3)) --master "$ip:$base" \
  --segment-size 256MB --data-addrs "$ip:$((base + 4))" --segment-persist no
start gateway --role gateway --bind "$ip" --port $((base + 5)) --master "$ip:$base"
wait_port $((base + 5))
sleep 1

fail=0
for size in 4096 1048576 8388608; do
  head -c "$size" /dev/urandom | base64 -w0 >"$work/v$size"
  redis-cli -h "$ip" -p $((base + 5)) -x SET "k$size" <"$work/v$size" >/dev/null
  got=$(printf '%s' "$(redis-cli -h "$ip" -p $((base + 5)) GET "k$size")" | sha256sum)
  want=$(sha256sum <"$work/v$size")
  if [ "${got%% *}" = "${want%% *}" ]; then echo "ok - rdma round trip of $size bytes"
  else echo "not ok - rdma round trip of $size bytes"; fail=1; fi
done
for n in node1 node2; do
  if grep -q "rdma node: exporting" "$work/$n.log"; then echo "ok - $n exported its segment over rdma"
  else echo "not ok - $n did not export over rdma"; sed 's/^/    | /' "$work/$n.log" | tail -20; fail=1; fi
done
exit "$fail"
