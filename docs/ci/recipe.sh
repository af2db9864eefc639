#!/usr/bin/env bash
# The transformers recipe through graph trees (issue 59), on a GPU runner. Usage:
#   docs/ci/recipe.sh WHEEL_DIR OUT_DIR recipe|routes
# `recipe` (item 2): python/ports/hf_generate.py for each of MODELS (default qwen3, olmoe,
#   gemma2: dense, MoE, soft-capping and sliding-window) at each of BATCHES (1 2), exported
#   EXPORTS times (3), each core qualified QUALIFIES times (3); every case must get the same
#   status in all of a (model, batch)'s qualifications (tools/same_verdicts.py).
# `routes` (item 3): MODEL (qwen3) at batch 1 by the three routes (graph trees, eager and
#   compiled steps captured by hand) from the same seeded weights and prompt, each exported
#   and qualified once; tools/compare_routes.py compares their logits, and each route's
#   export and restore seconds are printed beside it.
# Logs, summaries and reports go to OUT_DIR/recipe-PHASE.tar.gz, whatever the outcome; the
# exit status is the first failing step's. Cores stay in $CORES (default /tmp/gnomon-recipe).
set -uo pipefail
wheels=$1 out=$2 phase=$3
cores=${CORES:-/tmp/gnomon-recipe} work=$(mktemp -d) site=$(mktemp -d)
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$wheels"/gnomon-*.whl
export PYTHONPATH=$site PATH=$site/bin:$PATH PYTHONUNBUFFERED=1
mkdir -p "$cores" "$out"
pack() { tar -C "$work" -czf "$out/recipe-$phase.tar.gz" .; }
status=0
timed() { # LABEL COMMAND...: runs it, its output to LABEL.log, and says how it went
  local label=$1 started=$SECONDS rc=0
  shift
  "$@" > "$work/$label.log" 2>&1 || rc=$?
  echo "$label: exit $rc in $((SECONDS - started)) s: $(grep -v '^[VI]1' "$work/$label.log" | tail -n 1 | cut -c1-400)"
  [ "$status" -ne 0 ] || status=$rc
  return $rc
}
export_core() { # NAME ARGS...: the port's core at $cores/NAME, its summary and logits beside the logs
  TORCH_LOGS=cudagraphs timed "$1-export" python3 -m gnomon.torch python/ports/hf_generate.py "${@:2}" \
    --out "$cores/$1" --summary "$work/$1-export.json" --logits "$work/$1.pt"
}
qualify() { # NAME RUN
  timed "$1-qualify-$2" gnomon qualify "$cores/$1" --report-dir "$work/$1-qualify-$2"
}
case $phase in
  recipe)
    for model in ${MODELS:-qwen3 olmoe gemma2}; do
      for batch in ${BATCHES:-1 2}; do
        reports=()
        for e in $(seq "${EXPORTS:-3}"); do
          name=$model-b$batch-e$e
          export_core "$name" --model "$model" --batch "$batch" || continue
          for q in $(seq "${QUALIFIES:-3}"); do
            qualify "$name" "$q"
            reports+=("$work/$name-qualify-$q/report.json")
          done
        done
        [ "${#reports[@]}" -gt 1 ] && timed "$model-b$batch-same-verdicts" python3 tools/same_verdicts.py "${reports[@]}"
      done
    done ;;
  routes)
    model=${MODEL:-qwen3}
    for route in trees eager compiled; do
      export_core "$route" --model "$model" --route "$route" && qualify "$route" 1
      python3 - "$work/$route-export.json" "$work/$route-qualify-1/report.json" <<'PY'
import json, sys
def read(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return {}
export, report = read(sys.argv[1]), read(sys.argv[2])
restore = next((c["metrics"] for c in report.get("cases", []) if c["id"].endswith("/restore")), {})
print(f"  export-s {export.get('export-s', '-')}, restore-total-s {restore.get('restore-total-s', {}).get('value', '-')}")
PY
    done
    timed compare python3 tools/compare_routes.py "$work"/trees.pt "$work"/eager.pt "$work"/compiled.pt \
      && cat "$work/compare.log" ;;
  *) echo "recipe.sh: no phase '$phase' (recipe or routes)" >&2; exit 2 ;;
esac
pack
exit "$status"
