#!/usr/bin/env python3
"""Lists a crate's public API from rustdoc's JSON output, one line each.

    public_api.py CRATE.json            # the listing, sorted
    public_api.py --count CRATE.json    # "N items, M methods"

What is listed: every item reachable from the crate root through public
modules and public re-exports (hidden ones too: rustdoc is run with
`--document-hidden-items`, since `#[doc(hidden)]` hides nothing from a
user's code), with its path; for each struct, enum and union its public
fields, variants, inherent public methods (with their signatures) and the
traits it implements; for each trait its methods. A glob re-export of
another crate is one line (that crate has its own listing).

What is counted: items are the distinct structs, enums, unions, traits,
functions, type aliases, constants, statics and macros listed (one item
re-exported under two paths counts once; modules do not count); methods
are the distinct inherent public methods of those types plus the methods
the crate's traits declare (trait implementations do not count).

Only rustdoc's own names go into the output (no ids), so the listing is
the same from one build to the next on one rustdoc JSON format version.
"""

import json
import sys

# The rustdoc JSON format this reader was written for and the listings
# were made with (the stable rustdoc 1.95 writes it, and so does nightly
# 2026-05-19). Another format is refused
# with its number rather than read as it comes: a renamed field would read
# as a changed API, or as none.
FORMAT_VERSION = 57

ITEM_KINDS = ("struct", "enum", "union", "trait", "function", "type_alias",
              "constant", "static", "macro", "proc_macro", "trait_alias")


class Api:
    def __init__(self, doc):
        self.doc = doc
        self.index = doc["index"]
        self.lines = set()
        self.items = set()
        self.methods = set()
        self.seen_modules = set()

    def item(self, id_):
        return self.index.get(str(id_))

    # Types, as a reader writes them; only names, never ids.
    def ty(self, t):
        if t is None:
            return "()"
        (kind, v), = t.items()
        if kind == "resolved_path":
            return v["path"] + self.args(v.get("args"))
        if kind == "generic":
            return v
        if kind == "primitive":
            return v
        if kind == "tuple":
            return "(" + ", ".join(self.ty(x) for x in v) + ")"
        if kind == "slice":
            return "[" + self.ty(v) + "]"
        if kind == "array":
            return "[" + self.ty(v["type"]) + "; " + str(v["len"]) + "]"
        if kind == "borrowed_ref":
            lt = (v["lifetime"] + " ") if v.get("lifetime") else ""
            return "&" + lt + ("mut " if v["is_mutable"] else "") + self.ty(v["type"])
        if kind == "raw_pointer":
            return "*" + ("mut " if v["is_mutable"] else "const ") + self.ty(v["type"])
        if kind == "impl_trait":
            return "impl " + " + ".join(self.bound(b) for b in v)
        if kind == "dyn_trait":
            parts = [p["trait"]["path"] + self.args(p["trait"].get("args")) for p in v["traits"]]
            if v.get("lifetime"):
                parts.append(v["lifetime"])
            return "dyn " + " + ".join(parts)
        if kind == "qualified_path":
            trait = v.get("trait")
            if not trait or not trait["path"]:
                return self.ty(v["self_type"]) + "::" + v["name"]
            return "<" + self.ty(v["self_type"]) + " as " + trait["path"] + ">::" + v["name"]
        if kind == "function_pointer":
            sig = v["sig"]
            return "fn(" + ", ".join(self.ty(x[1]) for x in sig["inputs"]) + ") -> " + self.ty(sig.get("output"))
        if kind == "infer":
            return "_"
        return json.dumps(t, sort_keys=True)

    def args(self, a):
        if not a:
            return ""
        (kind, v), = a.items()
        if kind == "angle_bracketed":
            out = []
            for x in v["args"]:
                (k, val), = x.items()
                out.append(val if k == "lifetime" else self.ty(val) if k == "type" else json.dumps(val, sort_keys=True))
            for c in v.get("constraints", []):
                b = c["binding"]
                if "equality" in b:
                    eq = b["equality"]
                    out.append(c["name"] + " = " + (self.ty(eq["type"]) if "type" in eq else json.dumps(eq, sort_keys=True)))
                else:
                    out.append(c["name"] + ": " + " + ".join(self.bound(x) for x in b["constraint"]))
            return "<" + ", ".join(out) + ">" if out else ""
        if kind == "parenthesized":
            return "(" + ", ".join(self.ty(x) for x in v["inputs"]) + ") -> " + self.ty(v.get("output"))
        return ""

    def bound(self, b):
        (kind, v), = b.items()
        if kind == "trait_bound":
            mod = {"maybe": "?", "maybe_const": "~const "}.get(v.get("modifier"), "")
            return mod + v["trait"]["path"] + self.args(v["trait"].get("args"))
        if kind == "outlives":
            return v
        return json.dumps(b, sort_keys=True)

    def generics(self, g):
        out = []
        for p in g["params"]:
            kind = p["kind"]
            if "lifetime" in kind:
                out.append(p["name"])
            elif "type" in kind:
                if kind["type"].get("is_synthetic"):
                    continue
                bounds = kind["type"]["bounds"]
                out.append(p["name"] + (": " + " + ".join(self.bound(b) for b in bounds) if bounds else ""))
            elif "const" in kind:
                out.append("const " + p["name"] + ": " + self.ty(kind["const"]["type"]))
        s = "<" + ", ".join(out) + ">" if out else ""
        where = []
        for w in g.get("where_predicates", []):
            if "bound_predicate" in w:
                bp = w["bound_predicate"]
                where.append(self.ty(bp["type"]) + ": " + " + ".join(self.bound(b) for b in bp["bounds"]))
            elif "lifetime_predicate" in w:
                lp = w["lifetime_predicate"]
                where.append(lp["lifetime"] + ": " + " + ".join(lp["outlives"]))
            else:
                where.append(json.dumps(w, sort_keys=True))
        if where:
            s += " where " + ", ".join(where)
        return s

    def fn_sig(self, name, f):
        h = f["header"]
        quals = ("const " if h["is_const"] else "") + ("async " if h["is_async"] else "") + ("unsafe " if h["is_unsafe"] else "")
        inputs = []
        for n, t in f["sig"]["inputs"]:
            if n == "self":
                inputs.append({"Self": "self", "&Self": "&self", "&mut Self": "&mut self"}.get(self.ty(t), "self: " + self.ty(t)))
            else:
                inputs.append(n + ": " + self.ty(t))
        out = f["sig"].get("output")
        g = self.generics(f["generics"])
        where = ""
        if " where " in g:
            g, where = g.split(" where ", 1)
            where = " where " + where
        return quals + "fn " + name + g + "(" + ", ".join(inputs) + ")" + (" -> " + self.ty(out) if out else "") + where

    def emit(self, line):
        self.lines.add(line)

    def walk_module(self, path, mod_id):
        if mod_id in self.seen_modules:
            return
        self.seen_modules.add(mod_id)
        mod = self.item(mod_id)
        for child in mod["inner"]["module"]["items"]:
            self.walk_item(path, child)

    def walk_item(self, path, id_):
        it = self.item(id_)
        if it is None or it["visibility"] != "public":
            return
        (kind, inner), = it["inner"].items()
        if kind == "module":
            p = path + "::" + it["name"]
            self.emit("mod " + p)
            self.walk_module(p, id_)
            return
        if kind == "use":
            target = inner.get("id")
            if inner["is_glob"]:
                t = self.item(target) if target is not None else None
                if t is not None and "module" in t["inner"]:
                    self.walk_module(path, target)
                else:
                    self.emit("pub use " + inner["source"] + "::* in " + path)
                return
            t = self.item(target) if target is not None else None
            if t is None:
                self.emit("pub use " + inner["source"] + " as " + path + "::" + inner["name"])
                return
            self.walk_named(path + "::" + inner["name"], target, t)
            return
        self.walk_named(path + "::" + it["name"], id_, it)

    def walk_named(self, p, id_, it):
        (kind, inner), = it["inner"].items()
        if kind == "module":
            self.emit("mod " + p)
            self.walk_module(p, id_)
            return
        if kind not in ITEM_KINDS:
            return
        self.items.add(id_)
        if kind == "function":
            self.emit(self.fn_sig(p, inner))
            return
        if kind in ("struct", "enum", "union"):
            self.emit(kind + " " + p + self.generics(inner["generics"]))
            if kind == "struct":
                k = inner["kind"]
                fields = k.get("plain", {}).get("fields", []) if isinstance(k, dict) else []
                if isinstance(k, dict) and "tuple" in k:
                    fields = [f for f in k["tuple"] if f is not None]
                for f in fields:
                    fi = self.item(f)
                    if fi and fi["visibility"] == "public":
                        self.emit("field " + p + "::" + fi["name"] + ": " + self.ty(fi["inner"]["struct_field"]))
            if kind == "enum":
                for v in inner["variants"]:
                    vi = self.item(v)
                    self.emit("variant " + p + "::" + vi["name"] + self.variant(vi["inner"]["variant"]))
            if kind == "union":
                for f in inner["fields"]:
                    fi = self.item(f)
                    if fi and fi["visibility"] == "public":
                        self.emit("field " + p + "::" + fi["name"] + ": " + self.ty(fi["inner"]["struct_field"]))
            self.impls(p, inner["impls"])
            return
        if kind == "trait":
            self.emit("trait " + p + self.generics(inner["generics"]))
            for m in inner["items"]:
                mi = self.item(m)
                (mk, mv), = mi["inner"].items()
                if mk == "function":
                    self.methods.add(m)
                    self.emit("trait-" + self.fn_sig(p + "::" + mi["name"], mv) + (" (provided)" if mv["has_body"] else ""))
                else:
                    self.emit("trait-" + mk + " " + p + "::" + mi["name"])
            return
        if kind == "type_alias":
            self.emit("type " + p + self.generics(inner["generics"]) + " = " + self.ty(inner["type"]))
            return
        if kind == "constant":
            self.emit("const " + p + ": " + self.ty(inner["type"]))
            return
        if kind == "static":
            self.emit("static " + p + ": " + self.ty(inner["type"]))
            return
        self.emit(kind + " " + p)

    def variant(self, v):
        k = v["kind"]
        if k == "plain":
            return ""
        if "tuple" in k:
            return "(" + ", ".join(self.ty(self.item(f)["inner"]["struct_field"]) if f is not None else "_" for f in k["tuple"]) + ")"
        if "struct" in k:
            return " { " + ", ".join(self.item(f)["name"] + ": " + self.ty(self.item(f)["inner"]["struct_field"]) for f in k["struct"]["fields"]) + " }"
        return ""

    def impls(self, p, impl_ids):
        for i in impl_ids:
            imp = self.item(i)
            if imp is None:
                continue
            inner = imp["inner"]["impl"]
            if inner["is_synthetic"] or inner["blanket_impl"] is not None:
                continue
            if inner["trait"] is not None:
                t = inner["trait"]
                # Compiler-internal marker traits, present or not by
                # toolchain: not part of what a user sees.
                if t["path"] in ("StructuralPartialEq", "TrivialClone"):
                    continue
                self.emit("impl " + ("!" if inner["is_negative"] else "") + t["path"] + self.args(t.get("args")) + " for " + p + self.generics(inner["generics"]))
                continue
            for m in inner["items"]:
                mi = self.item(m)
                if mi is None or mi["visibility"] != "public":
                    continue
                (mk, mv), = mi["inner"].items()
                if mk == "function":
                    self.methods.add(m)
                    self.emit(self.fn_sig(p + "::" + mi["name"], mv))
                else:
                    self.emit(mk + " " + p + "::" + mi["name"])


def main():
    args = sys.argv[1:]
    count = False
    if args and args[0] == "--count":
        count = True
        args = args[1:]
    (path,) = args
    with open(path) as f:
        doc = json.load(f)
    found = doc.get("format_version")
    if found != FORMAT_VERSION:
        sys.exit(f"public_api.py: {path} is rustdoc JSON format {found}, and this "
                 f"reader knows format {FORMAT_VERSION}: run the check with a "
                 f"toolchain that writes format {FORMAT_VERSION} (1.95 does), "
                 f"or update this reader and bless the listings")
    api = Api(doc)
    root = api.item(doc["root"])
    api.walk_module(root["name"], doc["root"])
    if count:
        print(f"{len(api.items)} items, {len(api.methods)} methods")
    else:
        for line in sorted(api.lines):
            print(line)


if __name__ == "__main__":
    main()
