"""A graph that copies from pinned host memory, as a serving stack does when it stages a
batch's token ids on the host: no core can hold host memory, so export must refuse it,
naming the template, the node, the direction and the host address.

    python -m gnomon.torch python/ports/host_copy.py OUT   # exits 0 when refused as it should
"""

import sys

import torch

import gnomon.torch as gt


def main(out):
    gt.use_arena("1GiB")
    staged = torch.arange(256, dtype=torch.int64).pin_memory()
    tokens = torch.zeros(256, dtype=torch.int64, device="cuda")
    doubled = torch.zeros_like(tokens)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g, pool=gt.graph_pool()):
        tokens.copy_(staged, non_blocking=True)
        torch.mul(tokens, 2, out=doubled)
    try:
        gt.export({"stage": g}, out, inputs={"tokens": tokens}, outputs={"stage": {"doubled": doubled}})
    except RuntimeError as refused:
        said = str(refused)
        print(f"refused: {said}")
        expected = ["template `stage`", "from host memory at 0x", f"{staged.data_ptr():x}"]
        return 0 if all(e in said for e in expected) else 1
    print("exported a graph that copies from host memory")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
