"""MoonkvStore against a real master and nodes: the copying calls, keys,
errors as exceptions with moonkv's error word, and the status-code mode."""
import os
import sys

import pytest

import moonkv


def test_put_get_bytes_like(store, key):
    for i, value in enumerate([b"hello", bytearray(b"\x00\xff" * 1000), memoryview(os.urandom(300000))]):
        store.put(key(str(i)), value)
        assert store.get(key(str(i))) == bytes(value)
        assert store.get_size(key(str(i))) == len(value)


def test_get_grows_past_scratch(store, key):
    big = os.urandom(3 * 1024 * 1024 + 7)    # larger than the first scratch buffer
    store.put(key(), big)
    assert store.get(key()) == big
    store.put(key("small"), b"x")
    assert store.get(key("small")) == b"x"


def test_bytes_keys_are_str_keys(store, key):
    store.put(key().encode(), b"v")
    assert store.get(key()) == b"v"
    assert store.is_exist(bytearray(key().encode())) is True


def test_missing_key(store, key):
    with pytest.raises(moonkv.NotFoundError) as e:
        store.get(key("nope"))
    assert e.value.code == moonkv.ENOTFOUND and e.value.word == "NOTFOUND"
    assert isinstance(e.value, KeyError) and isinstance(e.value, moonkv.MoonkvError)
    assert store.is_exist(key("nope")) is False
    with pytest.raises(moonkv.NotFoundError):
        store.get_size(key("nope"))


def test_write_once(store, key):
    store.put(key(), b"first")
    with pytest.raises(moonkv.ExistsError) as e:
        store.put(key(), b"other bytes")
    assert e.value.word == "EXISTS" and str(e.value).startswith("EXISTS: ")
    assert store.get(key()) == b"first"


def test_remove(store, key):
    store.put(key(), b"gone soon")
    assert store.is_exist(key()) is True
    store.remove(key())
    assert store.is_exist(key()) is False
    with pytest.raises(moonkv.NotFoundError):
        store.remove(key())


def test_bad_keys(store):
    with pytest.raises(moonkv.InvalidError):
        store.put("k" * 5000, b"v")          # longer than moonkv's 4096-byte keys
    with pytest.raises(TypeError):
        store.put(12, b"v")
    with pytest.raises(TypeError):
        store.get(None)
    with pytest.raises(TypeError):
        store.put("k", "a str is not bytes")


def test_not_set_up_and_closed(cluster):
    s = moonkv.MoonkvStore()
    with pytest.raises(moonkv.InvalidError):
        s.get("k")
    with s:
        s.setup(master=cluster.master, cluster_secret=cluster.secret)
        with pytest.raises(moonkv.InvalidError):
            s.setup(master=cluster.master)   # already set up
    with pytest.raises(moonkv.InvalidError) as e:
        s.is_exist("k")                       # the with block closed it
    assert "not set up" in str(e.value)
    s.close()                                 # closing twice is fine


def test_unreachable_master():
    s = moonkv.MoonkvStore()
    with pytest.raises(moonkv.ConnError) as e:
        s.setup(master="127.0.0.1:1", timeout_ms=1000)
    assert isinstance(e.value, ConnectionError) and e.value.code == moonkv.ECONN


def test_wrong_secret(cluster, key):
    with moonkv.MoonkvStore() as s:
        try:
            s.setup(master=cluster.master, cluster_secret="not the secret", transport="tcp", timeout_ms=2000)
            s.put(key(), b"v")
        except moonkv.MoonkvError as e:
            assert e.code in (moonkv.EAUTH, moonkv.ECONN, moonkv.EIO), e
        else:
            pytest.fail("a wrong cluster secret was accepted")


def test_status_codes(cluster, key):
    with moonkv.MoonkvStore(status_codes=True) as s:
        assert s.get("k") == b""                             # not set up: Mooncake's empty bytes
        assert s.is_exist("k") == moonkv.EINVAL
        assert s.setup(master=cluster.master, cluster_secret=cluster.secret) == 0
        assert s.setup(master=cluster.master) == moonkv.EINVAL       # already set up
        assert s.put(key(), b"abc") == 0
        assert s.put(key(), b"xyz") == moonkv.EEXISTS
        assert s.get(key()) == b"abc"
        assert s.get(key("nope")) == b""
        assert s.is_exist(key()) == 1 and s.is_exist(key("nope")) == 0
        assert s.get_size(key()) == 3 and s.get_size(key("nope")) == moonkv.ENOTFOUND
        buf = bytearray(16)
        assert s.get_into(key(), buf) == moonkv.ENOTREG
        assert s.register_buffer(buf) == 0
        assert s.get_into(key(), buf) == 3 and bytes(buf[:3]) == b"abc"
        assert s.get_into(key("nope"), buf) == moonkv.ENOTFOUND
        assert s.remove(key()) == 0 and s.remove(key()) == moonkv.ENOTFOUND
        assert s.unregister_buffer(buf) == 0
        assert s.close() == 0


def test_error_words():
    assert moonkv.error_word(0) == "OK"
    assert moonkv.error_word(moonkv.ENOSPACE) == "NOSPACE"
    assert moonkv.error_word(moonkv.EFAULT) == "FAULT"
    assert moonkv.error_word(-999) == "ERR"
    assert "write-once" in moonkv.strerror(moonkv.EEXISTS)
    assert issubclass(moonkv.NoSpaceError, moonkv.MoonkvError)


def test_refcounts_stay_flat(store, key):
    value = b"r" * 1000
    k = key()
    before = sys.getrefcount(value), sys.getrefcount(k)
    for _ in range(50):
        try:
            store.put(k, value)
        except moonkv.ExistsError:
            pass
        store.get(k)
        store.is_exist(k)
    assert (sys.getrefcount(value), sys.getrefcount(k)) == before


def test_readme_example(cluster, capsys):
    """The "Use from Python" example of docs/CLIENTS.md, run against the test cluster."""
    pytest.importorskip("numpy")
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "CLIENTS.md")).read()
    section = readme.split("## Use from Python", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    code = code.replace('"127.0.0.1:7380"', repr(cluster.master)).replace('"change-me"', repr(cluster.secret))
    exec(compile(code, "docs/CLIENTS.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "EXISTS -2" and out[1] == str([0] * 16) and out[2] == str([262144] * 16)
    assert out[3] == "[1, 1, 0]" and out[4] == "262144"


def test_large_value_scratch_is_dropped(store, key):
    big = os.urandom(80 << 20)       # past the 64 MiB the store keeps between calls
    store.put(key(), big)
    assert store.get(key()) == big
    store.put(key("after"), b"small")        # a new, small scratch buffer works
    assert store.get(key("after")) == b"small"
    store.remove(key())


def test_subclass(cluster, key):
    class Store(moonkv.MoonkvStore):
        def __init__(self):           # does not call MoonkvStore.__init__
            self.puts = 0

        def put_str(self, k, v):
            self.puts += 1
            return self.put(k, v.encode())
    with Store() as s:
        s.setup(master=cluster.master, cluster_secret=cluster.secret)
        s.put_str(key(), "text")
        assert s.get(key()) == b"text" and s.puts == 1
