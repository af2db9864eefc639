#!/usr/bin/env bash
# The steps of Gnomon's nightly GPU job, shared by the GitHub Actions and GitLab CI recipes
# beside this file and run by harness/tests/nightly_recipe.rs, so the commands the recipes
# run are the commands that are tested.
#
#   nightly.sh partition K N OUT [RUN-ARGS...]   this runner's share (hash:K/N) into OUT/part-K
#   nightly.sh gate PARTS BASELINE OUT [COMPARE-ARGS...]
#                                                merge PARTS/part-*/report.json into OUT, then
#                                                summary, trend and compare against BASELINE
#
# GNOMON names the binary (default ./gnomon); GNOMON_REQUIRE_ARCH (sm_90, say), when set,
# makes a partition on a runner without that GPU fail (exit 3) rather than skip every GPU
# case. Every partition must get the same RUN-ARGS: each report records its filters and
# `--skip`s, merge expects exactly the cases they select and refuses parts that differ.
# A nightly that skips cases on purpose passes `--allow-removed` to the gate's compare.
# Exit codes are gnomon's: the partition step fails when a case fails (its report is still
# written); the gate fails on a regression or on parts that do not merge.
set -euo pipefail
gnomon=${GNOMON:-./gnomon}

partition() {
    local k=$1 n=$2 out=$3
    shift 3
    local arch=()
    [ -n "${GNOMON_REQUIRE_ARCH:-}" ] && arch=(--require-arch "$GNOMON_REQUIRE_ARCH")
    "$gnomon" run --profile nightly --partition "hash:$k/$n" --report-dir "$out/part-$k" "${arch[@]}" "$@"
}

gate() {
    local parts=$1 baseline=$2 out=$3
    shift 3
    "$gnomon" merge "$parts"/part-*/report.json --out "$out"
    "$gnomon" summary "$out/report.json" | tee "$out/summary.txt"
    "$gnomon" trend "$baseline" "$out/report.json" --out "$out"
    "$gnomon" compare "$baseline" "$out/report.json" "$@" | tee "$out/compare.md"
}

case "${1:-}" in
    partition) shift; partition "$@" ;;
    gate) shift; gate "$@" ;;
    *) echo "usage: nightly.sh partition K N OUT [RUN-ARGS...] | gate PARTS BASELINE OUT [COMPARE-ARGS...]" >&2; exit 2 ;;
esac
