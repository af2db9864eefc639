//! Rebuilds templates from the manifest in O(nodes + edges): each node's dependencies and
//! each buffer are found through maps built once per template. Nodes are described first
//! and built by `cuda::build_all`, so a refused node is named by the manifest's ids.

use std::collections::HashMap;

use gnomon_format::{validate::recorded_flags, Buffer, BufferRef, Manifest, Node, NodeOp, Template};

use crate::{
    cuda::{
        build_all, build_and_instantiate, BuildFailure, Context, Function, GraphSpec, KernelSpec, NodeSpec, Overlap,
        Ready, ReadyFailure, RetainedGraph,
    },
    errors::KernelNodeError,
    errors::ReplayError,
    replay::Stage,
    translate,
};

/// Functions by `(module id, function name)`.
pub type Functions = HashMap<(String, String), Function>;

/// Every template rebuilt, not instantiated (what [`super::rebuild_only`] reads back).
pub fn templates(ctx: &Context, m: &Manifest, functions: &Functions) -> Result<Vec<RetainedGraph>, ReplayError> {
    let (specs, orders, kept) = describe_all(m, functions)?;
    // SAFETY: validation put every memset and memcpy range inside buffers of the arena,
    // which replay mapped before rebuilding and keeps mapped while executables live.
    unsafe { build_all(ctx, &specs, kept) }.map_err(|f| refused(m, &orders, f))
}

/// Every template rebuilt and instantiated with its recorded flags, `how` says when and
/// on how many threads (see `cuda::build_and_instantiate`); a failure comes with the
/// stage it belongs to.
pub fn ready(
    ctx: &Context,
    m: &Manifest,
    functions: &Functions,
    how: (Overlap, usize),
) -> Result<Ready, (Stage, ReplayError)> {
    let (specs, orders, kept) = describe_all(m, functions).map_err(|e| (Stage::Rebuild, e))?;
    let flags: Vec<u64> =
        m.templates.iter().map(|t| recorded_flags(&t.flags).expect("validated flags").bits()).collect();
    // SAFETY: as in `templates`.
    unsafe { build_and_instantiate(ctx, &specs, kept, &flags, how) }.map_err(|failure| match failure {
        ReadyFailure::Build(f) => (Stage::Rebuild, refused(m, &orders, f)),
        ReadyFailure::Instantiate(e) => (Stage::Instantiate, e.into()),
    })
}

type Described<'m> = (Vec<GraphSpec<'m>>, Vec<Vec<&'m Node>>, Vec<Vec<Function>>);

/// Every template as nodes to build, with their manifest nodes in build order and the
/// functions each uses.
fn describe_all<'m>(m: &'m Manifest, functions: &'m Functions) -> Result<Described<'m>, ReplayError> {
    let buffers: HashMap<&str, &Buffer> = m.buffers.iter().map(|b| (b.name.as_str(), b)).collect();
    let (mut specs, mut orders, mut kept) = (Vec::new(), Vec::new(), Vec::new());
    for t in &m.templates {
        let (spec, order, used) = describe(m, t, &buffers, functions)?;
        specs.push(spec);
        orders.push(order);
        kept.push(used);
    }
    Ok((specs, orders, kept))
}

/// The node the driver refused, named by the manifest's ids.
fn refused(m: &Manifest, orders: &[Vec<&Node>], BuildFailure { graph, node, error }: BuildFailure) -> ReplayError {
    let (t, node) = (&m.templates[graph], orders[graph][node]);
    match &node.op {
        NodeOp::Kernel(k) => ReplayError::KernelNode(Box::new(KernelNodeError {
            template: t.name.clone(),
            node: node.id.clone(),
            function: k.function.clone(),
            grid: k.grid,
            block: k.block,
            shared_mem: k.shared_mem_bytes,
            source: error,
        })),
        _ => ReplayError::Node { template: t.name.clone(), node: node.id.clone(), source: error },
    }
}

/// One template as nodes to build, in topological order, with the functions it uses.
fn describe<'m>(
    m: &'m Manifest,
    t: &'m Template,
    buffers: &HashMap<&str, &Buffer>,
    functions: &'m Functions,
) -> Result<(GraphSpec<'m>, Vec<&'m Node>, Vec<Function>), ReplayError> {
    let address = |r: &BufferRef| m.arena.base + buffers[r.buffer.as_str()].offset + r.offset;
    let mut incoming: HashMap<&str, Vec<&str>> = HashMap::new();
    for e in t.edges.iter().filter(|e| e.kind.is_full()) {
        incoming.entry(e.to.as_str()).or_default().push(e.from.as_str());
    }
    let order = topological(t);
    let position: HashMap<&str, usize> = order.iter().enumerate().map(|(i, n)| (n.id.as_str(), i)).collect();
    let (mut spec, mut used) = (GraphSpec::default(), Vec::new());
    let typed = t.edges.iter().filter(|e| !e.kind.is_full());
    let typed = typed.map(|e| (position[e.from.as_str()], position[e.to.as_str()], translate::dependency(e.kind)));
    spec.typed_edges = typed.collect();
    for node in &order {
        let deps = incoming.get(node.id.as_str()).map_or(Vec::new(), |from| from.iter().map(|f| position[f]).collect());
        let op = match &node.op {
            NodeOp::Kernel(k) => {
                let f = &functions[&(k.module.clone(), k.function.clone())];
                used.push(f.clone());
                let at = |source| ReplayError::Node { template: t.name.clone(), node: node.id.clone(), source };
                let kernel = KernelSpec::new(f, k.grid, k.block, k.shared_mem_bytes, &k.params).map_err(at)?;
                NodeSpec::Kernel(kernel.with_launch(translate::kernel_attributes(&k.launch)))
            }
            NodeOp::Memset(s) => {
                NodeSpec::Memset { dst: address(&s.dst), value: s.value, element_size: s.element_size, count: s.count }
            }
            NodeOp::Memcpy(c) => NodeSpec::Memcpy { dst: address(&c.dst), src: address(&c.src), bytes: c.bytes },
            NodeOp::Empty => NodeSpec::Empty,
            other => {
                return Err(ReplayError::UnsupportedNode {
                    template: t.name.clone(),
                    node: node.id.clone(),
                    kind: other.kind(),
                })
            }
        };
        spec.nodes.push((op, deps));
    }
    Ok((spec, order, used))
}

/// Nodes in an order where every edge points forward; validation guarantees a DAG.
fn topological(t: &Template) -> Vec<&Node> {
    let index: HashMap<&str, usize> = t.nodes.iter().enumerate().map(|(i, n)| (n.id.as_str(), i)).collect();
    let mut outgoing: Vec<Vec<usize>> = vec![Vec::new(); t.nodes.len()];
    let mut in_degree = vec![0usize; t.nodes.len()];
    for e in &t.edges {
        let (from, to) = (index[e.from.as_str()], index[e.to.as_str()]);
        outgoing[from].push(to);
        in_degree[to] += 1;
    }
    let mut ready: Vec<usize> = (0..t.nodes.len()).rev().filter(|&i| in_degree[i] == 0).collect();
    let mut order = Vec::with_capacity(t.nodes.len());
    while let Some(i) = ready.pop() {
        order.push(&t.nodes[i]);
        for &to in &outgoing[i] {
            in_degree[to] -= 1;
            if in_degree[to] == 0 {
                ready.push(to);
            }
        }
    }
    order
}
