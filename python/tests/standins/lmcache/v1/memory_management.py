"""Stand-in of LMCache's memory objects and CPU allocator: what a remote
connector touches (the bytes, shape, dtype, format, reference count)."""
import enum

import numpy as np

try:
    import torch
except ImportError:
    torch = None


class MemoryFormat(enum.Enum):
    UNDEFINED = 0
    KV_2LTD = 1
    KV_T2D = 2
    KV_MLA_FMT = 5


class MemoryObj:
    def __init__(self, view, shape, dtype, fmt, tensor=None):
        self.byte_array = view            # a writable memoryview of its bytes
        self.tensor = tensor
        self._shape, self._dtype, self._fmt = tuple(shape), dtype, fmt
        self.refs = 1

    def get_shape(self):
        return self._shape

    def get_dtype(self):
        return self._dtype

    def get_memory_format(self):
        return self._fmt

    def ref_count_up(self):
        self.refs += 1

    def ref_count_down(self):
        self.refs -= 1


class ArenaAllocator:
    """One contiguous arena (numpy, or a torch tensor) cut in order."""

    def __init__(self, size, use_torch=False):
        arena = np.zeros(size, dtype=np.uint8)
        self.buffer = torch.from_numpy(arena) if use_torch else arena
        self._np, self._at = arena, 0

    def allocate(self, nbytes):
        if self._at + nbytes > len(self._np):
            return None
        view = memoryview(self._np[self._at:self._at + nbytes])
        self._at += nbytes
        return view


class LocalCPUBackend:
    def __init__(self, size=64 << 20, use_torch=False, expose_arena=True):
        alloc = ArenaAllocator(size, use_torch)
        self._alloc = alloc
        if expose_arena:
            self.memory_allocator = alloc

    def allocate(self, shape, dtype, fmt=MemoryFormat.KV_2LTD):
        itemsize = np.dtype(dtype).itemsize if not (torch and isinstance(dtype, torch.dtype)) else \
            torch.tensor([], dtype=dtype).element_size()
        n = itemsize
        for d in shape:
            n *= d
        view = self._alloc.allocate(n)
        return None if view is None else MemoryObj(view, shape, dtype, fmt)
