//! Every rule of core format v2 (`docs/format-v2.md`, "Validation"), and of v1, which
//! reads as v2 without v2's fields. [`manifest`] checks the manifest alone and allocates
//! nothing sized by it; [`files`] checks the files it names. A core must pass both before
//! it may reach a GPU.

use std::{
    collections::{HashMap, HashSet},
    ops::Range,
    path::Path,
};

use crate::{
    errors::{FlagsError, ValidationError as E},
    flags::InstantiateFlags,
    format::{
        buffer_at,
        digest::{chunk_count, pieces, Piece, PieceHasher, CHUNK_BYTES_RANGE},
        hash_exactly, open_in_core, Arena, Buffer, BufferRef, Chunks, EdgeKind, Function, KernelNode, Manifest, Module,
        NodeOp, RecordedFlags, Shard, Template,
    },
    shards::ShardCap,
};

/// No device has an arena this large; a bigger size is a corrupt or hostile manifest.
pub const MAX_ARENA_BYTES: u64 = 1 << 42;
/// Module images larger than this are refused before they are hashed.
pub const MAX_MODULE_BYTES: u64 = 1 << 30;
/// The most kernel parameter bytes a launch may carry (CUDA 12.1 and later, Volta on).
pub const MAX_PARAM_BYTES: u64 = 32_764;
/// Dynamic shared memory a kernel may use without raising its function's limit.
pub const DEFAULT_DYNAMIC_SHARED_BYTES: u32 = 48 << 10;
/// No device has more shared memory per block than this (the H200 has 227 KiB).
const MAX_DYNAMIC_SHARED_BYTES: u32 = 256 << 10;
/// Blocks in a cluster, non-portable sizes included (16 on Hopper and Blackwell).
const MAX_CLUSTER_BLOCKS: u32 = 16;
/// Launch limits of every device since Volta: grid x, y, z and block x, y, z, threads.
const MAX_GRID: [u32; 3] = [(1 << 31) - 1, 65_535, 65_535];
const MAX_BLOCK: [u32; 3] = [1024, 1024, 64];
const MAX_THREADS: u64 = 1024;

type Result<T = ()> = std::result::Result<T, E>;

/// Checks the manifest alone: structure, references, layouts, flags and graph shape.
pub fn manifest(m: &Manifest) -> Result {
    m.format.readable()?;
    if m.format.version < 2 {
        v1_has_no_v2_field(m)?;
    }
    if m.format.version < 3 {
        older_has_no_v3_field(m)?;
    } else {
        v3_settled(m)?;
    }
    if m.context.tp_world_size == 0 || m.context.tp_rank >= m.context.tp_world_size {
        return Err(E::TensorParallel { rank: m.context.tp_rank, world: m.context.tp_world_size });
    }
    arena(&m.arena)?;
    shards(&m.arena, &m.shards)?;
    let buffers = BufferMap::new(&m.arena, &m.buffers)?;
    shard_digests(m)?;
    let modules = modules(&m.modules)?;
    unique("template", m.templates.iter().map(|t| t.name.as_str()))?;
    for template in &m.templates {
        TemplateCheck { template, modules: &modules, buffers: &buffers }.run()?;
    }
    expectations(m, &buffers)
}

/// A v1 core reads as v2 with every v2 field at its default; one that sets a v2 field is
/// neither.
fn v1_has_no_v2_field(m: &Manifest) -> Result {
    let found = |field, item: String| Err(E::V2FieldInV1 { field, item });
    if let Some(u) = m.unchecked.first() {
        return found("unchecked", format!("template `{}`", u.template));
    }
    if let Some(b) = m.buffers.iter().find(|b| !b.contents.is_stored()) {
        return found("contents", format!("buffer `{}`", b.name));
    }
    for f in m.modules.iter().flat_map(|module| &module.functions) {
        if !f.attributes.is_unset() {
            return found("attributes", format!("function `{}`", f.name));
        }
    }
    for t in &m.templates {
        if let Some(e) = t.edges.iter().find(|e| !e.kind.is_full()) {
            return found("kind", format!("edge {} -> {} of template `{}`", e.from, e.to, t.name));
        }
        for node in &t.nodes {
            let NodeOp::Kernel(k) = &node.op else { continue };
            if !k.launch.is_unset() {
                return found("launch", format!("node `{}` of template `{}`", node.id, t.name));
            }
            if k.pointers.iter().any(|p| p.at != 0) {
                return found("at", format!("a pointer of node `{}` of template `{}`", node.id, t.name));
            }
        }
    }
    Ok(())
}

fn older_has_no_v3_field(m: &Manifest) -> Result {
    let found = |field, item: String| Err(E::V3FieldInOlder { field, item, version: m.format.version });
    if let Some(module) = m.modules.iter().find(|module| module.provenance.is_some()) {
        return found("provenance", format!("module `{}`", module.id));
    }
    if !m.producer_seconds.is_empty() {
        return found("producer-seconds", "the manifest".into());
    }
    Ok(())
}

/// At most this many producer figures, so a manifest cannot flood a report.
pub const MAX_PRODUCER_FIGURES: usize = 32;

/// Producer figures are seconds under short kebab-case names.
fn producer_seconds(figures: &std::collections::BTreeMap<String, f64>) -> Result {
    let fail = |what: String| Err(E::Unsettled { item: "producer-seconds".into(), what });
    if figures.len() > MAX_PRODUCER_FIGURES {
        return fail(format!("{} figures, more than {MAX_PRODUCER_FIGURES}", figures.len()));
    }
    let kebab = |n: &str| {
        !n.is_empty() && n.len() <= 64 && n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    match figures.iter().find(|(name, s)| !kebab(name) || !s.is_finite() || **s < 0.0) {
        Some((name, s)) => fail(format!(
            "`{}` = {s}: names are kebab-case (at most 64 characters), values finite seconds ≥ 0",
            name.escape_debug()
        )),
        None => Ok(()),
    }
}

/// What v2 left an independent exporter to guess, v3 settles as rules.
fn v3_settled(m: &Manifest) -> Result {
    producer_seconds(&m.producer_seconds)?;
    let fail = |item: String, what: &str| Err(E::Unsettled { item, what: what.into() });
    let mut functions = HashMap::new();
    for module in &m.modules {
        for f in &module.functions {
            let item = || format!("function `{}` of module `{}`", f.name, module.id);
            if f.attributes.max_dynamic_shared_size_bytes.is_none() {
                return fail(item(), "max-dynamic-shared-size-bytes is missing: v3 records the driver's value for every function (it is 48 KiB less the static shared memory, never a fixed default)");
            }
            if f.attributes.non_portable_cluster_size_allowed == Some(false) {
                return fail(item(), "non-portable-cluster-size-allowed is false: write it as true or leave it out");
            }
            functions.insert((module.id.as_str(), f.name.as_str()), f);
        }
    }
    for t in &m.templates {
        for node in &t.nodes {
            let NodeOp::Kernel(k) = &node.op else { continue };
            let item = || format!("node `{}` of template `{}`", node.id, t.name);
            let l = &k.launch;
            if l.cooperative == Some(false) {
                return fail(item(), "cooperative is false: write it as true or leave it out");
            }
            if l.cluster_scheduling_policy.is_some() && l.cluster_dim.is_none() {
                return fail(item(), "cluster-scheduling-policy is recorded without cluster-dim");
            }
            let required = functions
                .get(&(k.module.as_str(), k.function.as_str()))
                .and_then(|f| f.attributes.required_cluster_dim);
            if let (Some(required), Some(dim)) = (required, l.cluster_dim) {
                if required != dim {
                    return fail(
                        item(),
                        &format!("cluster-dim {dim:?} differs from its function's required-cluster-dim {required:?}"),
                    );
                }
            }
            if let Some(p) = k.pointers.iter().find(|p| p.at % 8 != 0) {
                return fail(item(), &format!("pointer `at` {} of parameter {} is not a multiple of 8 (offsets count from the parameter's start)", p.at, p.param));
            }
        }
    }
    Ok(())
}

fn arena(a: &Arena) -> Result {
    let cap = ShardCap::new(a.shard_cap, a.granularity)?;
    if !a.base.is_multiple_of(cap.granularity()) {
        return Err(E::BaseMisaligned { base: a.base, granularity: a.granularity });
    }
    if a.size == 0 || a.size > MAX_ARENA_BYTES {
        return Err(E::ArenaSize { size: a.size, limit: MAX_ARENA_BYTES });
    }
    if a.base.checked_add(a.size).is_none() {
        return Err(E::ArenaOverflow { base: a.base, size: a.size });
    }
    Ok(())
}

/// A v3 shard's chunk digests: a chunk size v3 allows, one digest per chunk of its
/// `stored` bytes, each 32 lowercase hexadecimal digits.
fn chunks_fit(s: &Shard, c: &Chunks, stored: u64) -> Result {
    let settled = |what: String| Err(E::Unsettled { item: format!("shard {}", s.index), what });
    if !c.bytes.is_power_of_two() || !CHUNK_BYTES_RANGE.contains(&c.bytes) {
        return settled(format!("chunk size {} is not a power of two from 4 KiB to 1 GiB", c.bytes));
    }
    let needed = chunk_count(stored, c.bytes).expect("a chunk size of at least 4 KiB");
    if c.xxh3_128.len() != needed {
        let found = c.xxh3_128.len();
        return settled(format!(
            "{found} chunk digests for {stored} stored bytes in chunks of {}; {needed} are needed",
            c.bytes
        ));
    }
    for (i, d) in c.xxh3_128.iter().enumerate() {
        hex_digest(|| format!("shard {} chunk {i}", s.index), d, 32)?;
    }
    Ok(())
}

/// A SHA-256 as the format writes it: 64 lowercase hexadecimal digits.
fn digest(item: impl FnOnce() -> String, digest: &str) -> Result {
    hex_digest(item, digest, 64)
}

/// A digest of `digits` lowercase hexadecimal digits.
fn hex_digest(item: impl FnOnce() -> String, digest: &str, digits: usize) -> Result {
    let lower_hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    if digest.len() == digits && digest.chars().all(lower_hex) {
        return Ok(());
    }
    Err(E::DigestFormat { item: item(), digest: digest.chars().take(80).collect(), digits })
}

/// v1 and v2 shards carry a SHA-256 of the file; v3 shards a digest per chunk, as many as
/// the stored length needs.
fn shard_digests(m: &Manifest) -> Result {
    for s in &m.shards {
        let item = || format!("shard {}", s.index);
        let settled = |what: String| Err(E::Unsettled { item: item(), what });
        match (m.format.version, &s.sha256, &s.chunks) {
            (1 | 2, Some(sha256), None) => digest(item, sha256)?,
            (1 | 2, _, Some(_)) => {
                return Err(E::V3FieldInOlder { field: "chunks", item: item(), version: m.format.version })
            }
            (1 | 2, None, None) => return Err(E::DigestFormat { item: item(), digest: String::new(), digits: 64 }),
            (_, Some(_), _) => return settled("carries a whole-file sha256; v3 shards carry chunk digests".into()),
            (_, None, None) => return settled("has no chunk digests".into()),
            (_, None, Some(c)) => chunks_fit(s, c, m.stored_len(s))?,
        }
    }
    Ok(())
}

fn shards(a: &Arena, shards: &[Shard]) -> Result {
    let mut covered = 0u64;
    for (position, s) in shards.iter().enumerate() {
        let file = || s.file.clone();
        if s.index as usize != position {
            return Err(E::ShardIndex { position, index: s.index });
        }
        if s.size == 0 {
            return Err(E::ShardEmpty { index: s.index, file: file() });
        }
        if s.size > a.shard_cap {
            return Err(E::ShardOverCap { index: s.index, file: file(), size: s.size, cap: a.shard_cap });
        }
        if s.offset % a.granularity != 0 || s.size % a.granularity != 0 {
            return Err(E::ShardMisaligned {
                index: s.index,
                file: file(),
                offset: s.offset,
                granularity: a.granularity,
            });
        }
        if s.offset < covered {
            return Err(E::ShardOverlap { index: s.index, file: file(), offset: s.offset, previous_end: covered });
        }
        if s.offset > covered {
            return Err(E::ShardGap { index: s.index, file: file(), offset: s.offset, previous_end: covered });
        }
        let end = s.offset.saturating_add(s.size);
        if end > a.size.next_multiple_of(a.granularity) {
            return Err(E::ExtraShard { index: s.index, file: file(), span: s.offset..end, arena_size: a.size });
        }
        covered = end;
    }
    if covered < a.size {
        return Err(E::MissingShard { covered, arena_size: a.size });
    }
    Ok(())
}

fn unique<'a>(kind: &'static str, names: impl Iterator<Item = &'a str>) -> Result {
    first_duplicate(names).map_or(Ok(()), |name| Err(E::Duplicate { kind, name: name.into() }))
}

/// The first item that appears a second time.
fn first_duplicate<T: Eq + std::hash::Hash + Copy>(items: impl Iterator<Item = T>) -> Option<T> {
    let mut seen = HashSet::new();
    items.into_iter().find(|&item| !seen.insert(item))
}

/// Buffers sorted by offset, for name lookups and address lookups.
struct BufferMap<'m> {
    base: u64,
    sorted: Vec<&'m Buffer>,
    by_name: HashMap<&'m str, &'m Buffer>,
}

impl<'m> BufferMap<'m> {
    fn new(a: &Arena, buffers: &'m [Buffer]) -> Result<Self> {
        unique("buffer", buffers.iter().map(|b| b.name.as_str()))?;
        for b in buffers {
            let span = b.offset..b.offset.saturating_add(b.size);
            if span.end > a.size || b.size == 0 {
                return Err(E::BufferOutsideArena { buffer: b.name.clone(), span, arena_size: a.size });
            }
        }
        let mut sorted: Vec<&Buffer> = buffers.iter().collect();
        sorted.sort_by_key(|b| b.offset);
        for pair in sorted.windows(2) {
            let end = pair[0].offset + pair[0].size;
            if pair[1].offset < end {
                let overlap = pair[1].offset..end.min(pair[1].offset + pair[1].size);
                return Err(E::BuffersOverlap { first: pair[0].name.clone(), second: pair[1].name.clone(), overlap });
            }
        }
        let by_name = buffers.iter().map(|b| (b.name.as_str(), b)).collect();
        Ok(Self { base: a.base, sorted, by_name })
    }

    fn contains_address(&self, address: u64) -> bool {
        address.checked_sub(self.base).is_some_and(|offset| buffer_at(&self.sorted, offset).is_some())
    }
}

type ModuleMap<'m> = HashMap<&'m str, HashMap<&'m str, &'m Function>>;

fn modules(modules: &[Module]) -> Result<ModuleMap<'_>> {
    unique("module", modules.iter().map(|m| m.id.as_str()))?;
    let mut map = HashMap::new();
    for module in modules {
        digest(|| format!("module `{}`", module.id), &module.sha256)?;
        unique("function", module.functions.iter().map(|f| f.name.as_str()))?;
        for f in &module.functions {
            param_layout(module, f)?;
            function_attributes(f)?;
        }
        map.insert(module.id.as_str(), module.functions.iter().map(|f| (f.name.as_str(), f)).collect());
    }
    Ok(map)
}

fn param_layout(module: &Module, f: &Function) -> Result {
    let mut end = 0;
    for (param, slot) in f.params.iter().enumerate() {
        let span = slot.offset..slot.offset.saturating_add(slot.size);
        if slot.offset < end || slot.size == 0 {
            return Err(E::ParamLayout { module: module.id.clone(), function: f.name.clone(), param, span });
        }
        if span.end > MAX_PARAM_BYTES {
            let (module, function, limit) = (module.id.clone(), f.name.clone(), MAX_PARAM_BYTES);
            return Err(E::ParamPastLimit { module, function, param, span, limit });
        }
        end = span.end;
    }
    Ok(())
}

fn function_attributes(f: &Function) -> Result {
    let fail = |what: String| Err(E::Attribute { item: format!("function `{}`", f.name), what });
    let a = &f.attributes;
    if let Some(bytes) = a.max_dynamic_shared_size_bytes.filter(|&b| b > MAX_DYNAMIC_SHARED_BYTES) {
        return fail(format!("max-dynamic-shared-size-bytes {bytes} is above any device's {MAX_DYNAMIC_SHARED_BYTES}"));
    }
    if let Some(carveout) = a.preferred_shared_memory_carveout.filter(|c| !(-1..=100).contains(c)) {
        return fail(format!("preferred-shared-memory-carveout {carveout} is not a percentage or -1"));
    }
    let Some(dim) = a.required_cluster_dim else { return Ok(()) };
    cluster(dim).map_or(Ok(()), |what| fail(format!("required-cluster-dim {dim:?} {what}")))
}

/// Why a cluster shape cannot be launched, if it cannot.
fn cluster(dim: [u32; 3]) -> Option<String> {
    let blocks = dim.iter().try_fold(1u32, |n, &d| n.checked_mul(d));
    match blocks {
        _ if dim.contains(&0) => Some("has a zero dimension".into()),
        Some(n) if n <= MAX_CLUSTER_BLOCKS => None,
        _ => Some(format!("holds more than {MAX_CLUSTER_BLOCKS} blocks")),
    }
}

/// Checks one template against the core's modules and buffers.
struct TemplateCheck<'a, 'm> {
    template: &'m Template,
    modules: &'a ModuleMap<'m>,
    buffers: &'a BufferMap<'m>,
}

impl TemplateCheck<'_, '_> {
    fn run(&self) -> Result {
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

/// Exactly one source, and a supported value from it.
pub fn recorded_flags(flags: &RecordedFlags) -> std::result::Result<InstantiateFlags, FlagsError> {
    match (flags.explicit, flags.from_executable) {
        (Some(_), Some(_)) => Err(FlagsError::BothSources),
        (None, None) => Err(FlagsError::NoSource),
        (Some(v), None) | (None, Some(v)) => InstantiateFlags::new(v),
    }
}

/// Every template has an expected output or says why not (`unchecked`), never both, and
/// at least one template is checked.
fn checked(m: &Manifest) -> Result {
    unique("unchecked template", m.unchecked.iter().map(|u| u.template.as_str()))?;
    // Sets, not searches: a core may hold tens of thousands of templates.
    let templates: HashSet<&str> = m.templates.iter().map(|t| t.name.as_str()).collect();
    let expected: HashSet<&str> =
        m.expectations.iter().filter(|e| !e.outputs.is_empty()).map(|e| e.template.as_str()).collect();
    let unchecked: HashSet<&str> = m.unchecked.iter().map(|u| u.template.as_str()).collect();
    let fail = |template: &str, what| Err(E::Unchecked { template: template.into(), what });
    for u in &m.unchecked {
        if !templates.contains(u.template.as_str()) {
            return fail(&u.template, "is declared unchecked, but the core has no such template");
        }
        if u.reason.trim().is_empty() {
            return fail(&u.template, "is declared unchecked without a reason");
        }
        if expected.contains(u.template.as_str()) {
            return fail(&u.template, "is declared unchecked, but has expected outputs");
        }
    }
    let is_unchecked = |t: &Template| unchecked.contains(t.name.as_str());
    if let Some(t) = m.templates.iter().find(|t| !expected.contains(t.name.as_str()) && !is_unchecked(t)) {
        return fail(&t.name, "has no expected output and is not declared unchecked: nothing of it would be compared");
    }
    if !m.templates.is_empty() && m.templates.iter().all(is_unchecked) {
        return Err(E::NothingChecked);
    }
    Ok(())
}

fn expectations(m: &Manifest, buffers: &BufferMap) -> Result {
    let templates: HashSet<&str> = m.templates.iter().map(|t| t.name.as_str()).collect();
    unique("expectation of template", m.expectations.iter().map(|e| e.template.as_str()))?;
    for (index, e) in m.expectations.iter().enumerate() {
        if !templates.contains(e.template.as_str()) {
            return Err(E::ExpectationTarget { index, kind: "template", name: e.template.clone() });
        }
        if let Some(o) = e.outputs.iter().find(|o| !buffers.by_name.contains_key(o.buffer.as_str())) {
            return Err(E::ExpectationTarget { index, kind: "buffer", name: o.buffer.clone() });
        }
        for o in &e.outputs {
            digest(|| format!("expectation of template `{}` output `{}`", e.template, o.buffer), &o.sha256)?;
        }
        if let Some(name) = first_duplicate(e.outputs.iter().map(|o| o.buffer.as_str())) {
            return Err(E::DuplicateIn { template: e.template.clone(), kind: "expected output", name: name.into() });
        }
        if let Some(value) = e.tolerance.filter(|t| !t.is_finite() || *t < 0.0) {
            return Err(E::Tolerance { template: e.template.clone(), value });
        }
    }
    checked(m)
}

/// Whether [`files`] hashes shard contents now or leaves them to the upload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardContents {
    Hashed,
    /// Replay's streaming upload hashes each shard on the bytes it copies.
    HashedOnUpload,
}

/// Checks the files the manifest names: inside the core, regular files, no links, declared
/// sizes (before reading), and hashes.
pub fn files(m: &Manifest, dir: &Path, shards: ShardContents) -> Result {
    let shard = |s: &Shard| {
        let stored = m.stored_len(s);
        verify_file(dir, &format!("shard {}", s.index), &s.file, None, |len| (len != stored).then_some(stored))
    };
    let module = |module: &Module| {
        verify_file(dir, &format!("module `{}`", module.id), &module.file, Some(&module.sha256), module_too_large)?;
        runs_on_core_arch(dir, module, m.context.sm)
    };
    in_parallel(&m.shards, shard)?;
    if shards == ShardContents::Hashed {
        in_parallel(&pieces(m), |piece| verify_piece(dir, piece))?;
    }
    in_parallel(&m.modules, module)
}

/// Hashes one piece of a shard file (whose size was checked) against its digest.
fn verify_piece(dir: &Path, piece: &Piece) -> Result {
    let item = piece.name();
    let file = open_in_core(dir, &piece.shard.file, &item)?;
    let mut hasher = PieceHasher::of(piece);
    let unreadable = |e: std::io::Error| E::FileUnreadable {
        item: item.clone(),
        path: piece.shard.file.clone(),
        reason: e.to_string(),
    };
    let mut buffer = vec![0u8; (1 << 20).min(piece.bytes.end - piece.bytes.start) as usize];
    let mut at = piece.bytes.start;
    while at < piece.bytes.end {
        let len = buffer.len().min((piece.bytes.end - at) as usize);
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut buffer[..len], at).map_err(unreadable)?;
        hasher.update(&buffer[..len]);
        at += len as u64;
    }
    let (kind, found) = (hasher.name(), hasher.finish());
    match found == piece.expected {
        true => Ok(()),
        false => {
            Err(E::HashMismatch { item, path: piece.shard.file.clone(), kind, expected: piece.expected.into(), found })
        }
    }
}

/// Runs `check` on every item, on as many threads as the machine has (hashing is the
/// cost, and one SHA-256 stream is about 1 GB/s), and returns the error of the first
/// item in order, so the verdict does not depend on which thread finished first.
fn in_parallel<T: Sync>(items: &[T], check: impl Fn(&T) -> Result + Sync) -> Result {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut errors: Vec<(usize, E)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut errors = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { return errors };
                        errors.extend(check(item).err().map(|e| (i, e)));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("a check does not panic")).collect()
    });
    errors.sort_by_key(|(i, _)| *i);
    errors.into_iter().next().map_or(Ok(()), |(_, e)| Err(e))
}

/// Refuses a module whose image has no code for the core's arch: replay checks the core's
/// arch against the runner's, so this is what keeps an image the runner cannot load from
/// reaching it.
fn runs_on_core_arch(dir: &Path, module: &Module, sm: u32) -> Result {
    let unreadable = |reason: String| E::ImageArch { module: module.id.clone(), reason };
    let mut head = Vec::with_capacity(crate::format::IMAGE_HEAD_BYTES);
    let file = open_in_core(dir, &module.file, &format!("module `{}`", module.id))?;
    std::io::Read::read_to_end(&mut std::io::Read::take(file, crate::format::IMAGE_HEAD_BYTES as u64), &mut head)
        .map_err(|e| unreadable(e.to_string()))?;
    let image = crate::format::image_arch(module.kind, &head).map_err(unreadable)?;
    match image.runs_on(module.kind, sm) {
        true => Ok(()),
        false => Err(E::NoCodeForArch { module: module.id.clone(), image: image.to_string(), core: sm }),
    }
}

/// The size a module may have, when `len` is past it.
fn module_too_large(len: u64) -> Option<u64> {
    (len > MAX_MODULE_BYTES).then_some(MAX_MODULE_BYTES)
}

/// `size_rule` returns the size the manifest allows when the file's length breaks it;
/// `sha256: None` leaves the contents unhashed.
fn verify_file(
    dir: &Path,
    item: &str,
    relative: &str,
    sha256: Option<&str>,
    size_rule: impl Fn(u64) -> Option<u64>,
) -> Result {
    let file = open_in_core(dir, relative, item)?;
    let unreadable =
        |e: std::io::Error| E::FileUnreadable { item: item.into(), path: relative.into(), reason: e.to_string() };
    let found = file.metadata().map_err(unreadable)?.len();
    if let Some(declared) = size_rule(found) {
        return Err(E::FileSize { item: item.into(), path: relative.into(), declared, found });
    }
    let Some(sha256) = sha256 else {
        return Ok(());
    };
    let actual = hash_exactly(file, found).map_err(unreadable)?;
    if actual != sha256 {
        return Err(E::HashMismatch {
            item: item.into(),
            path: relative.into(),
            kind: "SHA-256",
            expected: sha256.into(),
            found: actual,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever thread finishes first, the error is the first failing item's, and every
    /// item is checked once.
    #[test]
    fn parallel_checks_report_the_first_failure_in_order() {
        let items: Vec<usize> = (0..200).collect();
        let checked = std::sync::atomic::AtomicUsize::new(0);
        let verdict = in_parallel(&items, |&i| {
            checked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            match i % 7 == 3 || i == 150 {
                true => Err(E::Unsettled { item: i.to_string(), what: "planted".into() }),
                false => Ok(()),
            }
        });
        assert!(matches!(verdict, Err(E::Unsettled { item, .. }) if item == "3"));
        assert_eq!(checked.into_inner(), 200);
        assert!(in_parallel(&items[..0], |_| Err(E::Unsettled { item: "x".into(), what: "y".into() })).is_ok());
    }

    /// Every way a producer's figure can be wrong, each at its boundary.
    #[test]
    fn producer_seconds_are_few_kebab_named_finite_and_not_negative() {
        let check = |figures: &[(&str, f64)]| {
            producer_seconds(&figures.iter().map(|(n, s)| (n.to_string(), *s)).collect()).is_ok()
        };
        let name64 = "a".repeat(64);
        assert!(check(&[("warm-up-s", 0.0), ("capture-2-s", 1e9), (&name64, 1.0)]));
        for bad in ["", "Warm-up-s", "warm_up_s", "warm up", &"a".repeat(65)] {
            assert!(!check(&[(bad, 1.0)]), "name {bad:?}");
        }
        for bad in [-0.001, f64::NAN, f64::INFINITY] {
            assert!(!check(&[("s", bad)]), "value {bad}");
        }
        let names: Vec<String> = (0..=MAX_PRODUCER_FIGURES).map(|i| format!("f{i}")).collect();
        let figures = |n: usize| names[..n].iter().map(|n| (n.as_str(), 1.0)).collect::<Vec<_>>();
        assert!(check(&figures(MAX_PRODUCER_FIGURES)));
        assert!(!check(&figures(MAX_PRODUCER_FIGURES + 1)));
    }

    /// Pieces longer than the read buffer, and not a multiple of it, are hashed to exactly
    /// their end: a whole v2 file and a v3 chunk in the middle of one.
    #[test]
    fn a_piece_is_hashed_to_exactly_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let bytes: Vec<u8> = (0..(3u64 << 20) + 123).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(dir.path().join("s.bin"), &bytes).unwrap();
        let sha256 = crate::format::hash_hex(&bytes[..]).unwrap();
        let shard = Shard { index: 0, offset: 0, size: 4 << 20, file: "s.bin".into(), sha256: None, chunks: None };
        let middle = (1u64 << 20) + 5..(2u64 << 20) + 700;
        let chunk = crate::format::digest::chunk_digests(&bytes[middle.start as usize..middle.end as usize], 1 << 30);
        let pieces = [(0..bytes.len() as u64, None, sha256.as_str()), (middle, Some(1), chunk.xxh3_128[0].as_str())];
        for (range, chunk, expected) in pieces {
            let piece = Piece { shard: &shard, bytes: range.clone(), chunk, expected };
            assert!(verify_piece(dir.path(), &piece).is_ok(), "{range:?}");
            let wrong = "0".repeat(expected.len());
            let piece = Piece { shard: &shard, bytes: range, chunk, expected: &wrong };
            assert!(matches!(verify_piece(dir.path(), &piece), Err(E::HashMismatch { .. })));
        }
    }

    /// At the boundary without a 1 GiB file: hashing one would take the CPU suite seconds.
    #[test]
    fn a_module_of_exactly_the_limit_is_allowed() {
        assert_eq!(module_too_large(MAX_MODULE_BYTES), None);
        assert_eq!(module_too_large(MAX_MODULE_BYTES + 1), Some(MAX_MODULE_BYTES));
    }
}
