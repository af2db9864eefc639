//! The edges of the report crate's logic, each pinned by a test: where a metric change
//! stops being noise, how skip reasons group, what a merged run says about itself, and
//! what is written to disk. (These tests exist because `cargo mutants` showed changes to
//! that logic going unnoticed.)

mod common;

use std::collections::BTreeMap;

use common::{case, hand_made};
use gnomon_reports::{
    compare, merge, not_run, render, summary, write_atomically, CaseId, Gate, Metric, MetricPolicy, Report, Run, Status,
};

fn with_metric(value: f64, unit: &str) -> Report {
    let mut r = hand_made();
    r.cases.retain(|c| c.id.as_str() == "cpu/flags/value=1/accepted");
    r.cases[0].metrics = BTreeMap::from([("m".to_owned(), Metric::new(value, unit))]);
    r
}

fn changes(base: f64, new: f64, unit: &str, metrics: MetricPolicy) -> Vec<f64> {
    let gate = Gate { metrics, ..Gate::default() };
    compare(&with_metric(base, unit), &with_metric(new, unit), &gate)
        .metric_changes
        .iter()
        .map(|m| m.change_pct)
        .collect()
}

#[test]
fn a_change_exactly_at_the_threshold_or_the_floor_is_noise() {
    let pct = |p| MetricPolicy { default_pct: p, floor_per_unit: BTreeMap::new(), ..MetricPolicy::default() };
    assert_eq!(changes(1.0, 1.5, "1", pct(50.0)), Vec::<f64>::new());
    assert_eq!(changes(1.0, 1.5, "1", pct(49.0)), vec![50.0]);
    let floor = |b| MetricPolicy {
        default_pct: 5.0,
        floor_per_unit: BTreeMap::from([("B".to_owned(), b)]),
        ..MetricPolicy::default()
    };
    assert_eq!(changes(1000.0, 1100.0, "B", floor(100.0)), Vec::<f64>::new(), "a change of exactly the floor");
    assert_eq!(changes(1000.0, 1300.0, "B", floor(100.0)), vec![30.0]);
    assert_eq!(changes(0.0, 5.0, "1", pct(10.0)), vec![f64::INFINITY], "from zero, any change is beyond noise");
}

#[test]
fn figures_are_rounded_to_four_significant_digits() {
    let gate = Gate { metrics: MetricPolicy { default_pct: 10.0, ..MetricPolicy::default() }, ..Gate::default() };
    let text = compare(&with_metric(0.1234567, "1"), &with_metric(0.2, "1"), &gate).to_markdown();
    assert!(text.contains("m: 0.1235 → 0.2 1"), "{text}");
    let from_zero = compare(&with_metric(0.0, "1"), &with_metric(1234.5678, "1"), &gate).to_markdown();
    assert!(from_zero.contains("m: 0 → 1235 1"), "{from_zero}");
}

#[test]
fn the_verdict_names_only_what_fails_the_gate() {
    let base = hand_made();
    let mut removed = hand_made();
    removed.cases.retain(|c| c.id.as_str() != "cpu/flags/value=1/accepted");
    let verdict = |r: &Report| compare(&base, r, &Gate::default()).to_markdown().lines().nth(2).unwrap().to_owned();
    let only_removed = verdict(&removed);
    assert!(only_removed.contains("1 case of the baseline absent") && !only_removed.contains("regression"));
    let mut regressed = hand_made();
    regressed.cases[0].status = Status::Failed;
    let only_regressed = verdict(&regressed);
    assert!(only_regressed.contains("1 regression") && !only_regressed.contains("absent"), "{only_regressed}");
}

#[test]
fn skip_reasons_group_by_status_and_reason_and_large_groups_are_counted() {
    let skip = |id: &str, reason: &str| case(id, Status::Skipped, Some(reason), "c");
    let cases = vec![
        skip("gpu/a", "no GPU"),
        skip("gpu/b", "no GPU"),
        skip("gpu/c", "no GPU"),
        skip("replay/d", "no GPU"),
        skip("replay/e", "other"),
        case("replay/f", Status::Blocked, Some("no GPU"), "c"),
        case("replay/g", Status::Blocked, Some("no GPU"), "c"),
        case("replay/h", Status::Blocked, Some("no GPU"), "c"),
    ];
    let groups = not_run(&cases);
    let described: Vec<_> = groups.iter().map(|g| (g.who(), g.is_counted())).collect();
    assert_eq!(
        described,
        [
            ("4 cases skipped (3 under gpu/, 1 under replay/)".to_owned(), true),
            ("`replay/e` skipped".to_owned(), false),
            ("`replay/f`, `replay/g`, `replay/h` blocked".to_owned(), false),
        ]
    );
}

#[test]
fn a_merged_run_says_what_its_parts_did() {
    let part = |id: &str, started: &str, seconds: f64, partition: &str, complete: bool, case_id: &str| {
        let run = Run {
            id: id.into(),
            started_at: started.into(),
            duration_s: seconds,
            partition: Some(partition.into()),
            complete,
            ..Run::default()
        };
        let r = hand_made();
        let c = r.cases.iter().find(|c| c.id.as_str() == case_id).unwrap().clone();
        Report::new(run, r.subject.clone(), r.environment.clone(), vec![c])
    };
    let ids = [CaseId::new("gpu/hang"), CaseId::new("gpu/fault/sticky")];
    let one = part("a", "2026-11-30T02:00:00Z", 5.0, "hash:1/2", true, "gpu/hang");
    let mut two = part("b", "2026-11-30T01:00:00Z", 7.0, "hash:2/2", false, "gpu/fault/sticky");
    two.environment.host = "runner-2".into();
    let merged = merge(&[one.clone(), two.clone()], &ids).unwrap();
    assert_eq!(merged.environment.host, "runner-1, runner-2");
    let r = &merged.run;
    assert_eq!((r.id.as_str(), r.started_at.as_str(), r.duration_s), ("a+b", "2026-11-30T01:00:00Z", 7.0));
    assert_eq!((r.partition.as_deref(), r.complete), (None, false));

    let mut other_build = two;
    other_build.environment.harness_commit = "another".into();
    assert!(merge(&[one, other_build], &ids).unwrap_err().to_string().contains("harness commit"));
}

#[test]
fn small_facts_of_the_model() {
    assert!(CaseId::new("cpu/a") < CaseId::new("cpu/b") && CaseId::new("cpu/a") < CaseId::new("cpu/a-b"));
    assert!(hand_made().fails_run());
    let mut clean = hand_made();
    clean.cases.retain(|c| c.status == Status::Passed);
    assert!(!clean.fails_run());
    let clean = Report::new(clean.run.clone(), clean.subject.clone(), clean.environment.clone(), clean.cases);
    assert!(summary(&clean).contains("No case was blocked or skipped."));
}

#[test]
fn every_rendering_is_written_whole() {
    let dir = tempfile::tempdir().unwrap();
    let report = hand_made();
    render::write_all(&report, dir.path()).unwrap();
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap();
    assert_eq!(Report::from_json(&read("report.json")).unwrap(), report);
    assert_eq!(read("report.md"), render::markdown(&report));
    assert_eq!(read("junit.xml"), render::junit(&report));
    write_atomically(&dir.path().join("x.txt"), b"written").unwrap();
    assert_eq!(read("x.txt"), "written");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 4, "no temporary file left: {names:?}");
}

/// Parts that differ in anything that makes their results incomparable are refused,
/// naming that field; one part changed in one field at a time.
#[test]
fn merge_refuses_parts_that_differ_in_any_field_that_matters() {
    let ids = [CaseId::new("gpu/hang"), CaseId::new("gpu/fault/sticky")];
    let part = |partition: &str, case_id: &str| {
        let r = hand_made();
        let run = Run { id: partition.into(), partition: Some(partition.into()), ..r.run.clone() };
        let c = r.cases.iter().find(|c| c.id.as_str() == case_id).unwrap().clone();
        Report::new(run, r.subject.clone(), r.environment.clone(), vec![c])
    };
    let (one, two) = (part("hash:1/2", "gpu/hang"), part("hash:2/2", "gpu/fault/sticky"));
    assert!(merge(&[one.clone(), two.clone()], &ids).is_ok());
    type Change = fn(&mut Report);
    let fields: [(&str, Change); 14] = [
        ("report schema version", |r| r.schema_version = 0),
        ("harness version", |r| r.environment.harness_version = "0.2.0".into()),
        ("harness commit", |r| r.environment.harness_commit = "def456".into()),
        ("subject name", |r| r.subject.name = "a port".into()),
        ("subject version", |r| r.subject.version = "0.2.0".into()),
        ("subject commit", |r| r.subject.commit = "def456".into()),
        ("GPUs", |r| r.environment.gpus[0].name = "NVIDIA H100".into()),
        ("why no GPU", |r| r.environment.gpu_unavailable = Some("no driver".into())),
        ("driver release", |r| r.environment.driver_release = Some("575.57.08".into())),
        ("driver version", |r| r.environment.driver_version = Some("12.9".into())),
        ("NVRTC", |r| r.environment.nvrtc_version = Some("12.9".into())),
        ("transparent huge pages", |r| r.environment.transparent_huge_pages = Some("never".into())),
        ("profile", |r| r.run.profile = "nightly".into()),
        ("filters", |r| r.run.filters.push("--skip gpu/hang".into())),
    ];
    for (field, change) in fields {
        let mut other = two.clone();
        change(&mut other);
        let error = merge(&[one.clone(), other], &ids).unwrap_err().to_string();
        assert!(error.starts_with(&format!("parts disagree on {field}:")), "{field}: {error}");
    }
}

/// The words a release manager reads when the gate or a report command refuses, in one
/// snapshot: a doubled case, parts of two drivers, and each reason a comparison fails.
#[test]
fn refusal_and_verdict_texts() {
    let mut lines = Vec::new();
    let mut doubled = hand_made();
    doubled.cases.push(doubled.cases[0].clone());
    lines.push(Report::parse(&doubled.to_json()).unwrap_err());
    let part = |partition: &str, driver: &str| {
        let mut r = hand_made();
        (r.run.partition, r.environment.driver_release) = (Some(partition.into()), Some(driver.into()));
        r.run.id = partition.into();
        r
    };
    let parts = [part("hash:1/2", "580.159.04"), part("hash:2/2", "575.57.08")];
    lines.push(merge(&parts, &[]).unwrap_err().to_string());
    let base = hand_made();
    let mut worse = hand_made();
    worse.environment.gpus.clear();
    worse.run.complete = false;
    for c in &mut worse.cases {
        c.metrics.insert("restore".into(), Metric::new(10.0, "s"));
        if c.status == Status::Passed {
            c.status = Status::Blocked;
        }
    }
    worse.cases.retain(|c| c.id.as_str() != "gpu/hang");
    let verdict = compare(&base, &worse, &Gate::default()).to_markdown();
    lines.push(verdict.lines().nth(2).unwrap().to_owned());
    lines.push(MetricPolicy::parse("default-threshold-pct = inf\n").unwrap_err());
    insta::assert_snapshot!(lines.join("\n"));
}
