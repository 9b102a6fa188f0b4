# tests/bench/engines.sh - step 9: the calls inference engines make
# (bench_engines.py), over shm and TCP, on a master and two nodes.
# Sourced by run.sh after lib.sh, report.sh and cluster.sh.

step_engines() {
  local t
  CL_NODE_FLAGS=()
  if ! cluster_start 2 1GB 0; then
    for t in $CAPI_TRANSPORTS; do meas_skip "eng.$t.multi_put_s" "$SKIP_WHY"; done
  else
    for t in $CAPI_TRANSPORTS; do
      PYTHONPATH=$BENCH_PY:$BENCH_SHIM timeout 600 /usr/bin/python3 "$ROOT/tests/bench/bench_engines.py" \
        "$MASTER" "$t" 2>>"$WORK/run.log" | meas_import "eng.$t."
    done
    cluster_stop
  fi
  for t in $CAPI_TRANSPORTS; do
    local why n; why=$(meas_why "eng.$t.multi_put_s")
    if [ -n "$why" ]; then
      for n in multi_get_s contig_put_s contig_get_s prefix_one_s prefix_loop_s sglang_set_s sglang_get_s \
               binding_set_s binding_get_s; do
        [ -n "$(meas_get "eng.$t.$n")$(meas_why "eng.$t.$n")" ] || meas_skip "eng.$t.$n" "${why#skipped: }"
      done
    fi
    row "batch_put_from_multi_buffers 128 x 32 x 16 KiB ($t) vs batch_put_from 128 x 512 KiB" \
      "eng.$t.multi_put_s" "eng.$t.contig_put_s" 0.8 s
    row "batch_get_into_multi_buffers 128 x 32 x 16 KiB ($t) vs batch_get_into 128 x 512 KiB" \
      "eng.$t.multi_get_s" "eng.$t.contig_get_s" 0.8 s
    row "prefix exists of 4,096 keys, one call ($t) vs a loop of is_exist" \
      "eng.$t.prefix_one_s" "eng.$t.prefix_loop_s" - s
    row "SGLang adapter batch_set_v1 128 pages ($t) vs the binding's batch_put_from" \
      "eng.$t.sglang_set_s" "eng.$t.binding_set_s" 0.9 s
    row "SGLang adapter batch_get_v1 128 pages ($t) vs the binding's batch_get_into" \
      "eng.$t.sglang_get_s" "eng.$t.binding_get_s" 0.9 s
  done
}
