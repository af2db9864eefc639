//! Cases that share a status and a reason, told once. A run without a GPU skips dozens of
//! cases for one reason; a reader needs that reason once, with how many cases and where.

use std::collections::BTreeMap;

use crate::{
    text::{md_code, printable},
    CaseId, CaseRecord, Status,
};

/// At most this many cases of a group are named; a larger group is counted by family.
const NAMED: usize = 3;

/// Cases with one status and one reason, in the order they were given.
#[derive(Debug)]
pub struct Group<'a> {
    pub status: Status,
    pub reason: &'a str,
    pub cases: Vec<&'a CaseId>,
}

impl Group<'_> {
    /// "`a`, `b` skipped", or "43 cases skipped (24 under gpu/, 19 under replay/)".
    pub fn who(&self) -> String {
        if self.cases.len() <= NAMED {
            let names: Vec<_> = self.cases.iter().map(|c| md_code(c.as_str())).collect();
            return format!("{} {}", names.join(", "), self.status);
        }
        format!("{} cases {} ({})", self.cases.len(), self.status, families(self.cases.iter().copied()))
    }

    /// [`Group::who`] followed by the shared reason.
    pub fn with_reason(&self) -> String {
        format!("{} ({})", self.who(), printable(self.reason))
    }

    /// Whether the group is large enough that its cases are counted, not named.
    pub fn is_counted(&self) -> bool {
        self.cases.len() > NAMED
    }
}

/// Groups `(case, status, reason)` by status and reason, keeping the first-seen order.
pub fn group<'a>(items: impl IntoIterator<Item = (&'a CaseId, Status, Option<&'a str>)>) -> Vec<Group<'a>> {
    let mut groups: Vec<Group<'a>> = Vec::new();
    for (case, status, reason) in items {
        let reason = reason.unwrap_or("no reason given");
        match groups.iter_mut().find(|g| g.status == status && g.reason == reason) {
            Some(g) => g.cases.push(case),
            None => groups.push(Group { status, reason, cases: vec![case] }),
        }
    }
    groups
}

/// The skipped and blocked cases of a run, grouped.
pub fn not_run(cases: &[CaseRecord]) -> Vec<Group<'_>> {
    group(
        cases
            .iter()
            .filter(|c| matches!(c.status, Status::Skipped | Status::Blocked))
            .map(|c| (&c.id, c.status, c.reason.as_deref())),
    )
}

/// "105 cases (60 under gpu/, 45 under replay/)": what a selection left out, counted by
/// family; `None` when it left out nothing.
pub fn left_out(cases: &[crate::LeftOut]) -> Option<String> {
    (!cases.is_empty()).then(|| format!("{} cases ({})", cases.len(), families(cases.iter().map(|c| &c.id))))
}

/// "24 under gpu/, 19 under replay/".
fn families<'a>(cases: impl Iterator<Item = &'a CaseId>) -> String {
    let mut by_family: BTreeMap<&str, usize> = BTreeMap::new();
    for case in cases {
        *by_family.entry(case.family()).or_default() += 1;
    }
    by_family.iter().map(|(f, n)| format!("{n} under {f}/")).collect::<Vec<_>>().join(", ")
}
