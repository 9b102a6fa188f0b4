"""tests/bench/bench_python.py MASTER TRANSPORT BLOCKS BLOCK_SIZE - the
KV-cache batch of step 5 through the Python binding: one batch_put_from and
one batch_get_into of BLOCKS blocks between two registered buffers, timed
around each call as bench_client times mkv_put_batch / mkv_get_batch.

Prints bench.h's lines: RESULT <name> <value> <unit> / SKIP <name> <why>.
Needs `import moonkv` (PYTHONPATH=build/rel/python after `make python`)."""
import mmap
import os
import sys
import time


def skip(why):
    print(f"SKIP py_batch_get_s {' '.join(str(why).split())}", flush=True)
    sys.exit(0)


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: bench_python.py MASTER TRANSPORT BLOCKS BLOCK_SIZE (e.g. 256KiB)")
    master, transport, blocks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    units = {"KiB": 1 << 10, "MiB": 1 << 20}
    size_arg = sys.argv[4]
    bsize = next((int(size_arg[:-3]) * m for u, m in units.items() if size_arg.endswith(u)), None)
    bsize = bsize or int(size_arg)
    try:
        import moonkv
    except ImportError as e:
        skip(f"import moonkv: {e} (make python)")
    total = blocks * bsize
    src, dst = mmap.mmap(-1, total), mmap.mmap(-1, total)
    src[:] = os.urandom(total)
    # Untimed, as bench_client memsets its destination: a fresh mapping's first
    # touch costs a page fault per 4 KiB, which would be timed as the get.
    dst[:] = bytes(total)
    with moonkv.MoonkvStore() as store:
        try:
            store.setup(master=master, transport=transport, timeout_ms=10000)
            store.register_buffer(src)
            store.register_buffer(dst)
        except moonkv.MoonkvError as e:
            skip(e)
        keys = [f"kvpy:{os.getpid()}:{i}" for i in range(blocks)]
        sv, dv = memoryview(src), memoryview(dst)
        srcs = [sv[i * bsize:(i + 1) * bsize] for i in range(blocks)]
        dsts = [dv[i * bsize:(i + 1) * bsize] for i in range(blocks)]
        try:
            t0 = time.perf_counter()
            put = store.batch_put_from(keys, srcs, replicas=1)
            t1 = time.perf_counter()
            got = store.batch_get_into(keys, dsts)
            t2 = time.perf_counter()
        except moonkv.MoonkvError as e:
            skip(e)
        if any(r != 0 for r in put):
            skip(f"batch_put_from: {sum(r != 0 for r in put)} blocks failed, e.g. {moonkv.error_word(min(put))}")
        print(f"RESULT py_batch_put_s {t1 - t0:.6g} s", flush=True)
        if any(n != bsize for n in got):
            skip(f"batch_get_into: {sum(n != bsize for n in got)} blocks failed")
        if src[:] != dst[:]:
            skip("batch_get_into returned different bytes than were put")
        print(f"RESULT py_batch_get_s {t2 - t1:.6g} s", flush=True)
        for k in keys:
            store.remove(k)
        del srcs, dsts
        sv.release()
        dv.release()


if __name__ == "__main__":
    main()
