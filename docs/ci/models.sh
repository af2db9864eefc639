#!/usr/bin/env bash
# The `models` profile: real PyTorch ports exported with the kit and qualified on a GPU
# runner. Usage: docs/ci/models.sh WHEEL_DIR OUT_DIR [BASELINE_REPORT]
# The runner needs torch, transformers and triton; weights are random, nothing is
# downloaded. Cores go to $TMPDIR (4.5 GiB for the Llama decoder).
set -euo pipefail
wheels=$1 out=$2 baseline=${3:-}
site=$(mktemp -d) cores=$(mktemp -d)
python3 -m pip install --quiet --no-deps --target "$site" "$wheels"/gnomon-*.whl
export PYTHONPATH=$site PATH=$site/bin:$PATH
mkdir -p "$out/exports"

port() { # NAME MODEL MODE BATCHES ARENA CONTEXT
  python3 -m gnomon.torch python/ports/decode.py --model "$2" --mode "$3" --batches "$4" \
    --arena "$5" --context "$6" --out "$cores/$1" --summary "$out/exports/$1.json"
}
port gpt2-eager gpt2 eager 1,2,4,8 8GiB 128
port gpt2-compiled gpt2 compiled 1,2,4,8 8GiB 128
port llama-eager llama eager "$(seq -s, 1 16)" 24GiB 64
# Qwen2-1.5B whole, 28 layers: the deepest port of the profile (docs/ci/ports.sh).
source "$(dirname "$0")/ports.sh"
# shellcheck disable=SC2046 # the port's command line is words
python3 -m gnomon.torch $(port_command qwen2-28-gqa) --out "$cores/qwen2-28-gqa" \
  --summary "$out/exports/qwen2-28-gqa.json"
python3 -m gnomon.torch python/ports/twins.py "$cores/triton-twins" > "$out/exports/triton-twins.json"

# The recorder must not change what the program computes: the same digest without it.
with=$(python3 -m gnomon.torch python/ports/decode.py --model gpt2 --check-only --batches 8 | tail -1)
without=$(python3 python/ports/decode.py --model gpt2 --check-only --batches 8 | tail -1)
python3 - "$with" "$without" <<'PY'
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:])
assert a["digest"] == b["digest"], f"the recorder changed the output: {a} vs {b}"
print(f"recorder: same output; first step after {a['first-step-s']:.2f} s with it, {b['first-step-s']:.2f} s without")
PY

# A kernel loaded before recording began must be refused at export, named, never skipped.
python3 python/ports/missed.py "$(mktemp -d)/missed" > "$out/missed.txt"
# A graph reading a tensor made under outside_arena() must be refused, naming the node;
# one reading only the arena exports while such a tensor is alive.
python3 -m gnomon.torch python/ports/outside.py "$(mktemp -d)" > "$out/outside.txt"
# torch.compile with CUDA graph trees must be refused before anything is captured, and the
# same model compiled without them and captured into graph_pool() must export.
python3 -m gnomon.torch python/ports/graph_trees.py "$(mktemp -d)" > "$out/graph-trees.txt"

gnomon validate "$cores"/* > "$out/validate.txt"
status=0
gnomon qualify "$cores"/*/ --report-dir "$out/qualify" || status=$?
if [[ -n $baseline ]]; then
  gnomon compare "$baseline" "$out/qualify/report.json" > "$out/compare.md" || status=$?
fi
exit "$status"
