"""Per placement (valid rows only) medians of S2/S3 throughput across alternating `compare`
runs: each repeat is classified by its own placement probe."""
import json,glob,statistics as st,sys
def pl(p):
    a,b=p; fa,fb=a>180,b>180
    return ('far' if fa else 'near') if fa==fb else 'mixed'
acc={}
for f in sorted(glob.glob(sys.argv[1])):
    build=f.split('/')[-2].split('_')[1]
    d=json.load(open(f))
    for key in ('s2','s3'):
        for r in d[key]:
            name=r['pool'] if r['pool']!='ours' else 'ours-'+build
            if not r['valid']: continue
            for x,p in zip(r['runs'],r['placement_ns']):
                acc.setdefault((key,r['pool_size'],r['tasks'],pl(p)),{}).setdefault(name,[]).append(x)
for k in sorted(acc):
    if k[3]=='mixed': continue
    v={n:st.median(x) for n,x in acc[k].items()}
    peers={n:m for n,m in v.items() if n in ('deadpool','bb8','qp','mobc','fastpool')}
    if not peers: continue
    best=max(peers,key=peers.get)
    cells=[]
    for n in ('ours-new','ours-9ec','ours-base'):
        if n in v: cells.append(f"{n} {v[n]/1e6:.2f}M (n={len(acc[k][n])}) {v[n]/peers[best]:.2f}x {best}, {v[n]/v['floor']:.2f}x floor" if 'floor' in v else f"{n} {v[n]/1e6:.2f}M")
    print(f"{k[0]} {k[1]}x{k[2]} {k[3]}: "+' | '.join(cells))
