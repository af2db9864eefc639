#!/usr/bin/env bash
# Issue 25 probe: the nightly core exported, then ready_faults.rs (built as
# core/examples/ready_faults.rs with `cargo build --release -p gnomon-core --example
# ready_faults`, stripped to target/carry/ready_faults) run five ways, twice.
# Usage, from the repository root: faults.sh OUT_DIR
set -uo pipefail
out=$1; mkdir -p "$out"
G=target/carry/gnomon P=target/carry/ready_faults
( time timeout 120 $G export model-scale-nightly --out /tmp/nightly ) > "$out/export.txt" 2>&1
run() { local tag=$1; shift; echo "== $tag" >> "$out/faults.jsonl"; timeout 60 "$@" >> "$out/faults.jsonl" 2>&1; }
for r in 1 2; do
  run "drop-$r" $P /tmp/nightly 3 drop 0
  run "keep-$r" $P /tmp/nightly 3 keep 0
  run "prefault512-$r" $P /tmp/nightly 2 drop 512
  run "hugetlb-$r" env GLIBC_TUNABLES=glibc.malloc.hugetlb=1 $P /tmp/nightly 3 drop 0
  run "hugetlb-prefault512-$r" env GLIBC_TUNABLES=glibc.malloc.hugetlb=1 $P /tmp/nightly 2 drop 512
done
cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag > "$out/thp.txt" 2>&1
