#!/usr/bin/env bash
# One device call (issue 27, the fix of a40c32b): the planted and the fixed binary on
# gpu/memory/, then the fixed one on both all-reduce sets, qualified many times, and the
# whole catalogue. Usage: call.sh FIXED PLANTED OUT
set -uo pipefail
fixed=$1 planted=$2 out=$3
mkdir -p "$out"
for i in 1 2 3; do
  "$planted" run gpu/memory/ --report-dir "$out/planted-memory-$i" > "$out/planted-memory-$i.log" 2>&1
  echo "planted gpu/memory/ $i: exit $? $(grep -o 'lost [0-9]* of.*' "$out/planted-memory-$i.log" | head -1)"
  "$fixed" run gpu/memory/ --report-dir "$out/memory-$i" > "$out/memory-$i.log" 2>&1
  echo "fixed gpu/memory/ $i: exit $?"
done
docs/ci/ranks.sh "$fixed" "$out/one-shot" 40 allreduce
docs/ci/ranks.sh "$fixed" "$out/two-shot" 20 allreduce-two-shot
"$fixed" run --report-dir "$out/catalogue" > "$out/catalogue.log" 2>&1
echo "catalogue: exit $? $(tail -n 2 "$out/catalogue.log" | head -1)"
