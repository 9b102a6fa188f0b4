"""moonkv over two master groups from Python (docs/SCALE.md "Master
groups"): an etcd (package etcd-server; skipped without it), group a's
master with slots 0-8191 and group b's with 8192-16383, one node in each
group, and a store set up with etcd=..., groups=True: keys of both groups
put, read back byte-exact singly and as a batch, each held by its slot's
master only, removed; then the operator's tool (scripts/moonkv-slots)
moves a slot and a put there lands on its new group."""
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
import redis

import moonkv
from conftest import SECRET, _die_with_parent, _spawn, _wait, free_ports

ETCD = shutil.which("etcd")
CLUSTER = "pygroups"
pytestmark = pytest.mark.skipif(not ETCD, reason="etcd not installed (package etcd-server)")


def crc16(data):
    """CRC16-XMODEM, the slot hash (proto/slots.c)."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def group_of(key):
    return "a" if crc16(key.encode()) % 16384 < 8192 else "b"


def info_field(port, field):
    return str(redis.Redis(port=port, socket_timeout=2).info("cluster").get(field))


@pytest.fixture(scope="module")
def groups():
    p = free_ports(8)
    url = f"http://127.0.0.1:{p}"
    masters = {"a": p + 2, "b": p + 3}
    tmp = tempfile.mkdtemp(prefix="moonkv-etcd-")
    procs = [subprocess.Popen([ETCD, "--data-dir", tmp + "/data", f"--listen-client-urls={url}",
                               f"--advertise-client-urls={url}",
                               f"--listen-peer-urls=http://127.0.0.1:{p + 1}",
                               f"--initial-advertise-peer-urls=http://127.0.0.1:{p + 1}",
                               f"--initial-cluster=default=http://127.0.0.1:{p + 1}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)]
    etcd_flags = ["--etcd", url, "--cluster-name", CLUSTER]
    try:
        for g, slots in (("a", "0-8191"), ("b", "8192-16383")):
            procs.append(_spawn("--role", "master", "--bind", "127.0.0.1", f"--port={masters[g]}", *etcd_flags,
                                "--group", g, "--slots", slots))
        for i, g in enumerate(("a", "b")):
            procs.append(_spawn("--role", "node", "--bind", "127.0.0.1", f"--port={p + 4 + 2 * i}", *etcd_flags,
                                "--group", g, "--segment-size", "64MB", f"--data-addrs=127.0.0.1:{p + 5 + 2 * i}",
                                "--prefault", "no", "--segment-persist", "no"))
        for g, port in masters.items():
            _wait(f"group {g} leads with its slots",
                  lambda: info_field(port, "ha_role") == "leader" and info_field(port, "slots_owned") == "8192",
                  procs, 30)
            _wait(f"group {g}'s node", lambda: info_field(port, "nodes_alive") == "1", procs, 30)
        yield url, masters
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def test_put_get_over_two_groups(groups):
    url, masters = groups
    keys = [f"py:groups:{i}" for i in range(64)]
    vals = [os.urandom(100 + 997 * i) for i in range(64)]
    assert {group_of(k) for k in keys} == {"a", "b"}
    with moonkv.MoonkvStore() as s:
        s.setup(etcd=url, cluster_name=CLUSTER, groups=True, cluster_secret=SECRET, timeout_ms=10000)
        for k, v in zip(keys[:32], vals[:32]):
            s.put(k, v)
        bufs = [bytearray(v) for v in vals[32:]]
        for b in bufs:
            s.register_buffer(b)
        assert s.batch_put_from(keys[32:], bufs) == [0] * 32
        assert [s.get(k) for k in keys] == vals
        out = [bytearray(len(v)) for v in vals]
        for b in out:
            s.register_buffer(b)
        assert s.batch_get_into(keys, out) == [len(v) for v in vals]
        assert [bytes(b) for b in out] == vals
        for k in keys:   # each on its slot's master, the other answers MOVED
            own, other = masters[group_of(k)], masters["b" if group_of(k) == "a" else "a"]
            assert redis.Redis(port=own).execute_command("MOON.EXISTS", k) == 1
            with pytest.raises(redis.ResponseError, match="^MOVED "):
                redis.Redis(port=other).execute_command("MOON.EXISTS", k)
        s.remove(keys[0])
        assert s.batch_is_exist(keys[:2]) == [0, 1]


SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "moonkv-slots")


def slots_tool(url, *args):
    out = subprocess.run([sys.executable, SCRIPT, "--etcd", url, "--cluster", CLUSTER, *args],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_slots_tool_moves_a_slot(groups):
    """The operator's tool (scripts/moonkv-slots) gives one slot of group a
    to group b: both masters follow, and a store's put of a key there lands
    on b once the slot arrived (the store is answered MOVED or TRYAGAIN
    meanwhile and tries again)."""
    url, masters = groups
    key = next(k for k in (f"py:move:{i}" for i in range(1000)) if group_of(k) == "a")
    slot = crc16(key.encode()) % 16384
    assert slots_tool(url, "slot", key).split() == [key, str(slot)]
    assert "0-8191 a (8192 slots)" in slots_tool(url, "show")
    version = int(slots_tool(url, "assign", str(slot), "b").split()[1].rstrip(":"))
    for port in masters.values():
        _wait("the masters follow the map", lambda: int(info_field(port, "slots_version")) >= version, [], 10)
    assert f"{slot}-{slot} b (1 slots)" in slots_tool(url, "show")
    with moonkv.MoonkvStore() as s:
        s.setup(etcd=url, cluster_name=CLUSTER, groups=True, cluster_secret=SECRET, timeout_ms=10000)
        s.put(key, b"moved")
        assert s.get(key) == b"moved"
    assert redis.Redis(port=masters["b"]).execute_command("MOON.EXISTS", key) == 1
    with pytest.raises(redis.ResponseError, match="^MOVED "):
        redis.Redis(port=masters["a"]).execute_command("MOON.EXISTS", key)
