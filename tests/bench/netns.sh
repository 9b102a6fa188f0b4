# tests/bench/netns.sh - step 4: one large object striped over 1, 2 and 4
# nodes, each behind its own rate-limited link, as a ratio to one link;
# step 7: the KV-cache batch against a loop of single calls when every
# round trip costs 100 us more. Sourced by run.sh.
#
# Layout (all namespaces created here, removed on exit by bench_cleanup):
#   hub namespace: master (bound to 0.0.0.0: the hub only has our links)
#                  and the benchmark client, talking over the hub's lo;
#   node i (1..4): own namespace, veth 10.77.i.2 <-> 10.77.i.1 in the hub,
#                  both ends shaped with tbf to $BENCH_LINK_RATE.
# Loopback on 2 cores cannot show striping (every path shares the CPUs);
# shaped links make the link, not the CPU, the bottleneck, which is what
# striping is for. 1gbit per link keeps 4 links (500 MB/s) within what
# 2 cores can push through veth; set BENCH_LINK_RATE=2gbit on a bigger box.

STRIPE_MAX=4
LINK_RATE=${BENCH_LINK_RATE:-1gbit}

# netns_setup: creates the hub and STRIPE_MAX node namespaces; sets
# NS_HUB and the CL_* layout. Non-zero with SKIP_WHY when not permitted.
netns_setup() {
  local tag=$(( $$ % 100000 )) i ns hv nv
  NS_HUB=mkvb$tag-hub
  [ "$(id -u)" = 0 ] || { SKIP_WHY="needs root for ip netns"; return 1; }
  command -v tc >/dev/null || { SKIP_WHY="tc (iproute2) not installed"; return 1; }
  ip netns add "$NS_HUB" 2>>"$WORK/run.log" || { SKIP_WHY="ip netns add not permitted"; return 1; }
  BENCH_NETNS+=("$NS_HUB")
  ip -n "$NS_HUB" link set lo up
  CL_NODE_NS=() CL_NODE_IP=() CL_NODE_MASTER_IP=()
  for ((i = 1; i <= STRIPE_MAX; i++)); do
    ns=mkvb$tag-n$i hv=mkvb${tag}h$i nv=mkvb${tag}n$i
    ip netns add "$ns" 2>>"$WORK/run.log" || { SKIP_WHY="ip netns add $ns failed"; return 1; }
    BENCH_NETNS+=("$ns")
    ip -n "$ns" link set lo up
    # Created inside the hub so no interface ever appears in the root namespace.
    if ! ip -n "$NS_HUB" link add "$hv" type veth peer name "$nv" netns "$ns" 2>>"$WORK/run.log" ||
       ! ip -n "$NS_HUB" addr add "10.77.$i.1/24" dev "$hv" ||
       ! ip -n "$ns" addr add "10.77.$i.2/24" dev "$nv" ||
       ! ip -n "$NS_HUB" link set "$hv" up || ! ip -n "$ns" link set "$nv" up; then
      SKIP_WHY="veth set-up failed (run.log)"; return 1
    fi
    if ! ip netns exec "$NS_HUB" tc qdisc add dev "$hv" root tbf rate "$LINK_RATE" burst 256kb latency 25ms \
         2>>"$WORK/run.log" ||
       ! ip netns exec "$ns" tc qdisc add dev "$nv" root tbf rate "$LINK_RATE" burst 256kb latency 25ms \
         2>>"$WORK/run.log"; then
      SKIP_WHY="tc tbf shaping failed (run.log)"; return 1
    fi
    CL_NODE_NS+=("$ns") CL_NODE_IP+=("10.77.$i.2") CL_NODE_MASTER_IP+=("10.77.$i.1")
  done
}

# Back to the loopback layout for later steps.
netns_reset_layout() {
  CL_HUB_NS="" CL_MASTER_BIND=127.0.0.1
  CL_NODE_NS=() CL_NODE_IP=() CL_NODE_MASTER_IP=()
}

step_stripe() {
  local size k name
  if [ "$QUICK" = 1 ]; then size=16MiB; else size=64MiB; fi
  if ! netns_setup; then
    for k in 1 2 4; do
      meas_skip "stripe.$k.tcp.get.$size" "$SKIP_WHY"
      meas_skip "stripe.$k.tcp.put.$size" "$SKIP_WHY"
    done
  else
    CL_HUB_NS=$NS_HUB CL_MASTER_BIND=0.0.0.0 CL_NODE_FLAGS=()
    for k in 1 2 4; do
      name=stripe.$k.tcp
      if cluster_start "$k" 768MB 0 --stripe-width "$k" --stripe-threshold 1MB; then
        timeout 300 ip netns exec "$NS_HUB" "$BENCH_BIN/bench_client" moonkv "$LIBMOONKV" "$MASTER" tcp \
          "$size" 2>>"$WORK/run.log" | meas_import "$name."
        cluster_stop
        local why; why=$(meas_why "$name.capi.connect")
        if [ -n "$why" ]; then
          meas_skip "$name.get.$size" "${why#skipped: }"
          meas_skip "$name.put.$size" "${why#skipped: }"
        fi
      else
        meas_skip "$name.get.$size" "$SKIP_WHY"
        meas_skip "$name.put.$size" "$SKIP_WHY"
      fi
    done
    netns_reset_layout
    netns_cleanup   # now, not only at exit
  fi
  row_plain "striped get $size, 1 node behind one $LINK_RATE link" "stripe.1.tcp.get.$size" GB/s
  row "striped get $size over 2 links vs 1 link" "stripe.2.tcp.get.$size" "stripe.1.tcp.get.$size" 1.8 GB/s
  row "striped get $size over 4 links vs 1 link" "stripe.4.tcp.get.$size" "stripe.1.tcp.get.$size" 3.4 GB/s
  row "striped put $size over 4 links vs 1 link" "stripe.4.tcp.put.$size" "stripe.1.tcp.put.$size" - GB/s
  note "Striping rows: nodes in their own network namespaces, each link shaped with tbf to $LINK_RATE."
}

# ---- step 7: added round-trip time ----
#
# This kernel has no netem qdisc (and no fq/BPF to delay by timestamp),
# so the delay comes from a relay process (bench_relay): master and two
# nodes in one namespace, bound to 10.79.0.2 there; the client in a
# second namespace where 10.79.0.2 is the relay, which dials each server
# inside the first and holds every chunk RTT_US microseconds per
# direction, less half the round trip its own hop adds (rtt_calibrate).
# So every master request and every data-plane round trip of the client
# crosses it twice. Rows say "relay-delayed"; the PING rows say what the
# round trip really was, direct and through the relay.
# (Abstract unix sockets are per namespace: the client cannot use shm
# here, TCP it is.)
RTT_US=${BENCH_RTT_US:-50}
RTT_IP=10.79.0.2

rtt_setup() {
  local tag=$(( $$ % 100000 ))
  NS_SRV=mkvr$tag-srv NS_CLI=mkvr$tag-cli
  [ "$(id -u)" = 0 ] || { SKIP_WHY="needs root for ip netns"; return 1; }
  [ -x "$BENCH_BIN/bench_relay" ] || { SKIP_WHY="bench_relay not built"; return 1; }
  ip netns add "$NS_SRV" 2>>"$WORK/run.log" || { SKIP_WHY="ip netns add not permitted"; return 1; }
  BENCH_NETNS+=("$NS_SRV")
  ip netns add "$NS_CLI" 2>>"$WORK/run.log" || { SKIP_WHY="ip netns add $NS_CLI failed"; return 1; }
  BENCH_NETNS+=("$NS_CLI")
  if ! ip -n "$NS_SRV" link set lo up || ! ip -n "$NS_CLI" link set lo up ||
     ! ip -n "$NS_SRV" addr add "$RTT_IP/32" dev lo || ! ip -n "$NS_CLI" addr add "$RTT_IP/32" dev lo; then
    SKIP_WHY="namespace address set-up failed (run.log)"; return 1
  fi
  CL_HUB_NS=$NS_SRV CL_MASTER_BIND=0.0.0.0
  CL_NODE_NS=("$NS_SRV" "$NS_SRV") CL_NODE_IP=("$RTT_IP" "$RTT_IP") CL_NODE_MASTER_IP=("$RTT_IP" "$RTT_IP")
}

# Median PING round trip (us) to the master from namespace $1.
rtt_ping() {
  ip netns exec "$1" "$BENCH_BIN/bench_client" ping "$RTT_IP:${MASTER##*:}" 2>>"$WORK/run.log" |
    awk '$1 == "RESULT" { print $3 }'
}

# The relay's own hop (two more sockets, thread wake-ups, a timer's
# lateness) adds round-trip time of its own, more than the delay under
# load: a relay that holds nothing is measured against the direct PING
# (the row for its bare hop), then one that holds RTT_US each way, and
# half of what that trial overshot direct + 2 x RTT_US comes off each
# direction's delay, so that the round trip through the delaying relay is
# about 2 x RTT_US above the direct one. Sets RELAY_US.
rtt_trial() {   # rtt_trial DELAY_US: median PING through a relay holding that
  local mport=${MASTER##*:} pid out=
  start_bg relay-trial ip netns exec "$NS_CLI" "$BENCH_BIN/bench_relay" "$1" "/run/netns/$NS_SRV" "$RTT_IP" "$mport"
  pid=$BG_PID
  wait_resp "$RTT_IP" "$mport" "$pid" "$NS_CLI" && out=$(rtt_ping "$NS_CLI")
  stop_pids "$pid"
  echo "$out"
}

rtt_calibrate() {
  local direct hop trial
  RELAY_US=$RTT_US
  direct=$(rtt_ping "$NS_SRV")
  hop=$(rtt_trial 0)
  trial=$(rtt_trial "$RTT_US")
  [ -n "$direct" ] && meas kvrtt.tcp.ping_direct_us "$direct" us
  [ -n "$hop" ] && meas kvrtt.tcp.ping_relay0_us "$hop" us
  if [ -n "$direct" ] && [ -n "$trial" ]; then
    RELAY_US=$(awk -v r="$RTT_US" -v t="$trial" -v d="$direct" \
      'BEGIN { x = r - (t - d - 2 * r) / 2; x = x < 0 ? 0 : x > 2 * r ? 2 * r : x; printf "%d", x }')
  fi
  meas kvrtt.tcp.relay_delay_us "$RELAY_US" us
}

# The relay in the client's namespace for the master and every data port
# the nodes announce; its pid joins the cluster's (stopped with it).
rtt_relay() {
  local mport=${MASTER##*:} dports
  dports=$(ip netns exec "$NS_SRV" redis-cli -p "$mport" MOON.TOPOLOGY 2>>"$WORK/run.log" |
           grep -o "$RTT_IP:[0-9]*" | cut -d: -f2 | sort -u | tr '\n' ' ')
  [ -n "$dports" ] || { SKIP_WHY="no node data ports in MOON.TOPOLOGY"; return 1; }
  rtt_calibrate
  start_bg relay ip netns exec "$NS_CLI" "$BENCH_BIN/bench_relay" "$RELAY_US" "/run/netns/$NS_SRV" \
    "$RTT_IP" "$mport" $dports
  CL_PIDS+=("$BG_PID")
  if ! wait_resp "$RTT_IP" "$mport" "$BG_PID" "$NS_CLI"; then
    SKIP_WHY="relay did not start: $(log_tail relay)"; return 1
  fi
}

step_kv_rtt() {
  local n
  CL_NODE_FLAGS=()
  if rtt_setup && cluster_start 2 1GB 0 && rtt_relay; then
    timeout 900 ip netns exec "$NS_CLI" "$BENCH_BIN/bench_client" kvcache "$LIBMOONKV" "$RTT_IP:${MASTER##*:}" \
      tcp 1000 256KiB 2>>"$WORK/run.log" | meas_import kvrtt.tcp.
    cluster_stop
  else
    cluster_stop
    for n in batch_put_s batch_get_s loop_put_s loop_get_s ping_us; do meas_skip "kvrtt.tcp.$n" "$SKIP_WHY"; done
  fi
  netns_reset_layout
  netns_cleanup
  row_plain "PING round trip to the master, direct (inside the servers' namespace)" kvrtt.tcp.ping_direct_us us
  row_plain "PING round trip through a relay that holds nothing (its own hop)" kvrtt.tcp.ping_relay0_us us
  row_plain "relay delay each way (${RTT_US} us less half of what a trial at ${RTT_US} us overshot)" \
    kvrtt.tcp.relay_delay_us us
  row_plain "PING round trip to the master through the delaying relay (target: direct + $((2 * RTT_US)) us)" \
    kvrtt.tcp.ping_us us
  row "KV-cache put 1000 x 256 KiB (tcp, relay-delayed +RTT): batch vs loop, wall-clock" \
    kvrtt.tcp.batch_put_s kvrtt.tcp.loop_put_s 5 s
  row "KV-cache get 1000 x 256 KiB (tcp, relay-delayed +RTT): batch vs loop, wall-clock" \
    kvrtt.tcp.batch_get_s kvrtt.tcp.loop_get_s 5 s
  row "KV-cache put batch (tcp, relay-delayed) vs one transfer of the same bytes through the relay" \
    kvrtt.tcp.batch_put_gbps kvrtt.tcp.one_put_gbps - GB/s
  row "KV-cache get batch (tcp, relay-delayed) vs one transfer of the same bytes through the relay" \
    kvrtt.tcp.batch_get_gbps kvrtt.tcp.one_get_gbps - GB/s
  note "+RTT rows (relay-delayed): no netem on this kernel; master and nodes in one network namespace, the client in another, every byte through bench_relay (spliced, not copied; one thread per direction) holding each chunk $RTT_US us per direction less half of what a trial through it overshot direct + $((2 * RTT_US)) us."
}
