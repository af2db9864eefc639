//! What a valid core holds, in a few lines: what `gnomon validate` prints after every rule
//! passed, and what a port's reviewers read before they trust a replay of it.

use std::collections::{BTreeMap, BTreeSet};

use bytesize::ByteSize;
use serde::Serialize;

use crate::{
    validate::{recorded_flags, DEFAULT_DYNAMIC_SHARED_BYTES},
    {EdgeKind, LaunchAttributes, Manifest, ModuleKind, NodeOp},
};

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Account {
    pub format_version: u32,
    pub templates: usize,
    pub nodes: usize,
    pub edges: usize,
    pub buffers: usize,
    pub shards: usize,
    pub arena_bytes: u64,
    /// Of the arena, what replay maps: up to the end of the last buffer.
    pub mapped_bytes: u64,
    /// Bytes in shard files: what a replay reads from disk.
    pub stored_bytes: u64,
    pub modules: usize,
    /// (v3) Modules by the library that loaded them: `N from LIBRARY VERSION`, runtime
    /// compilation said; empty when no module records its provenance.
    pub provenance: Vec<String>,
    /// Instantiation flags the templates use, each once.
    pub flags_used: BTreeSet<u64>,
    /// Function and launch attributes replay must set, and typed edges it must rebuild.
    pub attributes: Vec<String>,
    /// Templates whose outputs are not compared, each with the core's reason.
    pub unchecked: Vec<String>,
    /// (v3) Outputs the exporter's launches did not give alike: `TEMPLATE/BUFFER (N
    /// digests over L launches, K ULP, from node X)`, judged by what those launches gave.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub varying: Vec<String>,
    /// (v3) Ranges of peers' arenas this rank maps: `rank R bytes A..B at ADDRESS`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<String>,
    /// The arch the modules were built for (`sm_90`).
    pub arch: String,
    /// Whether any module is PTX, which the driver compiles at load.
    pub ptx: bool,
    /// The driver the core was made with, `major.minor`.
    pub driver: String,
    pub device_name: String,
    pub producer: String,
    pub tp_rank: u32,
    pub tp_world_size: u32,
    /// Templates with at least one expected output, over all templates.
    pub templates_checked: usize,
}

/// Each varying output, said in a few words.
fn varying(m: &Manifest) -> Vec<String> {
    let mut said = Vec::new();
    for e in &m.expectations {
        for (o, v) in e.outputs.iter().filter_map(|o| Some((o, o.variation.as_ref()?))) {
            let from = match v.nodes.as_slice() {
                [] => String::new(),
                [node] => format!(", from node {node}"),
                [node, ..] => format!(", from {} nodes of its kernel, {node} first", v.nodes.len()),
            };
            let envelope = v.envelope();
            let seen = match &v.spread_of {
                Some(of) => {
                    format!("1 digest over {} launches, the spread of {}/{}", v.launches, of.template, of.buffer)
                }
                None => format!("{} digests over {} launches", v.sha256s.len() + 1, v.launches),
            };
            said.push(format!(
                "{}/{} ({seen}: |x − first| ≤ {:.3e} + {:.3e}·|first|, at most {:.4} of elements{from})",
                e.template, o.buffer, envelope.atol, envelope.rtol, v.differing_fraction
            ));
        }
    }
    said
}

impl Account {
    /// The account of a manifest that passed validation (its flags are valid).
    pub fn of(m: &Manifest) -> Self {
        let c = &m.context;
        let flags_used = m.templates.iter().filter_map(|t| recorded_flags(&t.flags).ok()).map(|f| f.bits()).collect();
        let expected = m.expectations_by_template();
        let checked = |name: &str| expected.get(name).is_some_and(|e| !e.outputs.is_empty());
        Self {
            format_version: m.format.version,
            templates: m.templates.len(),
            nodes: m.templates.iter().map(|t| t.nodes.len()).sum(),
            edges: m.templates.iter().map(|t| t.edges.len()).sum(),
            buffers: m.buffers.len(),
            shards: m.shards.len(),
            arena_bytes: m.arena.size,
            mapped_bytes: m.mapped_ranges().iter().map(|(_, size)| size).sum(),
            stored_bytes: m.shards.iter().map(|s| m.stored_len(s)).sum(),
            modules: m.modules.len(),
            provenance: provenance(m),
            flags_used,
            attributes: needs(m),
            unchecked: m.unchecked.iter().map(|u| format!("{} ({})", u.template, u.reason)).collect(),
            varying: varying(m),
            peers: m
                .peers
                .iter()
                .map(|p| format!("rank {} bytes {:#x}..{:#x} at {:#x}", p.rank, p.offset, p.offset + p.size, p.address))
                .collect(),
            arch: format!("sm_{}", c.sm),
            ptx: m.modules.iter().any(|module| module.kind == ModuleKind::Ptx),
            driver: format!("{}.{}", c.driver_version / 1000, c.driver_version % 1000 / 10),
            device_name: c.device_name.clone(),
            producer: format!("{} {}", c.producer.name, c.producer.version),
            tp_rank: c.tp_rank,
            tp_world_size: c.tp_world_size,
            templates_checked: m.templates.iter().filter(|t| checked(&t.name)).count(),
        }
    }
}

fn provenance(m: &Manifest) -> Vec<String> {
    let mut by_library: BTreeMap<String, usize> = BTreeMap::new();
    for p in m.modules.iter().filter_map(|module| module.provenance.as_ref()) {
        let version = p.version.as_ref().map(|v| format!(" {v}")).unwrap_or_default();
        let compiled = if p.runtime_compiled { ", runtime-compiled" } else { "" };
        *by_library.entry(format!("{}{version}{compiled}", p.library)).or_insert(0) += 1;
    }
    by_library.into_iter().map(|(library, n)| format!("{n} from {library}")).collect()
}

/// What replay must set beyond v1: function attributes by function, launch attributes
/// and typed edges by how many nodes and edges carry them.
fn needs(m: &Manifest) -> Vec<String> {
    let mut needs = Vec::new();
    for f in m.modules.iter().flat_map(|module| &module.functions) {
        let a = &f.attributes;
        let big = a.max_dynamic_shared_size_bytes.filter(|&b| b > DEFAULT_DYNAMIC_SHARED_BYTES);
        needs.extend(big.map(|b| format!("`{}` max-dynamic-shared-size-bytes {b}", f.name)));
        needs.extend(
            a.preferred_shared_memory_carveout.map(|c| format!("`{}` preferred-shared-memory-carveout {c}", f.name)),
        );
        needs.extend(a.required_cluster_dim.map(|d| format!("`{}` required-cluster-dim {d:?}", f.name)));
        needs.extend(
            a.non_portable_cluster_size_allowed.map(|_| format!("`{}` non-portable-cluster-size-allowed", f.name)),
        );
        needs.extend(a.cluster_scheduling_policy.map(|p| format!("`{}` cluster-scheduling-policy {p:?}", f.name)));
    }
    let kernels = || {
        m.templates.iter().flat_map(|t| &t.nodes).filter_map(|n| match &n.op {
            NodeOp::Kernel(k) => Some(&k.launch),
            _ => None,
        })
    };
    let counted: [(&str, fn(&LaunchAttributes) -> bool); 5] = [
        ("priority", |l| l.priority.is_some()),
        ("cluster-dim", |l| l.cluster_dim.is_some()),
        ("cluster-scheduling-policy", |l| l.cluster_scheduling_policy.is_some()),
        ("cooperative", |l| l.cooperative.is_some()),
        ("mem-sync-domain", |l| l.mem_sync_domain.is_some()),
    ];
    for (name, set) in counted {
        let n = kernels().filter(|l| set(l)).count();
        needs.extend((n > 0).then(|| format!("{name} on {n} nodes")));
    }
    for (name, kind) in [("programmatic", EdgeKind::Programmatic), ("launch-order", EdgeKind::LaunchOrder)] {
        let n = m.templates.iter().flat_map(|t| &t.edges).filter(|e| e.kind == kind).count();
        needs.extend((n > 0).then(|| format!("{n} {name} edges")));
    }
    needs
}

impl Account {
    /// The account as lines of text, each one line whatever the manifest's names hold: a
    /// printer escapes each line (names are data), never the text joined.
    pub fn lines(&self) -> Vec<String> {
        let flags: Vec<String> = self.flags_used.iter().map(u64::to_string).collect();
        let attributes = match (self.attributes.is_empty(), self.format_version) {
            (true, 1) => "none (format v1 records no function or launch attributes)".to_owned(),
            (true, _) => "none".to_owned(),
            (false, _) => self.attributes.join(", "),
        };
        let jit = if self.ptx { ", PTX compiled by the driver at load" } else { "" };
        let mut lines = vec![
            format!(
                "format v{}, made by {} on {} (driver {})",
                self.format_version, self.producer, self.device_name, self.driver
            ),
            format!(
                "templates: {} ({} with expected outputs), nodes: {}, edges: {}",
                self.templates, self.templates_checked, self.nodes, self.edges
            ),
            format!(
                "arena: {} in {} shards ({} stored, {} mapped at replay), {} buffers",
                ByteSize(self.arena_bytes),
                self.shards,
                ByteSize(self.stored_bytes),
                ByteSize(self.mapped_bytes),
                self.buffers
            ),
            format!("modules: {} for {}{jit}", self.modules, self.arch),
        ];
        if !self.provenance.is_empty() {
            lines.push(format!("loaded by: {}", self.provenance.join("; ")));
        }
        lines.push(format!("flags used: {}", flags.join(", ")));
        lines.push(format!("attributes needed: {attributes}"));
        if !self.varying.is_empty() {
            lines.push(format!("outputs varying between launches: {}", self.varying.join(", ")));
        }
        if !self.unchecked.is_empty() {
            lines.push(format!("unchecked templates: {}", self.unchecked.join(", ")));
        }
        if !self.peers.is_empty() {
            lines.push(format!("peer ranges mapped: {}", self.peers.join(", ")));
        }
        lines.push(format!("tensor-parallel rank {} of {}", self.tp_rank, self.tp_world_size));
        lines
    }
}
