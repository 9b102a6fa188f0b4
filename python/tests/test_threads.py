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
