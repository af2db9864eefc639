#!/usr/bin/env bash
# Issue 25: the nightly core replayed warm by the binary on glibc's malloc
# (target/carry/gnomon-glibc, main as of a5a3cb9) and by the one on jemalloc with huge
# pages (target/carry/gnomon, a5a3cb9 with jemalloc.patch), alternating, ROUNDS times
# each, with each replay's page faults. Usage, from the repository root: nightly-ab.sh OUT
set -uo pipefail
out=$1; mkdir -p "$out"
[[ -d /tmp/nightly ]] || ( time timeout 120 target/carry/gnomon export model-scale-nightly --out /tmp/nightly ) > "$out/export.txt" 2>&1
usage='import json, resource, subprocess, sys
subprocess.run(sys.argv[1:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"minflt": r.ru_minflt, "utime": r.ru_utime, "stime": r.ru_stime}))'
for round in $(seq 1 "${ROUNDS:-3}"); do
  for bin in gnomon-glibc gnomon; do
    timeout 120 python3 -c "$usage" target/carry/$bin replay /tmp/nightly --result "$out/replay-$bin-$round.json" > "$out/usage-$bin-$round.txt" 2>&1
  done
done
python3 - "$out" <<'P'
import json, sys, glob, os
for f in sorted(glob.glob(sys.argv[1] + "/replay-*.json")):
    r = json.load(open(f)); u = open(f.replace("replay-", "usage-").replace(".json", ".txt")).read().strip().splitlines()[-1]
    m = {k: round(v["value"], 4) for k, v in r["metrics"].items() if any(s in k for s in ("over-floor", "us-per-node", "total-s", "instantiate-s", "ready-s", "upload-s", "rss"))}
    print(os.path.basename(f), json.dumps(m), u)
P
