#!/usr/bin/env bash
# Reproducible verdicts: each port exported EXPORTS times, then its cores qualified
# QUALIFIES times; every case must get the same status each time (tools/same_verdicts.py,
# the exit status). Usage:
#   docs/ci/repeat.sh WHEEL_DIR OUT_DIR EXPORTS QUALIFIES PORT...
# PORT is one of the names in ports.sh. Reports, export summaries and accounts go to
# OUT_DIR/repeat.tar.gz; cores to $TMPDIR. The reports under
# baselines/h200-sm90-580.159.04-models/varying-outputs/ came from this recipe.
set -uo pipefail
wheels=$1 out=$2 exports=$3 qualifies=$4
shift 4
site=$(mktemp -d) cores=$(mktemp -d) work=$(mktemp -d)
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$wheels"/gnomon-*.whl
export PYTHONPATH=$site PATH=$site/bin:$PATH
mkdir -p "$work/exports" "$out"

# shellcheck source=docs/ci/ports.sh
source "$(dirname "$0")/ports.sh"

# One thing at a time on the GPU: a launch that shares the device with another process
# can give other bits (PyTorch's argmax over tied logits, some GEMMs), so exports made side
# by side, or qualifications run side by side, do not give reproducible verdicts
# (baselines/h200-sm90-580.159.04-models/hf-corpus/README.md).
for port in "$@"; do
  command=$(port_command "$port") || exit 2
  for e in $(seq 1 "$exports"); do
    name=$port-e$e
    # shellcheck disable=SC2086 # the command is words; EXPORT_TIMEOUT (seconds) bounds each export
    ${EXPORT_TIMEOUT:+timeout "$EXPORT_TIMEOUT"} python3 -m gnomon.torch $command --out "$cores/$name" \
      --summary "$work/exports/$name.json" > "$work/exports/$name.log" 2>&1 \
      || { echo "export $name failed"; rm -rf "${cores:?}/$name"; }
  done
done
gnomon validate "$cores"/* > "$work/validate.txt" 2>&1
# Packed after the exports and after each qualification, so a run stopped by its time
# limit still brings back what it finished.
tar -C "$work" -czf "$out/repeat.tar.gz" .
for q in $(seq 1 "$qualifies"); do
  gnomon qualify "$cores"/*/ --report-dir "$work/qualify-$q" > "$work/qualify-$q.log" 2>&1
  echo "qualify $q: exit $? $(tail -n 1 "$work/qualify-$q.log")"
  tar -C "$work" -czf "$out/repeat.tar.gz" .
done
[ "$qualifies" -ge 2 ] || exit 0
# Every qualification of the same cores must give each case the same status.
python3 tools/same_verdicts.py "$work"/qualify-*/report.json > "$work/verdicts.txt"
status=$?
tail -n 1 "$work/verdicts.txt"
tar -C "$work" -czf "$out/repeat.tar.gz" .
exit "$status"
