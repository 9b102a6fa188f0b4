"""moonkv: the Python client of moonkv, shaped like Mooncake's MooncakeDistributedStore.

    from moonkv import MoonkvStore
    with MoonkvStore() as store:
        store.setup(master="127.0.0.1:7380", cluster_secret="change-me")
        store.put("block:1", b"bytes")
        assert store.get("block:1") == b"bytes"

The store and its exceptions live in the C extension moonkv._moonkv over
libmoonkv; this module only re-exports them.
"""
from moonkv._moonkv import *  # noqa: F401,F403  (MoonkvStore, errors, codes)
from moonkv._moonkv import MoonkvStore, MoonkvError, strerror, error_word  # noqa: F401

__version__ = "0.1.0"
