# The ports the recipes know, by name: `port_command PORT` prints the port's command line
# after `python3 -m gnomon.torch`. Sourced by repeat.sh and reserved.sh.
port_command() {
  case $1 in
    moe) echo python/ports/moe.py ;;
    moe-deterministic) echo python/ports/moe.py --deterministic ;;
    qwen2) echo python/ports/decode.py --model qwen2 --batches 16,8,4,2,1 --arena 8GiB --context 64 ;;
    hf-no-cudnn-*) echo python/ports/hf.py --model "${1#hf-no-cudnn-}" --no-cudnn-attention ;;
    hf-rival-*) echo python/ports/hf.py --model "${1#hf-rival-}" --cold-start-rival ;;
    hf-*) echo python/ports/hf.py --model "${1#hf-}" ;;
    hf32-*) echo python/ports/hf.py --model "${1#hf32-}" --layers 1 --batches "$(seq -s, 32 -1 1)" ;;
    *) echo "unknown port $1" >&2; return 1 ;;
  esac
}
