# tests/bench/resp.sh - steps 1 and 2: redis-benchmark SET/GET through RESP
# against redis-server, moonkv standalone and a moonkv cluster (master,
# 2 nodes, gateway). Sourced by run.sh.
#
# Measurement names: resp.<target>.<op>.<size>.<mode>, target one of
# redis standalone cluster, op set|get, mode p16 (-P 16) or p1.
#
# moonkv is write-once: a SET of a key that exists is -EXISTS. SETs use
# random keys from a space of 10^9 (-r), so with n requests about
# n^2/2e9 repeat; the repeats are counted as n minus the DBSIZE growth
# (resp.<target>.set.<size>.<mode>.repeats). GETs ask for keys preloaded
# by bench_preload (the 12-digit key:NNN... redis-benchmark writes).

RESP_TARGETS="redis standalone cluster"
RESP_KEYSPACE=1000000000

# rb_run ADDR NAME TEST SIZE N CLIENTS PIPELINE KEYSPACE: one redis-benchmark
# run; stores req/s under NAME.
rb_run() {
  local addr=$1 name=$2 test=$3 size=$4 n=$5 c=$6 p=$7 r=$8 out rps rc
  out=$(timeout 600 redis-benchmark -h "${addr%:*}" -p "${addr##*:}" -t "$test" -d "$size" -n "$n" \
        -c "$c" -P "$p" -r "$r" --csv 2>>"$WORK/run.log")
  rc=$?
  log "redis-benchmark $addr -t $test -d $size -n $n -c $c -P $p -r $r: exit $rc: $out"
  rps=$(echo "$out" | awk -F, -v t="${test^^}" '{ gsub(/"/, "") } $1 == t { print $2 }')
  if [ -n "$rps" ]; then meas "$name" "$rps" req/s
  else meas_skip "$name" "redis-benchmark gave no $test result (exit $rc, see run.log)"; fi
}

dbsize() { redis-cli -h "${1%:*}" -p "${1##*:}" dbsize 2>/dev/null | grep -E '^[0-9]+$'; }

# SETs of fresh random keys, with the repeats counted (see above).
rb_set() {
  local addr=$1 name=$2 size=$3 n=$4 c=$5 p=$6 before after
  before=$(dbsize "$addr")
  rb_run "$addr" "$name" set "$size" "$n" "$c" "$p" "$RESP_KEYSPACE"
  after=$(dbsize "$addr")
  if [ -n "$before" ] && [ -n "$after" ]; then meas "$name.repeats" $((n - (after - before))) count
  else meas_skip "$name.repeats" "DBSIZE did not answer"; fi
}

# resp_target_start TARGET SEGMENT: ADDR of a fresh server, or SKIP_WHY.
resp_target_start() {
  case "$1" in
    redis) start_redis;;
    standalone) start_standalone "$2";;
    cluster) CL_NODE_FLAGS=(); cluster_start 2 "$2" 1;;
  esac
}

resp_target_stop() {
  case "$1" in
    redis) stop_pids "$REDIS_PID";;
    standalone) stop_pids "$STANDALONE_PID";;
    cluster) cluster_stop;;
  esac
}

# resp_measure TARGET SEGMENT KEYS "SIZE N MODES..." ...: every size row
# on one fresh server of TARGET. MODES: p16 and/or p1.
resp_measure() {
  local t=$1 seg=$2 keys=$3 spec size n modes m p sz; shift 3
  if ! resp_target_start "$t" "$seg"; then
    for spec in "$@"; do
      read -r size n modes <<<"$spec"
      for m in $modes; do
        meas_skip "resp.$t.set.$size.$m" "$SKIP_WHY"
        meas_skip "resp.$t.set.$size.$m.repeats" "$SKIP_WHY"
        meas_skip "resp.$t.get.$size.$m" "$SKIP_WHY"
      done
    done
    return
  fi
  for spec in "$@"; do
    read -r size n modes <<<"$spec"
    for m in $modes; do
      p=${m#p}
      rb_set "$ADDR" "resp.$t.set.$size.$m" "$size" "$n" 50 "$p"
    done
    if ! timeout 300 "$BENCH_BIN/bench_preload" "$ADDR" "$keys" "$size" >>"$WORK/run.log" 2>&1; then
      for m in $modes; do meas_skip "resp.$t.get.$size.$m" "preload of $keys keys failed (run.log)"; done
      continue
    fi
    for m in $modes; do
      p=${m#p}
      rb_run "$ADDR" "resp.$t.get.$size.$m" get "$size" "$n" 50 "$p" "$keys"
    done
  done
  resp_target_stop "$t"
}

# Rows comparing standalone (with TARGET) and cluster (no target) to redis.
resp_rows() {
  local size=$1 label=$2 target=$3 modes=$4 op m what t
  for op in set get; do
    for m in $modes; do
      what="RESP ${op^^} $label $([ "$m" = p16 ] && echo "-P 16 -c 50" || echo "-c 50")"
      row "$what: standalone vs redis" "resp.standalone.$op.$size.$m" "resp.redis.$op.$size.$m" "$target" req/s
      row "$what: cluster (gateway) vs redis" "resp.cluster.$op.$size.$m" "resp.redis.$op.$size.$m" - req/s
    done
  done
  for m in $modes; do
    for t in standalone cluster; do
      row "RESP SET $label $m: repeated keys, moonkv $t -EXISTS vs redis overwrites" \
        "resp.$t.set.$size.$m.repeats" "resp.redis.set.$size.$m.repeats" - count
    done
  done
}

# GB/s points of the unpipelined GETs for the plot.
resp_plot() {
  local size=$1 t v
  for t in $RESP_TARGETS; do
    v=$(meas_get "resp.$t.get.$size.p1")
    [ -n "$v" ] && plot_point "RESP GET $t" "$size" "$(awk -v r="$v" -v s="$size" 'BEGIN { print r * s / 1e9 }')"
  done
  return 0
}

step_resp_small() {
  local n16 n1 keys t
  if [ "$QUICK" = 1 ]; then n16=200000 n1=40000 keys=20000; else n16=2000000 n1=300000 keys=100000; fi
  for t in $RESP_TARGETS; do
    resp_measure "$t" 1GB "$keys" "64 $n16 p16" "64 $n1 p1"
  done
  resp_rows 64 "64B" 1.0 "p16 p1"
  resp_plot 64
  note "RESP SETs use random keys from a space of $RESP_KEYSPACE (-r): about n^2/2e9 of n repeat;" \
       "moonkv answers those -EXISTS (write-once), redis overwrites; the repeated-keys rows count them."
}

step_resp_large() {
  local n1m n4m keys seg_mb t
  if [ "$QUICK" = 1 ]; then n1m=150 n4m=50 keys=8; else n1m=1000 n4m=300 keys=20; fi
  # Everything SET and preloaded, plus a quarter for allocator slack.
  seg_mb=$(( ((n1m + keys) * 1 + (n4m + keys) * 4) * 5 / 4 + 128 ))
  for t in $RESP_TARGETS; do
    resp_measure "$t" "${seg_mb}MB" "$keys" "1048576 $n1m p1" "4194304 $n4m p1"
  done
  resp_rows 1048576 "1MiB" 1.2 p1
  resp_rows 4194304 "4MiB" 1.2 p1
  resp_plot 1048576
  resp_plot 4194304
  note "Large RESP objects run unpipelined with 50 clients (-c 50): at 1 MiB and more a pipeline" \
       "adds only memory; segments are sized to the data (${seg_mb}MB, prefaulted; per node in the cluster)."
}
