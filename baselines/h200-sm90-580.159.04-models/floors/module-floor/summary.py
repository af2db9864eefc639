import json, glob
for p in sorted(glob.glob("/tmp/replay-*.json")):
    m = {k: v["value"] for k, v in json.load(open(p))["metrics"].items()}
    print(p, {k: round(m[k], 3) for k in ("restore-total-s", "restore-floor-s", "restore-over-floor", "restore-module-floor-s") if k in m})
r = json.load(open("/tmp/qualify/report.json"))
for c in r["cases"]:
    m = c.get("metrics", {})
    if "restore-over-floor" in m:
        print(c["id"], {k: round(m[k]["value"], 3) for k in ("restore-total-s", "restore-floor-s", "restore-over-floor", "restore-module-floor-s") if k in m})
r = json.load(open("/tmp/report/report.json"))
has = lambda c: "restore-module-floor-s" in c.get("metrics", {})
rows = [(c["id"], has(c)) for c in r["cases"] if "restore-over-floor" in c.get("metrics", {})]
print("catalogue replays with a floor:", len(rows), "with a module floor:", sum(h for _, h in rows),
      "direct handovers with one:", [i for i, h in rows if h and "handover=direct" in i])
