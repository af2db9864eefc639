"""The three routes to a graph of one decode step side by side (issue 59 item 3): the files
`python/ports/hf_generate.py --logits` wrote, one per route, compared pairwise. For each
pair: whether the logits are the same bits, the largest difference scaled by the largest
magnitude, and in how many rows the greedy token agrees; for each hand route, whether its
captured graph gives what `generate` gave for the same step. Prints a Markdown table.

    python3 tools/compare_routes.py trees.pt eager.pt compiled.pt
"""

import itertools
import sys

import torch


def logits(saved):
    """The step's logits as the route's core records them: the captured graph's for a hand
    route, generate's last step (the tree's last replay) for the trees."""
    return saved.get("core", saved["generate"])


def compared(a, b):
    scale = max(a.abs().max().item(), b.abs().max().item(), 1e-30)
    return {
        "same bits": torch.equal(a, b),
        "max diff / max |logit|": f"{(a - b).abs().max().item() / scale:.2e}",
        "greedy token agrees": f"{(a.argmax(-1) == b.argmax(-1)).sum().item()} of {a.shape[0]}",
    }


def table(rows):
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(str(r[k]) for k in head) + " |" for r in rows])


def main(paths):
    if len(paths) < 2:
        sys.exit("compare_routes: give the files of two routes or more")
    saved = [torch.load(p) for p in paths]
    if len({tuple(s["sequences"].shape) for s in saved}) != 1:
        sys.exit("compare_routes: the routes generated sequences of different shapes")
    rows = [{"compared": f"{x['route']} / {y['route']}", **compared(logits(x), logits(y)),
             "same prompt and tokens": torch.equal(x["sequences"], y["sequences"])}
            for x, y in itertools.combinations(saved, 2)]
    rows += [{"compared": f"{s['route']}: graph / generate", **compared(s["core"], s["generate"]),
              "same prompt and tokens": True} for s in saved if "core" in s]
    print(table(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
