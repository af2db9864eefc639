//! `hash:K/N` parsing (inputs that must parse and must fail), the split's determinism and
//! coverage, and merging partial reports.

mod common;

use common::hand_made;
use gnomon_reports::{merge, CaseId, MergeError, Partition, Report};

#[test]
fn parses() {
    for (input, index, count) in [("hash:1/1", 1, 1), ("hash:2/3", 2, 3), ("hash:16/16", 16, 16)] {
        assert_eq!(input.parse::<Partition>().unwrap(), Partition { index, count }, "{input}");
        assert_eq!(Partition { index, count }.to_string(), input);
    }
}

#[test]
fn refuses() {
    for input in ["", "1/2", "hash:", "hash:1", "hash:0/2", "hash:3/2", "hash:1/0", "hash:a/2", "hash:1/b", "count:1/2"]
    {
        assert!(input.parse::<Partition>().is_err(), "{input} must be refused");
    }
}

#[test]
fn every_case_lands_in_exactly_one_partition() {
    let ids: Vec<CaseId> = (0..500).map(|i| CaseId::new(format!("cpu/generated/{i}"))).collect();
    for count in [1, 2, 3, 7] {
        for id in &ids {
            let owners = (1..=count).filter(|&index| Partition { index, count }.contains(id)).count();
            assert_eq!(owners, 1, "{id} with N={count}");
        }
    }
}

fn split(report: &Report) -> Vec<Report> {
    (1..=2)
        .map(|index| {
            let p = Partition { index, count: 2 };
            let mut part = report.clone();
            part.run.id = format!("part-{index}");
            part.run.partition = Some(p.to_string());
            part.cases.retain(|c| p.contains(&c.id));
            Report::new(part.run.clone(), part.subject.clone(), part.environment.clone(), part.cases)
        })
        .collect()
}

#[test]
fn merged_partitions_equal_the_whole() {
    let whole = hand_made();
    let ids: Vec<CaseId> = whole.cases.iter().map(|c| c.id.clone()).collect();
    let merged = merge(&split(&whole), &ids).unwrap();
    assert_eq!(merged.cases, whole.cases);
    assert_eq!(merged.claims, whole.claims);
    assert_eq!(merged.totals, whole.totals);
}

#[test]
fn merge_refuses_overlap_and_names_what_is_missing() {
    let whole = hand_made();
    let ids: Vec<CaseId> = whole.cases.iter().map(|c| c.id.clone()).collect();
    let parts = split(&whole);
    let overlap = merge(&[parts[0].clone(), parts[0].clone(), parts[1].clone()], &ids);
    assert!(matches!(overlap, Err(MergeError::Overlap { .. })), "{overlap:?}");
    assert_eq!(merge(&parts[..1], &ids).unwrap_err(), MergeError::MissingPartitions(vec!["hash:2/2".into()]));
    let mut unpartitioned = parts[0].clone();
    unpartitioned.run.partition = None;
    let missing: Vec<CaseId> = parts[1].cases.iter().map(|c| c.id.clone()).collect();
    assert_eq!(merge(&[unpartitioned], &ids).unwrap_err(), MergeError::MissingCases(missing));
}
