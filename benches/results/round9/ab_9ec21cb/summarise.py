"""Summarises alternating `compare` runs: ours against the best valid peer
(and the floor) per row, per run, and S2/S3 by the cores' placement."""
import json, glob, statistics as st, sys
PEERS_SYN = ('deadpool', 'bb8', 'qp', 'mobc', 'fastpool')
def pl(p):
    a, b = p; fa, fb = a > 180, b > 180
    return ('far' if fa else 'near') if fa == fb else 'mixed'
files = sorted(glob.glob(sys.argv[1]))
out = {}
for f in files:
    run = f.split('/')[-2]
    d = json.load(open(f))
    s1 = {r['pool']: r['ns_per_cycle'] for r in d['s1']}
    peers = [s1[p] for p in PEERS_SYN if p in s1]
    print(f"== {run}")
    print(f"S1 ns ours {s1['ours']:.1f} qp {s1.get('qp', float('nan')):.1f} floor {s1['floor']:.1f}  best peer/ours {min(peers)/s1['ours']:.2f}x")
    for key, label in (('s2', 'S2'), ('s3', 'S3')):
        rows = {}
        for r in d[key]:
            rows[(r['pool_size'], r['tasks'], r['pool'])] = r
        for (size, tasks) in sorted({(k[0], k[1]) for k in rows}):
            o = rows[(size, tasks, 'ours')]
            best = max((rows[(size, tasks, p)] for p in PEERS_SYN if (size, tasks, p) in rows and rows[(size, tasks, p)]['valid']), key=lambda r: r['cycles_per_sec'])
            fl = rows[(size, tasks, 'floor')]
            line = f"{label} {size}x{tasks}: ours {o['cycles_per_sec']/1e6:.2f}M / best {best['pool']} {best['cycles_per_sec']/1e6:.2f}M = {o['cycles_per_sec']/best['cycles_per_sec']:.2f}x; /floor {o['cycles_per_sec']/fl['cycles_per_sec']:.2f}"
            if key == 's3':
                dp = rows[(size, tasks, 'deadpool')]
                line += f"; Jain {o['jain']:.3f}; max wait ours {o['wait_us'][2]/1e3:.1f} ms deadpool {dp['wait_us'][2]/1e3:.1f} ms; p99 {o['wait_us'][1]:.0f}/{dp['wait_us'][1]:.0f} us"
            pls = [pl(p) for p in o['placement_ns']]
            line += f"  [{','.join(pls)}]"
            print(line)
    for key, label, metric, col in (('s5', 'S5', 'qps', 'tasks'), ('s7', 'S7', 'rps', 'connections')):
        rows = d.get(key) or []
        groups = {}
        for r in rows:
            g = (r['family'], r[col], r.get('validate'))
            groups.setdefault(g, []).append(r)
        for g, rs in sorted(groups.items(), key=lambda x: str(x[0])):
            ours = [r for r in rs if r['pool'].startswith('ours')]
            others = [r for r in rs if not r['pool'].startswith('ours') and r['valid']]
            if not ours or not others: continue
            best = max(others, key=lambda r: r[metric])
            o = ours[0]
            print(f"{label} {g[0]} {col}={g[1]} validate={g[2]}: ours {o[metric]/1e3:.1f}k / {best['pool']} {best[metric]/1e3:.1f}k = {o[metric]/best[metric]:.2f}x")
