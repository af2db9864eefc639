import numpy as np, hashlib
N = 4 << 20
M = np.uint64(0xFFFFFFFFFFFFFFFF)
def hashed(seed):
    i = np.arange(N, dtype=np.uint64)
    with np.errstate(over='ignore'):
        z = i + np.uint64(seed) * np.uint64(0x9e3779b97f4a7c15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
        z ^= z >> np.uint64(31)
    return ((z >> np.uint64(40)).astype(np.float32) * np.float32(1.0/16777216.0) - np.float32(0.5)).astype(np.float32)
x = [hashed(100), hashed(101)]; w = [hashed(200), hashed(201)]
p = [x[0]*w[0], x[1]*w[1]]
def y(r, s): return (s*np.float32(0.5) + x[r]).astype(np.float32)
def sha(a): return hashlib.sha256(a.astype('<f4').tobytes()).hexdigest()
def f(byte): return np.full(N, np.frombuffer(bytes([byte])*4, dtype='<f4')[0], dtype=np.float32)
targets = {'8ed4fa':'expected r0','804c1c':'expected r1','cbe6ed':'MYSTERY r0','a7ded5':'MYSTERY r1','1f8d42':'plant r0','5e2144':'plant r1','93aaa5':'flags r0'}
for r in (0,1):
    q = 1 - r
    cands = {
      'correct': np.float32(0)+p[0]+p[1],
      'peer0': p[r] + np.float32(0),
      'own2': p[r] + p[r],
      'sum0': np.zeros(N, np.float32),
      'peer=a5': (np.float32(0)+p[0]+f(0xa5)) if r==0 else (np.float32(0)+f(0xa5)+p[1]),
      'peer=x': (p[0]+x[1]) if r==0 else (x[0]+p[1]),
      'peer=w': (p[0]+w[1]) if r==0 else (w[0]+p[1]),
      'peer=x*w_own': p[0]+x[q]*w[r] if r==0 else x[q]*w[r]+p[1],
      'peer=xown*wpeer': p[0]+x[r]*w[q] if r==0 else x[r]*w[q]+p[1],
      'peer=ypeer_prev': None,
    }
    for k, s in cands.items():
        if s is None: continue
        d = sha(y(r, s))
        print(r, k, d[:6], targets.get(d[:6], ''))
print('--- more')
S = np.float32(0)+p[0]+p[1]
for r in (0,1):
    q=1-r
    c = {
     'peer=sum': p[r] + S,
     'peer=ypeer': p[r] + y(q, S),
     'peer=nan': p[r] + f(0xff),
     'y=nan': None,
     'sum=S+S': S + S,
     'y=x+S (no half)': S*2,
     'sum=own x': x[r]*2,
     'peer=p in other rank order': p[q]+p[q],
    }
    for k,s in c.items():
        if s is None: continue
        d=sha(y(r,s)); print(r,k,d[:6],targets.get(d[:6],''))
    print(r,'y=nanconst', sha(f(0xff))[:6], sha(np.full(N, np.float32('nan')))[:6], sha(x[r])[:6])
