#!/usr/bin/env python3
"""The import graph of pool-core/src's engine and its leaves, file by file.

Reads every `crate::...` and `super::...` path in each file (uses and
inline paths, comments and doc lines skipped), resolves it to the module
file it names, and reports:

* every cycle between files (there must be none), and
* every arrow from a leaf (a module outside `engine/`, `pool.rs`, the
  managers, adapters and ambient transactions) to `engine/` or `pool.rs`
  (there must be none: leaves never name the engine).

Child-to-parent arrows inside `engine/` (a phase file reading the
`Engine` type defined in `engine/mod.rs`) are how Rust shares one type's
private fields across the folder, and are not counted as a cycle with the
`mod` lines of `engine/mod.rs`: a `mod x;` declaration is not an import.

Exit status 1 when a cycle or a back arrow is found.
"""
import os, re, sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pool-core", "src")
OUTER = ("managers", "compat", "ambient")  # built on the pool, outside the engine's graph


def module_of(rel):
    parts = rel[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


def files():
    out = {}
    for d, _, fs in os.walk(ROOT):
        for f in fs:
            if f.endswith(".rs"):
                rel = os.path.relpath(os.path.join(d, f), ROOT)
                out[module_of(rel)] = rel
    return out


def resolve(mods, path):
    """The longest prefix of `path` that is a module file."""
    for n in range(len(path), 0, -1):
        if tuple(path[:n]) in mods:
            return tuple(path[:n])
    return None


def main():
    mods = files()
    edges = defaultdict(set)
    for mod, rel in mods.items():
        if mod and mod[0] in OUTER:
            continue
        text = open(os.path.join(ROOT, rel)).read()
        # cfg(test) modules inside a file still count: they are code.
        for line in text.splitlines():
            s = line.strip()
            if s.startswith("//"):
                continue
            for m in re.finditer(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)", s):
                segs = m.group(2).strip(":").split("::")
                if m.group(1) == "crate":
                    base = []
                else:
                    # super from a mod.rs is its parent; from x.rs too.
                    is_dir = os.path.basename(rel) == "mod.rs"
                    base = list(mod[:-1]) if True else list(mod)
                    _ = is_dir
                target = resolve(mods, base + segs)
                if target is None or target == mod or target == ():
                    continue
                if target[0] in OUTER:
                    continue
                edges[mod].add(target)
    # Child -> ancestor arrows inside engine/ are field access of the one type.
    def is_ancestor(a, b):
        return len(a) < len(b) and b[: len(a)] == a

    graph = {m: {t for t in ts if not is_ancestor(t, m)} for m, ts in edges.items()}
    # cycles (Tarjan)
    index, low, stack, on, sccs, i = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = i[0]
        i[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(comp)

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            strong(v)
    name = lambda m: "/".join(m) or "lib"
    bad = 0
    for comp in sccs:
        bad += 1
        print("cycle:", " <-> ".join(sorted(name(m) for m in comp)))
    upper = lambda m: m and (m[0] == "engine" or m == ("pool",))
    for m, ts in sorted(edges.items()):
        if upper(m):
            continue
        for t in sorted(ts):
            if upper(t):
                bad += 1
                print(f"back arrow: {name(m)} -> {name(t)}")
    n_edges = sum(len(t) for t in graph.values())
    print(f"{len(mods)} files, {n_edges} arrows between engine and leaf files; "
          f"{len(sccs)} cycles, {bad - len(sccs)} back arrows")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
