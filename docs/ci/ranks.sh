#!/usr/bin/env bash
# Rank sets whose kernels reach into each other's arenas, on one GPU (issue 27). Usage:
#   docs/ci/ranks.sh GNOMON OUT_DIR [QUALIFICATIONS] [WORKLOAD]
# Runs the peer-mapping cases of the catalogue, exports the two-rank all-reduce set
# (WORKLOAD: `allreduce` unless told, or `allreduce-two-shot`), and
# qualifies it QUALIFICATIONS times (5 unless told) with both ranks on GPU 0: every one
# must give the same verdicts (one of four did not on the H200, so one or two are too
# few to say). Each report under OUT_DIR; the cores stay in $TMPDIR.
set -uo pipefail
gnomon=$1 out=$2 qualifications=${3:-5} workload=${4:-allreduce}
cores=$(mktemp -d)
mkdir -p "$out"
"$gnomon" run replay/peers/ --report-dir "$out/peers" > "$out/peers.log" 2>&1
"$gnomon" run replay/allreduce/ --report-dir "$out/allreduce" > "$out/allreduce.log" 2>&1
"$gnomon" export "$workload" --tp 2 --out "$cores/tp2" --result "$out/export.json" > "$out/export.log" 2>&1
"$gnomon" validate "$cores"/tp2/rank-* > "$out/validate.txt" 2>&1
for q in $(seq 1 "$qualifications"); do
  "$gnomon" qualify "$cores/tp2" --ranks-on-one-gpu --report-dir "$out/qualify-$q" > "$out/qualify-$q.log" 2>&1
  echo "qualify $q: exit $? $(tail -n 1 "$out/qualify-$q.log")"
done
tail -n 2 "$out"/peers.log "$out"/allreduce.log "$out"/export.log
