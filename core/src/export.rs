//! Export: from retained templates (never executables) and a fixed-address arena, write a
//! core. The caller captures; this module snapshots the arena into shards, turns each
//! template's nodes into manifest nodes, and writes modules and the manifest last.

use std::{
    collections::HashMap,
    path::Path,
    sync::atomic::{AtomicBool, Ordering},
    time::Instant,
};

use gnomon_format::{
    buffer_at,
    digest::CHUNK_BYTES,
    shard_writer::{write_shards, ShardFile, Staging, WriteStages},
    shards::{plan, ShardCap},
    validate, Arena, Buffer, BufferContents, BufferRef, Chunks, Context as CoreContext, CoreWriter, Edge, Expectation,
    FormatTag, Function, KernelNode, Manifest, MemcpyNode, MemsetNode, Module, ModuleKind, Node, NodeOp, PeerRange,
    PointerParam, Provenance, RecordedFlags, Shard, Template, Unchecked, Written,
};

use crate::{
    cuda::{ArenaMapping, Context, HostEnd, LentReads, NodeId, NodeKind, PinnedHost, RetainedGraph},
    errors::ExportError,
    progress::{Progress, Unit},
    replay::HeldAt,
    translate,
};

/// Bytes of a `zero` buffer read back from the device per step of its check.
const ZERO_CHECK_BYTES: u64 = 64 << 20;
/// Staging for a snapshot: slots of whole chunks, enough of them that copying from the
/// device never waits for a writer while the writers keep the disk busy.
const SLOT_BYTES: u64 = 64 << 20;
const SLOTS: u64 = 8;
const WRITERS: usize = 4;
const _: () = assert!(SLOT_BYTES % CHUNK_BYTES == 0, "a slot holds whole chunks");

/// What a snapshot stored and where its time went.
#[derive(Clone, Copy, Debug)]
pub struct Snapshot {
    pub stored_bytes: u64,
    pub seconds: f64,
    pub zero_check_s: f64,
    pub stages: WriteStages,
}

/// Page-locked slots for a snapshot of `stored` bytes: no more of them, nor larger, than
/// the bytes need (one chunk at least).
struct PinnedSlots {
    pinned: PinnedHost,
    slot_len: usize,
}

impl PinnedSlots {
    fn for_bytes(ctx: &Context, stored: u64) -> Result<Self, ExportError> {
        let slot_len = SLOT_BYTES.min(stored.next_multiple_of(CHUNK_BYTES)).max(CHUNK_BYTES);
        let count = SLOTS.min(stored.div_ceil(slot_len)).max(1);
        Ok(Self { pinned: PinnedHost::new(ctx, (slot_len * count) as usize)?, slot_len: slot_len as usize })
    }

    fn staging(&mut self) -> Staging<'_> {
        let slots = self.pinned.as_mut_slice().chunks_mut(self.slot_len).collect();
        Staging { chunk: CHUNK_BYTES, slots, writers: WRITERS }
    }
}

/// A module the core will carry: its id, kind and image, and the functions of it that
/// the templates use.
pub struct ModuleImage {
    pub id: String,
    pub kind: ModuleKind,
    pub image: Vec<u8>,
    pub functions: Vec<crate::cuda::Function>,
    pub provenance: Option<Provenance>,
}

impl ModuleImage {
    /// A module compiled from source to PTX.
    pub fn ptx(id: String, ptx: &str, functions: Vec<crate::cuda::Function>) -> Self {
        Self { id, kind: ModuleKind::Ptx, image: ptx.as_bytes().to_vec(), functions, provenance: None }
    }
}

/// Builds a core directory step by step.
pub struct Exporter {
    writer: CoreWriter,
    manifest: Manifest,
    /// Function name → module id.
    function_modules: HashMap<String, String>,
    /// The buffers by offset: every parameter's every 8 bytes is looked up.
    by_offset: Vec<Buffer>,
}

impl Exporter {
    pub fn new(
        dir: &Path,
        context: CoreContext,
        arena: Arena,
        buffers: Vec<Buffer>,
        modules: &[ModuleImage],
    ) -> Result<Self, ExportError> {
        let writer = CoreWriter::create(dir)?;
        let mut function_modules = HashMap::new();
        let mut manifest_modules = Vec::new();
        for m in modules {
            let extension = match m.kind {
                ModuleKind::Ptx => "ptx",
                ModuleKind::Cubin => "cubin",
            };
            let file = format!("modules/{}.{extension}", m.id);
            let sha256 = writer.write_file(&file, &m.image)?;
            let function = |f: &crate::cuda::Function| {
                let attributes = translate::function_attributes(f)?;
                Ok(Function { name: f.name().into(), params: translate::param_slots(f.layout()), attributes })
            };
            let functions = m.functions.iter().map(function).collect::<Result<_, ExportError>>()?;
            for f in &m.functions {
                function_modules.insert(f.name().to_owned(), m.id.clone());
            }
            let provenance = m.provenance.clone();
            manifest_modules.push(Module { id: m.id.clone(), kind: m.kind, file, sha256, functions, provenance });
        }
        let manifest = Manifest {
            format: FormatTag::default(),
            context,
            arena,
            shards: Vec::new(),
            buffers,
            modules: manifest_modules,
            templates: Vec::new(),
            expectations: Vec::new(),
            unchecked: Vec::new(),
            producer_seconds: Default::default(),
            peers: Vec::new(),
            generators: Vec::new(),
        };
        let mut by_offset = manifest.buffers.clone();
        by_offset.sort_by_key(|b| b.offset);
        Ok(Self { writer, manifest, function_modules, by_offset })
    }

    /// Copies the arena's stored ranges to the shard files, an XXH3-128 per chunk (format
    /// v3, the only one this exporter writes), at the storage's speed: this thread copies
    /// each slot from the device into page-locked staging while writer threads digest and
    /// write the slots before it (`gnomon_format::shard_writer`). `zero` buffers are
    /// checked, not stored. The kit does the same in three steps, writing on a thread of
    /// its own while it launches the templates ([`Self::plan_snapshot`]).
    pub fn snapshot(&mut self, ctx: &Context, _mapping: &ArenaMapping) -> Result<Snapshot, ExportError> {
        let mut plan = self.plan_snapshot(ctx)?;
        let held = HeldAt::arena(self.manifest.arena.base);
        let written = plan.writing().write(&ctx.lend_reads(), &held, &AtomicBool::new(false))?;
        Ok(self.stored(plan, written))
    }

    /// The snapshot's first step, before anything launches: the `zero` buffers checked,
    /// the shards planned and their staging pinned. [`SnapshotPlan::writing`] writes them,
    /// then [`Self::stored`] takes them into the manifest.
    pub fn plan_snapshot(&self, ctx: &Context) -> Result<SnapshotPlan, ExportError> {
        let started = Instant::now();
        let a = self.manifest.arena;
        self.check_zero_buffers(ctx)?;
        let zero_check_s = started.elapsed().as_secs_f64();
        let cap = ShardCap::new(a.shard_cap, a.granularity).map_err(gnomon_format::errors::ValidationError::from)?;
        let spans = plan(a.size, cap).map_err(gnomon_format::errors::ValidationError::from)?;
        let mut shards = Vec::with_capacity(spans.len());
        let (mut files, mut ranges) = (Vec::with_capacity(spans.len()), Vec::with_capacity(spans.len()));
        for s in spans {
            let file = format!("shards/{:04}.bin", s.index);
            let shard = Shard { index: s.index, offset: s.offset, size: s.size, file, sha256: None, chunks: None };
            files.push(ShardFile { path: self.writer.path_of(&shard.file), len: self.manifest.stored_len(&shard) });
            ranges.push(self.manifest.stored_ranges(&shard));
            shards.push(shard);
        }
        let stored: u64 = files.iter().map(|f| f.len).sum();
        let slots = PinnedSlots::for_bytes(ctx, stored)?;
        Ok(SnapshotPlan { shards, files, ranges, stored, slots, started, zero_check_s })
    }

    /// Takes the shards `plan` wrote into the manifest.
    pub fn stored(&mut self, plan: SnapshotPlan, written: ShardsWritten) -> Snapshot {
        for (mut shard, chunks) in plan.shards.into_iter().zip(written.chunks) {
            shard.chunks = Some(chunks);
            self.manifest.shards.push(shard);
        }
        let seconds = written.ended.duration_since(plan.started).as_secs_f64();
        Snapshot { stored_bytes: plan.stored, seconds, zero_check_s: plan.zero_check_s, stages: written.stages }
    }

    /// Every `zero` buffer holds only zeros (replay fills them, so an export must not
    /// leave anything else there).
    fn check_zero_buffers(&self, ctx: &Context) -> Result<(), ExportError> {
        let base = self.manifest.arena.base;
        for b in self.manifest.buffers.iter().filter(|b| b.contents == BufferContents::Zero) {
            for at in (0..b.size).step_by(ZERO_CHECK_BYTES as usize) {
                // SAFETY: the range lies inside the arena the caller keeps mapped.
                let read = unsafe { ctx.read(base + b.offset + at, ZERO_CHECK_BYTES.min(b.size - at)) }?;
                if read.iter().any(|&x| x != 0) {
                    return Err(ExportError::NotZero { buffer: b.name.clone() });
                }
            }
        }
        Ok(())
    }

    /// Declares that `template`'s outputs are not compared, and why.
    pub fn unchecked(&mut self, template: &str, reason: &str) {
        self.manifest.unchecked.push(Unchecked { template: template.into(), reason: reason.into() });
    }

    /// Declares the ranges of other ranks' arenas this rank maps (a rank set whose kernels
    /// reach into their peers' memory), before any template: a kernel's parameter that
    /// holds an address in a window is then recorded as a pointer too.
    pub fn peers(&mut self, ranges: Vec<PeerRange>) {
        self.manifest.peers = ranges;
    }

    /// The generators whose state the templates read, and how their launches advance it.
    pub fn generators(&mut self, generators: Vec<gnomon_format::Generator>) {
        self.manifest.generators = generators;
    }

    /// Records a retained template: its nodes as the driver reports them, edges, and flags.
    /// Each kernel's module is the exported module that holds a function of its name.
    pub fn template(&mut self, name: &str, graph: &RetainedGraph, flags: RecordedFlags) -> Result<(), ExportError> {
        let template = self.read(name, graph, flags, |_, function| self.function_modules.get(function).cloned())?;
        self.manifest.templates.push(template);
        Ok(())
    }

    /// As [`Self::template`], with each kernel node's module id given by `module_of(node,
    /// function)`: for cores whose function names repeat across modules.
    pub fn template_with(
        &mut self,
        name: &str,
        graph: &RetainedGraph,
        flags: RecordedFlags,
        module_of: impl Fn(NodeId, &str) -> Option<String>,
    ) -> Result<(), ExportError> {
        let template = self.read(name, graph, flags, module_of)?;
        self.manifest.templates.push(template);
        Ok(())
    }

    /// A retained template as the manifest holds it.
    fn read(
        &self,
        name: &str,
        graph: &RetainedGraph,
        flags: RecordedFlags,
        module_of: impl Fn(NodeId, &str) -> Option<String>,
    ) -> Result<Template, ExportError> {
        let driver_nodes = graph.nodes()?;
        let ids: Vec<String> = (0..driver_nodes.len()).map(|i| format!("n{i}")).collect();
        let nodes = driver_nodes
            .into_iter()
            .map(|n| Ok(Node { id: ids[n.id.0].clone(), op: self.node_op(name, n.id, n.kind, &module_of)? }))
            .collect::<Result<Vec<_>, ExportError>>()?;
        let edge = |(f, t, d): (NodeId, NodeId, _)| Edge {
            from: ids[f.0].clone(),
            to: ids[t.0].clone(),
            kind: translate::edge_kind(d),
        };
        let edges = graph.edges()?.into_iter().map(edge).collect();
        Ok(Template { name: name.into(), flags, nodes, edges, capture_order: ids })
    }

    /// Records what the producing process spent, in seconds, by name.
    pub fn producer_seconds(&mut self, seconds: impl IntoIterator<Item = (String, f64)>) {
        self.manifest.producer_seconds.extend(seconds);
    }

    /// Writes an output's bytes (a varying output's first launch) under its digest; returns
    /// the file's path in the core.
    pub fn store_output(&self, bytes: &[u8]) -> Result<String, ExportError> {
        let sha256 = gnomon_format::hash_hex(bytes).expect("hashing memory cannot fail");
        let file = format!("outputs/{sha256}.bin");
        self.writer.write_file(&file, bytes)?;
        Ok(file)
    }

    pub fn expect(&mut self, expectation: Expectation) {
        self.manifest.expectations.push(expectation);
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Validates the manifest, then writes it; a core this exporter cannot validate is
    /// never written.
    pub fn finish(self) -> Result<(Manifest, Written), ExportError> {
        validate::manifest(&self.manifest)?;
        let written = self.writer.write_manifest(&self.manifest)?;
        Ok((self.manifest, written))
    }

    fn node_op(
        &self,
        template: &str,
        id: NodeId,
        kind: NodeKind,
        module_of: &impl Fn(NodeId, &str) -> Option<String>,
    ) -> Result<NodeOp, ExportError> {
        let fail = |what: String| ExportError::Node { template: template.into(), node: format!("n{}", id.0), what };
        Ok(match kind {
            NodeKind::Kernel { function, grid, block, shared_mem, params, layout, launch } => {
                let module = module_of(id, &function)
                    .ok_or_else(|| fail(format!("function `{function}` is in no exported module")))?;
                let pointers = self.pointer_params(&translate::param_slots(&layout), &params);
                NodeOp::Kernel(KernelNode {
                    module,
                    function,
                    grid,
                    block,
                    shared_mem_bytes: shared_mem,
                    params,
                    pointers,
                    launch: translate::recorded_launch(&launch),
                })
            }
            NodeKind::Memset { dst, value, element_size, count } => NodeOp::Memset(MemsetNode {
                dst: self.buffer_ref(dst).ok_or_else(|| fail(format!("memset at 0x{dst:x} outside the arena")))?,
                value,
                element_size,
                count,
            }),
            NodeKind::Memcpy { host: Some(end), bytes, .. } => {
                let (direction, address) = match end {
                    HostEnd::Source(a) => ("from", a),
                    HostEnd::Destination(a) => ("to", a),
                };
                return Err(fail(format!(
                    "memcpy of {bytes} bytes {direction} host memory at 0x{address:x} (pinned or pageable): a core \
                     holds device memory only; keep the tensor on the device, or copy it before the capture"
                )));
            }
            NodeKind::Memcpy { dst, src, bytes, host: None } => {
                let lookup = |a: u64| {
                    self.buffer_ref(a).ok_or_else(|| fail(format!("memcpy touches 0x{a:x}, outside the arena")))
                };
                NodeOp::Memcpy(MemcpyNode { src: lookup(src)?, dst: lookup(dst)?, bytes })
            }
            NodeKind::Empty => NodeOp::Empty,
            NodeKind::Other(kind) => return Err(fail(format!("a {kind} node cannot be exported"))),
            NodeKind::Unflat(shape) => {
                return Err(fail(format!(
                    "a {shape}: the format holds memsets and copies of one contiguous run, and rebuilt as one \
                     this node would write other bytes; make the tensor contiguous, or copy it outside the graph"
                )))
            }
        })
    }

    /// Every eight bytes at an 8-aligned place of a parameter (a pointer, or a field of a
    /// struct or tensor map) whose value lies in a buffer or a peer's window are recorded
    /// as a pointer. (A double whose bits fall inside the arena would be a denormal near
    /// 1e-310.)
    fn pointer_params(&self, layout: &[gnomon_format::ParamSlot], params: &[u8]) -> Vec<PointerParam> {
        gnomon_format::params::words(layout, params)
            .filter(|&(_, _, word)| {
                self.buffer_ref(word).is_some() || self.manifest.peers.iter().any(|p| p.window().contains(&word))
            })
            .map(|(param, at, _)| PointerParam { param, at, external: false })
            .collect()
    }

    fn buffer_ref(&self, address: u64) -> Option<BufferRef> {
        let offset = address.checked_sub(self.manifest.arena.base)?;
        let b = buffer_at(&self.by_offset, offset)?;
        Some(BufferRef { buffer: b.name.clone(), offset: offset - b.offset })
    }
}

/// A snapshot planned ([`Exporter::plan_snapshot`]): its shards, the stored ranges each
/// file holds, and page-locked staging for them.
pub struct SnapshotPlan {
    shards: Vec<Shard>,
    files: Vec<ShardFile>,
    ranges: Vec<Vec<std::ops::Range<u64>>>,
    stored: u64,
    slots: PinnedSlots,
    started: Instant,
    zero_check_s: f64,
}

impl SnapshotPlan {
    /// What a thread writing the shards borrows of the plan.
    pub fn writing(&mut self) -> SnapshotWriting<'_> {
        let (files, ranges, stored) = (&self.files, &self.ranges, self.stored);
        SnapshotWriting { files, ranges, stored, staging: self.slots.staging() }
    }
}

/// The shard files of a plan, their ranges and its staging, lent to the thread that
/// writes them; it holds no CUDA type, so it may be another thread than the plan's.
pub struct SnapshotWriting<'p> {
    files: &'p [ShardFile],
    ranges: &'p [Vec<std::ops::Range<u64>>],
    stored: u64,
    staging: Staging<'p>,
}

/// The chunks' digests of each shard written, where the writing's time went, and when it
/// ended (the snapshot's seconds end there, not where the thread beside it waited).
pub struct ShardsWritten {
    chunks: Vec<Chunks>,
    stages: WriteStages,
    ended: Instant,
}

impl SnapshotWriting<'_> {
    /// Writes every shard, reading the arena as loaded where `held` says it lies; gives
    /// up, between two slots, once `stop` is set (the work beside it failed), and sets it
    /// when it fails itself.
    pub fn write(self, reads: &LentReads, held: &HeldAt, stop: &AtomicBool) -> Result<ShardsWritten, ExportError> {
        let Self { files, ranges, stored, staging } = self;
        let mut progress = Progress::start("export: snapshot", Unit::Bytes, stored);
        let fill = |file: usize, at: u64, slot: &mut [u8]| {
            if stop.load(Ordering::Relaxed) {
                return Err(ExportError::Abandoned);
            }
            // SAFETY: each range lies inside the arena, which the exporter's caller keeps
            // mapped, or in a writable buffer's copy, which `held` borrows.
            fill_slot(&ranges[file], held, at, slot, |src, into| Ok(unsafe { reads.read_into(src, into) }?))
        };
        let (chunks, stages) = write_shards(files, staging, fill, |n| progress.advance(n))
            .inspect_err(|_| stop.store(true, Ordering::Relaxed))?;
        progress.finish();
        Ok(ShardsWritten { chunks, stages, ended: Instant::now() })
    }
}

/// Fills `slot` with the bytes at `at` of a shard file that holds the arena's `ranges` one
/// after another, each read by `read` from where `held` says it lies as loaded.
fn fill_slot(
    ranges: &[std::ops::Range<u64>],
    held: &HeldAt,
    at: u64,
    slot: &mut [u8],
    mut read: impl FnMut(u64, &mut [u8]) -> Result<(), ExportError>,
) -> Result<(), ExportError> {
    let mut filled = 0;
    for (offset, len) in pieces(ranges, at, slot.len() as u64) {
        for (src, len) in held.ranges(offset, len) {
            read(src, &mut slot[filled..filled + len as usize])?;
            filled += len as usize;
        }
    }
    Ok(())
}

/// The `(arena offset, length)` pieces behind `len` bytes at `at` of a file that holds
/// `ranges` one after another.
fn pieces(ranges: &[std::ops::Range<u64>], mut at: u64, mut len: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for r in ranges {
        let size = r.end - r.start;
        if at >= size {
            at -= size;
            continue;
        }
        let take = (size - at).min(len);
        out.push((r.start + at, take));
        (at, len) = (0, len - take);
        if len == 0 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slot of a shard file holding two stored ranges, read where the loaded state lies:
    /// each byte is the one at its arena offset, from the arena or from a writable
    /// buffer's copy, in order across both ranges.
    #[test]
    fn a_slot_holds_the_stored_ranges_as_loaded_in_order() {
        let base = 1 << 20;
        // Arena bytes are their offset's low byte; a copy's bytes that plus 100.
        let copy_of = |offset: u64| (1 << 30) + offset;
        let held = HeldAt::with_copies(base, vec![(250, 20, copy_of(250))]);
        let read = |src: u64, into: &mut [u8]| {
            let (offset, plus) = match src >= 1 << 30 {
                true => (src - (1 << 30), 100u8),
                false => (src - base, 0),
            };
            into.iter_mut().zip(offset..).for_each(|(b, o)| *b = (o as u8).wrapping_add(plus));
            Ok(())
        };
        let mut slot = [0u8; 120];
        fill_slot(&[0..100, 200..300], &held, 40, &mut slot, read).unwrap();
        let expected: Vec<u8> = (40..100)
            .chain(200..260)
            .map(|o: u64| (o as u8).wrapping_add(if (250..270).contains(&o) { 100 } else { 0 }))
            .collect();
        assert_eq!(slot.as_slice(), expected.as_slice());
    }
}
