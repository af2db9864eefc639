"""The sensitivity table of planted defects: for each qualified core (a port's own, or one
planted with a defect and given the port's expectations), each template's `outputs`
verdict and, for each varying output, its effect: the replay's RMS distance from the
original's first launch over the output and in its noisiest 4 KiB block, in means of the
distances its recorded launches lay, beside the limit the judge held it to. Reads the
reasons `gnomon qualify` writes; prints Markdown.

    python3 tools/sensitivity.py REPORT.json...
"""

import json
import re
import sys

# A varying output named in an outputs case's reason, and its distances (see
# cases/src/qualify/agreement.rs, `distances_said`).
NAMED = re.compile(r"(?:`(?P<t1>[^`]+)` `(?P<b1>[^`]+)` launch \d+:|template `(?P<t2>[^`]+)` output `(?P<b2>[^`]+)`)")
DISTANCES = re.compile(r"its RMS distance (?P<rms>[\d.e+-]+(?: absolute)?) \(limit (?P<rms_limit>[\d.e+-]+(?: absolute)?)\), "
                       r"in its noisiest 4 KiB block (?P<block>[\d.e+-]+(?: absolute)?) \(limit "
                       r"(?P<block_limit>[\d.e+-]+(?: absolute)?)\), in means of its (?P<launches>\d+) recorded")


def effects(reason):
    """(template, buffer, distances) for each varying output whose distances the reason says."""
    names = list(NAMED.finditer(reason or ""))
    found = []
    for i, name in enumerate(names):
        end = names[i + 1].start() if i + 1 < len(names) else len(reason)
        d = DISTANCES.search(reason, name.end(), end)
        if d:
            found.append((name["t1"] or name["t2"], name["b1"] or name["b2"], d.groupdict()))
    return found


def rows(report):
    """One row per (core, template, output): the outputs case's status and the output's effect."""
    for case in report["cases"]:
        parts = case["id"].split("/")
        if parts[0] != "qualify" or parts[-1] != "outputs" or not parts[-2].startswith("template="):
            continue
        core, template = parts[1], parts[-2][len("template="):]
        said = effects(case.get("reason"))
        if not said:
            yield core, template, "—", case["status"], None
        for _, buffer, d in said:
            yield core, template, buffer, case["status"], d


def table(paths):
    lines = ["| core | template | output | verdict | RMS effect (limit) | block effect (limit) | launches |",
             "|---|---|---|---|---|---|---|"]
    for path in paths:
        with open(path) as f:
            report = json.load(f)
        for core, template, buffer, status, d in sorted(rows(report)):
            if d is None:
                lines.append(f"| {core} | {template} | {buffer} | {status} | | | |")
            else:
                lines.append(f"| {core} | {template} | {buffer} | {status} | {d['rms']} ({d['rms_limit']}) "
                             f"| {d['block']} ({d['block_limit']}) | {d['launches']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("sensitivity: give one report or more")
    print(table(sys.argv[1:]))
