#!/usr/bin/env bash
# Issue 60 item 1 with a real port on the GPU: the kit's export of PORT_A and of PORT_B,
# in turn, into one --out over the other's good core, killed with SIGKILL KILLS (24) times
# at delays spread over 1.2 × an unkilled export; after each kill `gnomon validate` must
# find the old core or the new one, complete and valid (told apart by their templates and
# node counts: a port's expectations may vary from export to export), never a mixture,
# never neither. Usage:
#   docs/ci/killed-export.sh WHEEL_DIR OUT_DIR [PORT_A PORT_B]   (default splitk moe)
set -uo pipefail
wheels=$1 out=$2 ports=("${3:-splitk}" "${4:-moe}")
here=$(cd "$(dirname "$0")" && pwd)
site=$(mktemp -d) core=$(mktemp -d)/core
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$wheels"/gnomon-*.whl
export PYTHONPATH=$site PATH=$site/bin:$PATH
# shellcheck source=docs/ci/ports.sh
source "$here/ports.sh"
mkdir -p "$out"
export_port() { # PORT [timeout prefix...]: the port's export into $core
  local port=$1
  shift
  # shellcheck disable=SC2046 # the command is words
  "$@" python3 -m gnomon.torch $(port_command "$port") --out "$core" >> "$out/exports.log" 2>&1
}
fingerprint() { # the core's templates and their node counts, or nothing
  python3 -c 'import json, sys
print(" ".join("%s:%d" % (t["name"], len(t["nodes"])) for t in json.load(open(sys.argv[1]))["templates"]))' \
    "$core/manifest.json" 2>/dev/null
}
declare -A known
for port in "${ports[@]}"; do # each port's unkilled export: its manifest and its time
  started=$(date +%s%N)
  export_port "$port" || { echo "export of $port failed: see exports.log"; exit 1; }
  full_ms=$(( ($(date +%s%N) - started) / 1000000 ))
  known[$(fingerprint)]=$port
  echo "$port: exported unkilled in $full_ms ms"
done
current=${ports[1]} old=0 new=0 bad=0
kills=${KILLS:-24}
for i in $(seq 1 "$kills"); do
  next=${ports[0]}; [[ $current == "${ports[0]}" ]] && next=${ports[1]}
  delay=$(( full_ms * 12 * i / (10 * kills) ))
  export_port "$next" timeout -s KILL "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
  rc=$?
  fp=$(fingerprint) found=none
  [[ -n $fp && -n ${known[$fp]:-} ]] && found=${known[$fp]}
  if gnomon validate "$core" > "$out/validate-$i.log" 2>&1 && [[ $found != none ]]; then
    verdict=$([[ $found == "$current" ]] && echo old || echo new)
  else
    verdict=BAD
  fi
  case $verdict in old) old=$((old + 1)) ;; new) new=$((new + 1)); current=$next ;; *) bad=$((bad + 1)) ;; esac
  echo "kill $i at $delay ms (exit $rc): $verdict ($found)"
done
echo "left beside the core: $(find "$(dirname "$core")" -mindepth 1 -maxdepth 1 ! -name core | wc -l) entries"
echo "$kills kills of the export of ${ports[*]} in turn: old core $old, new core $new, mixtures or lost $bad"
(( bad == 0 ))
