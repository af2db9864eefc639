#!/usr/bin/env bash
# Issue 25's targets on the H200: the `models` profile's ports and the HF corpus exported
# with one wheel, then every core qualified twice, one after another, each restore held
# against its floor measured in the same run (restore-floor-s: context + modules alone +
# bytes at the slower of reading and copying + nodes at the driver's cost). One thing at a
# time on the GPU. Usage, from the repository root: [PORTS="NAME ..."] run.sh WHEEL_DIR
# OUT_DIR (PORTS: only these ports, by the names below; all when unset. CORES: where the
# cores are written and kept; a temporary folder when unset. QUALIFY_RUNS: how many
# times, 2 when unset)
set -uo pipefail
wheels=$1 out=$2
site=$(mktemp -d) cores=${CORES:-$(mktemp -d)} work=$(mktemp -d)
mkdir -p "$cores"
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$wheels"/gnomon-*.whl
export PYTHONPATH=$site PATH=$site/bin:$PATH
mkdir -p "$work/exports" "$out"
pack() { tar -C "$work" -czf "$out/floors.tar.gz" .; }
port() { # NAME COMMAND...
  local name=$1 started=$SECONDS
  [[ -z ${PORTS:-} || " $PORTS " == *" $name "* ]] || return 0
  shift
  timeout 120 python3 -m gnomon.torch "$@" --out "$cores/$name" --summary "$work/exports/$name.json" \
    > "$work/exports/$name.log" 2>&1 || echo "export $name failed"
  echo "export $name: $((SECONDS - started)) s"
}
port gpt2-eager python/ports/decode.py --model gpt2 --mode eager --batches 1,2,4,8 --arena 8GiB --context 128
port llama-eager python/ports/decode.py --model llama --mode eager --batches "$(seq -s, 1 16)" --arena 24GiB --context 64
for model in qwen2 qwen3 mistral phi3 mixtral gemma2 olmo2 gpt_neox bert; do
  port "hf-$model" python/ports/hf.py --model "$model"
done
gnomon validate "$cores"/* > "$work/validate.txt" 2>&1
pack
for q in $(seq 1 "${QUALIFY_RUNS:-2}"); do
  timeout 200 gnomon qualify "$cores"/*/ --report-dir "$work/qualify-$q" > "$work/qualify-$q.log" 2>&1
  echo "qualify-$q: exit $? $(tail -n 1 "$work/qualify-$q.log")"
  pack
done
