"""Two graphs that draw random numbers from PyTorch's CUDA generator (issue 60): `noise`
(dropout of x, plus `rand_like`) and `sample` (`torch.multinomial` with and without
replacement over 8 rows of 1 000 probabilities: its kernels draw through an exponential
and a Philox sampler). Each is replayed once, as a serving loop's warm-up would, then
exported: the core names the generator's seed and offset and each template's increment
(`generators`), and records the outputs of the launches the program's next replays
would make. Then PyTorch itself replays each graph at those offsets (the generator's
offset set first), and the summary says whether its replays drew what the core records:
`gnomon qualify` then holds the restored launches to the same digests.

    python -m gnomon.torch python/ports/draws.py --out DIR [--summary FILE]
"""

import argparse
import hashlib
import json
import os
import sys

import torch

import gnomon.torch as gt


def noise(x):
    return torch.nn.functional.dropout(x, p=0.5, training=True) + torch.rand_like(x)


def sample(p):
    return torch.multinomial(p, 4, replacement=True), torch.multinomial(p, 1)


def captured(step, *inputs):
    """`step` captured after a warm-up on a side stream, and its outputs. Each graph into a
    pool of its own (under the arena, a capture given none): graphs that share a pool may
    write into each other's freed memory, which here lies inside the other's output
    buffers, and the comparison below replays one graph after the other."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        out = step(*inputs)
    return g, out if isinstance(out, tuple) else (out,)


def digest(address, size):
    """The SHA-256 of `size` bytes of device memory at `address`, read by the driver
    (cuda-bindings): a core's digest covers its buffer, the whole allocation."""
    from cuda.bindings import driver

    host = bytearray(size)
    err = driver.cuMemcpyDtoH(host, address, size)
    err = err[0] if isinstance(err, tuple) else err
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuMemcpyDtoH: {err}")
    return hashlib.sha256(host).hexdigest()


def replayed_as_recorded(out, graphs):
    """For each recorded next launch: whether PyTorch's replay at its offset left in each
    output buffer the bytes the core's digest records."""
    with open(os.path.join(out, "manifest.json")) as f:
        m = json.load(f)
    buffers = {b["name"]: (m["arena"]["base"] + b["offset"], b["size"]) for b in m["buffers"]}
    generator, said = torch.cuda.default_generators[0], []
    for d in (d for g in m.get("generators", []) for d in g["draws"]):
        for launch in d["next-launches"]:
            generator.set_offset(launch["offset"])
            graphs[d["template"]].replay()
            torch.cuda.synchronize()
            same = all(digest(*buffers[o["buffer"]]) == o["sha256"] for o in launch["outputs"])
            said.append({"template": d["template"], "offset": launch["offset"], "same": same})
    return said


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--summary")
    a = p.parse_args()
    gt.use_arena("1GiB")
    x = torch.ones(1 << 16, device="cuda")
    probs = torch.softmax(torch.randn(8, 1000, device="cuda"), -1)
    g_noise, (y,) = captured(noise, x)
    g_sample, (with_replacement, without) = captured(sample, probs)
    graphs = {"noise": g_noise, "sample": g_sample}
    for g in graphs.values():
        g.replay()
    outputs = {"noise": {"y": y}, "sample": {"with-replacement": with_replacement, "without": without}}
    summary = gt.export(graphs, a.out, inputs={"x": x, "probs": probs}, outputs=outputs)
    summary["pytorch-replays"] = replayed_as_recorded(a.out, graphs)
    gt.report(summary, a.summary)
    unlike = [r for r in summary["pytorch-replays"] if not r["same"]]
    if unlike or not summary["pytorch-replays"]:
        sys.exit(f"draws.py: PyTorch's replays drew other bytes than the core records: {unlike or 'no draws recorded'}")


if __name__ == "__main__":
    main()
