"""An SGLang HiCache storage backend on moonkv (the L3 tier of HiCache).

SGLang loads it with no change of its own:

    --hicache-storage-backend dynamic
    --hicache-storage-backend-extra-config '{"backend_name": "moonkv",
        "module_path": "moonkv.integrations.sglang", "class_name": "MoonkvHiCacheStorage",
        "master": "10.0.0.1:7380", "key_prefix": "llama3-70b/"}'

The extra config's "master", "cluster_secret", "transport", "replicas",
... are moonkv's client settings (MOONKV_* variables and MOONKV_CONFIG
win, moonkv.integrations.settings); "key_prefix" namespaces the keys (model,
salt). The zero-copy v1 calls move each page straight between SGLang's
host pool (registered once) and the nodes:

* keys: an MHA page is two objects, "{page_hash}_{tp_rank}_k" and "_v"
  (K and V apart, as SGLang's Mooncake backend names them); an MLA page,
  the same on every rank, is one object "{page_hash}_k";
* a page's bytes are the pieces the host pool's get_page_buffer_meta()
  gives for it (one per page and K/V in a page-first layout, one per
  layer in a layer-first one): K's pieces are the first half of the
  page's, V's the second half;
* batch_exists is the prefix count: one MOON.PREFIX for every page's
  objects, pages = leading objects // objects per page;
* batch_set_v1 / batch_get_v1 answer a bool per page and raise when a
  batch fails as a whole (no master, ...): never None. A key stored
  already counts as set (objects are write-once: the same page hash is
  the same bytes).
"""
import logging

import moonkv
from moonkv.integrations import settings

try:  # the real interface when SGLang is installed (or the tests' stand-in)
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage
except ImportError:  # pragma: no cover - loadable without SGLang, for docs and checks
    HiCacheStorage = object

log = logging.getLogger("moonkv.sglang")


def _span(buf):
    """(address, bytes) of a torch tensor, numpy array or buffer."""
    if hasattr(buf, "data_ptr"):
        return buf.data_ptr(), buf.numel() * buf.element_size()
    if hasattr(buf, "ctypes"):
        return buf.ctypes.data, buf.nbytes
    raise TypeError(f"cannot register host pool buffer of type {type(buf).__name__}")


def _flat(sizes):
    """One piece per object: the sizes are ints, not a list per object."""
    return not sizes or not isinstance(sizes[0], (list, tuple))


class MoonkvHiCacheStorage(HiCacheStorage):
    """HiCacheStorage over one moonkv client per TP rank."""

    def __init__(self, storage_config=None, kwargs=None, **more):
        extra = dict(getattr(storage_config, "extra_config", None) or {})
        extra.update(kwargs or {})
        extra.update(more)
        self.rank = int(getattr(storage_config, "tp_rank", 0) or 0)
        self.is_mla = bool(getattr(storage_config, "is_mla_model", False))
        self.prefix = str(extra.get("key_prefix", ""))
        self.store = moonkv.MoonkvStore()
        self.store.setup(**settings.load({k: extra.get(k) for k in settings.FIELDS}))
        self.mem_pool_host = None
        self.stats = {"set_pages": 0, "set_failed": 0, "get_pages": 0, "get_missed": 0, "exists_calls": 0}

    # ---- the host pool ----

    def register_mem_pool_host(self, mem_pool_host):
        """The pool's buffers are registered once: every v1 transfer then
        moves straight from and into them."""
        self.mem_pool_host = mem_pool_host
        bufs = getattr(mem_pool_host, "kv_buffer", None)
        for buf in bufs if isinstance(bufs, (list, tuple)) else [bufs]:
            ptr, size = _span(buf)
            self.store.register_buffer(ptr, size)

    def _object_keys(self, keys):
        if self.is_mla:
            return [f"{self.prefix}{k}_k" for k in keys]
        return [f"{self.prefix}{k}_{self.rank}_{kv}" for k in keys for kv in ("k", "v")]

    def _per_page(self):
        return 1 if self.is_mla else 2

    def _pieces(self, keys, host_indices):
        """Per object, its (ptrs, sizes) from the pool's page buffer meta;
        with one piece per object, the flat lists as they came."""
        if self.mem_pool_host is None:
            raise RuntimeError("moonkv HiCache backend: register_mem_pool_host() was not called")
        ptrs, sizes = self.mem_pool_host.get_page_buffer_meta(host_indices)
        nobj = len(keys) * self._per_page()
        if nobj == 0 or len(ptrs) % nobj or len(ptrs) != len(sizes):
            raise ValueError(f"moonkv HiCache backend: {len(ptrs)} buffers for {len(keys)} pages")
        m = len(ptrs) // nobj
        if m == 1:   # page-first: a plain batch, no list per object
            return ptrs, sizes
        return ([list(ptrs[i * m:(i + 1) * m]) for i in range(nobj)],
                [list(sizes[i * m:(i + 1) * m]) for i in range(nobj)])

    def _per_page_ok(self, oks):
        per = self._per_page()
        return [all(oks[i * per:(i + 1) * per]) for i in range(len(oks) // per)]

    # ---- the v1 zero-copy calls ----

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        if not keys:
            return []
        ptrs, sizes = self._pieces(keys, host_indices)
        put = self.store.batch_put_from if _flat(sizes) else self.store.batch_put_from_multi_buffers
        rs = put(self._object_keys(keys), ptrs, sizes)
        done = self._per_page_ok([r in (0, moonkv.EEXISTS) for r in rs])
        self.stats["set_pages"] += sum(done)
        self.stats["set_failed"] += len(done) - sum(done)
        return done

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        if not keys:
            return []
        ptrs, sizes = self._pieces(keys, host_indices)
        if _flat(sizes):
            rs = self.store.batch_get_into(self._object_keys(keys), ptrs, sizes)
            done = self._per_page_ok([r == z for r, z in zip(rs, sizes)])
        else:
            rs = self.store.batch_get_into_multi_buffers(self._object_keys(keys), ptrs, sizes)
            done = self._per_page_ok([r == sum(z) for r, z in zip(rs, sizes)])
        self.stats["get_pages"] += sum(done)
        self.stats["get_missed"] += len(done) - sum(done)
        return done

    def batch_exists(self, keys, extra_info=None):
        """How many pages from the first on are stored: one round trip."""
        self.stats["exists_calls"] += 1
        if not keys:
            return 0
        return self.store.prefix_exists(self._object_keys(keys)) // self._per_page()

    def exists(self, key):
        return self.batch_exists([key]) == 1

    # ---- the older calls: whole pages through tensors (copied) ----

    def _flat_key(self, key):
        return f"{self.prefix}{key}_{self.rank}"

    def set(self, key, value=None, target_location=None, target_sizes=None):
        src = value if value is not None else target_location
        if src is None:
            return False
        data = _bytes_of(src)
        try:
            self.store.put(self._flat_key(key), data)
        except moonkv.ExistsError:
            pass
        except moonkv.MoonkvError as e:
            log.warning("moonkv set %s: %s", key, e)
            return False
        return True

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
        srcs = values if values is not None else target_locations
        return srcs is not None and all(self.set(k, v) for k, v in zip(keys, srcs))

    def get(self, key, target_location=None, target_sizes=None):
        try:
            data = self.store.get(self._flat_key(key))
        except moonkv.NotFoundError:
            return None
        if target_location is None:
            return data
        dst = _writable_bytes(target_location)
        if len(dst) != len(data):
            return None
        dst[:] = data
        return target_location

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        targets = target_locations or [None] * len(keys)
        return [self.get(k, t) for k, t in zip(keys, targets)]

    def clear(self):
        self.store.remove_all()

    def get_stats(self):
        return dict(self.stats)

    def close(self):
        self.store.close()


def _bytes_of(t):
    if hasattr(t, "numpy"):   # a CPU tensor
        t = t.contiguous().view(-1).numpy()
    return memoryview(t).cast("B")


def _writable_bytes(t):
    if hasattr(t, "numpy"):
        t = t.view(-1).numpy()
    return memoryview(t).cast("B")
