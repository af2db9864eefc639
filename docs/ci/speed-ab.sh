#!/usr/bin/env bash
# The speed case's 3-6 us on small templates (issue 58 item 5): one core of the Triton
# split-K port, exported by the wheel of 5ef2630 (the issue's), qualified REPEAT times by
# that wheel's gnomon (each timed launch after every writable buffer of the core was put
# back) and by this one's (after the buffers the template's first launch changed, as the
# kit times), then a copy of the core with a 10 % slowdown planted (tools/plant_speed.py), whose
# speed must fail. Usage: docs/ci/speed-ab.sh OLD_WHEEL_DIR NEW_WHEEL_DIR OUT (the old wheel: maturin
# build of 5ef2630 with its binary inside, as .ci/run builds one)
set -uo pipefail
old=$(mktemp -d) new=$(mktemp -d) out=$3
python3 -m pip install -q --no-index --no-deps --no-compile --target "$old" "$1"/gnomon-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --target "$new" "$2"/gnomon-*.whl
mkdir -p "$out"
PYTHONPATH=$old:python/ports python3 -m gnomon.torch python/ports/splitk.py --out /tmp/ab-core --summary "$out/export.json" \
  > "$out/export.log" 2>&1
echo "export with the old wheel: exit $?"
for i in $(seq 1 "${REPEAT:-3}"); do
  for side in old new; do
    dir=$old; [[ $side == new ]] && dir=$new
    "$dir/bin/gnomon" qualify /tmp/ab-core --report-dir "$out/$side-$i" > "$out/$side-$i.log" 2>&1
    echo "qualify $side $i: exit $?: $(tail -n 1 "$out/$side-$i.log")"
  done
done
# A planted 10 % slowdown of the smallest template: the new gnomon must fail its speed.
rm -rf /tmp/ab-slow
python3 tools/plant_speed.py /tmp/ab-core "${SLOW_TEMPLATE:-b16}" 0.10 /tmp/ab-slow
"$new/bin/gnomon" qualify /tmp/ab-slow --report-dir "$out/slow" > "$out/slow.log" 2>&1
echo "qualify of the planted slowdown: exit $?: $(tail -n 1 "$out/slow.log")"
python3 - "$out" <<'PY'
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*-*/report.json")) + glob.glob(os.path.join(sys.argv[1], "slow/report.json"))):
    for c in json.load(open(path))["cases"]:
        if c["id"].endswith("/speed"):
            m = {k: (v["value"] if isinstance(v, dict) else v) for k, v in (c.get("metrics") or {}).items()}
            print(f"{path.split('/')[-2]:6} {c['id'].split('/')[-2]:12} {c['status']:7} recorded "
                  f"{m.get('speed-recorded-median-us', 0):7.1f} us restored {m.get('speed-restored-median-us', 0):7.1f} us "
                  f"ratio {m.get('speed-ratio', 0):.3f}")
PY
