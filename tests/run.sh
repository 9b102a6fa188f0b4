#!/usr/bin/env bash
# Runs every suite for each build directory given (e.g. build/rel build/san
# build/tsan): C unit tests, C integration tests, the Tcl protocol tests,
# the Python binding's pytest suite, then (plain build only) the install
# test; then the fuzz harnesses once. A ThreadSanitizer build (build/tsan,
# `make SAN=thread tsan`) holds only the threaded parts' tests; they run
# with tests/tsan.supp, any report fails them, and the Tcl and Python
# suites are left to the other builds.
# Counts "ok - " / "not ok - " lines; a binary that dies without reporting a
# failed case counts as one failure. The last line is "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
passed=0; failed=0
log_dir=build/test-logs; mkdir -p "$log_dir"

run_one() {   # run_one LABEL CMD...
  local label=$1; shift
  local log="$log_dir/$(echo "$label" | tr '/ ' '__').log"
  local t0=$SECONDS
  # Integration tests use fixed ports: two checkouts on one machine take
  # turns per test binary (the lock is named after it), not for the whole suite.
  flock "/tmp/moonkv-test-${label##*/}.lock" \
    timeout --kill-after=10 "${MKV_TEST_TIMEOUT:-600}" "$@" >"$log" 2>&1
  local rc=$?
  local ok nok
  ok=$(grep -c '^ok - ' "$log"); nok=$(grep -c '^not ok - ' "$log")
  if [ "$rc" -ne 0 ] && [ "$nok" -eq 0 ]; then nok=1; echo "not ok - $label exited with $rc" >>"$log"; fi
  if [ "$rc" -eq 0 ] && [ "$ok" -eq 0 ] && [ "$nok" -eq 0 ]; then nok=1; echo "not ok - $label ran no case" >>"$log"; fi
  passed=$((passed + ok)); failed=$((failed + nok))
  printf '%-48s %4d ok %3d failed  %3ds\n' "$label" "$ok" "$nok" $((SECONDS - t0))
  if [ "$nok" -gt 0 ]; then grep '^not ok - ' "$log" | head -20 | sed 's/^/    /'; tail -n 15 "$log" | sed 's/^/    | /'; fi
}

# The folder-level include/link graph of the first build: layers and cycles.
run_one "layers" python3 scripts/layers.py "$1"

for build in "$@"; do
  tag=$(basename "$build")
  export MOONKV_SERVER="$PWD/$build/moonkv-server" MOONKV_BUILD="$PWD/$build"
  tsan=0
  case "$tag" in *tsan*) tsan=1;; esac
  if [ "$tsan" = 1 ]; then
    export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 exitcode=66 second_deadlock_stack=1"
  else
    unset TSAN_OPTIONS
  fi
  for t in "$build"/tests/unit/test_* "$build"/tests/integration/test_*; do
    [ -x "$t" ] || continue
    case "$t" in *.d|*.o) continue;; esac
    run_one "$tag/$(basename "$(dirname "$t")")/$(basename "$t")" "$t"
  done
  [ "$tsan" = 1 ] && continue   # TSan: the threaded parts' C tests only
  if [ -f tcl-tests/run.tcl ]; then
    run_one "$tag/tcl" tclsh tcl-tests/run.tcl --server "$MOONKV_SERVER"
    run_one "$tag/tcl-cluster" tclsh tcl-tests/run.tcl --server "$MOONKV_SERVER" --cluster
  fi
  # The SAN build's extension needs the sanitizer runtimes preloaded into
  # python3; CPython's own allocations would read as leaks, so no LSan.
  py_env=(PYTHONPATH="$build/python:$build/mooncake-shim:python/tests")
  if [ "$tag" = san ]; then
    py_env+=(LD_PRELOAD="$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)"
             ASAN_OPTIONS=detect_leaks=0)
  fi
  run_one "$tag/python" env "${py_env[@]}" "${PYTHON:-/usr/bin/python3}" \
    -m pytest -p tap -p no:terminal -p no:cacheprovider python/tests
  [ "$tag" = san ] || run_one "$tag/install" tests/install.sh
done

# libFuzzer harnesses (built by `make fuzz-build`), once, not per build:
# each over its corpus plus FUZZ_TEST_SECONDS of new inputs.
if [ -d build/fuzz ]; then
  for f in build/fuzz/fuzz_*; do
    [ -x "$f" ] || continue
    run_one "fuzz/${f##*/fuzz_}" tests/fuzz/run.sh "$f" "${FUZZ_TEST_SECONDS:-20}"
  done
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
