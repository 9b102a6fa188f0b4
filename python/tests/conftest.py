"""Fixtures of the moonkv Python tests: a real master and two memory nodes
(build/rel/moonkv-server, or $MOONKV_SERVER) on five ports of a block of
tests/support/ports.py (the C tests' h_free_ports blocks and locks), started
once per session and killed on every exit path (also when pytest itself is
killed: the children get SIGKILL when their parent dies)."""
import ctypes
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
import redis

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from ports import free_ports   # noqa: E402  (after the path it is found on)

SERVER = os.environ.get("MOONKV_SERVER") or os.path.join(ROOT, "build", "rel", "moonkv-server")
PORT0 = free_ports(13)
MASTER_PORT = PORT0
NODES = [(PORT0 + 1, PORT0 + 11), (PORT0 + 2, PORT0 + 12)]   # RESP port, data-plane port
SECRET = "pytest-secret"
MASTER = f"127.0.0.1:{MASTER_PORT}"


def _die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG


def _spawn(*args):
    # The servers keep their own sanitizer settings (the SAN run preloads
    # libasan into python3 only).
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
    return subprocess.Popen([SERVER, *args, "--cluster-secret", SECRET, "--log-level", "warning"],
                            preexec_fn=_die_with_parent, env=env)


def _wait(what, cond, procs, seconds=20):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{what}: moonkv-server exited with {p.returncode}")
        try:
            if cond():
                return
        except redis.RedisError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what}: not ready in {seconds}s")


def _answers_as(pid):
    """Whether the master port is answered by process pid: a leftover server
    of another run on the same port must fail the start, not stand in for
    ours (a test that stops our nodes would then read from its nodes)."""
    info = redis.Redis(port=MASTER_PORT, socket_timeout=2).info("server")
    if info.get("process_id") != pid:
        raise RuntimeError(f"port {MASTER_PORT} is answered by process "
                           f"{info.get('process_id')}, not by the master started ({pid})")
    return True


def _all_threads_stopped(pid):
    """Whether every thread of process pid is in state T (stopped)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:   # the thread exited meanwhile
            continue
        if state not in ("T", "t"):
            return False
    return True


def _alive_nodes():
    topo = redis.Redis(port=MASTER_PORT, socket_timeout=2).execute_command("MOON.TOPOLOGY")
    return sum(1 for n in topo if len(n) == 3 and n[1] == b"alive")


class Cluster:
    master = MASTER
    secret = SECRET

    def __init__(self):
        self.procs = []

    def start(self):
        self.procs.append(_spawn("--role", "master", "--bind", "127.0.0.1", f"--port={MASTER_PORT}"))
        _wait("master", lambda: _answers_as(self.procs[0].pid), self.procs)
        for port, data in NODES:
            self.procs.append(_spawn("--role", "node", "--master", MASTER, "--bind", "127.0.0.1",
                                     f"--port={port}", "--segment-size", "256MB",
                                     f"--data-addrs=127.0.0.1:{data}", "--prefault", "no",
                                     "--segment-persist", "no"))
        _wait("nodes", lambda: _alive_nodes() == len(NODES), self.procs)

    def nodes(self):
        return self.procs[1:]

    def pause_nodes(self, seconds=30):
        """SIGSTOP every node, returning once each of its threads has
        stopped. kill() returns when the signal is queued: the one thread
        woken to take it stops the others only when it gets to run, and
        until then they serve (on a loaded machine a node's data-plane
        connection thread answered a get after the SIGSTOP was sent)."""
        for p in self.nodes():
            p.send_signal(signal.SIGSTOP)
        _wait("nodes stopped", lambda: all(_all_threads_stopped(p.pid) for p in self.nodes()),
              self.procs, seconds)

    def resume_nodes(self):
        for p in self.nodes():
            p.send_signal(signal.SIGCONT)

    def wait_healthy(self, seconds=30):
        """Until both nodes are alive and take a 2-replica put over every
        transport (after a test stopped them, they may rejoin anew)."""
        import moonkv

        def healthy():
            if _alive_nodes() != len(NODES):
                return False
            for t in ("tcp", "shm"):
                with moonkv.MoonkvStore(status_codes=True) as s:
                    k = f"py:health:{uuid.uuid4().hex}"
                    if s.setup(master=MASTER, cluster_secret=SECRET, transport=t, timeout_ms=2000) != 0:
                        return False
                    ok = s.put(k, b"probe", replicas=len(NODES)) == 0 and s.get(k) == b"probe"
                    s.remove(k)
                    if not ok:
                        return False
            return True
        _wait("cluster healthy again", healthy, self.procs, seconds)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.procs = []


@pytest.fixture(scope="session")
def cluster():
    c = Cluster()
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture(params=["tcp", "shm"])
def transport(request):
    return request.param


@pytest.fixture
def store(cluster, transport):
    import moonkv
    s = moonkv.MoonkvStore()
    s.setup(master=cluster.master, cluster_secret=cluster.secret, transport=transport)
    yield s
    s.close()


@pytest.fixture
def key():
    """A key no other test uses: stored objects are write-once."""
    prefix = uuid.uuid4().hex[:12]
    return lambda name="k": f"py:{prefix}:{name}"
