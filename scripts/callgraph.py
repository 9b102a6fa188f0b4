#!/usr/bin/env python3
"""scripts/callgraph.py - the file-level call graph inside one folder.

From a build's objects (`nm`): file A -> file B when A needs a symbol that B
defines, both in FOLDER. Prints the edges, then TAP lines: whether the graph
has no cycle (every file reachable from the top without coming back), and
the cycles found otherwise. Exits non-zero on a cycle.
Usage: scripts/callgraph.py [FOLDER] [BUILD_DIR]   (src/gateway build/rel)
"""
import glob
import os
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, needed = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            needed.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBR":
            defined.add(parts[2])
    return defined, needed


def cycles(edges):
    found, state = [], {}

    def visit(n, path):
        state[n] = 1
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                found.append(path[path.index(m):] + [m])
            elif m not in state:
                visit(m, path + [m])
        state[n] = 2

    for n in sorted(edges):
        if n not in state:
            visit(n, [n])
    return found


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "src/gateway"
    build = sys.argv[2] if len(sys.argv) > 2 else "build/rel"
    objs = sorted(glob.glob(os.path.join(build, folder, "*.o")))
    if not objs:
        sys.exit("no objects under %s/%s: build first" % (build, folder))
    names = {o: os.path.basename(o)[:-2] + ".c" for o in objs}
    syms = {names[o]: symbols(o) for o in objs}
    owner = {s: f for f, (d, _) in syms.items() for s in d}
    edges = {f: sorted({owner[s] for s in n if s in owner and owner[s] != f}) for f, (_, n) in syms.items()}
    for f in sorted(edges):
        print("# %s -> %s" % (f, ", ".join(edges[f]) or "-"))
    found = cycles(edges)
    for c in found:
        print("not ok - callgraph/%s: cycle %s" % (folder, " -> ".join(c)))
    if not found:
        print("ok - callgraph/%s: no cycle between its %d files" % (folder, len(edges)))
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
