"""The transformers recipe as its users run it (issue 59): a causal LM from `transformers`
(random weights at `hf.py`'s widths), `generate(..., cache_implementation="static")`,
which compiles its decode step with mode "reduce-overhead" itself, so Inductor's CUDA
graph trees record and replay it. Run twice, as a user's loop would; the kit's only line
is `export_graph_trees` after it (and `use_arena` before the model is made). One batch size
per process: a second batch size in the same process fails in PyTorch 2.11 itself
(baselines/h100-sm90-580.159.04-graph-trees-probe/).

`--route` picks one of the three routes to a graph of the same decode step (item 3), from
the same seeded weights and prompt:
- `trees` (the default): the recipe above, exported through the graph trees;
- `eager`: `generate` with compilation disabled, then its last decode step (the cache put
  back one token, that token and position given again) captured by hand;
- `compiled`: the same, the step compiled with `torch.compile` (no CUDA graphs) and
  captured by hand, as vLLM and SGLang capture theirs.
`--logits FILE` saves what `generate` gave for the last step and, for the hand routes, what
the captured graph gives, for `tools/compare_routes.py`.

`--route forward-compiled` is the form older documentation shows,
`model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)` before
the same `generate`, which fails in PyTorch 2.11 itself (issue 59): under the kit it must
end saying that the program failed in PyTorch, with the reasons Inductor logged for
skipping CUDA graphs (item 4), before anything is exported.

    python -m gnomon.torch python/ports/hf_generate.py --model qwen3 --batch 1 --out CORE
"""

import argparse

import torch

import gnomon.torch as gt
import hf


def generated(model, ids, new_tokens, **options):
    """`generate` with a static cache, greedy; its sequences, the last step's logits (as
    float32, on the host) and the cache it filled."""
    out = model.generate(ids, max_new_tokens=new_tokens, cache_implementation="static", do_sample=False,
                         return_dict_in_generate=True, output_logits=True, **options)
    return out.sequences, out.logits[-1].float().cpu(), out.past_key_values


def by_hand(model, route, sequences, cache):
    """Generate's last decode step captured by hand: the cache put back to the position of
    its last token, which is given again. Returns the graph, its inputs and its logits."""
    position = sequences.shape[1] - 2
    tokens = sequences[:, position:position + 1].clone()
    at = torch.tensor([position], device="cuda")
    forward = torch.compile(model.forward) if route == "compiled" else model.forward

    def step():
        return forward(input_ids=tokens, past_key_values=cache, cache_position=at, use_cache=True).logits[:, -1]

    with torch.no_grad(), gt.outside_arena():
        for _ in range(2):
            hf.rewind(cache, position)
            step()
        hf.rewind(cache, position)
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g, pool=gt.graph_pool()):
            logits = step()
        hf.rewind(cache, position)
        g.replay()
        torch.cuda.synchronize()
        hf.rewind(cache, position)
    return g, {"tokens": tokens, "position": at}, logits


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="qwen3")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=8)
    p.add_argument("--route", choices=["trees", "eager", "compiled", "forward-compiled"], default="trees")
    p.add_argument("--arena", default="16GiB")
    p.add_argument("--out", required=True)
    p.add_argument("--summary")
    p.add_argument("--logits")
    a = p.parse_args()
    trees = a.route in ("trees", "forward-compiled")
    gt.use_arena(a.arena, graph_trees=trees)
    model, cfg = hf.build(a.model, a.layers)
    torch.manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt), device="cuda")
    saved = {"route": a.route}
    if a.route == "forward-compiled":
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    with torch.no_grad():
        if trees:
            for _ in range(2):
                sequences, saved["generate"], cache = generated(model, ids, a.new_tokens)
                # Dropped as the recipe drops it: the next call's cache takes its blocks (at
                # other addresses Inductor would record the step again), and the export
                # finds the last one's free.
                del cache
            summary = gt.export_graph_trees(a.out, weights=model)
        else:
            sequences, saved["generate"], cache = generated(model, ids, a.new_tokens, disable_compile=True)
            g, inputs, logits = by_hand(model, a.route, sequences, cache)
            saved["core"] = logits.float().cpu()
            name = f"b{a.batch}"
            summary = gt.export({name: g}, a.out, weights=model, inputs={f"{name}/{k}": v for k, v in inputs.items()},
                                outputs={name: {"logits": logits}}, kv_cache=hf.cache_tensors(cache))
    saved["sequences"] = sequences.cpu()
    if a.logits:
        torch.save(saved, a.logits)
    summary.update(model=a.model, route=a.route)
    gt.report(summary, a.summary)


if __name__ == "__main__":
    main()
