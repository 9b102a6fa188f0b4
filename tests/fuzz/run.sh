#!/usr/bin/env bash
# Runs one libFuzzer harness over its committed corpus, then on fresh
# inputs for SECONDS, and prints one TAP-ish line for tests/run.sh:
#   ok - fuzz/<name> (<runs> runs in <s> s, corpus <n> inputs)
#   not ok - fuzz/<name>: <what libFuzzer reported> (input saved as <path>)
# New inputs go to a scratch directory, never into tests/fuzz/corpus; a
# crashing input is kept under build/fuzz/crashes/ to become a regression
# input in the corpus once fixed.
# usage: tests/fuzz/run.sh build/fuzz/fuzz_<name> SECONDS
set -u
bin=$1; secs=${2:-20}
name=${bin##*/fuzz_}
# A harness with an open finding (tests/fuzz/open/) replays its corpus only.
replay=""
if ls tests/fuzz/open/"$name"-crash-* >/dev/null 2>&1; then replay="-runs=0"; secs=0; fi
corpus=tests/fuzz/corpus/$name
scratch=$(mktemp -d)
crashes=build/fuzz/crashes; mkdir -p "$crashes" "$corpus"
trap 'rm -rf "$scratch"' EXIT
"$bin" $replay -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
  -artifact_prefix="$scratch/" "$scratch" "$corpus" >"$scratch.log" 2>&1
rc=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch.log" | tail -1)
if [ "$rc" -eq 0 ]; then
  echo "ok - fuzz/$name (${runs:-?} runs in $secs s, corpus $(ls "$corpus" | wc -l) inputs)"
  rm -f "$scratch.log"
  exit 0
fi
saved=""
for f in "$scratch"/crash-* "$scratch"/leak-* "$scratch"/timeout-* "$scratch"/oom-*; do
  [ -f "$f" ] || continue
  saved="$crashes/$name-$(basename "$f")"; cp "$f" "$saved"
done
what=$(grep -m1 -E 'ERROR: |SUMMARY: |deadly signal' "$scratch.log" | sed 's/^==[0-9]*==//')
cat "$scratch.log" | tail -40
rm -f "$scratch.log"
echo "not ok - fuzz/$name: ${what:-exit $rc} (input saved as ${saved:-nothing})"
exit 1
