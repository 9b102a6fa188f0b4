# tests/bench/disk.sh - step 10: the node's disk tier store against fio.
#
# bench_disk (tests/bench/bench_disk.c) puts and reads 1 MiB and 4 MiB
# values through src/node/disk_store.c (io_uring, O_DIRECT) with
# DISK_JOBS threads; fio does the same block size and queue depth with
# O_DIRECT on a file in the same directory ($BENCH_DISK_DIR, default a
# directory under /var/tmp: a disk, not a tmpfs). Writes are measured
# twice, into a new file (blocks only allocated: unwritten extents cost
# ext4 about half the speed) and over written blocks, for both. Sourced
# by run.sh.

DISK_JOBS=4

# fio_measure NAME RW BS DEPTH: GB/s, clat p50 and p99 (us) as NAME.gbps, NAME.p50, NAME.p99.
fio_measure() {
  local name=$1 rw=$2 bs=$3 depth=$4 out
  out=$(fio --name=ref --filename="$DISK_DIR/fio.dat" --size="${DISK_MB}M" --bs="$bs" --iodepth="$depth" \
        --rw="$rw" --direct=1 --ioengine=io_uring --output-format=json 2>>"$WORK/run.log") || {
    meas_skip "$name.gbps" "fio failed (see the run log)"; return; }
  echo "$out" | python3 -c '
import json, sys
s = json.load(sys.stdin)["jobs"][0]["read" if "read" in sys.argv[2] else "write"]
p = s["clat_ns"]["percentile"]
print("RESULT %s.gbps %.6g GB/s" % (sys.argv[1], s["bw_bytes"] / 1e9))
print("RESULT %s.p50 %.6g us" % (sys.argv[1], p["50.000000"] / 1e3))
print("RESULT %s.p99 %.6g us" % (sys.argv[1], p["99.000000"] / 1e3))' "$name" "$rw" | meas_import ""
}

# The better of the two rounds under each name (higher GB/s, lower us).
disk_best() {
  local n v1 v2 u
  for n in $(awk -F'\t' '$1 ~ /^r1\./ { sub(/^r1\./, "", $1); print $1 }' "$WORK/meas.tsv" | sort -u); do
    v1=$(meas_get "r1.$n"); v2=$(meas_get "r2.$n"); u=$(meas_unit "r1.$n")
    if [ -z "$v1" ] && [ -z "$v2" ]; then meas_skip "$n" "$(meas_why "r1.$n")"; continue; fi
    meas "$n" "$(awk -v a="$v1" -v b="$v2" -v u="$u" 'BEGIN {
      if (a == "") { print b; exit } if (b == "") { print a; exit }
      lower = (u == "us"); print ((lower ? a + 0 < b + 0 : a + 0 > b + 0) ? a : b) }')" "$u"
  done
}

step_disk() {
  local b bs
  DISK_MB=$([ "$QUICK" = 1 ] && echo 128 || echo 256)
  DISK_DIR=${BENCH_DISK_DIR:-/var/tmp}/moonkv-bench-disk.$$
  if ! command -v fio >/dev/null; then
    meas_skip disk.write_1MiB "fio is missing (make deps)"
  elif [ ! -x "$BENCH_BIN/bench_disk" ]; then
    meas_skip disk.write_1MiB "bench_disk was not built"
  else
    mkdir -p "$DISK_DIR"
    # Two rounds, the store and fio in turn, each side's best kept: on a
    # loaded machine one side alone would catch a quiet or a busy minute.
    local round
    for round in 1 2; do
      BENCH_DISK_JOBS=$DISK_JOBS BENCH_DISK_MB=$DISK_MB timeout 600 "$BENCH_BIN/bench_disk" "$DISK_DIR" \
        2>>"$WORK/run.log" | meas_import "r$round.disk."
      for b in 1MiB 4MiB; do
        bs=${b%iB}
        rm -f "$DISK_DIR/fio.dat"   # a new file, as the store's first pass has
        fio_measure "r$round.fio.write_fresh_$b" write "$bs" "$DISK_JOBS"
        fio_measure "r$round.fio.write_$b" write "$bs" "$DISK_JOBS"
        fio_measure "r$round.fio.read_$b" read "$bs" "$DISK_JOBS"
      done
      fio_measure "r$round.fio.lat_1MiB" randread 1M 1
    done
    rm -rf "$DISK_DIR"
    disk_best
  fi
  local where="${DISK_MB} MB, $DISK_JOBS in flight, O_DIRECT"
  for b in 1MiB 4MiB; do
    row "disk tier store write $b into a new file ($where) vs fio, same dir/bs/depth" "disk.write_fresh_$b" \
      "fio.write_fresh_$b.gbps" 0.8 GB/s
    row "disk tier store write $b over written blocks ($where) vs fio, same dir/bs/depth" "disk.write_$b" \
      "fio.write_$b.gbps" 0.8 GB/s
    row "disk tier store read $b ($where) vs fio, same dir/bs/depth" "disk.read_$b" "fio.read_$b.gbps" 0.8 GB/s
  done
  row "disk tier restart: the scan proving every record ($DISK_MB MB of 4 MiB values) vs fio read 4 MiB" disk.scan \
    fio.read_4MiB.gbps - GB/s
  row "disk tier store read 1 MiB, one at a time: p50 vs fio randread depth 1" disk.get_p50_1MiB fio.lat_1MiB.p50 - us
  row "disk tier store read 1 MiB, one at a time: p99 vs fio randread depth 1" disk.get_p99_1MiB fio.lat_1MiB.p99 - us
  step_disk_zipf
}

# zipf_run TAG [NODE_FLAG...] -- [MASTER_FLAG...]: bench_disk_zipf against
# one node of ZIPF_SEG, its results as zipf.TAG.*.
zipf_run() {
  local tag=$1; shift
  local nflags=() mflags=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do nflags+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  mflags=("$@")
  CL_NODE_FLAGS=("${nflags[@]}")
  if ! cluster_start 1 "$ZIPF_SEG" 0 "${mflags[@]}"; then
    meas_skip "zipf.$tag.hit_pct" "$SKIP_WHY"; CL_NODE_FLAGS=(); return
  fi
  CL_NODE_FLAGS=()
  BENCH_ZIPF_PAR=$([ "$tag" = direct ] && echo 1 || echo 0) \
    timeout 600 "$BENCH_BIN/bench_disk_zipf" "$MASTER" "$tag" "$ZIPF_KEYS" 256KiB "$ZIPF_READS" \
    2>>"$WORK/run.log" | meas_import "zipf."
  log "zipf $tag: $(redis-cli -p "${MASTER##*:}" info cluster | tr -d '\r' | grep -E '^(disk_|gets_|puts_wait)' | tr '\n' ' ')"
  cluster_stop
}

# The KV workload: 1,000 keys of 256 KiB (4x the node's 64 MB of DRAM)
# written once, then read in a Zipf order, with the tier (offload past
# 80 %, heartbeats of 20 ms; a promote at the first read, or with
# "direct" at the second: the first reads straight from the disk) and
# without it (puts past the DRAM get NOSPACE); in the direct run a get's
# latency from disk (1 MiB objects, one at a time: the first read
# straight from the node's disk, the second a promote) and the GB/s of
# gets from disk 4 at a time, against fio's.
step_disk_zipf() {
  ZIPF_SEG=64MB ZIPF_KEYS=1000 ZIPF_READS=$([ "$QUICK" = 1 ] && echo 1000 || echo 3000)
  if [ ! -x "$BENCH_BIN/bench_disk_zipf" ]; then
    meas_skip zipf.tier.hit_pct "bench_disk_zipf was not built"
  else
    local zdir=${BENCH_DISK_DIR:-/var/tmp}/moonkv-bench-zipf.$$
    mkdir -p "$zdir"
    local tier=(--disk-high-watermark 80 --disk-low-watermark 50 --heartbeat-ms 20 --get-wait-ms 30000
                --put-wait-ms 30000)
    zipf_run tier --disk-dir "$zdir" --disk-size 1GB -- "${tier[@]}"
    rm -rf "$zdir"/*
    zipf_run direct --disk-dir "$zdir" --disk-size 1GB -- "${tier[@]}" --disk-promote-after 2
    zipf_run mem -- --heartbeat-ms 20
    rm -rf "$zdir"
  fi
  local what="1,000 x 256 KiB written once, read in a Zipf (0.99) order, 8 a batch, on 64 MB of DRAM"
  row "Zipf KV workload ($what): hit rate with the disk tier vs without" zipf.tier.hit_pct zipf.mem.hit_pct - %
  row "Zipf KV workload ($what): GB/s hit with the disk tier vs without" zipf.tier.gbps zipf.mem.gbps - GB/s
  row "Zipf KV workload: puts refused NOSPACE with the disk tier (without it: the reference)" \
    zipf.tier.put_nospace zipf.mem.put_nospace - count
  row "Zipf KV workload, promote at the 2nd read (the 1st straight from disk): hit rate with the tier vs without" \
    zipf.direct.hit_pct zipf.mem.hit_pct - %
  row "Zipf KV workload, promote at the 2nd read (the 1st straight from disk): GB/s hit with the tier vs without" \
    zipf.direct.gbps zipf.mem.gbps - GB/s
  local direct="libmoonkv, read straight from the node's disk over TCP" load="libmoonkv, a promote: load + read"
  row "get of 1 MiB from disk through the cluster ($direct), p50 vs fio randread depth 1" \
    zipf.direct.get_p50_1MiB fio.lat_1MiB.p50 - us
  row "get of 1 MiB from disk through the cluster ($direct), p99 vs fio randread depth 1" \
    zipf.direct.get_p99_1MiB fio.lat_1MiB.p99 - us
  row "gets of 1 MiB from disk one at a time ($direct), GB/s vs fio randread depth 1" \
    zipf.direct.get_gbps_1MiB fio.lat_1MiB.gbps - GB/s
  row "gets of 1 MiB from disk 4 at a time ($direct), GB/s vs fio read 1 MiB depth 4" \
    zipf.direct.get_par_gbps_1MiB fio.read_1MiB.gbps - GB/s
  row "get of 1 MiB from disk through the cluster ($load), p50 vs fio randread depth 1" \
    zipf.direct.load_p50_1MiB fio.lat_1MiB.p50 - us
  row "get of 1 MiB from disk through the cluster ($load), p99 vs fio randread depth 1" \
    zipf.direct.load_p99_1MiB fio.lat_1MiB.p99 - us
}
