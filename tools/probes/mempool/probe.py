import json, torch
import gnomon.torch as gt
from gnomon import _native
SIZE = 8 << 30
_native.use_arena(gt.DEFAULT_BASE, SIZE, 0)
inside = lambda p: gt.DEFAULT_BASE <= p < gt.DEFAULT_BASE + SIZE
alloc = torch.cuda.memory.CUDAPluggableAllocator(_native.__file__, "gnomon_torch_malloc", "gnomon_torch_free")
out = {}
def step(name, fn):
    try:
        out[name] = fn()
    except Exception as e:
        out[name] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
pool = torch.cuda.MemPool(alloc.allocator())
ctx = torch.cuda.use_mem_pool(pool)
ctx.__enter__()
w = torch.randn(4096, 4096, device="cuda"); x = torch.randn(64, 4096, device="cuda")
step("A-weight-in-arena", lambda: inside(w.data_ptr()))
step("A-reserved", lambda: torch.cuda.memory_reserved())
y = (x @ w).relu(); torch.cuda.synchronize()
step("E-segments-outside-arena", lambda: [hex(s["address"]) for s in torch.cuda.memory_snapshot() if not inside(s["address"])])
def capture(pool_arg):
    g = torch.cuda.CUDAGraph(keep_graph=True)
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        (x @ w).relu().sum(0)
    torch.cuda.current_stream().wait_stream(s)
    kw = {} if pool_arg is None else {"pool": pool_arg}
    with torch.cuda.graph(g, **kw):
        t = (x @ w).relu()
        r = t.sum(0)
    return g, r, t
step("B-pool-id", lambda: (lambda g, r, t: {"out-in-arena": inside(r.data_ptr()), "out": hex(r.data_ptr())})(*capture(pool.id)))
step("C-no-pool", lambda: (lambda g, r, t: {"out-in-arena": inside(r.data_ptr()), "out": hex(r.data_ptr())})(*capture(None)))
step("D-fresh-handle", lambda: (lambda g, r, t: {"out-in-arena": inside(r.data_ptr())})(*capture(torch.cuda.graph_pool_handle())))
# F: two captures into one shared pool: does the second reuse the first's freed blocks?
def shared():
    h = pool.id
    g1, r1, _ = capture(h); g2, r2, _ = capture(h)
    return {"r1": hex(r1.data_ptr()), "r2": hex(r2.data_ptr())}
step("F-shared", shared)
step("G-pool-snapshot", lambda: [(hex(s["address"]), s["total_size"], s.get("segment_pool_id"), [(b["size"], b["state"]) for b in s["blocks"]][:12]) for s in pool.snapshot()][:12])
step("G-all-snapshot-pools", lambda: sorted({str(s.get("segment_pool_id")) for s in torch.cuda.memory_snapshot()}))
step("H-max-reserved", lambda: torch.cuda.max_memory_reserved())
step("H-arena", lambda: gt.memory_stats())
print(json.dumps(out, indent=1))
