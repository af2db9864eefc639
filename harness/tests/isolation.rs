//! The runner tested through its own binary with the hidden mock cases: a pass, a
//! failure, a panic, an abort, a hang and a flake, each in its own child process.

use std::{
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use gnomon_reports::{Report, Status};

fn mocks(dir: &Path, timeout: &str, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gnomon"));
    command
        .args(["run", "--include-mock", "--case-timeout", timeout, "--report-dir"])
        .arg(dir.join("report"))
        .args(extra)
        .env(gnomon_cases::mock::FLAKY_STATE_ENV, dir.join("flaky-state"))
        .env(gnomon_cases::mock::HELPER_PID_ENV, dir.join("helper-pid"));
    command
}

fn run_mocks(dir: &Path, extra: &[&str]) -> (i32, Report) {
    let output = mocks(dir, "1s", extra).output().expect("gnomon runs");
    (output.status.code().unwrap_or(-1), report(dir))
}

fn report(dir: &Path) -> Report {
    let text = std::fs::read_to_string(dir.join("report/report.json")).expect("report.json written");
    Report::from_json(&text).expect("report parses")
}

/// Whether process `pid` still exists (a zombie awaiting its reaper counts as gone).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
}

fn helper_pid(dir: &Path) -> u32 {
    std::fs::read_to_string(dir.join("helper-pid")).expect("the helper started").trim().parse().unwrap()
}

/// Polls for up to two seconds: a killed process is reaped by its new parent, not at once.
fn gone(pid: u32) -> bool {
    (0..20).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        !alive(pid)
    })
}

fn status_of(report: &Report, id: &str) -> Status {
    report.cases.iter().find(|c| c.id.as_str() == id).unwrap_or_else(|| panic!("{id} in report")).status
}

#[test]
fn each_failure_mode_stays_in_its_case() {
    let dir = tempfile::tempdir().unwrap();
    let (code, report) = run_mocks(dir.path(), &["mock/", "--skip", "mock/hang-with-helper"]);
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

#[test]
fn a_timeout_ends_the_helpers_a_case_started() {
    let dir = tempfile::tempdir().unwrap();
    let (_, report) = run_mocks(dir.path(), &["--exact", "mock/hang-with-helper"]);
    assert_eq!(status_of(&report, "mock/hang-with-helper"), Status::TimedOut);
    let pid = helper_pid(dir.path());
    assert!(gone(pid), "helper {pid} outlived its timed-out case");
}

/// The first SIGINT cancels: the running case and its helper end, and every report file
/// is written, marked incomplete, with no temporary file left behind.
#[test]
fn sigint_writes_every_report_and_leaves_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let child = mocks(dir.path(), "60s", &["--exact", "mock/hang-with-helper"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !dir.path().join("helper-pid").exists() {
        assert!(started.elapsed() < Duration::from_secs(20), "the mock never started its helper");
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = helper_pid(dir.path());
    interrupt(child.id());
    let output = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(20), "cancelling took too long");
    assert_eq!(output.status.code(), Some(gnomon_reports::exit_codes::CASES_FAILED));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cancelled"));
    let report = report(dir.path());
    assert!(!report.run.complete, "a cancelled run must be marked incomplete");
    let files: Vec<_> = std::fs::read_dir(dir.path().join("report")).unwrap().map(|e| e.unwrap().file_name()).collect();
    let mut names: Vec<_> = files.iter().map(|f| f.to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["junit.xml", "report.json", "report.md"]);
    assert!(gone(pid), "helper {pid} outlived the cancelled run");
}

fn interrupt(pid: u32) {
    let sent = Command::new("kill").args(["-INT", &pid.to_string()]).status().unwrap();
    assert!(sent.success());
}
