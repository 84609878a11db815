#!/usr/bin/env python3
"""run.sh's pgbench logs: per run, the rate of the last second before the
pause (run a) and of each 100 ms window of run b from its first
transaction, and when run b's first 100 ms window at 90 % of that rate
ends. Usage: summarise.py LOGDIR"""
import glob, os, re, sys, collections

def stamps(prefix):
    out = []
    for f in glob.glob(prefix + ".*"):
        for line in open(f):
            p = line.split()
            out.append(int(p[4]) * 1_000_000 + int(p[5]))
    out.sort()
    return out

d = sys.argv[1]
names = sorted({re.sub(r"_[ab]\..*$", "", os.path.basename(f)) for f in glob.glob(f"{d}/*_a.*")})
marks = collections.defaultdict(list)
for n in names:
    a = stamps(f"{d}/{n}_a"); b = stamps(f"{d}/{n}_b")
    end = a[-1]
    before = sum(1 for t in a if t > end - 1_000_000)
    start = b[0]
    wins = collections.Counter((t - start) // 100_000 for t in b)
    bar = 0.9 * before / 10
    mark = next((i + 1 for i in range(20) if wins.get(i, 0) >= bar), None)
    first = " ".join(str(wins.get(i, 0)) for i in range(10))
    last = sum(1 for t in b if t > b[-1] - 1_000_000)
    mode, kind, rep = n.split("_")
    marks[(mode, kind)].append(mark)
    print(f"{n:22} second before {before:6}/s, last second {last:6}/s, bar {bar:6.0f} per 100 ms; "
          f"first ten windows: {first}; 90 % at {mark * 100 if mark else 'never'} ms")
for (mode, kind), m in sorted(marks.items()):
    print(f"{mode:9} {kind:8} 90 % marks (ms): {' '.join(str(x * 100) if x else 'never' for x in m)}")
