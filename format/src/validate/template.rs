//! The rules of one template, checked against the core's modules and buffers.

use std::{
    collections::{HashMap, HashSet},
    ops::Range,
};

use super::{
    cluster, first_duplicate, recorded_flags, unique, BufferMap, ModuleMap, Result, DEFAULT_DYNAMIC_SHARED_BYTES,
    MAX_BLOCK, MAX_GRID, MAX_THREADS,
};
use crate::{
    errors::ValidationError as E,
    {BufferRef, EdgeKind, Function, KernelNode, NodeOp, Template},
};

/// Checks one template against the core's modules and buffers.
pub(super) struct TemplateCheck<'a, 'm> {
    pub(super) template: &'m Template,
    pub(super) modules: &'a ModuleMap<'m>,
    pub(super) buffers: &'a BufferMap<'m>,
}

impl TemplateCheck<'_, '_> {
    pub(super) fn run(&self) -> Result {
        let t = self.template;
        recorded_flags(&t.flags).map_err(|source| E::Flags { template: t.name.clone(), source })?;
        if t.nodes.is_empty() {
            return Err(E::EmptyTemplate { template: t.name.clone() });
        }
        unique("node", t.nodes.iter().map(|n| n.id.as_str()))?;
        let edge = first_duplicate(t.edges.iter().map(|e| (e.from.as_str(), e.to.as_str())));
        self.duplicate("edge", edge.map(|(from, to)| format!("{from} -> {to}")))?;
        for node in &t.nodes {
            self.node(&node.id, &node.op)?;
        }
        let index: HashMap<&str, usize> = t.nodes.iter().enumerate().map(|(i, n)| (n.id.as_str(), i)).collect();
        self.acyclic(&index)?;
        self.typed_edges(&index)?;
        self.capture_order(&index)
    }

    /// Programmatic and launch-order edges leave from and arrive at kernel nodes.
    fn typed_edges(&self, index: &HashMap<&str, usize>) -> Result {
        let t = self.template;
        let kernel = |id: &str| matches!(t.nodes[index[id]].op, NodeOp::Kernel(_));
        for e in t.edges.iter().filter(|e| !e.kind.is_full()) {
            if !(kernel(&e.from) && kernel(&e.to)) {
                let kind = if e.kind == EdgeKind::Programmatic { "programmatic" } else { "launch-order" };
                return Err(E::TypedEdge { template: self.name(), from: e.from.clone(), to: e.to.clone(), kind });
            }
        }
        Ok(())
    }

    fn node(&self, node: &str, op: &NodeOp) -> Result {
        match op {
            NodeOp::Kernel(k) => self.kernel(node, k),
            NodeOp::Memset(m) => {
                if ![1, 2, 4].contains(&m.element_size) {
                    let element_size = m.element_size;
                    return Err(E::MemsetElement { template: self.name(), node: node.into(), element_size });
                }
                if m.element_size < 4 && m.value >> (8 * m.element_size) != 0 {
                    let (value, element_size) = (m.value, m.element_size);
                    return Err(E::MemsetValue { template: self.name(), node: node.into(), value, element_size });
                }
                self.buffer_range(node, &m.dst, m.count.saturating_mul(m.element_size.into()))
            }
            NodeOp::Memcpy(c) => {
                self.buffer_range(node, &c.src, c.bytes)?;
                self.buffer_range(node, &c.dst, c.bytes)
            }
            NodeOp::Empty => Ok(()),
            NodeOp::EventRecord { .. } | NodeOp::EventWait { .. } => {
                Err(E::EventNode { template: self.name(), node: node.into(), kind: op.kind() })
            }
        }
    }

    fn kernel(&self, node: &str, k: &KernelNode) -> Result {
        let (template, node_id) = (self.name(), node.to_owned());
        let functions = self.modules.get(k.module.as_str()).ok_or_else(|| E::UnknownModule {
            template: template.clone(),
            node: node_id.clone(),
            module: k.module.clone(),
        })?;
        let f = functions.get(k.function.as_str()).ok_or_else(|| E::UnknownFunction {
            template: template.clone(),
            node: node_id.clone(),
            module: k.module.clone(),
            function: k.function.clone(),
        })?;
        if k.params.len() as u64 != f.param_bytes() {
            let (expected, found) = (f.param_bytes(), k.params.len() as u64);
            return Err(E::ParamBytes { template, node: node_id, function: f.name.clone(), expected, found });
        }
        self.launch_shape(node, k)?;
        let allowed = f.attributes.max_dynamic_shared_size_bytes.unwrap_or(DEFAULT_DYNAMIC_SHARED_BYTES);
        if k.shared_mem_bytes > allowed {
            let (function, requested) = (f.name.clone(), k.shared_mem_bytes);
            return Err(E::SharedMemory { template, node: node_id, function, requested, allowed });
        }
        if let Some(offset) = padding(f).find(|&i| k.params[i] != 0) {
            return Err(E::ParamPadding { template, node: node_id, offset });
        }
        let pointer = first_duplicate(k.pointers.iter().map(|p| (p.param, p.at)));
        self.duplicate("pointer parameter", pointer.map(|(param, at)| format!("{param} at byte {at}")))?;
        for p in &k.pointers {
            let slot = f.params.get(p.param as usize).ok_or_else(|| E::PointerParamIndex {
                template: template.clone(),
                node: node_id.clone(),
                function: f.name.clone(),
                param: p.param,
                count: f.params.len(),
            })?;
            if p.at.checked_add(8).is_none_or(|end| end > slot.size) {
                let (param, at, size) = (p.param, p.at, slot.size);
                return Err(E::PointerParamSize { template, node: node_id, param, at, size });
            }
            if p.external {
                return Err(E::ExternalPointer { template, node: node_id, param: p.param });
            }
            let bytes = slot.offset + p.at..slot.offset + p.at + 8;
            let raw = &k.params[bytes.start as usize..bytes.end as usize];
            let address = u64::from_le_bytes(raw.try_into().expect("8 bytes"));
            if !self.buffers.contains_address(address) {
                return Err(E::DanglingPointer { template, node: node_id, param: p.param, bytes, address });
            }
        }
        self.launch_attributes(node, k)
    }

    fn launch_attributes(&self, node: &str, k: &KernelNode) -> Result {
        let Some(dim) = k.launch.cluster_dim else { return Ok(()) };
        let item = || format!("node `{node}` of template `{}`", self.template.name);
        let what = cluster(dim).or_else(|| {
            let divides = k.grid.iter().zip(dim).all(|(&g, d)| g % d == 0);
            (!divides).then(|| format!("does not divide the grid {:?}", k.grid))
        });
        what.map_or(Ok(()), |what| Err(E::Attribute { item: item(), what: format!("cluster-dim {dim:?} {what}") }))
    }

    fn launch_shape(&self, node: &str, k: &KernelNode) -> Result {
        let fail = |what, dims, limit| E::LaunchShape { template: self.name(), node: node.into(), what, dims, limit };
        if k.grid.iter().zip(MAX_GRID).any(|(&d, max)| d == 0 || d > max) {
            return Err(fail("grid", k.grid, "1 ..= 2147483647 × 65535 × 65535"));
        }
        let threads: u64 = k.block.iter().map(|&d| u64::from(d)).product();
        if k.block.iter().zip(MAX_BLOCK).any(|(&d, max)| d == 0 || d > max) || threads > MAX_THREADS {
            return Err(fail("block", k.block, "1 ..= 1024 × 1024 × 64, at most 1024 threads"));
        }
        Ok(())
    }

    /// Refuses the `kind` named `duplicate`, if one appears twice in this template.
    fn duplicate(&self, kind: &'static str, duplicate: Option<String>) -> Result {
        duplicate.map_or(Ok(()), |name| Err(E::DuplicateIn { template: self.name(), kind, name }))
    }

    fn buffer_range(&self, node: &str, target: &BufferRef, len: u64) -> Result {
        let buffer = self.buffers.by_name.get(target.buffer.as_str()).ok_or_else(|| E::UnknownBuffer {
            template: self.name(),
            node: node.into(),
            buffer: target.buffer.clone(),
        })?;
        let span: Range<u64> = target.offset..target.offset.saturating_add(len);
        if span.end > buffer.size || len == 0 {
            let (template, node, buffer_name) = (self.name(), node.into(), buffer.name.clone());
            return Err(E::BufferRange { template, node, buffer: buffer_name, span, size: buffer.size });
        }
        Ok(())
    }

    /// Kahn's algorithm; whatever is left unvisited lies on or behind a cycle.
    fn acyclic(&self, index: &HashMap<&str, usize>) -> Result {
        let t = self.template;
        let mut successors = vec![Vec::new(); t.nodes.len()];
        let mut in_degree = vec![0usize; t.nodes.len()];
        for (edge, e) in t.edges.iter().enumerate() {
            let lookup = |id: &String| {
                index.get(id.as_str()).copied().ok_or_else(|| E::UnknownEdgeNode {
                    template: self.name(),
                    edge,
                    node: id.clone(),
                })
            };
            let (from, to) = (lookup(&e.from)?, lookup(&e.to)?);
            successors[from].push(to);
            in_degree[to] += 1;
        }
        let mut ready: Vec<usize> = (0..t.nodes.len()).filter(|&n| in_degree[n] == 0).collect();
        let mut visited = 0;
        while let Some(n) = ready.pop() {
            visited += 1;
            for &s in &successors[n] {
                in_degree[s] -= 1;
                if in_degree[s] == 0 {
                    ready.push(s);
                }
            }
        }
        if visited == t.nodes.len() {
            return Ok(());
        }
        let nodes = (0..t.nodes.len()).filter(|&n| in_degree[n] > 0).take(8).map(|n| t.nodes[n].id.clone()).collect();
        Err(E::Cycle { template: self.name(), nodes })
    }

    fn capture_order(&self, index: &HashMap<&str, usize>) -> Result {
        let t = self.template;
        let fail = |reason: String| E::CaptureOrder { template: self.name(), reason };
        if t.capture_order.len() != t.nodes.len() {
            return Err(fail(format!("it lists {} nodes, the template has {}", t.capture_order.len(), t.nodes.len())));
        }
        let mut seen = HashSet::new();
        for id in &t.capture_order {
            if !index.contains_key(id.as_str()) {
                return Err(fail(format!("`{id}` is not a node")));
            }
            if !seen.insert(id.as_str()) {
                return Err(fail(format!("`{id}` appears twice")));
            }
        }
        Ok(())
    }

    fn name(&self) -> String {
        self.template.name.clone()
    }
}

/// Byte offsets of a parameter blob that no slot covers: the gaps between slots, which
/// `param_layout` has checked are in order and apart.
fn padding(f: &Function) -> impl Iterator<Item = usize> + '_ {
    let ends = std::iter::once(0).chain(f.params.iter().map(|s| s.offset + s.size));
    ends.zip(f.params.iter().map(|s| s.offset)).flat_map(|(end, start)| end..start).map(|i| i as usize)
}
