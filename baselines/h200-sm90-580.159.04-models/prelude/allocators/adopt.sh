#!/usr/bin/env bash
# Issue 25: the binary under test (target/carry/gnomon) qualifies the cores ab.sh left in
# /tmp/cores twice, then runs the whole catalogue and the nightly family
# (../../floors/overlap/catalogue-and-nightly.sh). Usage, from the repository root:
# adopt.sh OUT
set -uo pipefail
out=$1 here=$(dirname "$0") w=$(mktemp -d)
mkdir -p "$out"
for q in 1 2; do
  timeout 200 target/carry/gnomon qualify /tmp/cores/*/ --report-dir "$w/qualify-$q" > "$w/qualify-$q.log" 2>&1
  echo "qualify-$q: exit $? $(tail -n 1 "$w/qualify-$q.log")"
done
tar -C "$w" -czf "$out/qualify.tgz" .
bash "$here/../../floors/overlap/catalogue-and-nightly.sh" "$out"
