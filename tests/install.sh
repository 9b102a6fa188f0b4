#!/usr/bin/env bash
# tests/install.sh - `make install DESTDIR=<tmp> PREFIX=/usr` puts every
# file in place, and what it installed works from there: moonkv-server
# --version, the shared library and header (a C program built against
# them), pkg-config, the Python module, the configs and the systemd unit;
# the Mooncake shim only by `make install-mooncake-shim`.
# Prints "ok - install: ..." / "not ok - install: ..." lines for run.sh.
set -u
cd "$(dirname "$0")/.."
dest=$(mktemp -d /tmp/moonkv-install.XXXXXX)
trap 'rm -rf "$dest"' EXIT
PYTHON=${PYTHON:-/usr/bin/python3}
fails=0

check() {   # check NAME CMD...: ok when CMD succeeds
  local name=$1; shift
  if "$@" >"$dest/out" 2>&1; then echo "ok - install: $name"
  else echo "not ok - install: $name"; sed 's/^/#   /' "$dest/out" | head -20; fails=$((fails + 1)); fi
}

root=$dest/root
check "make install DESTDIR PREFIX=/usr" make --no-print-directory -s install DESTDIR="$root" PREFIX=/usr

files=(usr/bin/moonkv-server usr/lib/libmoonkv.a usr/lib/libmoonkv.so.0 usr/lib/libmoonkv.so
       usr/include/moonkv.h usr/lib/pkgconfig/moonkv.pc
       usr/lib/python3/dist-packages/moonkv/__init__.py
       usr/lib/systemd/system/moonkv@.service)
for c in conf/*.json; do files+=("etc/moonkv/${c#conf/}" "usr/share/moonkv/conf/${c#conf/}"); done
missing=()
for f in "${files[@]}"; do [ -e "$root/$f" ] || missing+=("$f"); done
check "every file in place (${#files[@]} files)" test ${#missing[@]} -eq 0
[ ${#missing[@]} -eq 0 ] || echo "#   missing: ${missing[*]}"
check "python extension installed" compgen -G "$root/usr/lib/python3/dist-packages/moonkv/_moonkv*.so"
check "moonkv-server executable" test -x "$root/usr/bin/moonkv-server"
check "libmoonkv.so is a link to libmoonkv.so.0" test "$(readlink "$root/usr/lib/libmoonkv.so")" = libmoonkv.so.0

ver=$(sed -n 's/^VERSION *:= *//p' Makefile)
check "installed moonkv-server --version prints v$ver, exits 0" \
  bash -c '[ "$("$1" --version)" = "moonkv-server v$2" ]' _ "$root/usr/bin/moonkv-server" "$ver"
check "moonkv.pc names prefix /usr and version $ver" \
  bash -c 'PKG_CONFIG_PATH=$1 pkg-config --variable=prefix moonkv | grep -qx /usr &&
           PKG_CONFIG_PATH=$1 pkg-config --modversion moonkv | grep -qx "$2"' _ "$root/usr/lib/pkgconfig" "$ver"

# A C program against the installed header and shared library.
cat >"$dest/c.c" <<'C'
#include <moonkv.h>
#include <stdio.h>
#include <string.h>
int main(void) { return strstr(mkv_strerror(MKV_EEXISTS), "write-once") ? 0 : 1; }
C
check "C program builds and runs against installed libmoonkv.so" bash -c \
  'cc -o "$1/c" "$1/c.c" -I"$2/usr/include" -L"$2/usr/lib" -lmoonkv && LD_LIBRARY_PATH=$2/usr/lib "$1/c"' \
  _ "$dest" "$root"
check "installed python module imports from its dist-packages" \
  env PYTHONPATH="$root/usr/lib/python3/dist-packages" "$PYTHON" -c \
  "import moonkv, sys; assert moonkv.__file__.startswith(sys.argv[1]), moonkv.__file__; moonkv.MoonkvStore()" \
  "$root"
# The Mooncake shim shadows a real Mooncake: only its own target installs it.
check "make install leaves the Mooncake shim out" test ! -e "$root/usr/lib/python3/dist-packages/mooncake"
check "make install-mooncake-shim installs mooncake.store, working over the installed binding" bash -c \
  'make --no-print-directory -s install-mooncake-shim DESTDIR="$1" PREFIX=/usr &&
   PYTHONPATH="$1/usr/lib/python3/dist-packages" "$2" -c "
import sys, mooncake.store as s
assert s.__file__.startswith(sys.argv[1]), s.__file__
st = s.MooncakeDistributedStore()
assert s.ReplicateConfig().replica_num == 1
assert st.get_hostname() == \"\"" "$1"' _ "$root" "$PYTHON"
check "configs are JSON" "$PYTHON" -c \
  'import json, sys; [json.load(open(f)) for f in sys.argv[1:]]' "$root"/etc/moonkv/*.json
check "unit starts moonkv-server with /etc/moonkv/%i.json" \
  grep -qx 'ExecStart=/usr/bin/moonkv-server --config /etc/moonkv/%i.json' "$root/usr/lib/systemd/system/moonkv@.service"
if command -v systemd-analyze >/dev/null; then
  # verify wants the binary at ExecStart's path: point it into DESTDIR.
  sed "s|/usr/bin/moonkv-server|$root/usr/bin/moonkv-server|" "$root/usr/lib/systemd/system/moonkv@.service" \
    >"$dest/moonkv@master.service"
  check "systemd-analyze verify moonkv@master.service" bash -c \
    'out=$(systemd-analyze verify "$1" 2>&1); echo "$out"; [ -z "$out" ]' _ "$dest/moonkv@master.service"
else
  echo "skip - install: systemd-analyze not installed, unit not verified"
fi

# A second install keeps an edited config and refreshes the sample.
echo '{"role": "node", "port": 7999}' >"$root/etc/moonkv/node.json"
check "reinstall keeps an edited /etc/moonkv config" bash -c \
  'make --no-print-directory -s install DESTDIR="$1" PREFIX=/usr && grep -q 7999 "$1/etc/moonkv/node.json" &&
   cmp -s conf/node.json "$1/usr/share/moonkv/conf/node.json"' _ "$root"

check "install under PREFIX=/opt/moonkv puts configs in PREFIX/etc and rewrites the unit" bash -c \
  'make --no-print-directory -s install DESTDIR="$1" PREFIX=/opt/moonkv &&
   test -e "$1/opt/moonkv/etc/moonkv/master.json" &&
   grep -qx "ExecStart=/opt/moonkv/bin/moonkv-server --config /opt/moonkv/etc/moonkv/%i.json" \
     "$1/opt/moonkv/lib/systemd/system/moonkv@.service"' _ "$dest/opt"
[ "$fails" -eq 0 ]
