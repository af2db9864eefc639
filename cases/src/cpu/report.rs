//! `cpu/report/`: the report model survives JSON, and claims are never over-stated.

use gnomon_reports::{CaseId, CaseRecord, Environment, Report, Run, Status, Subject};

use crate::{accepted, ensure, Case};

const CLAIM: &str = "report-round-trip";

fn record(id: &str, status: Status, claim: &str) -> CaseRecord {
    let mut r = Case::new(id, "unused", |_| Ok(())).record(status, Some(format!("{status} on purpose")));
    r.claims = vec![claim.into()];
    r.metrics.insert("restore".into(), gnomon_reports::Metric::new(1.5, "s"));
    r
}

fn sample_report() -> Report {
    let cases = Status::ALL.iter().map(|&s| record(&format!("mock/{s}"), s, "everything")).collect();
    Report::new(Run::default(), Subject::default(), Environment::default(), cases)
}

pub fn cases() -> Vec<Case> {
    vec![
        Case::new("cpu/report/json-round-trip", CLAIM, |_| {
            let report = sample_report();
            let back = accepted(Report::from_json(&report.to_json()), "reading the report back")?;
            ensure(back == report, || "report read back differs".into())
        }),
        Case::new("cpu/report/blocked-case-leaves-claim-not-established", CLAIM, |_| {
            let cases = vec![
                record("replay/a", Status::Passed, "native-replay"),
                record("replay/b", Status::Blocked, "native-replay"),
            ];
            let report = Report::new(Run::default(), Subject::default(), Environment::default(), cases);
            let verdict = &report.claims[0];
            let names_blocked =
                verdict.not_passed.iter().any(|s| s.case == CaseId::new("replay/b") && s.status == Status::Blocked);
            ensure(!verdict.established && names_blocked, || format!("verdict {verdict:?}"))
        }),
    ]
}
