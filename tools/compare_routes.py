"""The three routes to a graph of one decode step side by side (issue 59 item 3), from what
`docs/ci/routes.sh` leaves in WORK_DIR for each route: `ROUTE.pt` (what
`python/ports/hf_generate.py --logits` wrote), `ROUTE-export.json` and
`ROUTE-qualify/report.json`. Prints two Markdown tables: each route's export and restore
seconds; and the logits compared pairwise (whether they are the same bits, the largest
difference scaled by the largest magnitude, in how many rows the greedy token agrees) and,
for each hand route, its captured graph against what `generate` gave for the same step.

    python3 tools/compare_routes.py WORK_DIR
"""

import itertools
import json
import os
import sys

import torch

from catalogue_growth import restore_metrics

ROUTES = ("trees", "eager", "compiled")


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


def read(path):
    """A JSON file, or nothing where the step that writes it failed."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def seconds(work, route):
    export = read(os.path.join(work, f"{route}-export.json"))
    restore = restore_metrics(read(os.path.join(work, f"{route}-qualify", "report.json")) or {"cases": []})
    return {"route": route, "export s": export.get("export-s", "-"), "restore s": restore.get("restore-total-s", "-")}


def main(work):
    print(table([seconds(work, route) for route in ROUTES]) + "\n")
    saved = [torch.load(path) for path in (os.path.join(work, f"{r}.pt") for r in ROUTES) if os.path.exists(path)]
    if len(saved) < 2:
        sys.exit(f"compare_routes: fewer than two routes left their logits in {work}")
    if len({tuple(s["sequences"].shape) for s in saved}) != 1:
        sys.exit("compare_routes: the routes generated sequences of different shapes")
    rows = [{"compared": f"{x['route']} / {y['route']}", **compared(logits(x), logits(y)),
             "same prompt and tokens": torch.equal(x["sequences"], y["sequences"])}
            for x, y in itertools.combinations(saved, 2)]
    rows += [{"compared": f"{s['route']}: graph / generate", **compared(s["core"], s["generate"]),
              "same prompt and tokens": True} for s in saved if "core" in s]
    print(table(rows))


if __name__ == "__main__":
    main(sys.argv[1])
