#!/usr/bin/env bash
# Honest verdicts on ports whose outputs vary between launches (issue 44). Usage:
#   docs/ci/varying.sh WHEEL_DIR OUT_DIR exports|qualify|planted|shared
# PORTS (words) narrows the varying ports; PLANTED names the ports whose defects are
# planted, and POOLS=0 leaves out the two captures of PyTorch's own pool idioms.
# `exports`: each varying port exported 3 times and once under
# gnomon.torch.deterministic(); then the stale-word
# program (moe-top8, fp32) exported STALE_EXPORTS times (20), four at a time, its outcomes
# counted, and outside.py's graph that reads a tensor outside the arena refused.
# `qualify`: every export's core qualified QUALIFIES times (5), the deterministic ones once.
# `planted`: the ports exported again, then once per planted defect in a process of its
# own against that core (python/ports/plant.py), JOBS (3) at a time, and all of them
# qualified once; with two captures given PyTorch's own pool handle and no pool.
# `shared`: the first export of each port qualified while another process holds a CUDA
# context on the GPU, which the report must name. Cores stay in $CORES (default
# /tmp/gnomon-varying) between the two; reports, summaries and logs go to
# OUT_DIR/varying-PHASE.tar.gz. One thing at a time on the GPU, as repeat.sh says why.
set -uo pipefail
wheels=$1 out=$2 phase=$3
cores=${CORES:-/tmp/gnomon-varying} work=$(mktemp -d)
site=$(mktemp -d)
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$wheels"/gnomon-*.whl
export PYTHONPATH=$site PATH=$site/bin:$PATH PYTHONUNBUFFERED=1
mkdir -p "$cores" "$out" "$work/exports"
# shellcheck source=docs/ci/ports.sh
source "$(dirname "$0")/ports.sh"
read -ra ports <<< "${PORTS:-moe-top8-bf16 hf-index-add-mixtral hf-index-add-qwen3_moe hf-index-add-olmoe}"
pack() { tar -C "$work" -czf "$out/varying-$phase.tar.gz" .; }

if [[ $phase == planted ]]; then
  declare -A plants=(
    [moe-top8-bf16]="control weight:0.001 weight:0.0039 weight:0.0156 weight:0.0625 skip-layer"
    [hf-index-add-mixtral]="control weight:0.0039 weight:0.0625 kv-slot skip-layer"
    [hf-index-add-qwen3_moe]="control weight:0.0039 weight:0.0156 weight:0.0625 weight:0.25 weight:1 kv-slot skip-layer"
    [hf-index-add-olmoe]="control weight:0.0039 weight:0.0156 weight:0.0625 weight:0.25 weight:1 kv-slot skip-layer"
  )
  # Each planted core in a process of its own, against the port's own core (plant.py);
  # JOBS (3) at a time: a verdict here is about values, not speed.
  for port in ${PLANTED:-${!plants[*]}}; do
    export_one "$port-orig" "$port"
    n=0
    for p in ${plants[$port]}; do
      export_one "$port-plant-${p//:/-}" "$port" --plant "$p" --against "$cores/$port-orig" &
      (( ++n % ${JOBS:-3} == 0 )) && wait
    done
    wait
    pack
  done
  # A serving stack's capture code unchanged: captures given a pool of PyTorch's own, or
  # none, land in the arena; they must export and pass like the port's own.
  if [[ ${POOLS:-1} == 1 ]]; then
    export_one hf-pool-pytorch-qwen3 hf-pool-pytorch-qwen3 &
    export_one hf-pool-none-qwen3 hf-pool-none-qwen3 &
    wait
  fi
  qualify planted "$cores"/*-orig/ "$cores"/*-plant-*/ "$cores"/hf-pool-*/
  pack
  exit 0
fi

if [[ $phase == shared ]]; then
  # Another process holds a context (and a little memory) on the GPU for the whole qualify.
  python3 -c 'import time, torch; torch.ones(1 << 20, device="cuda"); time.sleep(600)' &
  holder=$!
  sleep 15
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv > "$work/holder.txt"
  firsts=()
  for port in "${ports[@]}"; do firsts+=("$cores/$port-e1/"); done
  qualify shared "${firsts[@]}"
  kill "$holder"
  pack
  exit 0
fi

if [[ $phase == exports ]]; then
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$work/gpu.txt"
  for port in "${ports[@]}"; do
    export_one "$port-e1" "$port"
    export_one "$port-e2" "$port"
    export_one "$port-e3" "$port"
    export_one "$port-det" "$port-deterministic"
    pack
  done
  # The stale word: one export in six of this program was refused for a parameter word
  # that lands in a live block outside the arena. Every export must end alike.
  mkdir -p "$work/stale"
  for i in $(seq 1 "${STALE_EXPORTS:-20}"); do
    # shellcheck disable=SC2046
    python3 -m gnomon.torch $(port_command moe-top8) --out "$cores/stale/s$i" \
      --summary "$work/stale/s$i.json" > "$work/stale/s$i.log" 2>&1 &
    (( i % 4 == 0 )) && wait
  done
  wait
  python3 - "$work/stale" <<'PY' | tee "$work/stale/outcomes.txt"
import collections, glob, json, os, sys
outcomes = collections.Counter()
for log in sorted(glob.glob(os.path.join(sys.argv[1], "s*.log"))):
    summary = log[:-4] + ".json"
    if os.path.exists(summary):
        s = json.load(open(summary))
        outcomes[f"exported, {len(s['dismissed'])} word(s) dismissed"] += 1
    else:
        last = open(log).read().strip().splitlines()[-1:] or ["(no output)"]
        outcomes[f"refused: {last[0][:300]}"] += 1
for outcome, n in sorted(outcomes.items()):
    print(f"{n:3d}  {outcome}")
PY
  rm -rf "$cores/stale"
  # A graph that really reads a tensor outside the arena must still be refused, named.
  python3 -m gnomon.torch python/ports/outside.py "$(mktemp -d)" > "$work/outside.txt" 2>&1
  echo "outside.py: exit $? (0: the reading graph refused, the other exported)"
  gnomon validate "$cores"/*/ > "$work/validate.txt" 2>&1
  pack
  exit 0
fi

variants=() deterministic=()
for port in "${ports[@]}"; do
  variants+=("$cores/$port"-e{1,2,3}/)
  deterministic+=("$cores/$port-det/")
done
for q in $(seq 1 "${QUALIFIES:-5}"); do
  qualify "qualify-$q" "${variants[@]}"
  pack
done
qualify deterministic "${deterministic[@]}"
pack
