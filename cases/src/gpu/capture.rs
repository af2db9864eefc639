//! `gpu/capture/`: the graph the driver builds from a multi-stream fork/join capture has
//! the nodes and edges, in the order, that the capture-order model predicts.

use std::collections::BTreeMap;

use gnomon_format::{
    capture_order::{construct, CaptureOp},
    params::{slot_value, ParamBlob},
};

use gnomon_core::{
    cuda::{CudaError, Event, NodeKind, Stream},
    translate::param_slots,
};
use gnomon_fixtures::{capture::fork_join, kernels::ELEMENTWISE};

use super::Gpu;
use crate::{accepted, ensure, Case, Verdict};

pub fn cases() -> Vec<Case> {
    vec![Case::gpu("gpu/capture/fork-join-order", "capture-order", |ctx| {
        let gpu = Gpu::open()?;
        let module = gpu.module(ELEMENTWISE)?;
        let mark = gpu.function(&module, "mark")?;
        let ops = fork_join();
        let model = accepted(construct(&ops), "model the capture")?;
        let out = accepted(gpu.ctx.alloc(64 * 4), "allocate marks")?;
        let streams: Vec<Stream> =
            (0..3).map(|_| accepted(gpu.ctx.stream(), "create stream")).collect::<Result<_, _>>()?;
        let mut events: BTreeMap<&str, Event> = BTreeMap::new();
        let issue = |origin: &Stream| -> Result<(), CudaError> {
            let stream = |s: u32| if s == 0 { origin } else { &streams[s as usize] };
            let mut launched = 0i32;
            for op in &ops {
                match op {
                    CaptureOp::Launch { stream: s, .. } => {
                        let blob = ParamBlob::new(mark.layout())
                            .ptr(0, out.ptr())
                            .and_then(|b| b.set(1, &launched.to_le_bytes()));
                        let blob = blob.and_then(|b| b.set(2, &(launched + 1).to_le_bytes()));
                        let params = blob.map_err(|e| CudaError::Unsupported(e.to_string()))?.into_bytes();
                        stream(*s).launch(&mark, [1, 1, 1], [32, 1, 1], 0, &params)?;
                        launched += 1;
                    }
                    CaptureOp::Record { stream: s, event } => {
                        let e = match events.get(event.as_str()) {
                            Some(e) => e,
                            None => events.entry(event).or_insert(gpu.ctx.event()?),
                        };
                        stream(*s).record(e)?;
                    }
                    CaptureOp::Wait { stream: s, event } => stream(*s).wait(&events[event.as_str()])?,
                }
            }
            Ok(())
        };
        let template = accepted(gpu.stream.capture(issue), "capture the fork/join")?;
        let nodes = accepted(template.nodes(), "read back nodes")?;
        let edges = accepted(template.edges(), "read back edges")?;
        // Each `mark` node's slot parameter is its launch position: the model's node index.
        let launch_index = |kind: &NodeKind| match kind {
            NodeKind::Kernel { params, layout, .. } => slot_value(&param_slots(layout), params, 1)
                .map(|v| i32::from_le_bytes(v.try_into().expect("int slot")) as usize),
            _ => None,
        };
        let order: Vec<usize> =
            nodes.iter().map(|n| launch_index(&n.kind)).collect::<Option<_>>().ok_or_else(|| {
                Verdict::Failed(format!("the captured graph holds nodes other than kernels: {nodes:?}"))
            })?;
        let mut driver_edges: Vec<(usize, usize)> = edges.iter().map(|(f, t, _)| (order[f.0], order[t.0])).collect();
        driver_edges.sort_unstable();
        ctx.metric("nodes", nodes.len() as f64, "1");
        ctx.metric("edges", edges.len() as f64, "1");
        let in_order = order == (0..model.nodes.len()).collect::<Vec<_>>();
        ensure(in_order && driver_edges == model.edges, || {
            format!("driver order {order:?} with edges {driver_edges:?}; model edges {:?}", model.edges)
        })
    })]
}
