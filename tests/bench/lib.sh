# tests/bench/lib.sh - what every step of run.sh shares: free ports,
# processes started in the background (all killed on exit), readiness
# waits, and the measurement store the report is built from.
#
# Sourced by run.sh after it sets WORK (scratch dir) and BUILD.
#
# Measurements: $WORK/meas.tsv, one "name<TAB>value<TAB>unit" per line;
# a skipped one is "name<TAB>-<TAB>skipped: why". Rows of the final
# table are composed from them by row() (report.sh).

BENCH_PIDS=()        # every background process we started
BENCH_NETNS=()       # every network namespace we created
BENCH_PORTS=" "      # ports handed out so far (never twice)
PORT_LO=25000 PORT_HI=25999

log() { echo "$*" >>"$WORK/run.log"; }

# ---- ports ----

port_in_use() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

# A free TCP port in 25000-25999 not handed out before: in $PORT.
next_port() {
  local span=$((PORT_HI - PORT_LO + 1)) start=$((RANDOM % (PORT_HI - PORT_LO + 1))) i p
  for ((i = 0; i < span; i++)); do
    p=$((PORT_LO + (start + i) % span))
    case "$BENCH_PORTS" in *" $p "*) continue;; esac
    port_in_use "$p" && continue
    BENCH_PORTS+="$p "
    PORT=$p
    return 0
  done
  echo "no free port in $PORT_LO-$PORT_HI" >&2
  return 1
}

# ---- processes ----

# start_bg NAME CMD...: runs CMD in the background, output in
# $WORK/NAME.log; its pid in $BG_PID.
start_bg() {
  local name=$1; shift
  log "start $name: $*"
  "$@" >"$WORK/$name.log" 2>&1 &
  BG_PID=$!
  BENCH_PIDS+=("$BG_PID")
}

# Stops the given pids: TERM, up to 5 s grace, then KILL.
stop_pids() {
  local p i alive
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null
  for ((i = 0; i < 50; i++)); do
    alive=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  kill -KILL "$@" 2>/dev/null
  for p in "$@"; do wait "$p" 2>/dev/null; done
  local keep=() q
  for q in "${BENCH_PIDS[@]}"; do
    case " $* " in *" $q "*) ;; *) keep+=("$q");; esac
  done
  BENCH_PIDS=("${keep[@]}")
}

stop_all() { stop_pids "${BENCH_PIDS[@]}"; }

# Deletes our namespaces; anything still running inside one is ours.
netns_cleanup() {
  local ns
  for ns in "${BENCH_NETNS[@]}"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  BENCH_NETNS=()
}

bench_cleanup() { stop_all; netns_cleanup; }

# wait_resp HOST PORT PID [NETNS]: up to 15 s for PING to answer PONG
# while PID lives. 0 when ready.
wait_resp() {
  local host=$1 port=$2 pid=$3 ns=${4:-} i
  local exec=(); [ -n "$ns" ] && exec=(ip netns exec "$ns")
  for ((i = 0; i < 150; i++)); do
    kill -0 "$pid" 2>/dev/null || return 1
    [ "$("${exec[@]}" redis-cli -h "$host" -p "$port" ping 2>/dev/null)" = PONG ] && return 0
    sleep 0.1
  done
  return 1
}

# Why a server did not come up, for a skip reason: its last warning line
# (moonkv and redis mark those with '#'), else its last line, without
# the pid/time prefix.
log_tail() {
  local f="$WORK/$1.log" line
  line=$(grep -E '^[0-9]+:[A-Z] .* # ' "$f" 2>/dev/null | tail -n 1)
  [ -n "$line" ] || line=$(tail -n 1 "$f" 2>/dev/null)
  echo "$line" | sed -E 's/^[0-9]+:[A-Z] [0-9]+ [A-Za-z]+ [0-9]+ [0-9:.]+ [#*.-] //' | tr '\t' ' ' | cut -c1-160
}

# ---- measurements ----

meas() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$WORK/meas.tsv"; }
meas_skip() { printf '%s\t-\tskipped: %s\n' "$1" "$2" >>"$WORK/meas.tsv"; }

# Value of a measurement (empty when missing or skipped).
meas_get() { awk -F'\t' -v n="$1" '$1 == n && $2 != "-" { v = $2 } END { print v }' "$WORK/meas.tsv"; }
# Why a measurement is missing.
meas_why() {
  awk -F'\t' -v n="$1" '$1 == n && $2 == "-" { v = $3 } END { print v }' "$WORK/meas.tsv"
}

# Stores the RESULT/SKIP lines of a bench_* program under PREFIX.; other
# lines go to the run log. A program that prints nothing for a name it
# was expected to measure leaves it missing, and row() says so.
meas_import() {
  local prefix=$1 kind name value unit
  while read -r kind name value unit; do
    case "$kind" in
      RESULT) meas "$prefix$name" "$value" "$unit";;
      SKIP) meas_skip "$prefix$name" "$value${unit:+ $unit}";;
      *) log "$kind $name $value $unit";;
    esac
  done
}

# Points for the throughput-by-size plot: SERIES BYTES GBPS.
plot_point() { [ -n "$3" ] && printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$WORK/plot.tsv"; return 0; }

# ---- progress ----

STEP_T0=0
step_begin() { STEP_T0=$SECONDS; printf '[%s] %s ... ' "$1" "$2"; log "== step $1: $2"; }
step_end() { printf '%ds%s\n' $((SECONDS - STEP_T0)) "${1:+, $1}"; }
