//! `gpu/tensor-parallel/`: capturing the same workload on every device yields templates of
//! the same shape and parameter layout. Needs two or more GPUs.

use gnomon_core::cuda::NodeKind;

use super::{Chain, Gpu};
use crate::{accepted, ensure, Case, Requirement, Verdict};

pub fn cases() -> Vec<Case> {
    vec![Case::gpu("gpu/tensor-parallel/per-device-capture", "tensor-parallel-readiness", |ctx| {
        let count = gnomon_core::cuda::preflight().map_err(Verdict::Blocked)?.devices.len();
        let shapes: Vec<Vec<String>> = (0..count as u32).map(shape_on).collect::<Result<_, _>>()?;
        ctx.metric("devices", count as f64, "1");
        ensure(shapes.windows(2).all(|w| w[0] == w[1]), || format!("device shapes differ: {shapes:?}"))
    })
    .requiring(Requirement::Gpus(2))]
}

/// The chain's captured nodes on device `ordinal`, without their per-device pointers.
fn shape_on(ordinal: u32) -> Result<Vec<String>, Verdict> {
    let gpu = Gpu::open_ordinal(ordinal)?;
    let chain = Chain::new(&gpu)?;
    let template = accepted(gpu.stream.capture(|s| chain.issue(s)), "retained capture")?;
    let nodes = accepted(template.nodes(), "read back nodes")?;
    Ok(nodes
        .into_iter()
        .map(|n| match n.kind {
            NodeKind::Kernel { function, grid, block, layout, .. } => {
                format!("{function} {grid:?} {block:?} {layout:?}")
            }
            other => format!("{other:?}"),
        })
        .collect())
}
