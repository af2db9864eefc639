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
"""

import argparse

import torch
import torch.nn.functional as F

import gnomon.torch as gt

HIDDEN, FFN, EXPERTS, TOP = 1024, 2048, 8, 2


def weights():
    torch.manual_seed(0)
    scale = HIDDEN ** -0.5
    return {
        "router": torch.randn(HIDDEN, EXPERTS, device="cuda") * scale,
        "up": torch.randn(EXPERTS, HIDDEN, FFN, device="cuda") * scale,
        "down": torch.randn(EXPERTS, FFN, HIDDEN, device="cuda") * FFN ** -0.5,
    }


def step(w, x):
    gates = torch.softmax(x @ w["router"], dim=-1)
    top, chosen = gates.topk(TOP, dim=-1)
    top = top / top.sum(-1, keepdim=True)
    experts = torch.bmm(F.silu(torch.bmm(x.expand(EXPERTS, -1, -1), w["up"])), w["down"])  # E, T, H
    picked = experts.permute(1, 0, 2).gather(1, chosen[..., None].expand(-1, -1, HIDDEN))  # T, TOP, H
    combined = (picked * top[..., None]).sum(1)
    load = torch.zeros(EXPERTS, device="cuda").index_add_(0, chosen.flatten(), top.flatten())
    balance = (load / load.sum()).index_select(0, chosen[:, 0])
    return combined * (1 + balance[:, None]), load


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batches", default="4096,2048")
    p.add_argument("--out", required=True)
    p.add_argument("--summary")
    p.add_argument("--launches", type=int, default=gt.DEFAULT_LAUNCHES)
    p.add_argument("--deterministic", action="store_true")
    a = p.parse_args()
    if a.deterministic:
        gt.deterministic()
    gt.use_arena("4GiB")
    w = weights()
    batches = sorted((int(b) for b in a.batches.split(",")), reverse=True)
    xs = {b: torch.randn(b, HIDDEN, device="cuda") for b in batches}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for b in batches:
            step(w, xs[b])
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graphs, outputs = {}, {}
    pool = gt.graph_pool()
    for b in batches:
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g, pool=pool):
            out, load = step(w, xs[b])
        graphs[f"t{b}"], outputs[f"t{b}"] = g, {"out": out, "load": load}
    summary = gt.export(graphs, a.out, weights=w, inputs={f"x-t{b}": x for b, x in xs.items()}, outputs=outputs,
                        launches=a.launches)
    gt.report(summary, a.summary)


if __name__ == "__main__":
    main()
