"""A moonkv-backed stand-in for Mooncake's Python package (mooncake.store
only). Built by `make python` into build/<b>/mooncake-shim and installed
only by `make install-mooncake-shim`, since it shadows a real Mooncake."""
