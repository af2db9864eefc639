"""The recipes' helpers in tools/ that need no GPU."""

import json
import subprocess
import sys
from pathlib import Path

SAME_VERDICTS = Path(__file__).resolve().parents[2] / "tools" / "same_verdicts.py"


def report(path, statuses):
    path.write_text(json.dumps({"cases": [{"id": i, "status": s} for i, s in statuses.items()]}))
    return str(path)


def same_verdicts(*reports):
    return subprocess.run([sys.executable, SAME_VERDICTS, *reports], capture_output=True, text=True)


def test_qualifications_with_the_same_statuses_agree(tmp_path):
    statuses = {"q/a/restore": "passed", "q/a/outputs": "expected-failure"}
    ran = same_verdicts(report(tmp_path / "1.json", statuses), report(tmp_path / "2.json", statuses))
    assert ran.returncode == 0, ran.stdout
    assert "2 qualifications of 2 cases: the same status for every case" in ran.stdout


def test_a_changed_or_missing_status_is_named_and_fails(tmp_path):
    first = report(tmp_path / "1.json", {"q/a/restore": "passed", "q/a/outputs": "passed"})
    second = report(tmp_path / "2.json", {"q/a/restore": "failed"})
    ran = same_verdicts(first, second)
    assert ran.returncode == 1
    assert "q/a/restore: passed / failed" in ran.stdout
    assert "q/a/outputs: passed / absent" in ran.stdout
    assert "2 cases differ" in ran.stdout


SENSITIVITY = Path(__file__).resolve().parents[2] / "tools" / "sensitivity.py"
# What the judge says of a refused and a tolerated varying output, as its Rust test holds it.
SAID = (Path(__file__).resolve().parents[2] / "cases" / "src" / "qualify" / "snapshots"
        / "gnomon_cases__qualify__agreement__tests__the_distances_are_said_as_the_sensitivity_table_reads_them.snap")


def test_the_sensitivity_table_reads_the_judges_own_sentences(tmp_path):
    refused, tolerated = SAID.read_text().split("---\n")[-1].strip().splitlines()
    cases = [
        {"id": "qualify/splitk-plant-weight-0.01/template=b/outputs", "status": "failed", "reason": refused},
        {"id": "qualify/splitk-orig/template=b/outputs", "status": "passed", "reason": f"passed, not all bitwise: 1 "
         f"outputs varying in the original run were judged within the tolerance its launches recorded: {tolerated}"},
        {"id": "qualify/splitk-orig/template=c/outputs", "status": "passed"},
    ]
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"cases": cases}))
    ran = subprocess.run([sys.executable, SENSITIVITY, str(path)], capture_output=True, text=True, check=True)
    lines = ran.stdout.splitlines()
    assert "| splitk-orig | b | y | passed | 1.00 (1.53) | 1.00 (1.53) | 23 |" in lines, ran.stdout
    assert "| splitk-orig | c | — | passed | | | |" in lines, ran.stdout
    assert "| splitk-plant-weight-0.01 | b | y | failed | 2.02 (1.53) | 2.02 (1.53) | 23 |" in lines, ran.stdout
