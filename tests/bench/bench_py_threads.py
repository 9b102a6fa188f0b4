"""tests/bench/bench_py_threads.py MASTER TRANSPORT SIZE THREADS... - one
MoonkvStore shared by Python threads (step 11): each thread put_from's then
get_into's 16 objects of SIZE bytes between its own registered buffers,
all threads at once, rounds until BENCH_SECONDS (default 1.5) of each
phase, after one untimed round. GB/s of all threads together per count:
py.{put,get}.<size>.<n>t. The store takes no lock and drops the GIL in
every call, so the calls run at once on libmoonkv's lanes.

Prints bench.h's lines: RESULT <name> <value> <unit> / SKIP <name> <why>."""
import os
import sys
import threading
import time

OBJS = 16


def main():
    master, transport, size_arg = sys.argv[1], sys.argv[2], sys.argv[3]
    size = int(size_arg[:-3]) << 10 if size_arg.endswith("KiB") else int(size_arg)
    counts = [int(n) for n in sys.argv[4:]]
    try:
        import moonkv
    except ImportError as e:
        for n in counts:
            print(f"SKIP py.put.{size_arg}.{n}t cannot import moonkv: {e}", flush=True)
        return
    seconds = float(os.environ.get("BENCH_SECONDS", "1.5"))
    store = moonkv.MoonkvStore()
    store.setup(master=master, transport=transport, timeout_ms=10000,
                cluster_secret=os.environ.get("MOONKV_CLUSTER_SECRET") or None)
    bufs = [(bytearray(os.urandom(OBJS * size)), bytearray(OBJS * size)) for _ in range(max(counts))]
    for src, dst in bufs:
        store.register_buffer(src)
        store.register_buffer(dst)
    for n in counts:
        measure(store, bufs, size, size_arg, n, seconds)
    store.close()


def measure(store, bufs, size, size_arg, n, seconds):
    phase = [None]
    start, done = threading.Barrier(n + 1), threading.Barrier(n + 1)
    failed = []

    def body(i):
        src, dst = bufs[i]
        rnd = 0
        while True:
            start.wait()
            if phase[0] == "stop":
                return
            try:
                for j in range(OBJS):
                    key = f"pythr:{os.getpid()}:{n}:{i}:{rnd}:{j}"
                    view = slice(j * size, (j + 1) * size)
                    if phase[0] == "put":
                        store.put_from(key, memoryview(src)[view])
                    elif phase[0] == "get":
                        store.get_into(key, memoryview(dst)[view])
                    else:
                        store.remove(key)
            except Exception as e:      # noqa: BLE001 - reported below
                failed.append(e)
            if phase[0] == "remove":
                rnd += 1
            done.wait()

    def step(name):
        phase[0] = name
        t0 = time.perf_counter()
        start.wait()
        done.wait()
        return time.perf_counter() - t0

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for name in ("put", "get", "remove"):   # untimed: the store's lanes open
        step(name)
    spent = {"put": 0.0, "get": 0.0}
    rounds = 0
    while not failed and (rounds < 3 or min(spent.values()) < seconds):
        for name in ("put", "get"):
            spent[name] += step(name)
        step("remove")
        rounds += 1
    phase[0] = "stop"
    start.wait()
    for t in threads:
        t.join()
    for name in ("put", "get"):
        if failed:
            print(f"SKIP py.{name}.{size_arg}.{n}t a call failed: {failed[0]}", flush=True)
        else:
            gbps = n * OBJS * size * rounds / spent[name] / 1e9
            print(f"RESULT py.{name}.{size_arg}.{n}t {gbps:.6g} GB/s", flush=True)


if __name__ == "__main__":
    main()
