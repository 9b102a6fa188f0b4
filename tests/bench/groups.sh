# tests/bench/groups.sh - part of step 6: metadata pairs per second over
# 1, 2 and 3 master groups (bench_groups.c; docs/SCALE.md "Master
# groups"): one etcd, for each count of groups a fresh cluster with one
# master and one simulated node per group, every key sent to its slot's
# group, one connection per group; and a slot moved with its objects
# (the tables' work only). Sourced by run.sh after lib.sh.

GROUPS_MAX=3
GROUPS_NAMES="groups.wall.1 groups.wall.2 groups.wall.3 groups.cpu.1 groups.cpu.3"
ROUTE_NAMES="route.put route.get direct.put direct.get"
MOVE_NAMES="move.give move.adopt move.record_bytes"

groups_measure() {
  local n ports="" i count
  if [ "$QUICK" = 1 ]; then count=120000; else count=600000; fi
  if ! command -v etcd >/dev/null; then
    for n in $GROUPS_NAMES; do meas_skip "$n" "etcd not installed (package etcd-server)"; done
  elif [ ! -x "$BENCH_BIN/bench_groups" ] || [ ! -x "$BENCH_BIN/node_sim" ]; then
    for n in $GROUPS_NAMES; do meas_skip "$n" "bench_groups or node_sim not built"; done
  else
    for ((i = 0; i < 2 + GROUPS_MAX; i++)); do
      next_port || break
      ports+="${ports:+,}$PORT"
    done
    log "load before the groups rows: $(uptime)"
    MOONKV_SERVER=$SERVER timeout 600 "$BENCH_BIN/bench_groups" "$ports" "$GROUPS_MAX" "$count" \
      "$BENCH_BIN/node_sim" 2>>"$WORK/run.log" | meas_import ""
  fi
  row_plain "master groups: put pairs/s, 1 group (one connection, batches of 1000)" groups.wall.1 pairs/s
  row "master groups: 2 groups (a connection each) vs 1" groups.wall.2 groups.wall.1 - pairs/s
  row "master groups: 3 groups vs 1" groups.wall.3 groups.wall.1 - pairs/s
  row "master groups: pairs per master CPU second, 3 groups vs 1" groups.cpu.3 groups.cpu.1 - pairs/cpu-s
  route_measure
  move_measure
}

# A slot moved with its objects (bench_slot_move.c): the two tables' work,
# objects given away and adopted per CPU second, in one process.
move_measure() {
  local n
  if [ ! -x "$BENCH_BIN/bench_slot_move" ]; then
    for n in $MOVE_NAMES; do meas_skip "$n" "bench_slot_move not built"; done
  else
    timeout 300 "$BENCH_BIN/bench_slot_move" "$([ "$QUICK" = 1 ] && echo 200000 || echo 1000000)" \
      2>>"$WORK/run.log" | meas_import ""
  fi
  row_plain "slot move by metadata: objects given away per CPU second (64 B, replicas 1)" move.give objects/cpu-s
  row_plain "slot move by metadata: objects adopted per CPU second" move.adopt objects/cpu-s
  row_plain "slot move by metadata: record bytes per object (13-byte keys)" move.record_bytes B/object
}

# The router's own cost (bench_route.c): 4 KiB puts and gets, one at a
# time, through a client over groups and through a plain client of the
# same group, in turns.
route_measure() {
  local n ports="" i
  if ! command -v etcd >/dev/null || [ ! -x "$BENCH_BIN/bench_route" ]; then
    for n in $ROUTE_NAMES; do meas_skip "$n" "etcd or bench_route missing"; done
  else
    for ((i = 0; i < 5; i++)); do
      next_port || break
      ports+="${ports:+,}$PORT"
    done
    MOONKV_SERVER=$SERVER timeout 300 "$BENCH_BIN/bench_route" "$ports" "$([ "$QUICK" = 1 ] && echo 1000 || echo 4000)" \
      2>>"$WORK/run.log" | meas_import ""
  fi
  row "master groups: 4 KiB put through the router vs a plain client" route.put direct.put - ops/s
  row "master groups: 4 KiB get through the router vs a plain client" route.get direct.get - ops/s
}
