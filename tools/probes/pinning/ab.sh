#!/usr/bin/env bash
# Issue 25, item 2: the staging pool of 256 MiB (8 MiB slots) against 32 MiB (1 MiB slots),
# one core after another, each binary twice, alternating. Cores: two kit ports and the
# reference exporter's model-scale (1 GiB stored, the largest upload of the three).
# Usage, from the repository root: ab.sh WHEEL_DIR GNOMON_256MIB GNOMON_32MIB OUT_DIR
set -uo pipefail
wheels=$1 before=$2 after=$3 out=$4
site=$(mktemp -d) cores=$(mktemp -d)
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$wheels"/gnomon-*.whl
export PYTHONPATH=$site
mkdir -p "$out"
timeout 120 python3 -m gnomon.torch python/ports/decode.py --model gpt2 --mode eager --batches 1,2,4,8 \
  --arena 8GiB --context 128 --out "$cores/gpt2-eager" > "$out/export-gpt2.log" 2>&1 || echo "export gpt2 failed"
timeout 120 python3 -m gnomon.torch python/ports/hf.py --model qwen2 --out "$cores/hf-qwen2" \
  > "$out/export-qwen2.log" 2>&1 || echo "export qwen2 failed"
"$after" export model-scale --out "$cores/model-scale" > "$out/export-model-scale.log" 2>&1 || echo "export model-scale failed"
for round in 1 2; do
  for pool in 256 32; do
    binary=$before
    [[ $pool == 32 ]] && binary=$after
    timeout 120 "$binary" qualify "$cores"/*/ --report-dir "$out/pool-$pool-$round" > "$out/pool-$pool-$round.log" 2>&1
    echo "pool $pool MiB, round $round: exit $? $(tail -n 1 "$out/pool-$pool-$round.log")"
  done
done
