"""The serving catalogue's cost against its size (`docs/ci/serving.sh growth`, issue 57
item 5): for each catalogue exported, validated and qualified there, one row of templates,
nodes and stored bytes, the export's seconds beside PyTorch's capture and the write floor
it recorded, the restore's beside its floor, and the qualification's wall. Prints a
Markdown table; the per-node and per-GB columns say whether the cost grows linearly.

    python3 tools/catalogue_growth.py WORK_DIR   # holds export-N.json, qualify-N/report.json, *.log
"""

import glob
import json
import os
import re
import sys


def restore_metrics(report):
    """The metrics of a qualification's restore case."""
    for case in report["cases"]:
        if case["id"].endswith("/restore"):
            return {k: v["value"] for k, v in (case.get("metrics") or {}).items()}
    return {}


def rows(work):
    for path in sorted(glob.glob(os.path.join(work, "export-*.json")), key=lambda p: int(re.findall(r"\d+", p)[-1])):
        n = int(re.findall(r"\d+", path)[-1])
        export = json.load(open(path))
        report_path = os.path.join(work, f"qualify-{n}", "report.json")
        report = json.load(open(report_path)) if os.path.exists(report_path) else {"cases": [], "run": {}}
        restore = restore_metrics(report)
        yield {
            "sizes": n,
            "templates": export.get("templates"),
            "nodes": export.get("nodes"),
            "stored GB": export.get("stored-bytes", 0) / 1e9,
            "export s": export.get("export-s"),
            "expectations s": export.get("expectations-s"),
            "snapshot s": export.get("snapshot-s"),
            "restore s": restore.get("restore-total-s"),
            "restore floor s": restore.get("restore-floor-s"),
            "us/node over driver": restore.get("restore-over-driver-floor"),
            "qualify s": report["run"].get("duration-s"),
            # Where the qualification's time went, and the output bytes it read back.
            "read-outputs s": restore.get("restore-read-outputs-s"),
            "speed s": restore.get("restore-speed-s"),
            "of which scoping s": restore.get("restore-speed-scoping-s"),
            "poison s": restore.get("restore-poison-independence-s"),
            "outputs read GB": (restore.get("outputs-read-bytes") or 0) / 1e9,
            "peak export RSS GB": (export.get("peak-host-rss-bytes") or {}).get("whole", 0) / 1e9,
            "capture s": restore.get("producer-capture-s"),
        }


def main(work):
    table = list(rows(work))
    if not table:
        sys.exit(f"{work}: no export-N.json")
    keys = list(table[0])
    print("| " + " | ".join(keys) + " | export s per 1k nodes | export s per GB |")
    print("|" + "---|" * (len(keys) + 2))
    for r in table:
        cells = [f"{r[k]:.3g}" if isinstance(r[k], float) else str(r[k]) for k in keys]
        per_node = r["export s"] / r["nodes"] * 1e3 if r["export s"] and r["nodes"] else float("nan")
        per_gb = r["export s"] / r["stored GB"] if r["export s"] and r["stored GB"] else float("nan")
        print("| " + " | ".join(cells) + f" | {per_node:.3g} | {per_gb:.3g} |")


if __name__ == "__main__":
    main(sys.argv[1])
