//! `compare` between two hand-made reports that cover every kind of transition, metric
//! changes inside and beyond the noise threshold, and environment differences.

mod common;

use common::{case, hand_made};
use gnomon_reports::{compare, CaseId, Gate, Metric, MetricPolicy, Report, Status, TransitionKind};

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
    restore.metrics.insert("restore".into(), Metric::new(0.5, "s")); // ×4: beyond noise
    let small = new.cases.iter_mut().find(|c| c.id.as_str() == "gpu/flags/value=8/launch").unwrap();
    small.metrics.insert("restore".into(), Metric::new(0.13, "s")); // +4 %: noise
    new.environment.driver_version = Some("13.1".into());
    new.environment.transparent_huge_pages = Some("never".into());
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
    assert_eq!(comparison.metric_changes.len(), 1, "only the change beyond the threshold is listed");
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
    let metrics = MetricPolicy { per_metric: [("restore".to_owned(), 400.0)].into(), ..MetricPolicy::default() };
    let comparison = compare(&hand_made(), &new_run(), &Gate { metrics, ..Gate::default() });
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

/// Every pair of statuses, absent included, against the table a release manager reads:
/// rows are the base, columns the new run. `·` no transition, `R` regression, `N` passed
/// before and not run now, `-` removed, `F` fix, `B` newly blocked, `S` newly skipped,
/// `+` added, `c` changed.
#[test]
fn every_pair_of_statuses_has_its_transition() {
    use gnomon_reports::classify;
    let columns: Vec<Option<Status>> = std::iter::once(None).chain(Status::ALL.map(Some)).collect();
    // absent passed failed crashed timed-out blocked skipped expected-failure unexpected-pass flaky
    let table = [
        "·+RRR+++R+",
        "-·RRRNNRRc",
        "-F·ccBSccc",
        "-Fc·cBSccc",
        "-Fcc·BSccc",
        "-cRRR·ScRc",
        "-cRRRB·cRc",
        "-cRRRBS·Rc",
        "-FcccBSc·c",
        "-cRRRNNRR·",
    ];
    let letter = |k: Option<TransitionKind>| match k {
        None => '·',
        Some(TransitionKind::Regression) => 'R',
        Some(TransitionKind::NotRun) => 'N',
        Some(TransitionKind::Removed) => '-',
        Some(TransitionKind::Fix) => 'F',
        Some(TransitionKind::NewlyBlocked) => 'B',
        Some(TransitionKind::NewlySkipped) => 'S',
        Some(TransitionKind::Added) => '+',
        Some(TransitionKind::Changed) => 'c',
    };
    let got: Vec<String> = columns.iter().map(|b| columns.iter().map(|n| letter(classify(*b, *n))).collect()).collect();
    assert_eq!(got, table);
}

/// A case that passed and is now skipped or blocked fails the gate unless
/// `--allow-not-run` says so; a report that lost its GPU or changed arch fails it too.
#[test]
fn passed_cases_not_run_and_a_lost_gpu_fail_the_gate() {
    let base = hand_made();
    let mut no_gpu = hand_made();
    no_gpu.environment.gpus.clear();
    for c in no_gpu.cases.iter_mut().filter(|c| c.status == Status::Passed) {
        (c.status, c.reason) = (Status::Skipped, Some("no CUDA GPU".into()));
    }
    let lost = compare(&base, &no_gpu, &Gate::default());
    assert_eq!(lost.transitions.iter().filter(|t| t.kind == TransitionKind::NotRun).count(), 1);
    let verdict = lost.to_markdown();
    assert!(verdict.contains("1 case that passed not run now") && verdict.contains("lost a GPU"), "{verdict}");
    let allowed = compare(&base, &no_gpu, &Gate { allow_not_run: true, ..Gate::default() });
    assert!(allowed.has_regression(), "a lost GPU still fails the gate");
    no_gpu.environment.gpus = base.environment.gpus.clone();
    assert!(!compare(&base, &no_gpu, &Gate { allow_not_run: true, ..Gate::default() }).has_regression());
    no_gpu.environment.gpus[0].arch = "sm_100".into();
    let other_arch = compare(&base, &no_gpu, &Gate { allow_not_run: true, ..Gate::default() });
    assert!(other_arch.has_regression() && other_arch.environment.iter().any(|e| e.fails_gate));
}

/// Times ten times longer and bandwidths ten times lower fail the gate; the same moves
/// the good way, and informational metrics, are listed without failing it.
#[test]
fn metrics_fail_the_gate_in_their_worse_direction_only() {
    let with = |metrics: &[(&str, f64, &str)]| {
        let mut r = hand_made();
        r.cases.retain(|c| c.status == Status::Passed);
        r.cases[0].metrics = metrics.iter().map(|(n, v, u)| (n.to_string(), Metric::new(*v, u))).collect();
        r
    };
    let base = with(&[("restore-total-s", 1.0, "s"), ("upload-gbps", 10.0, "GB/s"), ("read-floor-gbps", 10.0, "GB/s")]);
    let judged = |new: &Report| {
        let c = compare(&base, new, &Gate::default());
        let mut regressed: Vec<String> = c.metric_regressions().map(|m| m.metric.clone()).collect();
        regressed.sort();
        (regressed, c.metric_changes.len(), c.has_regression())
    };
    let worse = with(&[("restore-total-s", 10.0, "s"), ("upload-gbps", 1.0, "GB/s"), ("read-floor-gbps", 1.0, "GB/s")]);
    assert_eq!(judged(&worse), (vec!["restore-total-s".to_owned(), "upload-gbps".to_owned()], 3, true));
    let better =
        with(&[("restore-total-s", 0.1, "s"), ("upload-gbps", 100.0, "GB/s"), ("read-floor-gbps", 100.0, "GB/s")]);
    assert_eq!(judged(&better), (vec![], 3, false));
    let text = compare(&base, &worse, &Gate::default()).to_markdown();
    assert!(text.contains("2 metrics regressed") && text.contains("informational `cpu/"), "{text}");
}

#[test]
fn the_committed_metric_policy_reads_and_a_bad_one_is_refused() {
    let policy = MetricPolicy::default();
    use gnomon_reports::Direction::*;
    assert_eq!(policy.direction("restore-total-s", "s"), LowerIsBetter);
    assert_eq!(policy.direction("upload-gbps", "GB/s"), HigherIsBetter);
    assert_eq!(policy.direction("upload-fraction-of-floor", "1"), Informational);
    assert_eq!(policy.direction("window-start-unix-s", "s"), Informational);
    assert_eq!(policy.direction("anything", "furlongs"), Informational);
    assert_eq!(policy.threshold("templates-unchecked"), 0.0);
    let refused = MetricPolicy::parse("default-threshold-pct = -1\n").unwrap_err();
    assert_eq!(refused, "default-threshold-pct = -1: must be a finite number ≥ 0");
    assert!(MetricPolicy::parse("default-threshold-pct = 5\n[metric.x]\ndirection = \"up\"\n").is_err());
    assert!(MetricPolicy::parse("default-threshold-pct = 5\ntypo = 1\n").unwrap_err().contains("typo"));
}

/// A report that holds a case twice cannot be read by any command that gates.
#[test]
fn a_report_with_a_case_twice_is_refused() {
    let mut twice = hand_made();
    let mut again = twice.cases[0].clone();
    (again.status, twice.cases[0].status) = (Status::Passed, Status::Failed);
    twice.cases.push(again);
    let error = Report::parse(&twice.to_json()).unwrap_err();
    insta::assert_snapshot!(error, @"case `cpu/flags/value=1/accepted` is in the report twice (failed, then passed): a report holds each case once");
}

/// Fewer GPUs or another arch fail the gate on the `gpus` row alone; more GPUs of the
/// same arch, or another driver, are only listed.
#[test]
fn only_a_lost_gpu_or_another_arch_fails_the_gate() {
    let base = hand_made();
    let gate_fails = |change: &dyn Fn(&mut Report)| {
        let mut new = hand_made();
        change(&mut new);
        let c = compare(&base, &new, &Gate::default());
        c.environment.iter().filter(|e| e.fails_gate).map(|e| e.field.clone()).collect::<Vec<_>>()
    };
    let second = |r: &mut Report| {
        let mut gpu = r.environment.gpus[0].clone();
        gpu.index = 1;
        r.environment.gpus.push(gpu);
    };
    assert_eq!(gate_fails(&|r| second(r)), Vec::<String>::new(), "a GPU gained");
    assert_eq!(gate_fails(&|r| r.environment.gpus[0].name = "NVIDIA H100".into()), Vec::<String>::new(), "same arch");
    assert_eq!(gate_fails(&|r| r.environment.driver_version = Some("13.1".into())), Vec::<String>::new());
    let lost_and_new_driver = |r: &mut Report| {
        r.environment.gpus.clear();
        r.environment.driver_version = None;
    };
    assert_eq!(gate_fails(&lost_and_new_driver), ["gpus"]);
    let mut two = hand_made();
    second(&mut two);
    let one_of_two = compare(&two, &hand_made(), &Gate::default());
    assert!(one_of_two.environment.iter().any(|e| e.field == "gpus" && e.fails_gate), "a GPU lost of two");
}

/// The verdict names exactly what fails the gate, nothing that does not.
#[test]
fn the_verdict_is_exactly_what_fails() {
    let mut regressed = hand_made();
    regressed.cases.iter_mut().find(|c| c.status == Status::Passed).unwrap().status = Status::Failed;
    let text = compare(&hand_made(), &regressed, &Gate::default()).to_markdown();
    assert_eq!(text.lines().nth(2).unwrap(), "Verdict: **fails the gate**: 1 regression.");
}
