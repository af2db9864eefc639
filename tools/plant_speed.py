"""A planted slowdown for the speed case: copies a core and records one template's speed
as `FRACTION` faster than its exporter measured, so that its restore, timed as before, is
that much slower than the record. `gnomon qualify` of the copy must fail that template's
`speed` (issue 58: a 10 % slowdown of a small template caught).

    python3 tools/plant_speed.py CORE TEMPLATE FRACTION OUT   # e.g. CORE b16 0.10 /tmp/slow
"""

import json
import os
import shutil
import sys


def main(core, template, fraction, out):
    shutil.copytree(core, out)
    path = os.path.join(out, "manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    speeds = [e["speed"] for e in manifest["expectations"] if e["template"] == template and e.get("speed")]
    if not speeds:
        sys.exit(f"{core}: template `{template}` records no speed")
    for speed in speeds:
        speed["median-us"] /= 1.0 + fraction
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"{out}: `{template}` recorded at {speeds[0]['median-us']:.2f} us, a restore {fraction:.0%} slower than its own record")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4])
