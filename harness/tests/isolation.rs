//! The runner tested through its own binary with the hidden mock cases: a pass, a
//! failure, a panic, an abort, a hang and a flake, each in its own child process.

use std::{path::Path, process::Command};

use gnomon_reports::{Report, Status};

fn run_mocks(dir: &Path, extra: &[&str]) -> (i32, Report) {
    let output = Command::new(env!("CARGO_BIN_EXE_gnomon"))
        .args(["run", "--include-mock", "--case-timeout", "1s", "--report-dir"])
        .arg(dir)
        .args(extra)
        .env(gnomon_cases::mock::FLAKY_STATE_ENV, dir.join("flaky-state"))
        .output()
        .expect("gnomon runs");
    let text = std::fs::read_to_string(dir.join("report.json")).expect("report.json written");
    (output.status.code().unwrap_or(-1), Report::from_json(&text).expect("report parses"))
}

fn status_of(report: &Report, id: &str) -> Status {
    report.cases.iter().find(|c| c.id.as_str() == id).unwrap_or_else(|| panic!("{id} in report")).status
}

#[test]
fn each_failure_mode_stays_in_its_case() {
    let dir = tempfile::tempdir().unwrap();
    let (code, report) = run_mocks(dir.path(), &["mock/"]);
    assert_eq!(code, gnomon_reports::exit_codes::CASES_FAILED);
    assert!(report.run.complete);
    let statuses: Vec<_> = report.cases.iter().map(|c| (c.id.as_str(), c.status)).collect();
    assert_eq!(
        statuses,
        [
            ("mock/abort", Status::Crashed),
            ("mock/fail", Status::Failed),
            ("mock/flaky", Status::Failed),
            ("mock/hang", Status::TimedOut),
            ("mock/panic", Status::Failed),
            ("mock/pass", Status::Passed),
        ]
    );
    let abort = report.cases.iter().find(|c| c.id.as_str() == "mock/abort").unwrap();
    assert!(abort.stderr.as_deref().unwrap().contains("aborting on purpose"), "child stderr kept: {abort:?}");
    assert!(abort.reason.as_deref().unwrap().contains("signal 6"));
    let pass = report.cases.iter().find(|c| c.id.as_str() == "mock/pass").unwrap();
    assert_eq!(pass.metrics["answer"].value, 42.0, "metrics cross the process boundary");
}

#[test]
fn retry_that_passes_is_flaky() {
    let dir = tempfile::tempdir().unwrap();
    let (code, report) = run_mocks(dir.path(), &["--retries", "1", "--exact", "mock/flaky"]);
    assert_eq!(code, gnomon_reports::exit_codes::SUCCESS);
    assert_eq!(status_of(&report, "mock/flaky"), Status::Flaky);
    assert_eq!(report.cases[0].attempts, 2);
}

#[test]
fn mock_cases_are_hidden_from_normal_runs() {
    let output = Command::new(env!("CARGO_BIN_EXE_gnomon")).args(["run", "--list"]).output().unwrap();
    let listing = String::from_utf8(output.stdout).unwrap();
    assert!(!listing.contains("mock/"));
    assert!(listing.lines().filter(|l| l.starts_with("cpu/")).count() >= 42);
}
