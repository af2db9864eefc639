#!/usr/bin/env bash
# Issue 25 probes, one call: (1) three small ports exported and qualified twice with the
# staging pool touched on several threads, then registered; (2) `prelude_probe`: the
# ports' libraries loaded after the context, or while it is made; (3) the nightly core
# replayed with and without glibc's malloc on transparent huge pages, with page faults.
# Usage, from the repository root: probe.sh WHEEL_DIR OUT_DIR
set -uo pipefail
wheels=$1 out=$2 here=$(dirname "$0")
work=$(mktemp -d); mkdir -p "$out" "$work/prelude" "$work/nightly"
G=target/carry/gnomon
cat /sys/kernel/mm/transparent_hugepage/{enabled,defrag} > "$work/thp.txt" 2>&1
CORES=/tmp/cores PORTS="gpt2-eager hf-mixtral hf-bert" bash "$here/../floors/run.sh" "$wheels" "$work/floors"
for round in 1 2 3; do
  for port in gpt2-eager hf-mixtral hf-bert; do
    for mode in after ahead; do
      timeout 60 target/carry/prelude_probe /tmp/cores/$port $mode >> "$work/prelude/$port.jsonl" 2>&1
    done
  done
done
bash "$here/thp.sh" "$work/nightly"
tar -C "$work" -czf "$out/probe.tgz" .
