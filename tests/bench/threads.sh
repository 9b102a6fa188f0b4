# tests/bench/threads.sh - step 11: libmoonkv from several threads, one
# client shared by them (issue 27's process-wide core: its calls run at
# once on lanes) against a client per thread, in the same run, on one
# two-node cluster per transport. Sourced by run.sh.
#
# Names: thr.<transport>.{shared,own}.{put,get}.256KiB.<n>t: GB/s of all
# n threads together (16 objects per thread per round, put then get then
# remove, rounds until $BENCH_SECONDS; the best of two passes per side,
# run shared, own, own, shared); thr.<transport>.py.{put,get}.
# 256KiB.<n>t: the same from Python threads on one MoonkvStore
# (bench_py_threads.py), 1 to 8 threads. Over tcp also the async face
# (bench_async): thr.tcp.async.<op>.4KiB.1t.w<n>: ops/s of exists, put,
# get and remove from one event loop with n of them in flight on a face
# of one thread, 64 against 1 (what a thread parked per call gives).

THR_COUNTS="1 2 4"
PY_THR_COUNTS="1 2 4 8"

step_threads() {
  local t n op
  CL_NODE_FLAGS=()
  for t in tcp shm; do
    if cluster_start 2 1GB 0; then
      timeout 600 "$BENCH_BIN/bench_client" threads "$LIBMOONKV" "$MASTER" "$t" 256KiB $THR_COUNTS \
        2>>"$WORK/run.log" | meas_import "thr.$t."
      PYTHONPATH=$BENCH_PY timeout 600 /usr/bin/python3 "$ROOT/tests/bench/bench_py_threads.py" \
        "$MASTER" "$t" 256KiB $PY_THR_COUNTS 2>>"$WORK/run.log" | meas_import "thr.$t."
      if [ "$t" = tcp ]; then
        for n in 64 1; do
          timeout 300 "$BENCH_BIN/bench_async" "$LIBMOONKV" "$MASTER" tcp 4KiB 1 $n 2>>"$WORK/run.log" | meas_import "thr.tcp."
        done
      fi
      cluster_stop
    else
      for n in $THR_COUNTS; do for op in put get; do
        meas_skip "thr.$t.shared.$op.256KiB.${n}t" "$SKIP_WHY"; meas_skip "thr.$t.own.$op.256KiB.${n}t" "$SKIP_WHY"
      done; done
    fi
    if [ "$t" = tcp ]; then
      for op in exists put get remove; do
        row "libmoonkv async face $op 4 KiB (tcp), one thread: 64 in flight vs 1" \
          "thr.tcp.async.$op.4KiB.1t.w64" "thr.tcp.async.$op.4KiB.1t.w1" - ops/s
      done
    fi
    for op in put get; do
      for n in $THR_COUNTS; do
        row "libmoonkv $op 256 KiB ($t), $n thread(s) on one shared client vs $n client(s), one per thread" \
          "thr.$t.shared.$op.256KiB.${n}t" "thr.$t.own.$op.256KiB.${n}t" 0.8 GB/s
      done
      for n in 2 4; do
        row "libmoonkv $op 256 KiB ($t), one shared client: $n threads vs 1 thread" \
          "thr.$t.shared.$op.256KiB.${n}t" "thr.$t.shared.$op.256KiB.1t" - GB/s
      done
      for n in 2 4 8; do
        row "Python $op (put_from/get_into) 256 KiB ($t), one MoonkvStore: $n threads vs 1 thread" \
          "thr.$t.py.$op.256KiB.${n}t" "thr.$t.py.$op.256KiB.1t" - GB/s
      done
    done
  done
}
