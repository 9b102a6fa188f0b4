"""Stand-in of an SGLang host KV pool: what a storage backend touches."""
import numpy as np

try:
    import torch
except ImportError:   # numpy only
    torch = None


class HostKVCache:
    """size tokens of layer_num layers, token_bytes per token and layer,
    pages of page_size tokens. MHA keeps K and V apart (kv 2), MLA one
    latent (kv 1). layout "page_first": a page's bytes of all layers are
    contiguous (a piece per page and K/V); "layer_first": one piece per
    layer. kv_buffer is a numpy array or, with use_torch, a CPU tensor."""

    def __init__(self, size, page_size, layer_num, token_bytes, mla=False, layout="page_first",
                 use_torch=False, seed=0):
        self.size, self.page_size, self.layer_num, self.token_bytes = size, page_size, layer_num, token_bytes
        self.kv = 1 if mla else 2
        self.layout = layout
        shape = (self.kv, size, layer_num, token_bytes) if layout == "page_first" else \
            (self.kv, layer_num, size, token_bytes)
        data = np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)
        self.kv_buffer = torch.from_numpy(data) if use_torch else data
        self._np = self.kv_buffer.numpy() if use_torch else self.kv_buffer

    def get_page_buffer_meta(self, indices):
        """(ptrs, sizes): per page (one entry of indices per token), K's
        pieces then V's (MLA: the latent's)."""
        # as SGLang's pools do it: the indices as a list, the base address
        # once (kv_buffer.data_ptr()), the rest arithmetic
        idx = indices.tolist() if hasattr(indices, "tolist") else [int(i) for i in indices]
        base, st = self._np.ctypes.data, self._np.strides
        ptrs, sizes = [], []
        for p in range(0, len(idx), self.page_size):
            tok = idx[p]
            for kv in range(self.kv):
                if self.layout == "page_first":
                    ptrs.append(base + kv * st[0] + tok * st[1])
                    sizes.append(self.page_size * self.layer_num * self.token_bytes)
                else:
                    for layer in range(self.layer_num):
                        ptrs.append(base + kv * st[0] + layer * st[1] + tok * st[2])
                        sizes.append(self.page_size * self.token_bytes)
        return ptrs, sizes

    def page_bytes(self, tok):
        """A page's bytes (for checks), K then V, layer by layer."""
        if self.layout == "page_first":
            return self._np[:, tok:tok + self.page_size].tobytes()
        return self._np[:, :, tok:tok + self.page_size].tobytes()
