# tests/bench/resp.sh - steps 1 and 2: redis-benchmark SET/GET through RESP
# against redis-server, moonkv standalone and a moonkv cluster (master,
# 2 nodes, gateway). Sourced by run.sh.
#
# Measurement names: resp.<target>.<op>.<size>.<mode>, target one of
# redis standalone cluster cluster2 (the gateway with --replicas 2)
# cluster_io2 (the gateway with --io-threads 2, 64 B only), op
# set|get, mode p16 (-P 16 -c 50), p1 (-c 50) or c4 (-c 4). A
# mode written get:MODE is measured for GETs only.
#
# moonkv is write-once: a SET of a stored key with other bytes is -EXISTS
# (the same bytes again are a no-op +OK, as keys are content hashes).
# SETs use random keys from a space of 10^9 (-r), so with n requests
# about n^2/2e9 repeat, all with the run's one value: counted as n minus
# the DBSIZE growth (resp.<target>.set.<size>.<mode>.repeats). GETs ask
# for keys preloaded by bench_preload (the 12-digit key:NNN...
# redis-benchmark writes). Each phase runs on a fresh server (resp_fresh).

RESP_TARGETS="redis standalone cluster"
RESP_KEYSPACE=1000000000
# The gateway adds a master round trip and a data-plane transfer to every
# request: at 64 B it gets a twentieth of the requests so the run stays
# bounded. Large values keep their full count: a twentieth of 1,000 is
# one request per client, and the row then times the fresh gateway's
# first batch, not its rate.
RESP_CLUSTER_SHARE=20
RESP_CLUSTER_SHARE_MAX_SIZE=65536

# rb_run ADDR NAME TEST SIZE N CLIENTS PIPELINE KEYSPACE: one redis-benchmark
# run; stores req/s under NAME.
rb_run() {
  local addr=$1 name=$2 test=$3 size=$4 n=$5 c=$6 p=$7 r=$8 out rps rc err
  out=$(timeout 180 redis-benchmark -h "${addr%:*}" -p "${addr##*:}" -t "$test" -d "$size" -n "$n" \
        -c "$c" -P "$p" -r "$r" --csv 2>"$WORK/rb.err")
  rc=$?
  err=$(head -c 200 "$WORK/rb.err" | tr '\n' ' ')
  log "redis-benchmark $addr -t $test -d $size -n $n -c $c -P $p -r $r: exit $rc: $out $err"
  local row p50 p99
  row=$(echo "$out" | awk -F, -v t="${test^^}" '{ gsub(/"/, "") } $1 == t { print $2, $5 * 1000, $7 * 1000 }')
  read -r rps p50 p99 <<<"$row"
  if [ -n "$rps" ]; then
    meas "$name" "$rps" req/s
    # The CSV gives latencies in ms with 3 decimals: us, whole.
    meas "$name.p50" "$p50" us
    meas "$name.p99" "$p99" us
  else meas_skip "$name" "redis-benchmark exit $rc: ${err:-no $test result}"; fi
}

dbsize() { redis-cli -h "${1%:*}" -p "${1##*:}" dbsize 2>/dev/null | grep -E '^[0-9]+$'; }

# SETs of fresh random keys, with the repeats counted (see above).
rb_set() {
  local addr=$1 name=$2 size=$3 n=$4 c=$5 p=$6 before after
  before=$(dbsize "$addr")
  rb_run "$addr" "$name" set "$size" "$n" "$c" "$p" "$RESP_KEYSPACE"
  after=$(dbsize "$addr")
  # With -P, redis-benchmark may send up to a pipeline more per client than
  # -n: a slightly negative difference means no repeats.
  if [ -n "$before" ] && [ -n "$after" ]; then
    local rep=$((n - (after - before))); [ "$rep" -lt 0 ] && rep=0
    meas "$name.repeats" "$rep" count
  else meas_skip "$name.repeats" "DBSIZE did not answer"; fi
}

# resp_target_start TARGET SEGMENT: ADDR of a fresh server, or SKIP_WHY.
resp_target_start() {
  case "$1" in
    redis) start_redis;;
    standalone) start_standalone "$2";;
    cluster) CL_NODE_FLAGS=(); CL_GW_REPLICAS=1 cluster_start 2 "$2" 1;;
    cluster2) CL_NODE_FLAGS=(); CL_GW_REPLICAS=2 cluster_start 2 "$2" 1;;
    cluster_io2) CL_NODE_FLAGS=(); CL_GW_IO_THREADS=2 cluster_start 2 "$2" 1;;
  esac
}

# Stops TARGET's server if one runs (a no-op before the first start).
resp_target_stop() {
  case "$1" in
    redis) [ -n "${REDIS_PID:-}" ] && stop_pids "$REDIS_PID"; REDIS_PID=;;
    standalone) [ -n "${STANDALONE_PID:-}" ] && stop_pids "$STANDALONE_PID"; STANDALONE_PID=;;
    cluster|cluster2|cluster_io2) cluster_stop;;
  esac
  return 0
}

# resp_fresh TARGET SEGMENT NAME...: a new, empty server for one phase.
# Every phase gets its own because redis-benchmark exits on the first
# error reply, and moonkv rightly answers -EXISTS when a key comes back
# with other bytes: each SET run draws new value bytes, and the preload
# writes the GET keys with its own. On failure the NAMEs are skipped.
resp_fresh() {
  local t=$1 seg=$2 name; shift 2
  resp_target_stop "$t"
  resp_target_start "$t" "$seg" && return 0
  for name in "$@"; do meas_skip "$name" "$SKIP_WHY"; done
  return 1
}

# mode_flags MODE: "CLIENTS PIPELINE" of a mode (p16, p1, c4, c1).
mode_flags() {
  case "$1" in
    c*) echo "${1#c} 1";;
    p*) echo "50 ${1#p}";;
  esac
}

# mode_n MODE N: requests for MODE's run. One client waits out every
# round trip, so c1 (a latency run) does a tenth of N.
mode_n() { [ "$1" = c1 ] && echo $(($2 / 10)) || echo "$2"; }

# resp_measure TARGET SEGMENT KEYS "SIZE N MODES..." ...: for each size,
# the SETs of every mode, each on a fresh server (cold: its table and
# segment start empty), then KEYS keys preloaded and the GETs of every
# mode (get:MODE ones too).
resp_measure() {
  local t=$1 seg=$2 keys=$3 spec size n modes m c p gets; shift 3
  for spec in "$@"; do
    read -r size n modes <<<"$spec"
    [ "${t#cluster}" != "$t" ] && [ "$size" -le "$RESP_CLUSTER_SHARE_MAX_SIZE" ] &&
      n=$(( n / RESP_CLUSTER_SHARE > 50 ? n / RESP_CLUSTER_SHARE : 50 ))
    for m in $modes; do
      case "$m" in get:*) continue;; esac
      resp_fresh "$t" "$seg" "resp.$t.set.$size.$m" "resp.$t.set.$size.$m.repeats" || continue
      read -r c p <<<"$(mode_flags "$m")"
      rb_set "$ADDR" "resp.$t.set.$size.$m" "$size" "$n" "$c" "$p"
    done
    gets=(); for m in $modes; do gets+=("resp.$t.get.$size.${m#get:}"); done
    resp_fresh "$t" "$seg" "${gets[@]}" || continue
    if ! timeout 300 "$BENCH_BIN/bench_preload" "$ADDR" "$keys" "$size" >>"$WORK/run.log" 2>&1; then
      for m in "${gets[@]}"; do meas_skip "$m" "preload of $keys keys failed (run.log)"; done
      continue
    fi
    for m in $modes; do
      m=${m#get:}
      read -r c p <<<"$(mode_flags "$m")"
      rb_run "$ADDR" "resp.$t.get.$size.$m" get "$size" "$(mode_n "$m" "$n")" "$c" "$p" "$keys"
    done
  done
  resp_target_stop "$t"
}

# "-P 16 -c 50" and the like, for a row label.
mode_label() {
  local c p
  read -r c p <<<"$(mode_flags "$1")"
  [ "$p" = 1 ] && echo "-c $c" || echo "-P $p -c $c"
}

# target_label TARGET: how a row names it.
target_label() {
  case "$1" in
    cluster) echo "cluster (gateway)";;
    cluster2) echo "cluster (gateway, replicas 2)";;
    cluster_io2) echo "cluster (gateway, --io-threads 2)";;
    *) echo "$1";;
  esac
}

# Rows comparing standalone (with TARGET) and cluster (no target) to
# redis; GET_MODES: modes measured for GETs only.
resp_rows() {
  local size=$1 label=$2 target=$3 modes=$4 get_modes=${5:-} op m what t ms
  for op in set get; do
    ms=$modes; [ "$op" = get ] && ms="$modes $get_modes"
    for m in $ms; do
      what="RESP ${op^^} $label $(mode_label "$m")"
      [ "$op" = set ] && what="$what (fresh server)"
      row "$what: standalone vs redis" "resp.standalone.$op.$size.$m" "resp.redis.$op.$size.$m" "$target" req/s
      for t in cluster cluster2 cluster_io2; do
        [ "$t" = cluster ] || [ -n "$(meas_get "resp.$t.$op.$size.$m")" ] || continue
        row "$what: $(target_label "$t") vs redis" "resp.$t.$op.$size.$m" "resp.redis.$op.$size.$m" - req/s
      done
      [ -n "$(meas_get "resp.cluster_io2.$op.$size.$m")" ] &&
        row "$what: gateway --io-threads 2 vs --io-threads 1" "resp.cluster_io2.$op.$size.$m" "resp.cluster.$op.$size.$m" - req/s
    done
  done
  for m in $modes; do
    for t in standalone cluster; do
      row "RESP SET $label $m: repeated keys, $t (same bytes: no-op) vs redis (overwrite)" \
        "resp.$t.set.$size.$m.repeats" "resp.redis.set.$size.$m.repeats" - count
    done
  done
}

# resp_latency_rows SIZE LABEL MODE: p50 and p99 of MODE's GETs, every
# target next to redis-server (ratio: redis's time over ours).
resp_latency_rows() {
  local size=$1 label=$2 m=$3 q t
  for q in p50 p99; do
    for t in standalone cluster cluster2 cluster_io2; do
      [ -n "$(meas_get "resp.$t.get.$size.$m.$q")" ] || continue
      row "RESP GET $label $(mode_label "$m") latency $q: $(target_label "$t") vs redis" \
        "resp.$t.get.$size.$m.$q" "resp.redis.get.$size.$m.$q" - us
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
  if [ "$QUICK" = 1 ]; then n16=60000 n1=12000 keys=10000; else n16=2000000 n1=300000 keys=100000; fi
  for t in $RESP_TARGETS cluster2 cluster_io2; do
    resp_measure "$t" 1GB "$keys" "64 $n16 p16" "64 $n1 p1 get:c1"
  done
  resp_rows 64 "64B" 1.0 "p16 p1"
  resp_latency_rows 64 "64B" c1
  resp_plot 64
  note "RESP SETs use random keys from a space of $RESP_KEYSPACE (-r): about n^2/2e9 of n repeat," \
       "always with the run's one value, which moonkv takes as a no-op +OK (same key, same bytes) and" \
       "redis as an overwrite; the repeated-keys rows count them. A repeat with other bytes would be" \
       "-EXISTS, and redis-benchmark exits on any error, so each SET and GET phase gets a fresh server."
  note "The --io-threads 2 rows run the gateway with two event loops (connections handed out round-robin) on this" \
       "2-core machine, where the benchmark client, master, two nodes and the gateway already share the cores:" \
       "they show the cost or gain of a second loop here, not how the gateway scales on a machine with cores to spare."
}

# kB field of /proc/PID/status ("VmRSS", "VmHWM"); empty when gone.
status_kb() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null; }

# set_loop ADDR N VALUE NAME: N SETs of VALUE's bytes by redis-cli -x, one
# after another, each key deleted after (the space is reused); NAME gets
# the MB/s, or is skipped unless all answered OK.
set_loop() {
  local addr=$1 n=$2 value=$3 name=$4 i ok=0 t0 t1 mb
  mb=$(stat -c %s "$value")
  t0=$(date +%s.%N)
  for ((i = 0; i < n; i++)); do
    [ "$(redis-cli -h "${addr%:*}" -p "${addr##*:}" -x set "loop:$i" <"$value" 2>&1)" = OK ] && ok=$((ok + 1))
    redis-cli -h "${addr%:*}" -p "${addr##*:}" del "loop:$i" >/dev/null 2>&1
  done
  t1=$(date +%s.%N)
  loop_rate "$name" "set_loop $addr" SETs "$ok" "$n" "$mb" "$t0" "$t1"
}

# loop_rate NAME WHAT OPS OK N BYTES T0 T1: logs a loop of N OPS of BYTES
# each, OK of them answered right, from T0 to T1 (date +%s.%N); NAME gets
# the MB/s, or is skipped (and 1 returned) unless all N were.
loop_rate() {
  local name=$1 what=$2 ops=$3 ok=$4 n=$5 mb=$6 t0=$7 t1=$8
  log "$what: $ok of $n $ops of $mb bytes OK in $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s"
  if [ "$ok" -eq "$n" ]; then
    meas "$name" "$(awk -v n="$n" -v m="$mb" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", n * m / 1e6 / (b - a) }')" MB/s
    return 0
  fi
  meas_skip "$name" "$ok of $n $ops answered OK (run.log)"
  return 1
}

# get_loop ADDR N VALUE NAME: VALUE stored once as loop:get, then N GETs
# of it (redis-cli --raw, output dropped; the first's length checked),
# the rate in MB/s as NAME.
get_loop() {
  local addr=$1 n=$2 value=$3 name=$4 i ok=0 t0 t1 mb cli
  cli=(redis-cli -h "${addr%:*}" -p "${addr##*:}")
  mb=$(stat -c %s "$value")
  if [ "$("${cli[@]}" -x set loop:get <"$value" 2>&1)" != OK ] ||
     [ "$("${cli[@]}" --raw get loop:get | wc -c)" -ne $((mb + 1)) ]; then
    meas_skip "$name" "the value did not read back whole (run.log)"
    return 1
  fi
  t0=$(date +%s.%N)
  for ((i = 0; i < n; i++)); do "${cli[@]}" --raw get loop:get >/dev/null 2>&1 && ok=$((ok + 1)); done
  t1=$(date +%s.%N)
  "${cli[@]}" del loop:get >/dev/null 2>&1
  loop_rate "$name" "get_loop $addr" GETs "$ok" "$n" "$mb" "$t0" "$t1"
}

# rss_during PID NAME CMD...: runs CMD while sampling PID's VmRSS every
# 50 ms; NAME is the highest seen (or VmHWM if it rose past that) in MiB
# above the VmRSS before. CMD's status is returned.
rss_during() {
  local pid=$1 name=$2 idle hwm0 hwm peak sampler rc
  local stop=$WORK/rss.stop out=$WORK/rss.peak
  shift 2
  idle=$(status_kb "$pid" VmRSS) hwm0=$(status_kb "$pid" VmHWM)
  rm -f "$stop" "$out"
  ( p=0; while [ ! -e "$stop" ]; do v=$(status_kb "$pid" VmRSS); [ "${v:-0}" -gt "$p" ] && p=$v; sleep 0.05; done
    echo "$p" >"$out" ) &
  sampler=$!
  "$@"
  rc=$?
  touch "$stop"; wait "$sampler"
  peak=$(cat "$out" 2>/dev/null) hwm=$(status_kb "$pid" VmHWM)
  log "$name: idle $idle kB, VmHWM $hwm0 -> $hwm kB, sampled peak $peak kB"
  [ "${hwm:-0}" -gt "${hwm0:-0}" ] && [ "$hwm" -gt "${peak:-0}" ] && peak=$hwm
  if [ "$rc" -eq 0 ] && [ -n "$idle" ] && [ -n "$peak" ]; then
    meas "$name" "$(awk -v p="$peak" -v i="$idle" 'BEGIN { d = (p - i) / 1024; if (d < 0.1) d = 0.1; printf "%.1f", d }')" MiB
  else meas_skip "$name" "the commands failed or the gateway's status was unreadable (run.log)"; fi
  return "$rc"
}

# resp_gateway_rss N: the gateway's resident memory while N SETs of
# 64 MiB stream through it (set_loop; two 256 MB nodes, replicas 1), and
# while N GETs of a 64 MiB value stream back (get_loop: it has slice CRCs,
# so the gateway sends it slice by slice), in MiB above idle (rss_during).
# The gateway uses the TCP transport: with shm it maps the nodes'
# segments, whose pages would count in its VmRSS. The same loops against
# redis-server are the rates' reference.
resp_gateway_rss() {
  local n=$1 gw value=$WORK/value64m
  head -c $((64 << 20)) /dev/urandom >"$value"
  meas "resp.gateway.rss_bound" 64 MiB
  if start_redis; then
    set_loop "$ADDR" "$n" "$value" resp.redis.set.64MiB.loop
    get_loop "$ADDR" "$n" "$value" resp.redis.get.64MiB.loop
    resp_target_stop redis
  else meas_skip resp.redis.set.64MiB.loop "$SKIP_WHY"; meas_skip resp.redis.get.64MiB.loop "$SKIP_WHY"; fi
  CL_NODE_FLAGS=(); CL_GW_FLAGS=(--transport tcp)
  if ! CL_GW_REPLICAS=1 cluster_start 2 256MB 1; then
    CL_GW_FLAGS=()
    local m
    for m in resp.cluster.set.64MiB.rss resp.cluster.set.64MiB.loop resp.cluster.get.64MiB.rss \
             resp.cluster.get.64MiB.loop; do meas_skip "$m" "$SKIP_WHY"; done
    return 0
  fi
  CL_GW_FLAGS=()
  gw=${CL_PIDS[${#CL_PIDS[@]} - 1]}
  sleep 0.5
  rss_during "$gw" resp.cluster.set.64MiB.rss set_loop "$ADDR" "$n" "$value" resp.cluster.set.64MiB.loop
  rss_during "$gw" resp.cluster.get.64MiB.rss get_loop "$ADDR" "$n" "$value" resp.cluster.get.64MiB.loop
  cluster_stop
}

step_resp_large() {
  local n1m n4m keys seg_mb t
  if [ "$QUICK" = 1 ]; then n1m=100 n4m=30 keys=8; else n1m=1000 n4m=300 keys=20; fi
  # The biggest phase (servers are fresh per phase), plus a quarter slack.
  seg_mb=$(( (n1m > 4 * n4m ? n1m : 4 * n4m) * 5 / 4 + 128 ))
  for t in $RESP_TARGETS cluster2; do
    resp_measure "$t" "${seg_mb}MB" "$keys" "1048576 $n1m p1 get:c4" "4194304 $n4m p1 get:c4"
  done
  resp_rows 1048576 "1MiB" 1.2 p1 c4
  resp_rows 4194304 "4MiB" 1.2 p1 c4
  resp_plot 1048576
  resp_plot 4194304
  local nrss; if [ "$QUICK" = 1 ]; then nrss=4; else nrss=16; fi
  resp_gateway_rss "$nrss"
  row "Gateway VmRSS above idle during $nrss streamed 64 MiB SETs (the issue says 1,000: $nrss keep the step short; tcp transport) vs the 64 MiB bound" \
    resp.cluster.set.64MiB.rss resp.gateway.rss_bound 1.0 MiB
  row "RESP SET 64MiB, one client (redis-cli -x, each key deleted after): cluster (gateway, streamed) vs redis" \
    resp.cluster.set.64MiB.loop resp.redis.set.64MiB.loop - MB/s
  row "Gateway VmRSS above idle during $nrss streamed 64 MiB GETs (slice by slice; tcp transport) vs the 64 MiB bound" \
    resp.cluster.get.64MiB.rss resp.gateway.rss_bound 1.0 MiB
  row "RESP GET 64MiB, one client (redis-cli --raw, output dropped): cluster (gateway, streamed) vs redis" \
    resp.cluster.get.64MiB.loop resp.redis.get.64MiB.loop - MB/s
  note "Large RESP objects run unpipelined with 50 clients (-c 50), GETs also with 4 (-c 4): at 1 MiB and more a pipeline" \
       "adds only memory; segments are sized to the data (${seg_mb}MB, prefaulted; per node in the cluster)."
}
