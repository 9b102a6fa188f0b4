"""Zero-copy calls over registered memory: bytearray, memoryview, mmap,
numpy, Mooncake's (pointer, size) form; batches; buffer lifetimes; the GIL
released while a transfer waits."""
import mmap
import os
import sys
import threading
import time

import pytest

import moonkv

MiB = 1 << 20


def test_put_from_get_into(store, key):
    src, dst = bytearray(os.urandom(MiB)), bytearray(MiB)
    store.register_buffer(src)
    store.register_buffer(dst)
    store.put_from(key(), src)
    assert store.get_into(key(), dst) == MiB and dst == src
    # A slice inside a registered region is registered memory too.
    view = memoryview(src)[4096:4096 + 1000]
    store.put_from(key("slice"), view)
    out = memoryview(dst)[:2000]
    assert store.get_into(key("slice"), out) == 1000 and dst[:1000] == src[4096:5096]
    store.unregister_buffer(src)
    store.unregister_buffer(dst)


def test_unregistered_and_too_small(store, key):
    buf = bytearray(b"z" * 4096)
    with pytest.raises(moonkv.NotRegisteredError):
        store.put_from(key(), buf)
    store.register_buffer(buf)
    store.put_from(key(), buf)
    with pytest.raises(moonkv.TooSmallError):
        store.get_into(key(), memoryview(buf)[:100])
    with pytest.raises(BufferError):
        store.get_into(key(), b"read-only bytes")     # get_into needs writable memory
    store.unregister_buffer(buf)
    with pytest.raises(moonkv.NotRegisteredError):
        store.get_into(key(), buf)
    with pytest.raises(moonkv.InvalidError):
        store.unregister_buffer(buf)                     # not registered any more


def test_registration_holds_the_buffer(store):
    buf = bytearray(8192)
    refs = sys.getrefcount(buf)
    store.register_buffer(buf)
    assert sys.getrefcount(buf) == refs + 1
    with pytest.raises(BufferError):
        buf.extend(b"x")                 # exported: cannot move while registered
    with pytest.raises(moonkv.InvalidError):
        store.register_buffer(buf)       # overlaps itself
    store.unregister_buffer(buf)
    assert sys.getrefcount(buf) == refs
    buf.extend(b"x")


def test_close_releases_registrations(cluster):
    buf = bytearray(4096)
    refs = sys.getrefcount(buf)
    with moonkv.MoonkvStore() as s:
        s.setup(master=cluster.master, cluster_secret=cluster.secret)
        s.register_buffer(buf)
    assert sys.getrefcount(buf) == refs
    buf.extend(b"x")


def test_mmap(store, key):
    m = mmap.mmap(-1, 2 * MiB)
    m[:MiB] = os.urandom(MiB)
    store.register_buffer(m)
    view = memoryview(m)
    store.put_from(key(), view[:MiB])
    assert store.get_into(key(), view[MiB:]) == MiB and m[:MiB] == m[MiB:]
    view.release()
    store.unregister_buffer(m)
    m.close()


def test_pointer_and_size(store, key):
    import ctypes
    src = ctypes.create_string_buffer(os.urandom(65536), 65536)
    dst = ctypes.create_string_buffer(65536)
    sp, dp = ctypes.addressof(src), ctypes.addressof(dst)
    store.register_buffer(sp, 65536)
    store.register_buffer(dp, 65536)
    store.put_from(key(), sp, 65536)
    assert store.get_into(key(), dp, 65536) == 65536 and dst.raw == src.raw
    assert store.batch_get_into([key()], [dp], [65536]) == [65536]
    store.unregister_buffer(sp)
    store.unregister_buffer(dp)


def test_bad_pointer_is_the_callers_error(store, key, transport):
    """A raw pointer to memory that cannot be read is refused when it is
    registered (BufferFaultError, a ValueError), not sent to a node that
    would then be blamed; a registered buffer that goes bad fails its put
    the same way (over TCP; shm's map mode copies in this process and
    faults there, see moonkv.h)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                          ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    PROT_NONE, PROT_RW, MAP_PRIVATE_ANON = 0, 3, 0x22
    size = 65536
    addr = libc.mmap(None, size, PROT_NONE, MAP_PRIVATE_ANON, -1, 0)
    try:
        with pytest.raises(moonkv.BufferFaultError) as e:
            store.register_buffer(addr, size)
        assert e.value.code == moonkv.EFAULT and e.value.word == "FAULT"
        assert isinstance(e.value, ValueError)
        with pytest.raises(moonkv.NotRegisteredError):
            store.put_from(key(), addr, size)
        assert libc.mprotect(addr, size, PROT_RW) == 0
        store.register_buffer(addr, size)
        assert libc.mprotect(addr, size, PROT_NONE) == 0
        if transport == "tcp":
            with pytest.raises(moonkv.BufferFaultError):
                store.put_from(key(), addr, size)
            assert not store.is_exist(key())
        store.unregister_buffer(addr)
    finally:
        libc.munmap(addr, size)


def test_numpy(store, key):
    np = pytest.importorskip("numpy")
    src = np.random.default_rng(7).random((64, 1024), dtype=np.float32)   # 256 KiB
    dst = np.zeros_like(src)
    store.register_buffer(src)
    store.register_buffer(dst)
    store.put_from(key(), src)
    assert store.get_into(key(), dst) == src.nbytes
    assert np.array_equal(src, dst)
    rows = [key(f"row{i}") for i in range(8)]
    assert store.batch_put_from(rows, [src[i] for i in range(8)]) == [0] * 8
    dst[:] = 0
    assert store.batch_get_into(rows, [dst[i] for i in range(8)]) == [src[0].nbytes] * 8
    assert np.array_equal(src[:8], dst[:8])
    with pytest.raises((BufferError, ValueError)):
        store.put_from(key("strided"), src[:, ::2])    # not contiguous
    store.unregister_buffer(src)
    store.unregister_buffer(dst)


def test_batches(store, key):
    n, size = 40, 64 * 1024
    src, dst = bytearray(os.urandom(n * size)), bytearray(n * size + size)
    store.register_buffer(src)
    store.register_buffer(dst)
    keys = [key(str(i)) for i in range(n)]
    sv, dv = memoryview(src), memoryview(dst)
    assert store.batch_put_from(keys, [sv[i * size:(i + 1) * size] for i in range(n)]) == [0] * n
    # One more key that does not exist: its own status, the batch still runs.
    got = store.batch_get_into(keys + [key("missing")], [dv[i * size:(i + 1) * size] for i in range(n + 1)])
    assert got == [size] * n + [moonkv.ENOTFOUND]
    assert dst[:n * size] == src
    assert store.batch_is_exist(keys[:3] + [key("missing")]) == [1, 1, 1, 0]
    assert store.batch_put_from(keys[:2], [sv[size:2 * size], sv[:size]]) == [moonkv.EEXISTS] * 2
    assert store.batch_get_into([], []) == []
    with pytest.raises(ValueError):
        store.batch_get_into(keys, [dv[:size]])          # lengths differ
    with pytest.raises(TypeError):
        store.batch_is_exist(5)
    store.unregister_buffer(src)
    store.unregister_buffer(dst)


def test_threads_share_a_store(store, key):
    store.put(key(), b"shared" * 1000)
    errors = []

    def reader():
        try:
            for _ in range(50):
                assert store.get(key()) == b"shared" * 1000
        except Exception as e:     # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_gil_released_during_transfer(cluster, key):
    """Nodes stopped with SIGSTOP: a get waits for its timeout, and another
    Python thread must keep running the whole time."""
    with moonkv.MoonkvStore() as s:
        s.setup(master=cluster.master, cluster_secret=cluster.secret, transport="tcp", timeout_ms=1500)
        buf = bytearray(MiB)
        s.register_buffer(buf)
        s.put_from(key(), buf)
        ticks, stop = [0], threading.Event()

        def ticker():
            while not stop.is_set():
                ticks[0] += 1
                time.sleep(0.01)

        t = threading.Thread(target=ticker)
        t.start()
        try:
            cluster.pause_nodes()
            t0, before = time.monotonic(), ticks[0]
            with pytest.raises(moonkv.MoonkvError):
                s.get_into(key(), buf)
            waited, during = time.monotonic() - t0, ticks[0] - before
        finally:
            cluster.resume_nodes()
            stop.set()
            t.join()
            cluster.wait_healthy()
        assert waited > 1.0, f"the get did not wait for the stopped nodes ({waited:.2f}s)"
        assert during >= 20, f"only {during} ticks in {waited:.2f}s: the GIL was held"


def test_transfer_stats(store, key, transport):
    """Bytes moved count on the store's transport only; with shm the
    process's mappings of the nodes' segments finish warming (until then
    transfers to them take the checked fd path), so a caller can wait for
    that before timing anything."""
    names = {"bytes_tcp", "bytes_shm", "bytes_rdma", "retries", "failovers", "shm_cold_bytes"}
    before = store.transfer_stats()
    assert set(before) == names
    buf = bytearray(os.urandom(MiB))
    store.register_buffer(buf)
    store.put_from(key(), buf, replicas=1)
    assert store.get_into(key(), buf) == MiB
    store.unregister_buffer(buf)
    after = store.transfer_stats()
    other = "tcp" if transport == "shm" else "shm"
    assert after[f"bytes_{transport}"] - before[f"bytes_{transport}"] == 2 * MiB
    assert after[f"bytes_{other}"] == before[f"bytes_{other}"]
    if transport == "shm":
        end = time.monotonic() + 60
        while store.transfer_stats()["shm_cold_bytes"] and time.monotonic() < end:
            time.sleep(0.05)
        assert store.transfer_stats()["shm_cold_bytes"] == 0


def test_transfer_stats_before_setup():
    s = moonkv.MoonkvStore()
    st = s.transfer_stats()
    assert {k: v for k, v in st.items() if k != "shm_cold_bytes"} == dict.fromkeys(
        ("bytes_tcp", "bytes_shm", "bytes_rdma", "retries", "failovers"), 0)
    s.close()
