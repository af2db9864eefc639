//! `gpu/retained-capture/`: capturing a catalogue into retained templates creates no
//! executable and holds no device memory for one; instantiating it does.

use gnomon_core::{
    cuda::{live_executables, RetainedGraph},
    translate::Instantiate,
};

use super::{Chain, Gpu};
use crate::{accepted, ensure, Case, Verdict};

const GRAPHS: usize = 64;
/// Each chain issues three kernels.
const CHAINS_PER_GRAPH: usize = 67;
const MIB: f64 = (1 << 20) as f64;

pub fn cases() -> Vec<Case> {
    vec![Case::gpu("gpu/retained-capture/no-executable-residency", "retained-capture", |ctx| {
        let gpu = Gpu::open()?;
        let chain = Chain::new(&gpu)?;
        let free = || {
            gpu.ctx
                .synchronize()
                .and_then(|_| gpu.ctx.memory())
                .map(|(free, _)| free as f64)
                .map_err(|e| Verdict::Blocked(e.to_string()))
        };
        let before = free()?;
        let templates: Vec<RetainedGraph> = (0..GRAPHS)
            .map(|_| {
                accepted(
                    gpu.stream.capture(|s| (0..CHAINS_PER_GRAPH).try_for_each(|_| chain.issue(s))),
                    "retained capture",
                )
            })
            .collect::<Result<_, _>>()?;
        let with_templates = free()?;
        ensure(live_executables() == 0, || format!("{} executables exist after retained capture", live_executables()))?;
        let execs: Vec<_> =
            templates.iter().map(|t| accepted(t.instantiate(1), "instantiate")).collect::<Result<_, _>>()?;
        let with_executables = free()?;
        let nodes = (GRAPHS * CHAINS_PER_GRAPH * 3) as f64;
        let (template_bytes, exec_bytes) = (before - with_templates, with_templates - with_executables);
        ctx.metric("graphs", GRAPHS as f64, "1");
        ctx.metric("nodes", nodes, "1");
        ctx.metric("device-memory-templates-only", template_bytes / MIB, "MiB");
        ctx.metric("device-memory-executables", exec_bytes / MIB, "MiB");
        ctx.metric("executable-bytes-per-node", exec_bytes / nodes, "B");
        drop(execs);
        ensure(template_bytes <= 2.0 * MIB && exec_bytes > template_bytes, || {
            format!("templates took {:.1} MiB, executables {:.1} MiB", template_bytes / MIB, exec_bytes / MIB)
        })
    })]
}
