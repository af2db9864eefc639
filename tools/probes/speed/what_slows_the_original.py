"""Why a template replayed slower in the capturing process than restored (issue 25): one
graph (24 bf16 4096x4096 GEMMs with GELU, batch 8) captured and replayed in a fresh
process, with or without the kit's arena and recorder, timed by CUDA events around each
replay (median of 50 after 10), each replay alone and queued behind the last. python3 what_slows_the_original.py plain|arena|record|record+arena"""
import statistics
import sys

import torch

import gnomon.torch as gt

mode = sys.argv[1]
if "record" in mode:
    gt.record()
if "arena" in mode:
    gt.use_arena("8GiB")
torch.manual_seed(0)
layers = [torch.nn.Linear(4096, 4096, dtype=torch.bfloat16, device="cuda") for _ in range(24)]
x = torch.randn(8, 4096, dtype=torch.bfloat16, device="cuda")


def step():
    h = x
    for layer in layers:
        h = torch.nn.functional.gelu(layer(h))
    return h


side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        step()
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph, pool=gt.graph_pool()):
    out = step()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
alone = []
for i in range(60):
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    if i >= 10:
        alone.append(start.elapsed_time(end) * 1e3)
# Queued: every replay enqueued behind the last, the host never waiting, so each pair of
# events brackets the device's time for the graph, not the host's launch.
events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(60)]
for s, e in events:
    s.record()
    graph.replay()
    e.record()
torch.cuda.synchronize()
queued = [s.elapsed_time(e) * 1e3 for s, e in events[10:]]
for name, times in [("alone", alone), ("queued", queued)]:
    print(f"{mode} {name}: median {statistics.median(times):.1f} us, min {min(times):.1f}, max {max(times):.1f}")
