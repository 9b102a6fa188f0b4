# tests/bench/cluster.sh - the servers a step measures: redis-server,
# moonkv standalone, and a moonkv cluster (master, N nodes, optional
# gateway), on loopback or spread over network namespaces (netns.sh).
# Sourced by run.sh after lib.sh. Each start_* sets ADDR ("host:port")
# and returns non-zero with SKIP_WHY set when it cannot start.

# redis-server 7 with persistence off.
start_redis() {
  command -v redis-server >/dev/null || { SKIP_WHY="redis-server not installed"; return 1; }
  next_port || { SKIP_WHY="no free port"; return 1; }
  start_bg redis-$PORT redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --protected-mode yes
  REDIS_PID=$BG_PID
  ADDR=127.0.0.1:$PORT
  wait_resp 127.0.0.1 "$PORT" "$BG_PID" && return 0
  SKIP_WHY="redis-server did not start: $(log_tail redis-$PORT)"
  stop_pids "$REDIS_PID"; REDIS_PID=
  return 1
}

# start_standalone SEGMENT [FLAG...]
start_standalone() {
  local seg=$1; shift
  [ -x "$SERVER" ] || { SKIP_WHY="$SERVER not built"; return 1; }
  next_port || { SKIP_WHY="no free port"; return 1; }
  start_bg standalone-$PORT "$SERVER" --role standalone --bind 127.0.0.1 --port "$PORT" \
    --segment-size "$seg" "$@"
  STANDALONE_PID=$BG_PID
  ADDR=127.0.0.1:$PORT
  wait_resp 127.0.0.1 "$PORT" "$BG_PID" && return 0
  SKIP_WHY="standalone did not start: $(log_tail standalone-$PORT)"
  stop_pids "$STANDALONE_PID"; STANDALONE_PID=
  return 1
}

# Where cluster pieces run. Loopback by default; netns.sh sets these to
# put the master (and the client) in a hub namespace and node i in its own.
CL_PIDS=()            # the running cluster's processes
CL_HUB_NS=""          # namespace of master and gateway ("" = this one)
CL_MASTER_BIND=127.0.0.1
CL_NODE_NS=()         # per node: namespace ("" = this one)
CL_NODE_IP=()         # per node: its data/RESP address
CL_NODE_MASTER_IP=()  # per node: the master's address as that node sees it
CL_NODE_FLAGS=()      # extra flags for every node, e.g. --prefault no
CL_NODE_PERSIST=(--segment-persist no)   # () for a server from before the flag (BENCH_PREV_BUILD)
CL_GW_FLAGS=()        # extra flags for the gateway, e.g. --transport tcp

# in_ns NS CMD...: CMD inside namespace NS, or here when NS is empty.
in_ns() {
  local ns=$1; shift
  if [ -n "$ns" ]; then ip netns exec "$ns" "$@"; else "$@"; fi
}

# start_bg_ns NAME NS CMD...: start_bg inside NS. `ip netns exec` execs
# CMD without forking, so BG_PID is the server itself.
start_bg_ns() {
  local name=$1 ns=$2; shift 2
  if [ -n "$ns" ]; then start_bg "$name" ip netns exec "$ns" "$@"; else start_bg "$name" "$@"; fi
}

# Waits up to 15 s for the master at host:port (in ns) to see n nodes alive.
wait_nodes() {
  local ns=$1 host=$2 port=$3 want=$4 i alive
  for ((i = 0; i < 150; i++)); do
    alive=$(in_ns "$ns" redis-cli -h "$host" -p "$port" info cluster 2>/dev/null |
            awk -F: '/^nodes_alive:/ { print $2 + 0 }')
    [ "${alive:-0}" -ge "$want" ] && return 0
    sleep 0.1
  done
  return 1
}

# cluster_start NODES SEGMENT GATEWAY(0|1) [MASTER_FLAG...]
# The gateway stores CL_GW_REPLICAS replicas (default 1) and runs
# CL_GW_IO_THREADS event loops (default 1). Sets MASTER (host:port for the client, seen from the hub), ADDR (the
# gateway, when asked for) and CL_PIDS.
cluster_start() {
  local nodes=$1 seg=$2 gw=$3; shift 3
  local i mport ip mip ns rport dport pid
  CL_PIDS=()
  [ -x "$SERVER" ] || { SKIP_WHY="$SERVER not built"; return 1; }
  next_port || { SKIP_WHY="no free port"; return 1; }
  mport=$PORT
  start_bg_ns master-$mport "$CL_HUB_NS" "$SERVER" --role master --bind "$CL_MASTER_BIND" \
    --port "$mport" "$@"
  CL_PIDS+=("$BG_PID")
  MASTER=127.0.0.1:$mport
  if ! wait_resp 127.0.0.1 "$mport" "$BG_PID" "$CL_HUB_NS"; then
    SKIP_WHY="master did not start: $(log_tail master-$mport)"
    cluster_stop; return 1
  fi
  for ((i = 0; i < nodes; i++)); do
    ns=${CL_NODE_NS[i]:-} ip=${CL_NODE_IP[i]:-127.0.0.1} mip=${CL_NODE_MASTER_IP[i]:-127.0.0.1}
    next_port && rport=$PORT && next_port && dport=$PORT || { SKIP_WHY="no free port"; cluster_stop; return 1; }
    start_bg_ns node-$rport "$ns" "$SERVER" --role node --bind "$ip" --port "$rport" \
      --master "$mip:$mport" --segment-size "$seg" --data-addrs "$ip:$dport" "${CL_NODE_PERSIST[@]}" \
      "${CL_NODE_FLAGS[@]}"
    pid=$BG_PID
    CL_PIDS+=("$pid")
    if ! wait_resp "$ip" "$rport" "$pid" "$ns"; then
      SKIP_WHY="node did not start: $(log_tail node-$rport)"
      cluster_stop; return 1
    fi
  done
  if ! wait_nodes "$CL_HUB_NS" 127.0.0.1 "$mport" "$nodes"; then
    SKIP_WHY="the master did not see $nodes nodes alive within 15 s"
    cluster_stop; return 1
  fi
  [ "$gw" = 1 ] || return 0
  next_port || { SKIP_WHY="no free port"; cluster_stop; return 1; }
  start_bg_ns gateway-$PORT "$CL_HUB_NS" "$SERVER" --role gateway --bind 127.0.0.1 \
    --port "$PORT" --master "$MASTER" --replicas "${CL_GW_REPLICAS:-1}" --io-threads "${CL_GW_IO_THREADS:-1}" \
    "${CL_GW_FLAGS[@]}"
  CL_PIDS+=("$BG_PID")
  ADDR=127.0.0.1:$PORT
  if ! wait_resp 127.0.0.1 "$PORT" "$BG_PID" "$CL_HUB_NS"; then
    SKIP_WHY="gateway did not start: $(log_tail gateway-$PORT)"
    cluster_stop; return 1
  fi
}

cluster_stop() { stop_pids "${CL_PIDS[@]}"; CL_PIDS=(); }
