//! `gnomon merge`: partial reports of one run, made on several runners, joined into one.

use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;

use crate::{CaseId, LeftOut, Report, Run};

#[derive(Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum MergeError {
    #[error("no reports to merge")]
    Empty,
    #[error("case `{case}` is in both {first} and {second}")]
    Overlap { case: CaseId, first: String, second: String },
    #[error("partitions disagree on their count: {0:?}")]
    PartitionCount(Vec<String>),
    #[error("partitions missing: {0:?}")]
    MissingPartitions(Vec<String>),
    #[error("{} cases of the catalogue are in no report: {}", .0.len(), .0.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", "))]
    MissingCases(Vec<CaseId>),
    #[error("parts disagree on {field}: `{first}` in {first_run}, `{other}` in {other_run}")]
    Mismatch { field: &'static str, first: String, first_run: String, other: String, other_run: String },
}

/// Joins `parts`; every case of `expected` must be in exactly one part.
pub fn merge(parts: &[Report], expected: &[CaseId]) -> Result<Report, MergeError> {
    let first = parts.first().ok_or(MergeError::Empty)?;
    check_partitions(parts)?;
    check_same_build_and_machine(parts)?;
    let mut owner: BTreeMap<&CaseId, &str> = BTreeMap::new();
    for part in parts {
        for case in &part.cases {
            if let Some(first) = owner.insert(&case.id, &part.run.id) {
                return Err(MergeError::Overlap {
                    case: case.id.clone(),
                    first: first.into(),
                    second: part.run.id.clone(),
                });
            }
        }
    }
    let missing: Vec<CaseId> = expected.iter().filter(|id| !owner.contains_key(id)).cloned().collect();
    if !missing.is_empty() {
        return Err(MergeError::MissingCases(missing));
    }
    // What one partition left out another ran: the whole run left out what no part ran.
    let left_out: BTreeMap<&CaseId, &LeftOut> =
        parts.iter().flat_map(|p| &p.run.left_out).filter(|c| !owner.contains_key(&c.id)).map(|c| (&c.id, c)).collect();
    let left_out = left_out.into_values().cloned().collect();
    let run = Run {
        id: parts.iter().map(|p| p.run.id.as_str()).collect::<Vec<_>>().join("+"),
        left_out,
        started_at: parts.iter().map(|p| p.run.started_at.clone()).min().unwrap_or_default(),
        duration_s: parts.iter().map(|p| p.run.duration_s).fold(0.0, f64::max),
        partition: None,
        complete: parts.iter().all(|p| p.run.complete),
        ..first.run.clone()
    };
    let cases = parts.iter().flat_map(|p| p.cases.iter().cloned()).collect();
    // Partitions run on several runners of one kind: every host is named, not the first.
    let hosts: BTreeSet<&str> = parts.iter().map(|p| p.environment.host.as_str()).collect();
    let environment =
        crate::Environment { host: hosts.into_iter().collect::<Vec<_>>().join(", "), ..first.environment.clone() };
    Ok(Report::new(run, first.subject.clone(), environment, cases))
}

/// Parts of one run come from one build on one kind of machine with one selection: every
/// field that makes results comparable must agree (host names may differ).
fn check_same_build_and_machine(parts: &[Report]) -> Result<(), MergeError> {
    let facts = |r: &Report| {
        let e = &r.environment;
        let gpus = e.gpus.iter().map(crate::Gpu::label).collect::<Vec<_>>().join(", ");
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
        [
            ("report schema version", r.schema_version.to_string()),
            ("harness version", e.harness_version.clone()),
            ("harness commit", e.harness_commit.clone()),
            ("subject name", r.subject.name.clone()),
            ("subject version", r.subject.version.clone()),
            ("subject commit", r.subject.commit.clone()),
            ("GPUs", gpus),
            ("why no GPU", shown(&e.gpu_unavailable)),
            ("driver release", shown(&e.driver_release)),
            ("driver version", shown(&e.driver_version)),
            ("NVRTC", shown(&e.nvrtc_version)),
            ("transparent huge pages", shown(&e.transparent_huge_pages)),
            ("profile", r.run.profile.clone()),
            ("filters", r.run.filters.join(" ")),
        ]
    };
    let first = &parts[0];
    for other in &parts[1..] {
        for ((field, a), (_, b)) in facts(first).into_iter().zip(facts(other)) {
            if a != b {
                let (first_run, other_run) = (first.run.id.clone(), other.run.id.clone());
                return Err(MergeError::Mismatch { field, first: a, first_run, other: b, other_run });
            }
        }
    }
    Ok(())
}

/// Partitioned parts must share N and cover 1..=N.
fn check_partitions(parts: &[Report]) -> Result<(), MergeError> {
    let specs: Vec<crate::Partition> = parts.iter().filter_map(|p| p.run.partition.as_deref()?.parse().ok()).collect();
    let Some(count) = specs.first().map(|p| p.count) else { return Ok(()) };
    if specs.iter().any(|p| p.count != count) {
        return Err(MergeError::PartitionCount(specs.iter().map(|p| p.to_string()).collect()));
    }
    let present: BTreeSet<u32> = specs.iter().map(|p| p.index).collect();
    let missing: Vec<String> =
        (1..=count).filter(|k| !present.contains(k)).map(|k| format!("hash:{k}/{count}")).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(MergeError::MissingPartitions(missing))
    }
}
