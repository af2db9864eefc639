#!/usr/bin/env bash
# Issue 25: the eleven ports exported once (main's wheel, ../floors/run.sh with no
# qualify runs) into /tmp/cores, then ab.py's arms taking turns on them (AB_PORTS: only
# these, by name) until SECONDS_LEFT of the call remain; NIGHTLY=1 also exports the
# nightly core into /tmp/nightly and replays it first. Cores are kept for the next call.
# Usage, from the repository root: ab.sh WHEEL_DIR OUT
set -uo pipefail
wheels=$1 out=$2 here=$(dirname "$0")
start=$(date +%s)
mkdir -p "$out/ab"
cat /sys/kernel/mm/transparent_hugepage/{enabled,defrag} /sys/kernel/mm/transparent_hugepage/khugepaged/defrag > "$out/ab/thp-settings.txt"
if [[ ! -f /tmp/cores/.exported ]]; then
  CORES=/tmp/cores QUALIFY_RUNS=0 bash "$here/../floors/run.sh" "$wheels" "$out" && touch /tmp/cores/.exported
fi
cores=(/tmp/cores/*/)
[[ -n ${AB_PORTS:-} ]] && cores=($(printf '/tmp/cores/%s/ ' $AB_PORTS))
if [[ ${NIGHTLY:-0} == 1 ]]; then
  [[ -d /tmp/nightly ]] || ( time timeout 120 target/carry/gnomon-glibc export model-scale-nightly --out /tmp/nightly ) > "$out/ab/nightly-export.txt" 2>&1
  cores=(/tmp/nightly "${cores[@]}")
fi
DEADLINE=$((start + ${CALL_S:-590} - ${SECONDS_LEFT:-30})) python3 "$here/ab.py" "$out/ab" "${cores[@]}"
tar -C "$out" -czf "$out/ab.tar.gz" ab && rm -rf "$out/ab"
