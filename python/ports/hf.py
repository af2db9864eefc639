"""Hugging Face's own forward, captured as a serving stack captures it, exported with the
kit: the corpus of architectures the `models` profile qualifies beyond decode.py's
hand-written steps (docs/ci/models.md).

    python -m gnomon.torch python/ports/hf.py --model qwen2 --out DIR [--summary FILE]

Weights are random (nothing is downloaded), a few layers at the architecture's real
widths. Decoders run `model.forward` over a `StaticCache` (what
`generate(cache_implementation="static")` runs): a prefill of `--context` tokens fills
each batch size's cache eagerly, then one decode step per batch size is captured, largest
batch first, into one shared pool, greedy sampling (argmax) inside the graph. Encoders
capture `model.forward` over a fixed-length batch.
"""

import argparse
import contextlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

import gnomon.torch as gt

import plant

DTYPE = torch.bfloat16
# Each decode step's closure and cache by template, so a planted defect can capture it again.
STEPS = {}
# The experts implementation the decode steps run (the prefill runs HF's own, so that the
# cache it fills is alike in every process): `index_add` or HF's default.
EXPERTS = {"decode": None, "prefill": None}

# name: (config class, keyword arguments). Few layers, the family's real widths.
DECODERS = {
    # GQA with q/k/v biases.
    "qwen2": ("Qwen2Config", dict(hidden_size=1536, intermediate_size=8960, num_attention_heads=12,
                                  num_key_value_heads=2, num_hidden_layers=4, vocab_size=151936)),
    # q/k RMS norm.
    "qwen3": ("Qwen3Config", dict(hidden_size=1024, intermediate_size=3072, num_attention_heads=16,
                                  num_key_value_heads=8, head_dim=128, num_hidden_layers=4, vocab_size=151936)),
    "mistral": ("MistralConfig", dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                                      num_key_value_heads=8, num_hidden_layers=2, vocab_size=32768)),
    # fused qkv and gate-up projections.
    "phi3": ("Phi3Config", dict(hidden_size=3072, intermediate_size=8192, num_attention_heads=32,
                                num_key_value_heads=32, num_hidden_layers=2, vocab_size=32064)),
    # sliding-window layers and logit soft-capping. The window is wider than the cache
    # captured: a full window's update builds an index tensor from host memory, which
    # graph capture refuses (transformers 5.17, StaticSlidingWindowLayer).
    "gemma2": ("Gemma2Config", dict(hidden_size=2304, intermediate_size=9216, num_attention_heads=8,
                                    num_key_value_heads=4, head_dim=256, num_hidden_layers=4, vocab_size=256000,
                                    sliding_window=64)),
    # a mixture of experts, top-2 of 8.
    "mixtral": ("MixtralConfig", dict(hidden_size=1024, intermediate_size=3584, num_attention_heads=16,
                                      num_key_value_heads=8, num_hidden_layers=2, num_local_experts=8,
                                      num_experts_per_tok=2, vocab_size=32000)),
    # a mixture of experts, top-8 of 32, q/k RMS norm.
    "qwen3_moe": ("Qwen3MoeConfig", dict(hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
                                         num_attention_heads=32, num_key_value_heads=4, head_dim=128,
                                         num_hidden_layers=2, num_experts=32, num_experts_per_tok=8,
                                         vocab_size=151936)),
    # a mixture of experts, top-8 of 64 (OLMoE-1B-7B's widths).
    "olmoe": ("OlmoeConfig", dict(hidden_size=2048, intermediate_size=1024, num_attention_heads=16,
                                  num_key_value_heads=16, num_hidden_layers=2, num_experts=64,
                                  num_experts_per_tok=8, vocab_size=50304)),
    # Llama-3-8B's widths (32 layers with --layers 32: 16 GB of bf16 weights), the shape a
    # serving stack's catalogue is measured at (docs/ci/serving.sh).
    "llama": ("LlamaConfig", dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                                  num_key_value_heads=8, num_hidden_layers=2, vocab_size=128256,
                                  rope_theta=500000.0)),
    # post-norm with q/k norm, nobody's port tuned to it.
    "olmo2": ("Olmo2Config", dict(hidden_size=2048, intermediate_size=8192, num_attention_heads=16,
                                  num_key_value_heads=16, num_hidden_layers=2, vocab_size=100352)),
    # parallel attention and MLP, partial rotary embedding, fused qkv.
    "gpt_neox": ("GPTNeoXConfig", dict(hidden_size=2048, intermediate_size=8192, num_attention_heads=16,
                                       num_hidden_layers=2, vocab_size=50304)),
}
ENCODERS = {
    "bert": ("BertConfig", dict(num_hidden_layers=4)),
}


def index_add_experts(self, hidden_states, top_k_index, top_k_weights):
    """An experts implementation for HF's `ExpertsInterface` that combines as a serving
    stack's fused MoE does: every expert runs on every token (no data-dependent shapes, so
    the step captures), and each token's chosen experts' outputs are added into its row by
    one `index_add_`, whose bf16 atomics make the order of the sum, and so its bits, vary
    from launch to launch."""
    tokens, hidden = hidden_states.shape
    up = torch.einsum("th,efh->etf", hidden_states, self.gate_up_proj)
    out = torch.einsum("etf,ehf->eth", self._apply_gate(up), self.down_proj)
    picked = out.permute(1, 0, 2).gather(1, top_k_index[..., None].expand(-1, -1, hidden))
    weighted = (picked * top_k_weights[..., None]).to(hidden_states.dtype).reshape(-1, hidden)
    rows = torch.arange(tokens, device=hidden_states.device).repeat_interleave(top_k_index.shape[1])
    return torch.zeros_like(hidden_states).index_add_(0, rows, weighted)


def build(name, layers=None, weights=None):
    """The model with random weights (seeded, so every process builds the same), or with
    those `save_pretrained` wrote to the directory `weights`."""
    import transformers

    cls, kwargs = {**DECODERS, **ENCODERS}[name]
    cfg = getattr(transformers, cls)(**{**kwargs, **({"num_hidden_layers": layers} if layers else {})})
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    auto = transformers.AutoModel if name in ENCODERS else transformers.AutoModelForCausalLM
    if weights:
        return auto.from_pretrained(weights, config=cfg, dtype=DTYPE, device_map="cuda").eval(), cfg
    with torch.device("cuda"):
        model = auto.from_config(cfg, dtype=DTYPE).eval()
    return model, cfg


def cold_start_rival(a):
    """Seconds a fresh process takes to get where an export's process gets before it
    exports: start Python, import torch and transformers, load the weights from
    safetensors files, warm up and capture every batch size, on PyTorch's own allocator.
    The fair rival of restoring the core. Run before this process touches CUDA: one
    process writes the weights, then the rival is timed from its start to its last capture."""
    shape = ["--model", a.model, "--batches", a.batches, "--context", str(a.context), "--arena", "none",
             "--out", os.devnull]
    shape += ["--layers", str(a.layers)] if a.layers else []
    shape += ["--no-cudnn-attention"] if a.no_cudnn_attention else []
    shape += ["--deterministic"] if a.deterministic else []
    run = [sys.executable, os.path.abspath(__file__), *shape]
    with tempfile.TemporaryDirectory() as weights:
        subprocess.run([*run, "--save-weights", weights], check=True, stdout=subprocess.DEVNULL)
        ready = os.path.join(weights, "ready")
        started = time.time()
        subprocess.run([*run, "--weights", weights, "--ready-file", ready], check=True, stdout=subprocess.DEVNULL)
        with open(ready) as f:
            return float(f.read()) - started


@contextlib.contextmanager
def reproducible():
    """PyTorch's deterministic kernels for the eager prefill, whose cache is the captured
    steps' state: HF's eager experts add into each token's row with `index_add_`, whose
    atomics made each process's cache differ, so a planted core (another process's export)
    differed from its original beyond its plant (the H100 control plant of
    baselines/h100-sm90-580.159.04-verdicts-corpus lay 1.4 to 1.7 spreads off on the KV
    cache). The captured steps keep the kernels the port chose."""
    was = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was[0], warn_only=was[1])


def static_cache(cfg, batch, length):
    """A StaticCache for `batch` sequences of `length`, whichever signature this
    transformers has."""
    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kwargs = dict(config=cfg, max_cache_len=length)
    for key, value in (("max_batch_size", batch), ("device", "cuda"), ("dtype", DTYPE)):
        if key in params:
            kwargs[key] = value
    return StaticCache(**kwargs)


def cache_tensors(cache):
    """A cache's state by name: each layer's keys and values, and where the cache keeps it
    on the device (transformers 5), the length it writes the next token at: the graph
    reads and advances it, so it is state like the keys."""
    named = {}
    for i, layer in enumerate(cache.layers):
        named[f"k{i}"], named[f"v{i}"] = layer.keys, layer.values
        if isinstance(getattr(layer, "cumulative_length", None), torch.Tensor):
            named[f"length{i}"] = layer.cumulative_length
    return named


def rewind(cache, length):
    """Puts the cache's write position back to `length` after warm-up steps advanced it,
    so the captured step writes the slot after the prompt, the position it is given."""
    for layer in cache.layers:
        if isinstance(getattr(layer, "cumulative_length", None), torch.Tensor):
            layer.cumulative_length.fill_(length)
        if hasattr(layer, "cumulative_length_int"):
            layer.cumulative_length_int = length


# The pool the decode steps are captured into, as a serving stack's own capture code
# passes it: the kit's (`arena`), a handle of PyTorch's own (`pytorch`, what vLLM passes),
# or none (`none`, a pool per graph); under use_arena all three land in the arena.
POOLS = {"arena": lambda: gt.graph_pool(), "pytorch": lambda: torch.cuda.graph_pool_handle(), "none": lambda: None}


def decoder_graphs(model, cfg, batches, context, pool_kind="arena"):
    """One decode step per batch size, captured largest first into one pool."""
    pool = POOLS[pool_kind]()
    graphs, outputs, caches, inputs = {}, {}, {}, {}
    seconds = {"prefill-s": 0.0, "warm-up-s": 0.0, "capture-s": 0.0}
    # Every batch is prefilled, warmed up and captured on one stream, as vLLM's
    # graph_capture() does: blocks freed on a stream are cached for that stream only, so a
    # stream per batch kept each batch's warm-up blocks (hf-corpus/reserved/README.md).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for b in sorted(batches, reverse=True):
            timings = capture_batch(model, cfg, b, context, pool, side, graphs, outputs, caches, inputs)
            for key, s in zip(seconds, timings):
                seconds[key] += s
    torch.cuda.current_stream().wait_stream(side)
    return graphs, outputs, caches, inputs, seconds


def capture_batch(model, cfg, b, context, pool, stream, graphs, outputs, caches, inputs):
    """Prefills a static cache of batch `b`, warms the decode step up twice and captures it
    on `stream`; returns the seconds prefilling, warming up and capturing took. What the graph reads
    (the cache, its inputs) is made in the arena. The rest runs outside it, as without the
    kit: the prefill's and warm-up's blocks go to PyTorch's own pool, and the capture
    empties that pool's cache (which PyTorch does only while no pool is routed to)."""
    name = f"b{b}"
    cache = static_cache(cfg, b, context + 8)
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    cache.early_initialization(b, heads, head_dim, DTYPE, torch.device("cuda"))
    tokens = torch.randint(0, cfg.vocab_size, (b, 1), device="cuda")
    position = torch.tensor([context], device="cuda")

    def step():
        out = model(input_ids=tokens, past_key_values=cache, cache_position=position, use_cache=True)
        logits = out.logits[:, -1]
        return logits, logits.argmax(-1)

    with torch.no_grad(), gt.outside_arena():
        if EXPERTS["decode"]:
            model.config._experts_implementation = EXPERTS["prefill"]
        started = time.perf_counter()
        prompt = torch.randint(0, cfg.vocab_size, (b, context), device="cuda")
        with reproducible():
            model(input_ids=prompt, past_key_values=cache, cache_position=torch.arange(context, device="cuda"),
                  use_cache=True)
        torch.cuda.synchronize()
        prefill = time.perf_counter() - started
        if EXPERTS["decode"]:
            model.config._experts_implementation = EXPERTS["decode"]
        started = time.perf_counter()
        for _ in range(2):
            step()
        rewind(cache, context)
        torch.cuda.synchronize()
        warm = time.perf_counter() - started
        started = time.perf_counter()
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g, pool=pool, stream=stream):
            logits, token = step()
        capture = time.perf_counter() - started
    graphs[name] = g
    outputs[name] = {"logits": logits, "next-token": token}
    STEPS[name] = (step, cache, context)
    caches[name] = cache_tensors(cache)
    inputs[f"{name}/tokens"] = tokens
    inputs[f"{name}/position"] = position
    return prefill, warm, capture


def recapture(model, kind):
    """Every decode step captured again, as the planted defect `kind` makes it (`skip-layer`:
    the middle layer gives back its input), into the arena's graph pool."""
    graphs, outputs = {}, {}
    layer = model.model.layers[len(model.model.layers) // 2]

    def skip(module, args, kwargs, output):
        given = args[0] if args else kwargs["hidden_states"]
        return given if isinstance(output, torch.Tensor) else (given, *output[1:])

    hook = layer.register_forward_hook(skip, with_kwargs=True) if kind == "skip-layer" else None
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad(), gt.outside_arena():
        for name, (step, cache, context) in STEPS.items():
            rewind(cache, context)
            g = torch.cuda.CUDAGraph(keep_graph=True)
            with torch.cuda.graph(g, pool=gt.graph_pool(), stream=side):
                logits, token = step()
            graphs[name], outputs[name] = g, {"logits": logits, "next-token": token}
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    if hook:
        hook.remove()
    return graphs, outputs


def plant_defect(planted, model, graphs, outputs, caches, inputs):
    """Makes the defect `planted` names in a decoder's captured program: a weight perturbs
    the middle layer's down projection (its experts' where it has them); `kv-slot` moves
    every cache's write position one on (the graph reads it from the cache's length tensors,
    or from its position input where the cache keeps none); `skip-layer` captures every
    step again with the middle layer giving back its input. Returns the fraction of a
    perturbed weight's elements that changed."""
    kind, rel = plant.kind(planted)
    if kind == "unwritten":
        raise SystemExit("hf.py plants no unwritten read: python/ports/splitk.py does")
    if kind == "weight":
        mlp = model.model.layers[len(model.model.layers) // 2].mlp
        down = getattr(mlp, "down_proj", None)
        return plant.perturb(down.weight if down is not None else mlp.experts.down_proj, rel)
    if kind == "kv-slot":
        lengths = [t for c in caches.values() for k, t in c.items() if k.startswith("length")]
        for t in lengths or [t for k, t in inputs.items() if k.endswith("/position")]:
            t.add_(1)
    if kind == "skip-layer":
        again, again_outputs = recapture(model, kind)
        graphs.update(again)
        outputs.update(again_outputs)
    return None


def encoder_graphs(model, cfg, batches, context):
    graphs, outputs, inputs = {}, {}, {}
    pool = gt.graph_pool()
    for b in sorted(batches, reverse=True):
        name = f"b{b}"
        ids = torch.randint(0, cfg.vocab_size, (b, context), device="cuda")
        mask = torch.ones_like(ids)
        with torch.no_grad(), gt.outside_arena():
            for _ in range(2):
                model(input_ids=ids, attention_mask=mask)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph(keep_graph=True)
            with torch.cuda.graph(g, pool=pool):
                hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
        graphs[name] = g
        outputs[name] = {"hidden": hidden}
        inputs[f"{name}/ids"], inputs[f"{name}/mask"] = ids, mask
    return graphs, outputs, {}, inputs, {}


def state_check(model, graphs, outputs, caches, inputs):
    """Replays each graph from the same named state (inputs and caches put back) and
    prints whether its outputs repeat and which of the model's own tensors a replay wrote."""
    for name, g in graphs.items():
        named = {**caches.get(name, {}), **{k: v for k, v in inputs.items() if k.startswith(name + "/")}}
        saved = {k: v.clone() for k, v in named.items()}
        own = {**dict(model.named_buffers()), **dict(model.named_parameters())}
        before = {k: v.clone() for k, v in own.items()}
        seen = []
        for _ in range(3):
            for k, v in named.items():
                v.copy_(saved[k])
            g.replay()
            torch.cuda.synchronize()
            seen.append({k: v.clone() for k, v in outputs[name].items()})
        same = all(torch.equal(seen[0][k], s[k]) for s in seen for k in s)
        written = [k for k in own if not torch.equal(before[k], own[k])]
        moved = {k: (saved[k].flatten()[:4].tolist(), v.flatten()[:4].tolist()) for k, v in named.items()
                 if v.numel() <= 4}
        print(json.dumps({"template": name, "outputs-repeat": same, "model-tensors-written": written[:10],
                          "small-state-before-after": moved}), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True, choices=sorted({**DECODERS, **ENCODERS}))
    p.add_argument("--batches", default="8,4,2,1")
    p.add_argument("--context", type=int, default=32)
    p.add_argument("--layers", type=int, help="instead of the architecture's few layers above")
    p.add_argument("--arena", default="8GiB",
                   help="the kit's arena size, or `none`: PyTorch's own allocator, no export (with --state-check)")
    p.add_argument("--launches", type=int, default=gt.DEFAULT_LAUNCHES)
    p.add_argument("--deterministic", action="store_true")
    p.add_argument("--no-cudnn-attention", action="store_true",
                   help="keep PyTorch's scaled-dot-product attention off cuDNN")
    p.add_argument("--pool", choices=sorted(POOLS), default="arena",
                   help="the pool decode steps are captured into: the kit's, a handle of PyTorch's own, or none")
    p.add_argument("--experts", choices=["hf", "index-add"], default="hf",
                   help="a mixture of experts' combine: HF's own, or one index_add_ as a serving stack's fused MoE")
    p.add_argument("--state-check", action="store_true",
                   help="replay each graph from its named state three times and say what changed")
    p.add_argument("--replays", type=int, default=0,
                   help="replay each graph this many times in PyTorch before the export")
    p.add_argument("--cold-start-rival", action="store_true",
                   help="first time a fresh process that loads these weights from files, warms up and captures "
                        "(PyTorch alone): the core records it as cold-start-s, and qualify its cold-start-speedup")
    p.add_argument("--weights", help="load the weights save_pretrained wrote to this directory")
    p.add_argument("--save-weights", help=argparse.SUPPRESS)
    p.add_argument("--ready-file", help=argparse.SUPPRESS)
    p.add_argument("--out", required=True)
    p.add_argument("--summary")
    plant.arguments(p)
    a = p.parse_args()
    rival_s = cold_start_rival(a) if a.cold_start_rival else None
    if a.deterministic:
        gt.deterministic()
    if a.no_cudnn_attention:
        torch.backends.cuda.enable_cudnn_sdp(False)
    if a.arena != "none":
        gt.use_arena(a.arena)
    started = time.perf_counter()
    model, cfg = build(a.model, a.layers, a.weights)
    torch.cuda.synchronize()
    build_s = time.perf_counter() - started
    if a.experts == "index-add":
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

        ALL_EXPERTS_FUNCTIONS.register("index_add", index_add_experts)
        EXPERTS.update(decode="index_add", prefill=model.config._experts_implementation)
    if a.save_weights:
        model.save_pretrained(a.save_weights)
        return
    batches = [int(b) for b in a.batches.split(",")]
    if a.model in ENCODERS:
        graphs, outputs, caches, inputs, seconds = encoder_graphs(model, cfg, batches, a.context)
    else:
        graphs, outputs, caches, inputs, seconds = decoder_graphs(model, cfg, batches, a.context, a.pool)
    if a.ready_file:  # the cold-start rival, ready once every batch size is captured
        torch.cuda.synchronize()
        with open(a.ready_file, "w") as f:
            f.write(repr(time.time()))
        return
    seconds["build-s"] = build_s
    if rival_s is not None:
        seconds["cold-start-s"] = rival_s
    for g in graphs.values():
        for _ in range(a.replays):
            g.replay()
    torch.cuda.synchronize()
    if a.state_check:
        state_check(model, graphs, outputs, caches, inputs)
    if a.arena == "none":  # what PyTorch alone reserves for the same captures
        gt.report({"model": a.model, "max-memory-reserved": torch.cuda.max_memory_reserved()}, a.summary)
        return
    changed = plant_defect(a.plant, model, graphs, outputs, caches, inputs) if a.plant else None
    summary = gt.export(graphs, a.out, weights=model, inputs=inputs, outputs=outputs, kv_cache=caches,
                        capture=seconds, launches=a.launches)
    summary["model"] = a.model
    summary["max-memory-reserved"] = torch.cuda.max_memory_reserved()
    if a.plant:
        plant.splice(a.against, a.out)
        summary.update(plant=a.plant, against=a.against, changed=changed)
    gt.report(summary, a.summary)


if __name__ == "__main__":
    main()
