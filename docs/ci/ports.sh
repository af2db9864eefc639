# The ports the recipes know, by name: `port_command PORT` prints the port's command line
# after `python3 -m gnomon.torch`. Sourced by repeat.sh, reserved.sh, varying.sh and sensitivity.sh.
port_command() {
  case $1 in
    *-deterministic) echo "$(port_command "${1%-deterministic}")" --deterministic ;;
    moe) echo python/ports/moe.py ;;
    # The many-way combine: top 8 of 32 experts added into each token's row by index_add_.
    moe-top8) echo python/ports/moe.py --experts 32 --top 8 --combine index-add ;;
    moe-top8-bf16) echo python/ports/moe.py --experts 32 --top 8 --combine index-add --dtype bfloat16 ;;
    # Every GEMM a Triton split-K kernel adding partial sums with atomics: every template varies.
    splitk) echo python/ports/splitk.py ;;
    # Dropout, rand_like and multinomial: templates that draw from the CUDA generator.
    draws) echo python/ports/draws.py ;;
    qwen2) echo python/ports/decode.py --model qwen2 --batches 16,8,4,2,1 --arena 8GiB --context 64 ;;
    # Qwen2-1.5B whole: 28 layers, SDPA's own grouped-query attention, argmax on a side stream.
    qwen2-28-gqa) echo python/ports/decode.py --model qwen2 --layers 28 --gqa sdpa --argmax-side-stream \
      --batches 16,8,4,2,1 --arena 16GiB --context 64 ;;
    # transformers' own static-cache generate, its decode step compiled by transformers with
    # CUDA graph trees: hf-generate-bB-MODEL, one batch size B per process.
    hf-generate-b*) local rest=${1#hf-generate-b}; echo python/ports/hf_generate.py --batch "${rest%%-*}" --model "${rest#*-}" ;;
    # HF's own forward whose experts combine as a serving stack's fused MoE: one index_add_.
    hf-index-add-*) echo python/ports/hf.py --model "${1#hf-index-add-}" --experts index-add ;;
    # A serving stack's capture code unchanged: a pool handle of PyTorch's own, or none.
    hf-pool-pytorch-*) echo python/ports/hf.py --model "${1#hf-pool-pytorch-}" --pool pytorch ;;
    hf-pool-none-*) echo python/ports/hf.py --model "${1#hf-pool-none-}" --pool none ;;
    hf-no-cudnn-*) echo python/ports/hf.py --model "${1#hf-no-cudnn-}" --no-cudnn-attention ;;
    hf-rival-*) echo python/ports/hf.py --model "${1#hf-rival-}" --cold-start-rival ;;
    hf-*) echo python/ports/hf.py --model "${1#hf-}" ;;
    hf32-*) echo python/ports/hf.py --model "${1#hf32-}" --layers 1 --batches "$(seq -s, 32 -1 1)" ;;
    *) echo "unknown port $1" >&2; return 1 ;;
  esac
}

# Helpers of the recipes that export ports and qualify their cores (varying.sh,
# sensitivity.sh): each writes the core under $cores and its logs and reports under $work.
export_one() { # NAME PORT [ARGS...]
  local name=$1 port=$2 started=$SECONDS
  shift 2
  # shellcheck disable=SC2046 # the command is words
  timeout 300 python3 -m gnomon.torch $(port_command "$port") --out "$cores/$name" \
    --summary "$work/exports/$name.json" "$@" > "$work/exports/$name.log" 2>&1
  echo "export $name: exit $? in $((SECONDS - started)) s"
}

qualify() { # NAME CORE...
  local name=$1 started=$SECONDS
  shift
  gnomon qualify "$@" --report-dir "$work/$name" > "$work/$name.log" 2>&1
  echo "qualify $name: exit $? in $((SECONDS - started)) s: $(tail -n 1 "$work/$name.log")"
}
