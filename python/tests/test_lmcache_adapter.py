"""moonkv.integrations.lmcache against a stand-in of LMCache's
RemoteConnector interface (python/tests/standins): moonkv:// URLs, the
batched calls, the prefix-count contains, chunks in an allocator arena
registered once (zero-copy) or not (copied), numpy and torch dtypes."""
import asyncio
import importlib.util
import os
import sys
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "standins"))

from lmcache.utils import CacheEngineKey  # noqa: E402
from lmcache.v1.memory_management import LocalCPUBackend, MemoryFormat  # noqa: E402
from lmcache.v1.storage_backend.connector import ConnectorContext  # noqa: E402
from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector  # noqa: E402

from moonkv.integrations.lmcache import MoonkvConnector, MoonkvConnectorAdapter  # noqa: E402

HAVE_TORCH = importlib.util.find_spec("torch") is not None


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(params=["zero-copy", "copied", "torch"])
def setup(request, cluster, monkeypatch, key):
    if request.param == "torch" and not HAVE_TORCH:
        pytest.skip("python3-torch is not installed: numpy only")
    monkeypatch.setenv("MOONKV_CLUSTER_SECRET", cluster.secret)
    backend = LocalCPUBackend(32 << 20, use_torch=request.param == "torch",
                              expose_arena=request.param != "copied")
    url = f"moonkv://{cluster.master}?key_prefix={key('')}"
    adapter = MoonkvConnectorAdapter()
    assert adapter.can_parse(url) and not adapter.can_parse("redis://x:1")
    conn = adapter.create_connector(ConnectorContext(url=url, loop=None, local_cpu_backend=backend))
    yield conn, backend, request.param
    run(conn.close())


def chunk(backend, seed, param):
    """A KV chunk (2, layers, tokens, hidden) filled with seeded values."""
    shape = (2, 4, 16, 64)
    if param == "torch":
        import torch
        obj = backend.allocate(shape, torch.float16, MemoryFormat.KV_2LTD)
    else:
        obj = backend.allocate(shape, np.float16, MemoryFormat.KV_2LTD)
    data = np.random.default_rng(seed).integers(0, 256, len(obj.byte_array), dtype=np.uint8)
    np.frombuffer(obj.byte_array, dtype=np.uint8)[:] = data
    return obj


def ck(i, worker=0):
    return CacheEngineKey("vllm", "llama", 2, worker, 0xabc000 + i)


def test_is_a_remote_connector(setup):
    conn, _, mode = setup
    assert isinstance(conn, RemoteConnector)
    assert conn.zero_copy == (mode != "copied")
    assert conn.support_batched_get() and conn.support_batched_put() and conn.support_batched_async_contains()


def test_put_get_exists(setup):
    conn, backend, mode = setup
    a = chunk(backend, 1, mode)
    assert run(conn.exists(ck(1))) is False
    run(conn.put(ck(1), a))
    run(conn.put(ck(1), a))                     # stored already: no error
    assert run(conn.exists(ck(1))) and conn.exists_sync(ck(1))
    b = run(conn.get(ck(1)))
    assert b is not None and b is not a
    assert b.get_shape() == a.get_shape() and b.get_dtype() == a.get_dtype()
    assert b.get_memory_format() == MemoryFormat.KV_2LTD
    assert bytes(b.byte_array) == bytes(a.byte_array)
    assert run(conn.get(ck(2))) is None


def test_batched_and_prefix_contains(setup):
    conn, backend, mode = setup
    objs = [chunk(backend, 10 + i, mode) for i in range(6)]
    run(conn.batched_put([ck(i) for i in range(6)], objs))
    keys = [ck(i) for i in range(8)]
    assert run(conn.batched_async_contains("lookup-1", keys, pin=True)) == 6
    assert run(conn.batched_async_contains("lookup-2", [ck(7)] + keys, pin=False)) == 0
    got = run(conn.batched_get(keys))
    assert [g is not None for g in got] == [True] * 6 + [False] * 2
    for g, o in zip(got, objs):
        assert bytes(g.byte_array) == bytes(o.byte_array)
    # per worker (TP rank) keys are apart
    assert run(conn.batched_async_contains("lookup-3", [ck(0, worker=1)])) == 0


def test_pinned_lookup_until_unlock(setup):
    conn, backend, mode = setup
    run(conn.batched_put([ck(i) for i in range(4)], [chunk(backend, 20 + i, mode) for i in range(4)]))
    assert run(conn.batched_async_contains("L1", [ck(0), ck(1), ck(9)], pin=True)) == 2
    assert conn.remove_sync(ck(1)) is False and conn.exists_sync(ck(1))    # pinned: stays
    assert run(conn.batched_async_contains("L1", [ck(2)], pin=True)) == 1   # the same lookup adds
    assert run(conn.batched_async_contains("L2", [ck(3)], pin=False)) == 1  # no pin
    assert conn.remove_sync(ck(3)) is True
    assert run(conn.unlock("L1")) == 3
    assert run(conn.unlock("L1")) == 0 and run(conn.unlock("never")) == 0
    assert conn.remove_sync(ck(1)) is True and conn.remove_sync(ck(2)) is True
    got = run(conn.batched_get([ck(0)]))
    assert got[0] is not None


def test_pin_ms_in_url(cluster, monkeypatch, key):
    monkeypatch.setenv("MOONKV_CLUSTER_SECRET", cluster.secret)
    with pytest.raises(ValueError):
        MoonkvConnector(f"moonkv://{cluster.master}?pin_ms=0")
    backend = LocalCPUBackend(1 << 20, expose_arena=False)
    conn = MoonkvConnector(f"moonkv://{cluster.master}?key_prefix={key('')}&pin_ms=200",
                           local_cpu_backend=backend)
    run(conn.batched_put([ck(0)], [chunk(backend, 1, "copied")]))
    assert run(conn.batched_async_contains("S", [ck(0)], pin=True)) == 1
    assert conn.remove_sync(ck(0)) is False
    deadline = time.monotonic() + 20          # the pin runs out by itself (bounded wait)
    while not conn.remove_sync(ck(0)):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    run(conn.close())


def test_list_and_remove(setup):
    conn, backend, mode = setup
    run(conn.batched_put([ck(i) for i in range(3)], [chunk(backend, i, mode) for i in range(3)]))
    listed = run(conn.list())
    assert sorted(listed) == sorted(ck(i).to_string() for i in range(3))
    assert conn.remove_sync(ck(0)) and not conn.remove_sync(ck(0))
    assert run(conn.batched_async_contains("l", [ck(0), ck(1)])) == 0


def test_bad_url():
    with pytest.raises(ValueError):
        MoonkvConnector("redis://127.0.0.1:1")
