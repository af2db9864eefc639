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
