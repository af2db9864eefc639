use std::collections::BTreeMap;

use crate::{CaseRecord, ClaimVerdict, Shortfall, Status};

/// A claim is established only when every case that declares it passed. Flaky cases do
/// not establish a claim: a result that needed a retry is not one to build a release on.
pub fn verdicts(cases: &[CaseRecord]) -> Vec<ClaimVerdict> {
    let mut by_claim: BTreeMap<&str, Vec<&CaseRecord>> = BTreeMap::new();
    for case in cases {
        for claim in &case.claims {
            by_claim.entry(claim).or_default().push(case);
        }
    }
    by_claim
        .into_iter()
        .map(|(claim, cases)| {
            let not_passed: Vec<Shortfall> = cases
                .iter()
                .filter(|c| c.status != Status::Passed)
                .map(|c| Shortfall { case: c.id.clone(), status: c.status, reason: c.reason.clone() })
                .collect();
            ClaimVerdict {
                claim: claim.to_owned(),
                established: not_passed.is_empty(),
                cases: cases.len() as u32,
                not_passed,
            }
        })
        .collect()
}
