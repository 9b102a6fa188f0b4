"""mooncake.store on moonkv: MooncakeDistributedStore and ReplicateConfig
with Mooncake's method names, signatures and int return codes, over the
moonkv binding (status-code mode: no call raises a moonkv error).

What each method does here, and what is not supported: docs/ENGINES.md.
moonkv's own settings (cluster secret, transport, ...) come from MOONKV_*
variables or the file MOONKV_CONFIG names (moonkv.integrations.settings).
"""
import logging

import moonkv
from moonkv.integrations import settings

__all__ = ["MooncakeDistributedStore", "ReplicateConfig", "ErrorCode"]

log = logging.getLogger("mooncake.store")


class ErrorCode:
    """The Mooncake codes this store answers with."""
    OK = 0
    INTERNAL_ERROR = -1
    BUFFER_OVERFLOW = -10
    NO_AVAILABLE_HANDLE = -200       # no space
    INVALID_PARAMS = -600
    INVALID_READ = -701
    OBJECT_NOT_FOUND = -704
    OBJECT_ALREADY_EXISTS = -705
    TRANSFER_FAIL = -800
    RPC_FAIL = -900
    UNAVAILABLE_IN_CURRENT_STATUS = -1010


# moonkv status -> Mooncake status
_CODES = {
    moonkv.OK: ErrorCode.OK,
    moonkv.ENOTFOUND: ErrorCode.OBJECT_NOT_FOUND,
    moonkv.EEXISTS: ErrorCode.OBJECT_ALREADY_EXISTS,
    moonkv.ENOSPACE: ErrorCode.NO_AVAILABLE_HANDLE,
    moonkv.ENOREPLICAS: ErrorCode.NO_AVAILABLE_HANDLE,
    moonkv.EINVAL: ErrorCode.INVALID_PARAMS,
    moonkv.ENOTREG: ErrorCode.INVALID_PARAMS,
    moonkv.ETOOSMALL: ErrorCode.BUFFER_OVERFLOW,
    moonkv.ECONN: ErrorCode.RPC_FAIL,
    moonkv.EAUTH: ErrorCode.RPC_FAIL,
    moonkv.EIO: ErrorCode.TRANSFER_FAIL,
    moonkv.ECORRUPT: ErrorCode.INVALID_READ,
    moonkv.ETIMEDOUT: ErrorCode.TRANSFER_FAIL,
    moonkv.EPROTO: ErrorCode.RPC_FAIL,
    moonkv.ENOMEM: ErrorCode.INTERNAL_ERROR,
    moonkv.ETRYAGAIN: ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS,
}

# Methods of Mooncake's store moonkv does not offer, and why.
_UNSUPPORTED = {
    "upsert": "objects are write-once", "upsert_from": "objects are write-once",
    "batch_upsert_from": "objects are write-once", "upsert_parts": "objects are write-once",
    "upsert_batch": "objects are write-once",
    "remove_by_regex": "no key patterns on the master (use remove or remove_all)",
    "get_buffer": "no store-owned buffers (use get_into)",
    "batch_get_buffer": "no store-owned buffers (use batch_get_into)",
    "alloc_from_mem_pool": "no client memory pool",
    "setup_dummy": "no dummy client", "init_all": "memory comes from moonkv nodes",
    "mount_segment": "memory comes from moonkv nodes",
    "unmount_segment": "memory comes from moonkv nodes",
    "allocate_and_mount_segment": "memory comes from moonkv nodes",
    "unmount_and_free_segment": "memory comes from moonkv nodes",
    "get_into_ranges": "use moonkv's get_range", "get_replica_desc": "no replica descriptors",
    "batch_get_replica_desc": "no replica descriptors",
    "create_copy_task": "moonkv re-replicates by itself", "create_move_task": "moonkv re-replicates by itself",
    "query_task": "moonkv re-replicates by itself",
    "put_from_with_metadata": "no per-object metadata (put the metadata as a piece of its own)",
    "batch_put_from_multi_buffer_ranges": "use batch_put_from_multi_buffers",
    "batch_get_into_multi_buffer_ranges": "use batch_get_into_multi_buffers or moonkv's get_range",
    "batch_put_session_start": "no put sessions (a batch is one call)",
    "batch_put_session_end": "no put sessions (a batch is one call)",
    "batch_put_session_revoke": "no put sessions (a batch is one call)",
    "batch_get_session_start": "no get sessions (a batch is one call)",
    "batch_get_session_end": "no get sessions (a batch is one call)",
    "batch_replica_clear": "moonkv keeps its replica counts by itself",
    "bind_to_numa_node": "no client memory to place",
    "get_offload_rpc_read_count": "no offload RPCs",
    "unmount_local_disk_segment": "memory comes from moonkv nodes",
    "get_alloc_func_addr": "no client memory pool", "get_free_func_addr": "no client memory pool",
    "load_tensor_from_safetensor": "no tensor calls (move the tensor's bytes with put_from / get_into)",
    "save_tensor_to_safetensor": "no tensor calls (move the tensor's bytes with put_from / get_into)",
}
# Mooncake's tensor calls (torch serialisation, TP and parallel splits,
# publishing): not offered; an engine moves a tensor's bytes with
# put_from / get_into.
_TENSOR_CALLS = (
    "_deserialize_tensor", "_serialize_tensor", "_tensor_metadata_size", "batch_get_tensor",
    "batch_get_tensor_into", "batch_get_tensor_into_cuda", "batch_get_tensor_with_parallelism",
    "batch_get_tensor_with_parallelism_into", "batch_get_tensor_with_tp", "batch_get_tensor_with_tp_into",
    "batch_pub_tensor", "batch_pub_tensor_with_tp", "batch_put_tensor", "batch_put_tensor_from",
    "batch_put_tensor_with_parallelism", "batch_put_tensor_with_parallelism_from",
    "batch_put_tensor_with_tp", "batch_put_tensor_with_tp_from", "batch_upsert_pub_tensor",
    "batch_upsert_tensor", "batch_upsert_tensor_from", "batch_upsert_tensor_with_parallelism",
    "batch_upsert_tensor_with_parallelism_from", "get_tensor", "get_tensor_into", "get_tensor_into_cuda",
    "get_tensor_with_parallelism", "get_tensor_with_parallelism_into", "get_tensor_with_tp",
    "get_tensor_with_tp_into", "pub_tensor", "pub_tensor_with_tp", "put_tensor", "put_tensor_from",
    "put_tensor_with_parallelism", "put_tensor_with_parallelism_from", "put_tensor_with_tp",
    "put_tensor_with_tp_from", "upsert_pub_tensor", "upsert_tensor", "upsert_tensor_from",
    "upsert_tensor_with_parallelism", "upsert_tensor_with_parallelism_from",
)
_UNSUPPORTED.update({n: "no tensor calls (move the tensor's bytes with put_from / get_into)" for n in _TENSOR_CALLS})


def _code(rc):
    """A moonkv status as Mooncake's (values >= 0 pass: sizes, counts)."""
    return rc if rc >= 0 else _CODES.get(rc, ErrorCode.INTERNAL_ERROR)


def _put_code(rc):
    """A put's status: an existing key is success, as Mooncake's client
    reports it (keys are content hashes: the same bytes are there)."""
    return ErrorCode.OK if rc == moonkv.EEXISTS else _code(rc)


def _replicas(config):
    return int(getattr(config, "replica_num", 0) or 0) if config is not None else 0


class ReplicateConfig:
    """Mooncake's replication settings: replica_num is used; the pins and
    the preferred segment are accepted and ignored."""

    def __init__(self):
        self.replica_num = 1
        self.with_soft_pin = False
        self.with_hard_pin = False
        self.preferred_segment = ""
        self.prefer_alloc_in_same_node = False

    def __repr__(self):
        return f"ReplicateConfig(replica_num={self.replica_num})"


class MooncakeDistributedStore:
    """Mooncake's store API over a moonkv client."""

    def __init__(self):
        self._s = moonkv.MoonkvStore(status_codes=True)
        self._up = False

    def setup(self, local_hostname="", metadata_server="", global_segment_size=16777216,
              local_buffer_size=1073741824, protocol="tcp", rdma_devices="",
              master_server_addr="127.0.0.1:7380", *args, **kwargs):
        """Connect to the moonkv master at master_server_addr (MOONKV_MASTER
        wins). local_hostname, metadata_server, global_segment_size,
        local_buffer_size and rdma_devices are accepted and ignored: memory
        comes from moonkv's nodes. protocol "rdma" asks for RDMA; "tcp" lets
        moonkv pick shared memory for same-host nodes and TCP otherwise
        (MOONKV_TRANSPORT=tcp forces TCP)."""
        transport = "rdma" if str(protocol).lower() == "rdma" else "auto"
        try:
            opts = settings.load({"master": master_server_addr or None, "transport": transport})
        except (OSError, ValueError) as e:
            log.error("moonkv settings: %s", e)
            return ErrorCode.INVALID_PARAMS
        rc = self._s.setup(**opts)
        self._up = rc == 0
        if rc != 0:
            log.error("moonkv setup: %s (%s)", moonkv.error_word(rc), moonkv.strerror(rc))
        return _code(rc)

    def close(self):
        self._up = False
        return _code(self._s.close())

    # ---- buffers ----

    def register_buffer(self, buffer_ptr, size):
        return _code(self._s.register_buffer(buffer_ptr, size))

    def unregister_buffer(self, buffer_ptr):
        return _code(self._s.unregister_buffer(buffer_ptr))

    # ---- single objects ----

    def put(self, key, value, config=None):
        return _put_code(self._s.put(key, value, replicas=_replicas(config)))

    def get(self, key):
        return self._s.get(key)   # b"" on any failure, as Mooncake's

    def put_from(self, key, buffer_ptr, size, config=None):
        return _put_code(self._s.put_from(key, buffer_ptr, size, replicas=_replicas(config)))

    def get_into(self, key, buffer_ptr, size):
        return _code(self._s.get_into(key, buffer_ptr, size))

    def put_parts(self, key, *parts, config=None):
        return self.put(key, b"".join(bytes(p) for p in parts), config)

    def put_batch(self, keys, values, config=None):
        codes = [self.put(k, v, config) for k, v in zip(keys, values)]
        return next((c for c in codes if c != 0), 0)

    def get_batch(self, keys):
        return [self._s.get(k) for k in keys]

    # ---- batches ----

    def batch_put_from(self, keys, buffer_ptrs, sizes, config=None):
        return [_put_code(r) for r in self._s.batch_put_from(keys, buffer_ptrs, sizes, replicas=_replicas(config))]

    def batch_get_into(self, keys, buffer_ptrs, sizes):
        return [_code(r) for r in self._s.batch_get_into(keys, buffer_ptrs, sizes)]

    def batch_put_from_multi_buffers(self, keys, all_buffer_ptrs, all_sizes, config=None):
        """Each key is the concatenation of its (ptr, size) pieces, moved
        piece by piece from registered memory: no staging copy."""
        rs = self._s.batch_put_from_multi_buffers(keys, all_buffer_ptrs, all_sizes, replicas=_replicas(config))
        return [_put_code(r) for r in rs]

    def batch_get_into_multi_buffers(self, keys, all_buffer_ptrs, all_sizes, *args, **kwargs):
        """Each object is read across its pieces in order; per key the bytes
        read or a negative code. Extra arguments (prefer_same_node) are
        accepted and ignored."""
        return [_code(r) for r in self._s.batch_get_into_multi_buffers(keys, all_buffer_ptrs, all_sizes)]

    # ---- keys ----

    def is_exist(self, key):
        rc = self._s.is_exist(key)
        return rc if rc in (0, 1) else -1

    def batch_is_exist(self, keys):
        return [r if r in (0, 1) else -1 for r in self._s.batch_is_exist(keys)]

    def batch_exists_prefix(self, keys):
        """moonkv's own: how many keys from the first on exist, one master
        round trip (not in Mooncake's API)."""
        return _code(self._s.prefix_exists(keys))

    def get_size(self, key):
        return _code(self._s.get_size(key))

    def remove(self, key, force=False):
        return _code(self._s.remove(key))

    def batch_remove(self, keys, force=False):
        return [self.remove(k) for k in keys]

    def remove_all(self, force=False):
        rc = self._s.remove_all()
        return rc if rc >= 0 else -1

    def get_hostname(self):
        return ""

    def health_check(self):
        """0 when the master answers (one empty MOON.PREFIX), else a code."""
        return _code(min(self._s.prefix_exists([]), 0))

    def __getattr__(self, name):
        why = _UNSUPPORTED.get(name)
        if why is None:
            raise AttributeError(f"'MooncakeDistributedStore' has no attribute '{name}'")

        def unsupported(*args, **kwargs):
            log.warning("mooncake.store on moonkv: %s is not supported (%s)", name, why)
            return ErrorCode.INVALID_PARAMS
        return unsupported
