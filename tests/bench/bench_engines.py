"""tests/bench/bench_engines.py MASTER TRANSPORT - step 9: the calls the
inference engines make, each against the call it replaces, in one process:

* multi: the Mooncake shim's batch_put_from_multi_buffers and
  batch_get_into_multi_buffers of 128 keys x 32 pieces of 16 KiB (a
  32-layer page, one piece per layer, out of one layer-major arena)
  against batch_put_from / batch_get_into of 128 contiguous 512 KiB
  objects (the same bytes);
* prefix: prefix_exists of 4,096 stored keys in one call against a loop
  of is_exist over them;
* sglang: the SGLang adapter's batch_set_v1 / batch_get_v1 of 128 pages
  (MHA, K and V apart: 256 objects of 256 KiB) against the binding's own
  batch_put_from / batch_get_into of the same 256 pieces.

Prepared as bench_python.py: shm mappings warm first, one untimed round,
then the median of ROUNDS timed rounds. Each round clears the get
buffers first, then runs the two puts and then the two gets, the side
that goes first alternating from round to round: the first put after the
clearing pays for writing its dirty lines back (64-128 MiB, more than
the cache holds), and with a fixed order one side always paid (the
multi-buffer and adapter puts, until 2026-12-07). Every round, the best,
and the process's CPU time per call (all its threads: on shm the copies
are the client's) on a ROUNDS line (run.log). Each round writes new keys
(objects are write-once) and removes them after.
Prints bench.h's lines: RESULT <name> <value> <unit> / SKIP <name> <why>."""
import os
import sys
import time

import numpy as np

ROUNDS = 9
KEYS, PIECES, PIECE = 128, 32, 16 << 10
NPREFIX = 4096
PAGES, PAGE_TOKENS, LAYERS, TOKEN_BYTES = 128, 16, 32, 512   # 256 KiB of K and of V a page


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def skip(names, why):
    for n in names:
        print(f"SKIP {n} {' '.join(str(why).split())}", flush=True)


def result(name, xs):
    """The wall-time median as bench.h's RESULT line; every round and the
    CPU-time median on a ROUNDS line (run.log). xs: (wall, cpu) pairs."""
    wall = [x[0] for x in xs]
    print(f"RESULT {name} {median(wall):.6g} s", flush=True)
    print(f"ROUNDS {name} best={min(wall) * 1e3:.2f}ms all={','.join(f'{x * 1e3:.2f}' for x in wall)} "
          f"cpu_median={median([x[1] for x in xs]) * 1e3:.2f}ms", flush=True)


def timed(fn):
    """(wall seconds, process CPU seconds), fn's result."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return (time.perf_counter() - t0, time.process_time() - c0), out


def both(r, a, b):
    """a() and b() in an order alternating with r: their results as (a's, b's)."""
    if r % 2:
        rb = b()
        return a(), rb
    ra = a()
    return ra, b()


def warm(store):
    buf = np.zeros(65536, dtype=np.uint8)
    store.register_buffer(buf)
    for i in range(16):
        k = f"eng-warm:{os.getpid()}:{i}"
        store.put_from(k, buf)
        store.get_into(k, buf)
        store.remove(k)
    end = time.monotonic() + 120
    while store.transfer_stats()["shm_cold_bytes"] and time.monotonic() < end:
        time.sleep(0.02)


def bench_multi(mc, tag):
    """(multi put, multi get, contiguous put, contiguous get) seconds."""
    arena = np.random.default_rng(1).integers(0, 256, (PIECES, KEYS, PIECE), dtype=np.uint8)
    back = np.zeros_like(arena)
    flat = np.ascontiguousarray(arena.transpose(1, 0, 2)).reshape(KEYS, PIECES * PIECE)
    flat_back = np.zeros_like(flat)
    for a in (arena, back, flat, flat_back):
        assert mc.register_buffer(a.ctypes.data, a.nbytes) == 0
    # the lists an engine builds per call, from base addresses it keeps (numpy's
    # .ctypes.data per element cost 3-9 ms a call: the row measured that); the
    # base is looked up once a call, as an engine holds it (a lookup per
    # element was 0.14 of the 0.34 ms the lists took: the bench's own cost)
    base = {id(a): a.ctypes.data for a in (arena, back, flat, flat_back)}

    def ptrs(a):
        b0 = base[id(a)]
        return [[b0 + (layer * KEYS + b) * PIECE for layer in range(PIECES)] for b in range(KEYS)]

    def fptr(a):
        b0 = base[id(a)]
        return [b0 + b * PIECES * PIECE for b in range(KEYS)]
    sizes = [[PIECE] * PIECES for _ in range(KEYS)]
    rounds = {"mp": [], "mg": [], "cp": [], "cg": []}
    for r in range(ROUNDS + 1):
        mk = [f"eng-m:{tag}:{os.getpid()}:{r}:{b}" for b in range(KEYS)]
        ck = [f"eng-c:{tag}:{os.getpid()}:{r}:{b}" for b in range(KEYS)]
        back[:] = 0
        flat_back[:] = 0
        (tp, rs), (cp, cs) = both(r, lambda: timed(lambda: mc.batch_put_from_multi_buffers(mk, ptrs(arena), sizes)),
                                  lambda: timed(lambda: mc.batch_put_from(ck, fptr(flat), [PIECES * PIECE] * KEYS)))
        assert rs == [0] * KEYS and cs == [0] * KEYS, (rs[:3], cs[:3])
        (tg, rs), (cg, cs) = both(r, lambda: timed(lambda: mc.batch_get_into_multi_buffers(mk, ptrs(back), sizes)),
                                  lambda: timed(lambda: mc.batch_get_into(ck, fptr(flat_back), [PIECES * PIECE] * KEYS)))
        assert rs == [PIECES * PIECE] * KEYS and cs == [PIECES * PIECE] * KEYS, (rs[:3], cs[:3])
        assert (back == arena).all()
        assert (flat_back == flat).all()
        for k in mk + ck:
            mc.remove(k)
        if r:
            for name, t in (("mp", tp), ("mg", tg), ("cp", cp), ("cg", cg)):
                rounds[name].append(t)
    return rounds


def bench_prefix(store, tag):
    keys = [f"eng-p:{tag}:{os.getpid()}:{i}" for i in range(NPREFIX)]
    val = np.zeros(64, dtype=np.uint8)
    store.register_buffer(val)
    assert store.batch_put_from(keys, [val] * NPREFIX) == [0] * NPREFIX
    one, loop = [], []
    for r in range(ROUNDS + 1):
        (t1, n), (t2, hits) = both(r, lambda: timed(lambda: store.prefix_exists(keys)),
                                   lambda: timed(lambda: sum(1 for k in keys if store.is_exist(k))))
        assert n == NPREFIX
        assert hits == NPREFIX
        if r:
            one.append(t1)
            loop.append(t2)
    for k in keys:
        store.remove(k)
    return one, loop


def bench_sglang(master, transport, tag):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "tests",
                                    "standins"))
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorageConfig
    from sglang.srt.mem_cache.memory_pool_host import HostKVCache
    from moonkv.integrations.sglang import MoonkvHiCacheStorage

    src = HostKVCache(PAGES * PAGE_TOKENS, PAGE_TOKENS, LAYERS, TOKEN_BYTES, seed=3)
    dst = HostKVCache(PAGES * PAGE_TOKENS, PAGE_TOKENS, LAYERS, TOKEN_BYTES, seed=4)
    cfg = HiCacheStorageConfig(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, is_mla_model=False,
                               is_page_first_layout=True, model_name="bench",
                               extra_config={"master": master, "transport": transport})
    wr, rd = MoonkvHiCacheStorage(cfg), MoonkvHiCacheStorage(cfg)
    wr.register_mem_pool_host(src)
    rd.register_mem_pool_host(dst)
    idx = np.arange(PAGES * PAGE_TOKENS)
    ptrs, sizes = src.get_page_buffer_meta(idx)
    dptrs, _ = dst.get_page_buffer_meta(idx)
    # the binding's own batch, on the same clients (each registered its pool)
    sets, gets, bsets, bgets = [], [], [], []
    for r in range(ROUNDS + 1):
        wr.prefix = rd.prefix = f"eng-s:{tag}:{os.getpid()}:{r}:"
        pages = [f"{i:064x}" for i in range(PAGES)]
        bkeys = [f"eng-b:{tag}:{os.getpid()}:{r}:{i}" for i in range(len(ptrs))]
        dst.kv_buffer[:] = 0
        (ts, ok), (bs, rs) = both(r, lambda: timed(lambda: wr.batch_set_v1(pages, idx)),
                                  lambda: timed(lambda: wr.store.batch_put_from(bkeys, ptrs, sizes)))
        assert ok == [True] * PAGES and rs == [0] * len(ptrs)
        (tg, ok), (bg, rs) = both(r, lambda: timed(lambda: rd.batch_get_v1(pages, idx)),
                                  lambda: timed(lambda: rd.store.batch_get_into(bkeys, dptrs, sizes)))
        assert ok == [True] * PAGES and rs == sizes
        assert (dst.kv_buffer == src.kv_buffer).all()
        for k in wr._object_keys(pages) + bkeys:
            wr.store.remove(k)
        if r:
            sets.append(ts)
            gets.append(tg)
            bsets.append(bs)
            bgets.append(bg)
    wr.close()
    rd.close()
    return sets, gets, bsets, bgets


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: bench_engines.py MASTER TRANSPORT")
    master, transport = sys.argv[1], sys.argv[2]
    multi = ["multi_put_s", "multi_get_s", "contig_put_s", "contig_get_s"]
    prefix = ["prefix_one_s", "prefix_loop_s"]
    sgl = ["sglang_set_s", "sglang_get_s", "binding_set_s", "binding_get_s"]
    try:
        import moonkv
        from mooncake.store import MooncakeDistributedStore
    except ImportError as e:
        skip(multi + prefix + sgl, f"import: {e} (make python)")
        return
    os.environ["MOONKV_TRANSPORT"] = transport
    mc = MooncakeDistributedStore()
    if mc.setup("localhost", "", 0, 0, "tcp", "", master) != 0:
        skip(multi + prefix + sgl, "the shim's setup failed")
        return
    store = moonkv.MoonkvStore()
    store.setup(master=master, transport=transport, timeout_ms=10000)
    warm(store)
    warm(mc._s)
    try:
        m = bench_multi(mc, transport)
        for n, k in zip(multi, ("mp", "mg", "cp", "cg")):
            result(n, m[k])
    except Exception as e:   # noqa: BLE001 - a failed step says why, the others still run
        skip(multi, repr(e))
    try:
        one, loop = bench_prefix(store, transport)
        result("prefix_one_s", one)
        result("prefix_loop_s", loop)
    except Exception as e:   # noqa: BLE001
        skip(prefix, repr(e))
    try:
        for n, v in zip(sgl, bench_sglang(master, transport, transport)):
            result(n, v)
    except Exception as e:   # noqa: BLE001
        skip(sgl, repr(e))
    store.close()
    mc.close()


if __name__ == "__main__":
    main()
