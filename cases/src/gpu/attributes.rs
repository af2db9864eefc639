//! `gpu/attributes/`: what format v2 records is what a rebuild restores. Each workload
//! that needs an attribute is exported, then its templates are rebuilt from the core as
//! replay rebuilds them and read back from the driver: every kernel node's function,
//! dynamic shared memory and launch attributes, every edge's type, and every function's
//! attributes must equal what was captured.

use std::collections::HashMap;

use gnomon_core::{
    cuda::{Context, NodeKind, RetainedGraph},
    format::{EdgeKind, FunctionAttributes, LaunchAttributes, Manifest, NodeOp, Template},
    replay::rebuild_only,
    Core,
};

use crate::{ensure, replay::exported_core, Case, Verdict};

/// The workloads whose kernels need v2's attributes.
const WORKLOADS: [&str; 5] = ["big-shared-memory", "clusters", "programmatic-launch", "cooperative", "priorities"];

pub fn cases() -> Vec<Case> {
    WORKLOADS
        .iter()
        .map(|&name| {
            Case::gpu(&format!("gpu/attributes/workload={name}/rebuilt-equal-captured"), "attributes-restored", move |ctx| {
                let (_scratch, dir) = exported_core(name)?;
                let core = Core::open(&dir).map_err(|e| Verdict::Failed(format!("the exported core: {e}")))?;
                let device = Context::new(0).map_err(|e| Verdict::Blocked(e.to_string()))?;
                let rebuilt = rebuild_only(&core, &device).map_err(|e| Verdict::Failed(format!("rebuild: {e}")))?;
                let m = core.manifest();
                for (template, graph) in m.templates.iter().zip(&rebuilt.graphs) {
                    same_nodes(template, graph)?;
                    same_edges(template, graph)?;
                }
                for ((module, name), f) in &rebuilt.functions {
                    let recorded = recorded_attributes(m, module, name);
                    let read = f.attributes().map_err(|e| Verdict::Failed(format!("read `{name}`'s attributes: {e}")))?;
                    ensure(covers(&read, &recorded), || format!("function `{name}`: recorded {recorded:?}, the driver reports {read:?} after the rebuild"))?;
                }
                let kernels = m.templates.iter().flat_map(|t| &t.nodes).filter(|n| matches!(n.op, NodeOp::Kernel(_))).count();
                ctx.metric("kernel-nodes-compared", kernels as f64, "1");
                ctx.metric("typed-edges", m.templates.iter().flat_map(|t| &t.edges).filter(|e| !e.kind.is_full()).count() as f64, "1");
                Ok(())
            })
        })
        .collect()
}

/// A kernel node as compared: function, dynamic shared memory, launch attributes.
type KernelShape = (String, u32, LaunchAttributes);

fn same_nodes(t: &Template, graph: &RetainedGraph) -> Result<(), Verdict> {
    let mut recorded: Vec<KernelShape> = t
        .nodes
        .iter()
        .filter_map(|n| match &n.op {
            NodeOp::Kernel(k) => Some((k.function.clone(), k.shared_mem_bytes, k.launch)),
            _ => None,
        })
        .collect();
    let mut rebuilt: Vec<KernelShape> = read_back(graph)?
        .into_iter()
        .filter_map(|kind| match kind {
            NodeKind::Kernel { function, shared_mem, launch, .. } => Some((function, shared_mem, launch)),
            _ => None,
        })
        .collect();
    recorded.sort_by_key(|k| format!("{k:?}"));
    rebuilt.sort_by_key(|k| format!("{k:?}"));
    ensure(recorded == rebuilt, || {
        format!("template `{}`: captured kernel nodes {recorded:?}, rebuilt {rebuilt:?}", t.name)
    })
}

fn same_edges(t: &Template, graph: &RetainedGraph) -> Result<(), Verdict> {
    let kinds: HashMap<&str, String> = t.nodes.iter().map(|n| (n.id.as_str(), signature_of_op(&n.op))).collect();
    let mut recorded: Vec<(String, String, EdgeKind)> =
        t.edges.iter().map(|e| (kinds[e.from.as_str()].clone(), kinds[e.to.as_str()].clone(), e.kind)).collect();
    let nodes: Vec<String> = read_back(graph)?.iter().map(signature_of_kind).collect();
    let edges = graph.edges().map_err(|e| Verdict::Failed(format!("read back edges: {e}")))?;
    let mut rebuilt: Vec<_> =
        edges.into_iter().map(|(f, to, kind)| (nodes[f.0].clone(), nodes[to.0].clone(), kind)).collect();
    recorded.sort_by_key(|e| format!("{e:?}"));
    rebuilt.sort_by_key(|e| format!("{e:?}"));
    ensure(recorded == rebuilt, || format!("template `{}`: captured edges {recorded:?}, rebuilt {rebuilt:?}", t.name))
}

fn read_back(graph: &RetainedGraph) -> Result<Vec<NodeKind>, Verdict> {
    let nodes = graph.nodes().map_err(|e| Verdict::Failed(format!("read back nodes: {e}")))?;
    Ok(nodes.into_iter().map(|n| n.kind).collect())
}

/// A node named by what it runs: its function, or its kind.
fn signature_of_op(op: &NodeOp) -> String {
    match op {
        NodeOp::Kernel(k) => k.function.clone(),
        other => other.kind().to_owned(),
    }
}

fn signature_of_kind(kind: &NodeKind) -> String {
    match kind {
        NodeKind::Kernel { function, .. } => function.clone(),
        NodeKind::Memset { .. } => "memset".into(),
        NodeKind::Memcpy { .. } => "memcpy".into(),
        NodeKind::Empty => "empty".into(),
        NodeKind::Other(kind) => kind.clone(),
    }
}

fn recorded_attributes(m: &Manifest, module: &str, function: &str) -> FunctionAttributes {
    let recorded =
        m.modules.iter().filter(|mm| mm.id == module).flat_map(|mm| &mm.functions).find(|f| f.name == function);
    recorded.map(|f| f.attributes).unwrap_or_default()
}

/// Every attribute the core recorded has the recorded value on the rebuilt function: what
/// the driver reads back, kept only where the core recorded something, equals the record.
fn covers(read: &FunctionAttributes, recorded: &FunctionAttributes) -> bool {
    let r = recorded;
    let kept = FunctionAttributes {
        max_dynamic_shared_size_bytes: r.max_dynamic_shared_size_bytes.and(read.max_dynamic_shared_size_bytes),
        preferred_shared_memory_carveout: r.preferred_shared_memory_carveout.and(read.preferred_shared_memory_carveout),
        required_cluster_dim: r.required_cluster_dim.and(read.required_cluster_dim),
        non_portable_cluster_size_allowed: r
            .non_portable_cluster_size_allowed
            .and(read.non_portable_cluster_size_allowed),
        cluster_scheduling_policy: r.cluster_scheduling_policy.and(read.cluster_scheduling_policy),
    };
    kept == *recorded
}
