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

import math

# PyTorch versions (major.minor) whose graph-tree internals this module was tested on.
TESTED = ("2.11",)


#: Mutated state up to this size is kept as each replay found it, and put back before the
#: snapshot: a step counter read as an index (transformers' static cache counts the tokens it
#: holds) must not stand one past the last step, where a further launch indexes past the
#: cache. Larger state (the cache itself) stays as the last replay left it, which that step,
#: launched again, writes alike where its writes do not depend on what they overwrite.
SMALL_STATE = 64 << 10

#: Bytes per element of the dtypes a tree's tensors are described with.
ITEMSIZE = {"torch.float64": 8, "torch.int64": 8, "torch.float32": 4, "torch.int32": 4, "torch.bfloat16": 2,
            "torch.float16": 2, "torch.int16": 2, "torch.uint8": 1, "torch.int8": 1, "torch.bool": 1,
            "torch.float8_e4m3fn": 1, "torch.float8_e5m2": 1}


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


def span_elements(shape, stride):
    """Elements of a tensor's storage from its first to its last: what a strided or
    expanded tensor of `shape` and `stride` spans."""
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, stride))


def kept_each_replay(shape, stride, itemsize):
    """Whether mutated state of this shape is kept as each replay found it: at most
    ``SMALL_STATE`` bytes, and no gaps in its span (put back whole, a gap would take bytes
    another tensor may have written since)."""
    span = span_elements(shape, stride)
    return span == math.prod(shape) and span * itemsize <= SMALL_STATE


def input_tensor(node, i, tensors=None):
    """The tensor a live tree node's graph reads at input `i`, from `tensors` (by default
    its ``reconstructed_inputs``; while recording, the tensors it records with). Inductor's
    ``reconstructed_inputs`` begin at their storage's first byte (it drops a view's storage
    offset, which its copies of non-static inputs never have); a static input's own address
    is in ``static_input_data_ptrs``, set before the recording."""
    t = (node.reconstructed_inputs if tensors is None else tensors)[i]
    at = node.static_input_data_ptrs[i] if hasattr(t, "data_ptr") else None
    if at is None or at == t.data_ptr():
        return t
    offset, misaligned = divmod(at - t.untyped_storage().data_ptr(), t.element_size())
    if misaligned:
        raise Refused(f"graph {node.id.id}: input {i} lies {at:#x}, not a whole element into its storage")
    return t.as_strided(t.size(), t.stride(), offset)


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
                      "inputs": [_tensor(input_tensor(node, i)) for i in range(len(node.reconstructed_inputs))],
                      "outputs": [_output(m) for m in node.outputs_metadata],
                      "replayed": getattr(node, "gnomon_replayed", None)})
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
    """The nodes to export, and the graphs each superseded: of a function recorded again at
    the same shapes ("static input data pointer changed"), the node that replayed last
    (Inductor replays the first of them whose static inputs match, which may be an older
    one); the one recorded last where no replay was counted."""
    latest, superseded = {}, {}
    last = lambda n: -1 if n.get("replayed") is None else n["replayed"]  # noqa: E731
    for node in nodes:
        non_static = [node["inputs"][i] for i in _non_static(node)]
        key = (node["function"], node["parent"], repr([(t.get("shape"), t.get("dtype")) for t in non_static]))
        newer, older = (node, latest.get(key))
        if older is not None and last(older) > last(node):
            newer, older = older, node
        if older is not None:
            superseded.setdefault(newer["graph"], []).append(older["graph"])
            superseded[newer["graph"]] += superseded.pop(older["graph"], [])
        latest[key] = newer
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
        written_here = sorted(set(function["mutated"]) & set(node["managed"]))
        if written_here:
            raise Refused(f"graph {node['graph']} ({name}): it writes input(s) {written_here}, tensors of the tree's "
                          f"pool its ancestors left, which a core cannot put back as its last replay found them")
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
    _refuse_overlaps(templates, function_writes={n["graph"]: set(description["functions"][n["function"]]["mutated"])
                                                 for n in kept if n["function"] in description["functions"]})
    return templates


def _itemsize(tensor):
    if tensor["dtype"] not in ITEMSIZE:
        raise Refused(f"a tensor of {tensor['dtype']}: a dtype the kit does not know the size of")
    return ITEMSIZE[tensor["dtype"]]


def _span_bytes(tensor):
    """The bytes a described tensor spans."""
    return span_elements(tensor["shape"], tensor["stride"]) * _itemsize(tensor)


def _extent(tensor):
    """The bytes a described tensor spans, as (first, end)."""
    return tensor["address"], tensor["address"] + _span_bytes(tensor)


def _put_back_extents(template, writes):
    """What the export writes back for `template` ((first, end), role, what): its tensor
    inputs, and the state its function `writes` that is kept each replay."""
    def kept(i):
        return i["index"] in writes and kept_each_replay(i["shape"], i["stride"], _itemsize(i))
    chosen = [i for i in template["inputs"] if "address" in i and (i["role"] == "input" or
                                                                   (i["role"] == "state" and kept(i)))]
    return [(_extent(i), i["role"], f"{template['name']} {i['role']} {i['placeholder']}") for i in chosen]


def _refuse_overlaps(templates, function_writes):
    """Refuses a tree where what the export puts back for one template overlaps what it puts
    back for another, or an output a child reads: one snapshot cannot hold both, and a launch
    would read the other's bytes (an index input read from another tensor can run a kernel
    out of bounds). State two templates share, the same tensor, is put back once."""
    outputs = {(t["name"], o["index"]): o for t in templates for o in t["outputs"]}
    written = [put for t in templates for put in _put_back_extents(t, function_writes[t["graph"]])]
    read = [(_extent(outputs[m["template"], m["output"]]), "output", f"{m['template']} output {m['output']}, which "
             f"{t['name']} reads") for t in templates for m in t["from-parent"]]
    for n, ((first, end), role, what) in enumerate(written):
        for (other_first, other_end), other_role, other in written[n + 1:] + read:
            shared_state = (first, end) == (other_first, other_end) and role == other_role == "state"
            if first < other_end and other_first < end and not shared_state:
                raise Refused(f"{what} ({first:#x}..{end:#x}) overlaps {other} ({other_first:#x}..{other_end:#x}): "
                              f"one snapshot cannot hold both as their last replays found them")


def put_back(template, kept):
    """Which of `template`'s inputs to write back as its node's latest replay found them
    before the snapshot, so that a launch of the core is that replay: each tensor input
    (Inductor's copies of them are overwritten by the graph's later kernels) and each state
    the kit `kept` (the indices it copied, only small state among them), never a weight.
    Refused where a tensor input was not kept (the node was recorded before the kit
    watched the tree: ``use_arena(..., graph_trees=True)`` comes first), and where state of
    at most ``SMALL_STATE`` bytes was not (larger state stays as the last replay left it)."""
    tensors = [i for i in template["inputs"] if "address" in i]
    missing = [i["placeholder"] for i in tensors if i["role"] == "input" and i["index"] not in kept]
    if missing:
        raise Refused(f"graph {template['graph']} ({template['name']}): the inputs its last replay read "
                      f"({', '.join(missing)}) were not kept; call use_arena(..., graph_trees=True) before the "
                      f"step is first compiled")
    small = [i for i in tensors if i["role"] == "state" and i["index"] not in kept
             and _span_bytes(i) <= SMALL_STATE]
    if small:
        raise Refused(f"graph {template['graph']} ({template['name']}): the state its last replay read "
                      f"({', '.join(i['placeholder'] for i in small)}) was not kept as that replay found it (state "
                      f"another function writes, or small state with gaps): a launch of the core would read it as "
                      f"whatever ran last")
    return [i["index"] for i in tensors if i["role"] in ("input", "state") and i["index"] in kept]
