#!/usr/bin/env bash
# Installs the Debian packages moonkv builds, tests and benchmarks with.
# Idempotent: asks dpkg first and stays silent when everything is present.
set -euo pipefail

PKGS=(
  build-essential pkg-config
  libev-dev libhiredis-dev libcjson-dev libibverbs-dev librdmacm-dev
  redis-tools redis-server tcl python3 python3-redis
  python3-dev python3-setuptools python3-pytest python3-numpy
  python3-torch   # CPU tensors in the engine adapters' tests (docs/ENGINES.md)
  prometheus
  iproute2 iperf3 gnuplot-nox procps
  etcd-server etcd-client   # master failover tests (test_failover): etcd 3.4 and etcdctl
  clang libclang-rt-14-dev   # libFuzzer harnesses (make fuzz): -fsanitize=fuzzer
  liburing-dev fio   # the node's disk tier (io_uring, docs/SSD_TIER.md) and its bench reference
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done"
