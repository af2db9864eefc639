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
fn the_all_reduce_rank_set_is_exported_only_at_the_sizes_it_has() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("core");
    let refused = gnomon(&["export", "allreduce", "--tp", "3", "--out", out.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(exit_codes::USAGE));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    insta::assert_snapshot!(stderr.trim(), @"gnomon: `allreduce` is a rank set of 2 or 4 ranks (--tp 2, --tp 4), not 3");
    assert!(!out.exists());
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

/// A machine that cannot give cases scratch space blocks them for its own reason: that
/// is said before the first case, and the run fails with the precondition code.
#[test]
fn a_missing_tmpdir_is_said_before_the_first_case_and_fails_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("report");
    let ran = Command::new(env!("CARGO_BIN_EXE_gnomon"))
        .args(["run", "cpu/manifest/", "--report-dir", dir.to_str().unwrap()])
        .env("TMPDIR", tmp.path().join("missing"))
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(exit_codes::PRECONDITION));
    let stderr = String::from_utf8_lossy(&ran.stderr);
    let said = stderr.find("no scratch directory can be made under").expect("the reason is printed");
    let line = stderr[said..].lines().next().unwrap().replace(&tmp.path().display().to_string(), "TMP");
    let line = line.split(" at path ").next().unwrap_or(&line).to_owned();
    insta::assert_snapshot!(line, @"no scratch directory can be made under TMP/missing (TMPDIR): No such file or directory (os error 2)");
    let first_case = stderr.find("blocked: no temporary directory").unwrap_or(usize::MAX);
    assert!(said < first_case, "the reason comes after a case:\n{stderr}");
    assert!(dir.join("junit.xml").is_file());
}

/// `gnomon run | head -1`: the reader goes away after one line; the run ends quietly, with
/// its verdict and every report file, instead of panicking in libtest's printer.
#[test]
fn a_reader_that_goes_away_loses_no_report() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("report");
    let script = format!(
        "'{}' run cpu/ --report-dir '{}' 2>&1 | head -c 1 >/dev/null",
        env!("CARGO_BIN_EXE_gnomon"),
        dir.display()
    );
    let ran = Command::new("bash").args(["-c", &format!("{script}; exit ${{PIPESTATUS[0]}}")]).output().unwrap();
    assert_eq!(ran.status.code(), Some(exit_codes::SUCCESS), "{}", String::from_utf8_lossy(&ran.stderr));
    for file in ["report.json", "report.md", "junit.xml"] {
        assert!(dir.join(file).is_file(), "no {file}");
    }
    let validate = format!(
        "'{}' validate '{}' '{}' | head -c 1 >/dev/null; exit ${{PIPESTATUS[0]}}",
        env!("CARGO_BIN_EXE_gnomon"),
        concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/golden/v2"),
        concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/golden/v1"),
    );
    let ran = Command::new("bash").args(["-c", &validate]).output().unwrap();
    assert_eq!(ran.status.code(), Some(exit_codes::SUCCESS), "{}", String::from_utf8_lossy(&ran.stderr));
}
