//! Every rule of core format v3 (`docs/format-v3.md`, "Validation"), and of v2 and v1,
//! which read as v3 without its fields. [`manifest`] checks the manifest alone and
//! allocates nothing sized by it (each template's rules are in `template.rs`); [`files`]
//! checks the files it names (`files.rs`); [`Core`] is a core directory that passed both,
//! the only kind that may reach a GPU (`open.rs`). The rules read the format's types and
//! its I/O; nothing in `format` reads the rules.

use std::{
    collections::{HashMap, HashSet},
    ops::Range,
};

use crate::{
    errors::{FlagsError, ValidationError as E},
    flags::InstantiateFlags,
    shards::ShardCap,
    spread::Distance,
    {
        buffer_at,
        digest::{chunk_count, CHUNK_BYTES_RANGE},
        Arena, Buffer, Chunks, Function, Manifest, Module, NodeOp, PeerRange, RecordedFlags, Shard, Speed, Template,
        Variation,
    },
};

mod files;
mod generators;
mod open;
mod template;

pub use files::{files, ModuleImages, ShardContents};
pub use open::{Core, Opening};
use template::TemplateCheck;

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

/// Nodes from which templates are checked on every core: a restore opens its core first,
/// and below this threads cost more than they save.
const PARALLEL_FROM_NODES: usize = 10_000;

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
    let buffers = BufferMap::new(&m.arena, &m.buffers)?.with_peers(peers(m)?);
    shard_digests(m)?;
    let modules = modules(&m.modules)?;
    unique("template", m.templates.iter().map(|t| t.name.as_str()))?;
    let check = |template| TemplateCheck { template, modules: &modules, buffers: &buffers }.run();
    let nodes: usize = m.templates.iter().map(|t| t.nodes.len()).sum();
    match nodes < PARALLEL_FROM_NODES {
        true => m.templates.iter().try_for_each(check)?,
        // In template order: the error reported is the first template's, on any core count.
        false => crate::on_cores::map(m.templates.len(), |i| check(&m.templates[i])).into_iter().collect::<Result>()?,
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
    if !m.peers.is_empty() {
        return found("peers", "the manifest".into());
    }
    if !m.generators.is_empty() {
        return found("generators", "the manifest".into());
    }
    for e in &m.expectations {
        if let Some(o) = e.outputs.iter().find(|o| o.variation.is_some()) {
            return found("variation", output_item(&e.template, &o.buffer));
        }
        if let Some(o) = e.outputs.iter().find(|o| o.element.is_some()) {
            return found("element", output_item(&e.template, &o.buffer));
        }
        if e.speed.is_some() {
            return found("speed", format!("expectation of template `{}`", e.template));
        }
    }
    Ok(())
}

fn output_item(template: &str, buffer: &str) -> String {
    format!("expectation of template `{template}` output `{buffer}`")
}

/// An output's declared element (v3) divides its buffer and is its variation's, if any.
fn element(template: &str, buffer: &Buffer, o: &crate::OutputDigest) -> Result {
    let Some(element) = o.element else { return Ok(()) };
    let what = match &o.variation {
        _ if buffer.size % element.size() as u64 != 0 => {
            format!("its {} bytes are not a whole number of {element:?} elements", buffer.size)
        }
        Some(v) if v.element != element => format!("element {element:?}, but its variation's is {:?}", v.element),
        _ => return Ok(()),
    };
    Err(E::Unsettled { item: output_item(template, &buffer.name), what })
}

/// At most this many launches recorded of a varying output.
pub const MAX_VARIATION_LAUNCHES: u32 = 1 << 16;

/// A varying output (v3): its element divides the buffer, its launches and digests agree,
/// its spread is a spread, its file is named, and its nodes are the template's.
fn variation(template: &Template, buffer: &Buffer, sha256: &str, v: &Variation) -> Result {
    let fail = |what: String| Err(E::Unsettled { item: output_item(&template.name, &buffer.name), what });
    if buffer.size % v.element.size() as u64 != 0 {
        return fail(format!("its {} bytes are not a whole number of {:?} elements", buffer.size, v.element));
    }
    if !(2..=MAX_VARIATION_LAUNCHES).contains(&v.launches) {
        return fail(format!("variation over {} launches: 2 to {MAX_VARIATION_LAUNCHES} are recorded", v.launches));
    }
    match (&v.spread_of, v.sha256s.len()) {
        (None, n) if n == 0 || n >= v.launches as usize => {
            return fail(format!("{n} other digests over {} launches: 1 to one fewer than the launches", v.launches));
        }
        (Some(_), n) if n > 0 => {
            return fail(format!("takes another output's spread but lists {n} other digests of its own: none"));
        }
        _ => {}
    }
    for d in &v.sha256s {
        digest(|| output_item(&template.name, &buffer.name), d)?;
    }
    if let Some(d) = first_duplicate(v.sha256s.iter().map(String::as_str).chain([sha256])) {
        return fail(format!("digest {d} is listed twice (the first launch's included)"));
    }
    let spread_ok = v.max_abs.is_finite() && v.max_abs >= 0.0 && v.differing_fraction > 0.0;
    if !spread_ok || v.differing_fraction > 1.0 || (!v.element.is_float() && (v.max_abs, v.max_ulp) != (0.0, 0)) {
        return fail(format!(
            "max-abs {}, max-ulp {}, differing-fraction {}: a finite max-abs ≥ 0, a fraction in (0, 1], \
             and for bytes neither max-abs nor max-ulp",
            v.max_abs, v.max_ulp, v.differing_fraction
        ));
    }
    let tolerance_ok =
        |t: Option<f64>| t.is_none_or(|t| t.is_finite() && t >= 0.0 && (v.element.is_float() || t == 0.0));
    if v.atol.is_some() != v.rtol.is_some() || !tolerance_ok(v.atol) || !tolerance_ok(v.rtol) {
        let said = |t: Option<f64>| t.map_or("absent".to_owned(), |t| t.to_string());
        return fail(format!(
            "atol {}, rtol {}: both or neither, each finite ≥ 0, and 0 for bytes",
            said(v.atol),
            said(v.rtol)
        ));
    }
    distances(v).map_or(Ok(()), fail)?;
    v.tokens.as_ref().and_then(|t| tokens(t, v, buffer.size)).map_or(Ok(()), fail)?;
    if v.file.is_empty() {
        return fail("names no file of the first launch's bytes".into());
    }
    let nodes: HashSet<&str> = template.nodes.iter().map(|n| n.id.as_str()).collect();
    if let Some(n) = v.nodes.iter().find(|n| !nodes.contains(n.as_str())) {
        return fail(format!("names node `{n}`, which the template does not have"));
    }
    match first_duplicate(v.nodes.iter().map(String::as_str)) {
        Some(n) => fail(format!("names node `{n}` twice")),
        None => Ok(()),
    }
}

/// What is wrong with a variation's distances, if anything: none, or one per other digest
/// of a float output whose spread is its own, each finite, ≥ 0, and its block's RMS at
/// least the whole output's (the largest block mean of squares is at least their mean).
fn distances(v: &Variation) -> Option<String> {
    let n = v.distances.len();
    match (&v.spread_of, n) {
        (_, 0) => return None,
        (Some(_), n) => return Some(format!("takes another output's spread but records {n} distances: none")),
        (None, n) if n != v.sha256s.len() => {
            return Some(format!("{n} distances for {} other digests: one each, or none", v.sha256s.len()))
        }
        _ if !v.element.is_float() => return Some(format!("{n} distances of bytes, which compare bitwise: none")),
        _ => {}
    }
    let measured = |x: f64| x.is_finite() && x >= 0.0;
    // Summed in another order, the two means can differ in their last bits.
    let ordered = |d: &Distance| d.block_rms >= d.rms * (1.0 - 1e-9);
    let wrong = v.distances.iter().find(|d| !measured(d.rms) || !measured(d.block_rms) || !ordered(d))?;
    Some(format!(
        "distance rms {}, block-rms {}: each finite ≥ 0, the block's at least the whole output's",
        wrong.rms, wrong.block_rms
    ))
}

/// What is wrong with a logits output's tokens, if anything: float logits, at least one row
/// of at least one element, the rows inside the buffer, each row's tokens in the
/// vocabulary, none twice, and no more of them than the launches.
fn tokens(t: &crate::spread::Tokens, v: &Variation, buffer_size: u64) -> Option<String> {
    let logits =
        (t.rows.len() as u64).checked_mul(t.vocabulary.into()).and_then(|n| n.checked_mul(v.element.size() as u64));
    match logits {
        _ if !v.element.is_float() => return Some("tokens of bytes, which are no logits: none".into()),
        Some(n) if n == 0 || n > buffer_size => {
            return Some(format!(
                "tokens of {} rows of {} logits, which a buffer of {buffer_size} bytes does not hold: at least one of each, \
                 inside the buffer",
                t.rows.len(),
                t.vocabulary
            ))
        }
        None => return Some(format!("tokens of {} rows of {} logits: more than any buffer", t.rows.len(), t.vocabulary)),
        Some(_) => {}
    }
    let wrong = |row: &Vec<u32>| {
        row.len() > v.launches as usize
            || row.iter().any(|&x| x >= t.vocabulary)
            || first_duplicate(row.iter()).is_some()
    };
    let (r, row) = t.rows.iter().enumerate().find(|(_, row)| wrong(row))?;
    Some(format!(
        "row {r} chose tokens {row:?}: each below the vocabulary of {}, none twice, at most one per launch ({})",
        t.vocabulary, v.launches
    ))
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

/// Each peer range's window, after checking that it names another rank of the world,
/// fits the granularity and the arena, and overlaps neither this rank's arena nor
/// another window; sorted by address, so both checks cost n log n however many a file
/// lists.
fn peers(m: &Manifest) -> Result<Vec<Range<u64>>> {
    let own = m.arena.base..m.arena.base.saturating_add(m.arena.size);
    let overlap = |a: &Range<u64>, b: &Range<u64>| a.start < b.end && b.start < a.end;
    let mut windows: Vec<(Range<u64>, usize)> = Vec::with_capacity(m.peers.len());
    for (index, p) in m.peers.iter().enumerate() {
        let window = peer_window(m, p)
            .and_then(|w| match overlap(&w, &own) {
                true => Err(format!("its window {:#x}..{:#x} overlaps this rank's arena", w.start, w.end)),
                false => Ok(w),
            })
            .map_err(|what| E::Peer { index, rank: p.rank, what })?;
        windows.push((window, index));
    }
    windows.sort_by_key(|(w, _)| w.start);
    if let Some(pair) = windows.windows(2).find(|pair| overlap(&pair[0].0, &pair[1].0)) {
        // Said of the one listed later, as a reader meets them.
        let (later, earlier) = if pair[0].1 > pair[1].1 { (&pair[0], &pair[1]) } else { (&pair[1], &pair[0]) };
        let what = format!("its window {:#x}..{:#x} overlaps peer range {}", later.0.start, later.0.end, earlier.1);
        return Err(E::Peer { index: later.1, rank: m.peers[later.1].rank, what });
    }
    Ok(windows.into_iter().map(|(w, _)| w).collect())
}

/// The addresses one peer range maps, or what is wrong with it alone.
fn peer_window(m: &Manifest, p: &PeerRange) -> std::result::Result<Range<u64>, String> {
    let world = m.context.tp_world_size;
    if p.rank == m.context.tp_rank {
        return Err(format!("rank {} is this core's own rank", p.rank));
    }
    if p.rank >= world {
        return Err(format!("rank {} does not exist in a world of {world}", p.rank));
    }
    let g = m.arena.granularity;
    let fields = [("offset", p.offset), ("size", p.size), ("address", p.address)];
    if let Some((field, value)) = fields.into_iter().find(|&(_, v)| v % g != 0) {
        return Err(format!("{field} {value:#x} is not a multiple of the granularity {g:#x}"));
    }
    if p.size == 0 || p.offset.checked_add(p.size).is_none_or(|end| end > m.arena.size) {
        let (offset, size, arena) = (p.offset, p.size, m.arena.size);
        return Err(format!("offset {offset:#x} and size {size:#x} do not lie in an arena of {arena:#x} bytes"));
    }
    let window = p.window();
    match window.is_empty() {
        true => Err(format!("mapped at {:#x}, it would end past the last address", p.address)),
        false => Ok(window),
    }
}

/// Buffers sorted by offset, for name lookups and address lookups; and the windows of
/// peers' arenas this rank maps (sorted, apart), where kernels may hold addresses too.
struct BufferMap<'m> {
    base: u64,
    sorted: Vec<&'m Buffer>,
    by_name: HashMap<&'m str, &'m Buffer>,
    peers: Vec<Range<u64>>,
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
        Ok(Self { base: a.base, sorted, by_name, peers: Vec::new() })
    }

    fn with_peers(self, peers: Vec<Range<u64>>) -> Self {
        Self { peers, ..self }
    }

    /// Whether `address` lies in a buffer or in a peer's mapped window.
    fn contains_address(&self, address: u64) -> bool {
        address.checked_sub(self.base).is_some_and(|offset| buffer_at(&self.sorted, offset).is_some())
            || self.peers.get(self.peers.partition_point(|w| w.end <= address)).is_some_and(|w| w.contains(&address))
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
    let templates: HashMap<&str, &Template> = m.templates.iter().map(|t| (t.name.as_str(), t)).collect();
    unique("expectation of template", m.expectations.iter().map(|e| e.template.as_str()))?;
    for (index, e) in m.expectations.iter().enumerate() {
        if !templates.contains_key(e.template.as_str()) {
            return Err(E::ExpectationTarget { index, kind: "template", name: e.template.clone() });
        }
        if let Some(o) = e.outputs.iter().find(|o| !buffers.by_name.contains_key(o.buffer.as_str())) {
            return Err(E::ExpectationTarget { index, kind: "buffer", name: o.buffer.clone() });
        }
        let template = templates[e.template.as_str()];
        for o in &e.outputs {
            digest(|| output_item(&e.template, &o.buffer), &o.sha256)?;
            element(&e.template, buffers.by_name[o.buffer.as_str()], o)?;
            if let Some(v) = &o.variation {
                variation(template, buffers.by_name[o.buffer.as_str()], &o.sha256, v)?;
            }
        }
        if let Some(name) = first_duplicate(e.outputs.iter().map(|o| o.buffer.as_str())) {
            return Err(E::DuplicateIn { template: e.template.clone(), kind: "expected output", name: name.into() });
        }
        if let Some(value) = e.tolerance.filter(|t| !t.is_finite() || *t < 0.0) {
            return Err(E::Tolerance { template: e.template.clone(), value });
        }
        if let Some(speed) = &e.speed {
            speed_is_a_measurement(&e.template, speed)?;
        }
    }
    spreads_taken(m)?;
    generators::generators(m, buffers)?;
    checked(m)
}

/// An output that takes another's spread names a varying output of another template, of
/// its element type, that varied in launches of its own.
fn spreads_taken(m: &Manifest) -> Result {
    let in_order: Vec<((&str, &str), &Variation)> = m
        .expectations
        .iter()
        .flat_map(|e| e.outputs.iter().map(move |o| ((e.template.as_str(), o.buffer.as_str()), o.variation.as_ref())))
        .filter_map(|(at, v)| Some((at, v?)))
        .collect();
    let varying: HashMap<(&str, &str), &Variation> = in_order.iter().copied().collect();
    for ((template, buffer), v) in in_order {
        let Some(of) = &v.spread_of else { continue };
        let source = varying.get(&(of.template.as_str(), of.buffer.as_str()));
        let why = match source {
            _ if of.template == *template => "of its own template",
            None => "which does not vary",
            Some(s) if s.spread_of.is_some() => "which takes its spread from another in turn",
            Some(s) if s.element != v.element => "of another element type",
            Some(_) => continue,
        };
        return Err(E::Unsettled {
            item: output_item(template, buffer),
            what: format!("takes the spread of template `{}` output `{}`, {why}", of.template, of.buffer),
        });
    }
    Ok(())
}

/// Fewest and most launches a recorded speed may be the median of.
pub const SPEED_LAUNCHES: std::ops::RangeInclusive<u32> = 20..=1 << 16;

/// A recorded speed (v3): the median of enough launches, a positive time, a spread.
fn speed_is_a_measurement(template: &str, s: &Speed) -> Result {
    let (launches, median, spread) = (s.launches, s.median_us, s.spread_us);
    if !SPEED_LAUNCHES.contains(&launches)
        || !(median.is_finite() && median > 0.0)
        || !(spread.is_finite() && spread >= 0.0)
    {
        let what = format!(
            "speed: {launches} launches, median {median} us, spread {spread} us: {} to {} launches, a finite \
             median > 0 and a finite spread ≥ 0",
            SPEED_LAUNCHES.start(),
            SPEED_LAUNCHES.end()
        );
        return Err(E::Unsettled { item: format!("expectation of template `{template}`"), what });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Expectation, OutputDigest, OutputRef};

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

    /// An output of template `t`, varying on its own or taking `spread_of`'s spread.
    fn output(t: &str, element: crate::spread::Element, spread_of: Option<&str>) -> Expectation {
        let variation = Variation {
            element,
            launches: 16,
            sha256s: if spread_of.is_some() { vec![] } else { vec!["1".repeat(64)] },
            max_abs: 0.0,
            max_ulp: 0,
            differing_fraction: 0.5,
            atol: Some(0.0),
            rtol: Some(0.0),
            spread_of: spread_of.map(|of| OutputRef { template: of.into(), buffer: "y".into() }),
            file: "outputs/first.bin".into(),
            nodes: vec![],
            distances: vec![],
            tokens: None,
        };
        let variation = Some(variation);
        let outputs = vec![OutputDigest { buffer: "y".into(), sha256: "0".repeat(64), variation, element: None }];
        Expectation { template: t.into(), outputs, reference: None, tolerance: None, speed: None }
    }

    /// A taken spread names a like output of another template that varied by itself.
    #[test]
    fn a_spread_is_taken_only_from_a_like_output_that_varied_by_itself() {
        use crate::spread::Element::{Bfloat16, Float32};
        let mut m: Manifest = serde_json::from_str(include_str!("../../../fixtures/golden/v2/manifest.json")).unwrap();
        let taken = |m: &mut Manifest, expectations: Vec<Expectation>| {
            m.expectations = expectations;
            spreads_taken(m).map_err(|e| e.to_string())
        };
        assert_eq!(taken(&mut m, vec![output("b8", Float32, None), output("b16", Float32, Some("b8"))]), Ok(()));
        let refused = [
            (vec![output("b8", Float32, Some("b8"))], "of its own template"),
            (vec![output("b16", Float32, Some("b8"))], "which does not vary"),
            (
                vec![output("b8", Float32, None), output("b4", Float32, Some("b8")), output("b2", Float32, Some("b4"))],
                "which takes its spread from another in turn",
            ),
            (vec![output("b8", Bfloat16, None), output("b16", Float32, Some("b8"))], "of another element type"),
        ];
        for (expectations, why) in refused {
            let said = taken(&mut m, expectations).unwrap_err();
            assert!(said.contains(why), "{said}");
        }
    }
}
