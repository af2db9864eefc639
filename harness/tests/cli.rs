//! `gnomon run` refuses nonsense up front, with exit code 2 and a message, before any case
//! runs: flags that would deadlock, run for hours or match nothing, and a report
//! directory it cannot write.

use std::process::{Command, Output};

use gnomon_reports::exit_codes;

fn gnomon(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gnomon")).args(args).output().expect("gnomon runs")
}

#[test]
fn nonsense_flags_are_refused_before_any_case_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("report");
    let dir = dir.to_str().unwrap();
    for (flag, value, says) in [
        ("--test-threads", "0", "--test-threads"),
        ("--retries", "1000000", "--retries"),
        ("--case-timeout", "0s", "--case-timeout"),
        ("--require-arch", "banana", "banana"),
    ] {
        let refused = gnomon(&["run", flag, value, "--report-dir", dir]);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(exit_codes::USAGE), "{flag} {value}: {stderr}");
        assert!(stderr.contains(says), "{flag} {value}: {stderr}");
    }
    assert!(!tmp.path().join("report").exists(), "a refused run wrote a report");
}

#[test]
fn a_filter_that_selects_nothing_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let refused = gnomon(&["run", "no/such/case", "--report-dir", tmp.path().to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(exit_codes::USAGE));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no case matches no/such/case"));
}

#[test]
fn an_unwritable_report_directory_is_found_before_the_first_case() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let under_a_file = file.join("report");
    let refused = gnomon(&["run", "cpu/", "--report-dir", under_a_file.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(exit_codes::USAGE));
    let stdout = String::from_utf8_lossy(&refused.stdout);
    assert!(!stdout.contains("test cpu/"), "cases ran before the report directory was checked:\n{stdout}");
}
