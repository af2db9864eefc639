//! `gnomon summary`: the report as one paragraph, in the manner of a pull request's
//! validation paragraph. It states only what the report holds.

use std::collections::BTreeMap;

use crate::{
    text::{self, md_code},
    Report, Status,
};

pub fn summary(r: &Report) -> String {
    let mut s = vec![where_it_ran(r)];
    s.push(format!("Gnomon {} ran {} cases: {}.", r.environment.harness_version, r.cases.len(), totals(r)));
    s.push(families(r));
    s.extend(selection(r));
    s.push(blocked(r));
    s.extend(failing(r));
    s.push(claims(r));
    if !r.environment.gpu_processes.is_empty() {
        s.push(format!(
            "The GPU was shared with {} other process(es) ({}), so a verdict here may differ from one reached alone.",
            r.environment.gpu_processes.len(),
            crate::shared_with(&r.environment.gpu_processes)
        ));
    }
    if !r.run.complete {
        s.push("The run did not complete; this covers only the cases it recorded.".into());
    }
    // One paragraph: whatever a name holds, it stays one line with no control character.
    text::printable(&s.join(" ")).into_owned()
}

fn where_it_ran(r: &Report) -> String {
    let device = match (r.environment.gpus.as_slice(), &r.environment.gpu_unavailable) {
        ([], Some(reason)) => format!("a host without a usable GPU ({reason})"),
        ([], None) => "a host without a GPU".into(),
        (gpus, _) => {
            let names: Vec<_> = gpus.iter().map(crate::Gpu::label).collect();
            let driver = match (&r.environment.driver_release, &r.environment.driver_version) {
                (Some(release), Some(api)) => format!("{release} (CUDA {api})"),
                (None, Some(api)) => format!("CUDA {api}"),
                (release, None) => release.clone().unwrap_or_else(|| "unknown".into()),
            };
            let nvrtc = r.environment.nvrtc_version.as_deref().unwrap_or("unknown");
            format!("{} with driver {driver} and NVRTC {nvrtc}", names.join(" and "))
        }
    };
    format!("On {} commit {} ({}), on {device}:", r.subject.name, r.subject.commit, r.environment.os)
}

fn totals(r: &Report) -> String {
    r.totals.iter().map(|(status, n)| format!("{n} {status}")).collect::<Vec<_>>().join(", ")
}

fn families(r: &Report) -> String {
    let mut by_family: BTreeMap<&str, BTreeMap<Status, usize>> = BTreeMap::new();
    for c in &r.cases {
        *by_family.entry(c.id.family()).or_default().entry(c.status).or_default() += 1;
    }
    let parts: Vec<String> = by_family
        .iter()
        .map(|(family, counts)| {
            let total: usize = counts.values().sum();
            let passed = counts.get(&Status::Passed).copied().unwrap_or(0);
            let others: Vec<String> =
                counts.iter().filter(|(s, _)| **s != Status::Passed).map(|(s, n)| format!("{n} {s}")).collect();
            let rest = if others.is_empty() { String::new() } else { format!(" ({})", others.join(", ")) };
            format!("{family}/ {passed} of {total} passed{rest}")
        })
        .collect();
    format!("By family: {}.", parts.join("; "))
}

/// The filters and partition that narrowed the run, and what they left out.
fn selection(r: &Report) -> Option<String> {
    let mut how: Vec<String> = r.run.filters.iter().map(|f| md_code(f)).collect();
    how.extend(r.run.partition.iter().map(|p| format!("partition {}", md_code(p))));
    let left_out = crate::left_out(&r.run.left_out);
    match (how.is_empty(), left_out) {
        (true, None) => None,
        (false, None) => Some(format!("It ran what the selection {} chose.", how.join(" "))),
        (true, Some(left)) => Some(format!("Its selection left out {left}.")),
        (false, Some(left)) => Some(format!("The selection {} left out {left}.", how.join(" "))),
    }
}

fn blocked(r: &Report) -> String {
    let not_run: Vec<String> = crate::not_run(&r.cases).iter().map(|g| g.with_reason()).collect();
    match not_run.len() {
        0 => "No case was blocked or skipped.".into(),
        _ => format!("Not run to a result: {}.", not_run.join("; ")),
    }
}

fn failing(r: &Report) -> Option<String> {
    let failing: Vec<String> = r
        .cases
        .iter()
        .filter(|c| c.status.fails_run() || matches!(c.status, Status::ExpectedFailure | Status::Flaky))
        .map(|c| {
            format!("{} {} ({})", md_code(c.id.as_str()), c.status, c.reason.as_deref().unwrap_or("no reason given"))
        })
        .collect();
    (!failing.is_empty()).then(|| format!("Did not pass cleanly: {}.", failing.join("; ")))
}

fn claims(r: &Report) -> String {
    let (established, open): (Vec<_>, Vec<_>) = r.claims.iter().partition(|c| c.established);
    let names = |v: &[&crate::ClaimVerdict]| v.iter().map(|c| c.claim.as_str()).collect::<Vec<_>>().join(", ");
    let mut out =
        format!("Claims established: {}.", if established.is_empty() { "none".into() } else { names(&established) });
    if !open.is_empty() {
        let why: Vec<String> = open
            .iter()
            .map(|c| {
                let groups = crate::group(c.not_passed.iter().map(|s| (&s.case, s.status, s.reason.as_deref())));
                let mut who: Vec<_> = groups.iter().map(|g| g.who()).collect();
                who.extend(match c.left_out.len() {
                    0 => None,
                    1 => Some(format!("{} left out by the selection", md_code(c.left_out[0].as_str()))),
                    n => Some(format!("{n} cases left out by the selection")),
                });
                format!("{} ({})", c.claim, who.join("; "))
            })
            .collect();
        out.push_str(&format!(" Not established, for the reasons above: {}.", why.join("; ")));
    }
    out
}
