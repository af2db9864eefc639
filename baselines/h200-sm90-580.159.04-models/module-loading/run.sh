#!/usr/bin/env bash
# probe call 1: where the nightly and llama restores spend their per-node and module time
set -uo pipefail
out=$1; mkdir -p $out
G=target/carry/gnomon
( time $G export model-scale-nightly --out /tmp/nightly ) > $out/export-nightly.txt 2>&1
timeout 120 target/carry/ready_probe /tmp/nightly > $out/ready-nightly.txt 2>&1
site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --target $site target/wheels-floor/gnomon-*.whl
export PYTHONPATH=$site PATH=$site/bin:$PATH
timeout 120 python3 -m gnomon.torch python/ports/decode.py --model llama --mode eager --batches "$(seq -s, 1 16)" --arena 24GiB --context 64 --out /tmp/llama > $out/export-llama.txt 2>&1
timeout 120 python3 -m gnomon.torch python/ports/hf.py --model mixtral --out /tmp/mixtral >> $out/export-llama.txt 2>&1
for c in llama mixtral; do
  timeout 100 target/carry/module_probe /tmp/$c > $out/modules-$c.txt 2>&1
  CUDA_MODULE_LOADING=EAGER timeout 100 target/carry/module_probe /tmp/$c > $out/modules-$c-eager.txt 2>&1
done
timeout 100 target/carry/ready_probe /tmp/llama > $out/ready-llama.txt 2>&1
timeout 100 $G replay /tmp/llama --result $out/replay-llama.json > $out/replay-llama.txt 2>&1
