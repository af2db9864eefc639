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
    """An output's metadata as Inductor keeps it (None where it aliases an input): its
    `data_ptr` is its storage's, so the first element lies `storage_offset` elements on."""
    if not isinstance(meta, dict):
        return None
    first = meta["data_ptr"] + meta.get("storage_offset", 0) * meta["dtype"].itemsize
    return {"shape": list(meta["size"]), "stride": list(meta["stride"]), "dtype": str(meta["dtype"]),
            "address": first, "bytes": meta["nbytes"]}


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


def _template_name(node, inputs, parent):
    """`f<function>-<shape>-…`, after its parent's name and a dot for a child: one function
    recorded at one set of shapes under two parents is two templates."""
    own = f"f{node['function']}-" + "-".join(_shape_name(t) for t in inputs) if inputs else f"f{node['function']}"
    return f"{parent}.{own}" if parent else own


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


def _from_ancestors(node, path, name):
    """Each managed input of `node`: the template (its parent's, or an older ancestor's)
    and output index that leaves a tensor at its address; `path` is its ancestors, the
    parent last, as (template name, node)."""
    if not path:
        raise Refused(f"graph {node['graph']} ({name}): it reads {len(node['managed'])} tensors of the tree's pool "
                      f"but has no parent to take them from")
    at = {o["address"]: (template, j) for template, n in path for j, o in enumerate(n["outputs"]) if o is not None}
    mapped = []
    for i in node["managed"]:
        address = node["inputs"][i].get("address")
        if address not in at:
            raise Refused(f"graph {node['graph']} ({name}): input {i} lies in the tree's pool at {address:#x}, "
                          f"which no output of its ancestors (graphs {', '.join(str(n['graph']) for _, n in path)}) "
                          f"leaves")
        mapped.append({"index": i, "template": at[address][0], "output": at[address][1]})
    return mapped


def _mutated_addresses(description):
    """The addresses of the tensors any recorded function writes: state wherever they are
    read, since a tensor one function writes and another reads has one role."""
    return {node["inputs"][i].get("address") for node in description["nodes"]
            for i in description["functions"].get(node["function"], {}).get("mutated", [])
            if i < len(node["inputs"])}


def _ancestors(node, by_graph):
    """(template name, node) of each ancestor of `node` that replays, its root first."""
    path, parent = [], by_graph.get(node["parent"])
    while parent is not None:
        path.insert(0, (parent["name"], parent["node"]))
        parent = by_graph.get(parent["node"]["parent"])
    return path


def _inputs(node, function, written):
    """Each input of `node` but those it takes from the tree's pool, with its role: an
    input the user fills (Inductor copies it into the tensor given here), state (written
    by some function of the tree) or a weight."""
    def described(i, role):
        name = function["placeholders"][i] if i < len(function["placeholders"]) else f"arg{i}"
        return {"index": i, "placeholder": name, "role": role, **node["inputs"][i]}

    fixed = [i for i in node["static"] if i not in node["managed"]]
    role = lambda i: "state" if node["inputs"][i].get("address") in written else "weight"  # noqa: E731
    return sorted([described(i, "input") for i in _non_static(node)] + [described(i, role(i)) for i in fixed],
                  key=lambda t: t["index"])


def plan(description):
    """The core's templates for a described tree, parents first (see the module's doc)."""
    check_version(description["torch"])
    nodes = description["nodes"]
    if not nodes:
        raise Refused("the graph tree recorded no graph: Inductor warmed the function up but never recorded it "
                      "(run the step at least three times at each shape, and read TORCH_LOGS=cudagraphs for the "
                      "reasons it skipped)")
    kept, superseded = _latest(nodes)
    written = _mutated_addresses(description)
    known = {n["graph"] for n in nodes}
    templates, by_graph = [], {}
    for node in kept:
        function = description["functions"].get(node["function"])
        if function is None:
            raise Refused(f"graph {node['graph']}: function {node['function']} is not among the tree's functions")
        if node["parent"] is not None and node["parent"] not in by_graph:
            if node["parent"] not in known:
                raise Refused(f"graph {node['graph']}: its parent, graph {node['parent']}, is not in the tree")
            continue  # below a node recorded again: it will not replay either
        parent = by_graph.get(node["parent"])
        name = _template_name(node, [node["inputs"][i] for i in _non_static(node)], parent and parent["name"])
        if any(t["name"] == name for t in templates):
            raise Refused(f"graph {node['graph']} ({name}): two replayed nodes of one function at the same shapes")
        path = _ancestors(node, by_graph)
        template = {
            "name": name,
            "graph": node["graph"],
            "parent": path[-1][0] if path else None,
            "superseded": sorted(superseded.get(node["graph"], [])),
            "inputs": _inputs(node, function, written),
            "from-parent": _from_ancestors(node, path, name) if node["managed"] else [],
            "outputs": [{"index": j, **o} for j, o in enumerate(node["outputs"]) if o is not None],
        }
        templates.append(template)
        by_graph[node["graph"]] = {"name": name, "node": node}
    return templates


def put_back(template, kept):
    """Which of `template`'s inputs to write back as its node's latest replay found them
    before the snapshot, so that a launch of the core is that replay: each tensor input
    (Inductor's copies of them are overwritten by the graph's later kernels) and each state
    the kit `kept` (the indices it copied, only small state among them), never a weight.
    Refused where a tensor input was not kept: the node was recorded before the kit
    watched the tree (``use_arena(..., graph_trees=True)`` comes first)."""
    tensors = [i for i in template["inputs"] if "address" in i]
    missing = [i["placeholder"] for i in tensors if i["role"] == "input" and i["index"] not in kept]
    if missing:
        raise Refused(f"graph {template['graph']} ({template['name']}): the inputs its last replay read "
                      f"({', '.join(missing)}) were not kept; call use_arena(..., graph_trees=True) before the "
                      f"step is first compiled")
    return [i["index"] for i in tensors if i["role"] in ("input", "state") and i["index"] in kept]
