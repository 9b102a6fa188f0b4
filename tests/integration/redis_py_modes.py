"""redis-py's own cluster and sentinel clients against one moonkv server.

Usage: redis_py_modes.py PORT LABEL [MASTER_NAME]
Prints "ok - LABEL: ..." / "not ok - LABEL: ..." per check (counted by
tests/run.sh) and exits 1 if any check failed. Run by test_redis_compat.
"""
import os
import sys

import redis
from redis.cluster import RedisCluster
from redis.sentinel import MasterNotFoundError, Sentinel

PORT = int(sys.argv[1])
LABEL = sys.argv[2]
NAME = sys.argv[3] if len(sys.argv) > 3 else "mymaster"
failed = 0


def check(name, cond, detail=""):
    global failed
    if cond:
        print(f"ok - {LABEL}: {name}")
    else:
        failed += 1
        print(f"not ok - {LABEL}: {name} {detail}")
    sys.stdout.flush()


def guarded(name, fn):
    try:
        fn()
    except Exception as e:  # a client error is a failed check, not a crash
        check(name, False, repr(e))


def cluster_mode():
    rc = RedisCluster(host="127.0.0.1", port=PORT, socket_timeout=10)
    nodes = rc.get_nodes()
    check("RedisCluster finds the shard", len(nodes) >= 1, str(nodes))
    big = os.urandom(1 << 20)
    # Keys of many slots: every one is served by the same shard.
    keys = [f"{LABEL}:rc:{i}" for i in range(32)]
    slots = {rc.keyslot(k) for k in keys}
    check("keys spread over slots", len(slots) > 16, str(len(slots)))
    check("SET of 1 MiB through RedisCluster", rc.set(keys[0], big) is True)
    check("GET is byte-exact", rc.get(keys[0]) == big)
    for i, k in enumerate(keys[1:], 1):
        rc.set(k, b"v%d" % i)
    got = rc.mget_nonatomic(keys[1:] + [f"{LABEL}:rc:missing"])
    check("MGET across slots", got == [b"v%d" % i for i in range(1, 32)] + [None])
    p = rc.pipeline()
    for i in range(20):
        p.set(f"{LABEL}:rcp:{i}", i)
    for i in range(20):
        p.get(f"{LABEL}:rcp:{i}")
    out = p.execute()
    check("cluster pipeline", out[:20] == [True] * 20 and out[20:] == [str(i).encode() for i in range(20)])
    check("EXISTS and DEL", rc.exists(keys[1]) == 1 and rc.delete(keys[1]) == 1 and rc.get(keys[1]) is None)
    rc.close()


def sentinel_mode():
    s = Sentinel([("127.0.0.1", PORT)], socket_timeout=10)
    host, port = s.discover_master(NAME)
    check("Sentinel names a live master", (host, port) == ("127.0.0.1", PORT), f"{host}:{port}")
    m = s.master_for(NAME, socket_timeout=10)
    val = os.urandom(300 * 1024)
    check("SET through the sentinel's master", m.set(f"{LABEL}:sn:a", val) is True)
    check("GET through the sentinel's master is byte-exact", m.get(f"{LABEL}:sn:a") == val)
    try:
        s.discover_master("no-such-master")
        check("an unknown master name is not found", False)
    except MasterNotFoundError:
        check("an unknown master name is not found", True)


guarded("cluster mode", cluster_mode)
guarded("sentinel mode", sentinel_mode)
sys.exit(1 if failed else 0)
