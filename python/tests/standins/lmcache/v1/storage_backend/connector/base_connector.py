"""Stand-in of LMCache's RemoteConnector interface (see
python/tests/standins/README.md): the calls LMCache's remote backend makes."""
import abc
from typing import List, Optional


class RemoteConnector(metaclass=abc.ABCMeta):
    @abc.abstractmethod
    async def exists(self, key) -> bool:
        """Whether key is stored."""

    @abc.abstractmethod
    def exists_sync(self, key) -> bool:
        """exists, blocking."""

    @abc.abstractmethod
    async def get(self, key) -> Optional[object]:
        """The MemoryObj of key (allocated from the local CPU backend), or None."""

    @abc.abstractmethod
    async def put(self, key, memory_obj) -> None:
        """Store memory_obj under key."""

    @abc.abstractmethod
    async def list(self) -> List[str]:
        """The stored keys."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release the connection."""

    def support_ping(self) -> bool:
        return False

    async def ping(self) -> int:
        raise NotImplementedError

    def support_batched_get(self) -> bool:
        return False

    async def batched_get(self, keys) -> List[Optional[object]]:
        raise NotImplementedError

    def support_batched_put(self) -> bool:
        return False

    async def batched_put(self, keys, memory_objs) -> None:
        raise NotImplementedError

    def support_batched_async_contains(self) -> bool:
        return False

    async def batched_async_contains(self, lookup_id: str, keys, pin: bool = False) -> int:
        """How many keys, from the first on, are stored (pin: hold them until read)."""
        raise NotImplementedError

    def remove_sync(self, key) -> bool:
        raise NotImplementedError
