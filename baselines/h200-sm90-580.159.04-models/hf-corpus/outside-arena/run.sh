#!/usr/bin/env bash
# The corpus with the prefill, warm-up and capture under gnomon.torch.outside_arena().
# Usage: run.sh WHEEL_DIR OUT_DIR PART. Part 1 also runs the empty_cache probe, the
# outside.py refusal port and PyTorch alone (reserved.sh), part 4 the refusal port again;
# each part exports its ports three times and qualifies the cores three times (repeat.sh),
# into OUT_DIR/repeat.tar.gz. Later parts compare with PyTorch alone's figures where
# RESERVED names part 1's reserved/.
set -uo pipefail
wheels=$1 out=$2 part=$3
here=$(dirname "$0") ci=docs/ci alone=$(mktemp -d) unpacked=$(mktemp -d)
mkdir -p "$out"
export EXPORT_TIMEOUT=120
refusal_port() {
  local site
  site=$(mktemp -d)
  python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$wheels"/gnomon-*.whl
  PYTHONPATH=$site python3 -m gnomon.torch python/ports/outside.py "$(mktemp -d)" > "$out/outside.txt" 2>&1
  echo "outside.py: exit $?" >> "$out/outside.txt"
}
case $part in
  1) ports="hf32-qwen3 hf-qwen3"
     python3 "$here/routed_empty_cache.py" > "$out/routed_empty_cache.txt" 2>&1
     refusal_port
     "$ci/reserved.sh" "$wheels" "$alone/reserved" hf-qwen2 hf-qwen3 hf-mistral hf-phi3 hf-mixtral hf-gemma2 \
       hf-olmo2 hf-gpt_neox hf-bert hf32-qwen3
     tar -C "$alone" -czf "$out/reserved.tar.gz" reserved ;;
  2) ports="hf-mistral hf-phi3 hf-mixtral hf-gemma2" ;;
  3) ports="hf-qwen2 hf-olmo2 hf-gpt_neox hf-bert" ;;
  4) ports="hf32-qwen3"  # again, with the kit that looks in live blocks only
     refusal_port ;;
esac
# shellcheck disable=SC2086 # ports are words
"$ci/repeat.sh" "$wheels" "$out" 3 3 $ports
tar -xzf "$out/repeat.tar.gz" -C "$unpacked"
python3 "$here/summary.py" "$unpacked/exports" "${RESERVED:-$alone/reserved}" | tee "$out/summary.txt"
