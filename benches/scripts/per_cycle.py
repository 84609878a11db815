#!/usr/bin/env python3
"""Instructions per cycle (an HTTP request for s7_cycles, a query for
s5_cycles) from the run scripts' raw lines "label pool load n total": for
every (label, load, pool), (total at 2N - total at N) / N, and ours over
the cheapest tokio-postgres peer (sqlx's PgPool for the sqlx manager) of
the same label and load, as peer's count / ours (above 1: ours is cheaper)."""
import sys
from collections import defaultdict

runs = defaultdict(dict)
for path in sys.argv[1:]:
    for line in open(path):
        repeat, pool, conns, n, total = line.split()
        runs[(repeat, conns, pool)][int(n)] = int(total)

per = {}
for key, counts in runs.items():
    ns = sorted(counts)
    if len(ns) == 2:
        lo, hi = ns
        per[key] = (counts[hi] - counts[lo]) / (hi - lo)

groups = sorted({(c, r) for (r, c, _) in per}, key=lambda x: (x[0].zfill(12), x[1]))
pools = ["ours-mgr", "ours-tp", "deadpool-pg", "bb8-pg", "ours-sqlx", "sqlx"]
for conns, repeat in groups:
    print(f"load {conns}, {repeat}:")
    row = {p: per.get((repeat, conns, p)) for p in pools}
    peers = [row[p] for p in ("deadpool-pg", "bb8-pg") if row[p]]
    best_tp = min(peers) if peers else None
    for p in pools:
        v = row[p]
        if v is None:
            continue
        note = ""
        if p in ("ours-mgr", "ours-tp") and best_tp:
            # cheaper is faster: the peer's count over ours
            note = f"   best tokio-postgres peer / this = {best_tp / v:.3f}x"
        if p == "ours-sqlx" and row.get("sqlx"):
            note = f"   PgPool / this = {row['sqlx'] / v:.3f}x"
        print(f"  {p:12} {v:9.1f}{note}")
