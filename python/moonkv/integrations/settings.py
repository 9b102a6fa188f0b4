"""moonkv's client settings where an engine's own configuration has no place
for them: a JSON file named by MOONKV_CONFIG, then MOONKV_* variables (which
win), then what the caller passes as defaults.

    MOONKV_MASTER          host:port of the master
    MOONKV_CLUSTER_SECRET  the data plane's secret
    MOONKV_PASSWORD        the master's requirepass
    MOONKV_TRANSPORT       auto | tcp | shm | rdma
    MOONKV_REPLICAS        replicas per put
    MOONKV_TIMEOUT_MS      per call
    MOONKV_DATA_ADDRS      local addresses to send from, comma separated

The file's keys are the same names in lower case without the prefix
("master", "cluster_secret", ...).
"""
import json
import os

# setup() keyword -> (variable, type)
FIELDS = {
    "master": ("MOONKV_MASTER", str),
    "cluster_secret": ("MOONKV_CLUSTER_SECRET", str),
    "password": ("MOONKV_PASSWORD", str),
    "transport": ("MOONKV_TRANSPORT", str),
    "replicas": ("MOONKV_REPLICAS", int),
    "timeout_ms": ("MOONKV_TIMEOUT_MS", int),
    "data_addrs": ("MOONKV_DATA_ADDRS", str),
}


def load(defaults=None, environ=None):
    """The keyword arguments of MoonkvStore.setup(): defaults, then the
    MOONKV_CONFIG file, then MOONKV_* variables. Unknown file keys are an
    error (a typo would otherwise pass silently)."""
    env = os.environ if environ is None else environ
    out = {k: v for k, v in (defaults or {}).items() if v is not None}
    path = env.get("MOONKV_CONFIG")
    if path:
        with open(path, encoding="utf-8") as f:
            conf = json.load(f)
        unknown = set(conf) - set(FIELDS)
        if unknown:
            raise ValueError(f"{path}: unknown keys {sorted(unknown)} (known: {sorted(FIELDS)})")
        out.update({k: FIELDS[k][1](v) for k, v in conf.items() if v is not None})
    for key, (var, kind) in FIELDS.items():
        if env.get(var, "") != "":
            out[key] = kind(env[var])
    return out
