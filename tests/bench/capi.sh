# tests/bench/capi.sh - steps 3, 5 and 6, everything that talks to a
# cluster through libmoonkv or the master's own commands, on loopback.
# Sourced by run.sh.
#
# Names: capi.<layout>.<transport>.{put,get,get_p50_us}.<size> (layout
# 1node or striped), capi.<layout>.<transport>.ping_us,
# capi.1node.shm-1t.memcpy_{put,get}.<size> (memcpys timed alternately
# with those puts and gets), capi.1node.shm-1t.{put,get,memcpy_put,
# memcpy_get}_best.<size> (the fastest round of each), capi.ref.{memcpy,
# memcpy_us,redis.set,redis.get}.<size> (memcpy between buffers not in
# cache), capi.ref.iperf3, kv.<transport>.*, meta.{single,batch}.

CAPI_TRANSPORTS="tcp shm"
STRIPE_NODES=4

# iperf3 single stream over loopback: GB/s in capi.ref.iperf3.
iperf3_ref() {
  local secs=$1 pid out bps
  command -v iperf3 >/dev/null || { meas_skip capi.ref.iperf3 "iperf3 not installed"; return; }
  next_port || { meas_skip capi.ref.iperf3 "no free port"; return; }
  start_bg iperf3-$PORT iperf3 -s -B 127.0.0.1 -p "$PORT" -1
  pid=$BG_PID
  sleep 0.5
  out=$(timeout $((secs + 20)) iperf3 -c 127.0.0.1 -p "$PORT" -t "$secs" -J 2>>"$WORK/run.log")
  stop_pids "$pid"
  bps=$(echo "$out" | jq -r '.end.sum_received.bits_per_second // empty' 2>/dev/null)
  if [ -n "$bps" ]; then meas capi.ref.iperf3 "$(awk -v b="$bps" 'BEGIN { printf "%.4f", b / 8e9 }')" GB/s
  else meas_skip capi.ref.iperf3 "iperf3 gave no result: $(echo "$out" | jq -r '.error // empty' 2>/dev/null)"; fi
}

# capi_layout LAYOUT NODES SEGMENT SIZES [MASTER_FLAG...]: bench_client
# moonkv per transport, each on a fresh cluster (removed extents may stay
# held for a lease, so one transport's puts must not fill the next's).
capi_layout() {
  local layout=$1 nodes=$2 seg=$3 sizes=$4 t s op; shift 4
  for t in $CAPI_TRANSPORTS; do
    if ! cluster_start "$nodes" "$seg" 0 "$@"; then
      for op in put get; do for s in $sizes; do meas_skip "capi.$layout.$t.$op.$s" "$SKIP_WHY"; done; done
      continue
    fi
    timeout 300 "$BENCH_BIN/bench_client" moonkv "$LIBMOONKV" "$MASTER" "$t" $sizes 2>>"$WORK/run.log" |
      meas_import "capi.$layout.$t."
    cluster_stop
  done
  capi_fill_skips "$layout" $sizes
}

# A connect failure is reported once per run as capi.connect: spread it
# to the names that were not measured because of it.
capi_fill_skips() {
  local layout=$1 t op s why; shift
  for t in $CAPI_TRANSPORTS; do
    why=$(meas_why "capi.$layout.$t.capi.connect")
    [ -n "$why" ] || continue
    for op in put get; do for s in "$@"; do meas_skip "capi.$layout.$t.$op.$s" "${why#skipped: }"; done; done
  done
}

step_capi() {
  local sizes names s bytes
  sizes="1MiB 4MiB 64MiB"
  names=$sizes
  "$BENCH_BIN/bench_client" memcpy $sizes 2>>"$WORK/run.log" | meas_import capi.ref.
  iperf3_ref "$([ "$QUICK" = 1 ] && echo 2 || echo 5)"
  if start_redis; then
    timeout 300 "$BENCH_BIN/bench_client" redis "$ADDR" $sizes 2>>"$WORK/run.log" | meas_import capi.ref.
    stop_pids "$REDIS_PID"; REDIS_PID=
  else
    for s in $names; do meas_skip "capi.ref.redis.set.$s" "$SKIP_WHY"; meas_skip "capi.ref.redis.get.$s" "$SKIP_WHY"; done
  fi

  CL_NODE_FLAGS=()
  capi_layout 1node 1 2GB "$sizes"
  capi_layout striped "$STRIPE_NODES" 1GB "$sizes" --stripe-width "$STRIPE_NODES" --stripe-threshold 1MB
  # The same shm path with one copying thread (mkv_options.copy_threads
  # = 1), so it races a single-threaded memcpy on equal terms: one timed
  # after each put and each get in the same process, between the same
  # cold buffers (memcpy_put, memcpy_get), so a load swing on the shared
  # machine meets both sides of the ratio alike.
  CAPI_TRANSPORTS=shm-1t capi_layout 1node 1 2GB "4MiB 64MiB"

  for s in $names; do
    local tgt=-; case $s in 1MiB|4MiB) tgt=0.9;; esac
    row "libmoonkv get $s tcp, 1 node vs iperf3 single stream" "capi.1node.tcp.get.$s" capi.ref.iperf3 "$tgt" GB/s
    tgt=-; case $s in 1MiB|4MiB) tgt=2.0;; esac
    row "libmoonkv get $s tcp, 1 node vs redis GET (hiredis)" "capi.1node.tcp.get.$s" "capi.ref.redis.get.$s" "$tgt" GB/s
    row "libmoonkv put $s tcp, 1 node vs redis SET (hiredis)" "capi.1node.tcp.put.$s" "capi.ref.redis.set.$s" - GB/s
    row "libmoonkv get $s tcp, striped over $STRIPE_NODES nodes vs iperf3" "capi.striped.tcp.get.$s" capi.ref.iperf3 - GB/s
    row "libmoonkv put $s tcp, striped over $STRIPE_NODES nodes vs iperf3" "capi.striped.tcp.put.$s" capi.ref.iperf3 - GB/s
    case $s in 4MiB|64MiB)
      local op
      for op in get put; do
        row "libmoonkv $op $s shm, 1 node, 1 copy thread vs memcpy (1 thread, not in cache, timed alternately with the ${op}s; fastest round of each)" \
          "capi.1node.shm-1t.${op}_best.$s" "capi.1node.shm-1t.memcpy_${op}_best.$s" 0.8 GB/s
        row "libmoonkv $op $s shm, 1 node, 1 copy thread vs memcpy, all rounds (swings with the machine's load)" \
          "capi.1node.shm-1t.$op.$s" "capi.1node.shm-1t.memcpy_$op.$s" - GB/s
      done;;
    esac
    row "libmoonkv get $s shm, 1 node, copy helpers (default) vs 1-thread memcpy" "capi.1node.shm.get.$s" "capi.ref.memcpy.$s" - GB/s
    row "libmoonkv put $s shm, 1 node, copy helpers (default) vs 1-thread memcpy" "capi.1node.shm.put.$s" "capi.ref.memcpy.$s" - GB/s
    row "libmoonkv get $s shm, striped over $STRIPE_NODES nodes vs memcpy" "capi.striped.shm.get.$s" "capi.ref.memcpy.$s" - GB/s
    bytes=$(( ${s%MiB} << 20 ))
    plot_point "libmoonkv get tcp 1 node" "$bytes" "$(meas_get "capi.1node.tcp.get.$s")"
    plot_point "libmoonkv get tcp striped" "$bytes" "$(meas_get "capi.striped.tcp.get.$s")"
    plot_point "libmoonkv get shm 1 node" "$bytes" "$(meas_get "capi.1node.shm.get.$s")"
    plot_point "redis GET (hiredis)" "$bytes" "$(meas_get "capi.ref.redis.get.$s")"
    plot_point "memcpy" "$bytes" "$(meas_get "capi.ref.memcpy.$s")"
    plot_point "iperf3 loopback" "$bytes" "$(meas_get capi.ref.iperf3)"
  done
  capi_latency_row 1MiB
}

# A get's latency against its floor: the copy (memcpy of the size, not in
# cache) plus one master round trip (PING, same run), plus 20 %.
capi_latency_row() {
  local s=$1 cp ping
  cp=$(meas_get "capi.ref.memcpy_us.$s"); ping=$(meas_get capi.1node.shm.ping_us)
  if [ -n "$cp" ] && [ -n "$ping" ]; then
    meas "capi.ref.get_floor_us.$s" "$(awk -v c="$cp" -v p="$ping" 'BEGIN { printf "%.1f", 1.2 * (c + p) }')" us
  else meas_skip "capi.ref.get_floor_us.$s" "memcpy or PING not measured"; fi
  row_plain "PING round trip to the master (shm run)" capi.1node.shm.ping_us us
  row "libmoonkv get $s shm latency p50 vs (memcpy + PING) x 1.2" "capi.1node.shm.get_p50_us.$s" \
    "capi.ref.get_floor_us.$s" 1.0 us
}

step_kvcache() {
  local blocks=1000 t
  CL_NODE_FLAGS=()
  if ! cluster_start 2 1GB 0; then
    for t in $CAPI_TRANSPORTS; do meas_skip "kv.$t.batch_put_s" "$SKIP_WHY"; done
  else
    for t in $CAPI_TRANSPORTS; do
      timeout 300 "$BENCH_BIN/bench_client" kvcache "$LIBMOONKV" "$MASTER" "$t" "$blocks" 256KiB \
        2>>"$WORK/run.log" | meas_import "kv.$t."
      # The same batch through the Python binding, on the same cluster.
      PYTHONPATH=$BENCH_PY timeout 300 /usr/bin/python3 "$ROOT/tests/bench/bench_python.py" \
        "$MASTER" "$t" "$blocks" 256KiB 2>>"$WORK/run.log" | meas_import "kv.$t."
    done
    cluster_stop
  fi
  for t in $CAPI_TRANSPORTS; do
    # A batch that could not run says why once: the rows below repeat it.
    local why; why=$(meas_why "kv.$t.batch_put_s")
    if [ -n "$why" ]; then
      local n; for n in batch_get_s loop_put_s loop_get_s get_p50_us get_p99_us py_batch_get_s; do
        [ -n "$(meas_get "kv.$t.$n")$(meas_why "kv.$t.$n")" ] || meas_skip "kv.$t.$n" "${why#skipped: }"
      done
    fi
    row "KV-cache put $blocks x 256 KiB ($t): batch vs loop, wall-clock" "kv.$t.batch_put_s" "kv.$t.loop_put_s" 5 s
    row "KV-cache get $blocks x 256 KiB ($t): batch vs loop, wall-clock" "kv.$t.batch_get_s" "kv.$t.loop_get_s" 5 s
    row "Python batch_get_into $blocks x 256 KiB ($t) vs C mkv_get_batch" \
      "kv.$t.py_batch_get_s" "kv.$t.batch_get_s" 0.9 s
    row "KV-cache put batch ($t) vs one transfer of the same bytes (medians of 3 alternating rounds)" \
      "kv.$t.batch_put_gbps" "kv.$t.one_put_gbps" 0.8 GB/s
    row "KV-cache get batch ($t) vs one transfer of the same bytes (medians of 3 alternating rounds)" \
      "kv.$t.batch_get_gbps" "kv.$t.one_get_gbps" 0.8 GB/s
    row_plain "PING round trip to the master (kv run, $t)" "kv.$t.ping_us" us
    row "single 256 KiB get latency p50 ($t) vs PING" "kv.$t.get_p50_us" "kv.$t.ping_us" - us
    row "single 256 KiB get latency p99 ($t) vs PING" "kv.$t.get_p99_us" "kv.$t.ping_us" - us
  done
}

step_meta() {
  local max
  if [ "$QUICK" = 1 ]; then max=50000; else max=200000; fi
  # Nothing writes the segment (placement only): no prefault needed.
  CL_NODE_FLAGS=(--prefault no)
  if cluster_start 1 4GB 0; then
    timeout 300 "$BENCH_BIN/bench_meta" "$MASTER" 4096 1000 "$max" 2>>"$WORK/run.log" | meas_import ""
    cluster_stop
  else
    meas_skip meta.single "$SKIP_WHY"
    meas_skip meta.batch "$SKIP_WHY"
  fi
  CL_NODE_FLAGS=()
  row_plain "master MOON.PUTSTART+PUTEND, one pair per round trip" meta.single pairs/s
  row_plain "master MOON.MPUTSTART+MPUTEND, batches of 1000" meta.batch pairs/s
  row "master metadata: batches of 1000 vs single pairs" meta.batch meta.single - pairs/s
  rebuild_measure
  step_scale
  groups_measure
}

# kill -9 of a master holding COUNT small objects on 3 nodes (replicas 2),
# restarted with the same flags: objects per second reported by the nodes
# and rebuilt (window open to table rebuilt), against the rate the same
# objects were put at (MPUTSTART+MPUTEND batches of 4096).
rebuild_measure() {
  local count mport pid
  if [ "$QUICK" = 1 ]; then count=100000; else count=1000000; fi
  CL_NODE_FLAGS=(--prefault no)
  if cluster_start 3 512MB 0 --replicas 2; then
    mport=${MASTER##*:}
    timeout 300 "$BENCH_BIN/bench_rebuild" fill "$MASTER" "$count" 2>>"$WORK/run.log" | meas_import ""
    if [ -n "$(meas_get rebuild.fill)" ]; then
      kill -KILL "${CL_PIDS[0]}"; wait "${CL_PIDS[0]}" 2>/dev/null
      start_bg master-$mport-again "$SERVER" --role master --bind 127.0.0.1 --port "$mport" --replicas 2
      CL_PIDS[0]=$BG_PID
      if wait_resp 127.0.0.1 "$mport" "$BG_PID"; then
        timeout 300 "$BENCH_BIN/bench_rebuild" wait "$MASTER" "$count" 2>>"$WORK/run.log" | meas_import ""
      else
        meas_skip rebuild.rate "the master did not start again: $(log_tail master-$mport-again)"
      fi
    fi
    cluster_stop
  else
    meas_skip rebuild.fill "$SKIP_WHY"
    meas_skip rebuild.rate "$SKIP_WHY"
  fi
  CL_NODE_FLAGS=()
  local n; n=$([ "$count" -ge 1000000 ] && echo "10^6" || echo "$count")
  row_plain "put $n objects of 64 B, replicas 2, 3 nodes (MPUTSTART+MPUTEND)" rebuild.fill objects/s
  row_plain "master restart: $n objects reported by 3 nodes and rebuilt" rebuild.rate objects/s
  row "rebuild after kill -9 vs putting the same objects" rebuild.rate rebuild.fill - objects/s
}
