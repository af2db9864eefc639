"""A decode step of a Hugging Face model, captured per batch size and exported with the
kit: the ports the nightly `models` profile qualifies (docs/ci/models.md).

    python -m gnomon.torch python/ports/decode.py --model gpt2 --mode eager --out DIR

Weights are random (nothing is downloaded). The step attends over a static KV cache that
holds `--context` earlier positions and writes the new one; each batch size is one graph.
`--check-only` computes the eager step and prints its digest, without capture or export:
the same program run with and without the recorder must print the same digest.

`--layers 28 --gqa sdpa --argmax-side-stream` makes the Qwen2 step the deep one whose bf16
outputs vary between launches on the H200: attention through
`F.scaled_dot_product_attention(..., enable_gqa=True)` over the bf16 cache, the next token
picked by argmax on a side stream inside the graph.
"""

import argparse
import hashlib
import json
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import gnomon.torch as gt

# Grouped-query attention by repeating key-value heads, or by SDPA's own `enable_gqa`.
GQA = {"sdpa": False}

# cuDNN first, as serving stacks prefer it on Hopper; the others where it declines a shape.
BACKENDS = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
            SDPBackend.MATH]


def gpt2(layers=None):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.set_default_dtype(torch.float16)
    cfg = GPT2Config()
    with torch.device("cuda"):
        model = GPT2LMHeadModel(cfg).eval()
    tr = model.transformer
    heads, dim = cfg.n_head, cfg.n_embd // cfg.n_head

    def step(tokens, kc, vc, pos):
        b, e = tokens.shape[0], cfg.n_embd
        x = (tr.wte(tokens) + tr.wpe.weight[pos])[:, None]
        for i, blk in enumerate(tr.h):
            q, k, v = blk.attn.c_attn(blk.ln_1(x)).split(e, dim=2)
            q, k, v = (t.view(b, 1, heads, dim).transpose(1, 2) for t in (q, k, v))
            a = attend(q, k, v, kc[i, :b], vc[i, :b], pos)
            x = x + blk.attn.c_proj(a.transpose(1, 2).reshape(b, 1, e))
            x = x + blk.mlp(blk.ln_2(x))
        return model.lm_head(tr.ln_f(x))[:, 0]

    return model, step, (cfg.n_layer, heads, dim, cfg.vocab_size)


def llama(layers=None):
    # Llama-2-7B's widths, ten layers: 4.6 GB of bf16 weights.
    return hf_decoder("LlamaConfig", hidden_size=4096, intermediate_size=11008, num_hidden_layers=layers or 10,
                      num_attention_heads=32, num_key_value_heads=32, vocab_size=32000)


def qwen2(layers=None):
    # Qwen2-1.5B's widths (grouped-query attention 12/2 with q/k/v biases, a 151 936-token
    # vocabulary), eight layers (the model has 28): a model the kit was not written around.
    return hf_decoder("Qwen2Config", hidden_size=1536, intermediate_size=8960, num_hidden_layers=layers or 8,
                      num_attention_heads=12, num_key_value_heads=2, vocab_size=151936)


def hf_decoder(config, **widths):
    """A Llama-architecture decoder of Hugging Face's modules (Llama, Qwen2: the same
    module names), stepped by hand: rotary positions, grouped-query attention where the
    model has fewer key-value heads."""
    import transformers

    torch.set_default_dtype(torch.bfloat16)
    cfg = getattr(transformers, config)(**widths)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
    dim = cfg.hidden_size // heads
    rope = {}

    def rotary(pos):
        if pos not in rope:
            inv = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, device="cuda", dtype=torch.float32) / dim))
            angles = torch.cat([inv * pos, inv * pos])
            rope[pos] = (angles.cos().to(torch.bfloat16), angles.sin().to(torch.bfloat16))
        return rope[pos]

    def rotate(t, cos, sin):
        half = t.shape[-1] // 2
        return t * cos + torch.cat([-t[..., half:], t[..., :half]], dim=-1) * sin

    def step(tokens, kc, vc, pos):
        b = tokens.shape[0]
        cos, sin = rotary(pos)
        x = model.model.embed_tokens(tokens)[:, None]
        for i, layer in enumerate(model.model.layers):
            at, h = layer.self_attn, layer.input_layernorm(x)
            q = at.q_proj(h).view(b, 1, heads, dim).transpose(1, 2)
            k, v = (p(h).view(b, 1, kv_heads, dim).transpose(1, 2) for p in (at.k_proj, at.v_proj))
            a = attend(rotate(q, cos, sin), rotate(k, cos, sin), v, kc[i, :b], vc[i, :b], pos)
            x = x + at.o_proj(a.transpose(1, 2).reshape(b, 1, heads * dim))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return model.lm_head(model.model.norm(x))[:, 0]

    return model, step, (cfg.num_hidden_layers, kv_heads, dim, cfg.vocab_size)


def attend(q, k, v, k_cache, v_cache, pos):
    """Writes this position's key and value, then attends over every cached one; eagerly
    with cuDNN first, compiled as Inductor chooses."""
    k_cache[:, :, pos:pos + 1].copy_(k)
    v_cache[:, :, pos:pos + 1].copy_(v)
    keys, values = k_cache[:, :, :pos + 1], v_cache[:, :, :pos + 1]
    if GQA["sdpa"]:
        with sdpa_kernel(BACKENDS, set_priority=True):
            return F.scaled_dot_product_attention(q, keys, values, enable_gqa=True)
    if keys.shape[1] < q.shape[1]:  # grouped-query attention: each key-value head serves a group
        group = q.shape[1] // keys.shape[1]
        keys, values = keys.repeat_interleave(group, dim=1), values.repeat_interleave(group, dim=1)
    if torch.compiler.is_compiling():
        return F.scaled_dot_product_attention(q, keys, values)
    with sdpa_kernel(BACKENDS, set_priority=True):
        return F.scaled_dot_product_attention(q, keys, values)


def say(*what):
    print("decode:", *what, flush=True)


def digest(t):
    return hashlib.sha256(t.detach().contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()


def capture(step, batches, tokens, kc, vc, pos, argmax_side_stream):
    """One graph per batch size into the arena's graph pool; with `argmax_side_stream`, the
    next token is picked on a side stream inside the graph (a fork and a join)."""
    graphs, outputs = {}, {}
    side = torch.cuda.Stream()
    for b in batches:
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g, pool=gt.graph_pool()):
            logits = step(tokens[b], kc, vc, pos)
            outputs[f"b{b}"] = {"logits": logits}
            if argmax_side_stream:
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    outputs[f"b{b}"]["next-token"] = logits.argmax(-1)
                torch.cuda.current_stream().wait_stream(side)
        graphs[f"b{b}"] = g
    torch.cuda.synchronize()
    return graphs, outputs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["gpt2", "llama", "qwen2"], required=True)
    p.add_argument("--mode", choices=["eager", "compiled"], default="eager")
    p.add_argument("--batches", default="1,2,4,8")
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--layers", type=int, help="instead of the port's own number of layers")
    p.add_argument("--gqa", choices=["repeat", "sdpa"], default="repeat",
                   help="grouped-query attention by repeated key-value heads, or SDPA's enable_gqa")
    p.add_argument("--argmax-side-stream", action="store_true", help="pick the next token on a side stream")
    p.add_argument("--deterministic", action="store_true")
    p.add_argument("--arena", default="8GiB")
    p.add_argument("--out")
    p.add_argument("--summary")
    p.add_argument("--check-only", action="store_true")
    p.add_argument("--launches", type=int, default=gt.DEFAULT_LAUNCHES,
                   help="launches of each template the export compares at least (1 plants a defect: no "
                        "variation seen)")
    args = p.parse_args()
    started = time.perf_counter()
    GQA["sdpa"] = args.gqa == "sdpa"
    if args.deterministic:
        gt.deterministic()
    if not args.check_only:
        gt.record()
    gt.use_arena(args.arena)
    say("arena in use")
    torch.manual_seed(0)
    make = {"gpt2": gpt2, "llama": llama, "qwen2": qwen2}[args.model]
    model, step, (layers, heads, dim, vocab) = make(args.layers)
    if args.mode == "compiled":
        import torch._inductor.config as inductor

        inductor.max_autotune_gemm = True
        inductor.max_autotune_gemm_backends = "TRITON"
        step = torch.compile(step, dynamic=False)
    batches = [int(b) for b in args.batches.split(",")]
    pos = args.context
    shape = (layers, max(batches), heads, pos + 1, dim)
    kc, vc = torch.randn(shape, device="cuda") * 0.5, torch.randn(shape, device="cuda") * 0.5
    tokens = {b: torch.randint(0, vocab, (b,), device="cuda") for b in batches}
    timings = {"model-ready-s": time.perf_counter() - started}
    say("model ready")

    with torch.no_grad():
        if args.check_only:
            out = step(tokens[batches[-1]], kc, vc, pos)
            torch.cuda.synchronize()
            timings["first-step-s"] = time.perf_counter() - started
            print(json.dumps({"digest": digest(out), **timings}))
            return
        warm = time.perf_counter()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for b in batches:
                for _ in range(3):
                    step(tokens[b], kc, vc, pos)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        timings["warm-up-s"] = time.perf_counter() - warm
        say("warmed up")
        capture_started = time.perf_counter()
        graphs, outputs = capture(step, batches, tokens, kc, vc, pos, args.argmax_side_stream)
        timings["capture-s"] = time.perf_counter() - capture_started
        say("captured")
        instantiate = time.perf_counter()
        for g in graphs.values():
            g.instantiate()
        torch.cuda.synchronize()
        timings["instantiate-s"] = time.perf_counter() - instantiate
        eager = {}
        for b in batches:
            graphs[f"b{b}"].replay()
            eager[f"b{b}"] = digest(step(tokens[b], kc, vc, pos)) == digest(outputs[f"b{b}"]["logits"])
        torch.cuda.synchronize()

    say("graphs equal eager:", eager)
    inputs = {f"tokens-b{b}": t for b, t in tokens.items()}
    summary = gt.export(graphs, args.out, weights=model, inputs=inputs, outputs=outputs,
                        kv_cache={"k": kc, "v": vc}, capture=timings, launches=args.launches)
    summary.update(timings, model=args.model, mode=args.mode, batches=batches,
                   graph_equals_eager=eager, total_s=time.perf_counter() - started)
    gt.report(summary, args.summary)


if __name__ == "__main__":
    main()
