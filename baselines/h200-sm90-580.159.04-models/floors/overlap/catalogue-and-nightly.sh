#!/usr/bin/env bash
# call A: the whole catalogue, then the nightly family, by the binary under test
set -uo pipefail
out=$1; w=$(mktemp -d); mkdir -p $out
G=target/carry/gnomon
( time timeout 200 $G run --report-dir $w/run ) > $w/run.log 2>&1; tail -3 $w/run.log
( time timeout 360 $G run --profile nightly replay/model-scale-nightly/ --report-dir $w/nightly ) > $w/nightly.log 2>&1; tail -3 $w/nightly.log
tar -C $w -czf $out/a.tgz .
