"""What Inductor's CUDA graph trees record for the transformers recipe (issue 59), on the
stack it runs on: a causal LM from `transformers` (random weights, python/ports/hf.py's
configs), `generate(..., cache_implementation="static")`, which compiles the decode step
itself with mode "reduce-overhead". No kit: plain PyTorch. Writes, per model and batch,
the tree manager's nodes (their functions, inputs, static and managed indices, outputs,
parents) as JSON, so the kit's mapping can be designed and tested from a fixture.

    TORCH_LOGS=cudagraphs python3 tools/probe_graph_trees.py OUT_DIR [--models qwen3,olmoe,gemma2] [--batches 1,2]
"""

import argparse
import json
import os
import sys
import time
import traceback

import torch

from gnomon import graph_trees

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "ports"))


def summarize(value, depth=0):
    """A JSON form of an attribute of a tree node: tensors by shape, stride, dtype and
    address; containers element by element; anything else by its type and a short repr."""
    if isinstance(value, torch.Tensor):
        return {"tensor": list(value.shape), "stride": list(value.stride()), "dtype": str(value.dtype),
                "device": str(value.device), "data_ptr": value.data_ptr() if value.device.type == "cuda" else None}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if depth > 3:
        return f"<{type(value).__name__}>"
    if isinstance(value, (list, tuple)):
        return [summarize(v, depth + 1) for v in value[:64]] + ([f"... {len(value)} in all"] if len(value) > 64 else [])
    if isinstance(value, dict):
        return {str(k): summarize(v, depth + 1) for k, v in list(value.items())[:64]}
    return f"<{type(value).__name__}> {repr(value)[:160]}"


def attributes(obj):
    """An object's attributes by name, whether it keeps them in a __dict__ or in slots."""
    names = set(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        names.update(getattr(cls, "__slots__", ()))
    return {n: getattr(obj, n) for n in sorted(names) if not n.startswith("__") and hasattr(obj, n)}


def node_facts(node):
    facts = {"type": type(node).__name__, "attributes": sorted(attributes(node))}
    for name, value in attributes(node).items():
        if name in ("graph", "parent", "children", "tree_manager", "wrapped_function", "path_weakrefs"):
            continue
        facts[name] = summarize(value)
    wrapped = getattr(node, "wrapped_function", None)
    if wrapped is not None:
        facts["wrapped_function"] = {k: summarize(v) for k, v in attributes(wrapped).items() if k != "model"}
        facts["wrapped_function"]["model"] = repr(wrapped.model)[:200]
    graph = getattr(node, "graph", None)
    if graph is not None:
        try:
            facts["raw_cuda_graph"] = hex(graph.raw_cuda_graph())
        except Exception as e:  # noqa: BLE001 - recorded as what it says
            facts["raw_cuda_graph"] = f"{type(e).__name__}: {e}"[:300]
    parent = node.parent if hasattr(node, "parent") else None
    facts["parent_id"] = summarize(getattr(parent, "id", None)) if parent is not None else None
    facts["children"] = {str(k): [node_facts(c) for c in v] for k, v in (getattr(node, "children", None) or {}).items()}
    return facts


def tree_facts():
    from torch._inductor import cudagraph_trees as trees

    container = trees.get_container(torch.cuda.current_device())
    manager = container.tree_manager
    if manager is None:
        return {"manager": None}
    facts = {"manager_attributes": sorted(attributes(manager))}
    for name in ("graph_counter", "func_counter", "warmed_up_functions", "path_state", "debug_fail_counter",
                 "warmup_node_counter", "num_rerecord", "mode"):
        if hasattr(manager, name):
            facts[name] = summarize(getattr(manager, name))
    facts["functions"] = {str(k): {"attributes": {a: summarize(v) for a, v in attributes(f).items() if a != "model"},
                                   "model": repr(f.model)[:200]}
                          for k, f in manager.ids_to_funcs.items()}
    facts["roots"] = {str(k): [node_facts(n) for n in v] for k, v in manager.roots.items()}
    facts["described"] = graph_trees.describe(manager, torch.__version__)
    return facts


def probe(name, batch, prompt, new_tokens):
    import hf

    model, cfg = hf.build(name, layers=2)
    ids = torch.randint(0, cfg.vocab_size, (batch, prompt), device="cuda")
    started = time.time()
    said = {"model": name, "batch": batch, "torch": torch.__version__}
    import transformers

    said["transformers"] = transformers.__version__
    said["compile_config"] = repr(getattr(model.generation_config, "compile_config", None))
    try:
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=new_tokens, cache_implementation="static", do_sample=False)
        said["generated"] = list(out.shape)
        said["tokens_again_equal"] = None
        with torch.no_grad():
            again = model.generate(ids, max_new_tokens=new_tokens, cache_implementation="static", do_sample=False)
        said["tokens_again_equal"] = bool(torch.equal(out, again))
    except Exception as e:  # noqa: BLE001 - what the recipe raised is the finding
        said["error"] = f"{type(e).__name__}: {e}"[:2000]
        said["traceback"] = traceback.format_exc()[-4000:]
    said["seconds"] = round(time.time() - started, 1)
    try:
        said["trees"] = tree_facts()
    except Exception as e:  # noqa: BLE001
        said["trees"] = f"{type(e).__name__}: {e}"
    return said


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--models", default="qwen3,olmoe,gemma2")
    p.add_argument("--batches", default="1,2")
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=8)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in a.models.split(","):
        for batch in (int(b) for b in a.batches.split(",")):
            said = probe(name, batch, a.prompt, a.new_tokens)
            with open(os.path.join(a.out, f"{name}-b{batch}.json"), "w") as f:
                json.dump(said, f, indent=1, default=str)
            trees = said["trees"]
            roots = trees.get("roots", {}) if isinstance(trees, dict) else {}
            print(f"{name} b{batch}: {said['seconds']} s, error {said.get('error', 'none')[:200]}, "
                  f"{sum(len(v) for v in roots.values())} root nodes, functions {len(trees.get('functions', {})) if isinstance(trees, dict) else '?'}",
                  flush=True)
        torch._dynamo.reset()  # each model's trees start empty; its batch sizes share them
        from torch._inductor import cudagraph_trees

        cudagraph_trees.reset_cudagraph_trees()


if __name__ == "__main__":
    main()
