"""tests/support/ports.py - free TCP ports for the Python and Tcl suites,
from the same blocks and locks as tests/support/ports.c (h_free_ports):
blocks of BLOCK consecutive loopback ports in 13000-19975, each locked
with flock on /tmp/moonkv-ports-N.lock for as long as its holder lives,
so suites and C test binaries running side by side never share a port.

As a module: free_ports(n) -> the first of n consecutive free ports, the
lock held by this process until it exits.
As a program: `ports.py BLOCKS` takes BLOCKS blocks, prints their first
ports on one line and holds them until its stdin closes (the Tcl suite
keeps it as a pipe for its life)."""
import fcntl
import os
import random
import socket
import sys

FIRST, BLOCKS, BLOCK, TRIES = 13000, 218, 32, 200   # as in ports.c
_held = []   # lock fds: closing one would free its block


def _bindable(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_ports(n=BLOCK):
    """The first of n (at most BLOCK) consecutive ports of a block now ours."""
    if not 1 <= n <= BLOCK:
        raise ValueError(f"free_ports: {n} not in 1..{BLOCK}")
    for _ in range(TRIES):
        block = random.randrange(BLOCKS)
        fd = os.open(f"/tmp/moonkv-ports-{block}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        base = FIRST + block * BLOCK
        if all(_bindable(base + i) for i in range(BLOCK)):
            _held.append(fd)
            return base
        os.close(fd)
    raise RuntimeError("free_ports: no free block of ports in 13000-19975")


if __name__ == "__main__":
    print(" ".join(str(free_ports()) for _ in range(int(sys.argv[1]))), flush=True)
    sys.stdin.read()   # hold the blocks until our reader goes away
