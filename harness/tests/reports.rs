//! The report commands through the binary: partitions of a CPU run merge into the full
//! run, and `compare` gates on regressions against the committed H200 baseline.

use std::{path::Path, process::Command};

use gnomon_reports::{exit_codes, Report, Status};

const BASELINE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../baselines/h200-sm90-580.159.04/report.json");

fn gnomon(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gnomon")).args(args).output().expect("gnomon runs")
}

fn run_cpu(dir: &Path, partition: Option<&str>) -> Report {
    let mut args = vec!["run", "cpu/", "--report-dir", dir.to_str().unwrap()];
    args.extend(partition.iter().flat_map(|p| ["--partition", p]));
    assert!(gnomon(&args).status.success());
    Report::from_json(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

#[test]
fn two_partitions_merged_equal_the_full_run() {
    let tmp = tempfile::tempdir().unwrap();
    let full = run_cpu(&tmp.path().join("full"), None);
    let one = run_cpu(&tmp.path().join("one"), Some("hash:1/2"));
    let two = run_cpu(&tmp.path().join("two"), Some("hash:2/2"));
    assert!(!one.cases.is_empty() && !two.cases.is_empty());
    let out = tmp.path().join("merged");
    let parts = [tmp.path().join("one/report.json"), tmp.path().join("two/report.json")];
    let merged =
        gnomon(&["merge", parts[0].to_str().unwrap(), parts[1].to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(merged.status.success(), "{}", String::from_utf8_lossy(&merged.stderr));
    let merged = Report::from_json(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let outcome = |r: &Report| r.cases.iter().map(|c| (c.id.clone(), c.status, c.claims.clone())).collect::<Vec<_>>();
    assert_eq!(outcome(&merged), outcome(&full));
    assert_eq!(merged.claims, full.claims);

    let missing = gnomon(&["merge", parts[0].to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(missing.status.code(), Some(exit_codes::USAGE));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("hash:2/2"));
}

#[test]
fn baseline_against_itself_passes_and_a_regression_is_named() {
    let same = gnomon(&["compare", BASELINE, BASELINE]);
    assert_eq!(same.status.code(), Some(exit_codes::SUCCESS), "{}", String::from_utf8_lossy(&same.stdout));

    let mut report = Report::from_json(&std::fs::read_to_string(BASELINE).unwrap()).unwrap();
    let victim = report.cases.iter_mut().find(|c| c.id.as_str() == "replay/decode/cap=64MiB/handover=exit").unwrap();
    victim.status = Status::Failed;
    let tmp = tempfile::tempdir().unwrap();
    let changed = tmp.path().join("report.json");
    std::fs::write(&changed, report.to_json()).unwrap();
    let regressed = gnomon(&["compare", BASELINE, changed.to_str().unwrap()]);
    assert_eq!(regressed.status.code(), Some(exit_codes::REGRESSION));
    let text = String::from_utf8_lossy(&regressed.stdout);
    assert!(text.contains("regression `replay/decode/cap=64MiB/handover=exit`: passed → failed"), "{text}");
}

#[test]
fn compare_refuses_thresholds_that_would_hide_changes() {
    for bad in [["--threshold", "NaN"], ["--threshold", "inf"], ["--metric-threshold", "export-s=-1"]] {
        let refused = gnomon(&["compare", BASELINE, BASELINE, bad[0], bad[1]]);
        assert_eq!(refused.status.code(), Some(exit_codes::USAGE), "{bad:?} was accepted");
    }
    let unknown = gnomon(&["compare", BASELINE, BASELINE, "--metric-threshold", "no-such-metric=5"]);
    assert_eq!(unknown.status.code(), Some(exit_codes::USAGE));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no-such-metric"));
}

#[test]
fn merge_refuses_parts_of_different_builds() {
    let tmp = tempfile::tempdir().unwrap();
    let one = run_cpu(&tmp.path().join("one"), Some("hash:1/2"));
    let mut two = run_cpu(&tmp.path().join("two"), Some("hash:2/2"));
    two.environment.harness_commit = "0123456789ab".into();
    std::fs::write(tmp.path().join("two/report.json"), two.to_json()).unwrap();
    let parts = [tmp.path().join("one/report.json"), tmp.path().join("two/report.json")];
    let out = tmp.path().join("merged");
    let merged =
        gnomon(&["merge", parts[0].to_str().unwrap(), parts[1].to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(merged.status.code(), Some(exit_codes::USAGE));
    assert!(String::from_utf8_lossy(&merged.stderr).contains("harness commit"), "{}", one.run.id);
}

#[test]
fn renderings_of_a_real_run_hold_once_redacted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("shards");
    assert!(gnomon(&["run", "cpu/shards/", "--report-dir", dir.to_str().unwrap()]).status.success());
    let mut report = Report::from_json(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap().redacted();
    // Whether a GPU is present depends on the machine, and these cases need none.
    let env = &mut report.environment;
    (env.gpus, env.driver_release, env.driver_version, env.nvrtc_version) = (Vec::new(), None, None, None);
    env.gpu_unavailable = Some("[machine]".into());
    insta::assert_snapshot!("cpu_shards_markdown", gnomon_reports::render::markdown(&report));
    insta::assert_snapshot!("cpu_shards_junit", gnomon_reports::render::junit(&report));
}

#[test]
fn require_arch_refuses_another_machine() {
    let tmp = tempfile::tempdir().unwrap();
    let refused = gnomon(&["run", "--require-arch", "sm_120", "--report-dir", tmp.path().to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(exit_codes::PRECONDITION));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--require-arch sm_120"));
}

/// Every command that reads reports refuses one that holds a case twice, and a run of this
/// machine (no GPU) compared against the H200 baseline fails the gate: its GPU cases did
/// not run and it lost the GPU.
#[test]
fn gates_refuse_doubled_cases_and_a_run_without_the_gpu() {
    let tmp = tempfile::tempdir().unwrap();
    let mut report = Report::from_json(&std::fs::read_to_string(BASELINE).unwrap()).unwrap();
    let again = report.cases[0].clone();
    report.cases.push(again);
    let doubled = tmp.path().join("doubled.json");
    std::fs::write(&doubled, report.to_json()).unwrap();
    let doubled = doubled.to_str().unwrap();
    let out = tmp.path().join("out");
    for args in [
        vec!["compare", BASELINE, doubled],
        vec!["summary", doubled],
        vec!["merge", doubled, "--out", out.to_str().unwrap()],
        vec!["trend", doubled, "--out", out.to_str().unwrap()],
    ] {
        let refused = gnomon(&args);
        assert_eq!(refused.status.code(), Some(exit_codes::USAGE), "{args:?}");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("is in the report twice"), "{args:?}");
    }
    let here = tmp.path().join("here");
    assert!(gnomon(&["run", "--report-dir", here.to_str().unwrap()]).status.success());
    let compared = gnomon(&["compare", BASELINE, here.join("report.json").to_str().unwrap()]);
    assert_eq!(compared.status.code(), Some(exit_codes::REGRESSION));
    let verdict = String::from_utf8_lossy(&compared.stdout).lines().nth(2).unwrap_or_default().to_owned();
    assert!(
        verdict.contains("that passed not run now") && verdict.ends_with("the new run lost a GPU or changed arch."),
        "{verdict}"
    );
}

/// A filtered run establishes no claim that rests on a case it left out, and says what its
/// selection left out: in the report, the summary and on the console. An expectation it
/// did not use is said on the console and in report.md too.
#[test]
fn a_filter_establishes_no_claim_it_left_cases_of() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("report");
    let out = gnomon(&["run", "cpu/", "--report-dir", dir.to_str().unwrap()]);
    assert!(out.status.success());
    let report = Report::parse(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    // The run says which it was and when it started (RFC 3339), whatever its selection.
    assert!(humantime::parse_rfc3339(&report.run.started_at).is_ok(), "{}", report.run.started_at);
    assert!(report.run.id.starts_with(&report.run.started_at.replace([':', '-'], "")), "{}", report.run.id);
    let claim = |name: &str| report.claims.iter().find(|c| c.claim == name).unwrap_or_else(|| panic!("no {name}"));
    // Every CPU case of capture-order passed; its GPU cases were left out by the filter.
    let capture = claim("capture-order");
    assert!(capture.not_passed.is_empty() && !capture.left_out.is_empty(), "{capture:?}");
    assert!(!capture.established);
    assert!(capture.left_out.iter().all(|id| id.family() != "cpu"), "{capture:?}");
    // A claim that rests on CPU cases alone is still established.
    assert!(claim("flags-contract").established);
    let left = report.run.left_out.len();
    assert!(left > 0 && report.run.left_out.iter().all(|c| c.id.family() != "cpu"));

    let summary = String::from_utf8(gnomon(&["summary", dir.join("report.json").to_str().unwrap()]).stdout).unwrap();
    assert!(summary.contains(&format!("The selection `cpu/` left out {left} cases (")), "{summary}");
    assert!(summary.contains("capture-order ("), "{summary}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("left out by the selection: {left} cases (")), "{stderr}");

    // The committed expectation names a GPU case, which this filter left out.
    assert!(!report.expectation_problems.is_empty());
    for problem in &report.expectation_problems {
        assert!(stderr.contains(&format!("gnomon: expectations: {problem}")), "{stderr}");
        let markdown = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(markdown.contains(&format!("## Expectations\n\n- {problem}")), "{markdown}");
    }
}
