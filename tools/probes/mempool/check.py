"""The kit's arena under PyTorch's caching allocator, checked in a live process: where
tensors and captured graphs land, whether captures share and reuse one pool, whether
PyTorch's statistics work, and what becomes of a capture given no pool.

    python3 -m gnomon.torch check.py OUT_CORE > check.json
"""

import json
import sys

import torch

import gnomon.torch as gt

mapped = gt.use_arena("4GiB")
inside = lambda t: gt.DEFAULT_BASE <= t.data_ptr() < gt.DEFAULT_BASE + mapped
said = {}
w = torch.randn(2048, 2048, device="cuda")
x = torch.randn(64, 2048, device="cuda")
said["weight-in-arena"] = inside(w)
said["memory-reserved"] = torch.cuda.memory_reserved()


def capture(pool):
    g = torch.cuda.CUDAGraph(keep_graph=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        (x @ w).relu().sum(0)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(g, **pool):
        t = (x @ w).relu()
        intermediate = t.data_ptr()
        r = t.sum(0)
    return g, r, intermediate


a, ra, ta = capture({"pool": gt.graph_pool()})
b, rb, tb = capture({"pool": gt.graph_pool()})
eager = torch.empty(64, 2048, device="cuda")
said["graph-outputs-in-arena"] = [inside(ra), inside(rb)]
said["second-capture-reuses-the-firsts-freed-intermediate"] = ta == tb
said["eager-tensor-after-captures-takes-a-graphs-block"] = eager.data_ptr() in (ta, tb)
said["memory-reserved-after"] = torch.cuda.memory_reserved()
said["max-memory-reserved"] = torch.cuda.max_memory_reserved()
said["kit-arena"] = gt.memory_stats()
summary = gt.export({"a": a, "b": b}, sys.argv[1], weights={"w": w}, inputs={"x": x},
                    outputs={"a": {"r": ra}, "b": {"r": rb}})
said["export"] = {k: summary[k] for k in ("templates", "nodes", "arena") if k in summary}
c, rc, _ = capture({})
try:
    gt.export({"c": c}, sys.argv[1] + "-no-pool", inputs={"x": x}, outputs={"c": {"r": rc}})
    said["capture-given-no-pool"] = "exported"
except RuntimeError as refused:
    said["capture-given-no-pool"] = f"refused: {refused}"
print(json.dumps(said, indent=1))
