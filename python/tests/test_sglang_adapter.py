"""moonkv.integrations.sglang against a stand-in of SGLang's HiCacheStorage
interface (python/tests/standins): the v1 zero-copy calls over host indices
for MHA (K and V apart, keys {page_hash}_{rank}_k/_v) and MLA pools, in
page-first (a piece per page) and layer-first (a piece per layer) layouts,
over numpy and, when Debian's python3-torch is there, CPU tensors."""
import importlib.util
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "standins"))

from sglang.srt.mem_cache.hicache_storage import HiCacheStorage, HiCacheStorageConfig  # noqa: E402
from sglang.srt.mem_cache.memory_pool_host import HostKVCache  # noqa: E402

import moonkv  # noqa: E402
from moonkv.integrations.sglang import MoonkvHiCacheStorage  # noqa: E402

HAVE_TORCH = importlib.util.find_spec("torch") is not None
PAGE, LAYERS, TOKEN = 4, 6, 256


def make(cluster, rank=0, mla=False, prefix="", **extra):
    cfg = HiCacheStorageConfig(tp_rank=rank, tp_size=2, pp_rank=0, pp_size=1, is_mla_model=mla,
                               is_page_first_layout=True, model_name="test/model",
                               extra_config={"master": cluster.master, "cluster_secret": cluster.secret,
                                             "key_prefix": prefix, **extra})
    return MoonkvHiCacheStorage(cfg)


def indices(pages, first_page=0, use_torch=False):
    idx = np.arange(first_page * PAGE, (first_page + pages) * PAGE, dtype=np.int64)
    if use_torch:
        import torch
        return torch.from_numpy(idx)
    return idx


@pytest.fixture(params=["numpy", "torch"])
def lib(request):
    if request.param == "torch" and not HAVE_TORCH:
        pytest.skip("python3-torch is not installed: numpy only")
    return request.param


def test_is_a_hicache_storage(cluster):
    b = make(cluster)
    assert isinstance(b, HiCacheStorage)   # every abstract method is implemented
    b.close()


@pytest.mark.parametrize("mla,layout", [(False, "page_first"), (False, "layer_first"), (True, "page_first")])
def test_v1_round_trip(cluster, key, lib, mla, layout):
    use_torch = lib == "torch"
    src = HostKVCache(64, PAGE, LAYERS, TOKEN, mla=mla, layout=layout, use_torch=use_torch, seed=1)
    dst = HostKVCache(64, PAGE, LAYERS, TOKEN, mla=mla, layout=layout, use_torch=use_torch, seed=2)
    writer = make(cluster, mla=mla, prefix=key(""))
    writer.register_mem_pool_host(src)
    pages = [f"{i:064x}" for i in range(10)]
    stored = writer.batch_set_v1(pages[:7], indices(7, 0, use_torch))
    assert stored == [True] * 7
    assert writer.batch_set_v1(pages[:2], indices(2, 0, use_torch)) == [True, True]   # stored already
    reader = make(cluster, mla=mla, prefix=writer.prefix)
    reader.register_mem_pool_host(dst)
    assert reader.batch_exists(pages) == 7
    assert reader.batch_exists(pages[3:]) == 4
    assert reader.exists(pages[0]) and not reader.exists(pages[8])
    # read pages 0..6 into the other pool at pages 8..14
    got = reader.batch_get_v1(pages[:7], indices(7, 8, use_torch))
    assert got == [True] * 7
    for i in range(7):
        assert dst.page_bytes((8 + i) * PAGE) == src.page_bytes(i * PAGE)
    assert reader.batch_get_v1(pages[6:9], indices(3, 0, use_torch)) == [True, False, False]
    writer.close()
    reader.close()


def test_mha_keys_per_rank(cluster, key):
    """{page_hash}_{rank}_k and _v: ranks do not see each other's pages."""
    pool = HostKVCache(16, PAGE, LAYERS, TOKEN, seed=3)
    r0, r1 = make(cluster, rank=0, prefix=key("")), make(cluster, rank=1, prefix=key(""))
    r1.prefix = r0.prefix
    r0.register_mem_pool_host(pool)
    r1.register_mem_pool_host(pool)
    assert r0.batch_set_v1(["abc"], indices(1)) == [True]
    with moonkv.MoonkvStore() as s:
        s.setup(master=cluster.master, cluster_secret=cluster.secret)
        assert s.batch_is_exist([f"{r0.prefix}abc_0_k", f"{r0.prefix}abc_0_v", f"{r0.prefix}abc_1_k"]) == [1, 1, 0]
        assert s.get_size(f"{r0.prefix}abc_0_k") == PAGE * LAYERS * TOKEN
    assert r0.batch_exists(["abc"]) == 1 and r1.batch_exists(["abc"]) == 0
    r0.close()
    r1.close()


def test_half_a_page_is_a_miss(cluster, key):
    """A page whose V is missing is not counted, nor read."""
    pool = HostKVCache(32, PAGE, LAYERS, TOKEN, seed=4)
    b = make(cluster, prefix=key(""))
    b.register_mem_pool_host(pool)
    assert b.batch_set_v1(["p0", "p1", "p2"], indices(3)) == [True] * 3
    b.store.remove(f"{b.prefix}p1_0_v")
    assert b.batch_exists(["p0", "p1", "p2"]) == 1
    assert b.batch_get_v1(["p0", "p1", "p2"], indices(3, 4)) == [True, False, True]
    b.close()


def test_failures_raise(cluster, key):
    """A batch that fails as a whole raises; it never answers None."""
    b = make(cluster, prefix=key(""))
    with pytest.raises(RuntimeError):   # no host pool registered
        b.batch_set_v1(["x"], indices(1))
    pool = HostKVCache(16, PAGE, LAYERS, TOKEN, seed=5)
    b.register_mem_pool_host(pool)
    b.store.close()
    with pytest.raises(moonkv.MoonkvError):
        b.batch_get_v1(["x"], indices(1))
    with pytest.raises(moonkv.MoonkvError):
        b.batch_exists(["x"])


def test_no_space_is_false_per_page(cluster, key):
    """A page the cluster has no room for is False (NOSPACE), not an error."""
    pool = HostKVCache(PAGE * 8, PAGE, LAYERS, 4096, seed=6)
    b = make(cluster, prefix=key(""))
    b.register_mem_pool_host(pool)
    ptrs, sizes = pool.get_page_buffer_meta(indices(1))
    n = (600 << 20) // sizes[0]   # K and V of 600 MiB each, out of the same registered piece
    b._pieces = lambda keys, hi: ([ptrs[:1] * n] * 2, [sizes[:1] * n] * 2)
    assert b.batch_set_v1(["huge"], indices(1)) == [False]
    assert b.get_stats()["set_failed"] == 1
    b.close()


def test_legacy_calls_and_clear(cluster, key):
    b = make(cluster, prefix=key(""))
    val = np.arange(1000, dtype=np.float32)
    assert b.set("legacy", val) is True
    out = np.zeros_like(val)
    assert b.get("legacy", out) is out and (out == val).all()
    assert b.get("missing", out) is None
    assert b.batch_set(["l1", "l2"], [val, val]) is True
    assert [x is not None for x in b.batch_get(["l1", "nope"], [np.zeros_like(val), np.zeros_like(val)])] == [True, False]
    b.clear()
    assert b.get("legacy", out) is None
    b.close()
