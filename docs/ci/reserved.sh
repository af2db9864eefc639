#!/usr/bin/env bash
# What PyTorch alone reserves for a port's captures, each port in a process of its own:
# the Hugging Face ports of repeat.sh run with PyTorch's own allocator (`--arena none`), no
# kit, no export. Usage:
#   docs/ci/reserved.sh WHEEL_DIR OUT_DIR PORT...
# Writes OUT_DIR/PORT.json ({"model", "max-memory-reserved"}) and prints one line per port;
# compare with `max-memory-reserved` and `arena.peak-end` of repeat.sh's export summaries.
set -uo pipefail
wheels=$1 out=$2
shift 2
# shellcheck source=docs/ci/ports.sh
source "$(dirname "$0")/ports.sh"
site=$(mktemp -d)
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$wheels"/gnomon-*.whl
export PYTHONPATH=$site
mkdir -p "$out"
for port in "$@"; do
  command=$(port_command "$port") || exit 2
  [[ $command == python/ports/hf.py* ]] || { echo "$port: only hf.py ports run without the kit" >&2; exit 2; }
  # shellcheck disable=SC2086 # the command is words
  python3 $command --arena none --out /dev/null --summary "$out/$port.json" > "$out/$port.log" 2>&1 \
    && echo "$port $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["max-memory-reserved"])' "$out/$port.json")" \
    || echo "$port failed (see $out/$port.log)"
done
