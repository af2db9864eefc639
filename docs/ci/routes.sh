#!/usr/bin/env bash
# The three routes to a graph of one decode step side by side (issue 59 item 3). Usage:
#   docs/ci/routes.sh WHEEL_DIR OUT_DIR
# MODEL (qwen3) at batch 1 from the same seeded weights and prompt, by each route of
# python/ports/hf_generate.py (graph trees, the step eager or compiled and captured by hand),
# exported and qualified once; tools/compare_routes.py prints each route's export and
# restore seconds and compares their logits. The recipe itself, 3 exports x 3
# qualifications per model and batch: docs/ci/repeat.sh WHEEL_DIR OUT_DIR 3 3
# hf-generate-b1-qwen3 hf-generate-b2-qwen3 … (ports.sh). Logs, summaries, reports and the
# comparison go to OUT_DIR/routes.tar.gz; the exit status is the first failing step's.
set -uo pipefail
wheels=$1 out=$2 model=${MODEL:-qwen3}
site=$(mktemp -d) cores=$(mktemp -d) work=$(mktemp -d)
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$wheels"/gnomon-*.whl
export PYTHONPATH=$site PATH=$site/bin:$PATH PYTHONUNBUFFERED=1
mkdir -p "$out"
trap 'tar -C "$work" -czf "$out/routes.tar.gz" .' EXIT  # whatever the outcome
status=0
for route in trees eager compiled; do
  TORCH_LOGS=cudagraphs python3 -m gnomon.torch python/ports/hf_generate.py --model "$model" --route "$route" \
    --out "$cores/$route" --summary "$work/$route-export.json" --logits "$work/$route.pt" > "$work/$route-export.log" 2>&1 &&
    gnomon qualify "$cores/$route" --report-dir "$work/$route-qualify" > "$work/$route-qualify.log" 2>&1
  rc=$?
  echo "$route: exit $rc"
  [ "$status" -ne 0 ] || status=$rc
done
python3 tools/compare_routes.py "$work" | tee "$work/compare.md" || { [ "$status" -ne 0 ] || status=1; }
exit "$status"
