//! What a valid core holds, in a few lines: what `gnomon validate` prints after every rule
//! passed, and what a port's reviewers read before they trust a replay of it.

use std::{collections::BTreeSet, fmt};

use bytesize::ByteSize;
use serde::Serialize;

use crate::{
    format::{Manifest, ModuleKind},
    validate::recorded_flags,
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
    /// Bytes in shard files: what a replay reads from disk.
    pub stored_bytes: u64,
    pub modules: usize,
    /// Instantiation flags the templates use, each once.
    pub flags_used: BTreeSet<u64>,
    /// Function and launch attributes replay must set; format v1 records none.
    pub attributes: Vec<String>,
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

impl Account {
    /// The account of a manifest that passed validation (its flags are valid).
    pub fn of(m: &Manifest) -> Self {
        let c = &m.context;
        let flags_used = m.templates.iter().filter_map(|t| recorded_flags(&t.flags).ok()).map(|f| f.bits()).collect();
        let checked = |name: &str| m.expectations.iter().any(|e| e.template == name && !e.outputs.is_empty());
        Self {
            format_version: m.format.version,
            templates: m.templates.len(),
            nodes: m.templates.iter().map(|t| t.nodes.len()).sum(),
            edges: m.templates.iter().map(|t| t.edges.len()).sum(),
            buffers: m.buffers.len(),
            shards: m.shards.len(),
            arena_bytes: m.arena.size,
            stored_bytes: m.shards.iter().map(|s| s.size).sum(),
            modules: m.modules.len(),
            flags_used,
            attributes: Vec::new(),
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

impl fmt::Display for Account {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags: Vec<String> = self.flags_used.iter().map(u64::to_string).collect();
        let attributes = match self.attributes.is_empty() {
            true => format!("none (format v{} records no function or launch attributes)", self.format_version),
            false => self.attributes.join(", "),
        };
        let jit = if self.ptx { ", PTX compiled by the driver at load" } else { "" };
        writeln!(
            f,
            "format v{}, made by {} on {} (driver {})",
            self.format_version, self.producer, self.device_name, self.driver
        )?;
        writeln!(
            f,
            "templates: {} ({} with expected outputs), nodes: {}, edges: {}",
            self.templates, self.templates_checked, self.nodes, self.edges
        )?;
        writeln!(
            f,
            "arena: {} in {} shards ({} stored), {} buffers",
            ByteSize(self.arena_bytes),
            self.shards,
            ByteSize(self.stored_bytes),
            self.buffers
        )?;
        writeln!(f, "modules: {} for {}{jit}", self.modules, self.arch)?;
        writeln!(f, "flags used: {}", flags.join(", "))?;
        writeln!(f, "attributes needed: {attributes}")?;
        write!(f, "tensor-parallel rank {} of {}", self.tp_rank, self.tp_world_size)
    }
}
