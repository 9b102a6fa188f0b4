#!/usr/bin/env python3
"""scripts/layers.py - the folder-level include and link graph of a build.

Reads the objects of a build directory (build/rel by default): the compiler's
dependency files (-MMD) give which headers each object includes, and `nm`
gives which symbols each object defines and which it needs. Both are folded
to folders (the directory of the source file), printed as edges with counts,
and checked against the layers below:

  * an edge may only point to a lower layer (or stay inside its folder);
  * folders of one layer do not reference each other;
  * no cycle between folders (implied by the two rules, checked anyway, so
    a folder missing from LAYERS still cannot hide a cycle);
  * every product folder is named in LAYERS.

Prints TAP-style "ok - layers/..." / "not ok - layers/..." lines, so
tests/run.sh counts them; exits non-zero on a violation.
Usage: scripts/layers.py [BUILD_DIR] [--quiet]
"""
import os
import subprocess
import sys

# Lowest first. A folder may use folders of lower layers only. The names are
# the README's architecture section.
LAYERS = [
    ("core",       ["src/core"]),
    ("resp",       ["resp"]),
    ("engine",     ["backend"]),
    ("transports", ["rdma"]),
    ("registry",   ["src/transports"]),
    ("protocol",   ["src/proto"]),
    ("coordination", ["src/etcd", "src/link"]),
    ("frameworks", ["src/client", "src/server"]),
    ("roles",      ["src/master", "src/node", "src/gateway", "src/standalone"]),
    ("binary",     ["src/main"]),
]

# Only the product's sources: tests and benches sit above everything.
PRODUCT_ROOTS = ("src/", "resp/", "backend/", "rdma/")


def folder_of(path):
    return os.path.dirname(os.path.normpath(path))


def is_product(path):
    return path.startswith(PRODUCT_ROOTS)


def objects(build):
    for root, _, files in os.walk(build):
        for f in files:
            if not f.endswith(".o"):
                continue
            obj = os.path.join(root, f)
            src = os.path.relpath(obj, build)[:-2] + ".c"
            # An object whose source is gone (a moved file) is stale.
            if is_product(src) and os.path.exists(src):
                yield obj, src


def dep_headers(obj):
    """Project headers an object includes, from its .d file."""
    try:
        text = open(obj[:-2] + ".d").read()
    except OSError:
        return []
    first_rule = text.split("\n\n")[0].replace("\\\n", " ")
    deps = first_rule.split(":", 1)[1].split() if ":" in first_rule else []
    return [d for d in deps[1:] if not os.path.isabs(d) and d.endswith(".h")]


def symbols(objs):
    """{object: (defined, undefined)} global symbol sets, from one `nm`
    run per 200 objects (one per object spent 15 s of CPU)."""
    syms = {o: (set(), set()) for o in objs}
    for i in range(0, len(objs), 200):
        out = subprocess.run(["nm", "-P", "-g", "-A"] + objs[i:i + 200], capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            obj, _, rest = line.partition(": ")
            parts = rest.split()
            if obj not in syms or len(parts) < 2:
                continue
            defined, undefined = syms[obj]
            (undefined if parts[1] in ("U", "w", "v") else defined).add(parts[0])
    return syms


def build_graph(build):
    inc, link, owner, needs = {}, {}, {}, []
    folders = set()
    objs = list(objects(build))
    syms = symbols([obj for obj, _ in objs])
    for obj, src in objs:
        f = folder_of(src)
        folders.add(f)
        for h in dep_headers(obj):
            hf = folder_of(h)
            if is_product(h) and hf != f:
                inc[(f, hf)] = inc.get((f, hf), 0) + 1
        defined, undefined = syms[obj]
        for s in defined:
            owner[s] = f
        needs.append((f, undefined))
    for f, undefined in needs:
        for s in undefined:
            of = owner.get(s)
            if of and of != f:
                link[(f, of)] = link.get((f, of), 0) + 1
    return folders, inc, link


def rank_of():
    return {f: i for i, (_, fs) in enumerate(LAYERS) for f in fs}


def find_cycle(edges):
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if not state.get(m):
                c = visit(m)
                if c:
                    return c
        state[n] = 2
        stack.pop()
        return None

    for n in sorted(graph):
        if not state.get(n):
            c = visit(n)
            if c:
                return c
    return None


def check(folders, inc, link, quiet):
    rank = rank_of()
    bad = []
    unknown = sorted(f for f in folders if f not in rank)
    edges = set(inc) | set(link)
    for a, b in sorted(edges):
        kinds = "+".join(k for k, e in (("include", inc), ("link", link)) if (a, b) in e)
        if not quiet:
            print(f"# {a} -> {b} ({kinds})")
        if a in rank and b in rank and rank[b] >= rank[a]:
            why = "same layer" if rank[a] == rank[b] else "upward"
            bad.append(f"{a} -> {b} ({kinds}, {why})")
    cycle = find_cycle(edges)
    results = [
        ("every folder has a layer", not unknown, ", ".join(unknown)),
        ("edges only point down", not bad, "; ".join(bad)),
        ("no cycle between folders", cycle is None, " -> ".join(cycle or [])),
    ]
    failed = 0
    for name, ok, detail in results:
        print(f"{'ok' if ok else 'not ok'} - layers/{name}")
        if not ok:
            failed += 1
            print(f"#   {detail}")
    return failed


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    build = args[0] if args else "build/rel"
    folders, inc, link = build_graph(build)
    if not folders:
        print(f"not ok - layers/objects found in {build}")
        return 1
    return 1 if check(folders, inc, link, "--quiet" in sys.argv) else 0


if __name__ == "__main__":
    sys.exit(main())
