//! Expectations matched on case id, device, driver and message: tables of records that
//! must and must not be turned, and files that must be refused.

use gnomon_cases::{expectations::Expectations, Case};
use gnomon_reports::{CaseRecord, Environment, Gpu, Status};

const FILE: &str = r#"
[[expect]]
cases = "gpu/flags/value={8,9}/driver-reports-exact"
status = "failed"
sm = 90
driver-min = "13.0"
driver-max = "13.0"
gpu = "H200"
message = "reports flags"
reason = "driver drops bit 8"
link = "DESIGN.md"

[[expect]]
cases = "gpu/unused/*"
status = "crashed"
reason = "never matches"
link = "nowhere"
"#;

fn h200(driver: &str) -> Environment {
    Environment {
        gpus: vec![Gpu { index: 0, name: "NVIDIA H200".into(), arch: "sm_90".into(), memory_bytes: 1 }],
        driver_version: Some(driver.into()),
        ..Environment::default()
    }
}

fn record(id: &str, status: Status, reason: &str) -> CaseRecord {
    Case::new(id, "flags-fidelity", |_| Ok(())).record(status, Some(reason.into()))
}

#[test]
fn matching_turns_statuses() {
    let failing = "the driver reports flags 0 for an executable instantiated with 8";
    let table = [
        ("gpu/flags/value=8/driver-reports-exact", Status::Failed, failing, "13.0", Status::ExpectedFailure),
        ("gpu/flags/value=9/driver-reports-exact", Status::Passed, "", "13.0", Status::UnexpectedPass),
        ("gpu/flags/value=8/driver-reports-exact", Status::Failed, failing, "13.1", Status::Failed),
        ("gpu/flags/value=8/driver-reports-exact", Status::Failed, "some other failure", "13.0", Status::Failed),
        ("gpu/flags/value=8/driver-reports-exact", Status::Crashed, failing, "13.0", Status::Crashed),
        ("gpu/flags/value=1/driver-reports-exact", Status::Failed, failing, "13.0", Status::Failed),
    ];
    for (id, status, reason, driver, expected) in table {
        let expectations = Expectations::parse(FILE).unwrap();
        let mut r = record(id, status, reason);
        expectations.apply(&mut r, &h200(driver));
        assert_eq!(r.status, expected, "{id} {status} on driver {driver}: {:?}", r.reason);
    }
}

#[test]
fn unused_and_overlapping_entries_are_reported() {
    let overlapping =
        format!("{FILE}\n[[expect]]\ncases = \"gpu/flags/*\"\nstatus = \"failed\"\nreason = \"r\"\nlink = \"l\"\n");
    let expectations = Expectations::parse(&overlapping).unwrap();
    let env = h200("13.0");
    let mut r = record("gpu/flags/value=8/driver-reports-exact", Status::Failed, "reports flags 0");
    expectations.apply(&mut r, &env);
    let problems = expectations.problems(&[r], &env);
    assert!(problems.iter().any(|p| p.contains("unused expectation `gpu/unused/*`")), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("matches several expectations")), "{problems:?}");
}

#[test]
fn an_expectation_whose_case_was_skipped_or_is_for_another_machine_is_silent() {
    let expectations = Expectations::parse(FILE).unwrap();
    let no_gpu = Environment::default();
    let mut skipped = record("gpu/flags/value=8/driver-reports-exact", Status::Skipped, "needs a CUDA GPU");
    expectations.apply(&mut skipped, &no_gpu);
    let problems = expectations.problems(&[skipped], &no_gpu);
    assert_eq!(problems, ["unused expectation `gpu/unused/*`: no case of this run has that id"]);
}

#[test]
fn bad_files_are_refused() {
    let passing = "[[expect]]\ncases = \"a\"\nstatus = \"passed\"\nreason = \"r\"\nlink = \"l\"\n";
    let typo = "[[expect]]\ncases = \"a\"\nstatus = \"failed\"\nreasn = \"r\"\nlink = \"l\"\n";
    let glob = "[[expect]]\ncases = \"a[\"\nstatus = \"failed\"\nreason = \"r\"\nlink = \"l\"\n";
    for text in [passing, typo, glob] {
        assert!(Expectations::parse(text).is_err(), "{text}");
    }
    assert!(Expectations::parse(gnomon_cases::expectations::DEFAULT).is_ok());
}
