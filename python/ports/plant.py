"""Planted defects for a port: what `gnomon qualify` must refuse however its outputs vary.

A planted core is the port run again in a process of its own with one defect made in the
program before its export (a weight tensor of one layer perturbed, the KV cache written one
slot off, one layer's output skipped), then given the expectations of the port's own core
(`--against`): the judge holds what the defective program computes to what the original
run gave, as it would hold a restore that computed something else. `control` makes no
defect: it must pass, or the reds mean nothing.

    python -m gnomon.torch python/ports/moe.py --out ORIG ...
    python -m gnomon.torch python/ports/moe.py --out PLANTED --plant weight:0.0156 --against ORIG ...
"""

import json
import os
import shutil

import torch

KINDS = ("control", "weight", "kv-slot", "skip-layer", "unwritten")


def arguments(parser):
    parser.add_argument("--plant", help="control, weight:REL (one layer's weight tensor, each element times "
                                        "1 ± REL), kv-slot, skip-layer or unwritten (a tensor no node writes "
                                        "read; exported with its own expectations): export with this defect made")
    parser.add_argument("--against", help="the port's own core, whose expectations the planted core takes")


def kind(plant):
    """(kind, value) of a `--plant` argument."""
    name, _, value = plant.partition(":")
    if name not in KINDS or (name == "weight") != bool(value):
        raise SystemExit(f"unknown plant {plant}: control, weight:REL, kv-slot, skip-layer or unwritten")
    return name, float(value) if value else None


def perturb(weight, rel, seed=1):
    """Multiplies each element of `weight` by 1 ± `rel` (the sign random, seeded); returns
    the fraction of elements that changed (in bfloat16 a small `rel` rounds away)."""
    original = weight.detach().clone()
    g = torch.Generator(device=weight.device).manual_seed(seed)
    signs = torch.randint(0, 2, weight.shape, generator=g, device=weight.device, dtype=torch.int8) * 2 - 1
    with torch.no_grad():
        weight.mul_(1 + rel * signs.to(weight.dtype))
    return (weight != original).float().mean().item()


def splice(original, planted):
    """Gives the planted core the original core's expectations (and the first launches of
    its varying outputs, the files they name)."""
    with open(os.path.join(original, "manifest.json")) as f:
        source = json.load(f)
    path = os.path.join(planted, "manifest.json")
    with open(path) as f:
        target = json.load(f)
    names = lambda m: sorted(t["name"] for t in m["templates"])  # noqa: E731
    if names(source) != names(target):
        raise SystemExit(f"planted core {planted} has templates {names(target)}, not {names(source)}")
    files = lambda m: [o["variation"]["file"] for e in m["expectations"] for o in e["outputs"] if "variation" in o]  # noqa: E731
    for file in files(target):
        os.remove(os.path.join(planted, file))
    for file in files(source):
        os.makedirs(os.path.dirname(os.path.join(planted, file)), exist_ok=True)
        shutil.copyfile(os.path.join(original, file), os.path.join(planted, file))
    target["expectations"] = source["expectations"]
    # A variation's `nodes` name where the original varied; a planted program captured
    # again (a layer skipped) may not have them, and the names only describe.
    ids = {t["name"]: {n["id"] for n in t["nodes"]} for t in target["templates"]}
    for e in target["expectations"]:
        for o in e["outputs"]:
            if "variation" in o:
                o["variation"]["nodes"] = [n for n in o["variation"].get("nodes", []) if n in ids[e["template"]]]
    with open(path, "w") as f:
        json.dump(target, f, indent=1)
