"""The mapping of Inductor's CUDA graph trees onto a core (gnomon.graph_trees.plan), read
from trees recorded on an H100 (data/graph_trees/README.md): transformers' own
`generate(..., cache_implementation="static")` on three architectures, and trees made from
them with a child node, a stranger child and an untested PyTorch."""

import copy
import json
import re
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
    tree["nodes"].append(child)
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
    other_root = copy.deepcopy(tree["nodes"][1])
    other_root.update(graph=5, function="9")
    other_root["inputs"][0] = dict(other_root["inputs"][0], shape=[2, 1])
    tree["functions"]["9"] = tree["functions"]["0"]
    tree["nodes"].append(other_root)
    tree = with_child(tree, parent=5, graph=6)
    names = [t["name"] for t in graph_trees.plan(tree)]
    assert len(names) == len(set(names)) == 4


def test_a_tensor_one_function_writes_is_state_where_another_only_reads_it():
    tree = recorded("qwen3")
    reader = copy.deepcopy(tree["nodes"][1])
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
    state, weight = said["state"][0], said["weight"][0]
    kept = set(said["input"]) | {state, weight}
    assert graph_trees.put_back(template, kept) == sorted(set(said["input"]) | {state})
    # State too large to keep each replay (the cache itself) stays as the last replay left it.
    assert graph_trees.put_back(template, set(said["input"])) == said["input"]


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
    assert inputs[0]["index"] not in graph_trees.put_back(template, {t["index"] for t in inputs[1:]})
