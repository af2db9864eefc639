//! The graph that stream capture constructs from a sequence of stream operations, as a
//! model: each stream carries a set of tail nodes; a launch depends on its stream's tails;
//! recording an event snapshots them; waiting on an event adds them to the waiter's tails.
//! Nodes are numbered in the order the operations ran, so the order is deterministic and
//! can be held against what the driver built.

use std::collections::{BTreeMap, BTreeSet};

use crate::errors::CaptureError;

/// One operation issued while stream 0 (the origin) was capturing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaptureOp {
    Launch { stream: u32, label: String },
    Record { stream: u32, event: String },
    Wait { stream: u32, event: String },
}

/// Nodes in creation order and edges `(from, to)` as node indices, sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CapturedShape {
    pub nodes: Vec<String>,
    pub edges: Vec<(usize, usize)>,
}

pub fn construct(ops: &[CaptureOp]) -> Result<CapturedShape, CaptureError> {
    let mut shape = CapturedShape::default();
    let mut tails: BTreeMap<u32, BTreeSet<usize>> = BTreeMap::from([(0, BTreeSet::new())]);
    let mut events: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
    for (op, item) in ops.iter().enumerate() {
        match item {
            CaptureOp::Launch { stream, label } => {
                let deps = tails.get_mut(stream).ok_or(CaptureError::StreamNotCaptured { op, stream: *stream })?;
                let node = shape.nodes.len();
                shape.nodes.push(label.clone());
                shape.edges.extend(deps.iter().map(|&d| (d, node)));
                *deps = BTreeSet::from([node]);
            }
            CaptureOp::Record { stream, event } => {
                let deps = tails.get(stream).ok_or(CaptureError::StreamNotCaptured { op, stream: *stream })?;
                events.insert(event, deps.clone());
            }
            CaptureOp::Wait { stream, event } => {
                let deps = events.get(event.as_str()).ok_or_else(|| CaptureError::EventNotRecorded {
                    op,
                    stream: *stream,
                    event: event.clone(),
                })?;
                tails.entry(*stream).or_default().extend(deps);
            }
        }
    }
    check_joined(&shape, &tails)?;
    shape.edges.sort_unstable();
    Ok(shape)
}

/// Every forked stream's last work must be an ancestor of (or be) the origin's tails.
fn check_joined(shape: &CapturedShape, tails: &BTreeMap<u32, BTreeSet<usize>>) -> Result<(), CaptureError> {
    let mut reached: BTreeSet<usize> = tails[&0].clone();
    let mut frontier: Vec<usize> = reached.iter().copied().collect();
    while let Some(node) = frontier.pop() {
        for &(from, _) in shape.edges.iter().filter(|(_, to)| *to == node) {
            if reached.insert(from) {
                frontier.push(from);
            }
        }
    }
    match tails.iter().find(|(_, t)| !t.is_subset(&reached)) {
        Some((&stream, _)) => Err(CaptureError::Unjoined { stream }),
        None => Ok(()),
    }
}
