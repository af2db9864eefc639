"""HF's own `MambaForCausalLM` (the slow path: PyTorch ops, no Hub kernels), a recurrent
state instead of a KV cache: a prefill fills each layer's convolution and SSM state in its
`DynamicCache`, then one decode step per batch size is captured into the kit's pool, as a
serving stack captures it. The decode step updates both states in place.

    python -m gnomon.torch python/ports/mamba.py --out DIR [--summary FILE] [--unnamed-state]

`--unnamed-state` exports without naming the states (the form issue 58 met): their bytes are
then whatever the arena held at the snapshot, and the port says where they lie.
"""

import argparse
import os
import time

import torch

import gnomon.torch as gt

DTYPE = torch.bfloat16


def build(layers):
    import transformers

    cfg = transformers.MambaConfig(hidden_size=768, num_hidden_layers=layers, vocab_size=50280, state_size=16)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.MambaForCausalLM(cfg).to(DTYPE).eval()
    return model, cfg


def states(cache):
    """Each layer's convolution and SSM state by name: what the decode step reads and
    advances."""
    named = {}
    for i, layer in enumerate(cache.layers):
        named[f"conv{i}"] = layer.conv_states[0]
        named[f"ssm{i}"] = layer.recurrent_states[0]
    return named


def capture(model, cfg, b, context, stream):
    """Prefills batch `b`, warms the decode step up twice, puts the states back to the
    prefill's and captures the step; returns (graph, outputs, states, inputs)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=cfg)
    tokens = torch.randint(0, cfg.vocab_size, (b, 1), device="cuda")
    with torch.no_grad():
        model(input_ids=torch.randint(0, cfg.vocab_size, (b, context), device="cuda"), cache_params=cache,
              use_cache=True)
        named = states(cache)
        prefilled = {k: v.clone() for k, v in named.items()}

        def step():
            logits = model(input_ids=tokens, cache_params=cache, use_cache=True).logits[:, -1]
            return logits, logits.argmax(-1)

        for _ in range(2):
            step()
        for k, v in named.items():
            v.copy_(prefilled[k])
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g, pool=gt.graph_pool(), stream=stream):
            logits, token = step()
    return g, {"logits": logits, "next-token": token}, named, {"tokens": tokens}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batches", default="4,1")
    p.add_argument("--context", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--arena", default="4GiB")
    p.add_argument("--unnamed-state", action="store_true")
    p.add_argument("--out", required=True)
    p.add_argument("--summary")
    a = p.parse_args()
    gt.use_arena(a.arena)
    model, cfg = build(a.layers)
    graphs, outputs, caches, inputs, where = {}, {}, {}, {}, {}
    started = time.perf_counter()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for b in sorted((int(b) for b in a.batches.split(",")), reverse=True):
            name = f"b{b}"
            graphs[name], outputs[name], named, given = capture(model, cfg, b, a.context, side)
            caches[name] = named
            inputs.update({f"{name}/{k}": v for k, v in given.items()})
            where[name] = {k: [hex(v.data_ptr()), v.numel() * v.element_size(), list(v.shape), str(v.dtype)]
                           for k, v in named.items()}
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    summary = gt.export(graphs, a.out, weights=model, inputs=inputs, outputs=outputs,
                        kv_cache=() if a.unnamed_state else caches,
                        capture={"capture-s": time.perf_counter() - started})
    summary.update(model="mamba", states=where, unnamed_state=a.unnamed_state)
    gt.report(summary, a.summary)


if __name__ == "__main__":
    main()
