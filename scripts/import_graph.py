#!/usr/bin/env python3
"""The import graph of every crate in the workspace, file by file, the
call graph between the engine's phase files, and the names the engine's
journey cites.

The crates are the workspace's members (`members` in the root
`Cargo.toml`, globs expanded) and every other crate found below the root
(a folder with a `Cargo.toml` holding a `[package]`, outside `target/`),
so a crate split out of another is read without an entry here. In each,
every `.rs` file is read: `src/` (managers, ambient transactions and
adapters included), `tests/`, `examples/`, `benches/`, and any file
outside those (a manifest's own example or build script path) as a tree
of its own; a file of a crate found nowhere is reported (every file is
read). Every `crate::...`, `super::...` and `self::...` path (uses,
brace groups and inline paths; comments skipped) is resolved to the
module file it names. Reported:

* every import cycle between files of one crate (there must be none);
* every arrow from a leaf of pool-core (a module outside `engine/`,
  `pool.rs`, the managers, adapters and ambient transactions) to
  `engine/` or `pool.rs` (leaves never name the engine);
* every two-way pair of engine files: A defines a function that B
  calls, and B one that A calls (the phases must call one way), and
  every longer cycle of such calls (A calls B, B calls C, C calls A); The
  functions are those of inherent `impl` blocks (the `Engine`'s or a
  phase type's, such as `Reservation`), called as `.name(`, or as
  `Type::name(` (a name several files define, such as `new`, is told
  apart by its type), and free functions, called by name or path.
  `Engine::new` building its fields (`Connector::new()`) is the engine
  assembling itself, not a call between phases. A call on one of the engine's leaf
  fields (`slots`, `manager`, `waiters`, ...: a field of `Engine` whose
  type is not defined in `engine/`), directly or through a local of the
  same name, is a call into that leaf, not a phase: `slots.open()` is not
  `Engine::open`;
* every name cited in backticks in the "One connection's journey"
  section of `pool-core/docs/engine.md` that the sources do not define: a
  file (`engine/checkout.rs`) must exist under `pool-core/src`, a
  function or type (`vet_handoff`, `Held`) must be defined in some crate,
  and `Type::name` must name a function of an `impl` of that type (or of
  that trait), or a variant of that enum.

Child-to-parent arrows (a file reading a type of its parent module, such
as a phase file reading `Engine` of `engine/mod.rs`) are how Rust shares a
type's private fields across a folder and are not counted as cycles: a
`mod x;` declaration is not an import.

Exit status 1 on any finding.
"""
import glob, os, re, sys
from collections import defaultdict

WS = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TREES = ("src", "tests", "examples", "benches")
SKIP_DIRS = ("target", ".git")


def is_crate(d):
    manifest = os.path.join(d, "Cargo.toml")
    return os.path.isfile(manifest) and re.search(r"^\[package\]", open(manifest).read(), re.M)


def crates():
    """The workspace's members and every other crate below the root, as
    paths relative to it."""
    text = open(os.path.join(WS, "Cargo.toml")).read()
    found = []
    m = re.search(r"^members\s*=\s*\[(.*?)\]", text, re.S | re.M)
    for pattern in re.findall(r'"([^"]+)"', m.group(1) if m else ""):
        for d in sorted(glob.glob(os.path.join(WS, pattern))):
            if is_crate(d):
                found.append(os.path.relpath(d, WS))
    for d, dirs, _ in os.walk(WS):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("."))
        rel = os.path.relpath(d, WS)
        if rel != "." and is_crate(d) and rel not in found:
            found.append(rel)
    return found


def crate_trees(crate):
    """(tree name, folder, module map) for every tree of `crate`: the
    standard folders, and each other `.rs` file (outside nested crates) as
    a tree of one file."""
    root = os.path.join(WS, crate)
    out = []
    for tree in TREES:
        d = os.path.join(root, tree)
        if os.path.isdir(d):
            out.append((tree, d, tree_files(d)))
    for d, dirs, fs in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel == ".":
            dirs[:] = [x for x in dirs if x not in TREES]
        dirs[:] = sorted(
            x for x in dirs
            if x not in SKIP_DIRS and not x.startswith(".") and not is_crate(os.path.join(d, x))
        )
        for f in sorted(fs):
            if f.endswith(".rs"):
                path = os.path.join(rel, f) if rel != "." else f
                out.append((path, d, {(): f}))
    return out
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
    for d, dirs, fs in os.walk(root):
        dirs[:] = sorted(
            x for x in dirs
            if x not in SKIP_DIRS and not x.startswith(".") and not is_crate(os.path.join(d, x))
        )
        for f in sorted(fs):
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


def leaf_fields(edir, texts):
    """The `Engine`'s fields whose type is not defined in `engine/`."""
    mod = texts["mod"]
    m = re.search(r"struct\s+Engine\b[^{]*\{(.*?)\n\}", mod, re.S)
    own = set()
    for text in texts.values():
        own.update(re.findall(r"\b(?:struct|enum)\s+([A-Za-z_][A-Za-z0-9_]*)", text))
    leaves = set()
    for name, ty in re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?([a-z_][a-z0-9_]*)\s*:\s*([^,\n]+)", m.group(1), re.M):
        heads = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)", ty))
        if not heads & own:
            leaves.add(name)
    return leaves


def engine_pairs(src):
    """Two-way call pairs between the files of engine/."""
    edir = os.path.join(src, "engine")
    texts = {}
    for f in sorted(os.listdir(edir)):
        if f.endswith(".rs") and not f.endswith("tests.rs"):
            texts[f[:-3]] = strip_comments(open(os.path.join(edir, f)).read())
    defined = defaultdict(set)  # method name -> files
    typed = defaultdict(set)  # (type, function) -> files
    free = defaultdict(set)  # free function name -> files
    for name, text in texts.items():
        depth, impl_at, ty = 0, None, None
        for line in text.splitlines():
            s = line.strip()
            if impl_at is None and re.match(r"^impl\b", s) and " for " not in s:
                impl_at = depth
                head = re.match(r"(%s)" % IDENT, strip_generics(s[4:]).strip())
                ty = head.group(1) if head else None
            fm = re.search(r"\bfn\s+(%s)" % IDENT, s)
            if fm and impl_at is not None and depth == impl_at + 1:
                defined[fm.group(1)].add(name)
                typed[(ty, fm.group(1))].add(name)
            elif fm and depth == 0:
                free[fm.group(1)].add(name)
            depth += s.count("{") - s.count("}")
            if impl_at is not None and depth <= impl_at and "}" in s:
                impl_at = None
    one = lambda table: {n: next(iter(fs)) for n, fs in table.items() if len(fs) == 1}
    owner, typed_owner, free_owner = one(defined), one(typed), one(free)
    leaves = leaf_fields(edir, texts)
    leaf_receiver = re.compile(r"\b(?:%s)\s*(?:\(\s*\))?\s*\.\s*$" % "|".join(sorted(leaves)))
    # `Engine::new` building its fields (`Connector::new()`, ...) is the
    # engine assembling itself, as a phase file reading `Engine` is a
    # child reading its parent: not a call between phases.
    fields = set(re.findall(r"(%s)::new\(" % IDENT, block_of_fn(texts["mod"], "new")))
    calls = defaultdict(lambda: defaultdict(set))
    for name, text in texts.items():
        call = r"(?:(%s)\s*::\s*|\.\s*|(?<![\w.:]))(%s)\s*(?:::<[^>]*>)?\(" % (IDENT, IDENT)
        for m in re.finditer(call, text):
            ty, fn = m.group(1), m.group(2)
            if re.search(r"\bfn\s*$", text[max(0, m.start() - 8) : m.start()]):
                continue  # a definition
            if ty is not None:  # `Type::f(`, `module::f(`
                if name == "mod" and fn == "new" and ty in fields:
                    continue
                o = typed_owner.get((ty, fn)) or free_owner.get(fn) or owner.get(fn)
            elif text[m.start()] == ".":  # a method
                o = owner.get(fn)
            else:  # a bare call: a free function
                o = free_owner.get(fn)
            if not o or o == name:
                continue
            if leaves and leaf_receiver.search(text[max(0, m.start() - 80) : m.start() + 1]):
                continue
            calls[name][o].add(f"{ty}::{fn}" if ty else fn)
    pairs = []
    for a in sorted(calls):
        for b in sorted(calls[a]):
            if a < b and a in calls.get(b, {}):
                pairs.append((a, b, sorted(calls[a][b]), sorted(calls[b][a])))
    return pairs, sum(len(v) for v in calls.values()), calls


def block_of_fn(text, fn):
    """The body of the first `fn fn` in `text`."""
    m = re.search(r"\bfn\s+%s\b[^{]*\{" % fn, text)
    return block_at(text, m.end() - 1) if m else ""


IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def definitions(texts):
    """Every item name defined in `texts` (comments stripped), the
    functions of each `impl` or `trait` by the type and trait names in its
    header, and each enum's variants."""
    names, members = set(), defaultdict(set)
    item = re.compile(r"\b(?:fn|struct|enum|trait|type|const|static|mod|union)\s+(%s)|macro_rules!\s*(%s)" % (IDENT, IDENT))
    for text in texts:
        for m in item.finditer(text):
            names.add(m.group(1) or m.group(2))
        for m in re.finditer(r"\benum\s+(%s)[^{;]*\{" % IDENT, text):
            body = block_at(text, m.end() - 1)
            depth, cur = 0, ""
            for ch in body:
                if ch in "({[<":
                    depth += 1
                elif ch in ")}]>":
                    depth -= 1
                elif ch == "," and depth == 0:
                    cur = ""
                    continue
                if depth == 0 or (depth == 1 and ch in "({"):
                    cur += ch
                v = re.match(r"\s*(?:#\[[^\]]*\]\s*)*(%s)" % IDENT, cur)
                if v:
                    members[m.group(1)].add(v.group(1))
        for m in re.finditer(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?(impl|trait)\b([^{;]*)\{", text):
            header = m.group(2)
            if m.group(1) == "impl":
                header = strip_generics(header)
            owners = set(re.findall(IDENT, header)) - {"for", "where", "dyn", "mut", "const"}
            body = block_at(text, m.end() - 1)
            for fm in re.finditer(r"\bfn\s+(%s)" % IDENT, body):
                for o in owners:
                    members[o].add(fm.group(1))
    return names, members


def strip_generics(header):
    """An `impl` header without its leading `<...>` parameter list."""
    header = header.lstrip()
    if not header.startswith("<"):
        return header
    depth = 0
    for i, ch in enumerate(header):
        depth += (ch == "<") - (ch == ">")
        if depth == 0:
            return header[i + 1 :]
    return header


def block_at(text, i):
    """The text inside the brace block opening at text[i]."""
    depth = 0
    for j in range(i, len(text)):
        depth += (text[j] == "{") - (text[j] == "}")
        if depth == 0:
            return text[i + 1 : j]
    return text[i + 1 :]


def journey_names(all_texts):
    """Names in backticks in the journey of docs/engine.md that nothing
    defines."""
    doc = open(os.path.join(WS, "pool-core", "docs", "engine.md")).read()
    m = re.search(r"^## One connection's journey\n(.*?)(?=^## |\Z)", doc, re.S | re.M)
    if not m:
        return ["docs/engine.md: no \"## One connection's journey\" section"], 0
    names, members = definitions(all_texts)
    missing, cited = [], 0
    for span in re.findall(r"`([^`\n]+)`", m.group(1)):
        span = span.strip()
        if span.endswith(".rs"):
            cited += 1
            if not os.path.isfile(os.path.join(WS, "pool-core", "src", span)):
                missing.append(f"file {span}")
            continue
        path = re.fullmatch(r"(%s(?:::%s)*)(?:\(\))?" % (IDENT, IDENT), span)
        if not path:
            continue
        cited += 1
        segs = path.group(1).split("::")
        if len(segs) == 1:
            if segs[0] not in names:
                missing.append(segs[0])
        elif segs[-2] not in names:
            missing.append(f"{span} (no {segs[-2]})")
        elif segs[-1] not in members.get(segs[-2], ()):
            missing.append(f"{span} (no {segs[-1]} in {segs[-2]})")
    return missing, cited


def main():
    sys.setrecursionlimit(10000)
    name = lambda c, m: f"{c}:{'/'.join(m) or 'root'}"
    n_files, n_edges, bad = 0, 0, 0
    all_texts = []
    members = crates()
    for crate in members:
        read = set()
        for tree, root, mods in crate_trees(crate):
            n_files += len(mods)
            edges = {}
            for mod, rel in mods.items():
                read.add(os.path.normpath(os.path.join(root, rel)))
                text = strip_comments(open(os.path.join(root, rel)).read())
                all_texts.append(text)
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
        for d, dirs, fs in os.walk(os.path.join(WS, crate)):
            dirs[:] = [
                x for x in dirs
                if x not in SKIP_DIRS and not x.startswith(".") and not is_crate(os.path.join(d, x))
            ]
            for f in fs:
                path = os.path.normpath(os.path.join(d, f))
                if f.endswith(".rs") and path not in read:
                    bad += 1
                    print(f"unread: {os.path.relpath(path, WS)}")
    pairs, n_calls, calls = engine_pairs(os.path.join(WS, "pool-core", "src"))
    for a, b, ab, ba in pairs:
        bad += 1
        print(f"two-way pair: engine/{a} <-> engine/{b}  ({a}->{b}: {', '.join(ab)}; {b}->{a}: {', '.join(ba)})")
    graph = defaultdict(set)
    for a, targets in calls.items():
        for b in targets:
            if a != b:
                graph[a].add(b)
                graph.setdefault(b, set())
    for comp in sccs_of(graph):
        if len(comp) > 2:
            bad += 1
            print("call cycle: engine/" + " -> engine/".join(sorted(comp)))
    missing, cited = journey_names(all_texts)
    for m in missing:
        bad += 1
        print(f"journey cites a name the sources do not define: {m}")
    print(f"{len(members)} crates ({', '.join(members)}), {n_files} files, {n_edges} import arrows, "
          f"{n_calls} engine file-to-file call arrows, {cited} names cited by the journey; "
          f"{bad} findings (cycles, back arrows, unread files, two-way pairs, call cycles, missing names)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
