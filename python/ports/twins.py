"""One Triton kernel compiled for two block sizes: one kernel name, two images, each
captured into its own graph. An exporter that maps kernels to images by name alone gives
one graph the other's kernel; the kit ties each module load to its image.

    python -m gnomon.torch python/ports/twins.py OUT
"""

import json
import sys

import torch
import triton
import triton.language as tl

import gnomon.torch as gt


@triton.jit
def scale(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + i, tl.load(x + i, mask=i < n) * 2.0 + BLOCK, mask=i < n)


def main(out):
    gt.record()
    gt.use_arena("1GiB")
    x = torch.arange(4096, device="cuda", dtype=torch.float32)
    outputs, graphs = {}, {}
    for block in (128, 256):
        y = torch.empty_like(x)
        scale[(4096 // block,)](x, y, 4096, BLOCK=block)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g, pool=gt.graph_pool()):
            scale[(4096 // block,)](x, y, 4096, BLOCK=block)
        graphs[f"block{block}"], outputs[f"block{block}"] = g, {f"y{block}": y}
    print(json.dumps(gt.export(graphs, out, inputs={"x": x}, outputs=outputs), indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
