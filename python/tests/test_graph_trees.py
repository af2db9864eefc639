"""The mapping of Inductor's CUDA graph trees onto a core (gnomon.graph_trees.plan), read
from trees recorded on an H100 (data/graph_trees/README.md): transformers' own
`generate(..., cache_implementation="static")` on three architectures, and trees made from
them with a child node, a stranger child and an untested PyTorch."""

import copy
import json
import re
import types
from pathlib import Path

import pytest

from gnomon import graph_trees

TREES = Path(__file__).resolve().parent / "data" / "graph_trees"


def recorded(model):
    return json.loads((TREES / f"{model}-b1.json").read_text())


def roles(template):
    said = {}
    for t in template["inputs"]:
        said.setdefault(t["role"], []).append(t["index"])
    return said


@pytest.mark.parametrize("model, name, inputs, vocabulary", [
    ("qwen3", "f0-1x1-1x1-1x1x1x23", [0, 4, 13], 151936),
    ("olmoe", "f0-1x1-1x1-1x1x1x23", [0, 5, 13], 50304),
    # Gemma 2's sliding-window layer takes a mask of its own: four non-static inputs; its
    # tree holds two functions, of which Inductor recorded the second only.
    ("gemma2", "f1-1x1-1x1-1x1x1x23-1x1x1x23", [0, 5, 12, 27], 256000),
])
def test_the_recipes_decode_step_is_one_template_with_each_tensor_in_its_role(model, name, inputs, vocabulary):
    tree = recorded(model)
    [template] = graph_trees.plan(tree)
    assert template["name"] == name
    # Inductor recorded the step twice (a static input's address changed); graph 1 replays.
    assert (template["graph"], template["superseded"]) == (1, [0])
    said = roles(template)
    assert said["input"] == inputs
    function = tree["functions"][tree["nodes"][1]["function"]]
    assert said["state"] == function["mutated"], "the caches and their lengths, which the step writes"
    assert len(said["weight"]) == 26 and not set(said["weight"]) & set(function["mutated"])
    assert len(template["inputs"]) == len(tree["nodes"][1]["inputs"]), "every input has one role"
    [logits] = template["outputs"]
    assert (logits["shape"][-1], logits["dtype"]) == (vocabulary, "torch.bfloat16")
    # The inputs are Inductor's own copies, which the graph reads: graph 1's, not graph 0's.
    addresses = [t["address"] for t in tree["nodes"][1]["inputs"]]
    assert [t["address"] for t in template["inputs"]] == addresses
    assert template["parent"] is None and template["from-parent"] == []


def moved_inputs(node, by):
    """`node` with its non-static inputs `by` bytes on: Inductor copies each node's inputs
    into blocks of its own."""
    fixed = set(node["static"]) | set(node["managed"])
    node["inputs"] = [t if i in fixed or "address" not in t else dict(t, address=t["address"] + by)
                      for i, t in enumerate(node["inputs"])]
    return node


def with_child(tree, managed_address=None, parent=1, graph=2, output=0):
    """`tree` with a child of graph `parent`: graph `graph`, the same function, whose input 0
    is its parent's output `output` (or lies at `managed_address`); as in Inductor, a
    managed input is among the node's static ones too."""
    tree = copy.deepcopy(tree)
    nodes = {n["graph"]: n for n in tree["nodes"]}
    child = copy.deepcopy(nodes[1])
    child.update(graph=graph, parent=parent, managed=[0], static=sorted({0, *child["static"]}))
    source = nodes[parent]["outputs"][output] if managed_address is None else dict(nodes[1]["outputs"][0],
                                                                                      address=managed_address)
    child["inputs"][0] = dict(source)
    child["outputs"] = [o and dict(o, address=o["address"] + (graph << 20)) for o in child["outputs"]]
    tree["nodes"].append(moved_inputs(child, graph << 24))
    return tree


def test_a_child_node_follows_its_parent_and_reads_its_parents_output():
    parent, child = graph_trees.plan(with_child(recorded("qwen3")))
    assert child["parent"] == parent["name"] and child["name"].startswith(parent["name"] + ".")
    assert child["from-parent"] == [{"index": 0, "template": parent["name"], "output": 0}]
    assert 0 not in [t["index"] for t in child["inputs"]], "a pool tensor is neither input, weight nor state"


def test_a_grandchild_may_read_its_grandparents_output():
    tree = with_child(with_child(recorded("qwen3")), parent=2, graph=3)
    tree["nodes"][-1]["inputs"][0] = dict(tree["nodes"][1]["outputs"][0])  # the root's logits
    root, _, grandchild = graph_trees.plan(tree)
    assert grandchild["from-parent"] == [{"index": 0, "template": root["name"], "output": 0}]


def test_which_output_of_its_parent_a_child_reads_is_kept():
    tree = recorded("olmoe")
    logits = tree["nodes"][1]["outputs"][0]
    tree["nodes"][1]["outputs"] = [None, dict(logits, address=logits["address"] + 4096), logits]
    *_, child = graph_trees.plan(with_child(tree, output=2))
    assert child["from-parent"][0]["output"] == 2
    [parent] = [t for t in graph_trees.plan(tree)]
    assert [o["index"] for o in parent["outputs"]] == [1, 2], "an output aliasing an input is no output"


def test_one_function_at_one_shape_under_two_parents_is_two_templates():
    tree = with_child(recorded("qwen3"))
    other_root = moved_inputs(copy.deepcopy(tree["nodes"][1]), 5 << 24)
    other_root.update(graph=5, function="9")
    other_root["inputs"][0] = dict(other_root["inputs"][0], shape=[2, 1])
    tree["functions"]["9"] = tree["functions"]["0"]
    tree["nodes"].append(other_root)
    tree = with_child(tree, parent=5, graph=6)
    names = [t["name"] for t in graph_trees.plan(tree)]
    assert len(names) == len(set(names)) == 4


def test_a_tensor_one_function_writes_is_state_where_another_only_reads_it():
    tree = recorded("qwen3")
    reader = moved_inputs(copy.deepcopy(tree["nodes"][1]), 7 << 24)
    reader.update(graph=7, function="3")
    reader["inputs"][0] = dict(reader["inputs"][0], shape=[4, 1])
    tree["functions"]["3"] = dict(tree["functions"]["0"], mutated=[])
    tree["nodes"].append(reader)
    *_, read_only = graph_trees.plan(tree)
    assert roles(read_only)["state"] == tree["functions"]["0"]["mutated"]


def test_each_recording_again_supersedes_the_one_before():
    tree = recorded("gemma2")
    third = copy.deepcopy(tree["nodes"][1])
    third["graph"] = 2
    tree["nodes"].append(third)
    [template] = graph_trees.plan(tree)
    assert (template["graph"], template["superseded"]) == (2, [0, 1])


def test_inputs_keep_their_placeholders_names():
    [template] = graph_trees.plan(recorded("qwen3"))
    assert [(t["index"], t["placeholder"]) for t in template["inputs"][:2]] == [(0, "arg0_1"), (1, "arg1_1")]


def test_a_child_reading_pool_memory_its_parent_does_not_leave_is_refused_by_name():
    with pytest.raises(graph_trees.Refused, match=r"graph 2 .*input 0 lies in the tree's pool at 0x1234, which no "
                                                  r"output of its ancestors \(graphs 1\) leaves"):
        graph_trees.plan(with_child(recorded("qwen3"), managed_address=0x1234))


def test_the_children_of_a_node_recorded_again_do_not_replay():
    tree = with_child(recorded("olmoe"))
    tree["nodes"][2]["parent"] = 0  # a child of the superseded graph 0
    [template] = graph_trees.plan(tree)
    assert template["graph"] == 1


def test_a_child_of_a_node_not_in_the_tree_is_refused():
    tree = with_child(recorded("olmoe"))
    tree["nodes"][2]["parent"] = 7
    with pytest.raises(graph_trees.Refused, match="graph 2: its parent, graph 7, is not in the tree"):
        graph_trees.plan(tree)


@pytest.mark.parametrize("version", ["2.12.0+cu130", "2.1.0", "2.110.0", "3.11.0"])
def test_an_untested_pytorch_is_refused_naming_the_tested_one(version):
    tree = recorded("gemma2")
    tree["torch"] = version
    with pytest.raises(graph_trees.Refused, match=rf"PyTorch {re.escape(version)}: .* only as PyTorch 2\.11 records"):
        graph_trees.plan(tree)


def test_a_tree_that_recorded_nothing_is_refused_with_where_to_look():
    tree = recorded("qwen3")
    tree["nodes"] = []
    with pytest.raises(graph_trees.Refused, match="recorded no graph.*TORCH_LOGS=cudagraphs"):
        graph_trees.plan(tree)


def test_every_input_and_the_kept_state_are_put_back_as_the_last_replay_found_them_never_a_weight():
    [template] = graph_trees.plan(recorded("qwen3"))
    said = roles(template)
    kept = set(said["input"]) | set(said["state"]) | {said["weight"][0]}
    assert graph_trees.put_back(template, kept) == sorted(set(said["input"]) | set(said["state"]))


def test_small_state_not_kept_is_refused_and_larger_state_stays_as_the_last_replay_left_it():
    # Qwen 3's caches are 1 x 8 x 23 x 128 bf16 (46 KiB, kept each replay), OLMoE's twice that.
    [small] = graph_trees.plan(recorded("qwen3"))
    said = roles(small)
    with pytest.raises(graph_trees.Refused, match=r"the state its last replay read \(.+\) was not kept"):
        graph_trees.put_back(small, set(said["input"]))
    [large] = graph_trees.plan(recorded("olmoe"))
    said = roles(large)
    counters = [t["index"] for t in large["inputs"] if t["role"] == "state" and t["shape"] == []]
    assert graph_trees.put_back(large, set(said["input"]) | set(counters)) == sorted(said["input"] + counters)


def test_a_node_whose_inputs_were_not_kept_is_refused_naming_them():
    [template] = graph_trees.plan(recorded("qwen3"))
    first, *rest = [t for t in template["inputs"] if t["role"] == "input"]
    with pytest.raises(graph_trees.Refused, match=rf"the inputs its last replay read \({first['placeholder']}\) were "
                                                  r"not kept; call use_arena\(\.\.\., graph_trees=True\)"):
        graph_trees.put_back(template, {t["index"] for t in rest})


def test_a_scalar_input_is_never_put_back_nor_asked_for():
    [template] = graph_trees.plan(recorded("qwen3"))
    inputs = [t for t in template["inputs"] if t["role"] == "input"]
    scalar = {k: v for k, v in inputs[0].items() if k not in ("address", "shape", "stride", "dtype")}
    template["inputs"] = [dict(scalar, scalar="5"), *template["inputs"][1:]]
    state = {t["index"] for t in template["inputs"] if t["role"] == "state"}
    assert inputs[0]["index"] not in graph_trees.put_back(template, {t["index"] for t in inputs[1:]} | state)


def test_the_node_that_replayed_last_is_exported_though_recorded_first():
    # Inductor replays the first recorded node whose static inputs match: an older node can
    # be the one that ran last.
    tree = recorded("qwen3")
    tree["nodes"][0]["replayed"], tree["nodes"][1]["replayed"] = 5, 3
    [template] = graph_trees.plan(tree)
    assert (template["graph"], template["superseded"]) == (0, [1])


def test_a_node_that_writes_a_tensor_its_parent_left_is_refused():
    tree = with_child(recorded("qwen3"))
    tree["functions"]["0"] = dict(tree["functions"]["0"], mutated=[0, *tree["functions"]["0"]["mutated"]])
    with pytest.raises(graph_trees.Refused, match=r"graph 2 .*writes input\(s\) \[0\], tensors of the tree's pool"):
        graph_trees.plan(tree)


def test_two_templates_inputs_in_one_place_are_refused_naming_both():
    tree = recorded("qwen3")
    other_root = copy.deepcopy(tree["nodes"][1])
    other_root.update(graph=5, function="9")
    other_root["inputs"][0] = dict(other_root["inputs"][0], shape=[2, 1])
    tree["functions"]["9"] = tree["functions"]["0"]
    tree["nodes"].append(other_root)
    with pytest.raises(graph_trees.Refused, match=r"f0-1x1-1x1-1x1x1x23 input arg0_1 .* overlaps f9-2x1-1x1-1x1x1x23 "
                                                  r"input arg0_1 .*one snapshot cannot hold both"):
        graph_trees.plan(tree)


def test_an_input_put_back_over_an_output_a_child_reads_is_refused():
    tree = with_child(recorded("qwen3"))
    parent_logits = tree["nodes"][1]["outputs"][0]["address"]
    child = tree["nodes"][2]
    index = next(i for i in range(len(child["inputs"])) if i not in child["static"])
    child["inputs"][index] = dict(child["inputs"][index], address=parent_logits + 64)
    with pytest.raises(graph_trees.Refused, match=r"input .* overlaps f0-1x1-1x1-1x1x1x23 output 0, which "
                                                  r"f0-1x1-1x1-1x1x1x23\.f0-.* reads"):
        graph_trees.plan(tree)


def test_state_two_templates_share_is_put_back_once_not_refused():
    tree = with_child(recorded("qwen3"))
    parent, child = graph_trees.plan(tree)
    shared = {t["address"] for t in parent["inputs"] if t["role"] == "state"}
    assert shared == {t["address"] for t in child["inputs"] if t["role"] == "state"}


class Storage:
    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


class Tensor:
    """As much of a CUDA tensor as `input_tensor` reads: a view `offset` elements into a
    storage at `base`."""
    def __init__(self, base, offset=0, shape=(4, 8), stride=(8, 1), itemsize=2):
        self.base, self.offset, self.shape, self.itemsize, self._stride = base, offset, shape, itemsize, stride

    def data_ptr(self):
        return self.base + self.offset * self.itemsize

    def untyped_storage(self):
        return Storage(self.base)

    def size(self):
        return self.shape

    def stride(self):
        return self._stride

    def element_size(self):
        return self.itemsize

    def as_strided(self, size, stride, offset):
        return Tensor(self.base, offset, size, stride, self.itemsize)


def test_a_static_view_is_read_at_its_own_address_not_its_storages():
    # Inductor rebuilds each input from its storage and drops a view's offset; the graph
    # reads the view itself, whose address static_input_data_ptrs keeps.
    view = Tensor(0x7000, offset=96)
    node = types.SimpleNamespace(reconstructed_inputs=[Tensor(0x7000), Tensor(0x9000), 3],
                                 static_input_data_ptrs=[view.data_ptr(), None, None], id=types.SimpleNamespace(id=4))
    read = graph_trees.input_tensor(node, 0)
    assert (read.data_ptr(), read.size(), read.stride()) == (0x7000 + 192, (4, 8), (8, 1))
    assert graph_trees.input_tensor(node, 1).data_ptr() == 0x9000, "a copied input lies where it was rebuilt"
    assert graph_trees.input_tensor(node, 2) == 3
    assert graph_trees.input_tensor(node, 0, [view]) is view, "while recording, the tensor itself"
    node.static_input_data_ptrs[0] = 0x7000 + 3
    with pytest.raises(graph_trees.Refused, match="not a whole element into its storage"):
        graph_trees.input_tensor(node, 0)


def test_state_is_kept_each_replay_only_when_small_and_without_gaps():
    assert graph_trees.kept_each_replay([4, 8], [8, 1], 2)
    assert not graph_trees.kept_each_replay([4, 8], [16, 1], 2), "rows 16 apart leave gaps another tensor may fill"
    assert graph_trees.kept_each_replay([32, 1024], [1024, 1], 2), "64 KiB exactly"
    assert not graph_trees.kept_each_replay([32, 1025], [1025, 1], 2)
    assert graph_trees.span_elements([3, 0], [1, 1]) == 0
