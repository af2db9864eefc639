//! Every renderer held against a snapshot of one hand-made report that has a case of
//! every status and a claim left not established.

mod common;

use common::hand_made;
use gnomon_reports::{render, summary, Report};

#[test]
fn json() {
    insta::assert_snapshot!(hand_made().to_json());
}

#[test]
fn markdown() {
    insta::assert_snapshot!(render::markdown(&hand_made()));
}

#[test]
fn junit() {
    insta::assert_snapshot!(render::junit(&hand_made()));
}

#[test]
fn json_round_trip() {
    let report = hand_made();
    assert_eq!(Report::from_json(&report.to_json()).unwrap(), report);
}

#[test]
fn summary_paragraph() {
    insta::assert_snapshot!(summary(&hand_made()));
}

/// Names with a pipe, a backtick, a newline or an escape sequence keep every Markdown
/// table row one row of four cells, and the summary one line without control characters.
#[test]
fn hostile_names_keep_tables_and_paragraphs_whole() {
    let mut r = common::hand_made();
    r.cases[0].id = gnomon_reports::CaseId::new("qualify/p/template=a|b`c\n\u{1b}[31m/outputs");
    r.cases[0].reason = Some("failed | at\nbyte 3".into());
    r.environment.gpus[0].name = "H200\u{1b}[2K".into();
    let report = gnomon_reports::Report::new(r.run.clone(), r.subject.clone(), r.environment.clone(), r.cases);
    let page = gnomon_reports::render::markdown(&report);
    assert!(!page.contains('\u{1b}'), "{page}");
    let rows: Vec<&str> = page.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(rows.len(), report.cases.len() + 1);
    for row in rows {
        assert_eq!(row.replace("\\|", "").matches('|').count(), 5, "{row}");
    }
    let paragraph = gnomon_reports::summary(&report);
    assert!(!paragraph.contains('\n') && !paragraph.contains('\u{1b}'), "{paragraph}");
}
