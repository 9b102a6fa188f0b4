# tests/bench/report.sh - the table, its CSV, the machine header and the
# throughput-by-size plot. Sourced by run.sh after lib.sh.
#
# Rows: $WORK/rows.tsv, "benchmark moonkv reference ratio unit target met".
# ratio is always "better than the reference by": moonkv/reference for
# rates, reference/moonkv for times (units s and us), memory held (MiB,
# B/object) and CPU share (%core) against a bound, so a target reads
# "ratio >= target" everywhere.

meas_unit() { awk -F'\t' -v n="$1" '$1 == n && $2 != "-" { v = $3 } END { print v }' "$WORK/meas.tsv"; }

# A table cell for a measurement: its value, or why there is none.
meas_cell() {
  local v; v=$(meas_get "$1")
  if [ -n "$v" ]; then echo "$v"; return; fi
  v=$(meas_why "$1")
  echo "${v:-skipped: not measured (see run.log)}"
}

# row BENCHMARK MOONKV_MEAS REFERENCE_MEAS|- TARGET|- [UNIT]
row() {
  local label=$1 m=$2 r=$3 target=$4 unit=${5:-}
  local mv rv mc rc ratio=- met=-
  mv=$(meas_get "$m"); mc=$(meas_cell "$m")
  [ -n "$unit" ] || unit=$(meas_unit "$m")
  [ -n "$unit" ] || unit=$(meas_unit "$r")
  if [ "$r" = - ]; then rc=-; rv=; else rv=$(meas_get "$r"); rc=$(meas_cell "$r"); fi
  # Counts are shown side by side; a ratio of them means nothing.
  if [ -n "$mv" ] && [ -n "$rv" ] && [ "$unit" != count ]; then
    ratio=$(awk -v m="$mv" -v r="$rv" -v u="$unit" 'BEGIN {
      lower = (u == "s" || u == "us" || u == "MiB" || u == "B/object" || u == "%core")
      if (lower ? m <= 0 : r <= 0) { print "-"; exit }
      printf "%.2f", lower ? r / m : m / r }')
  fi
  if [ "$target" != - ]; then
    if [ "$ratio" = - ]; then met="n/a"
    else met=$(awk -v x="$ratio" -v t="$target" 'BEGIN { print (x >= t ? "yes" : "NO") }'); fi
    target=">= ${target}x"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$mc" "$rc" "$ratio" "${unit:--}" "$target" "$met" \
    >>"$WORK/rows.tsv"
}

# A row with no reference: one measured number (e.g. a latency).
row_plain() { row "$1" "$2" - - "${3:-}"; }

machine_header() {
  local cpu mem
  cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
  mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
  echo "# moonkv benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- mode: $([ "$QUICK" = 1 ] && echo "quick (BENCH_QUICK=1)" || echo full)," \
       "git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- machine: $(nproc) cores, ${cpu:-unknown CPU}, $mem, kernel $(uname -r)"
  echo "- redis-server: $(redis-server --version 2>/dev/null | awk '{ print $3 }' | sed 's/^v=//')," \
       "redis-benchmark: $(redis-benchmark --version 2>/dev/null | awk '{ print $2 }')," \
       "iperf3: $(iperf3 --version 2>/dev/null | awk 'NR == 1 { print $2 }')"
  echo "- moonkv: $("$SERVER" --version 2>/dev/null | head -n 1)"
}

markdown_table() {
  echo '| benchmark | moonkv | reference | ratio | unit | target | met? |'
  echo '|---|---|---|---|---|---|---|'
  awk -F'\t' '{ gsub(/\|/, "/"); printf "| %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7 }' \
    "$WORK/rows.tsv"
}

csv_table() {
  echo 'benchmark,moonkv,reference,ratio,unit,target,met'
  awk -F'\t' '{
    line = ""
    for (i = 1; i <= 7; i++) { f = $i; gsub(/"/, "\"\"", f); line = line (i > 1 ? "," : "") "\"" f "\"" }
    print line }' "$WORK/rows.tsv"
}

# plot OUT.png: every series of plot.tsv, GB/s over object size (log-log).
plot_png() {
  local out=$1 dir="$WORK/plot" series plots=()
  command -v gnuplot >/dev/null || { echo "gnuplot missing: no plot" >&2; return 0; }
  [ -s "$WORK/plot.tsv" ] || return 0
  mkdir -p "$dir"
  while IFS= read -r series; do
    awk -F'\t' -v s="$series" '$1 == s { print $2, $3 }' "$WORK/plot.tsv" | sort -n >"$dir/$series.dat"
    plots+=("'$dir/$series.dat' using 1:2 with linespoints title '$series'")
  done < <(cut -f1 "$WORK/plot.tsv" | sort -u)
  local IFS=,
  gnuplot <<EOF 2>>"$WORK/run.log"
set terminal pngcairo size 1000,600 noenhanced
set output '$out'
set title 'moonkv throughput by object size (higher is better, both axes log)'
set logscale xy
set xtics ("64 B" 64, "1 KiB" 1024, "64 KiB" 65536, "1 MiB" 1048576, "4 MiB" 4194304, "64 MiB" 67108864)
set xrange [32:134217728]
set xlabel 'object size'
set ylabel 'GB/s (10^9 bytes/s)'
set key outside right
set grid
plot ${plots[*]}
EOF
}

# write_report DIR: DIR/<stamp>.md, .csv, .png; prints the table. The
# stamp stays in REPORT_STAMP.
write_report() {
  local dir=$1 stamp; stamp=$(date -u +%Y%m%d-%H%M%S)
  REPORT_STAMP=$stamp
  mkdir -p "$dir"
  {
    machine_header
    echo
    markdown_table
    echo
    echo "Ratio: moonkv over reference for rates, reference over moonkv for times"
    echo "(s, us): above 1 means moonkv is better. Plot: $stamp.png."
    [ -s "$WORK/notes.txt" ] && { echo; echo "Notes:"; echo; sed 's/^/- /' "$WORK/notes.txt"; }
  } >"$dir/$stamp.md"
  csv_table >"$dir/$stamp.csv"
  plot_png "$dir/$stamp.png"
  echo
  markdown_table
  echo
  echo "saved: $dir/$stamp.md, $stamp.csv$( [ -f "$dir/$stamp.png" ] && echo ", $stamp.png")"
}

# Free-text notes printed under the table.
note() { echo "$*" >>"$WORK/notes.txt"; }
