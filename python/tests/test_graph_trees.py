"""The mapping of Inductor's CUDA graph trees onto a core (gnomon.graph_trees.plan), read
from trees recorded on an H100 (data/graph_trees/README.md): transformers' own
`generate(..., cache_implementation="static")` on three architectures, and trees made from
them with a child node, a stranger child and an untested PyTorch."""

import copy
import json
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


def with_child(tree, managed_address=None):
    """`tree` with a child of graph 1: graph 2, the same function, whose input 0 is its
    parent's logits (or lies at `managed_address`)."""
    tree = copy.deepcopy(tree)
    parent = tree["nodes"][1]
    child = copy.deepcopy(parent)
    child.update(graph=2, parent=1, managed=[0])
    child["inputs"][0] = dict(parent["outputs"][0], address=managed_address or parent["outputs"][0]["address"])
    child["outputs"][0] = dict(child["outputs"][0], address=child["outputs"][0]["address"] + (1 << 20))
    tree["nodes"].append(child)
    return tree


def test_a_child_node_follows_its_parent_and_reads_its_parents_output():
    parent, child = graph_trees.plan(with_child(recorded("qwen3")))
    assert child["parent"] == parent["name"]
    assert child["from-parent"] == [{"index": 0, "parent-output": 0}]
    assert 0 not in roles(child).get("input", []), "a pool tensor is not an input the user fills"
    assert child["name"] != parent["name"]


def test_a_child_reading_pool_memory_its_parent_does_not_leave_is_refused_by_name():
    with pytest.raises(graph_trees.Refused, match=r"graph 2 .*input 0 lies in the tree's pool at 0x1234, which no "
                                                  r"output of its parent \(graph 1\) leaves"):
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


def test_an_untested_pytorch_is_refused_naming_the_tested_one():
    tree = recorded("gemma2")
    tree["torch"] = "2.12.0+cu130"
    with pytest.raises(graph_trees.Refused, match=r"PyTorch 2\.12\.0\+cu130: .* only as PyTorch 2\.11 records them"):
        graph_trees.plan(tree)


def test_a_tree_that_recorded_nothing_is_refused_with_where_to_look():
    tree = recorded("qwen3")
    tree["nodes"] = []
    with pytest.raises(graph_trees.Refused, match="recorded no graph.*TORCH_LOGS=cudagraphs"):
        graph_trees.plan(tree)
