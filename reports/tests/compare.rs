//! `compare` between two hand-made reports that cover every kind of transition, metric
//! changes inside and beyond the noise threshold, and environment differences.

mod common;

use common::{case, hand_made};
use gnomon_reports::{compare, CaseId, Gate, Metric, Report, Status, Thresholds, TransitionKind};

fn new_run() -> Report {
    let mut new = hand_made();
    new.run.id = "20261130T160000Z-2".into();
    let set = |r: &mut Report, id: &str, status: Status| {
        let c = r.cases.iter_mut().find(|c| c.id.as_str() == id).unwrap();
        c.status = status;
        c.reason = Some(format!("now {status}"));
    };
    set(&mut new, "cpu/flags/value=1/accepted", Status::Failed); // regression
    set(&mut new, "gpu/hang", Status::Passed); // fix
    set(&mut new, "replay/gemm/cap=64GiB/handover=exit", Status::Blocked); // failed → blocked
    set(&mut new, "gpu/flags/value=8/launch", Status::Skipped); // newly skipped
    set(&mut new, "gpu/flags/value=0/launch", Status::Passed); // flaky → passed: changed
    new.cases.retain(|c| c.id.as_str() != "gpu/fault/sticky"); // removed
    new.cases.push(case("replay/decode/cap=64MiB/handover=exit", Status::Passed, None, "native-replay")); // added
    let restore = new.cases.iter_mut().find(|c| c.id.as_str() == "gpu/flags/value=9/launch").unwrap();
    restore.metrics.insert("restore".into(), Metric::new(0.25, "s")); // +100 %: beyond noise
    let small = new.cases.iter_mut().find(|c| c.id.as_str() == "gpu/flags/value=8/launch").unwrap();
    small.metrics.insert("restore".into(), Metric::new(0.13, "s")); // +4 %: noise
    new.environment.driver_version = Some("13.1".into());
    Report::new(new.run.clone(), new.subject.clone(), new.environment.clone(), new.cases)
}

#[test]
fn every_transition_kind() {
    let comparison = compare(&hand_made(), &new_run(), &Gate::default());
    let kinds: Vec<_> = comparison.transitions.iter().map(|t| t.kind).collect();
    use TransitionKind::*;
    for kind in [Regression, Fix, NewlyBlocked, NewlySkipped, Added, Removed, Changed] {
        assert!(kinds.contains(&kind), "{kind:?} missing from {kinds:?}");
    }
    assert!(comparison.has_regression());
    assert_eq!(comparison.metric_changes.len(), 1, "only the change beyond 10 % is listed");
    insta::assert_snapshot!("compare_markdown", comparison.to_markdown());
    insta::assert_snapshot!("compare_json", comparison.to_json());
}

#[test]
fn a_report_against_itself_has_no_transition() {
    let comparison = compare(&hand_made(), &hand_made(), &Gate::default());
    assert!(
        comparison.transitions.is_empty() && comparison.metric_changes.is_empty() && comparison.environment.is_empty()
    );
    assert!(!comparison.has_regression());
}

#[test]
fn per_metric_threshold_overrides_the_default() {
    let thresholds = Thresholds { per_metric: [("restore".to_owned(), 200.0)].into(), ..Thresholds::default() };
    let comparison = compare(&hand_made(), &new_run(), &Gate { thresholds, ..Gate::default() });
    assert!(comparison.metric_changes.is_empty());
    assert_eq!(
        comparison.transitions.iter().find(|t| t.case == CaseId::new("gpu/hang")).unwrap().kind,
        TransitionKind::Fix
    );
}

/// A run that lost cases (filtered, or crashed part-way) fails the gate unless the loss
/// is declared; a new case that fails is a regression; an incomplete run fails.
#[test]
fn absent_cases_new_failures_and_incomplete_runs_fail_the_gate() {
    let base = hand_made();
    let mut fewer = hand_made();
    fewer.cases.retain(|c| c.status != Status::Passed);
    let lost = compare(&base, &fewer, &Gate::default());
    assert!(lost.has_regression() && lost.to_markdown().contains("absent (pass --allow-removed"));
    assert!(!compare(&base, &fewer, &Gate { allow_removed: true, ..Gate::default() }).has_regression());

    let mut more = hand_made();
    more.cases.push(case("replay/new/cap=64MiB/handover=exit", Status::Crashed, Some("killed by signal 11"), "x"));
    let added = compare(&base, &more, &Gate::default());
    let t = added.transitions.iter().find(|t| t.case.as_str() == "replay/new/cap=64MiB/handover=exit").unwrap();
    assert_eq!(t.kind, TransitionKind::Regression);

    let mut cut = hand_made();
    cut.run.complete = false;
    assert!(compare(&base, &cut, &Gate::default()).has_regression());
}

/// The stored totals and claims are not trusted: a case edited to failed counts as failed.
#[test]
fn totals_and_claims_are_derived_again_and_unknown_schemas_refused() {
    let mut edited = hand_made();
    let passed = edited.cases.iter_mut().find(|c| c.status == Status::Passed).unwrap();
    passed.status = Status::Failed;
    let read = Report::parse(&edited.to_json()).unwrap();
    assert_eq!(read.totals.get(&Status::Passed), None);
    assert!(!read.claims.iter().find(|c| c.claim == "flags-contract").unwrap().established);
    for version in [0, 2] {
        let mut r = hand_made();
        r.schema_version = version;
        assert!(Report::parse(&r.to_json()).unwrap_err().contains("schema version"));
    }
}
