"""Plants an exporter's defect in a core: BUFFER, which a template reads, is declared
`undefined`; its bytes are cut out of the shard files and the shard digests recomputed,
so the core stays valid. Usage: undefine.py CORE_DIR BUFFER"""
import hashlib, json, os, sys

core, name = sys.argv[1:3]
path = os.path.join(core, "manifest.json")
m = json.load(open(path))
stored = [b for b in m["buffers"] if b.get("contents", "stored") == "stored"]
target = next(b for b in stored if b["name"] == name)
for s in m["shards"]:
    lo, hi = s["offset"], s["offset"] + s["size"]
    ranges = sorted((max(b["offset"], lo), min(b["offset"] + b["size"], hi), b["name"]) for b in stored)
    ranges = [r for r in ranges if r[0] < r[1]]
    data = open(os.path.join(core, s["file"]), "rb").read()
    kept, at = b"", 0
    for start, end, owner in ranges:
        if owner != name:
            kept += data[at : at + end - start]
        at += end - start
    open(os.path.join(core, s["file"]), "wb").write(kept)
    s["sha256"] = hashlib.sha256(kept).hexdigest()
target["contents"] = "undefined"
json.dump(m, open(path, "w"), indent=2)
print(f"{core}: `{name}` declared undefined")
