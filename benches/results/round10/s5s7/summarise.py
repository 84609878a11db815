#!/usr/bin/env python3
"""S5 and S7, tokio-postgres family: each of ours (the crate's
PostgresManager where the build has it, and the benches' local manager)
over the best valid peer in the same run, for every run directory given.
Usage: summarise.py DIR..."""
import json, sys

PEERS = {"deadpool-postgres", "bb8-postgres"}
OURS = ("ours (PostgresManager)", "ours (tokio-postgres)")

def ratio(rows, ours, key):
    o = [r for r in rows if r["pool"] == ours]
    p = [r for r in rows if r["pool"] in PEERS and r["valid"]]
    if not o or not p:
        return None
    best = max(p, key=lambda r: r[key])
    return f"{o[0][key]/1e3:5.1f} k, {best['pool']} {best[key]/1e3:5.1f} k -> {o[0][key]/best[key]:.2f}x"

for d in sys.argv[1:]:
    j = json.load(open(f"{d}/compare.json"))
    print(d, "load before", j["meta"].get("load_before"))
    s5 = [r for r in j["s5"] if r["family"] == "tokio-postgres"]
    s7 = [r for r in j["s7"] if r["family"] == "tokio-postgres"]
    for ours in OURS:
        for v in (False, True):
            for t in sorted({r["tasks"] for r in s5}):
                rows = [r for r in s5 if r["validate"] == v and r["tasks"] == t]
                got = ratio(rows, ours, "qps")
                if got:
                    print(f"  S5 {'on ' if v else 'off'} {t:4} tasks  {ours:24} {got}")
        for c in sorted({r["connections"] for r in s7}):
            got = ratio([r for r in s7 if r["connections"] == c], ours, "rps")
            if got:
                print(f"  S7 {c:4} conns  {ours:24} {got}")
