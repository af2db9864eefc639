"""`torch.compile(mode="reduce-overhead")`, as most Hugging Face users get their CUDA
graphs, under the arena: refused when `torch.compile` is called, before anything is
compiled or captured; graph trees turned on through Inductor's config instead are refused
at their first capture, before it begins. Then what the refusal asks for: the same model
compiled without CUDA graphs, its step captured into `gnomon.torch.graph_pool()`, exports.

    python -m gnomon.torch python/ports/graph_trees.py OUT   # exits 0 when all three come out so
"""

import argparse
import json
import os
import sys

import torch

import gnomon.torch as gt


def refusal(run):
    """What `run` raised, or None when it ran."""
    try:
        run()
    except Exception as e:  # noqa: BLE001 - a refusal may come wrapped by Dynamo
        return f"{type(e).__name__}: {e}"
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    out = p.parse_args().out
    gt.use_arena("2GiB")
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 512)).cuda().eval()
    x = torch.randn(8, 512, device="cuda")
    said = {"compile-reduce-overhead": refusal(lambda: torch.compile(model, mode="reduce-overhead"))}

    import torch._inductor.config as inductor

    inductor.triton.cudagraphs = True
    trees = torch.compile(model)

    def run_trees():
        with torch.no_grad():
            for _ in range(3):
                trees(x)
        torch.cuda.synchronize()

    said["config-cudagraphs"] = refusal(run_trees)
    inductor.triton.cudagraphs = False
    torch._dynamo.reset()

    step = torch.compile(model)
    with torch.no_grad():
        y = step(x)
        g = torch.cuda.CUDAGraph()  # as vLLM makes them: the arena keeps its graph
        with torch.cuda.graph(g, pool=gt.graph_pool()):
            y = step(x)
    summary = gt.export({"b8": g}, os.path.join(out, "compiled"), weights=model, inputs={"x": x},
                        outputs={"b8": {"y": y}})
    said["compiled-and-captured"] = {k: summary[k] for k in ("templates", "nodes", "kernel-nodes")}
    print(json.dumps(said, indent=1))
    refused = all(said[k] and "records CUDA graph trees" in said[k] for k in ("compile-reduce-overhead",
                                                                              "config-cudagraphs"))
    return 0 if refused and summary["templates"] == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
