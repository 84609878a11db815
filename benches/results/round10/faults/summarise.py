#!/usr/bin/env python3
"""Per run of `faults --faults stop` (or `none`, the control): the 90 % mark, the ok/s of the second
before the fault and of the last second, and (main's --timeline runs) when
our pool was full. Usage: summarise.py FILE..."""
import re, sys

for path in sys.argv[1:]:
    rows, fulls = [], []
    for line in open(path):
        if line.startswith("| stop") or line.startswith("| no fault"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows.append((cells[1], cells[5], cells[6]))
        m = re.search(r"full \(16 open\) from (.*)", line)
        if m:
            fulls.append(m.group(1).strip())
        if line.startswith("timeline") and "deadpool" in line:
            fulls.append("-")
    print(path)
    for i, (pool, ninety, rates) in enumerate(rows):
        full = fulls[i] if i < len(fulls) else "-"
        print(f"  {pool:20} 90 %: {ninety:8} ok/s before / last: {rates:16} full: {full}")
    for pool in dict.fromkeys(r[0] for r in rows):
        marks = [r[1] for r in rows if r[0] == pool]
        met = sum(1 for m in marks if m == "100 ms")
        print(f"  {pool}: within 100 ms in {met} of {len(marks)}")
