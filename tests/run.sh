#!/usr/bin/env bash
# Runs every suite for each build directory given (e.g. build/rel build/san
# build/tsan): C unit tests, C integration tests, the Tcl protocol tests,
# the Python binding's pytest suite, then (plain build only) the install
# test; then the fuzz harnesses once. A ThreadSanitizer build (build/tsan,
# `make SAN=thread tsan`) holds only the threaded parts' tests; they run
# with tests/tsan.supp, any report fails them, and the Tcl and Python
# suites are left to the other builds.
#
# Binaries run side by side, builds overlapping: up to MKV_TEST_JOBS at a
# time (default: four times the core count) while the CPU they are known
# to use stays within MKV_TEST_CPU hundredths of a core (default: 120 per
# core). Most integration binaries wait on servers, timeouts and faults
# far more than they compute, a few compute all the time (docs/TESTS.md):
# a count alone either leaves cores idle or piles the computing ones on
# each other. Every test takes its ports from tests/support/ports.{c,py},
# so none clash. The longest start first, by the times of the last run
# (build/test-logs/durations), else of the quiet run in tests/durations (a
# fresh checkout, as on CI, has no last run); the few in ALONE below run
# after the others, one at a time. A binary's output goes to
# build/test-logs/<label>.log; one line per binary is printed as it ends
# (its wall and CPU seconds, and when it ended since the run began).
# Counts "ok - " / "not ok - " lines; a binary that dies without reporting a
# failed case counts as one failure, and so does one that ran no case. The
# last line is "N passed, N failed". MKV_TEST_ONLY="GLOB..." runs only the
# binaries whose label (as printed, e.g. rel/integration/test_gateway)
# matches one of the globs.
#
# --build (what `make test` passes) builds each of them first, one after
# another (rel, then the others in the order given, then build/fuzz), as
# jobs of the same pool: a build's binaries are admitted as soon as that
# build is done, so the plain build's tests run while the sanitizer builds
# compile. A build holds the CPU it used in the quiet run of tests/durations
# (its CPU over its wall seconds, build/<tag>; a sanitizer build's
# compiles wait on archives and links, about 1.2 of 2 cores), else its
# make -j (MKV_BUILD_JOBS, the core count) in whole cores; MKV_BUILD_CPU
# (hundredths of a core) overrides both. Tests that fit the rest run
# beside it. A failed build counts as one failure and its binaries do not
# run.
set -u
cd "$(dirname "$0")/.."
build_first=0
if [ "${1:-}" = --build ]; then build_first=1; shift; fi
log_dir=build/test-logs; mkdir -p "$log_dir"
res_dir=$(mktemp -d "$log_dir/.results.XXXXXX")
trap 'rm -rf "$res_dir"' EXIT
max_jobs=${MKV_TEST_JOBS:-$((4 * $(nproc)))}
cpu_budget=${MKV_TEST_CPU:-$((120 * $(nproc)))}   # hundredths of a core
build_jobs=${MKV_BUILD_JOBS:-$(nproc)}
build_cpu_max=$((100 * build_jobs))
t_start=$SECONDS

# Binaries that need the machine to themselves: they bound a time or a
# memory figure that other binaries' load would push over. Label globs.
ALONE=()

labels=(); cmds=()   # the job list, in start order; cmds[i] is %q-quoted

add() {   # add LABEL CMD...: a job, run with the build's environment of now
  local tsan_env=(-u TSAN_OPTIONS)
  [ -n "${TSAN_OPTIONS:-}" ] && tsan_env=("TSAN_OPTIONS=$TSAN_OPTIONS")
  labels+=("$1"); shift
  local cmd
  printf -v cmd '%q ' env "${tsan_env[@]}" "MOONKV_SERVER=${MOONKV_SERVER:-}" "MOONKV_BUILD=${MOONKV_BUILD:-}" "$@"
  cmds+=("$cmd")
}

run_one() {   # run_one LABEL CMD: one binary, its line printed, its counts in res_dir
  local label=$1 cmd=$2
  local file=${label//[\/ ]/_}
  local log="$log_dir/$file.log"
  local t0=$SECONDS cpu_file="$res_dir/$file.cpu" timer=""
  # CPU seconds (user + system) of the binary and the children it waited
  # for: with the wall time, whether a binary waits or computes.
  [ -x /usr/bin/time ] && printf -v timer '/usr/bin/time -f %q -o %q ' '%U %S' "$cpu_file"
  # Two checkouts on one machine take turns per test binary (the lock is
  # named after it): fixed /tmp paths, network namespaces and load.
  eval "flock /tmp/moonkv-test-${label##*/}.lock timeout --kill-after=10 ${MKV_TEST_TIMEOUT:-600} $timer$cmd" \
    >"$log" 2>&1 </dev/null
  local rc=$?
  local cpu=-
  [ -s "$cpu_file" ] && cpu=$(tail -1 "$cpu_file" | awk 'NF == 2 {printf "%d", $1 + $2 + 0.5}')
  local ok nok
  ok=$(grep -c '^ok - ' "$log"); nok=$(grep -c '^not ok - ' "$log")
  if [ "$rc" -ne 0 ] && [ "$nok" -eq 0 ]; then nok=1; echo "not ok - $label exited with $rc" >>"$log"; fi
  if [ "$rc" -eq 0 ] && [ "$ok" -eq 0 ] && [ "$nok" -eq 0 ]; then nok=1; echo "not ok - $label ran no case" >>"$log"; fi
  local secs=$((SECONDS - t0))
  echo "$ok $nok $secs ${cpu:--}" >"$res_dir/$file"
  {
    flock 9   # one binary's lines stay together
    printf '%-48s %4d ok %3d failed  %3ds  cpu %3ss  at %3ds\n' "$label" "$ok" "$nok" "$secs" "${cpu:--}" \
      "$((SECONDS - t_start))"
    if [ "$nok" -gt 0 ]; then grep '^not ok - ' "$log" | head -20 | sed 's/^/    /'; tail -n 15 "$log" | sed 's/^/    | /'; fi
  } 9>>"$res_dir/.print.lock"
}

matches() {   # matches LABEL GLOB...
  local label=$1 g; shift
  for g in "$@"; do [[ $label == $g ]] && return 0; done
  return 1
}

# The jobs of one build directory: its C unit and integration binaries, and
# (not TSan) the Tcl, Python and (plain build only) install suites.
add_build() {   # add_build BUILD
  local build=$1 tag t d tsan=0
  tag=$(basename "$build")
  export MOONKV_SERVER="$PWD/$build/moonkv-server" MOONKV_BUILD="$PWD/$build"
  case "$tag" in *tsan*) tsan=1;; esac
  if [ "$tsan" = 1 ]; then
    # history_size=7: a suppression (tests/tsan.supp) matches only a stack
    # TSan can still restore; the default history lost ahead_copy's read.
    export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 exitcode=66 second_deadlock_stack=1 history_size=7"
  else
    unset TSAN_OPTIONS
  fi
  for t in "$build"/tests/unit/test_* "$build"/tests/integration/test_*; do
    [ -x "$t" ] || continue
    case "$t" in *.d|*.o) continue;; esac
    d=${t%/*}
    add "$tag/${d##*/}/${t##*/}" "$t"
  done
  [ "$tsan" = 1 ] && return   # TSan: the threaded parts' C tests only
  if [ -f tcl-tests/run.tcl ]; then
    add "$tag/tcl" tclsh tcl-tests/run.tcl --server "$MOONKV_SERVER"
    add "$tag/tcl-cluster" tclsh tcl-tests/run.tcl --server "$MOONKV_SERVER" --cluster
  fi
  # The SAN build's extension needs the sanitizer runtimes preloaded into
  # python3; CPython's own allocations would read as leaks, so no LSan.
  local py_env=(PYTHONPATH="$build/python:$build/mooncake-shim:python/tests")
  if [ "$tag" = san ]; then
    py_env+=(LD_PRELOAD="$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)"
             ASAN_OPTIONS=detect_leaks=0)
  fi
  add "$tag/python" env "${py_env[@]}" "${PYTHON:-/usr/bin/python3}" \
    -m pytest -p tap -p no:terminal -p no:cacheprovider python/tests
  [ "$tag" = san ] || add "$tag/install" tests/install.sh
}

# libFuzzer harnesses (built by `make fuzz-build`), once, not per build:
# each over its whole corpus plus its share of FUZZ_TEST_BUDGET seconds of
# new inputs (all harnesses together; `make fuzz` runs each far longer).
add_fuzz() {
  [ -d build/fuzz ] || return 0
  local harnesses=() f share
  for f in build/fuzz/fuzz_*; do [ -x "$f" ] && harnesses+=("$f"); done
  [ ${#harnesses[@]} -gt 0 ] || return 0
  share=$(( ${FUZZ_TEST_BUDGET:-60} / ${#harnesses[@]} ))
  [ "$share" -lt 1 ] && share=1
  for f in "${harnesses[@]}"; do add "fuzz/${f##*/fuzz_}" tests/fuzz/run.sh "$f" "$share"; done
}

# The jobs a build adds: those of the first build also check its
# folder-level include/link graph (layers, cycles) and the gateway's call
# tree (no cycle: docs/GATEWAY.md).
add_jobs_of() {   # add_jobs_of BUILD
  if [ "$1" = fuzz ]; then add_fuzz; return; fi
  if [ "$1" = "$first_build" ]; then
    add "layers" python3 scripts/layers.py "$1"
    add "callgraph" python3 scripts/callgraph.py src/gateway "$1"
  fi
  add_build "$1"
}

# Longest first by the times known (this checkout's last run, else the
# quiet run in tests/durations; unknown ones first: they may be long),
# else in the order added. A binary's CPU share (hundredths of a core:
# its CPU over its wall seconds) is what run_pool budgets; an unknown one
# counts as a whole core.
durations=$log_dir/durations
known=$(cat "$durations" tests/durations 2>/dev/null | awk 'NF >= 2 && !seen[$1]++')
dur=(); cpu_share=(); scheduled=(); pending=(); alone=()
read -ra only <<<"${MKV_TEST_ONLY:-}"
admit() {   # admit FIRST: the jobs added from index FIRST on join pending (or alone), longest first
  local i w s
  while read -r i w s; do
    if [ ${#only[@]} -gt 0 ] && ! matches "${labels[$i]}" "${only[@]}"; then continue; fi
    dur[i]=$w; cpu_share[i]=$s; scheduled+=("$i")
    if matches "${labels[$i]}" "${ALONE[@]}"; then alone+=("$i"); cpu_share[i]=100; else pending+=("$i"); fi
  done < <(for ((i = $1; i < ${#labels[@]}; i++)); do echo "$i ${labels[$i]}"; done |
    awk 'NR == FNR {t[$1] = $2; c[$1] = $3; next}
         {w = $2 in t ? t[$2] : 999999
          s = ($2 in t && c[$2] ~ /^[0-9]+$/) ? int(100 * c[$2] / (t[$2] > 0 ? t[$2] : 1) + 0.5) : 100
          print $1, w, s}' <(printf '%s\n' "$known") -)
  [ ${#pending[@]} -gt 0 ] || return 0
  mapfile -t pending < <(for i in "${pending[@]}"; do echo "${dur[$i]} $i"; done | sort -k1,1nr -k2,2n | awk '{print $2}')
}

# What a build holds of the CPU budget: MKV_BUILD_CPU, else its share in
# the quiet run's times (tests/durations: build/<tag> WALL CPU; a
# checkout's own last build was mostly up to date, so says little), at
# most its make -j in whole cores.
build_hold() {   # build_hold BUILD
  [ -n "${MKV_BUILD_CPU:-}" ] && { echo "$MKV_BUILD_CPU"; return; }
  awk -v b="build/${1##*/}" -v max="$build_cpu_max" '
    $1 == b && $3 ~ /^[0-9]+$/ && $2 > 0 {s = int(100 * $3 / $2 + 0.5); found = 1; exit}
    END {print (found && s < max) ? s : max}' tests/durations 2>/dev/null || echo "$build_cpu_max"
}

# One build (make -j$build_jobs of its test-build-<tag> target), its line
# printed as it ends, its status and times in res_dir.
build_failed=0; build_lines=(); build_times=()
run_build() {   # run_build BUILD
  local tag=${1##*/} t0=$SECONDS cpu=- timer=""
  local log="$log_dir/build-$tag.log" cpu_file="$res_dir/build-$tag.cpu"
  [ -x /usr/bin/time ] && printf -v timer '/usr/bin/time -f %q -o %q ' '%U %S' "$cpu_file"
  eval "$timer${MAKE:-make} --no-print-directory -j$build_jobs test-build-$tag" >"$log" 2>&1 </dev/null
  local rc=$?
  [ -s "$cpu_file" ] && cpu=$(tail -1 "$cpu_file" | awk 'NF == 2 {printf "%d", $1 + $2 + 0.5}')
  echo "$rc $((SECONDS - t0)) $cpu" >"$res_dir/build-$tag"
  {
    flock 9
    printf '%-48s %-16s %3ds  cpu %3ss  at %3ds\n' "build/$tag" "$([ "$rc" = 0 ] && echo built || echo "FAILED ($rc)")" \
      "$((SECONDS - t0))" "$cpu" "$((SECONDS - t_start))"
    [ "$rc" = 0 ] || tail -n 30 "$log" | sed 's/^/    | /'
  } 9>>"$res_dir/.print.lock"
}

build_done() {   # build_done BUILD: its result read; its jobs admitted if it built
  local tag=${1##*/} rc secs cpu first=${#labels[@]}
  read -r rc secs cpu <"$res_dir/build-$tag"
  build_lines+=("build/$tag ${secs}s cpu ${cpu}s")
  [[ $cpu =~ ^[0-9]+$ ]] && build_times+=("build/$tag $secs $cpu")
  if [ "$rc" != 0 ]; then
    build_failed=$((build_failed + 1))
    echo "not ok - build/$tag failed (exit $rc), its tests not run: $log_dir/build-$tag.log"
    return
  fi
  add_jobs_of "$1"
  admit "$first"
}

# Runs pending (and builds, one at a time, each before any test it can
# start) until all are done: MAX jobs at a time within the CPU budget,
# never two binaries of one name at once. A running build holds build_hold.
run_pool() {   # run_pool MAX
  local max=$1 i k started done_pid load=0 bpid="" bdir="" hold
  declare -A running=() held=()   # pid -> binary name, its CPU share
  while [ ${#pending[@]} -gt 0 ] || [ ${#running[@]} -gt 0 ] || [ ${#build_queue[@]} -gt 0 ]; do
    started=0
    if [ -z "$bpid" ] && [ ${#build_queue[@]} -gt 0 ]; then
      bdir=${build_queue[0]}; build_queue=("${build_queue[@]:1}")
      hold=$(build_hold "$bdir")
      run_build "$bdir" &
      bpid=$!; running[$bpid]=build; held[$bpid]=$hold
      load=$((load + hold))
      continue
    fi
    if [ ${#running[@]} -lt "$max" ]; then
      for k in "${!pending[@]}"; do
        i=${pending[$k]}
        [[ " ${running[*]} " == *" ${labels[$i]##*/} "* ]] && continue
        # The first that fits the CPU left, in longest-first order: a
        # computing one waits for room, waiting ones fill the gaps.
        [ ${#running[@]} -gt 0 ] && [ $((load + cpu_share[i])) -gt "$cpu_budget" ] && continue
        run_one "${labels[$i]}" "${cmds[$i]}" &
        running[$!]=${labels[$i]##*/}
        held[$!]=${cpu_share[$i]}
        load=$((load + cpu_share[i]))
        unset "pending[$k]"
        started=1
        break
      done
    fi
    [ "$started" = 1 ] && continue
    [ ${#running[@]} -gt 0 ] || break   # nothing runs and nothing fits (cannot happen: the first always starts)
    wait -n -p done_pid
    load=$((load - ${held[$done_pid]:-0}))
    unset "running[$done_pid]" "held[$done_pid]"
    if [ "$done_pid" = "$bpid" ]; then
      bpid=""
      build_done "$bdir"
      pending=("${pending[@]}")
    fi
  done
}

first_build=${1:-}
build_queue=()
if [ "$build_first" = 1 ]; then
  build_queue=("$@")
  [ -f Makefile ] && grep -q '^test-build-fuzz:' Makefile && build_queue+=(fuzz)
else
  for b in "$@"; do add_jobs_of "$b"; done
  add_jobs_of fuzz
  admit 0
fi
run_pool "$max_jobs"
if [ ${#alone[@]} -gt 0 ]; then
  pending=("${alone[@]}"); alone_n=${#alone[@]}; alone=()
  run_pool 1
else
  alone_n=0
fi

passed=0; failed=$build_failed; times=(); sum_secs=0; sum_cpu=0
for i in "${scheduled[@]}"; do
  f="$res_dir/${labels[$i]//[\/ ]/_}"
  if [ -f "$f" ]; then read -r ok nok secs cpu <"$f"; else ok=0; nok=1; secs=""; echo "not ok - ${labels[$i]}: no result"; fi
  passed=$((passed + ok)); failed=$((failed + nok))
  [ -n "$secs" ] && times+=("${labels[$i]} $secs ${cpu:--}") && sum_secs=$((sum_secs + secs))
  [[ ${cpu:-} =~ ^[0-9]+$ ]] && sum_cpu=$((sum_cpu + cpu))
done
# This run's times (wall, CPU) replace those of the same binaries (and builds).
times+=("${build_times[@]}")
if [ ${#times[@]} -gt 0 ]; then
  { printf '%s\n' "${times[@]}"; [ -f "$durations" ] && cat "$durations"; } |
    awk 'NF >= 2 && !seen[$1]++' | sort >"$durations.new" && mv "$durations.new" "$durations"
fi
[ ${#build_lines[@]} -gt 0 ] && echo "# builds: $(IFS=,; echo "${build_lines[*]}" | sed 's/,/, /g')"
echo "# ${#scheduled[@]} binaries in $((SECONDS - t_start)) s, up to $max_jobs at a time within $cpu_budget% of CPU ($alone_n alone):" \
  "$sum_secs s of binaries' wall time, $sum_cpu s of CPU"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
