"""Inductor's CUDA graph trees read as a core's templates (issue 59).

`torch.compile(mode="reduce-overhead")`, and transformers' static-cache `generate`, which
compiles its decode step that way itself, record CUDA graphs in a *tree* that Inductor
manages: each node a graph of one compiled function at one set of input shapes, a child
node run after its parent and reading its parent's outputs from the tree's pool.

Two steps, so the second can be tested without a GPU from a recorded tree:
- `describe(manager, version)` reads the live tree manager into plain data: the
  functions' mutated inputs and placeholders, and every recorded node's function,
  parent, input roles, the tensors its graph reads (Inductor's own copies of the
  non-static inputs included) and the outputs it leaves, by address.
- `plan(description)` maps that onto the core: one template per node that will replay,
  named by its function and its non-static inputs' shapes, with each input's role
  (input, weight, state, or a parent's output), and the nodes Inductor recorded again
  and will not replay. What it cannot map is refused by `Refused`, naming the node and
  why, before anything is exported.
"""

# PyTorch versions (major.minor) whose graph-tree internals this module was tested on.
TESTED = ("2.11",)


class Refused(Exception):
    """A tree that cannot be exported as a core, and why."""


def check_version(version):
    """Refuses a PyTorch whose graph trees were never read by this module: they are
    internals, and a renamed attribute would map tensors to the wrong roles."""
    major_minor = ".".join(version.split("+")[0].split(".")[:2])
    if major_minor not in TESTED:
        raise Refused(f"PyTorch {version}: graph trees are PyTorch internals, and this kit reads them only as "
                      f"PyTorch {', '.join(TESTED)} records them; export with a tested version, or capture the "
                      f"compiled step yourself with torch.cuda.graph")


def _tensor(t):
    """A tensor an input position holds: its shape, stride, dtype and address."""
    if not hasattr(t, "data_ptr"):
        return {"scalar": repr(t)}
    return {"shape": list(t.shape), "stride": list(t.stride()), "dtype": str(t.dtype), "address": t.data_ptr()}


def _output(meta):
    """An output's metadata as Inductor keeps it (None where it aliases an input)."""
    if not isinstance(meta, dict):
        return None
    return {"shape": list(meta["size"]), "stride": list(meta["stride"]), "dtype": str(meta["dtype"]),
            "address": meta["data_ptr"], "bytes": meta["nbytes"]}


def describe(manager, version):
    """The live tree `manager` (torch._inductor.cudagraph_trees.CUDAGraphTreeManager) as
    plain data, parents before their children."""
    functions = {str(fid.id): {"mutated": sorted(f.mutated_input_idxs), "placeholders": [p.name for p in f.placeholders]}
                 for fid, f in manager.ids_to_funcs.items()}
    nodes = []
    pending = [(node, None) for roots in manager.roots.values() for node in roots]
    while pending:
        node, parent = pending.pop(0)
        nodes.append({"graph": node.id.id, "function": str(node.wrapped_function.id.id), "parent": parent,
                      "static": sorted(node.static_input_idxs), "managed": sorted(node.cudagraph_managed_idxs),
                      "inputs": [_tensor(t) for t in node.reconstructed_inputs],
                      "outputs": [_output(m) for m in node.outputs_metadata]})
        pending += [(child, node.id.id) for children in node.children.values() for child in children]
    return {"torch": version, "functions": functions, "nodes": nodes}


def _shape_name(tensor):
    return "x".join(str(d) for d in tensor.get("shape", [])) or "scalar"


def _template_name(node, inputs):
    return f"f{node['function']}-" + "-".join(_shape_name(t) for t in inputs) if inputs else f"f{node['function']}"


def _latest(nodes):
    """The nodes that will replay, and the graphs each superseded: a function recorded
    again at the same shapes ("static input data pointer changed") replays its latest."""
    latest, superseded = {}, {}
    for node in nodes:
        non_static = [node["inputs"][i] for i in _non_static(node)]
        key = (node["function"], node["parent"], repr([(t.get("shape"), t.get("dtype")) for t in non_static]))
        if key in latest:
            superseded.setdefault(node["graph"], []).append(latest[key]["graph"])
            superseded[node["graph"]] += superseded.pop(latest[key]["graph"], [])
        latest[key] = node
    kept = {n["graph"] for n in latest.values()}
    return [n for n in nodes if n["graph"] in kept], superseded


def _non_static(node):
    fixed = set(node["static"]) | set(node["managed"])
    return [i for i in range(len(node["inputs"])) if i not in fixed]


def _from_parent(node, parent, name):
    """Each managed input of `node`: the index of its parent's output at its address."""
    if parent is None:
        raise Refused(f"graph {node['graph']} ({name}): it reads {len(node['managed'])} tensors of the tree's pool "
                      f"but has no parent to take them from")
    at = {o["address"]: j for j, o in enumerate(parent["outputs"]) if o is not None}
    mapped = []
    for i in node["managed"]:
        address = node["inputs"][i].get("address")
        if address not in at:
            raise Refused(f"graph {node['graph']} ({name}): input {i} lies in the tree's pool at {address:#x}, "
                          f"which no output of its parent (graph {parent['graph']}) leaves")
        mapped.append({"index": i, "parent-output": at[address]})
    return mapped


def _role(function, i):
    return "state" if i in function["mutated"] else "weight"


def plan(description):
    """The core's templates for a described tree, parents first (see the module's doc)."""
    check_version(description["torch"])
    nodes = description["nodes"]
    if not nodes:
        raise Refused("the graph tree recorded no graph: Inductor warmed the function up but never recorded it "
                      "(run the step at least three times at each shape, and read TORCH_LOGS=cudagraphs for the "
                      "reasons it skipped)")
    kept, superseded = _latest(nodes)
    by_graph = {n["graph"]: n for n in kept}
    names, templates = {}, []
    for node in kept:
        function = description["functions"].get(node["function"])
        if function is None:
            raise Refused(f"graph {node['graph']}: function {node['function']} is not among the tree's functions")
        if node["parent"] is not None and node["parent"] not in names:
            if all(n["graph"] != node["parent"] for n in nodes):
                raise Refused(f"graph {node['graph']}: its parent, graph {node['parent']}, is not in the tree")
            continue  # below a node recorded again: it will not replay either
        non_static = _non_static(node)
        name = _template_name(node, [node["inputs"][i] for i in non_static])
        if name in names.values():
            raise Refused(f"graph {node['graph']} ({name}): two replayed nodes of one function at the same shapes")
        names[node["graph"]] = name
        placeholder = lambda i: function["placeholders"][i] if i < len(function["placeholders"]) else f"arg{i}"  # noqa: E731
        described = lambda i, role: {"index": i, "placeholder": placeholder(i), "role": role, **node["inputs"][i]}  # noqa: E731
        templates.append({
            "name": name,
            "graph": node["graph"],
            "parent": names.get(node["parent"]),
            "superseded": sorted(superseded.get(node["graph"], [])),
            "inputs": sorted([described(i, "input") for i in non_static]
                             + [described(i, _role(function, i)) for i in node["static"]], key=lambda t: t["index"]),
            "from-parent": _from_parent(node, by_graph.get(node["parent"]), name) if node["managed"] else [],
            "outputs": [{"index": j, **o} for j, o in enumerate(node["outputs"]) if o is not None],
        })
    return templates
