#!/usr/bin/env bash
# The read floor with the readers' buffers faulted in before the clock (after) against
# the floor that faulted them in while timed (before): one core, `gnomon replay` warm, the
# two binaries taking turns, ROUNDS rounds. Usage: ab.sh BEFORE AFTER OUT_DIR
set -uo pipefail
before=$1 after=$2 out=$3 rounds=${ROUNDS:-5}
work=$(mktemp -d) core=${CORE_DIR:-/tmp/ab-core}
mkdir -p "$out"
[[ -d $core ]] || "$after" export model-scale --cap 64MiB --out "$core" > "$work/export.log" 2>&1
for r in $(seq 1 "$rounds"); do
  for arm in before after; do
    # each round starts with the other arm
    [[ $((r % 2)) == 0 ]] && arm=$([[ $arm == before ]] && echo after || echo before)
    "${!arm}" replay "$core" --result "$work/r$r-$arm.json" > "$work/r$r-$arm.log" 2>&1
  done
done
tar -C "$work" -czf "$out/ab.tar.gz" .
python3 - "$work" <<'PY'
import glob, json, os, statistics, sys
rows = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "r*-*.json"))):
    arm = os.path.basename(path)[:-5].split("-")[1]
    metrics = json.load(open(path)).get("metrics", {})
    rows.setdefault(arm, []).append({k: v["value"] for k, v in metrics.items()})
for arm, ms in sorted(rows.items()):
    for key in ("read-floor-gbps", "upload-gbps", "upload-fraction-of-floor", "restore-over-floor"):
        values = [m[key] for m in ms if key in m]
        if values:
            print(f"{arm} {key}: median {statistics.median(values):.3f} of {len(values)} ({min(values):.3f}-{max(values):.3f})")
PY
