#!/usr/bin/env bash
# tests/soak/run.sh BUILD [CYCLES] - `make soak`: runs the soak driver of
# BUILD (default 10 million put/get/remove cycles) into
# tests/soak/results/<stamp>.csv and plots it next to it (<stamp>.png,
# gnuplot). The driver's "ok - / not ok - flat ..." lines are the verdict.
# Uses fixed ports 31200-31249: run it alone (or under the test lock).
set -u
cd "$(dirname "$0")/../.."
build=${1:-build/rel}
cycles=${2:-10000000}
out=tests/soak/results
mkdir -p "$out"
stamp=$(date -u +%Y%m%d-%H%M%S)
csv="$out/$stamp.csv" png="$out/$stamp.png"
export MOONKV_SERVER="$PWD/$build/moonkv-server"
"$build/tests/soak/soak" "$csv" "$cycles" | tee "$out/$stamp.txt"
rc=${PIPESTATUS[0]}
if command -v gnuplot >/dev/null && [ -s "$csv" ]; then
  gnuplot <<GP
set terminal pngcairo size 1100,900 noenhanced
set output '$png'
set datafile separator ','
set key outside right
set grid
set multiplot layout 3,1 title 'moonkv soak: $cycles put/get/remove cycles (gateway + libmoonkv), $stamp'
set ylabel 'RSS (MiB)'
plot for [c=3:7] '$csv' using 1:(column(c)/1024) with linespoints title columnheader(c)
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
else
  echo "gnuplot missing or no samples: no plot" >&2
fi
exit "$rc"
