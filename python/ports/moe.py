"""A mixture-of-experts step whose routing statistics are summed with `index_add_`, a
kernel that adds floats atomically and so is not bitwise reproducible from launch to
launch (PyTorch lists it among the nondeterministic operations): the port that shows how
the kit records an output that varies, and how `gnomon qualify` judges it.

    python -m gnomon.torch python/ports/moe.py --out DIR [--deterministic] [--launches N]

Per batch size one graph: a router picks the top 2 of 8 experts for each token, every
expert runs densely (no data-dependent shapes, so the step captures), the outputs are
combined by the routing weights, and the experts' load (the routing weights summed per
expert, thousands of atomic adds into 8 floats) scales the result, as auxiliary-loss-free
balancing does. `--deterministic` calls `gnomon.torch.deterministic()` first, so
`index_add_` takes PyTorch's deterministic path and the export demands bitwise outputs.

`--experts 32 --top 8 --combine index-add --dtype bfloat16` is the many-way combine: each
token's eight expert outputs are added into its row with `index_add_` (atomics in bf16),
so every element of the output may vary. `--plant KIND --against CORE` exports a planted
core (`plant.py`; `skip-layer` drops expert 0's output, `weight` perturbs the experts' down
projections, `kv-slot` has no cache to miss).
"""

import argparse

import torch
import torch.nn.functional as F

import gnomon.torch as gt

import plant

HIDDEN, FFN = 1024, 2048


def weights(experts, dtype):
    torch.manual_seed(0)
    scale = HIDDEN ** -0.5
    return {
        "router": (torch.randn(HIDDEN, experts, device="cuda") * scale).to(dtype),
        "up": (torch.randn(experts, HIDDEN, FFN, device="cuda") * scale).to(dtype),
        "down": (torch.randn(experts, FFN, HIDDEN, device="cuda") * FFN ** -0.5).to(dtype),
    }


def step(w, x, top_k, combine, skip_expert=None):
    experts = w["router"].shape[1]
    gates = torch.softmax(x @ w["router"], dim=-1)
    top, chosen = gates.topk(top_k, dim=-1)
    top = top / top.sum(-1, keepdim=True)
    outs = torch.bmm(F.silu(torch.bmm(x.expand(experts, -1, -1), w["up"])), w["down"])  # E, T, H
    if skip_expert is not None:
        outs[skip_expert] = 0
    picked = outs.permute(1, 0, 2).gather(1, chosen[..., None].expand(-1, -1, HIDDEN))  # T, TOP, H
    weighted = picked * top[..., None]
    if combine == "index-add":
        rows = torch.arange(x.shape[0], device="cuda").repeat_interleave(top_k)
        combined = torch.zeros_like(x).index_add_(0, rows, weighted.reshape(-1, HIDDEN))
    else:
        combined = weighted.sum(1)
    load = torch.zeros(experts, device="cuda", dtype=x.dtype).index_add_(0, chosen.flatten(), top.flatten())
    balance = (load / load.sum()).index_select(0, chosen[:, 0])
    return combined * (1 + balance[:, None]), load


def capture(w, xs, top_k, combine, skip_expert=None):
    graphs, outputs = {}, {}
    pool = gt.graph_pool()
    for b, x in xs.items():
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g, pool=pool):
            out, load = step(w, x, top_k, combine, skip_expert)
        graphs[f"t{b}"], outputs[f"t{b}"] = g, {"out": out, "load": load}
    torch.cuda.synchronize()
    return graphs, outputs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batches", default="4096,2048")
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top", type=int, default=2)
    p.add_argument("--combine", choices=["sum", "index-add"], default="sum")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--out", required=True)
    p.add_argument("--summary")
    p.add_argument("--launches", type=int, default=gt.DEFAULT_LAUNCHES)
    p.add_argument("--deterministic", action="store_true")
    plant.arguments(p)
    a = p.parse_args()
    planted = plant.kind(a.plant) if a.plant else (None, None)
    if planted[0] in ("kv-slot", "unwritten"):
        raise SystemExit(f"moe.py plants no {planted[0]}: it has no KV cache, and splitk.py reads unwritten memory")
    if a.deterministic:
        gt.deterministic()
    gt.use_arena("8GiB")
    dtype = getattr(torch, a.dtype)
    w = weights(a.experts, dtype)
    batches = sorted((int(b) for b in a.batches.split(",")), reverse=True)
    xs = {b: torch.randn(b, HIDDEN, device="cuda").to(dtype) for b in batches}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for x in xs.values():
            step(w, x, a.top, a.combine)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    skip = 0 if planted[0] == "skip-layer" else None
    graphs, outputs = capture(w, xs, a.top, a.combine, skip)
    if planted[0] == "weight":
        changed = plant.perturb(w["down"], planted[1])
    summary = gt.export(graphs, a.out, weights=w, inputs={f"x-t{b}": x for b, x in xs.items()}, outputs=outputs,
                        launches=a.launches)
    if a.plant:
        plant.splice(a.against, a.out)
        summary.update(plant=a.plant, against=a.against, **({"changed": changed} if planted[0] == "weight" else {}))
    gt.report(summary, a.summary)


if __name__ == "__main__":
    main()
