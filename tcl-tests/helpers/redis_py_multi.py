"""redis-py's default (transactional) pipeline against moonkv: MULTI, the
queued commands, EXEC. Usage: redis_py_multi.py PORT PREFIX. Prints TAP
lines ("ok - ..." / "not ok - ..."); exit 1 on any failure."""
import sys
import redis

port, prefix = int(sys.argv[1]), sys.argv[2]
r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
failed = 0


def check(name, cond, detail=""):
    global failed
    failed += not cond
    print("%s - redis-py multi: %s%s" % ("ok" if cond else "not ok", name,
                                          "" if cond else ": " + detail))


# A batch as SGLang HiCache's Valkey backend sends it: many SETs, one EXEC.
vals = [(("%s:b%d" % (prefix, i)), bytes([i % 256]) * (100 + i * 997)) for i in range(64)]
p = r.pipeline()
for k, v in vals:
    p.set(k, v)
out = p.execute()
check("64 SETs in one EXEC answer True each", out == [True] * 64, repr(out[:4]))

p = r.pipeline()
for k, _ in vals:
    p.get(k)
p.get(prefix + ":missing")
out = p.execute()
check("GETs in one EXEC: byte-exact, in order, null for a missing key",
      out == [v for _, v in vals] + [None], "lengths %r" % [len(x or b"") for x in out[:4]])

# Mixed commands keep their order and their own reply types.
k = prefix + ":mix"
p = r.pipeline()
p.set(k, b"one").get(k).exists(k).strlen(k).set(k, b"one").delete(k).exists(k)
out = p.execute()
check("mixed SET/GET/EXISTS/STRLEN/DEL in order",
      out == [True, b"one", 1, 3, True, 1, 0], repr(out))

# A conflicting SET inside EXEC is an error for that command only.
p = r.pipeline()
p.set(vals[0][0], b"other bytes").get(vals[0][0])
out = p.execute(raise_on_error=False)
check("write-once conflict is that command's error, the rest runs",
      isinstance(out[0], redis.exceptions.ResponseError) and "EXISTS" in str(out[0])
      and out[1] == vals[0][1], repr(out))

# An error while queuing discards the whole transaction: nothing stored.
k = prefix + ":aborted"
p = r.pipeline()
p.set(k, b"x")
p.execute_command("NOSUCHCOMMAND", "a")
try:
    p.execute()
    check("EXECABORT after a queuing error", False, "no exception")
except redis.exceptions.ResponseError as e:
    check("EXECABORT after a queuing error", "EXECABORT" in str(e) or "unknown command" in str(e),
          str(e))
check("an aborted transaction stored nothing", r.exists(k) == 0)

sys.exit(1 if failed else 0)
