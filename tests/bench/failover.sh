# tests/bench/failover.sh - step 8 of run.sh: master failover time with
# etcd (bench_failover.c): kill -9 of the leader to the standby leading
# and to the first successful put and get, through libmoonkv and through
# the gateway, medians of 5 rounds, with a 2 s lease. The budget
# is 3 s; the election measured in the same run shows what the clients
# add to it.

FAILOVER_LEASE_S=2
FAILOVER_BUDGET_S=3
FAILOVER_NAMES="failover.elect failover.lib_put failover.lib_get failover.gw_put failover.gw_get"

failover_skip_all() { local n; for n in $FAILOVER_NAMES; do meas_skip "$n" "$1"; done; }

failover_measure() {
  command -v etcd >/dev/null || { failover_skip_all "etcd not installed (package etcd-server)"; return; }
  [ -x "$BENCH_BIN/bench_failover" ] || { failover_skip_all "bench_failover not built"; return; }
  [ -x "$SERVER" ] || { failover_skip_all "$SERVER not built"; return; }
  local ports="" i
  for ((i = 0; i < 12; i++)); do
    next_port || { failover_skip_all "no free port"; return; }
    ports+="${ports:+,}$PORT"
  done
  MOONKV_SERVER=$SERVER timeout 400 "$BENCH_BIN/bench_failover" "$ports" "$FAILOVER_LEASE_S" 5 \
    2>>"$WORK/run.log" | meas_import ""
}

# The restart of a node holding NODE_RESTART_COUNT objects of 4 KiB in a
# NODE_RESTART_SEGMENT segment file (bench_node_restart.c): kill -9 to its
# objects served again, split into the CRC32C proof and the rest, the
# proof's GB/s next to crc32c of memory in the same run. The file goes on
# a tmpfs with huge pages, mounted in a private mount namespace (unshare
# -m), when that works, else in /dev/shm (4 KiB pages).
NODE_RESTART_COUNT=${NODE_RESTART_COUNT:-1000000}
NODE_RESTART_SEGMENT=${NODE_RESTART_SEGMENT:-4400MB}
NODE_RESTART_NAMES="node_restart.serving node_restart.proof node_restart.rest node_restart.proof_gbps"

node_restart_measure() {
  local n ports="" i mnt
  if [ ! -x "$BENCH_BIN/bench_node_restart" ]; then
    for n in $NODE_RESTART_NAMES; do meas_skip "$n" "bench_node_restart not built"; done
    return
  fi
  for ((i = 0; i < 3; i++)); do
    next_port || { for n in $NODE_RESTART_NAMES; do meas_skip "$n" "no free port"; done; return; }
    ports+="${ports:+,}$PORT"
  done
  mnt=$(mktemp -d /tmp/moonkv-restart-mnt.XXXXXX)
  NODE_RESTART_FS="/dev/shm"
  if unshare -m sh -c 'mount -t tmpfs -o huge=always,size=6g none "$1"' _ "$mnt" 2>/dev/null; then
    NODE_RESTART_FS="tmpfs huge=always"
  fi
  # shellcheck disable=SC2016
  MOONKV_SERVER=$SERVER unshare -m sh -c '
    if mount -t tmpfs -o huge=always,size=6g none "$1" 2>/dev/null; then dir=$1; else dir=/dev/shm; fi
    shift; exec timeout 900 "$@" "$dir"' _ "$mnt" "$BENCH_BIN/bench_node_restart" "$ports" \
    "$NODE_RESTART_COUNT" "$NODE_RESTART_SEGMENT" 2>>"$WORK/run.log" | meas_import ""
  rmdir "$mnt" 2>/dev/null
}

step_failover() {
  node_restart_measure
  local nr="node restart, $NODE_RESTART_COUNT x 4 KiB in $NODE_RESTART_SEGMENT ($NODE_RESTART_FS)"
  row_plain "$nr: kill -9 to its objects served again (master confirmed, no copy)" node_restart.serving s
  row_plain "$nr: of which the CRC32C proof" node_restart.proof s
  row_plain "$nr: of which the rest (start, index log, register, reconcile)" node_restart.rest s
  row "$nr: proof vs crc32c of memory, same threads, same run" node_restart.proof_gbps \
    node_restart.ref_crc_par_gbps - GB/s
  failover_measure
  meas failover.budget "$FAILOVER_BUDGET_S" s
  local lease="lease ${FAILOVER_LEASE_S} s, median of 5"
  row_plain "master failover ($lease): kill -9 of the leader to the standby leading" failover.elect s
  row "master failover ($lease): kill -9 to the first libmoonkv put vs the ${FAILOVER_BUDGET_S} s budget" \
    failover.lib_put failover.budget 1 s
  row "master failover ($lease): kill -9 to the first libmoonkv get vs the ${FAILOVER_BUDGET_S} s budget" \
    failover.lib_get failover.budget 1 s
  row "master failover ($lease): first libmoonkv put vs the election (what the client adds)" \
    failover.lib_put failover.elect - s
  row_plain "master failover ($lease): kill -9 to the first SET through the gateway" failover.gw_put s
  row_plain "master failover ($lease): kill -9 to the first GET through the gateway" failover.gw_get s
}
