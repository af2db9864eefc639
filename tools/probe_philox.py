"""Where a captured graph's random numbers come from (issue 60, "random numbers frozen"):
a step that draws with `torch.rand` and dropout, captured into the kit's pool, replayed
twice by PyTorch (each replay draws anew: PyTorch fills the generator's offset on the
device before it) and exported. Prints, as JSON, whether PyTorch's replays differed, and
the small live blocks (at most 64 bytes) that the step's kernel nodes point into: the
candidates for the generator's seed and offset, with their bytes after each replay, so
that the one PyTorch advances, and by how much, can be read off.

    python -m gnomon.torch tools/probe_philox.py OUT_DIR
"""

import json
import os
import sys

import torch

import gnomon.torch as gt


def step(x):
    noise = torch.rand_like(x)
    return torch.nn.functional.dropout(x, p=0.5, training=True) + noise


def small_blocks(manifest):
    """The core's blocks of at most 4 KiB, by offset: (name, size)."""
    return {b["offset"]: (b["name"], b["size"]) for b in manifest["buffers"] if b["size"] <= 4096}


def kernel_words(manifest):
    """(template, node, byte, word) for each 8-byte word of every kernel node's parameters."""
    for t in manifest["templates"]:
        for n in t["nodes"]:
            if n["op"].get("kind") == "kernel":
                params = bytes.fromhex(n["op"]["params"])
                for at in range(0, len(params) - 7, 8):
                    yield t["name"], n, at, int.from_bytes(params[at:at + 8], "little")


def words_outside(manifest):
    """Parameter words of kernel nodes that look like device addresses (0x7000_0000_0000 up
    to 0x8000_0000_0000) outside the arena: where a generator's seed and offset may live."""
    base, size = manifest["arena"]["base"], manifest["arena"]["size"]
    found = {}
    for _, n, at, word in kernel_words(manifest):
        if 0x7000_0000_0000 <= word < 0x8000_0000_0000 and not base <= word < base + size:
            found.setdefault(hex(word), []).append((n["id"], n["op"]["function"][:60], at))
    return found


def pointed(manifest, base, blocks):
    """The small blocks each kernel node's parameter bytes hold an address into."""
    found = {}
    for template, n, at, word in kernel_words(manifest):
        for offset, (name, size) in blocks.items():
            if offset <= word - base < offset + size:
                found.setdefault(name, []).append((template, n["id"], n["op"]["function"][:80], at))
    return found


def read(address, size):
    """`size` bytes of device memory at `address` (the driver's copy; cuda-bindings)."""
    from cuda.bindings import driver as cu

    buf = bytearray(size)
    err = cu.cuMemcpyDtoH(buf, address, size)
    err = err[0] if isinstance(err, tuple) else err
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuMemcpyDtoH: {err}")
    return bytes(buf).hex()


def main(out):
    gt.use_arena("1GiB")
    x = torch.ones(1 << 16, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step(x)
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g, pool=gt.graph_pool()):
        y = step(x)
    summary = gt.export({"draw": g}, out, inputs={"x": x}, outputs={"draw": {"y": y}})
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    base, blocks = manifest["arena"]["base"], small_blocks(manifest)
    replays, bytes_after = [], []
    for _ in range(2):
        g.replay()
        torch.cuda.synchronize()
        replays.append(y.clone())
        bytes_after.append({name: read(base + offset, size) for offset, (name, size) in blocks.items()})
    said = {
        "torch": torch.__version__,
        "replays-differ": not torch.equal(replays[0], replays[1]),
        "generator-state": list(torch.cuda.get_rng_state()[:16].tolist()),
        "varied": summary.get("varied"),
        "small-blocks": {name: size for name, size in blocks.values()},
        "their-bytes-after-each-replay": bytes_after,
        "pointed-by-kernels": pointed(manifest, base, blocks),
        "words-outside-the-arena": words_outside(manifest),
        "kernel-params": [(n["id"], n["op"]["function"][:60], n["op"]["params"]) for t in manifest["templates"]
                          for n in t["nodes"] if n["op"].get("kind") == "kernel"],
    }
    json.dump(said, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
