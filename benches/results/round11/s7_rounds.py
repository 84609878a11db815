#!/usr/bin/env python3
"""S7, tokio-postgres family, round by round (round i of every contestant
ran back to back), over every round of every run given:

  pairs  the median of A / B for ours over each peer, the peers over each
         other, and ours over ours;
  null   every contestant over the best of the others in its round. If the
         contestants were equally fast, each would read below 1.0x by this
         measure (the best of several noisy figures beats one of them): the
         spread of the peers' own readings is the noise a ratio lives in.

Usage: s7_rounds.py pairs|null DIR..."""
import itertools, json, statistics, sys

NAMES = ["ours (PostgresManager)", "ours (tokio-postgres)", "deadpool-postgres", "bb8-postgres"]

def rounds(dirs):
    """(connections, {contestant: [rps per round]}) per run and connection count."""
    for d in dirs:
        rows = [r for r in json.load(open(f"{d}/compare.json"))["s7"] if r["family"] == "tokio-postgres"]
        for c in sorted({r["connections"] for r in rows}):
            yield c, {r["pool"]: r["rounds"] for r in rows if r["connections"] == c and r.get("rounds")}

def pairs(dirs):
    got = {}
    for c, here in rounds(dirs):
        for a, b in itertools.permutations([n for n in NAMES if n in here], 2):
            got.setdefault((c, a, b), []).extend(x / y for x, y in zip(here[a], here[b]))
    for (c, a, b), v in sorted(got.items()):
        if (a.startswith("ours") and not b.startswith("ours")) or (a, b) in (
            ("deadpool-postgres", "bb8-postgres"), ("ours (PostgresManager)", "ours (tokio-postgres)")):
            wins = sum(x >= 1 for x in v)
            print(f"{c:4} conns  {a:24} / {b:24} median {statistics.median(v):.2f}x, "
                  f"range {min(v):.2f}-{max(v):.2f}, at or above 1.0x in {wins} of {len(v)} rounds")

def null(dirs):
    got = {}
    for c, here in rounds(dirs):
        names = [n for n in NAMES if n in here]
        for i in range(min(len(v) for v in here.values())):
            for n in names:
                best = max(here[m][i] for m in names if m != n)
                got.setdefault((c, n), []).append(here[n][i] / best)
    for (c, n), v in sorted(got.items()):
        q = statistics.quantiles(v, n=4)
        print(f"{c:4} conns  {n:24} over the best of the others: median {statistics.median(v):.2f}x, "
              f"quartiles {q[0]:.2f}-{q[2]:.2f}, range {min(v):.2f}-{max(v):.2f} ({len(v)} rounds)")

if len(sys.argv) < 3 or sys.argv[1] not in ("pairs", "null"):
    sys.exit(__doc__)
{"pairs": pairs, "null": null}[sys.argv[1]](sys.argv[2:])
