#!/usr/bin/env python3
"""S7, tokio-postgres family: median over every round of every run given
of A / B for each pair of contestants (round i of every contestant ran
back to back). Usage: s7_pairs.py DIR..."""
import json, sys, statistics, itertools

NAMES = ["ours (PostgresManager)", "ours (tokio-postgres)", "deadpool-postgres", "bb8-postgres"]
pairs = {}
for d in sys.argv[1:]:
    rows = [r for r in json.load(open(f"{d}/compare.json"))["s7"] if r["family"] == "tokio-postgres"]
    for c in sorted({r["connections"] for r in rows}):
        here = {r["pool"]: r["rounds"] for r in rows if r["connections"] == c and r.get("rounds")}
        for a, b in itertools.permutations([n for n in NAMES if n in here], 2):
            for x, y in zip(here[a], here[b]):
                pairs.setdefault((c, a, b), []).append(x / y)
for (c, a, b), v in sorted(pairs.items()):
    if a.startswith("ours") and not b.startswith("ours") or (a == "deadpool-postgres" and b == "bb8-postgres") or (a, b) == ("ours (PostgresManager)", "ours (tokio-postgres)"):
        wins = sum(x >= 1 for x in v)
        print(f"{c:4} conns  {a:24} / {b:24} median {statistics.median(v):.2f}x, "
              f"range {min(v):.2f}-{max(v):.2f}, at or above 1.0x in {wins} of {len(v)} rounds")
