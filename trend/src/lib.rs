//! `gnomon trend`: several reports of the same catalogue, oldest first, as one
//! self-contained HTML page (inline CSS and SVG, nothing fetched when it is viewed).
//!
//! - A status grid of cases × runs. Cases whose status changed across the runs come first;
//!   a run that fails a case the previous run passed is marked as a regression, and a
//!   flaky result stands out, so a case that flakes twice a week is seen at a glance.
//! - One plot per metric whose value moved across the runs, a line per case, drawn with
//!   plotters' SVG backend. Metrics that never moved are listed, not plotted.

mod grid;
mod plots;

use std::fmt::Write;

use gnomon_reports::Report;

/// One report on the page and the label its column carries.
pub struct RunColumn {
    pub label: String,
    pub report: Report,
}

impl RunColumn {
    /// Labelled by start time and harness commit, the two things a nightly reader scans for.
    pub fn new(report: Report) -> Self {
        let label = format!("{} {}", report.run.started_at, report.environment.harness_commit);
        Self { label, report }
    }
}

/// The page, with runs in the order of their start times.
pub fn page(mut runs: Vec<RunColumn>) -> String {
    runs.sort_by(|a, b| a.report.run.started_at.cmp(&b.report.run.started_at));
    let mut out = String::new();
    let _ = write!(out, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = write!(out, "<title>Gnomon trend: {} runs</title><style>{}</style></head><body>", runs.len(), CSS);
    let _ = write!(out, "<h1>Gnomon trend</h1>{}", runs_table(&runs));
    out.push_str(&grid::status_grid(&runs));
    out.push_str(&plots::metric_plots(&runs));
    out.push_str("</body></html>\n");
    out
}

fn runs_table(runs: &[RunColumn]) -> String {
    let mut out = String::from("<table class=\"runs\"><tr><th>#</th><th>started</th><th>commit</th><th>machine</th>");
    out.push_str("<th>profile</th><th>totals</th></tr>");
    for (i, run) in runs.iter().enumerate() {
        let r = &run.report;
        let gpus: Vec<_> = r.environment.gpus.iter().map(gnomon_reports::Gpu::label).collect();
        let machine = if gpus.is_empty() { "no GPU".to_owned() } else { gpus.join(", ") };
        let totals: Vec<_> = r.totals.iter().map(|(s, n)| format!("{n} {s}")).collect();
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            i + 1,
            escape(&r.run.started_at),
            escape(&r.environment.harness_commit),
            escape(&machine),
            escape(&r.run.profile),
            escape(&totals.join(", "))
        );
    }
    out.push_str("</table>");
    out
}

/// Text made safe for HTML element content and attribute values.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}\
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}\
table.grid td.s{width:1.6em;text-align:center;font-weight:bold;padding:0}\
.passed{background:#cdeccd}.failed,.crashed,.timed-out,.unexpected-pass{background:#f2b8b5}\
.blocked{background:#d6d0f0}.skipped{background:#e6e6e6;color:#777}.expected-failure{background:#f7dfb0}\
.flaky{background:#ffc46b}.absent{background:#fff;color:#bbb}.regression{outline:3px solid #b00020;outline-offset:-3px}\
.legend span{display:inline-block;padding:1px 6px;margin-right:4px;border:1px solid #ccc}\
.plots{display:flex;flex-wrap:wrap;gap:12px}.plots figure{margin:0}\
figcaption{font-size:12px;color:#555}";
