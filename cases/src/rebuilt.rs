//! What a rebuild restored, read back from the driver and held against the manifest: each
//! kernel node's function, launch shape, dynamic shared memory, parameter layout and launch
//! attributes; each node of another kind; each edge with its type and port data; and the
//! attributes of every function a template's kernels run. The first difference is named.
//! `gpu/attributes/` and `gnomon qualify`'s `template=T/attributes` share it.

use std::collections::HashMap;

use gnomon_format::{EdgeKind, Function, FunctionAttributes, LaunchAttributes, Manifest, NodeOp, ParamSlot, Template};

use gnomon_core::{
    cuda::{NodeKind, RetainedGraph},
    replay::Functions,
    translate::{edge_kind, function_attributes, param_slots, recorded_launch},
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

/// The manifest's functions by (module, name), looked up once per core rather than
/// searched for at every node.
pub struct Recorded<'m> {
    functions: HashMap<(&'m str, &'m str), &'m Function>,
}

impl<'m> Recorded<'m> {
    pub fn of(m: &'m Manifest) -> Self {
        let functions = m
            .modules
            .iter()
            .flat_map(|module| module.functions.iter().map(move |f| ((module.id.as_str(), f.name.as_str()), f)))
            .collect();
        Self { functions }
    }

    fn function(&self, module: &str, function: &str) -> Option<&'m Function> {
        self.functions.get(&(module, function)).copied()
    }

    /// `Err` names the first difference between `t` and `graph`, its rebuild read back.
    pub fn template_restored(&self, t: &Template, graph: &RetainedGraph, loaded: &Functions) -> Result<(), String> {
        let read = graph.nodes().map_err(|e| format!("read back the nodes of `{}`: {e}", t.name))?;
        let captured: Vec<Shape> = t.nodes.iter().map(|n| self.captured_shape(&n.op)).collect();
        let rebuilt: Vec<Shape> = read.iter().map(|n| rebuilt_shape(&n.kind)).collect();
        same_nodes(t, &captured, &rebuilt)?;
        same_edges(t, graph, &captured, &rebuilt)?;
        self.same_function_attributes(t, loaded)
    }

    fn captured_shape(&self, op: &NodeOp) -> Shape {
        match op {
            NodeOp::Kernel(k) => Shape::Kernel {
                function: k.function.clone(),
                grid: k.grid,
                block: k.block,
                shared_mem: k.shared_mem_bytes,
                layout: self.function(&k.module, &k.function).map(|f| f.params.clone()).unwrap_or_default(),
                launch: k.launch,
            },
            other => Shape::Other(other.kind().to_owned()),
        }
    }

    /// Every function the template's kernels run has, as loaded for the rebuild, the
    /// attributes the core recorded for it.
    fn same_function_attributes(&self, t: &Template, loaded: &Functions) -> Result<(), String> {
        let mut read_already = std::collections::HashSet::new();
        for node in &t.nodes {
            let NodeOp::Kernel(k) = &node.op else { continue };
            if !read_already.insert((&k.module, &k.function)) {
                continue;
            }
            let recorded = self.function(&k.module, &k.function).map(|f| f.attributes).unwrap_or_default();
            let function = loaded
                .get(&(k.module.clone(), k.function.clone()))
                .ok_or_else(|| format!("template `{}` node `{}`: `{}` was not loaded", t.name, node.id, k.function))?;
            let read = function_attributes(function).map_err(|e| format!("read `{}`'s attributes: {e}", k.function))?;
            if !covers(&read, &recorded) {
                return Err(format!(
                    "template `{}` node `{}`: function `{}` was recorded with {recorded:?}, the driver reports {read:?} after the rebuild",
                    t.name, node.id, k.function
                ));
            }
        }
        Ok(())
    }
}

/// Every captured node has a rebuilt node equal to it, each rebuilt node used once.
fn same_nodes(t: &Template, captured: &[Shape], rebuilt: &[Shape]) -> Result<(), String> {
    if rebuilt.len() != captured.len() {
        return Err(format!("template `{}`: {} nodes captured, {} rebuilt", t.name, captured.len(), rebuilt.len()));
    }
    let mut unmatched: Vec<Option<&Shape>> = rebuilt.iter().map(Some).collect();
    for (node, want) in t.nodes.iter().zip(captured) {
        match unmatched.iter_mut().find(|r| **r == Some(want)) {
            Some(slot) => *slot = None,
            None => {
                let nearest = unmatched.iter().flatten().find(|r| name_of(r) == name_of(want));
                let what = nearest.map_or_else(
                    || format!("no rebuilt node runs `{}`", name_of(want)),
                    |r| format!("the rebuilt node nearest to it differs: {}", differences(want, r)),
                );
                return Err(format!("template `{}` node `{}` (`{}`): {what}", t.name, node.id, name_of(want)));
            }
        }
    }
    Ok(())
}

fn rebuilt_shape(kind: &NodeKind) -> Shape {
    match kind {
        NodeKind::Kernel { function, grid, block, shared_mem, layout, launch, .. } => Shape::Kernel {
            function: function.clone(),
            grid: *grid,
            block: *block,
            shared_mem: *shared_mem,
            layout: param_slots(layout),
            launch: recorded_launch(launch),
        },
        NodeKind::Memset { .. } => Shape::Other("memset".into()),
        NodeKind::Memcpy { .. } => Shape::Other("memcpy".into()),
        NodeKind::Empty => Shape::Other("empty".into()),
        NodeKind::Unflat(shape) => Shape::Other(shape.clone()),
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
fn same_edges(t: &Template, graph: &RetainedGraph, captured: &[Shape], rebuilt: &[Shape]) -> Result<(), String> {
    let names: HashMap<&str, &str> = t.nodes.iter().zip(captured).map(|(n, s)| (n.id.as_str(), name_of(s))).collect();
    let edges = graph.edges().map_err(|e| format!("read back the edges of `{}`: {e}", t.name))?;
    let mut unmatched: Vec<Option<(&str, &str, EdgeKind)>> = edges
        .into_iter()
        .map(|(f, to, d)| Some((name_of(&rebuilt[f.0]), name_of(&rebuilt[to.0]), edge_kind(d))))
        .collect();
    if unmatched.len() != t.edges.len() {
        return Err(format!("template `{}`: {} edges captured, {} rebuilt", t.name, t.edges.len(), unmatched.len()));
    }
    for e in &t.edges {
        let want = (names[e.from.as_str()], names[e.to.as_str()], e.kind);
        match unmatched.iter_mut().find(|r| **r == Some(want)) {
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
    use gnomon_core::{cuda::ParamInfo, translate::kernel_attributes};

    use super::*;

    /// The sample v2 core's first template as a faithful rebuild reads back: one node
    /// per captured node, in another order.
    fn read_back(m: &Manifest) -> Vec<NodeKind> {
        let (t, recorded) = (&m.templates[0], Recorded::of(m));
        let kind = |op: &NodeOp| match op {
            NodeOp::Kernel(k) => NodeKind::Kernel {
                function: k.function.clone(),
                grid: k.grid,
                block: k.block,
                shared_mem: k.shared_mem_bytes,
                params: k.params.clone(),
                layout: recorded.function(&k.module, &k.function).unwrap().params.iter().map(info).collect(),
                launch: kernel_attributes(&k.launch),
            },
            NodeOp::Memset(s) => {
                NodeKind::Memset { dst: 0, value: s.value, element_size: s.element_size, count: s.count }
            }
            NodeOp::Memcpy(c) => NodeKind::Memcpy { dst: 0, src: 0, bytes: c.bytes, host: None },
            NodeOp::Empty => NodeKind::Empty,
            other => NodeKind::Other(other.kind().into()),
        };
        t.nodes.iter().rev().map(|n| kind(&n.op)).collect()
    }

    fn info(slot: &ParamSlot) -> ParamInfo {
        ParamInfo { offset: slot.offset, size: slot.size }
    }

    /// [`same_nodes`] of `t` against `read`, as [`Recorded::template_restored`] calls it.
    fn nodes_restored(m: &Manifest, t: &Template, read: &[NodeKind]) -> Result<(), String> {
        let recorded = Recorded::of(m);
        let captured: Vec<Shape> = t.nodes.iter().map(|n| recorded.captured_shape(&n.op)).collect();
        same_nodes(t, &captured, &read.iter().map(rebuilt_shape).collect::<Vec<_>>())
    }

    #[test]
    fn a_faithful_rebuild_has_every_node() {
        let m = gnomon_fixtures::sample::v2_features().manifest;
        assert_eq!(nodes_restored(&m, &m.templates[0], &read_back(&m)), Ok(()));
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
        let said = nodes_restored(&m, t, &read).unwrap_err();
        assert!(said.starts_with(&format!("template `{}` node `", t.name)), "{said}");
        assert!(said.contains("the rebuilt node nearest to it differs: launch attributes captured LaunchAttributes { priority: Some(-3)"), "{said}");
        assert!(!said.contains("grid captured"), "only what differs is named: {said}");
        read.pop();
        let said = nodes_restored(&m, t, &read).unwrap_err();
        assert!(said.contains(&format!("{} nodes captured, {} rebuilt", t.nodes.len(), t.nodes.len() - 1)), "{said}");
    }
}
