"""The transformers recipe as its users run it (issue 59): a causal LM from `transformers`
(random weights at `hf.py`'s widths), `generate(..., cache_implementation="static")`,
which compiles its decode step with mode "reduce-overhead" itself, so Inductor's CUDA
graph trees record and replay it. Run twice, as a user's loop would; the kit's only line
is `export_graph_trees` after it (and `use_arena` before the model is made). One batch size
per process: a second batch size in the same process fails in PyTorch 2.11 itself
(baselines/h100-sm90-580.159.04-graph-trees-probe/). Not yet run on a GPU.

    python -m gnomon.torch python/ports/hf_generate.py --model qwen3 --batch 1 --out CORE
"""

import argparse

import torch

import gnomon.torch as gt
import hf


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="qwen3")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=8)
    p.add_argument("--arena", default="16GiB")
    p.add_argument("--out", required=True)
    p.add_argument("--summary")
    a = p.parse_args()
    gt.use_arena(a.arena, graph_trees=True)
    model, cfg = hf.build(a.model, a.layers)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt), device="cuda")
    with torch.no_grad():
        for _ in range(2):
            model.generate(ids, max_new_tokens=a.new_tokens, cache_implementation="static", do_sample=False)
    summary = gt.export_graph_trees(a.out, weights=model)
    summary["model"] = a.model
    gt.report(summary, a.summary)


if __name__ == "__main__":
    main()
