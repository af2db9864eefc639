//! `gpu/attributes/`: what format v2 records is what a rebuild restores. Each workload
//! that needs an attribute is exported, then its templates are rebuilt from the core as
//! replay rebuilds them and read back from the driver (`rebuilt.rs`): every node, edge and
//! function attribute must equal what was captured.

use gnomon_format::{Core, NodeOp};

use gnomon_core::{cuda::Context, replay::rebuild_only};

use crate::{rebuilt::Recorded, replay::exported_core, Case, Verdict};

/// The workloads whose kernels need v2's attributes.
const WORKLOADS: [&str; 5] = ["big-shared-memory", "clusters", "programmatic-launch", "cooperative", "priorities"];

pub fn cases() -> Vec<Case> {
    WORKLOADS
        .iter()
        .map(|&name| {
            Case::gpu(
                &format!("gpu/attributes/workload={name}/rebuilt-equal-captured"),
                "attributes-restored",
                move |ctx| {
                    let (_scratch, dir) = exported_core(name)?;
                    let core = Core::open(&dir).map_err(|e| Verdict::Failed(format!("the exported core: {e}")))?;
                    let device = Context::new(0).map_err(|e| Verdict::Blocked(e.to_string()))?;
                    let rebuilt = rebuild_only(&core, &device).map_err(|e| Verdict::Failed(format!("rebuild: {e}")))?;
                    let m = core.manifest();
                    let recorded = Recorded::of(m);
                    for (template, graph) in m.templates.iter().zip(&rebuilt.graphs) {
                        recorded.template_restored(template, graph, &rebuilt.functions).map_err(Verdict::Failed)?;
                    }
                    let kernels =
                        m.templates.iter().flat_map(|t| &t.nodes).filter(|n| matches!(n.op, NodeOp::Kernel(_))).count();
                    ctx.metric("kernel-nodes-compared", kernels as f64, "1");
                    ctx.metric(
                        "typed-edges",
                        m.templates.iter().flat_map(|t| &t.edges).filter(|e| !e.kind.is_full()).count() as f64,
                        "1",
                    );
                    Ok(())
                },
            )
        })
        .collect()
}
