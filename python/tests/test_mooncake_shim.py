"""The Mooncake-compatible shim: `from mooncake.store import
MooncakeDistributedStore, ReplicateConfig` on moonkv, called as vLLM's
Mooncake store connector calls it (raw pointers into one registered host
arena, batch_is_exist before batch_put_from_multi_buffers, int codes)."""
import json

import numpy as np
import pytest

from mooncake.store import ErrorCode, MooncakeDistributedStore, ReplicateConfig


@pytest.fixture
def mc(cluster, transport, monkeypatch):
    monkeypatch.setenv("MOONKV_CLUSTER_SECRET", cluster.secret)
    monkeypatch.setenv("MOONKV_TRANSPORT", transport)
    s = MooncakeDistributedStore()
    # Mooncake's seven arguments; all but the master's address are ignored
    assert s.setup("localhost", "http://localhost:8080/metadata", 512 << 20, 128 << 20, "tcp", "",
                   cluster.master) == 0
    yield s
    assert s.close() == 0


def test_setup_reads_moonkv_config_file(cluster, key, tmp_path, monkeypatch):
    monkeypatch.delenv("MOONKV_CLUSTER_SECRET", raising=False)
    s = MooncakeDistributedStore()
    # without the secret the master refuses the client (docs/SECURITY.md)
    assert s.setup("h", "m", 0, 0, "tcp", "", cluster.master) == ErrorCode.RPC_FAIL
    conf = tmp_path / "moonkv.json"
    conf.write_text(json.dumps({"cluster_secret": cluster.secret, "transport": "tcp"}))
    monkeypatch.setenv("MOONKV_CONFIG", str(conf))
    assert s.setup("h", "m", 0, 0, "tcp", "", cluster.master) == 0
    assert s.put(key("secret"), b"v") == 0
    s.close()
    conf.write_text(json.dumps({"cluster_secert": "typo"}))
    assert MooncakeDistributedStore().setup("h", "m", 0, 0, "tcp", "", cluster.master) == ErrorCode.INVALID_PARAMS


def test_single_calls_and_codes(mc, key):
    k = key("one")
    assert mc.put(k, b"hello") == 0
    assert mc.put(k, b"hello") == 0            # an existing key: success, as Mooncake reports it
    assert mc.get(k) == b"hello"
    assert mc.get(key("none")) == b""
    assert mc.is_exist(k) == 1 and mc.is_exist(key("none")) == 0
    assert mc.get_size(k) == 5 and mc.get_size(key("none")) == ErrorCode.OBJECT_NOT_FOUND
    assert mc.remove(k) == 0 and mc.remove(k) == ErrorCode.OBJECT_NOT_FOUND
    cfg = ReplicateConfig()
    cfg.replica_num = 2
    assert mc.put(key("two"), b"x" * 100, cfg) == 0
    cfg.replica_num = 3                         # only two nodes
    assert mc.put(key("three"), b"x", cfg) == ErrorCode.NO_AVAILABLE_HANDLE
    assert mc.upsert(k, b"y") == ErrorCode.INVALID_PARAMS   # write-once: not supported
    with pytest.raises(AttributeError):
        mc.no_such_method()


def test_zero_copy_calls(mc, key):
    buf = np.random.default_rng(2).integers(0, 256, 1 << 20, dtype=np.uint8)
    out = np.zeros_like(buf)
    p, q = buf.ctypes.data, out.ctypes.data
    assert mc.register_buffer(p, buf.nbytes) == 0 and mc.register_buffer(q, out.nbytes) == 0
    k = key("zc")
    assert mc.put_from(k, p, 4096) == 0
    assert mc.get_into(k, q, 4096) == 4096 and (out[:4096] == buf[:4096]).all()
    assert mc.get_into(k, q, 100) == ErrorCode.BUFFER_OVERFLOW
    ks = [key(f"b{i}") for i in range(8)]
    assert mc.batch_put_from(ks, [p + i * 8192 for i in range(8)], [8192] * 8) == [0] * 8
    out[:] = 0
    assert mc.batch_get_into(ks, [q + i * 8192 for i in range(8)], [8192] * 8) == [8192] * 8
    assert (out[:65536] == buf[:65536]).all()
    assert mc.unregister_buffer(p) == 0 and mc.unregister_buffer(q) == 0


def test_vllm_save_and_load(mc, key):
    """vLLM's store connector: keys prefix + block hash per TP rank, one
    arena, a piece per layer per block, exists before saving, prefix hit
    over every rank's keys."""
    layers, blocks, piece = 4, 6, 2048
    arena = np.random.default_rng(5).integers(0, 256, (layers, blocks, piece), dtype=np.uint8)
    back = np.zeros_like(arena)
    assert mc.register_buffer(arena.ctypes.data, arena.nbytes) == 0
    assert mc.register_buffer(back.ctypes.data, back.nbytes) == 0
    ptr = lambda a, layer, b: a.ctypes.data + (layer * blocks + b) * piece
    base = key("model@tp")
    ranks = 2
    keys = {r: [f"{base}{r}@{h:016x}" for h in range(blocks)] for r in range(ranks)}
    saved = blocks - 2                     # the last two blocks are never saved
    for r in range(ranks):
        ks = keys[r][:saved]
        exists = mc.batch_is_exist(ks)
        assert exists == [0] * saved
        rs = mc.batch_put_from_multi_buffers(ks, [[ptr(arena, layer, b) for layer in range(layers)] for b in range(saved)],
                                             [[piece] * layers for _ in range(saved)])
        assert rs == [0] * saved
    # lookup: one batch_is_exist over every rank's candidates; the hit is
    # the longest prefix present in all ranks
    flat = [k for r in range(ranks) for k in keys[r]]
    ex = mc.batch_is_exist(flat)
    hit = min(next((i for i, e in enumerate(ex[r * blocks:(r + 1) * blocks]) if e != 1), blocks) for r in range(ranks))
    assert hit == saved
    assert mc.batch_exists_prefix(keys[0]) == saved
    rs = mc.batch_get_into_multi_buffers(keys[1][:hit], [[ptr(back, layer, b) for layer in range(layers)] for b in range(hit)],
                                         [[piece] * layers for _ in range(hit)])
    assert rs == [layers * piece] * hit
    assert (back[:, :hit] == arena[:, :hit]).all()
    # a key missing in a load is its own negative code
    rs = mc.batch_get_into_multi_buffers(keys[0][saved - 1:], [[ptr(back, 0, 0)]] * 3, [[layers * piece]] * 3)
    assert rs == [layers * piece, ErrorCode.OBJECT_NOT_FOUND, ErrorCode.OBJECT_NOT_FOUND]


def test_multi_buffers_no_space_per_key(mc, key):
    """vLLM's save: a key the cluster has no room for answers "no space"
    (NO_AVAILABLE_HANDLE, which switches the request to skip saving),
    apart from its neighbours in the same batch, which are stored; a key
    stored already is 0."""
    buf = np.random.default_rng(8).integers(0, 256, 1 << 20, dtype=np.uint8)
    p = buf.ctypes.data
    assert mc.register_buffer(p, buf.nbytes) == 0
    ks = [key("ns-a"), key("ns-huge"), key("ns-b")]
    assert mc.put_from(ks[2], p, 4096) == 0
    huge = 600                                # 600 pieces of 1 MiB: more than a 256 MB node holds
    rs = mc.batch_put_from_multi_buffers(ks, [[p, p + 4096], [p] * huge, [p]], [[4096, 4096], [1 << 20] * huge, [4096]])
    assert rs == [0, ErrorCode.NO_AVAILABLE_HANDLE, 0]
    assert mc.batch_is_exist(ks) == [1, 0, 1]


def test_remove_all(mc, key):
    ks = [key(f"ra{i}") for i in range(3)]
    for k in ks:
        assert mc.put(k, b"z") == 0
    assert mc.remove_all() >= 3
    assert mc.batch_is_exist(ks) == [0, 0, 0]


def test_health_check_and_every_mooncake_method(mc):
    """health_check asks the master; the rest of Mooncake's store (its
    newest store_py.cpp: sessions, ranges, tensor calls) answers -600."""
    assert mc.health_check() == 0
    from mooncake import store as shim
    for name in ("put_tensor", "batch_get_tensor_with_tp_into", "batch_put_session_start",
                 "put_from_with_metadata", "batch_get_into_multi_buffer_ranges", "bind_to_numa_node"):
        assert name in shim._UNSUPPORTED
        assert getattr(mc, name)("k") == ErrorCode.INVALID_PARAMS
    with pytest.raises(AttributeError):
        mc.no_such_method
