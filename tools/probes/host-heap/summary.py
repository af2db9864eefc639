#!/usr/bin/env python3
"""The tables of baselines/h200-sm90-580.159.04-models/prelude/allocators/README.md from
ab.py's rows: per core and arm, medians of the restore's metrics, the process's page
faults and its /proc/vmstat deltas; then each arm against `glibc`, paired by call, core
and round, over the ports (the nightly core apart).
Usage: summary.py CALL.jsonl..."""
import collections, json, statistics as st, sys

KEYS = ("restore-total-s", "restore-over-floor", "restore-upload-s", "restore-context-s",
        "restore-us-per-node", "read-floor-gbps")
rows = [dict(json.loads(line), call=i) for i, f in enumerate(sys.argv[1:]) for line in open(f)]
groups = collections.defaultdict(list)
for r in rows:
    groups[(r["core"], r["arm"])].append(r)
print("core arm n", *KEYS, "minflt thp_fault_alloc compact_stall pgscan_direct")
for (core, arm), rs in sorted(groups.items()):
    med = lambda get: st.median(get(r) for r in rs)
    print(core, arm, len(rs), *(f"{med(lambda r: r['metrics'][k]):.3f}" for k in KEYS),
          *(int(med(lambda r: r[k] if k == "minflt" else r["vmstat"][k]))
            for k in ("minflt", "thp_fault_alloc", "compact_stall", "pgscan_direct")))
paired = collections.defaultdict(dict)
for r in rows:
    paired[(r["call"], r["core"], r["round"])][r["arm"]] = r["metrics"]
for arm in sorted({r["arm"] for r in rows} - {"glibc"}):
    for k in ("restore-total-s", "restore-upload-s", "restore-us-per-node"):
        d = [p[arm][k] - p["glibc"][k] for (_, core, _), p in paired.items()
             if core != "nightly" and arm in p and "glibc" in p]
        if d:
            print(f"{arm} - glibc, ports, {k}: n={len(d)} median {st.median(d):+.4f} "
                  f"mean {st.mean(d):+.4f} slower in {sum(x > 0 for x in d)}")
