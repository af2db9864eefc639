#!/usr/bin/env bash
# The steps of Gnomon's nightly GPU job, shared by the GitHub Actions and GitLab CI recipes
# beside this file and run by harness/tests/nightly_recipe.rs, so the commands the recipes
# run are the commands that are tested.
#
#   nightly.sh partition K N OUT [RUN-ARGS...]   this runner's share (hash:K/N) into OUT/part-K
#   nightly.sh gate PARTS BASELINE OUT           merge PARTS/part-*/report.json into OUT, then
#                                                summary, trend and compare against BASELINE
#
# GNOMON names the binary (default ./gnomon). Exit codes are gnomon's: the partition step
# fails when a case fails (its report is still written); the gate fails on a regression
# or on parts that do not merge.
set -euo pipefail
gnomon=${GNOMON:-./gnomon}

partition() {
    local k=$1 n=$2 out=$3
    shift 3
    "$gnomon" run --profile nightly --partition "hash:$k/$n" --report-dir "$out/part-$k" "$@"
}

gate() {
    local parts=$1 baseline=$2 out=$3
    "$gnomon" merge "$parts"/part-*/report.json --out "$out"
    "$gnomon" summary "$out/report.json" | tee "$out/summary.txt"
    "$gnomon" trend "$baseline" "$out/report.json" --out "$out"
    "$gnomon" compare "$baseline" "$out/report.json" | tee "$out/compare.md"
}

case "${1:-}" in
    partition) shift; partition "$@" ;;
    gate) shift; gate "$@" ;;
    *) echo "usage: nightly.sh partition K N OUT [RUN-ARGS...] | gate PARTS BASELINE OUT" >&2; exit 2 ;;
esac
