import sys,re,statistics as st
from collections import defaultdict
rat=defaultdict(list); q=defaultdict(list); loads=defaultdict(list)
cur=None; runs={}
def flush():
    if cur and runs:
        b,t,v,l=cur
        peer=max(runs.get('deadpool-postgres',0),runs.get('bb8-postgres',0))
        if 'ours (PostgresManager)' in runs and peer>0:
            rat[(t,v,b)].append(runs['ours (PostgresManager)']/peer)
        for k,x in runs.items(): q[(t,v,b,k)].append(x)
        loads[(t,v,b)].append(l)
for line in open(sys.argv[1]):
    m=re.match(r'## build=(\w+) round=\d+ tasks=(\d+) validation=(\w+) load=([\d.]+)',line)
    if m:
        flush(); cur=(m[1],int(m[2]),m[3],float(m[4])); runs={}; continue
    m=re.match(r'tasks=\d+ validation=\w+ run \d+ (.+?)\s{2,}(\d+) qps',line)
    if m: runs[m[1].strip()]=float(m[2])
flush()
print('| tasks | validation | build | ours qps (median) | deadpool-postgres | bb8-postgres | ours / best peer per run | median ratio | load (1 min) |')
print('|---:|---|---|---:|---:|---:|---|---:|---|')
for (t,v,b) in sorted(rat):
    f=lambda k: st.median(q[(t,v,b,k)]) if q[(t,v,b,k)] else 0
    print(f"| {t} | {v} | {b} | {f('ours (PostgresManager)')/1e3:.1f} k | {f('deadpool-postgres')/1e3:.1f} k | {f('bb8-postgres')/1e3:.1f} k | {' '.join('%.2f'%x for x in rat[(t,v,b)])} | {st.median(rat[(t,v,b)]):.2f}× | {' '.join('%.1f'%x for x in loads[(t,v,b)])} |")
