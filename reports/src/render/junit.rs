use std::{collections::BTreeMap, time::Duration};

use quick_junit::{NonSuccessKind, Property, Report as JunitReport, TestCase, TestCaseStatus, TestSuite};

use crate::{CaseRecord, Report, Status};

/// JUnit XML with one test suite per family. Failures, crashes, time-outs and unexpected
/// passes are failures or errors; skipped, blocked and expected failures are skipped.
pub fn junit(r: &Report) -> String {
    let mut suites: BTreeMap<&str, TestSuite> = BTreeMap::new();
    for case in &r.cases {
        let suite = suites.entry(case.id.family()).or_insert_with(|| TestSuite::new(case.id.family()));
        suite.add_test_case(test_case(case));
    }
    let mut report = JunitReport::new(format!("gnomon {}", r.run.id));
    report.set_time(Duration::from_secs_f64(r.run.duration_s));
    for (_, mut suite) in suites {
        suite.add_property(Property::new("harness-commit", r.environment.harness_commit.as_str()));
        report.add_test_suite(suite);
    }
    report.to_string().expect("JUnit serialization into a string cannot fail")
}

fn test_case(case: &CaseRecord) -> TestCase {
    let mut status = match case.status {
        Status::Passed | Status::Flaky => TestCaseStatus::success(),
        Status::Failed | Status::UnexpectedPass => TestCaseStatus::non_success(NonSuccessKind::Failure),
        Status::Crashed | Status::TimedOut => TestCaseStatus::non_success(NonSuccessKind::Error),
        Status::Blocked | Status::Skipped | Status::ExpectedFailure => TestCaseStatus::skipped(),
    };
    if let Some(reason) = &case.reason {
        status.set_message(format!("{}: {reason}", case.status));
    }
    let mut test = TestCase::new(case.id.as_str(), status);
    test.set_classname(case.id.family());
    test.set_time(Duration::from_secs_f64(case.duration_s));
    if let Some(stderr) = &case.stderr {
        test.set_system_err(stderr.as_str());
    }
    test
}
