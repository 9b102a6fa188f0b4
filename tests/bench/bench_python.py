"""tests/bench/bench_python.py MASTER TRANSPORT BLOCKS BLOCK_SIZE - the
KV-cache batch of step 5 through the Python binding: batch_put_from and
batch_get_into of BLOCKS blocks between two registered buffers, timed
around each call as bench_client times mkv_put_batch / mkv_get_batch, and
prepared as it prepares them: the process's shm mappings warm first
(transfer_stats()['shm_cold_bytes'] 0; until then transfers take the
checked fd path), one untimed round, then the median of three timed rounds.

Prints bench.h's lines: RESULT <name> <value> <unit> / SKIP <name> <why>.
Needs `import moonkv` (PYTHONPATH=build/rel/python after `make python`)."""
import mmap
import os
import sys
import time

moonkv = None   # imported by main(), which says SKIP when it cannot be


def skip(why):
    print(f"SKIP py_batch_get_s {' '.join(str(why).split())}", flush=True)
    sys.exit(0)


ROUNDS = 3
WARM_WAIT_S = 120   # a bound on waiting for the shm mappings to warm


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def warm_up(store):
    """As bench_client's bench_warm_up: a few small puts and gets open the
    paths to the nodes, then wait (bounded) until the process's mappings of
    their segments are warm, the state of a long-running client."""
    buf = bytearray(65536)
    store.register_buffer(buf)
    for i in range(16):
        key = f"kvpy-warm:{os.getpid()}:{i}"
        try:
            store.put_from(key, buf)
            store.get_into(key, buf)
            store.remove(key)
        except moonkv.MoonkvError:
            pass
    store.unregister_buffer(buf)
    end = time.monotonic() + WARM_WAIT_S
    while store.transfer_stats()["shm_cold_bytes"] and time.monotonic() < end:
        time.sleep(0.02)


def batch_round(store, kind, srcs, dsts, src, dst, zeros):
    """One timed batch_put_from and batch_get_into of every block, checked
    and removed; (put seconds, get seconds). zeros: dst's size of zeros."""
    keys = [f"{kind}:{os.getpid()}:{i}" for i in range(len(srcs))]
    t0 = time.perf_counter()
    put = store.batch_put_from(keys, srcs, replicas=1)
    t1 = time.perf_counter()
    if any(r != 0 for r in put):
        skip(f"batch_put_from: {sum(r != 0 for r in put)} blocks failed, e.g. {moonkv.error_word(min(put))}")
    dst[:] = zeros   # untimed, as bench_client's memset: a stale round must not pass
    t2 = time.perf_counter()
    got = store.batch_get_into(keys, dsts)
    t3 = time.perf_counter()
    if any(n != len(dsts[0]) for n in got):
        skip(f"batch_get_into: {sum(n != len(dsts[0]) for n in got)} blocks failed")
    if src[:] != dst[:]:
        skip("batch_get_into returned different bytes than were put")
    for k in keys:
        store.remove(k)
    return t1 - t0, t3 - t2


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: bench_python.py MASTER TRANSPORT BLOCKS BLOCK_SIZE (e.g. 256KiB)")
    master, transport, blocks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    units = {"KiB": 1 << 10, "MiB": 1 << 20}
    size_arg = sys.argv[4]
    bsize = next((int(size_arg[:-3]) * m for u, m in units.items() if size_arg.endswith(u)), None)
    bsize = bsize or int(size_arg)
    global moonkv
    try:
        import moonkv
    except ImportError as e:
        skip(f"import moonkv: {e} (make python)")
    total = blocks * bsize
    src, dst = mmap.mmap(-1, total), mmap.mmap(-1, total)
    src[:] = os.urandom(total)
    # Untimed, as bench_client memsets its destination: a fresh mapping's first
    # touch costs a page fault per 4 KiB, which would be timed as the get.
    zeros = bytes(total)
    dst[:] = zeros
    with moonkv.MoonkvStore() as store:
        try:
            store.setup(master=master, transport=transport, timeout_ms=10000)
            store.register_buffer(src)
            store.register_buffer(dst)
        except moonkv.MoonkvError as e:
            skip(e)
        sv, dv = memoryview(src), memoryview(dst)
        srcs = [sv[i * bsize:(i + 1) * bsize] for i in range(blocks)]
        dsts = [dv[i * bsize:(i + 1) * bsize] for i in range(blocks)]
        try:
            warm_up(store)
            rounds = [batch_round(store, f"kvpy{r}", srcs, dsts, src, dst, zeros) for r in range(ROUNDS + 1)]
        except moonkv.MoonkvError as e:
            skip(e)
        rounds = rounds[1:]   # the first one untimed, as bench_client's kv_warm
        print(f"RESULT py_batch_put_s {median(t for t, _ in rounds):.6g} s", flush=True)
        print(f"RESULT py_batch_get_s {median(t for _, t in rounds):.6g} s", flush=True)
        del srcs, dsts
        sv.release()
        dv.release()


if __name__ == "__main__":
    main()
