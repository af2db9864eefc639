use std::collections::BTreeMap;

use crate::{CaseId, CaseRecord, ClaimVerdict, LeftOut, Shortfall, Status};

/// A claim is established only when every case that declares it ran and passed: a case
/// the selection left out counts against it as a case that did not pass. Flaky cases do
/// not establish a claim: a result that needed a retry is not one to build a release on.
pub fn verdicts(cases: &[CaseRecord], left_out: &[LeftOut]) -> Vec<ClaimVerdict> {
    let mut by_claim: BTreeMap<&str, (Vec<&CaseRecord>, Vec<&CaseId>)> = BTreeMap::new();
    for case in cases {
        for claim in &case.claims {
            by_claim.entry(claim).or_default().0.push(case);
        }
    }
    for case in left_out {
        for claim in &case.claims {
            by_claim.entry(claim).or_default().1.push(&case.id);
        }
    }
    by_claim
        .into_iter()
        .map(|(claim, (cases, left_out))| {
            let not_passed: Vec<Shortfall> = cases
                .iter()
                .filter(|c| c.status != Status::Passed)
                .map(|c| Shortfall { case: c.id.clone(), status: c.status, reason: c.reason.clone() })
                .collect();
            ClaimVerdict {
                claim: claim.to_owned(),
                established: not_passed.is_empty() && left_out.is_empty(),
                cases: cases.len() as u32,
                not_passed,
                left_out: left_out.into_iter().cloned().collect(),
            }
        })
        .collect()
}
