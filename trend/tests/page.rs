//! The trend page of the committed H200 baselines, and of two hand-made runs whose
//! differences the page must show.

use std::{collections::BTreeMap, path::Path};

use gnomon_reports::{CaseId, CaseRecord, Metric, Report, Run, Status, Subject};
use gnomon_trend::{page, RunColumn};

fn baseline(name: &str) -> Report {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../baselines").join(name).join("report.json");
    Report::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn committed_baselines_render_as_one_self_contained_page() {
    let names = ["h200-sm90-580.159.04", "h200-sm90-580.159.04-faults", "h200x2-sm90-580.159.04"];
    let reports: Vec<Report> = names.iter().map(|n| baseline(n)).collect();
    let cases: std::collections::BTreeSet<&CaseId> =
        reports.iter().flat_map(|r| r.cases.iter().map(|c| &c.id)).collect();
    let html = page(reports.iter().cloned().map(RunColumn::new).collect());

    assert!(html.starts_with("<!doctype html>") && html.ends_with("</html>\n"));
    // One grid row per case of any run, one cell per run.
    assert_eq!(html.matches("<tr><td><code>").count(), cases.len());
    assert_eq!(html.matches("<td class=\"s ").count(), cases.len() * names.len());
    // Metrics that moved are plotted inline; nothing is fetched when the page is viewed.
    assert!(html.contains("<svg") && html.contains("restore-upload-s"));
    for fetch in ["<script", "<link", "src=\"http", "href=\"http", "url("] {
        assert!(!html.contains(fetch), "the page fetches something: {fetch}");
    }
}

fn record(id: &str, status: Status, seconds: f64) -> CaseRecord {
    CaseRecord {
        id: CaseId::new(id),
        family: id.split('/').next().unwrap().into(),
        parameters: BTreeMap::new(),
        status,
        reason: (status != Status::Passed).then(|| format!("{status} on purpose")),
        attempts: 1,
        duration_s: 0.1,
        metrics: BTreeMap::from([("restore-total-s".to_owned(), Metric::new(seconds, "s"))]),
        claims: vec!["native-replay".into()],
        stderr: None,
    }
}

fn night(started_at: &str, cases: Vec<CaseRecord>) -> RunColumn {
    let run = Run { id: started_at.into(), started_at: started_at.into(), complete: true, ..Run::default() };
    RunColumn::new(Report::new(run, Subject::default(), Default::default(), cases))
}

#[test]
fn regressions_and_flakes_are_marked_and_changed_cases_come_first() {
    let steady = "cpu/a/steady";
    let (regressed, flaked) = ("replay/b/regressed", "replay/c/flaked");
    // Given out of order: the page orders runs by start time.
    let second = night(
        "2026-11-30T02:00:00Z",
        vec![
            record(steady, Status::Passed, 1.0),
            record(regressed, Status::Failed, 2.0),
            record(flaked, Status::Flaky, 1.0),
        ],
    );
    let first = night(
        "2026-11-29T02:00:00Z",
        vec![
            record(steady, Status::Passed, 1.0),
            record(regressed, Status::Passed, 1.0),
            record(flaked, Status::Passed, 1.0),
        ],
    );
    let html = page(vec![second, first]);

    assert_eq!(html.matches("regression\"").count(), 1, "one failing result after a passing one");
    assert!(html.contains("2 changed status across the runs, 1 were flaky at least once, 1 regressions"));
    let position = |id: &str| html.find(&format!("<tr><td><code>{id}</code>")).unwrap();
    assert!(position(regressed) < position(steady) && position(flaked) < position(steady));
    assert!(html.find("2026-11-29T02:00:00Z").unwrap() < html.find("2026-11-30T02:00:00Z").unwrap());
    // restore-total-s moved for one case: plotted, not listed as unchanged.
    assert!(html.contains("1 metrics moved across the runs") && html.contains("<svg"));
}

/// Any finite value plots: extremes that would make an axis span infinite are drawn at
/// the axis limit, and the page is written (it used to never end).
#[test]
fn extreme_finite_values_are_drawn_within_a_finite_axis() {
    for (a, b) in [(1.7e308, 1.0), (-1.7e308, 1.7e308), (f64::MIN_POSITIVE, 0.0), (5e-324, 1e-323)] {
        let one = night("2026-11-29T02:00:00Z", vec![record("replay/x", Status::Passed, a)]);
        let two = night("2026-11-30T02:00:00Z", vec![record("replay/x", Status::Passed, b)]);
        let html = page(vec![one, two]);
        assert!(html.contains("1 metrics moved across the runs") && html.contains("<svg"), "{a} {b}");
    }
}

/// Every text the page embeds is escaped: a case id, a reason and a metric's name that hold
/// markup are shown as text, never run.
#[test]
fn markup_in_a_report_is_shown_as_text() {
    let hostile = |started_at, seconds| {
        let mut r = record("replay/<script>alert(1)</script>", Status::Failed, 1.0);
        r.reason = Some("<script>alert(2)</script>".into());
        r.metrics = BTreeMap::from([("<script>alert(3)</script>".to_owned(), Metric::new(seconds, "<b>s</b>"))]);
        night(started_at, vec![r])
    };
    let html = page(vec![hostile("2026-11-29T02:00:00Z", 1.0), hostile("2026-11-30T02:00:00Z", 2.0)]);
    assert!(html.contains("1 metrics moved across the runs"), "the metric is plotted");
    for markup in ["<script>alert(1)", "<script>alert(2)", "<script>alert(3)", "<b>s</b>"] {
        assert!(!html.contains(markup), "{markup} embedded as markup");
    }
    assert!(html.contains("&lt;script&gt;alert(3)&lt;/script&gt;"));
}
