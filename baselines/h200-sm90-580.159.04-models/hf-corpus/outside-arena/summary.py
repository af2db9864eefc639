"""One line per export of a run.sh part: the arena the core needs (`peak-end`), the kit
process's `max_memory_reserved()`, and PyTorch alone's for the same captures (part 1's
reserved.sh), with the outputs that varied. Usage: summary.py EXPORTS_DIR RESERVED_DIR."""
import glob
import json
import os
import sys

exports, alone_dir = sys.argv[1], sys.argv[2]
alone = {}
for path in glob.glob(os.path.join(alone_dir, "*.json")):
    alone[os.path.basename(path)[:-5]] = json.load(open(path))["max-memory-reserved"]
for path in sorted(glob.glob(os.path.join(exports, "*.json"))):
    name = os.path.basename(path)[:-5]
    e = json.load(open(path))
    port = name.rsplit("-e", 1)[0]
    peak, kit = e["arena"]["peak-end"], e["max-memory-reserved"]
    base = alone.get(port)
    versus = f"{100 * (peak / base - 1):+.1f} % arena, {100 * (kit / base - 1):+.1f} % process" if base else ""
    print(f"{name}: peak-end {peak} B, kit process {kit} B, alone {base} B {versus}; "
          f"varied {len(e['varied'])}, nodes {e['nodes']}")
