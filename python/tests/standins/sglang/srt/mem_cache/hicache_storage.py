"""Stand-in of SGLang's HiCache storage interface (see ../../../README.md)."""
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, List, Optional


@dataclass
class HiCacheStorageConfig:
    tp_rank: int
    tp_size: int
    pp_rank: int
    pp_size: int
    is_mla_model: bool
    is_page_first_layout: bool
    model_name: Optional[str]
    extra_config: Optional[dict] = None


@dataclass
class HiCacheStorageExtraInfo:
    prefix_keys: Optional[List[str]] = None
    extra_info: Optional[dict] = None


class HiCacheStorage(ABC):
    def register_mem_pool_host(self, mem_pool_host):
        self.mem_pool_host = mem_pool_host

    def batch_get_v1(self, keys: List[str], host_indices, extra_info=None) -> List[bool]:
        """A bool per key: its page was read into the host pool."""

    def batch_set_v1(self, keys: List[str], host_indices, extra_info=None) -> List[bool]:
        """A bool per key: its page was stored."""

    @abstractmethod
    def get(self, key: str, target_location: Optional[Any] = None, target_sizes: Optional[Any] = None):
        """The value, or None if the key does not exist."""

    @abstractmethod
    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None):
        """A value or None per key."""

    @abstractmethod
    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> bool:
        """True if stored."""

    @abstractmethod
    def batch_set(self, keys: List[str], values: Optional[Any] = None, target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool:
        """True if every key was stored."""

    @abstractmethod
    def exists(self, key: str) -> bool:
        """True if the key is stored."""

    def batch_exists(self, keys: List[str], extra_info=None) -> int:
        """The number of keys stored, counted from the first up to the first miss."""
        for i, k in enumerate(keys):
            if not self.exists(k):
                return i
        return len(keys)

    def clear(self) -> None:
        pass

    def get_stats(self):
        return None
