#!/usr/bin/env bash
# A serving stack's catalogue at full size (issue 45): HF's own LlamaForCausalLM.forward at
# Llama-3-8B's widths (32 layers, 16 GB of random bf16 weights), one decode step per batch
# size of a capture list, exported by the kit and qualified. Usage:
#   docs/ci/serving.sh WHEEL_DIR OUT_DIR floors|export|qualify|reserved
# `floors`: tools/storage_floors.py in $CORES' folder (device-to-host and write bandwidth,
#   into floors.json), writing FLOOR_GIB (default 37, what the catalogue to 256 stores:
#   the page cache takes a smaller write at another pace).
# `export`: BATCHES (default vLLM's list up to 256: 1, 2, 4, then every multiple of 8)
#   exported to $CORES/NAME (NAME defaults to serving), then `gnomon validate`.
# `qualify`: that core qualified QUALIFIES (2) times; each case must get the same status
#   in every qualification (tools/same_verdicts.py).
# `reserved`: the same captures on PyTorch's own allocator, no kit: max_memory_reserved().
# `growth`: the catalogue's first 4, 19 and 35 batch sizes (SIZES) each exported, validated
#   and qualified once, and tools/catalogue_growth.py tabulates export, validate, restore and
#   qualify seconds beside their floors against templates, nodes and bytes (issue 57 item 5):
#   whether the cost grows linearly, read off the table.
# Logs (each line stamped with the time of day), summaries and reports go to
# OUT_DIR/serving-PHASE-NAME.tar.gz, whatever the outcome; the exit status is the first
# failing step's (a nightly job fails with it).
set -uo pipefail
wheels=$1 out=$2 phase=$3
cores=${CORES:-/tmp/gnomon-serving} name=${NAME:-serving} work=$(mktemp -d) site=$(mktemp -d)
batches=${BATCHES:-1,2,4,$(seq -s, 8 8 256)}
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$wheels"/gnomon-*.whl
export PYTHONPATH=$site PATH=$site/bin:$PATH PYTHONUNBUFFERED=1
mkdir -p "$cores" "$out"
port=(python/ports/hf.py --model llama --layers 32 --context 32 --batches "$batches")
pack() { tar -C "$work" -czf "$out/serving-$phase-$name.tar.gz" .; }
status=0
timed() { # LABEL COMMAND...: runs it, its output to LABEL.log (each line stamped with the
  # time of day, so a stage the command does not time is still seen), and says how it went
  local label=$1 started=$SECONDS rc=0
  shift
  "$@" 2>&1 | while IFS= read -r line; do printf '%(%T)T %s\n' -1 "$line"; done > "$work/$label.log"
  rc=${PIPESTATUS[0]}
  echo "$label: exit $rc in $((SECONDS - started)) s: $(tail -n 1 "$work/$label.log")"
  [ "$status" -ne 0 ] || status=$rc
}
case $phase in
  floors) # the floors' JSON, its lines unstamped, into floors.json
    timed floors python3 tools/storage_floors.py "$cores" "${FLOOR_GIB:-37}"
    sed -E 's/^[0-9]{2}:[0-9]{2}:[0-9]{2} //' "$work/floors.log" | tee "$work/floors.json" ;;
  export)
    rm -rf "${cores:?}/$name"
    timed export python3 -m gnomon.torch "${port[@]}" --arena "${ARENA:-48GiB}" --out "$cores/$name" \
      --summary "$work/export.json"
    timed validate gnomon validate "$cores/$name"
    du -sb "$cores/$name" > "$work/core-bytes.txt" ;;
  qualify)
    for i in $(seq "${QUALIFIES:-2}"); do
      timed "qualify-$i" gnomon qualify "$cores/$name" --report-dir "$work/qualify-$i"
    done
    [ "${QUALIFIES:-2}" -lt 2 ] || timed verdicts python3 tools/same_verdicts.py "$work"/qualify-*/report.json ;;
  growth)
    all=(${batches//,/ })
    for n in ${SIZES:-4 19 35}; do
      rm -rf "${cores:?}/growth-$n"
      sizes=$(IFS=,; echo "${all[*]:0:$n}")
      timed "export-$n" python3 -m gnomon.torch python/ports/hf.py --model llama --layers 32 --context 32 \
        --batches "$sizes" --arena "${ARENA:-48GiB}" --out "$cores/growth-$n" --summary "$work/export-$n.json"
      timed "validate-$n" gnomon validate "$cores/growth-$n"
      timed "qualify-$n" gnomon qualify "$cores/growth-$n" --report-dir "$work/qualify-$n"
      rm -rf "${cores:?}/growth-$n"
    done
    timed growth python3 tools/catalogue_growth.py "$work" && cat "$work/growth.log" ;;
  reserved) timed reserved python3 "${port[@]}" --arena none --out /dev/null --summary "$work/reserved.json" ;;
  *) echo "unknown phase $phase" >&2; exit 2 ;;
esac
pack
exit "$status"
