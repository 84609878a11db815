#!/usr/bin/env python3
"""S7, tokio-postgres family, round by round: every contestant over the
best of the other contestants of its family in the same round, then the
median of those ratios over every round of every run given. If the
contestants were equally fast, each would read below 1.0x by this measure
(the best of several noisy figures beats one of them): the spread of the
peers' own readings is the noise a single ratio lives in.
Usage: s7_null.py DIR..."""
import json, sys, statistics

NAMES = ["ours (PostgresManager)", "ours (tokio-postgres)", "deadpool-postgres", "bb8-postgres"]
ratios = {}
for d in sys.argv[1:]:
    rows = [r for r in json.load(open(f"{d}/compare.json"))["s7"] if r["family"] == "tokio-postgres"]
    for c in sorted({r["connections"] for r in rows}):
        here = {r["pool"]: r["rounds"] for r in rows if r["connections"] == c and r.get("rounds")}
        names = [n for n in NAMES if n in here]
        n_rounds = min(len(v) for v in here.values())
        for i in range(n_rounds):
            for n in names:
                others = max(here[m][i] for m in names if m != n)
                ratios.setdefault((c, n), []).append(here[n][i] / others)
for (c, n), v in sorted(ratios.items()):
    q = statistics.quantiles(v, n=4)
    print(f"{c:4} conns  {n:24} over the best of the others: median {statistics.median(v):.2f}x, "
          f"quartiles {q[0]:.2f}-{q[2]:.2f}, range {min(v):.2f}-{max(v):.2f} ({len(v)} rounds)")
