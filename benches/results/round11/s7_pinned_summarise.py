#!/usr/bin/env python3
"""S7 with wrk on a core of its own: each of ours over the best valid peer
of its family in the same run (medians of the run's interleaved rounds),
and, where the run kept them, the same ratio round by round (round i of
every pool ran back to back).
Usage: s7_pinned_summarise.py DIR..."""
import json, sys

FAMILIES = {
    "tokio-postgres": (("ours (PostgresManager)", "ours (tokio-postgres)"),
                       {"deadpool-postgres", "bb8-postgres"}),
    "sqlx": (("ours (sqlx)",), {"sqlx PgPool"}),
}

for d in sys.argv[1:]:
    rows = json.load(open(f"{d}/compare.json"))["s7"]
    print(d)
    for fam, (ours_names, peers) in FAMILIES.items():
        for c in sorted({r["connections"] for r in rows}):
            here = [r for r in rows if r["family"] == fam and r["connections"] == c]
            p = [r for r in here if r["pool"] in peers and r["valid"]]
            if not p:
                continue
            best = max(p, key=lambda r: r["rps"])
            for name in ours_names:
                o = [r for r in here if r["pool"] == name]
                if not o:
                    continue
                o = o[0]
                line = (f"  {fam:14} {c:4} conns  {name:24} {o['rps']/1e3:5.1f} k "
                        f"(p99 {o['latency_us'][1]:6.0f} us), {best['pool']} "
                        f"{best['rps']/1e3:5.1f} k (p99 {best['latency_us'][1]:6.0f} us) "
                        f"-> {o['rps']/best['rps']:.2f}x{'' if o['valid'] else ' INVALID'}")
                rounds = o.get("rounds")
                if rounds and all(len(r.get("rounds", [])) == len(rounds) for r in p):
                    per = [x / max(r["rounds"][i] for r in p) for i, x in enumerate(rounds)]
                    line += "; by round " + " ".join(f"{x:.2f}" for x in per)
                print(line)
