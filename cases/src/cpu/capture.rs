//! `cpu/capture/`: a recorded capture description yields a deterministic node and edge order.

use gnomon_fixtures::capture::fork_join;
use gnomon_format::{
    capture_order::{construct, CaptureOp},
    errors::CaptureError,
};

use crate::{accepted, ensure, refused, Case};

const CLAIM: &str = "capture-order";

pub fn cases() -> Vec<Case> {
    vec![
        Case::new("cpu/capture/fork-join-order", CLAIM, |_| {
            let shape = accepted(construct(&fork_join()), "constructing the fork/join capture")?;
            let nodes = ["head", "left-a", "right", "left-b", "tail"];
            let edges = [(0, 1), (0, 2), (0, 4), (1, 3), (2, 4), (3, 4)];
            ensure(shape.nodes == nodes && shape.edges == edges, || format!("constructed {shape:?}"))
        }),
        Case::new("cpu/capture/deterministic", CLAIM, |_| {
            let first = accepted(construct(&fork_join()), "first construction")?;
            let again = accepted(construct(&fork_join()), "second construction")?;
            ensure(first == again, || format!("{first:?} then {again:?}"))
        }),
        Case::new("cpu/capture/unjoined-stream-refused", CLAIM, |_| {
            let ops: Vec<_> =
                fork_join().into_iter().filter(|op| !matches!(op, CaptureOp::Wait { stream: 0, .. })).collect();
            refused(construct(&ops), |e| matches!(e, CaptureError::Unjoined { .. })).map(drop)
        }),
        Case::new("cpu/capture/first-unjoined-stream-named", CLAIM, |_| {
            // Stream 1 forks and is never joined; stream 2 hangs off stream 1. The search for
            // what reaches the origin's tail must follow edges into each node, or stream 1
            // looks joined through its edge to stream 2.
            let launch = |stream, label: &str| CaptureOp::Launch { stream, label: label.into() };
            let record = |stream, event: &str| CaptureOp::Record { stream, event: event.into() };
            let wait = |stream, event: &str| CaptureOp::Wait { stream, event: event.into() };
            let ops = [
                launch(0, "a"),
                record(0, "fork"),
                wait(1, "fork"),
                launch(1, "u"),
                record(1, "e"),
                wait(2, "e"),
                launch(2, "v"),
                launch(0, "t"),
            ];
            refused(construct(&ops), |e| *e == CaptureError::Unjoined { stream: 1 }).map(drop)
        }),
        Case::new("cpu/capture/stream-outside-capture-refused", CLAIM, |_| {
            let ops = [CaptureOp::Launch { stream: 3, label: "stray".into() }];
            refused(construct(&ops), |e| *e == CaptureError::StreamNotCaptured { op: 0, stream: 3 }).map(drop)
        }),
        Case::new("cpu/capture/wait-on-unrecorded-event-refused", CLAIM, |_| {
            let ops = [CaptureOp::Wait { stream: 1, event: "never".into() }];
            refused(construct(&ops), |e| matches!(e, CaptureError::EventNotRecorded { .. })).map(drop)
        }),
    ]
}
