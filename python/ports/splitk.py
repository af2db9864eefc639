"""A 4-layer fp16 MLP whose every GEMM is a Triton split-K kernel: each of SPLIT_K
programs multiplies a slice of K and adds its partial sums into an fp32 output with
`tl.atomic_add`, so the order of the adds, and the last bits of every sum, change from
launch to launch. Every template varies, so no bitwise template can rescue a wrong port:
the port on which a judge of varying outputs shows its sensitivity alone.

    python -m gnomon.torch python/ports/splitk.py --out DIR [--plant weight:1e-4 --against CORE]

Per batch size one graph: x (fp16) → [zero the fp32 sums, split-K GEMM, GELU, cast to
fp16] × 4 → the last layer's fp32 sums (`y`) and its fp16 activations (`h`). `--plant`
(`plant.py`): `weight:REL` perturbs the second layer's weight, `skip-layer` skips the
third layer, `unwritten` adds a scratch tensor no node writes (times 0) to the first
layer's input: a port that reads memory it never writes, exported with its own
expectations (no `--against`).
"""

import argparse

import torch
import triton
import triton.language as tl

import gnomon.torch as gt

import plant

WIDTHS = (1024, 4096, 1024, 4096, 1024)
BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K = 16, 64, 64, 8


@triton.jit
def splitk_gemm(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                SPLIT_K: tl.constexpr):
    """c[M, N] += a[M, K] @ b[K, N] over one K slice per program on axis 2 (row-major)."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    per = K // SPLIT_K
    start = tl.program_id(2) * per
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(start, start + per, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(a + rm[:, None] * K + rk[None, :], mask=rm[:, None] < M, other=0.0)
        w = tl.load(b + rk[:, None] * N + rn[None, :], mask=rn[None, :] < N, other=0.0)
        acc += tl.dot(x, w)
    tl.atomic_add(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def gemm(x, w):
    m, k = x.shape
    n = w.shape[1]
    sums = torch.zeros(m, n, device="cuda", dtype=torch.float32)
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N), SPLIT_K)
    splitk_gemm[grid](x, w, sums, m, n, k, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, SPLIT_K=SPLIT_K)
    return sums


def weights():
    torch.manual_seed(0)
    return [(torch.randn(i, o, device="cuda") * i ** -0.5).half() for i, o in zip(WIDTHS, WIDTHS[1:])]


def step(ws, x, skip=None, unwritten=False):
    h = x + torch.empty_like(x) * 0 if unwritten else x
    sums = None
    for i, w in enumerate(ws):
        if i == skip:
            continue
        sums = gemm(h, w)
        h = torch.nn.functional.gelu(sums).half()
    return sums, h


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batches", default="64,16")
    p.add_argument("--out", required=True)
    p.add_argument("--summary")
    p.add_argument("--launches", type=int, default=gt.DEFAULT_LAUNCHES)
    plant.arguments(p)
    a = p.parse_args()
    kind, rel = plant.kind(a.plant) if a.plant else (None, None)
    if kind == "kv-slot":
        raise SystemExit("splitk.py has no KV cache to write one slot off")
    gt.use_arena("2GiB")
    ws = weights()
    xs = {b: torch.randn(b, WIDTHS[0], device="cuda").half() for b in sorted(map(int, a.batches.split(",")))}
    skip, unwritten = (2 if kind == "skip-layer" else None), kind == "unwritten"
    for x in xs.values():  # Triton compiles before any capture
        step(ws, x, skip, unwritten)
    torch.cuda.synchronize()
    graphs, outputs = {}, {}
    pool = gt.graph_pool()
    for b, x in xs.items():
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g, pool=pool):
            y, h = step(ws, x, skip, unwritten)
        graphs[f"b{b}"], outputs[f"b{b}"] = g, {"y": y, "h": h}
    torch.cuda.synchronize()
    changed = plant.perturb(ws[1], rel) if kind == "weight" else None
    summary = gt.export(graphs, a.out, weights={f"w{i}": w for i, w in enumerate(ws)},
                        inputs={f"x-b{b}": x for b, x in xs.items()}, outputs=outputs, launches=a.launches)
    if a.against:
        plant.splice(a.against, a.out)
        summary.update(plant=a.plant, against=a.against, changed=changed)
    gt.report(summary, a.summary)


if __name__ == "__main__":
    main()
