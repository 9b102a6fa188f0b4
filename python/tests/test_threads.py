"""Registration from many threads at once, and None where a batch wants a
sequence (issue 26's small ones)."""
import os
import sys
import threading

import pytest

import moonkv

THREADS, ROUNDS, PER_THREAD = 16, 12, 8


def run_threads(n, body):
    """Runs body(i) on n threads started together; the exceptions they
    raised, or [] (a bounded join: a hang is a failure, not a stuck run)."""
    errors, gate = [], threading.Barrier(n)

    def wrap(i):
        try:
            gate.wait(timeout=60)
            body(i)
        except Exception as e:     # noqa: BLE001 - reported by the caller
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread is stuck"
    return errors


def refcounts(bufs):
    return [[sys.getrefcount(b) for b in mine] for mine in bufs]


def test_register_from_many_threads(cluster, transport, key):
    """16 threads register and unregister buffers on one store at once. The
    store's array of registrations was grown before its lock was taken:
    threads that all saw one free slot all appended past its end (ASan:
    heap-buffer-overflow; the plain build aborted or crashed). It only grows,
    so each round takes a new store, whose array starts small: 128
    registrations cross its growth from 8 to 128 slots."""
    bufs = [[bytearray(4096) for _ in range(PER_THREAD)] for _ in range(THREADS)]
    refs = refcounts(bufs)
    for rnd in range(ROUNDS):
        with moonkv.MoonkvStore() as store:
            store.setup(master=cluster.master, cluster_secret=cluster.secret, transport=transport)

            def churn(i):
                for buf in bufs[i]:
                    store.register_buffer(buf)
                # Every registration holds: a put from each thread's last
                # buffer, and each unregister works exactly once.
                bufs[i][-1][:16] = os.urandom(16)
                store.put_from(key(f"{rnd}.{i}"), bufs[i][-1])
                for buf in bufs[i]:
                    store.unregister_buffer(buf)
                    with pytest.raises(moonkv.InvalidError):
                        store.unregister_buffer(buf)
                for buf in bufs[i][:2]:     # and may be made again
                    store.register_buffer(buf)

            assert run_threads(THREADS, churn) == []
            for i in range(THREADS):
                assert store.get(key(f"{rnd}.{i}")) == bytes(bufs[i][-1])
            with pytest.raises(moonkv.NotRegisteredError):
                store.put_from(key("unregistered"), bufs[0][-1])
        assert refcounts(bufs) == refs     # close() released what was left registered


@pytest.mark.parametrize("call", [
    lambda s, b: s.batch_put_from(None, [b]),
    lambda s, b: s.batch_put_from(["k"], None),
    lambda s, b: s.batch_put_from(None, None),
    lambda s, b: s.batch_get_into(None, [b]),
    lambda s, b: s.batch_get_into(["k"], None),
    lambda s, b: s.batch_is_exist(None),
    lambda s, b: s.batch_put_from([None], [b]),
    lambda s, b: s.batch_put_from(["k"], [None]),
    lambda s, b: s.batch_get_into(["k"], [None]),
    lambda s, b: s.batch_is_exist([None]),
    lambda s, b: s.batch_put_from(["k"], [0], [None]),
    lambda s, b: s.batch_put_from_multi_buffers(None, [[b]]),
    lambda s, b: s.batch_put_from_multi_buffers(["k"], None),
    lambda s, b: s.batch_get_into_multi_buffers(None, [[b]]),
    lambda s, b: s.batch_get_into_multi_buffers(["k"], None),
    lambda s, b: s.prefix_exists(None),
], ids=["put-keys", "put-buffers", "put-both", "get-keys", "get-buffers", "exist-keys",
        "put-key-item", "put-buffer-item", "get-buffer-item", "exist-key-item", "put-size-item",
        "multi-put-keys", "multi-put-buffers", "multi-get-keys", "multi-get-buffers", "prefix-keys"])
def test_batch_none_is_type_error(store, call):
    """None for a batch's keys or buffers was returned as NULL with no
    exception set, which CPython reports as SystemError."""
    buf = bytearray(64)
    store.register_buffer(buf)
    try:
        with pytest.raises(TypeError) as e:
            call(store, buf)
        assert str(e.value)      # says what was wrong
    finally:
        store.unregister_buffer(buf)


SHARED_THREADS, SHARED_ROUNDS, VAL = 8, 4, 256 << 10


def test_threads_share_one_store(store, key):
    """8 threads on one store at once, every call kind the inference engines
    make: put_from/get_into of 256 KiB (zero-copy, registered memory),
    put/get through the store's scratch buffers, batch put/get/exist, get
    of a byte range, remove; every byte checked. The store takes no lock:
    the calls run on libmoonkv's lanes at once, with the GIL released."""
    def body(i):
        src, dst = bytearray(VAL * 2), bytearray(VAL * 2)
        store.register_buffer(src)
        store.register_buffer(dst)
        try:
            for r in range(SHARED_ROUNDS):
                k = key(f"shared.{i}.{r}")
                n = VAL + 13 * r + i
                src[:n] = os.urandom(n)
                store.put_from(k, memoryview(src)[:n])
                assert store.is_exist(k)
                assert store.get_into(k, dst) == n
                assert dst[:n] == src[:n]
                assert store.get_range(k, 7, memoryview(dst)[:100]) == 100
                assert dst[:100] == src[7:107]
                small = os.urandom(1000 + r)
                store.put(k + ".b", small)
                assert store.get(k + ".b") == small
                keys = [k + f".m{j}" for j in range(4)]
                views = [memoryview(src)[j * 4096:(j + 1) * 4096 - j] for j in range(4)]
                assert store.batch_put_from(keys, views) == [0, 0, 0, 0]
                assert store.batch_is_exist(keys) == [1, 1, 1, 1]
                outs = [memoryview(dst)[j * 8192:(j + 1) * 8192] for j in range(4)]
                assert store.batch_get_into(keys, outs) == [len(v) for v in views]
                assert all(bytes(outs[j][:len(views[j])]) == bytes(views[j]) for j in range(4))
                for kk in [k, k + ".b"] + keys:
                    store.remove(kk)
                assert not store.is_exist(k)
        finally:
            store.unregister_buffer(src)
            store.unregister_buffer(dst)

    assert run_threads(SHARED_THREADS, body) == []


def test_close_waits_for_running_calls(cluster, transport, key):
    """close() from one thread while others are mid-call: their calls finish
    or are refused cleanly (InvalidError once the store is closed), never a
    crash on a freed client."""
    store = moonkv.MoonkvStore()
    store.setup(master=cluster.master, cluster_secret=cluster.secret, transport=transport)
    value = os.urandom(64 << 10)
    refused, gate = [], threading.Event()

    def body(i):
        if i == 0:
            gate.wait(timeout=60)
            store.close()
            return
        for r in range(20000):        # until the close refuses it (bounded)
            try:
                store.put(key(f"close.{i}.{r}"), value)
                assert store.get(key(f"close.{i}.{r}")) == value
                store.remove(key(f"close.{i}.{r}"))
            except moonkv.InvalidError:
                refused.append(i)
                return
            if r == 2:
                gate.set()

    assert run_threads(4, body) == []
    assert len(refused) == 3          # every worker saw the close
