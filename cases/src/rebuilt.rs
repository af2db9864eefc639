//! What a rebuild restored, read back from the driver and held against the manifest: each
//! kernel node's function, launch shape, dynamic shared memory, parameter layout and launch
//! attributes; each node of another kind; each edge with its type and port data; and the
//! attributes of every function a template's kernels run. The first difference is named.
//! `gpu/attributes/` and `gnomon qualify`'s `template=T/attributes` share it.

use std::collections::HashMap;

use gnomon_core::{
    cuda::{NodeKind, RetainedGraph},
    format::{EdgeKind, FunctionAttributes, LaunchAttributes, Manifest, NodeOp, ParamSlot, Template},
    replay::Functions,
};

/// A node as compared: a kernel node by what the driver launches, another by its kind.
#[derive(Debug, PartialEq)]
enum Shape {
    Kernel {
        function: String,
        grid: [u32; 3],
        block: [u32; 3],
        shared_mem: u32,
        layout: Vec<ParamSlot>,
        launch: LaunchAttributes,
    },
    Other(String),
}

/// `Err` names the first difference between `t` and `graph`, its rebuild read back.
pub fn template_restored(
    m: &Manifest,
    t: &Template,
    graph: &RetainedGraph,
    functions: &Functions,
) -> Result<(), String> {
    let read = graph.nodes().map_err(|e| format!("read back the nodes of `{}`: {e}", t.name))?;
    let read: Vec<NodeKind> = read.into_iter().map(|n| n.kind).collect();
    same_nodes(m, t, &read)?;
    same_edges(m, t, graph, &read)?;
    same_function_attributes(m, t, functions)
}

/// Every captured node has a rebuilt node equal to it, each rebuilt node used once.
fn same_nodes(m: &Manifest, t: &Template, read: &[NodeKind]) -> Result<(), String> {
    if read.len() != t.nodes.len() {
        return Err(format!("template `{}`: {} nodes captured, {} rebuilt", t.name, t.nodes.len(), read.len()));
    }
    let mut rebuilt: Vec<Option<Shape>> = read.iter().map(|k| Some(rebuilt_shape(k))).collect();
    for node in &t.nodes {
        let want = captured_shape(m, &node.op);
        match rebuilt.iter_mut().find(|r| r.as_ref() == Some(&want)) {
            Some(slot) => *slot = None,
            None => {
                let nearest = rebuilt.iter().flatten().find(|r| name_of(r) == name_of(&want));
                let what = nearest.map_or_else(
                    || format!("no rebuilt node runs `{}`", name_of(&want)),
                    |r| format!("the rebuilt node nearest to it differs: {}", differences(&want, r)),
                );
                return Err(format!("template `{}` node `{}` (`{}`): {what}", t.name, node.id, name_of(&want)));
            }
        }
    }
    Ok(())
}

fn captured_shape(m: &Manifest, op: &NodeOp) -> Shape {
    match op {
        NodeOp::Kernel(k) => Shape::Kernel {
            function: k.function.clone(),
            grid: k.grid,
            block: k.block,
            shared_mem: k.shared_mem_bytes,
            layout: recorded_function(m, &k.module, &k.function).map(|f| f.params.clone()).unwrap_or_default(),
            launch: k.launch,
        },
        other => Shape::Other(other.kind().to_owned()),
    }
}

fn rebuilt_shape(kind: &NodeKind) -> Shape {
    match kind {
        NodeKind::Kernel { function, grid, block, shared_mem, layout, launch, .. } => Shape::Kernel {
            function: function.clone(),
            grid: *grid,
            block: *block,
            shared_mem: *shared_mem,
            layout: layout.clone(),
            launch: *launch,
        },
        NodeKind::Memset { .. } => Shape::Other("memset".into()),
        NodeKind::Memcpy { .. } => Shape::Other("memcpy".into()),
        NodeKind::Empty => Shape::Other("empty".into()),
        NodeKind::Other(kind) => Shape::Other(kind.clone()),
    }
}

/// A node named by what it runs: its function, or its kind.
fn name_of(shape: &Shape) -> &str {
    match shape {
        Shape::Kernel { function, .. } => function,
        Shape::Other(kind) => kind,
    }
}

/// "launch attributes captured … rebuilt …": each field in which two nodes that run the
/// same function differ.
fn differences(captured: &Shape, rebuilt: &Shape) -> String {
    let (
        Shape::Kernel { grid, block, shared_mem, layout, launch, .. },
        Shape::Kernel { grid: g, block: b, shared_mem: s, layout: l, launch: a, .. },
    ) = (captured, rebuilt)
    else {
        return format!("captured {captured:?}, rebuilt {rebuilt:?}");
    };
    let mut said = Vec::new();
    let mut field = |name: &str, differ: bool, was: String, is: String| {
        if differ {
            said.push(format!("{name} captured {was}, rebuilt {is}"));
        }
    };
    field("grid", grid != g, format!("{grid:?}"), format!("{g:?}"));
    field("block", block != b, format!("{block:?}"), format!("{b:?}"));
    field("dynamic shared memory", shared_mem != s, format!("{shared_mem} B"), format!("{s} B"));
    field("parameter layout", layout != l, format!("{layout:?}"), format!("{l:?}"));
    field("launch attributes", launch != a, format!("{launch:?}"), format!("{a:?}"));
    said.join("; ")
}

/// The same edges between nodes that run the same things, with the same types (a
/// programmatic edge's type carries its port data).
fn same_edges(m: &Manifest, t: &Template, graph: &RetainedGraph, read: &[NodeKind]) -> Result<(), String> {
    let names: HashMap<&str, String> =
        t.nodes.iter().map(|n| (n.id.as_str(), name_of(&captured_shape(m, &n.op)).to_owned())).collect();
    let nodes: Vec<String> = read.iter().map(|k| name_of(&rebuilt_shape(k)).to_owned()).collect();
    let edges = graph.edges().map_err(|e| format!("read back the edges of `{}`: {e}", t.name))?;
    let mut rebuilt: Vec<Option<(String, String, EdgeKind)>> =
        edges.into_iter().map(|(f, to, kind)| Some((nodes[f.0].clone(), nodes[to.0].clone(), kind))).collect();
    if rebuilt.len() != t.edges.len() {
        return Err(format!("template `{}`: {} edges captured, {} rebuilt", t.name, t.edges.len(), rebuilt.len()));
    }
    for e in &t.edges {
        let want = (names[e.from.as_str()].clone(), names[e.to.as_str()].clone(), e.kind);
        match rebuilt.iter_mut().find(|r| r.as_ref() == Some(&want)) {
            Some(slot) => *slot = None,
            None => {
                return Err(format!(
                    "template `{}` edge `{}` -> `{}` ({:?}, from `{}` to `{}`): no rebuilt edge is equal",
                    t.name, e.from, e.to, e.kind, want.0, want.1
                ))
            }
        }
    }
    Ok(())
}

/// Every function the template's kernels run has, as loaded for the rebuild, the
/// attributes the core recorded for it.
fn same_function_attributes(m: &Manifest, t: &Template, functions: &Functions) -> Result<(), String> {
    let mut read_already = std::collections::HashSet::new();
    for node in &t.nodes {
        let NodeOp::Kernel(k) = &node.op else { continue };
        if !read_already.insert((&k.module, &k.function)) {
            continue;
        }
        let recorded = recorded_function(m, &k.module, &k.function).map(|f| f.attributes).unwrap_or_default();
        let loaded = functions
            .get(&(k.module.clone(), k.function.clone()))
            .ok_or_else(|| format!("template `{}` node `{}`: `{}` was not loaded", t.name, node.id, k.function))?;
        let read = loaded.attributes().map_err(|e| format!("read `{}`'s attributes: {e}", k.function))?;
        if !covers(&read, &recorded) {
            return Err(format!(
                "template `{}` node `{}`: function `{}` was recorded with {recorded:?}, the driver reports {read:?} after the rebuild",
                t.name, node.id, k.function
            ));
        }
    }
    Ok(())
}

fn recorded_function<'m>(m: &'m Manifest, module: &str, function: &str) -> Option<&'m gnomon_core::format::Function> {
    m.modules.iter().filter(|mm| mm.id == module).flat_map(|mm| &mm.functions).find(|f| f.name == function)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample v2 core's first template as a faithful rebuild reads back: one node
    /// per captured node, in another order.
    fn read_back(m: &Manifest) -> Vec<NodeKind> {
        let t = &m.templates[0];
        let kind = |op: &NodeOp| match op {
            NodeOp::Kernel(k) => NodeKind::Kernel {
                function: k.function.clone(),
                grid: k.grid,
                block: k.block,
                shared_mem: k.shared_mem_bytes,
                params: k.params.clone(),
                layout: recorded_function(m, &k.module, &k.function).unwrap().params.clone(),
                launch: k.launch,
            },
            NodeOp::Memset(s) => {
                NodeKind::Memset { dst: 0, value: s.value, element_size: s.element_size, count: s.count }
            }
            NodeOp::Memcpy(c) => NodeKind::Memcpy { dst: 0, src: 0, bytes: c.bytes },
            NodeOp::Empty => NodeKind::Empty,
            other => NodeKind::Other(other.kind().into()),
        };
        t.nodes.iter().rev().map(|n| kind(&n.op)).collect()
    }

    #[test]
    fn a_faithful_rebuild_has_every_node() {
        let m = gnomon_fixtures::sample::v2_features().manifest;
        assert_eq!(same_nodes(&m, &m.templates[0], &read_back(&m)), Ok(()));
    }

    /// A rebuild that drops a launch attribute, or a node, is named at the first node it
    /// differs in, with the field.
    #[test]
    fn a_lost_launch_attribute_or_node_is_named() {
        let m = gnomon_fixtures::sample::v2_features().manifest;
        let t = &m.templates[0];
        let mut read = read_back(&m);
        let Some(NodeKind::Kernel { launch, .. }) =
            read.iter_mut().find(|k| matches!(k, NodeKind::Kernel { launch, .. } if launch.priority.is_some()))
        else {
            panic!("the v2 sample has a prioritised kernel node")
        };
        launch.priority = None;
        let said = same_nodes(&m, t, &read).unwrap_err();
        assert!(said.starts_with(&format!("template `{}` node `", t.name)), "{said}");
        assert!(said.contains("the rebuilt node nearest to it differs: launch attributes captured LaunchAttributes { priority: Some(-3)"), "{said}");
        assert!(!said.contains("grid captured"), "only what differs is named: {said}");
        read.pop();
        let said = same_nodes(&m, t, &read).unwrap_err();
        assert!(said.contains(&format!("{} nodes captured, {} rebuilt", t.nodes.len(), t.nodes.len() - 1)), "{said}");
    }
}
