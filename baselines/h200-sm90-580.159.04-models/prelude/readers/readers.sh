#!/usr/bin/env bash
# temporary probe: the nightly core replayed with 16, 13 and 10 upload readers
set -uo pipefail
w=$1; mkdir -p $w
G=target/carry/gnomon
$G export model-scale-nightly --out /tmp/nightly > $w/export.txt 2>&1
for round in 1 2 3; do
  for r in 16 13 10; do
    GNOMON_PROBE_READERS=$r timeout 60 $G replay /tmp/nightly --result $w/replay-r$r-$round.json > $w/log-r$r-$round.txt 2>&1
  done
done
