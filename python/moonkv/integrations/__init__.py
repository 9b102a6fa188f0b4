"""moonkv.integrations: thin adapters that put moonkv under inference engines.

    settings         moonkv's own settings from MOONKV_* and MOONKV_CONFIG
    sglang           an SGLang HiCache storage backend (--hicache-storage-backend dynamic)
    lmcache          an LMCache remote connector (moonkv://host:port)

vLLM's Mooncake store connector runs unchanged on the Mooncake-compatible
shim (build/rel/mooncake-shim, `from mooncake.store import ...`).
See docs/ENGINES.md.
"""
