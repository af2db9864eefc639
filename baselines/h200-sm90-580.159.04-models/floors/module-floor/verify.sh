#!/usr/bin/env bash
# The module floor in `gnomon replay` and the catalogue's replays: the catalogue, then the
# qwen3 HF port exported once and replayed three times, then qualified, so the replay's
# `restore-over-floor` stands beside qualify's. Usage: verify.sh BINARY WHEEL_DIR OUT_DIR
set -uo pipefail
bin=$1 wheels=$2 out=$3 here=$(dirname "$0")
"$bin" run --report-dir /tmp/report > /tmp/run.log 2>&1
echo "run: exit $?, $(tail -n 1 /tmp/run.log)"
site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --target "$site" "$wheels"/gnomon-*.whl
PYTHONPATH=$site python3 -m gnomon.torch python/ports/hf.py --model qwen3 --out /tmp/q3 > /tmp/q3.log 2>&1
echo "export: exit $?"
for i in 1 2 3; do "$bin" replay /tmp/q3 --result "/tmp/replay-$i.json" 2> /dev/null; done
"$bin" qualify /tmp/q3 --report-dir /tmp/qualify > /tmp/qualify.log 2>&1
echo "qualify: exit $?, $(tail -n 1 /tmp/qualify.log)"
python3 "$here/summary.py" | tee /tmp/summary.txt
tar -C /tmp -czf "$out/verify.tar.gz" report run.log replay-1.json replay-2.json replay-3.json qualify qualify.log q3.log summary.txt
