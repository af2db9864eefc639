"""Why PyTorch's replays of `python/ports/draws.py`'s multinomial graph leave other bytes
than the core's draws at the same offsets (issue 60; not yet run): the two graphs
captured and replayed as the port does, every arena block read before the export (the
state every core launch starts from), exported; then each graph replayed by PyTorch at
offset 36, as the arena stands and again after every block was put back as exported,
with the digests of its output buffers and tensors, and the bytes of the multinomial
outputs that differ between the two.

    python -m gnomon.torch tools/probes/draws/diag.py OUT_DIR
"""
import sys, os, json, hashlib
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python", "ports"))
import torch, gnomon.torch as gt
import draws
from cuda.bindings import driver

def rd(a, n):
    h = bytearray(n); e = driver.cuMemcpyDtoH(h, a, n); return bytes(h)
def wr(a, b):
    e = driver.cuMemcpyHtoD(a, bytes(b), len(b))
def sha(b): return hashlib.sha256(b).hexdigest()[:12]
def tsha(t): return hashlib.sha256(t.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()[:12]

out = sys.argv[1]
gt.use_arena("1GiB")
x = torch.ones(1 << 16, device="cuda")
probs = torch.softmax(torch.randn(8, 1000, device="cuda"), -1)
g_noise, (y,) = draws.captured(draws.noise, x)
g_sample, (wr_, wo) = draws.captured(draws.sample, probs)
graphs = {"noise": g_noise, "sample": g_sample}
for g in graphs.values(): g.replay()
torch.cuda.synchronize()
base = gt._arena["base"]
# every block as it is before export (the snapshot)
snap = torch.cuda.memory_snapshot()
blocks = [(a, s) for a, s, live in gt._blocks(snap, base, gt._arena["size"])]
before = {a: rd(a, s) for a, s in blocks}
outputs = {"noise": {"y": y}, "sample": {"with-replacement": wr_, "without": wo}}
gt.export(graphs, out, inputs={"x": x, "probs": probs}, outputs=outputs)
m = json.load(open(os.path.join(out, "manifest.json")))
bufs = {b["name"]: (base + b["offset"], b["size"]) for b in m["buffers"]}
rec = {d["template"]: d for g in m["generators"] for d in g["draws"]}
gen = torch.cuda.default_generators[0]
def replay_at(t, off, restore):
    if restore:
        for a, b in before.items(): wr(a, b)
    gen.set_offset(off); graphs[t].replay(); torch.cuda.synchronize()
    return {o["buffer"]: sha(rd(*bufs[o["buffer"]])) for o in rec[t]["next-launches"][0]["outputs"]}, [tsha(v) for v in outputs[t].values()]
for t in ("noise", "sample"):
    print(t, "recorded", [[o["sha256"][:12] for o in l["outputs"]] for l in rec[t]["next-launches"]])
    for restore in (False, False, True, True):
        print(t, "restore" if restore else "as-is", replay_at(t, 36, restore))
# which bytes of the sample outputs differ between as-is and restored replays
for restore in (False, True):
    replay_at("sample", 36, restore)
    for name in ("output/sample/with-replacement", "output/sample/without"):
        b = rd(*bufs[name])
        if not restore: keep = getattr(sys.modules[__name__], "keep", {}); keep[name] = b; globals()["keep"] = keep
        else:
            diff = [i for i in range(len(b)) if b[i] != keep[name][i]]
            print(name, "bytes differing as-is vs restored:", len(diff), diff[:8], diff[-8:] if diff else [])
