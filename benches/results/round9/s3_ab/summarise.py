import json,glob,statistics as st,sys
def pl(p):
    a,b=p
    fa,fb=a>180,b>180
    return ('far' if fa else 'near') if fa==fb else 'mixed'
rows={}
for f in sorted(glob.glob(sys.argv[1])):
    build=f.split('/')[-2].split('_')[1]
    d=json.load(open(f))
    by={}
    for r in d['s3']:
        by[(r['pool'],r['pool_size'])]=r
    for size in (1,2,4):
        o=by[('ours',size)]; fl=by[('floor',size)]; dp=by[('deadpool',size)]
        for i in range(len(o['runs'])):
            rows.setdefault((build,size),[]).append((o['runs'][i]/fl['runs'][i], o['runs'][i]/dp['runs'][i], pl(o['placement_ns'][i]), o['runs'][i]))
        rows.setdefault((build,size,'max'),[]).append((o['wait_us'][2], dp['wait_us'][2], fl['wait_us'][2], o['jain']))
for k in sorted(rows):
    if len(k)==2:
        v=rows[k]
        near=[x for x in v if x[2]=='near']; far=[x for x in v if x[2]=='far']
        def s(l,j): return f"{st.median([x[j] for x in l]):.2f} [{min(x[j] for x in l):.2f}-{max(x[j] for x in l):.2f}] n={len(l)}" if l else '-'
        print(k, 'ours/floor all', s(v,0), '| near', s(near,0), '| far', s(far,0), '| ours/deadpool all', s(v,1))
    else:
        v=rows[k]
        print(k, 'max wait ms ours/deadpool/floor:', ' '.join(f"{a/1000:.1f}/{b/1000:.1f}/{c/1000:.1f}" for a,b,c,j in v), 'ours<=deadpool in', sum(1 for a,b,c,j in v if a<=b),'of',len(v), 'jain min', min(j for *_,j in v))
