#!/usr/bin/env bash
# Issue 24: the ten HF ports exported once and qualified once with the wheel given, then
# PyTorch alone on the same ports (docs/ci/repeat.sh, docs/ci/reserved.sh); everything
# packed into OUT/ports.tar.gz as it goes. Usage, from the repository root:
#   ports24.sh WHEEL_DIR OUT_DIR
set -uo pipefail
wheels=$1 out=$2; mkdir -p "$out"
ports="hf-bert hf-gemma2 hf-gpt_neox hf-mistral hf-mixtral hf-olmo2 hf-phi3 hf-qwen2 hf-qwen3 hf32-qwen3"
work=$(mktemp -d)
S=$(date +%s)
# shellcheck disable=SC2086
EXPORT_TIMEOUT=120 bash docs/ci/repeat.sh "$wheels" "$work/repeat" 1 1 $ports > "$work/repeat.txt" 2>&1
echo "repeat: $(( $(date +%s) - S )) s" >> "$work/times.txt"
tar -C "$work" -czf "$out/ports.tar.gz" .
# shellcheck disable=SC2086
bash docs/ci/reserved.sh "$wheels" "$work/reserved" $ports > "$work/reserved.txt" 2>&1
echo "reserved: $(( $(date +%s) - S )) s" >> "$work/times.txt"
tar -C "$work" -czf "$out/ports.tar.gz" .
