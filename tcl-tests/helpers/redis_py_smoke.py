"""python3-redis smoke test for moonkv: prints one line per check."""
import sys
import redis

r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), socket_timeout=10)
print("set", r.set("py:a", b"1\r\n\x00x"))
print("get", r.get("py:a") == b"1\r\n\x00x")
r.set("py:b", "2")
print("mget", r.mget("py:a", "py:b", "py:missing") == [b"1\r\n\x00x", b"2", None])
try:
    r.set("py:a", "other")
    print("write-once no-error")
except redis.exceptions.ResponseError as e:
    print("write-once", str(e).startswith("key already exists") or "EXISTS" in str(e))
print("unchanged", r.get("py:a") == b"1\r\n\x00x")
print("nx", r.set("py:a", "x", nx=True))
p = r.pipeline(transaction=False)
for i in range(100):
    p.set("py:p%d" % i, i)
for i in range(100):
    p.get("py:p%d" % i)
out = p.execute()
print("pipeline", out[:100] == [True] * 100 and out[100:] == [str(i).encode() for i in range(100)])
print("delete", r.delete("py:a", "py:b", "py:missing"))
print("exists", r.exists("py:a"))
