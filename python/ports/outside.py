"""Eager work outside the arena, and a graph that reads it: `gnomon.torch.outside_arena()`
keeps a prefill's tensors in PyTorch's own pool, which no core maps. A graph that reads
only the arena exports while such a tensor is alive; a graph that reads such a tensor must
be refused, naming the template, the node, the kernel's parameter and the pool, and saying
that changing the tensor changed its output.

    python -m gnomon.torch python/ports/outside.py OUT   # exits 0 when both come out so

Both exports run in one process: the second once crashed it, when the recorder handed the
driver a library the first export had unloaded.
"""

import argparse
import os
import sys

import torch

import gnomon.torch as gt


def capture(x, y, out):
    """A graph computing `out = x + y`, captured as the kit asks."""
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g, pool=gt.graph_pool()):
        torch.add(x, y, out=out)
    return g


def export(out):
    gt.use_arena("1GiB")
    x, y, total = (torch.full((1 << 20,), float(v), device="cuda") for v in (1, 2, 0))
    with gt.outside_arena():
        prefill = torch.full((1 << 20,), 3.0, device="cuda")
    kept = gt.export({"inside": capture(x, y, total)}, os.path.join(out, "inside"), inputs={"x": x, "y": y},
                     outputs={"inside": {"total": total}})
    print(f"reading the arena only, with a tensor alive outside it: exported, {kept['nodes']} nodes")
    try:
        gt.export({"reads-prefill": capture(x, prefill, total)}, os.path.join(out, "outside"), inputs={"x": x},
                  outputs={"reads-prefill": {"total": total}})
    except RuntimeError as refused:
        said = str(refused)
        print(f"refused: {said}")
        expected = ["template `reads-prefill`", "parameter", f"{prefill.data_ptr():x}", "PyTorch's default pool",
                    "changed beyond what its launches gave"]
        return 0 if all(e in said for e in expected) else 1
    print("exported a graph that reads a tensor outside the arena")
    return 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    return export(p.parse_args().out)


if __name__ == "__main__":
    sys.exit(main())
