#!/usr/bin/env bash
# call B: the whole catalogue, then four ports exported and qualified twice
set -uo pipefail
out=$1; w=$(mktemp -d); mkdir -p $out
( time timeout 200 target/carry/gnomon run --report-dir $w/run ) > $w/run.log 2>&1; tail -n 3 $w/run.log
tar -C $w -czf $out/catalogue.tgz .
PORTS="gpt2-eager llama-eager hf-mixtral hf-bert" bash baselines/h200-sm90-580.159.04-models/floors/run.sh target/wheels-img $out
