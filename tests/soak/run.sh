#!/usr/bin/env bash
# tests/soak/run.sh BUILD [CYCLES] - `make soak`: runs the soak driver of
# BUILD (default 10 million put/get/remove cycles) into
# tests/soak/results/<stamp>.csv and plots it next to it (<stamp>.png,
# gnuplot). The driver's "ok - / not ok - flat ..." lines are the verdict.
# `run.sh --plot CSV` plots an earlier run again.
# Uses fixed ports 31200-31249: run it alone (or under the test lock).
set -u
cd "$(dirname "$0")/../.."

plot() {   # plot CSV PNG TITLE
  local csv=$1 png=$2 title=$3
  command -v gnuplot >/dev/null && [ -s "$csv" ] || { echo "gnuplot missing or no samples: no plot" >&2; return 0; }
  gnuplot <<GP
set terminal pngcairo size 1100,900 noenhanced
set output '$png'
set datafile separator ','
set key outside right
set grid
set multiplot layout 3,1 title '$title'
set ylabel 'RSS (MiB, log)'
set logscale y
plot for [c=3:7] '$csv' using 1:(column(c)/1024) with linespoints title columnheader(c)
unset logscale y
set ylabel 'open fds'
plot for [c=8:12] '$csv' using 1:c with linespoints title columnheader(c)
set xlabel 'seconds'
set ylabel 'fragmentation / free extents'
set y2label 'held extents'
set y2tics
plot '$csv' using 1:15 with linespoints title 'fragmentation_max (worst node)', \
     '$csv' using 1:(\$14/1000) with linespoints title 'free_extents / 1000', \
     '$csv' using 1:16 axes x1y2 with linespoints title 'held_extents (right)'
unset multiplot
GP
  echo "plot: $png"
}

if [ "${1:-}" = --plot ]; then
  plot "$2" "${2%.csv}.png" "moonkv soak: $(tail -n 1 "$2" | cut -d, -f2) put/get/remove cycles (gateway + libmoonkv), $(basename "${2%.csv}")"
  exit 0
fi
build=${1:-build/rel}
cycles=${2:-10000000}
out=tests/soak/results
mkdir -p "$out"
stamp=$(date -u +%Y%m%d-%H%M%S)
csv="$out/$stamp.csv"
export MOONKV_SERVER="$PWD/$build/moonkv-server"
"$build/tests/soak/soak" "$csv" "$cycles" | tee "$out/$stamp.txt"
rc=${PIPESTATUS[0]}
plot "$csv" "$out/$stamp.png" "moonkv soak: $cycles put/get/remove cycles (gateway + libmoonkv), $stamp"
exit "$rc"
