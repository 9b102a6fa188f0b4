"""The binding's calls for inference engines: objects in pieces
(batch_put_from_multi_buffers / batch_get_into_multi_buffers), the prefix
count, byte ranges and remove_all, over TCP and shared memory."""
import time

import numpy as np
import pytest
import redis

import moonkv
from conftest import _spawn, _wait
from ports import free_ports

LAYERS, PIECE = 8, 4096


def arena(pages, seed):
    """A layer-major arena as an engine's host pool: [layer][page][bytes]."""
    return np.random.default_rng(seed).integers(0, 256, (LAYERS, pages, PIECE), dtype=np.uint8)


def pieces(a, page):
    return [a[layer, page] for layer in range(LAYERS)]


def test_multi_buffers_round_trip(store, key):
    src, dst = arena(16, 1), np.zeros((LAYERS, 16, PIECE), dtype=np.uint8)
    store.register_buffer(src)
    store.register_buffer(dst)
    keys = [key(f"p{i}") for i in range(16)]
    assert store.batch_put_from_multi_buffers(keys, [pieces(src, i) for i in range(16)]) == [0] * 16
    assert store.batch_get_into_multi_buffers(keys, [pieces(dst, i) for i in range(16)]) == [LAYERS * PIECE] * 16
    assert (src == dst).all()
    # one object is the pieces in order: a plain get sees their concatenation
    flat = np.zeros(LAYERS * PIECE, dtype=np.uint8)
    store.register_buffer(flat)
    assert store.get_into(keys[3], flat) == LAYERS * PIECE
    assert (flat.reshape(LAYERS, PIECE) == src[:, 3]).all()


def test_multi_buffers_raw_pointers(store, key):
    """Mooncake's form: per key lists of int addresses and sizes."""
    src = np.arange(4 * 1000, dtype=np.uint8) % 251
    dst = np.zeros_like(src)
    store.register_buffer(src.ctypes.data, src.nbytes)
    store.register_buffer(dst.ctypes.data, dst.nbytes)
    k = key("raw")
    ptrs = [[src.ctypes.data + 3000, src.ctypes.data]]   # pieces in any order of memory
    assert store.batch_put_from_multi_buffers([k], ptrs, [[1000, 3000]]) == [0]
    got = store.batch_get_into_multi_buffers([k], [[dst.ctypes.data]], [[4000]])
    assert got == [4000]
    assert (dst[:1000] == src[3000:]).all() and (dst[1000:] == src[:3000]).all()
    # with sizes every piece is an int address; a row's sizes match its pieces
    with pytest.raises(TypeError):
        store.batch_put_from_multi_buffers([key("raw2")], [[src.ctypes.data, src]], [[1000, 1000]])
    with pytest.raises(ValueError):
        store.batch_put_from_multi_buffers([key("raw2")], [[src.ctypes.data]], [[1000, 1000]])
    with pytest.raises((OverflowError, ValueError)):
        store.batch_put_from_multi_buffers([key("raw2")], [[src.ctypes.data]], [[-1]])
    assert store.is_exist(key("raw2")) == 0



def test_per_key_status(store, key):
    buf = np.ones(1 << 20, dtype=np.uint8)
    loose = np.ones(100, dtype=np.uint8)
    store.register_buffer(buf)
    have = key("have")
    store.put_from(have, buf[:100])
    huge = [buf] * 600   # 600 MiB from one registered MiB: more than the two nodes hold
    rs = store.batch_put_from_multi_buffers([have, key("huge"), key("loose"), key("ok")],
                                            [[buf[:100]], huge, [loose], [buf[:10]]])
    assert rs == [moonkv.EEXISTS, moonkv.ENOSPACE, moonkv.ENOTREG, 0]
    small = np.zeros(5, dtype=np.uint8)
    store.register_buffer(small)
    assert store.batch_get_into_multi_buffers([key("ok"), key("none")], [[small], [small]]) == \
        [moonkv.ETOOSMALL, moonkv.ENOTFOUND]


def test_prefix_exists(store, key):
    keys = [key(f"x{i}") for i in range(20)]
    for k in keys[:12]:
        store.put(k, b"v")
    assert store.prefix_exists(keys) == 12
    assert store.prefix_exists(keys[12:] + keys[:3]) == 0
    assert store.prefix_exists([]) == 0
    store.remove(keys[5])
    assert store.prefix_exists(keys) == 5


def test_prefix_pin(store, key):
    keys = [key(f"p{i}") for i in range(6)]
    for k in keys[:4]:
        store.put(k, b"v")
    n, pin = store.prefix_exists(keys, pin_ms=60000)
    assert (n, pin > 0) == (4, True)
    with pytest.raises(moonkv.TryAgainError, match="pinned"):
        store.remove(keys[1])
    assert store.is_exist(keys[1]) == 1
    assert store.prefix_exists(keys[4:]) == 0          # without a pin: as before
    n2, pin2 = store.prefix_exists(keys[2:5], pin_ms=60000, pin=pin)   # the same pin again
    assert (n2, pin2) == (2, pin)
    assert store.unpin(pin) == 4                       # it holds each key once
    assert store.unpin(pin) == 0
    store.remove(keys[1])
    # a short pin runs out by itself (a bounded wait)
    _, short = store.prefix_exists(keys[:1], pin_ms=200)
    with pytest.raises(moonkv.TryAgainError):
        store.remove(keys[0])
    deadline = time.monotonic() + 20
    while True:
        try:
            store.remove(keys[0])
            break
        except moonkv.TryAgainError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    for bad in (-1, 600001, 1 << 40):
        with pytest.raises(moonkv.InvalidError, match="pin time"):
            store.prefix_exists(keys, pin_ms=bad)
    with pytest.raises(moonkv.InvalidError):
        store.unpin(0)


def test_get_range(store, key):
    val = np.random.default_rng(3).integers(0, 256, 9 << 20, dtype=np.uint8)   # three slices
    out = np.zeros(1 << 20, dtype=np.uint8)
    store.register_buffer(val)
    store.register_buffer(out)
    k = key("range")
    store.put_from(k, val)
    for off in (0, 12345, (4 << 20) - 7, (9 << 20) - 100):
        n = store.get_range(k, off, out)
        want = min(len(out), len(val) - off)
        assert n == want
        assert (out[:n] == val[off:off + n]).all()
    assert store.get_range(k, 9 << 20, out) == 0
    with pytest.raises(moonkv.NotFoundError):
        store.get_range(key("none"), 0, out)


def test_remove_all(cluster, key):
    with moonkv.MoonkvStore() as s:
        s.setup(master=cluster.master, cluster_secret=cluster.secret)
        ks = [key(f"r{i}") for i in range(5)]
        for k in ks:
            s.put(k, b"gone soon")
        assert s.remove_all() >= 5
        assert s.batch_is_exist(ks) == [0] * 5
        assert s.remove_all() == 0


@pytest.fixture(scope="module")
def standalone():
    """A standalone server of its own (RESP only: what LMCache's redis://
    connector, or any Redis client, reaches)."""
    port = free_ports(1)
    proc = _spawn("--bind", "127.0.0.1", f"--port={port}", "--segment-size", "32MB", "--prefault", "no")
    try:
        _wait("standalone", lambda: redis.Redis(port=port, socket_timeout=2).ping(), [proc])
        yield redis.Redis(port=port, socket_timeout=10)
    finally:
        proc.kill()
        proc.wait()


def test_prefix_pin_standalone(standalone, key):
    """A lookup-then-load over RESP on a standalone server: the hits are
    pinned under the lookup's id until MOON.UNPIN (LMCache's unlock) or
    their time, as on a master: DEL leaves them, FLUSHALL too."""
    r = standalone
    keys = [key(f"s{i}") for i in range(5)]
    for k in keys[:3]:
        r.set(k, b"kv-page")
    assert r.execute_command("MOON.PREFIXPIN", 11, 60000, *keys) == 3
    assert r.execute_command("MOON.PREFIXPIN", 11, 60000, *keys[:2]) == 3 - 1   # held once
    assert r.delete(keys[1]) == 0 and r.exists(keys[1]) == 1
    r.flushall()
    assert r.exists(*keys[:3]) == 3
    assert r.execute_command("MOON.PREFIX", *keys) == 3          # no pin: as before
    assert r.execute_command("MOON.UNPIN", 11, 12) == 3
    assert r.execute_command("MOON.UNPIN", 11) == 0
    assert r.delete(keys[1]) == 1
    assert r.execute_command("MOON.PREFIXPIN", 12, 200, keys[0]) == 1
    assert r.delete(keys[0]) == 0
    deadline = time.monotonic() + 20                              # runs out by itself
    while r.delete(keys[0]) == 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for bad in ((0, 1000), (1, 0), (1, 600001)):
        with pytest.raises(redis.ResponseError, match="pin"):
            r.execute_command("MOON.PREFIXPIN", *bad, keys[2])
    assert r.delete(keys[2]) == 1                                 # nothing was pinned
