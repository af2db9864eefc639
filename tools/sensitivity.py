"""The sensitivity table of planted defects: for each qualified core (a port's own, or one
planted with a defect and given the port's expectations), each template's `outputs`
verdict and, for each varying output, its effect: the replay's RMS distance from the
original's first launch over the output and in its noisiest 4 KiB block, in means of the
distances its recorded launches lay, beside the limit the judge held it to. Reads the
reasons `gnomon qualify` writes; prints Markdown. With `--floors`, the detection floor each
varying output's reason states instead (the smallest effect caught, in the same units).

    python3 tools/sensitivity.py [--floors] REPORT.json...
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


FLOOR = re.compile(r"`(?P<template>[^`]+)` `(?P<buffer>[^`]+)`: (?P<rms>[\d.]+) × its recorded spread over the "
                   r"output, (?P<block>[\d.]+) × in one 4 KiB block \((?P<launches>\d+) launches\)")


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


def outputs_cases(report):
    """(core, template, case) for each template's outputs case of a qualify report."""
    for case in report["cases"]:
        parts = case["id"].split("/")
        if parts[0] == "qualify" and parts[-1] == "outputs" and parts[-2].startswith("template="):
            yield parts[1], parts[-2][len("template="):], case


def rows(report):
    """One row per (core, template, output): the outputs case's status and the output's effect."""
    for core, template, case in outputs_cases(report):
        said = effects(case.get("reason"))
        if not said:
            yield core, template, "—", case["status"], None
        for _, buffer, d in said:
            yield core, template, buffer, case["status"], d


def reports(paths):
    for path in paths:
        with open(path) as f:
            yield json.load(f)


def table(paths):
    lines = ["| core | template | output | verdict | RMS effect (limit) | block effect (limit) | launches |",
             "|---|---|---|---|---|---|---|"]
    for report in reports(paths):
        for core, template, buffer, status, d in sorted(rows(report)):
            if d is None:
                lines.append(f"| {core} | {template} | {buffer} | {status} | | | |")
            else:
                lines.append(f"| {core} | {template} | {buffer} | {status} | {d['rms']} ({d['rms_limit']}) "
                             f"| {d['block']} ({d['block_limit']}) | {d['launches']} |")
    return "\n".join(lines)


def floors(paths):
    """One row per (core, template, output) whose outputs case states a detection floor."""
    lines = ["| core | template | output | floor, whole output | floor, one 4 KiB block | launches |",
             "|---|---|---|---|---|---|"]
    for report in reports(paths):
        for core, _, case in outputs_cases(report):
            said = (case.get("reason") or "").partition("the detection floor of each varying output")[2]
            for m in sorted(FLOOR.finditer(said), key=lambda m: m["buffer"]):
                lines.append(f"| {core} | {m['template']} | {m['buffer']} | {m['rms']} | {m['block']} "
                             f"| {m['launches']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    args = sys.argv[1:]
    floors_only = args[:1] == ["--floors"]
    paths = args[1:] if floors_only else args
    if not paths:
        sys.exit("sensitivity: give one report or more")
    print(floors(paths) if floors_only else table(paths))
