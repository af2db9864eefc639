#!/usr/bin/env bash
# The speed case on the reference exporter's workloads, which now time their templates:
# each workload exported once, its cores qualified twice (the rule's noise) and once by a
# build planted to rebuild programmatic edges as full edges (plant_programmatic_as_full.py).
# Usage, from the repository root: workloads.sh GNOMON PLANTED_GNOMON OUT_DIR
set -uo pipefail
gnomon=$1 planted=$2 out=$3
cores=$(mktemp -d)
mkdir -p "$out/exports"
for w in elementwise gemm fork-join decode model-scale big-shared-memory clusters programmatic-launch cooperative priorities; do
  timeout 60 "$gnomon" export "$w" --out "$cores/$w" --result "$out/exports/$w.json" > "$out/exports/$w.log" 2>&1 \
    || echo "export $w failed"
done
"$gnomon" validate "$cores"/* > "$out/validate.txt" 2>&1
qualify() { # LABEL BINARY
  timeout 120 "$2" qualify "$cores"/*/ --report-dir "$out/$1" > "$out/$1.log" 2>&1
  echo "$1: exit $? $(tail -n 1 "$out/$1.log")"
}
qualify qualify-1 "$gnomon"
qualify qualify-2 "$gnomon"
qualify planted "$planted"
