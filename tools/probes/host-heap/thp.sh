#!/usr/bin/env bash
# The nightly core (64 x 1 000 nodes) exported, then replayed ROUNDS times (2 when unset)
# each with and without glibc's malloc on transparent huge pages
# (GLIBC_TUNABLES=glibc.malloc.hugetlb=1), with each replay's page faults and CPU times.
# Usage, from the repository root: thp.sh OUT_DIR
set -uo pipefail
work=$1; mkdir -p "$work"
G=target/carry/gnomon
( time timeout 120 $G export model-scale-nightly --out /tmp/nightly ) > "$work/export.txt" 2>&1
usage='import json, resource, subprocess, sys
subprocess.run(sys.argv[1:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"minflt": r.ru_minflt, "majflt": r.ru_majflt, "utime": r.ru_utime, "stime": r.ru_stime}))'
for round in $(seq 1 "${ROUNDS:-2}"); do
  for tunables in none glibc.malloc.hugetlb=1; do
    tag=${tunables//[^a-z0-9]/-}-$round
    if [[ $tunables == none ]]; then env=(env); else env=(env GLIBC_TUNABLES=$tunables); fi
    "${env[@]}" timeout 120 python3 -c "$usage" $G replay /tmp/nightly --result "$work/replay-$tag.json" > "$work/usage-$tag.txt" 2>&1
  done
done
