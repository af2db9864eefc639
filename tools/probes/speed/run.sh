#!/usr/bin/env bash
# Issue 25 on the H200: four ports exported with a wheel whose kit records each template's
# speed, then qualified twice (the speed rule's noise), once with the driver loading
# modules eagerly (CUDA_MODULE_LOADING=EAGER), and once by a build planted to rebuild
# programmatic edges as full edges (plant_programmatic_as_full.py). One thing at a time on
# the GPU. Usage, from the repository root: run.sh WHEEL_DIR PLANTED_GNOMON OUT_DIR
set -uo pipefail
wheels=$1 planted=$2 out=$3
site=$(mktemp -d) cores=$(mktemp -d) work=$(mktemp -d)
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$wheels"/gnomon-*.whl
export PYTHONPATH=$site PATH=$site/bin:$PATH
mkdir -p "$work/exports" "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$work/environment.txt"
pack() { tar -C "$work" -czf "$out/speed.tar.gz" .; }
port() { # NAME COMMAND...
  local name=$1
  shift
  timeout 150 python3 -m gnomon.torch "$@" --out "$cores/$name" --summary "$work/exports/$name.json" \
    > "$work/exports/$name.log" 2>&1 || echo "export $name failed"
}
port gpt2-eager python/ports/decode.py --model gpt2 --mode eager --batches 1,2,4,8 --arena 8GiB --context 128
port llama-eager python/ports/decode.py --model llama --mode eager --batches "$(seq -s, 1 16)" --arena 24GiB --context 64
port hf-qwen2 python/ports/hf.py --model qwen2
port hf-mixtral python/ports/hf.py --model mixtral
gnomon validate "$cores"/* > "$work/validate.txt" 2>&1
pack
qualify() { # LABEL COMMAND...
  local label=$1
  shift
  timeout 120 "$@" qualify "$cores"/*/ --report-dir "$work/$label" > "$work/$label.log" 2>&1
  echo "$label: exit $? $(tail -n 1 "$work/$label.log")"
  pack
}
qualify qualify-1 gnomon
qualify qualify-2 gnomon
qualify eager env CUDA_MODULE_LOADING=EAGER gnomon
qualify planted "$planted"
