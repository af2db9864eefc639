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
