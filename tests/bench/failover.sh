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

step_failover() {
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
