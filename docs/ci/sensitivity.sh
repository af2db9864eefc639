#!/usr/bin/env bash
# How sensitive `gnomon qualify` is on ports whose outputs vary, and that it never fails
# them unchanged (issue 58). Usage:
#   docs/ci/sensitivity.sh WHEEL_DIR OUT_DIR planted|repeat
# `planted`: each port in PORTS exported once (`PORT-orig`), then once per planted defect
# in a process of its own against that core (python/ports/plant.py; PLANTS overrides the
# port's list), JOBS (3) at a time;
# splitk's `unwritten` (a tensor no node writes is read) exported with its own
# expectations; all qualified once, and tools/sensitivity.py tabulates each varying
# output's effect and limit beside the verdict (sensitivity.md).
# `repeat`: each port exported EXPORTS (2) times, each core qualified QUALIFIES (5) times,
# half of them while another process holds a CUDA context on the GPU; every verdict must
# be the same (tools/same_verdicts.py). Cores stay in $CORES (default /tmp/gnomon-sens);
# reports, tables and logs go to OUT_DIR/sensitivity-PHASE.tar.gz.
set -uo pipefail
wheels=$1 out=$2 phase=$3
here=$(cd "$(dirname "$0")" && pwd)
cores=${CORES:-/tmp/gnomon-sens} work=$(mktemp -d)
site=$(mktemp -d)
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$wheels"/gnomon-*.whl
export PYTHONPATH=$site PATH=$site/bin:$PATH PYTHONUNBUFFERED=1
mkdir -p "$cores" "$out" "$work/exports"
# shellcheck source=docs/ci/ports.sh
source "$here/ports.sh"
read -ra ports <<< "${PORTS:-splitk moe-top8-bf16 hf-index-add-qwen3_moe hf-index-add-olmoe}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$work/gpu.txt"
pack() { tar -C "$work" -czf "$out/sensitivity-$phase.tar.gz" .; }

plants() { # PORT: the defects planted in it (PLANTS, when set, for every port)
  [[ -n ${PLANTS:-} ]] && { echo "$PLANTS"; return; }
  case $1 in
    splitk) echo control weight:0.0001 weight:0.0003 weight:0.001 weight:0.0039 skip-layer ;;
    *) echo control weight:0.0039 weight:0.0156 weight:0.0625 weight:0.25 ;;
  esac
}

if [[ $phase == planted ]]; then
  for port in "${ports[@]}"; do
    export_one "$port-orig" "$port"
    n=0
    for p in $(plants "$port"); do
      export_one "$port-plant-${p//:/-}" "$port" --plant "$p" --against "$cores/$port-orig" &
      (( ++n % ${JOBS:-3} == 0 )) && wait
    done
    wait
  done
  [[ " ${ports[*]} " == *" splitk "* ]] && export_one splitk-unwritten splitk --plant unwritten
  pack
  qualify planted "$cores"/*/
  python3 "$here/../../tools/sensitivity.py" "$work/planted/report.json" > "$work/sensitivity.md"
  echo "sensitivity.md: $(grep -c '^| [a-z]' "$work/sensitivity.md") rows"
  pack
  exit 0
fi

if [[ $phase == repeat ]]; then
  targets=()
  for port in "${ports[@]}"; do
    for e in $(seq 1 "${EXPORTS:-2}"); do
      export_one "$port-e$e" "$port"
      targets+=("$cores/$port-e$e/")
    done
  done
  pack
  reports=()
  for q in $(seq 1 "${QUALIFIES:-5}"); do
    holder=
    if (( q % 2 == 0 )); then # another process holds a context and some memory on the GPU
      python3 -c 'import time, torch; torch.ones(1 << 28, device="cuda"); time.sleep(600)' &
      holder=$!
      sleep 10
    fi
    qualify "qualify-$q" "${targets[@]}"
    [[ -n $holder ]] && kill "$holder"
    reports+=("$work/qualify-$q/report.json")
    pack
  done
  python3 "$here/../../tools/same_verdicts.py" "${reports[@]}" | tee "$work/same-verdicts.txt"
  status=${PIPESTATUS[0]}
  python3 "$here/../../tools/sensitivity.py" "$work/qualify-1/report.json" > "$work/repeat-effects.md"
  pack
  exit "$status"
fi

echo "usage: $0 WHEEL_DIR OUT_DIR planted|repeat" >&2
exit 2
