# tests/bench/scale.sh - the master at scale (part of step 6): RSS per
# object at 10^6 and 10^7 objects next to the layout's formula, put
# pairs per second of the master's CPU time (batched, pipelined singles),
# and 1,000 simulated nodes heartbeating at 1 s: the master's CPU share
# and the placement rate among them. Nodes are tests/sim/node_sim (no
# segments: nothing is written, the master only places); docs/SCALE.md.
# Sourced by run.sh after lib.sh.

SC_MASTER_PID= SC_SIM_PID= SC_MASTER=

# scale_stop: the simulator and master of the last measurement, if any.
scale_stop() {
  local pids=() p
  for p in "$SC_SIM_PID" "$SC_MASTER_PID"; do [ -n "$p" ] && pids+=("$p"); done
  [ ${#pids[@]} -gt 0 ] && stop_pids "${pids[@]}"
  SC_SIM_PID= SC_MASTER_PID=
}

# scale_master NAME: a master in the background; its pid in SC_MASTER_PID,
# address in SC_MASTER. 1 if it did not come up (SKIP_WHY).
scale_master() {
  next_port || { SKIP_WHY="no free port"; return 1; }
  start_bg "master-$PORT-$1" "$SERVER" --role master --bind 127.0.0.1 --port "$PORT"
  SC_MASTER_PID=$BG_PID SC_MASTER=127.0.0.1:$PORT
  wait_resp 127.0.0.1 "$PORT" "$BG_PID" && return 0
  SKIP_WHY="master did not start: $(log_tail "master-$PORT-$1")"
  return 1
}

# scale_sim NODES [FLAGS...]: node_sim against SC_MASTER until every node
# registered (at most 120 s); its pid in SC_SIM_PID.
scale_sim() {
  local n=$1 i; shift
  start_bg "sim-$n-$SC_MASTER_PID" "$BENCH_BIN/node_sim" --master "$SC_MASTER" --nodes "$n" "$@"
  SC_SIM_PID=$BG_PID
  for ((i = 0; i < 1200; i++)); do
    grep -q '^registered' "$WORK/sim-$n-$SC_MASTER_PID.log" 2>/dev/null && return 0
    kill -0 "$SC_SIM_PID" 2>/dev/null || break
    sleep 0.1
  done
  SKIP_WHY="node_sim did not register $n nodes: $(tail -n 1 "$WORK/sim-$n-$SC_MASTER_PID.log")"
  return 1
}

# scale_rss COUNT: a fresh master and one simulated node, COUNT objects.
scale_rss() {
  local count=$1 singles=${2:-0}
  if scale_master "rss$count" && scale_sim 1 --holdings-ms 20; then
    log "load before ${count} objects: $(uptime)"
    timeout 900 "$BENCH_BIN/bench_meta_scale" "$SC_MASTER" "$SC_MASTER_PID" "$count" "$singles" \
      2>>"$WORK/run.log" | meas_import ""
  else
    meas_skip "meta.rss_nokey.$(scale_name "$count")" "$SKIP_WHY"
  fi
  scale_stop
}

scale_name() { case "$1" in 1000000) echo 1e6;; 10000000) echo 1e7;; *) echo "$1";; esac; }

# 1,000 nodes: the master's CPU share over 20 s of heartbeats and pulls,
# then the placement rate among them (batched, per CPU second).
scale_fleet() {
  local nodes=1000 t0 t1 c0 c1 secs=20
  if scale_master fleet && scale_sim "$nodes" --holdings-ms 1000; then
    sleep 3   # every node past its first round
    c0=$(awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$SC_MASTER_PID/stat"); t0=$(date +%s.%N)
    sleep "$secs"
    c1=$(awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$SC_MASTER_PID/stat"); t1=$(date +%s.%N)
    meas meta.fleet.cpu "$(awk -v a="$c0" -v b="$c1" -v s="$t0" -v e="$t1" -v hz="$(getconf CLK_TCK)" \
      'BEGIN { printf "%.2f", (b - a) / hz / (e - s) * 100 }')" "%core"
    log "fleet: $(grep -c alive < <(redis-cli -p "${SC_MASTER##*:}" MOON.NODES)) nodes alive, load $(uptime)"
    timeout 300 "$BENCH_BIN/bench_meta_scale" "$SC_MASTER" "$SC_MASTER_PID" 200000 0 2>>"$WORK/run.log" |
      sed 's/^RESULT meta\.cpu\.batch /RESULT meta.fleet.batch /' | grep '^RESULT meta.fleet' | meas_import ""
  else
    meas_skip meta.fleet.cpu "$SKIP_WHY"
    meas_skip meta.fleet.batch "$SKIP_WHY"
  fi
  scale_stop
}

# The layout's bytes per object besides the key (docs/SCALE.md) for the
# bench's COUNT objects: 13-byte keys, one replica of one extent. A record
# of 88 bytes in a slab (the object with its replica word, and mm_obj),
# the key and its NUL in an arena slot rounded to 8, and an 8-byte index
# slot at the index's load (the smallest power of two above 4/3 COUNT).
scale_formula() {
  awk -v n="$1" 'BEGIN { k = 13; s = 64; while (s * 3 <= n * 4) s *= 2;
               printf "%.1f", 88 + int((k + 1 + 7) / 8) * 8 + 8 * s / n - k }'
}

step_scale() {
  [ -x "$BENCH_BIN/bench_meta_scale" ] && [ -x "$BENCH_BIN/node_sim" ] || {
    meas_skip meta.rss_nokey.1e6 "bench_meta_scale or node_sim not built"; return 0; }
  # The bounds the issue sets, as references: a row's ratio >= 1 meets it.
  meas meta.bound.rss 128 B/object
  meas meta.bound.batch 300000 pairs/cpu-s
  meas meta.bound.single 100000 pairs/cpu-s
  meas meta.bound.fleet 5 %core
  meas meta.formula "$(scale_formula 1000000)" B/object
  meas meta.formula.1e7 "$(scale_formula 10000000)" B/object
  scale_rss 1000000 200000
  if [ "$QUICK" != 1 ]; then scale_rss 10000000 0; fi
  scale_fleet
  local load; load=$(uptime | sed 's/.*load average: //')
  row "master RSS per object besides the key, 10^6 objects (64 B, replicas 1, 13 B keys) vs the 128 B bound" \
    meta.rss_nokey.1e6 meta.bound.rss 1 B/object
  [ "$QUICK" != 1 ] && row "master RSS per object besides the key, 10^7 objects vs the 128 B bound" \
    meta.rss_nokey.1e7 meta.bound.rss 1 B/object
  row_plain "the layout's formula for that object at 10^6 (docs/SCALE.md)" meta.formula B/object
  [ "$QUICK" != 1 ] && row_plain "the layout's formula at 10^7" meta.formula.1e7 B/object
  row "put-start/put-end pairs per master CPU second, batches of 1000 vs 300k (load $load)" \
    meta.cpu.batch meta.bound.batch 1 pairs/cpu-s
  row "put-start/put-end pairs per master CPU second, pipelined single pairs vs 100k" \
    meta.cpu.single meta.bound.single 1 pairs/cpu-s
  row "master CPU with 1,000 simulated nodes (heartbeat 1 s, holdings pulls 1 s) vs 5 %" \
    meta.fleet.cpu meta.bound.fleet 1 %core
  row_plain "put-start/put-end pairs per master CPU second among 1,000 nodes, batches of 1000" \
    meta.fleet.batch pairs/cpu-s
}
