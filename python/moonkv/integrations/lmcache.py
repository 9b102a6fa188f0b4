"""An LMCache remote connector on moonkv: remote_url "moonkv://host:port"
(the master; "?key_prefix=..." namespaces the keys), moonkv's other
settings from MOONKV_* / MOONKV_CONFIG (moonkv.integrations.settings).

Each chunk is one object: a 64-byte header (length, dtype, shape, memory
format) and the chunk's bytes, written as two pieces and read back into a
memory object allocated from LMCache's local CPU backend. When that
backend's allocator exposes its arena (`memory_allocator.buffer`, or
`memory_allocator.pin_allocator.buffer`) the arena is registered once and
chunks move straight between it and the nodes; otherwise they are copied
once through the binding's scratch buffer.

* exists / exists_sync: one MOON.EXISTS;
* get: the header (a byte-range read), then the object into a new memory
  object; batched_get: the headers, then every object in one batch;
* put / batched_put: one batch, a key stored already counts as stored;
* batched_async_contains(lookup_id, keys, pin): one MOON.PREFIX, the count
  of leading keys stored. With pin=True the hits are pinned under the
  lookup (MOON.PREFIXPIN): nobody can remove them, nor can the cluster
  collect them, until unlock(lookup_id) or "?pin_ms=" (default 30000) runs
  out; the same lookup id again adds to its pin.
* list: the master's MOON.SCAN over the prefix; close: the client.
"""
import asyncio
import struct
import threading
from typing import List, Optional
from urllib.parse import parse_qs, urlparse

import numpy as np

import moonkv
from moonkv.integrations import settings

try:
    from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector
except ImportError:  # pragma: no cover - loadable without LMCache
    RemoteConnector = object
try:
    from lmcache.v1.storage_backend.connector import ConnectorAdapter
except ImportError:  # pragma: no cover
    ConnectorAdapter = object

try:
    import torch
except ImportError:  # numpy only
    torch = None

SCHEMA = "moonkv://"
HEADER = struct.Struct("<4sQII12s4q")   # magic, length, ndim, format, dtype, shape: 64 bytes
MAGIC = b"MKV1"
assert HEADER.size == 64


def _span(buf):
    if hasattr(buf, "data_ptr"):
        return buf.data_ptr(), buf.numel() * buf.element_size()
    arr = np.frombuffer(buf, dtype=np.uint8) if not hasattr(buf, "ctypes") else buf
    return arr.ctypes.data, arr.nbytes


def _dtype_name(dtype):
    if torch is not None and isinstance(dtype, torch.dtype):
        return "t:" + str(dtype).split(".")[-1]
    return np.dtype(dtype).name


def _dtype_of(name):
    if name.startswith("t:"):
        return getattr(torch, name[2:])
    return np.dtype(name)


def _format_of(value):
    try:
        from lmcache.v1.memory_management import MemoryFormat
        return MemoryFormat(value)
    except (ImportError, ValueError):
        return value


def encode_header(obj, length):
    shape = list(obj.get_shape())
    if len(shape) > 4:
        raise ValueError(f"moonkv connector: shapes of at most 4 dimensions, not {shape}")
    fmt = obj.get_memory_format()
    return HEADER.pack(MAGIC, length, len(shape), int(getattr(fmt, "value", fmt)),
                       _dtype_name(obj.get_dtype()).encode(), *(shape + [0] * (4 - len(shape))))


def decode_header(raw):
    """(length, shape, dtype, format) or None if raw is not a header."""
    magic, length, ndim, fmt, dtype, *shape = HEADER.unpack(bytes(raw[:HEADER.size]))
    if magic != MAGIC or ndim > 4:
        return None
    return length, tuple(shape[:ndim]), _dtype_of(dtype.rstrip(b"\0").decode()), _format_of(fmt)


def _key(prefix, key):
    return prefix + (key.to_string() if hasattr(key, "to_string") else str(key))


class MoonkvConnector(RemoteConnector):
    """LMCache's RemoteConnector over a moonkv client."""

    def __init__(self, url, loop=None, local_cpu_backend=None, config=None):
        u = urlparse(url)
        if u.scheme != "moonkv" or not u.hostname:
            raise ValueError(f"moonkv connector: {url!r} is not moonkv://host:port")
        query = {k: v[-1] for k, v in parse_qs(u.query).items()}
        self.master = f"{u.hostname}:{u.port or 7380}"
        self.prefix = query.get("key_prefix", "")
        self.pin_ms = int(query.get("pin_ms", 30000))
        if not 1 <= self.pin_ms <= 600000:
            raise ValueError(f"moonkv connector: pin_ms={self.pin_ms} is not 1 to 600000")
        self.pins = {}                 # lookup id -> moonkv pin id
        self.pins_lock = threading.Lock()
        self.loop = loop
        self.backend = local_cpu_backend
        self.opts = settings.load({"master": self.master})
        self.store = moonkv.MoonkvStore()
        self.store.setup(**self.opts)
        self.zero_copy = self._register_arena()
        self.headers = np.zeros(0, dtype=np.uint8)   # registered: a header slot per object of a batch

    def _register_arena(self):
        alloc = getattr(self.backend, "memory_allocator", None)
        buf = getattr(alloc, "buffer", None)
        if buf is None:
            buf = getattr(getattr(alloc, "pin_allocator", None), "buffer", None)
        if buf is None:
            return False
        self.store.register_buffer(*_span(buf))
        return True

    def _header_slots(self, n):
        if len(self.headers) < n * HEADER.size:
            if len(self.headers):
                self.store.unregister_buffer(self.headers)
            self.headers = np.zeros(max(n, 64) * HEADER.size, dtype=np.uint8)
            self.store.register_buffer(self.headers)
        return [self.headers[i * HEADER.size:(i + 1) * HEADER.size] for i in range(n)]

    # ---- the blocking calls ----

    def exists_sync(self, key):
        return bool(self.store.is_exist(_key(self.prefix, key)))

    def contains_prefix(self, keys, lookup_id=None, pin=False):
        ks = [_key(self.prefix, k) for k in keys]
        if not pin or lookup_id is None:
            return self.store.prefix_exists(ks)
        with self.pins_lock:
            had = self.pins.get(lookup_id, 0)
        n, pid = self.store.prefix_exists(ks, pin_ms=self.pin_ms, pin=had)
        if n:
            with self.pins_lock:
                self.pins[lookup_id] = pid
        return n

    def unlock_sync(self, lookup_id):
        """Release the pin of lookup_id: how many keys it held."""
        with self.pins_lock:
            pid = self.pins.pop(lookup_id, 0)
        return self.store.unpin(pid) if pid else 0

    def put_sync(self, keys, objs):
        ks = [_key(self.prefix, k) for k in keys]
        if not self.zero_copy:
            for k, o in zip(ks, objs):
                data = memoryview(o.byte_array).cast("B")
                try:
                    self.store.put(k, encode_header(o, len(data)) + bytes(data))
                except moonkv.ExistsError:
                    pass
            return
        slots = self._header_slots(len(ks))
        pieces = []
        for slot, o in zip(slots, objs):
            data = memoryview(o.byte_array).cast("B")
            slot[:] = np.frombuffer(encode_header(o, len(data)), dtype=np.uint8)
            pieces.append([slot, data])
        rs = self.store.batch_put_from_multi_buffers(ks, pieces)
        bad = [(k, r) for k, r in zip(ks, rs) if r not in (0, moonkv.EEXISTS)]
        if bad:
            raise moonkv.MoonkvError(f"moonkv put of {len(bad)} chunks failed: {bad[0][0]} "
                                     f"{moonkv.error_word(bad[0][1])}")

    def get_sync(self, keys) -> List[Optional[object]]:
        ks = [_key(self.prefix, k) for k in keys]
        if not self.zero_copy:
            return [self._get_copied(k) for k in ks]
        slots = self._header_slots(len(ks))
        out, want = [None] * len(ks), []
        for i, (k, slot) in enumerate(zip(ks, slots)):
            try:
                if self.store.get_range(k, 0, slot) != HEADER.size:
                    continue
            except moonkv.NotFoundError:
                continue
            h = decode_header(slot)
            obj = h and self.backend.allocate(h[1], h[2], h[3])
            if obj is not None:
                out[i] = obj
                want.append(i)
        if want:
            rs = self.store.batch_get_into_multi_buffers(
                [ks[i] for i in want], [[slots[i], memoryview(out[i].byte_array).cast("B")] for i in want])
            for i, r in zip(want, rs):
                if r != HEADER.size + len(memoryview(out[i].byte_array).cast("B")):
                    out[i].ref_count_down()
                    out[i] = None
        return out

    def _get_copied(self, k):
        try:
            raw = self.store.get(k)
        except moonkv.NotFoundError:
            return None
        h = decode_header(raw)
        if h is None or h[0] != len(raw) - HEADER.size:
            return None
        obj = self.backend.allocate(h[1], h[2], h[3])
        if obj is not None:
            memoryview(obj.byte_array).cast("B")[:] = raw[HEADER.size:]
        return obj

    def list_sync(self):
        import redis
        r = redis.Redis(host=self.master.rsplit(":", 1)[0], port=int(self.master.rsplit(":", 1)[1]),
                        password=self.opts.get("password"))
        keys, cursor = [], 0
        while True:
            cursor, page = r.execute_command("MOON.SCAN", cursor, "COUNT", 1000, "MATCH",
                                             self.prefix.replace("*", "\\*") + "*")
            keys += [k.decode()[len(self.prefix):] for k in page]
            if int(cursor) == 0:
                return keys

    # ---- LMCache's calls ----

    async def exists(self, key):
        return await asyncio.to_thread(self.exists_sync, key)

    async def get(self, key):
        return (await asyncio.to_thread(self.get_sync, [key]))[0]

    async def put(self, key, memory_obj):
        await asyncio.to_thread(self.put_sync, [key], [memory_obj])

    async def list(self):
        return await asyncio.to_thread(self.list_sync)

    async def close(self):
        self.store.close()

    def support_batched_get(self):
        return True

    async def batched_get(self, keys):
        return await asyncio.to_thread(self.get_sync, list(keys))

    def support_batched_put(self):
        return True

    async def batched_put(self, keys, memory_objs):
        await asyncio.to_thread(self.put_sync, list(keys), list(memory_objs))

    def support_batched_async_contains(self):
        return True

    async def batched_async_contains(self, lookup_id, keys, pin=False):
        return await asyncio.to_thread(self.contains_prefix, list(keys), lookup_id, pin)

    async def unlock(self, lookup_id):
        return await asyncio.to_thread(self.unlock_sync, lookup_id)

    def support_ping(self):
        return True

    async def ping(self):
        return 0 if await asyncio.to_thread(self.store.prefix_exists, []) == 0 else -1

    def remove_sync(self, key):
        try:
            self.store.remove(_key(self.prefix, key))
            return True
        except (moonkv.NotFoundError, moonkv.TryAgainError):   # gone, or pinned by a lookup
            return False


class MoonkvConnectorAdapter(ConnectorAdapter):
    """For LMCache's connector registry: "moonkv://" URLs."""

    def __init__(self):
        if ConnectorAdapter is not object:
            super().__init__(SCHEMA)
        self.schema = SCHEMA

    def can_parse(self, url):
        return url.startswith(SCHEMA)

    def create_connector(self, context):
        return MoonkvConnector(context.url, context.loop, context.local_cpu_backend, context.config)
