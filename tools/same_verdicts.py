"""Whether qualifications of the same cores gave every case the same status: a verdict
must be reproducible. Prints one line and exits 0 when they did; otherwise names each
case whose status differs (or that one report lacks) and exits 1.

    python3 tools/same_verdicts.py REPORT.json REPORT.json...
"""

import json
import sys


def statuses(path):
    with open(path) as f:
        return {case["id"]: case["status"] for case in json.load(f)["cases"]}


def differences(reports):
    runs = [statuses(path) for path in reports]
    ids = sorted(set().union(*runs))
    return [(i, [run.get(i, "absent") for run in runs]) for i in ids if len({run.get(i) for run in runs}) > 1]


def main(reports):
    if len(reports) < 2:
        sys.exit("same_verdicts: give two reports or more")
    found = differences(reports)
    for case, seen in found:
        print(f"{case}: {' / '.join(seen)}")
    cases = len(statuses(reports[0]))
    print(f"{len(reports)} qualifications of {cases} cases: "
          + (f"{len(found)} cases differ" if found else "the same status for every case"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
