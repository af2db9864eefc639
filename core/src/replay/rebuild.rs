//! Rebuilds a template node by node from the manifest, in O(nodes + edges): each node's
//! dependencies and each buffer are found through maps built once per template.

use std::collections::HashMap;

use crate::{
    cuda::{Context, Function, NodeId, RetainedGraph},
    errors::{KernelNodeError, ReplayError},
    format::{Buffer, BufferRef, Manifest, Node, NodeOp, Template},
};

/// Functions by `(module id, function name)`.
pub type Functions = HashMap<(String, String), Function>;

pub fn template(
    ctx: &Context,
    m: &Manifest,
    t: &Template,
    functions: &Functions,
) -> Result<RetainedGraph, ReplayError> {
    let buffers: HashMap<&str, &Buffer> = m.buffers.iter().map(|b| (b.name.as_str(), b)).collect();
    let address = |r: &BufferRef| m.arena.base + buffers[r.buffer.as_str()].offset + r.offset;
    let mut incoming: HashMap<&str, Vec<&str>> = HashMap::new();
    for e in &t.edges {
        incoming.entry(e.to.as_str()).or_default().push(e.from.as_str());
    }
    let mut graph = RetainedGraph::empty(ctx)?;
    let mut added: HashMap<&str, NodeId> = HashMap::with_capacity(t.nodes.len());
    for node in topological(t) {
        let deps: Vec<NodeId> =
            incoming.get(node.id.as_str()).map_or(Vec::new(), |from| from.iter().map(|f| added[f]).collect());
        let at = |source| ReplayError::Node { template: t.name.clone(), node: node.id.clone(), source };
        let id = match &node.op {
            NodeOp::Kernel(k) => {
                let f = &functions[&(k.module.clone(), k.function.clone())];
                graph.add_kernel(f, k.grid, k.block, k.shared_mem_bytes, &k.params, &deps).map_err(|source| {
                    ReplayError::KernelNode(Box::new(KernelNodeError {
                        template: t.name.clone(),
                        node: node.id.clone(),
                        function: k.function.clone(),
                        grid: k.grid,
                        block: k.block,
                        shared_mem: k.shared_mem_bytes,
                        source,
                    }))
                })?
            }
            // SAFETY: validation put both ranges inside buffers of the mapped arena.
            NodeOp::Memset(s) => {
                unsafe { graph.add_memset(address(&s.dst), s.value, s.element_size, s.count, &deps) }.map_err(at)?
            }
            NodeOp::Memcpy(c) => {
                unsafe { graph.add_memcpy(address(&c.dst), address(&c.src), c.bytes, &deps) }.map_err(at)?
            }
            NodeOp::Empty => graph.add_empty(&deps).map_err(at)?,
            other => {
                return Err(ReplayError::UnsupportedNode {
                    template: t.name.clone(),
                    node: node.id.clone(),
                    kind: other.kind(),
                })
            }
        };
        added.insert(&node.id, id);
    }
    Ok(graph)
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
