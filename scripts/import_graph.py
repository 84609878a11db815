#!/usr/bin/env python3
"""The import graph of every crate in the workspace, file by file, and the
call graph between the engine's phase files.

For each crate (`pool-api`, `pool-core`, `examples`, `benches`) every `.rs`
file is read: `src/` (managers, ambient transactions and adapters
included), and `tests/`, `examples/`, `benches/` where present. Every
`crate::...`, `super::...` and `self::...` path (uses, brace groups and
inline paths; comments skipped) is resolved to the module file it names.
Reported:

* every import cycle between files of one crate (there must be none);
* every arrow from a leaf of pool-core (a module outside `engine/`,
  `pool.rs`, the managers, adapters and ambient transactions) to
  `engine/` or `pool.rs` (leaves never name the engine);
* every two-way pair of engine files: A defines a method of an
  inherent `impl` block (the `Engine`'s or a phase type's, such as
  `Reservation`) that B calls as `.name(` or `Type::name(`, and B defines one that A calls
  (the phases must call one way).

Child-to-parent arrows (a file reading a type of its parent module, such
as a phase file reading `Engine` of `engine/mod.rs`) are how Rust shares a
type's private fields across a folder and are not counted as cycles: a
`mod x;` declaration is not an import.

Exit status 1 on any finding.
"""
import os, re, sys
from collections import defaultdict

WS = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
CRATES = ("pool-api", "pool-core", "examples", "benches")
TREES = ("src", "tests", "examples", "benches")
OUTER = ("managers", "compat", "ambient")  # built on the pool, outside the leaf rule


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(re.sub(r"//.*$", "", l) for l in text.splitlines())


def module_of(rel):
    parts = rel[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def tree_files(root):
    out = {}
    for d, _, fs in os.walk(root):
        if "/target" in d:
            continue
        for f in fs:
            if f.endswith(".rs"):
                rel = os.path.relpath(os.path.join(d, f), root)
                out[module_of(rel)] = rel
    return out


def resolve(mods, path):
    for n in range(len(path), 0, -1):
        if tuple(path[:n]) in mods:
            return tuple(path[:n])
    return None


def expand(text, i):
    """Paths of a brace group starting at text[i] == '{' (nested allowed)."""
    depth, j = 0, i
    while j < len(text):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                break
        j += 1
    body = text[i + 1 : j]
    out, cur, d = [], "", 0
    for ch in body + ",":
        if ch == "," and d == 0:
            cur = cur.strip()
            if cur:
                k = cur.find("{")
                if k >= 0:
                    head = [s for s in cur[:k].strip(":").split("::") if s]
                    for p in expand(cur, k):
                        out.append(head + p)
                else:
                    out.append([s.strip() for s in cur.split(" as ")[0].split("::") if s.strip()])
            cur = ""
        else:
            d += ch == "{"
            d -= ch == "}"
            cur += ch
    return out


def edges_of(mods, mod, text):
    found = set()
    for m in re.finditer(r"\b(crate|super|self)((?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)*)(\s*::\s*\{)?", text):
        kind = m.group(1)
        segs = [s for s in re.sub(r"\s", "", m.group(2)).split("::") if s]
        if kind == "crate":
            base = []
        elif kind == "super":
            base = list(mod[:-1])
            while segs and segs[0] == "super":
                segs, base = segs[1:], base[:-1]
        else:
            base = list(mod)
        paths = [segs]
        if m.group(3):
            paths = [segs + p for p in expand(text, m.end() - 1)]
        for p in paths:
            t = resolve(mods, base + p)
            if t is not None and t != mod and t != ():
                found.add(t)
    return found


def sccs_of(graph):
    index, low, stack, on, out, i = {}, {}, [], set(), [], [0]

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
                out.append(comp)

    for v in list(graph):
        if v not in index:
            strong(v)
    return out


def engine_pairs(src):
    """Two-way method-call pairs between the files of engine/."""
    edir = os.path.join(src, "engine")
    texts = {}
    for f in sorted(os.listdir(edir)):
        if f.endswith(".rs") and not f.endswith("tests.rs"):
            texts[f[:-3]] = strip_comments(open(os.path.join(edir, f)).read())
    defined = defaultdict(set)  # method name -> files
    for name, text in texts.items():
        depth, impl_at = 0, None
        for line in text.splitlines():
            s = line.strip()
            if impl_at is None and re.match(r"^impl\b", s) and " for " not in s:
                impl_at = depth
            if impl_at is not None and depth == impl_at + 1:
                fm = re.search(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", s)
                if fm:
                    defined[fm.group(1)].add(name)
            depth += s.count("{") - s.count("}")
            if impl_at is not None and depth <= impl_at and "}" in s:
                impl_at = None
    owner = {n: next(iter(fs)) for n, fs in defined.items() if len(fs) == 1}
    calls = defaultdict(lambda: defaultdict(set))
    for name, text in texts.items():
        for m in re.finditer(r"(?:\.|::)\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:::<[^>]*>)?\(", text):
            o = owner.get(m.group(1))
            if o and o != name:
                calls[name][o].add(m.group(1))
    pairs = []
    for a in sorted(calls):
        for b in sorted(calls[a]):
            if a < b and a in calls.get(b, {}):
                pairs.append((a, b, sorted(calls[a][b]), sorted(calls[b][a])))
    return pairs, sum(len(v) for v in calls.values())


def main():
    sys.setrecursionlimit(10000)
    name = lambda c, m: f"{c}:{'/'.join(m) or 'root'}"
    n_files, n_edges, bad = 0, 0, 0
    for crate in CRATES:
        for tree in TREES:
            root = os.path.join(WS, crate, tree)
            if not os.path.isdir(root):
                continue
            mods = tree_files(root)
            n_files += len(mods)
            edges = {}
            for mod, rel in mods.items():
                text = strip_comments(open(os.path.join(root, rel)).read())
                edges[mod] = edges_of(mods, mod, text)
            anc = lambda a, b: len(a) < len(b) and b[: len(a)] == a
            graph = {m: {t for t in ts if not anc(t, m)} for m, ts in edges.items()}
            n_edges += sum(len(t) for t in graph.values())
            for comp in sccs_of(graph):
                bad += 1
                print("cycle:", " <-> ".join(sorted(name(f"{crate}/{tree}", m) for m in comp)))
            if crate == "pool-core" and tree == "src":
                upper = lambda m: bool(m) and (m[0] == "engine" or m == ("pool",))
                for m, ts in sorted(edges.items()):
                    if upper(m) or (m and m[0] in OUTER) or m == ():
                        continue
                    for t in sorted(ts):
                        if upper(t):
                            bad += 1
                            print(f"back arrow: {'/'.join(m)} -> {'/'.join(t)}")
    pairs, n_calls = engine_pairs(os.path.join(WS, "pool-core", "src"))
    for a, b, ab, ba in pairs:
        bad += 1
        print(f"two-way pair: engine/{a} <-> engine/{b}  ({a}->{b}: {', '.join(ab)}; {b}->{a}: {', '.join(ba)})")
    print(f"{n_files} files, {n_edges} import arrows, {n_calls} engine file-to-file call arrows; "
          f"{bad} findings (cycles, back arrows, two-way pairs)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
