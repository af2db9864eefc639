//! The nightly recipes under docs/ci/ run their steps through docs/ci/nightly.sh; this runs
//! that script with the built binary, as a GPU runner and the gate would, on this machine.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use gnomon_reports::{exit_codes, Report, Status};

fn nightly(args: &[&Path]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/ci/nightly.sh");
    Command::new("bash").arg(script).args(args).env("GNOMON", env!("CARGO_BIN_EXE_gnomon")).output().unwrap()
}

fn report(path: &Path) -> Report {
    Report::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Runs both partitions of a two-runner nightly into `out/part-1` and `out/part-2`.
fn partitions(out: &Path) {
    for k in ["1", "2"] {
        let ran = nightly(&[Path::new("partition"), Path::new(k), Path::new("2"), out]);
        assert!(ran.status.success(), "partition {k}: {}", String::from_utf8_lossy(&ran.stderr));
    }
}

/// A full nightly run of this machine, the baseline the gate compares against.
fn baseline(dir: &Path) -> PathBuf {
    let args = ["run", "--profile", "nightly", "--report-dir"];
    let ran = Command::new(env!("CARGO_BIN_EXE_gnomon")).args(args).arg(dir).output().unwrap();
    assert!(ran.status.success());
    dir.join("report.json")
}

/// Tonight's two parts and the baseline, in a scratch directory; the gate's output dir.
struct Night {
    _scratch: tempfile::TempDir,
    parts: PathBuf,
    base: PathBuf,
    gate: PathBuf,
}

fn night() -> Night {
    let scratch = tempfile::tempdir().unwrap();
    let (parts, gate) = (scratch.path().join("parts"), scratch.path().join("nightly"));
    partitions(&parts);
    let base = baseline(&scratch.path().join("base"));
    Night { _scratch: scratch, parts, base, gate }
}

#[test]
fn partitions_merge_and_pass_the_gate() {
    let Night { parts, base, gate, .. } = &night();
    let ran = nightly(&[Path::new("gate"), parts, base, gate]);
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    for file in ["report.json", "report.md", "junit.xml", "summary.txt", "compare.md", "trend.html"] {
        assert!(gate.join(file).is_file(), "the gate wrote no {file}");
    }
    let (merged, full) = (report(&gate.join("report.json")), report(base));
    let ids = |r: &Report| r.cases.iter().map(|c| (c.id.clone(), c.status)).collect::<Vec<_>>();
    assert_eq!(ids(&merged), ids(&full));
}

#[test]
fn a_case_that_failed_tonight_fails_the_gate_and_is_named() {
    let Night { parts, base, gate, .. } = &night();
    // What a runner whose case failed tonight would have uploaded.
    let part = parts.join("part-1/report.json");
    let mut tonight = report(&part);
    let case = tonight.cases.iter_mut().find(|c| c.status == Status::Passed).unwrap();
    (case.status, case.reason) = (Status::Failed, Some("planted for the gate test".into()));
    let failed = case.id.clone();
    std::fs::write(&part, tonight.to_json()).unwrap();

    let ran = nightly(&[Path::new("gate"), parts, base, gate]);
    assert_eq!(ran.status.code(), Some(exit_codes::REGRESSION));
    let comparison = std::fs::read_to_string(gate.join("compare.md")).unwrap();
    assert!(comparison.contains(failed.as_str()), "compare.md does not name {failed}:\n{comparison}");
}

/// A nightly that skips cases on purpose merges (the parts' `--skip`s are read back) and
/// passes its gate when the gate allows the skipped cases to be absent.
#[test]
fn partitions_that_skip_cases_merge_and_gate_with_allow_removed() {
    let scratch = tempfile::tempdir().unwrap();
    let (parts, gate) = (scratch.path().join("parts"), scratch.path().join("nightly"));
    for k in ["1", "2"] {
        let args = ["partition", k, "2", parts.to_str().unwrap(), "--skip", "cpu/flags/"];
        let ran = nightly(&args.map(Path::new));
        assert!(ran.status.success(), "partition {k}: {}", String::from_utf8_lossy(&ran.stderr));
    }
    let base = baseline(&scratch.path().join("base"));
    let ran = nightly(&[Path::new("gate"), &parts, &base, &gate]);
    assert_eq!(ran.status.code(), Some(exit_codes::REGRESSION), "skipped cases are absent from the gate's view");
    let ran = nightly(&[Path::new("gate"), &parts, &base, &gate, Path::new("--allow-removed")]);
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    assert!(report(&gate.join("report.json")).cases.iter().all(|c| !c.id.as_str().starts_with("cpu/flags/")));
}

/// A runner that must have an arch and has it not (no machine has sm_1) fails its
/// partition before any case.
#[test]
fn a_partition_on_a_runner_without_the_required_arch_fails() {
    let scratch = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/ci/nightly.sh");
    let ran = Command::new("bash")
        .arg(script)
        .args(["partition", "1", "2"])
        .arg(scratch.path())
        .env("GNOMON", env!("CARGO_BIN_EXE_gnomon"))
        .env("GNOMON_REQUIRE_ARCH", "sm_1")
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(exit_codes::PRECONDITION), "{}", String::from_utf8_lossy(&ran.stderr));
}
