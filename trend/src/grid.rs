//! The status grid: a row per case, a column per run.

use std::{collections::BTreeMap, fmt::Write};

use gnomon_reports::{CaseId, CaseRecord, Status};

use crate::{escape, RunColumn};

/// The status of one case in each run; `None` where a run has no such case.
type Row<'a> = Vec<Option<&'a CaseRecord>>;

pub fn status_grid(runs: &[RunColumn]) -> String {
    let rows = rows(runs);
    let (changed, steady): (Vec<_>, Vec<_>) = rows.iter().partition(|(_, row)| changed(row));
    let flaky = rows.values().filter(|row| row.iter().flatten().any(|c| c.status == Status::Flaky)).count();
    let regressions: usize = rows.values().map(|row| (1..row.len()).filter(|&i| regression(row, i)).count()).sum();
    let mut out = format!(
        "<h2>Status by case and run</h2><p>{} cases; {} changed status across the runs, {} were flaky at least \
         once, {} regressions (a failing result after a passing one, outlined).</p>{}",
        rows.len(),
        changed.len(),
        flaky,
        regressions,
        legend()
    );
    let (always_passed, notable): (Vec<_>, Vec<_>) =
        steady.into_iter().partition(|(_, row)| row.iter().flatten().all(|c| c.status == Status::Passed));
    out.push_str(&table(changed.into_iter().chain(notable), runs.len()));
    let _ = write!(
        out,
        "<details><summary>{} cases passed in every run that had them</summary>{}</details>",
        always_passed.len(),
        table(always_passed.into_iter(), runs.len())
    );
    out
}

fn table<'a>(rows: impl Iterator<Item = (&'a &'a CaseId, &'a Row<'a>)>, runs: usize) -> String {
    let mut out = String::from("<table class=\"grid\"><tr><th>case</th>");
    for i in 1..=runs {
        let _ = write!(out, "<th>{i}</th>");
    }
    out.push_str("</tr>");
    for (id, row) in rows {
        let _ = write!(out, "<tr><td><code>{}</code></td>", escape(id.as_str()));
        for (i, cell) in row.iter().enumerate() {
            out.push_str(&cell_html(*cell, i + 1, regression(row, i)));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}

fn rows(runs: &[RunColumn]) -> BTreeMap<&CaseId, Row<'_>> {
    let mut rows: BTreeMap<&CaseId, Row<'_>> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        for case in &run.report.cases {
            rows.entry(&case.id).or_insert_with(|| vec![None; runs.len()])[i] = Some(case);
        }
    }
    rows
}

/// Whether the case had more than one status among the runs that ran it.
fn changed(row: &Row<'_>) -> bool {
    let mut statuses = row.iter().flatten().map(|c| c.status);
    statuses.next().is_some_and(|first| statuses.any(|s| s != first))
}

/// Whether run `i` fails a case that the run before it did not fail.
fn regression(row: &Row<'_>, i: usize) -> bool {
    let failing = |cell: &Option<&CaseRecord>| cell.is_some_and(|c| c.status.fails_run());
    i > 0 && failing(&row[i]) && row[i - 1].is_some_and(|c| !c.status.fails_run())
}

fn cell_html(cell: Option<&CaseRecord>, run: usize, regression: bool) -> String {
    let Some(case) = cell else {
        return format!("<td class=\"s absent\" title=\"run {run}: not in this run\">·</td>");
    };
    let status = case.status.as_str();
    let reason = case.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
    let class = if regression { format!("{status} regression") } else { status.to_owned() };
    format!("<td class=\"s {class}\" title=\"run {run}: {status}{}\">{}</td>", escape(&reason), symbol(case.status))
}

fn symbol(status: Status) -> &'static str {
    match status {
        Status::Passed => "✓",
        Status::Failed => "✗",
        Status::Crashed => "C",
        Status::TimedOut => "T",
        Status::Blocked => "B",
        Status::Skipped => "S",
        Status::ExpectedFailure => "x",
        Status::UnexpectedPass => "U",
        Status::Flaky => "~",
    }
}

fn legend() -> String {
    let items: Vec<_> =
        Status::ALL.iter().map(|s| format!("<span class=\"{0}\">{1} {0}</span>", s.as_str(), symbol(*s))).collect();
    format!("<p class=\"legend\">{}</p>", items.join(""))
}
