//! The exporting side: map a workload's arena at its fixed address, capture its templates
//! (retained, no executables), write the core, and run the original once to record what
//! replay must reproduce.

use std::{collections::HashMap, path::Path, time::Instant};

use gnomon_format::{
    buffers_end,
    errors::FlagsError,
    flags::resolve,
    hash_hex,
    params::ParamBlob,
    shards::{plan, ShardCap, ShardSpan, MIB},
    Arena, Buffer, BufferRole, Context as CoreContext, Expectation, OutputDigest, PeerRange, Producer, RecordedFlags,
    Speed,
};

use gnomon_core::{
    cuda::{ArenaMapping, Context, CudaError, Event, Function, GraphExec, Module, RetainedGraph, Stream},
    errors::ReplayError,
    export::{Exporter, ModuleImage},
    replay::{time_launches, LoadedState, Scope, POISON, TIMED_LAUNCHES},
    translate::{set_function_attributes, Instantiate},
};
use gnomon_fixtures::{
    kernels::FILL,
    reference::{from_bytes, max_scaled_diff},
    workloads::{BufferInit, Contents, Init, IssueEnv, Workload},
};

use crate::{measured, Metrics, Verdict};

/// Where every replay core's arena lives: in the range where the driver honours
/// reservations of 64 MiB and more.
pub const ARENA_BASE: u64 = 0x300_0000_0000;
/// Arenas are at least this large and a multiple of 64 MiB, so every shard is a
/// reservation the driver places where asked.
const ARENA_QUANTUM: u64 = 64 * MIB;
const BUFFER_ALIGN: u64 = 4096;

/// How the exporter hands its work to the native side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handover {
    /// The exporter exits; a fresh process replays the core from disk.
    Exit,
    /// In one process, live executables are handed over; flags come from them.
    Direct,
}

/// The exporter's device state, kept alive for a direct handover.
pub struct Session {
    pub ctx: Context,
    pub mapping: ArenaMapping,
    _modules: Vec<Module>,
    functions: HashMap<String, Function>,
    addresses: HashMap<String, u64>,
    /// Module id and PTX of each compiled kernel source.
    ptx: Vec<(&'static str, String)>,
    pub(super) stream: Stream,
    forks: Vec<Stream>,
    events: Vec<Event>,
}

impl Session {
    pub(super) fn env(&self) -> IssueEnv<'_> {
        IssueEnv { forks: &self.forks, events: &self.events, functions: &self.functions, addresses: &self.addresses }
    }
}

pub struct Exported {
    pub session: Session,
    /// For a direct handover: one executable per template, in template order.
    pub handed: Vec<GraphExec>,
    pub metrics: Metrics,
}

pub(super) fn blocked(what: &str) -> impl Fn(CudaError) -> Verdict + '_ {
    move |e| Verdict::Blocked(format!("{what}: {e}"))
}

pub(super) fn failed(what: &str) -> impl Fn(String) -> Verdict + '_ {
    move |e| Verdict::Failed(format!("{what}: {e}"))
}

/// What an export writes beyond the workload itself.
#[derive(Clone, Copy, Debug)]
pub struct ExportOptions {
    /// Shard cap in bytes.
    pub cap: u64,
    /// Instantiation flags for every template, instead of the workload's own.
    pub flags: Option<u64>,
    /// Tensor-parallel rank and world size recorded in the core.
    pub rank: u32,
    pub world: u32,
}

impl ExportOptions {
    pub fn at_cap(cap: u64) -> Self {
        Self { cap, flags: None, rank: 0, world: 1 }
    }
}

pub fn export(w: &dyn Workload, options: ExportOptions, dir: &Path, handover: Handover) -> Result<Exported, Verdict> {
    let cap = options.cap;
    let started = Instant::now();
    let ctx = Context::new(0).map_err(blocked("open device 0"))?;
    let free_at_start = free(&ctx)?;
    let inits = w.buffers();
    let (buffers, arena) = layout(&inits, cap, &ctx)?;
    let session = open_session(w, &ctx, &inits, &buffers, &arena, &[])?;
    let mut lowest_free = free(&ctx)?;
    let templates: Vec<(String, u64, RetainedGraph)> = w
        .templates()
        .into_iter()
        .map(|(name, own)| {
            let flags = options.flags.unwrap_or(own);
            let graph = session
                .stream
                .capture(|s| w.issue(&name, s, &session.env()))
                .map_err(|e| Verdict::Failed(format!("capture `{name}`: {e}")))?;
            Ok((name, flags, graph))
        })
        .collect::<Result<_, Verdict>>()?;
    lowest_free = lowest_free.min(free(&ctx)?);
    let images = module_images(w, &session);
    let context = core_context(&ctx, options)?;
    let mut exporter = Exporter::new(dir, context, arena, buffers.clone(), &images)
        .map_err(|e| failed("start export")(e.to_string()))?;
    let snapshot = exporter.snapshot(&ctx, &session.mapping).map_err(|e| failed("snapshot shards")(e.to_string()))?;
    let mut handed = Vec::new();
    for (name, flags, graph) in &templates {
        let recorded = match handover {
            Handover::Exit => RecordedFlags { explicit: Some(*flags), from_executable: None },
            Handover::Direct => {
                let exec = graph
                    .instantiate(*flags)
                    .map_err(|e| failed("instantiate for handover")(e.to_string()))?
                    .named(name);
                // A driver that drops a bit on read-back (580.159 drops 8) forces `explicit`.
                let recorded = match resolve(None, Some(&exec)) {
                    Ok((value, _)) => RecordedFlags { explicit: None, from_executable: Some(value.bits()) },
                    Err(FlagsError::ReadbackMismatch { .. }) => {
                        RecordedFlags { explicit: Some(*flags), from_executable: None }
                    }
                    Err(e) => return Err(failed("flags from the live executable")(e.to_string())),
                };
                handed.push(exec);
                recorded
            }
        };
        exporter.template(name, graph, recorded).map_err(|e| failed("record template")(e.to_string()))?;
    }
    lowest_free = lowest_free.min(free(&ctx)?);
    let export_s = started.elapsed().as_secs_f64();
    let loaded = core_state(&ctx, &exporter)?;
    let expectations = original_run(w, &session, &inits, &buffers)?;
    let mut speeds = time_templates(&ctx, &loaded, &templates)?;
    for mut expectation in expectations {
        expectation.speed = speeds.remove(&expectation.template);
        exporter.expect(expectation);
    }
    let (manifest, _) = exporter.finish().map_err(|e| failed("finish export")(e.to_string()))?;
    let nodes: usize = manifest.templates.iter().map(|t| t.nodes.len()).sum();
    let metrics = Metrics::from([
        measured("export-s", export_s, "s"),
        measured("export-peak-device-memory", free_at_start.saturating_sub(lowest_free) as f64 / MIB as f64, "MiB"),
        measured("graphs", manifest.templates.len() as f64, "1"),
        measured("nodes", nodes as f64, "1"),
        measured("shards", manifest.shards.len() as f64, "1"),
        measured("core-size-on-disk", dir_size(dir) as f64 / MIB as f64, "MiB"),
        measured("shard-write-gbps", snapshot.stored_bytes as f64 / snapshot.seconds / 1e9, "GB/s"),
    ]);
    Ok(Exported { session, handed, metrics })
}

fn free(ctx: &Context) -> Result<u64, Verdict> {
    ctx.synchronize().and_then(|_| ctx.memory()).map(|(free, _)| free).map_err(blocked("read device memory"))
}

/// Places buffers one after another, aligned, and sizes the arena.
pub(super) fn layout(inits: &[BufferInit], cap: u64, ctx: &Context) -> Result<(Vec<Buffer>, Arena), Verdict> {
    let mut offset = 0;
    let buffers: Vec<Buffer> = inits
        .iter()
        .map(|b| {
            let buffer = Buffer { name: b.name.into(), offset, size: b.size(), role: b.role, contents: b.contents() };
            offset = (offset + buffer.size).next_multiple_of(BUFFER_ALIGN);
            buffer
        })
        .collect();
    let granularity = ArenaMapping::granularity(ctx).map_err(blocked("allocation granularity"))?;
    let size = offset.next_multiple_of(ARENA_QUANTUM).max(2 * ARENA_QUANTUM);
    Ok((buffers, Arena { base: ARENA_BASE, size, shard_cap: cap, granularity }))
}

/// Maps the arena shard by shard at its fixed addresses, uploads the initial buffers,
/// compiles the kernels and makes the streams and events the workload issues on.
/// A rank that `peers` map (a rank set whose kernels reach into each other's arenas) maps
/// its arena shareable, and names each peer's buffers `rank-P/NAME` at its window, where
/// every rank's buffers lie at the same offsets.
pub(super) fn open_session(
    w: &dyn Workload,
    ctx: &Context,
    inits: &[BufferInit],
    buffers: &[Buffer],
    arena: &Arena,
    peers: &[PeerRange],
) -> Result<Session, Verdict> {
    let cap = ShardCap::new(arena.shard_cap, arena.granularity).map_err(|e| Verdict::Blocked(e.to_string()))?;
    let spans = plan(arena.size, cap).map_err(|e| Verdict::Blocked(e.to_string()))?;
    // Memory backs what the buffers use, as replay backs it (`Manifest::mapped_lens`): a
    // peer's window maps a rank's allocations whole (driver 580 maps no part of one), so
    // they must be the ones replay makes. The whole reservation stays (a small one was
    // placed elsewhere when made again).
    let used = buffers_end(buffers, arena.granularity);
    let backed = |s: &ShardSpan| s.size.min(used.saturating_sub(s.offset));
    let shards: Vec<(u64, u64, u64)> = spans.iter().map(|s| (arena.base + s.offset, s.size, backed(s))).collect();
    let mapped = match peers.is_empty() {
        true => ArenaMapping::map_parts(ctx, &shards),
        false => ArenaMapping::map_shareable(ctx, &shards),
    };
    let mapping = mapped.map_err(|e| match e {
        CudaError::AddressNotHonoured { wanted, got, size } => Verdict::Blocked(format!(
            "the driver did not honour the arena address: wanted 0x{wanted:x} for {size} B, got 0x{got:x}"
        )),
        other => Verdict::Blocked(format!("map the arena: {other}")),
    })?;
    let mut addresses: HashMap<String, u64> = buffers.iter().map(|b| (b.name.clone(), arena.base + b.offset)).collect();
    for p in peers {
        addresses.extend(buffers.iter().map(|b| (format!("rank-{}/{}", p.rank, b.name), p.address + b.offset)));
    }
    let session = session_over(w, ctx, mapping, addresses)?;
    initialise(ctx, &session.stream, inits, buffers, arena.base)?;
    Ok(session)
}

/// A session over an arena already mapped at `addresses`: the workload's kernels
/// compiled and loaded, its streams and events made.
pub(super) fn session_over(
    w: &dyn Workload,
    ctx: &Context,
    mapping: ArenaMapping,
    addresses: HashMap<String, u64>,
) -> Result<Session, Verdict> {
    let stream = ctx.stream().map_err(blocked("create stream"))?;
    let (mut modules, mut functions, mut sources) = (Vec::new(), HashMap::new(), Vec::new());
    for k in w.kernels() {
        let (module, ptx) = Module::compile(ctx, k.name, k.source).map_err(|e| Verdict::Blocked(e.to_string()))?;
        for f in k.functions {
            functions.insert(f.to_string(), module.function(f).map_err(blocked("fixture function"))?);
        }
        modules.push(module);
        sources.push((k.name, ptx));
    }
    for (name, attributes) in w.function_attributes() {
        let f = functions.get(name).ok_or_else(|| Verdict::Blocked(format!("fixture: no function `{name}`")))?;
        set_function_attributes(f, &attributes).map_err(blocked("set the fixture's function attributes"))?;
    }
    let forks = (0..2).map(|_| ctx.stream()).collect::<Result<_, _>>().map_err(blocked("create stream"))?;
    let events = (0..3).map(|_| ctx.event()).collect::<Result<_, _>>().map_err(blocked("create event"))?;
    Ok(Session {
        ctx: ctx.clone(),
        mapping,
        _modules: modules,
        functions,
        addresses,
        ptx: sources,
        stream,
        forks,
        events,
    })
}

pub(super) fn module_images(w: &dyn Workload, s: &Session) -> Vec<ModuleImage> {
    w.kernels()
        .into_iter()
        .zip(&s.ptx)
        .map(|(k, (id, ptx))| {
            ModuleImage::ptx(id.to_string(), ptx, k.functions.iter().map(|f| s.functions[*f].clone()).collect())
        })
        .collect()
}

pub(super) fn core_context(ctx: &Context, options: ExportOptions) -> Result<CoreContext, Verdict> {
    let driver_version = gnomon_core::cuda::driver_version().map_err(blocked("driver version"))?;
    Ok(CoreContext {
        sm: ctx.info().sm,
        device_name: ctx.info().name.clone(),
        driver_version,
        tp_rank: options.rank,
        tp_world_size: options.world,
        producer: Producer {
            name: "gnomon reference exporter".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            commit: String::new(),
        },
    })
}

/// Writes each buffer's first contents: bytes from the host, hashed weights on the device.
fn initialise(
    ctx: &Context,
    stream: &Stream,
    inits: &[BufferInit],
    buffers: &[Buffer],
    base: u64,
) -> Result<(), Verdict> {
    let mut fill = None;
    for (init, b) in inits.iter().zip(buffers) {
        match &init.init {
            // SAFETY: the buffer lies inside the arena just mapped.
            Init::Bytes(_) | Init::Zero(_) => {
                let bytes = init.host_bytes().expect("bytes and zeros are on the host");
                unsafe { ctx.write(base + b.offset, &bytes) }.map_err(blocked("upload initial buffers"))?
            }
            Init::Undefined(_) => {}
            Init::Hashed { floats, seed } => {
                if fill.is_none() {
                    let (module, _) = Module::compile(ctx, FILL.name, FILL.source).map_err(blocked("compile fill"))?;
                    let function = module.function("fill_hashed").map_err(blocked("fill kernel"))?;
                    fill = Some((module, function));
                }
                let (_, function) = fill.as_ref().expect("compiled above");
                let blob = ParamBlob::new(function.layout())
                    .ptr(0, base + b.offset)
                    .and_then(|p| p.set(1, &floats.to_le_bytes()))
                    .and_then(|p| p.set(2, &seed.to_le_bytes()))
                    .map_err(|e| Verdict::Blocked(format!("fill parameters: {e}")))?;
                stream.launch(function, [4096, 1, 1], [256, 1, 1], 0, &blob.into_bytes()).map_err(blocked("fill"))?;
            }
        }
    }
    stream.synchronize().map_err(blocked("fill"))
}

/// Runs each template eagerly (no graph), after putting back the first contents of every
/// buffer that is not a weight, checks the outputs against the CPU reference, and returns
/// their digests as expectations.
fn original_run(
    w: &dyn Workload,
    s: &Session,
    inits: &[BufferInit],
    buffers: &[Buffer],
) -> Result<Vec<Expectation>, Verdict> {
    let bytes_of = |name: &str| {
        let init = inits.iter().find(|i| i.name == name);
        init.and_then(BufferInit::host_bytes)
            .unwrap_or_else(|| panic!("a CPU reference reads `{name}`, which has no host bytes"))
    };
    let mut expectations = Vec::new();
    for (name, _) in w.templates() {
        for (init, b) in inits.iter().zip(buffers).filter(|(i, _)| i.role != BufferRole::Weight) {
            // Undefined buffers are left as they are: what replay finds there is poison.
            let Some(bytes) = init.host_bytes() else { continue };
            // SAFETY: a buffer of the arena the session mapped.
            unsafe { s.ctx.write(s.addresses[&b.name], &bytes) }.map_err(blocked("reset the writable buffers"))?;
        }
        w.issue(&name, &s.stream, &s.env())
            .and_then(|_| s.stream.synchronize())
            .map_err(blocked("run the original eagerly"))?;
        let mut outputs = Vec::new();
        for (buffer, expected) in w.reference(&name, &Contents(&bytes_of)) {
            let b = buffers.iter().find(|b| b.name == buffer).expect("reference names a known buffer");
            // SAFETY: a buffer of the mapped arena.
            let bytes =
                unsafe { s.ctx.read(s.addresses[&b.name], b.size) }.map_err(blocked("read the original's output"))?;
            outputs.push(digest_within(buffer, &bytes, &expected, w.tolerance()).map_err(|diff| {
                Verdict::Blocked(format!(
                    "fixture: the original run of `{name}` differs from the CPU reference in `{buffer}` by {diff}"
                ))
            })?);
        }
        expectations.push(Expectation {
            template: name,
            outputs,
            reference: Some(w.name().into()),
            tolerance: Some(w.tolerance() as f64),
            speed: None,
        });
    }
    Ok(expectations)
}

/// The digest of an original run's output `buffer` that is within `tolerance` of the CPU
/// reference's `expected`; the difference where it is not.
pub(super) fn digest_within(buffer: &str, bytes: &[u8], expected: &[f32], tolerance: f32) -> Result<OutputDigest, f32> {
    let diff = max_scaled_diff(&from_bytes(bytes), expected).unwrap_or(f32::INFINITY);
    match diff <= tolerance {
        true => Ok(OutputDigest {
            buffer: buffer.into(),
            sha256: hash_hex(bytes).expect("hashing memory"),
            variation: None,
            element: None,
        }),
        false => Err(diff),
    }
}

fn timing(e: ReplayError) -> Verdict {
    Verdict::Blocked(format!("time the templates: {e}"))
}

/// The core's state (the arena as snapshotted, what it does not store poisoned), kept on
/// the device for resets before each timed launch.
pub(super) fn core_state(ctx: &Context, exporter: &Exporter) -> Result<LoadedState, Verdict> {
    let state = LoadedState::keep(ctx, exporter.manifest(), None).map_err(timing)?;
    state.fill_unstored(POISON).map_err(timing)?;
    Ok(state)
}

/// Each template's speed from the core's state, by the function replay times a restored
/// template with. Timed after the original run, as replay times after its checks: on the
/// H200 the same captured model-scale graph, timed in one process before the original run
/// and after it, took 871 µs and 1 049 µs (replay: 1 049 µs), for a reason not found
/// (`baselines/h200-sm90-580.159.04-models/speed/README.md`).
fn time_templates(
    ctx: &Context,
    state: &LoadedState,
    templates: &[(String, u64, RetainedGraph)],
) -> Result<HashMap<String, Speed>, Verdict> {
    let stream = ctx.stream().map_err(blocked("time the templates"))?;
    let mut speeds = HashMap::new();
    for (name, flags, graph) in templates {
        let exec = graph.instantiate(*flags).map_err(blocked("instantiate to time"))?;
        speeds.insert(
            name.clone(),
            time_launches(ctx, &exec, state, &Scope::All, &stream, TIMED_LAUNCHES).map_err(timing)?,
        );
    }
    Ok(speeds)
}

/// What a serving stack does at start-up without a core, once its weights are in place:
/// capture every template and instantiate it, as it goes.
pub(super) fn capture_and_instantiate(w: &dyn Workload, s: &Session) -> Result<(), Verdict> {
    let mut execs = Vec::new();
    for (name, flags) in w.templates() {
        let graph = s.stream.capture(|st| w.issue(&name, st, &s.env())).map_err(blocked("capture"))?;
        execs.push(graph.instantiate(flags).map_err(blocked("instantiate"))?);
    }
    s.ctx.synchronize().map_err(blocked("synchronize"))
}

fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}
