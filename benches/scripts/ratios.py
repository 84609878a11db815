#!/usr/bin/env python3
"""Ours over each peer, from one or more `compare.json` (full runs of
`compare`), as BENCH.md's side-by-side tables: one cell per run,
"run 1 / run 2 / ...", each ratio taken within its own run.

    python3 benches/scripts/ratios.py benches/out/compare.json [more.json ...]

Above 1.0x ours is faster: throughput ours / theirs; S1 ns theirs / ours.
An invalid peer run (stuck, unfair, errors) is marked with a cross.
The database tables use ours over pool-core's `PostgresManager` for the
tokio-postgres family (the benches' local manager in runs without it) and the benches' sqlx manager for sqlx."""
import json
import sys

NOOP = ["deadpool", "bb8", "qp", "mobc", "fastpool", "floor"]


def ratio(x, valid=True):
    return f"{x:.2f}×" + ("" if valid else " ✗")


def si(v):
    return f"{v / 1e6:.2f} M" if v >= 1e6 else f"{v / 1e3:.0f} k"


def joined(cells):
    return " / ".join(cells)


def noop_table(runs):
    print("| point | ours | " + " | ".join(NOOP) + " |")
    print("|---|---:|" + "---:|" * len(NOOP))

    def row(label, pick, show):
        picked = [pick(d) for d in runs]
        cells = [joined(ratio(*m[p]) for _, m in picked) for p in NOOP]
        print(f"| {label} | {joined(show(o) for o, _ in picked)} | " + " | ".join(cells) + " |")

    def s1(d):
        by = {r["pool"]: r for r in d["s1"] if r["pool"] in NOOP + ["ours"]}
        ours = by["ours"]["ns_per_cycle"]
        return ours, {p: (by[p]["ns_per_cycle"] / ours, by[p]["valid"]) for p in NOOP}

    def loaded(key, size, tasks):
        def pick(d):
            by = {r["pool"]: r for r in d[key] if r["pool_size"] == size and r["tasks"] == tasks}
            ours = by["ours"]["cycles_per_sec"]
            return ours, {p: (ours / by[p]["cycles_per_sec"], by[p]["valid"]) for p in NOOP}
        return pick

    if all(d["s1"] for d in runs):
        row("S1 get + drop, ns", s1, lambda x: f"{x:.1f} ns")
    points = sorted({(r["pool_size"], r["tasks"]) for r in runs[0]["s2"]})
    for size, tasks in points:
        row(f"S2 pool {size} × {tasks} tasks", loaded("s2", size, tasks), si)
    for size, tasks in sorted({(r["pool_size"], r["tasks"]) for r in runs[0]["s3"]}):
        row(f"S3 pool {size} × {tasks} tasks", loaded("s3", size, tasks), si)
    for d in runs:
        if d["s4"]:
            print("S4 (pool, opened, ms to serve all):",
                  ", ".join(f"{r['pool']} {int(r['opened'])} {round(r['serve_all_ms'])}" for r in d["s4"]))


def db_table(runs, key, load_key, loads, rate, extra=lambda r: True):
    if not all(d[key] for d in runs):
        return
    print()
    print(f"| {key.upper()} row | ours (PostgresManager) | vs deadpool-postgres | vs bb8-postgres "
          "| ours (sqlx) | vs sqlx PgPool |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, want in loads:
        cols = [[] for _ in range(5)]
        for d in runs:
            by = {r["pool"]: r for r in d[key] if want(r)}
            # Runs older than the crate's manager have only the local one.
            ours = by.get("ours (PostgresManager)") or by["ours (tokio-postgres)"]
            sqlx = by["ours (sqlx)"]
            cols[0].append(si(ours[rate]))
            for i, peer in ((1, "deadpool-postgres"), (2, "bb8-postgres")):
                cols[i].append(ratio(ours[rate] / by[peer][rate], by[peer]["valid"]))
            cols[3].append(si(sqlx[rate]))
            cols[4].append(ratio(sqlx[rate] / by["sqlx PgPool"][rate], by["sqlx PgPool"]["valid"]))
        print(f"| {label} | " + " | ".join(joined(c) for c in cols) + " |")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    runs = [json.load(open(path)) for path in sys.argv[1:]]
    noop_table(runs)
    s5_rows = [(f"{t} tasks, validation {'on' if v else 'off'}",
                lambda r, t=t, v=v: r["tasks"] == t and r["validate"] == v)
               for v in (False, True) for t in (16, 256)]
    db_table(runs, "s5", "tasks", s5_rows, "qps")
    s7_rows = [(f"wrk -c{c}", lambda r, c=c: r["connections"] == c) for c in (16, 128)]
    db_table(runs, "s7", "connections", s7_rows, "rps")


main()
