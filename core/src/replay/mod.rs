//! Native replay of a validated core: check the context, map the arena at its exact
//! addresses, poison it and stream the shards up (hashed on the very bytes uploaded, the
//! copies issued by a thread of their own) while this thread has the modules loaded on
//! threads of their own, checks every function's parameter layout and rebuilds the
//! templates, each instantiated with its recorded flags on another thread as soon as it
//! is built (or take executables handed over live); check what the upload left and keep
//! device copies of the writable buffers; then for each template: reset the writable
//! buffers from their device copies, launch and digest the outputs; once all have run,
//! check that no weight changed. Every stage is timed, so the stages account for the
//! replay's wall time. [`measure_floors`] measures what a restore is held against
//! (reading, copying, and the driver's own cost per node), apart from the restore.

mod checksum;
mod draws;
mod floors;
mod loaded;
mod outputs;
mod ranks;
mod rebuild;
mod speed;
mod stage;
mod start;
mod upload;

use std::{collections::HashMap, sync::Arc, time::Instant};

use bytesize::ByteSize;

pub use checksum::{Checksummer, RangeCheck};
pub use floors::{driver_us_per_node, drop_shards_from_cache, shards_cached_fraction, Floors};
pub use loaded::{HeldAt, LoadedState, Scope, Scoping};
pub use outputs::{BlankOutput, OutputTraffic};
pub use ranks::{map_own_range, RankLink, Ranks, MEETING_LIMIT};
pub use rebuild::Functions;
pub use speed::{time_launches, SpeedsTimed, TIMED_LAUNCHES};
pub use stage::{timed, Stage};
pub use start::{start, StartError, Started};
pub use upload::{shards as upload_shards, Staging, Upload, Uploaded};

use gnomon_format::{
    contract::ReplayPlan,
    validate::{recorded_flags, Core},
    Buffer, BufferContents, BufferRole, Manifest,
};

use crate::{
    cuda::{load_on_threads, ArenaMapping, Context, Function, GraphExec, Module, Overlap, RetainedGraph, Stream},
    errors::ReplayError,
    progress::{Progress, Unit},
    translate,
};

/// How templates are instantiated: when, and on how many threads. Measured on the H200
/// runner (`core/benches/templates_ready.rs`, 8 × 1 000 empty-kernel nodes, µs/node):
/// handed over while building, 3.4 on one thread, 4.1–4.7 on two to six; once all are
/// built, 5.1 on one, 5.4–5.5 on more. The driver serialises much of the work, so more
/// threads only contend.
const READY: (Overlap, usize) = (Overlap::WhileBuilding, 1);

/// Seconds per stage, in the order the stages first ran.
pub type StageTimes = Vec<(Stage, f64)>;

/// One output buffer after one launch of its template.
#[derive(Clone, Debug)]
pub struct OutputCheck {
    pub template: String,
    pub buffer: String,
    /// Which launch of the template, from 0; every launch starts from the loaded state.
    pub launch: u32,
    pub expected_sha256: String,
    pub actual_sha256: String,
    /// The output's bytes where a rule reads them: every launch of an output the core
    /// records as varying (judged by its distance from the first), and the first launch
    /// of a template with a CPU reference; empty otherwise, since the others are judged
    /// by digest and the serving catalogue's first launches alone are 23.6 GB. Shared: a
    /// launch whose device sums found it alike the first holds the first's bytes.
    pub bytes: Arc<Vec<u8>>,
    /// What a launch's elements all are, when they check nothing, found as it was read.
    pub blank: Option<BlankOutput>,
}

impl OutputCheck {
    pub fn matches(&self) -> bool {
        self.expected_sha256 == self.actual_sha256
    }
}

pub struct ReplayReport {
    pub stages: StageTimes,
    pub outputs: Vec<OutputCheck>,
    /// One more launch of each template after the undefined buffers were poisoned with
    /// [`SECOND_POISON`], when asked for ([`Launches::again_under_second_poison`]).
    pub repoisoned: Vec<OutputCheck>,
    /// What reading the outputs of every launch cost, those under the second poison too.
    pub output_traffic: OutputTraffic,
    /// Each template with a recorded speed, timed as it was, when asked for
    /// ([`Launches::timed`]).
    pub speeds: SpeedsTimed,
    /// Each drawing template's outputs after the launches the producing program's next
    /// replays would make (the core's `generators`), when asked for ([`Launches::draws`]).
    pub draws: Vec<OutputCheck>,
    pub uploaded: Uploaded,
    /// The first template's launch alone, by CUDA events.
    pub first_launch_s: f64,
    /// Every launch of the `launch` stage by CUDA events: the device's share of the stage,
    /// the rest being the harness's enqueueing and waiting.
    pub kernels_s: f64,
    /// Seconds this thread spent building templates (0 for handed executables).
    pub building_s: f64,
    /// Seconds from the modules loaded to the last template instantiated: what making
    /// the templates ready took, whether or not the upload hid it (0 for handed
    /// executables).
    pub ready_s: f64,
    /// Seconds the modules took to load on their own threads, alongside the upload (0 for
    /// handed executables).
    pub modules_s: f64,
    /// Device memory the rebuilt executables took as they were instantiated, all held at
    /// once (free memory before and after; `None` for handed executables).
    pub executables_bytes: Option<u64>,
    /// Host memory at its peak in each stage (where the kernel resets the mark).
    pub host_peaks: crate::host_memory::Peaks,
    arena: LoadedState,
}

impl std::fmt::Debug for ReplayReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayReport").field("stages", &self.stages).field("outputs", &self.outputs.len()).finish()
    }
}

impl ReplayReport {
    /// What `buffer` held when the core was loaded: a writable buffer from its device copy,
    /// a weight from the arena (checked unchanged after every template).
    pub fn initial_contents(&self, buffer: &str) -> Result<Vec<u8>, ReplayError> {
        self.arena.initial_contents(buffer)
    }
}

/// How replay gets its executables.
pub enum Executables {
    /// Rebuild every template and instantiate it with the recorded flags.
    Rebuild,
    /// Direct handover: live executables from the exporter, one per template, already
    /// instantiated; the arena is already mapped in this process.
    Handed(Vec<GraphExec>),
}

pub fn replay(core: &Core, ctx: &Context, executables: Executables) -> Result<ReplayReport, ReplayError> {
    replay_launching(core, ctx, executables, Launches::default()).map_err(|f| f.error)
}

/// The byte the arena is filled with before the upload: every word a NaN, so a byte the
/// upload failed to write, or memory a template reads before writing, shows.
pub const POISON: u8 = 0xff;
/// The byte undefined buffers are filled with for the poison-independence launch: a finite
/// float pattern, so a template that reads them gives other outputs than under NaN.
pub const SECOND_POISON: u8 = 0xa5;

/// How a replay launches its templates.
#[derive(Clone, Debug)]
pub struct Launches {
    /// Launches of each template, each from the loaded state (at least one).
    pub each: u32,
    /// Then poison the undefined buffers with [`SECOND_POISON`] and launch each template
    /// once more: what a poison-independence check compares.
    pub again_under_second_poison: bool,
    /// Time each template whose expectation records a speed, as many launches as the
    /// exporter timed (after the checks: not part of the restore).
    pub timed: bool,
    /// Launch each template that draws random numbers as the producing program's next
    /// replays would (after the checks: not part of the restore).
    pub draws: bool,
    /// Where the other ranks of the set meet, for a core whose kernels reach into their
    /// arenas (its `peers`): launches are then collective, and not timed.
    pub ranks: Option<RankLink>,
}

impl Default for Launches {
    fn default() -> Self {
        Self { each: 1, again_under_second_poison: false, timed: false, draws: false, ranks: None }
    }
}

/// Where a replay stopped: the stage, the template at fault when there is one, the error.
#[derive(Debug)]
pub struct StageFailure {
    pub stage: Stage,
    pub template: Option<String>,
    pub error: ReplayError,
}

/// [`replay`], launching as `launches` says: each template several times, each time from
/// the loaded state (what a determinism check compares), and again under another poison.
pub fn replay_launching(
    core: &Core,
    ctx: &Context,
    executables: Executables,
    launches: Launches,
) -> Result<ReplayReport, StageFailure> {
    let mut stages = Stages::default();
    restore_and_launch(core, ctx, executables, launches, &mut stages).map_err(|error| StageFailure {
        // Only the context check runs outside a stage.
        stage: stages.failed.unwrap_or(Stage::Context),
        template: error.template().map(str::to_owned).or(stages.template),
        error,
    })
}

fn restore_and_launch(
    core: &Core,
    ctx: &Context,
    executables: Executables,
    launches: Launches,
    stages: &mut Stages,
) -> Result<ReplayReport, ReplayError> {
    let m = core.manifest();
    let ranks = launches
        .ranks
        .clone()
        .filter(|_| !m.peers.is_empty())
        .map(|link| ranks::Ranks::new(m.context.tp_rank, m.context.tp_world_size, link));
    check_context(m, ctx, ranks.is_some())?;
    let handed = matches!(executables, Executables::Handed(_));
    let mut mapping =
        stages.time(Stage::ReserveAndMap, || if handed { Ok(None) } else { map_arena(m, ctx).map(Some) })?;
    if let (Some(ranks), Some(mapping)) = (&ranks, &mut mapping) {
        mapping
            .keep_windows(stages.time(Stage::MapPeers, || ranks.share_and_map(&m.peers, ctx, mapping, m.arena.base))?);
    }
    // The order of the stages is the order of the qualification cases they decide: map,
    // modules, upload, rebuild, instantiate. Modules load alongside the upload; a rebuild
    // follows it, and its failure is told after the upload's checks.
    let (uploaded, rebuilt) = match executables {
        Executables::Handed(execs) => {
            stages.time(Stage::Poison, || poison(m, ctx))?;
            (stages.time(Stage::Upload, || upload::shards(core, ctx, Staging::default()))?, Ok(execs))
        }
        Executables::Rebuild => upload_while_building(core, ctx, stages)?,
    };
    // Loaded for the checks (contents here, weights after the launches), timed with them.
    let checksummer = stages.time(Stage::WeightsCheck, || checksum::Checksummer::new(ctx))?;
    stages.time(Stage::ContentsCheck, || check_contents(m, ctx, &checksummer))?;
    let arena = stages.time(Stage::WritableCopies, || LoadedState::keep(ctx, m, mapping))?;
    let executables = rebuilt.map_err(|(stage, e)| {
        stages.fail(stage);
        e
    })?;
    // Every step after the context check runs in a named stage, so a failure says where.
    let plan = stages.time(if handed { Stage::Handover } else { Stage::Instantiate }, || plan(m, executables))?;
    let restored = Restored { ctx, core, arena: &arena, plan: &plan, checksummer: &checksummer, ranks: ranks.as_ref() };
    let compared = ComparedWith::ItsFirst { again: launches.again_under_second_poison };
    let mut staging = stages.time(Stage::ReadOutputs, || outputs::OutputStaging::for_outputs(m, &arena))?;
    let launched = launch_all(&restored, launches.each.max(1), compared, "replay: launches", stages, &mut staging)?;
    // Timed launches go back to back; a rank's launch waits for its peers' (`RankSync`).
    let speeds = match launches.timed && ranks.is_none() {
        true => stages.time(Stage::Speed, || speed::time_recorded(&restored))?,
        false => SpeedsTimed::default(),
    };
    // A rank's launches wait for its peers'; its exporter recorded no draws (refused).
    let draws = match launches.draws && ranks.is_none() {
        true => stages.time(Stage::Draws, || draws::launch_draws(m, &arena, plan.executables(), &ctx.stream()?))?,
        false => Vec::new(),
    };
    let (mut repoisoned, mut traffic) = (Vec::new(), launched.traffic);
    if launches.again_under_second_poison {
        // Timed apart: this launch is a check of the core, not part of the restore.
        let started = Instant::now();
        arena.fill_unstored(SECOND_POISON)?;
        let under = "replay: launches under a second poison";
        let earlier = ComparedWith::Earlier(&launched);
        let again = launch_all(&restored, 1, earlier, under, &mut Stages::default(), &mut staging)?;
        traffic += again.traffic;
        repoisoned = again.outputs;
        stages.add(Stage::PoisonIndependence, started.elapsed().as_secs_f64());
    }
    let Launched { outputs, first_launch_s, kernels_s, .. } = launched;
    let (building_s, ready_s, modules_s) = (stages.building_s, stages.ready_s, stages.modules_s);
    let executables_bytes = stages.executables_bytes;
    let host_peaks = std::mem::take(&mut stages.peaks);
    let stages = std::mem::take(&mut stages.times);
    Ok(ReplayReport {
        stages,
        outputs,
        repoisoned,
        output_traffic: traffic,
        speeds,
        draws,
        uploaded,
        first_launch_s,
        kernels_s,
        building_s,
        ready_s,
        modules_s,
        executables_bytes,
        host_peaks,
        arena,
    })
}

/// The executables of a rebuild, or the stage that failed and why.
type RebuildOutcome = Result<Vec<GraphExec>, (Stage, ReplayError)>;

/// Poisons the arena, then uploads the shards, the copies issued by a thread of their own,
/// while this thread has the modules loaded (on threads of their own) and then builds
/// every template, each instantiated on another thread as soon as it is built: neither
/// needs the other. The stages after the upload's are what the restore waited for once
/// the upload had ended: modules, building, instantiation. A module that failed is told
/// before the upload and a rebuild that failed after the upload's checks, as the cases
/// are ordered.
fn upload_while_building(
    core: &Core,
    ctx: &Context,
    stages: &mut Stages,
) -> Result<(Uploaded, RebuildOutcome), ReplayError> {
    stages.time(Stage::Poison, || poison(core.manifest(), ctx))?;
    let started = Instant::now();
    let upload = Upload::prepare(core, ctx, Staging::default()).and_then(|u| Ok((u, ctx.stream()?)));
    let (uploaded, building) = match upload {
        // The upload's peak holds the modules and templates built alongside it.
        Ok((upload, stream)) => stages
            .peaks
            .measure(Stage::Upload.name(), || upload.run_alongside(&stream, || load_and_build(core, ctx, started))),
        Err(e) => (Err(e), load_and_build(core, ctx, started)),
    };
    let upload_s = uploaded.as_ref().map_or(started.elapsed().as_secs_f64(), |u| u.seconds);
    stages.add(Stage::Upload, upload_s);
    let Building { outcome, modules_at, built_at, ready_at, executables_bytes, .. } = building;
    stages.executables_bytes = executables_bytes;
    for (stage, seconds) in waited_after(upload_s, [modules_at, built_at, ready_at]) {
        stages.add(stage, seconds);
    }
    (stages.modules_s, stages.building_s, stages.ready_s) =
        (building.modules_s, building.building_s, ready_at - modules_at);
    let outcome = outcome.inspect_err(|_| stages.fail(Stage::ModuleLoad))?;
    Ok((uploaded.inspect_err(|_| stages.fail(Stage::Upload))?, outcome))
}

/// What the restore waited for once its upload had ended (`upload_s`), phase by phase of
/// the building thread, which ended each phase `ends` seconds from the upload's start:
/// the modules, the building, the instantiation. Each counts from when it began or the
/// upload ended, whichever was later.
fn waited_after(upload_s: f64, ends: [f64; 3]) -> [(Stage, f64); 3] {
    let [modules_at, built_at, ready_at] = ends;
    let waited = |from: f64, to: f64| (to - from.max(upload_s)).max(0.0);
    [
        (Stage::ModuleLoad, waited(0.0, modules_at)),
        (Stage::Rebuild, waited(modules_at, built_at)),
        (Stage::Instantiate, waited(built_at, ready_at)),
    ]
}

/// What this thread did while the upload ran: the executables (or why there are none),
/// seconds from the upload's start when the modules were loaded, the last template built
/// and the last instantiated, and the loading's and the building's own seconds.
struct Building {
    /// `Err` where a module failed to load; within, where a template failed.
    outcome: Result<RebuildOutcome, ReplayError>,
    modules_at: f64,
    built_at: f64,
    ready_at: f64,
    modules_s: f64,
    building_s: f64,
    executables_bytes: Option<u64>,
}

/// Loads the modules, then builds every template on this thread, each instantiated on
/// another as soon as it is built.
fn load_and_build(core: &Core, ctx: &Context, started: Instant) -> Building {
    let m = core.manifest();
    let loaded = load_modules(core, ctx);
    let modules_at = started.elapsed().as_secs_f64();
    let (functions, modules_s) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            let at = modules_at;
            return Building {
                outcome: Err(e),
                modules_at,
                built_at: at,
                ready_at: at,
                modules_s: 0.0,
                building_s: 0.0,
                executables_bytes: None,
            };
        }
    };
    let free = || ctx.memory().ok().map(|(free, _)| free);
    let before = free();
    let ready = rebuild::ready(ctx, m, &functions, READY);
    let ready_at = started.elapsed().as_secs_f64();
    let executables_bytes = before.zip(free()).map(|(before, after)| before.saturating_sub(after));
    let (built_at, building_s) = ready.as_ref().map_or((ready_at, 0.0), |r| (modules_at + r.built_s, r.building_s));
    let named = |r: crate::cuda::Ready| r.execs.into_iter().zip(&m.templates).map(|(e, t)| e.named(&t.name)).collect();
    Building { outcome: Ok(ready.map(named)), modules_at, built_at, ready_at, modules_s, building_s, executables_bytes }
}

/// A core's templates rebuilt as replay rebuilds them, nothing uploaded or launched: the
/// mapping that keeps their memset and memcpy addresses valid, the graphs in template
/// order, and the loaded functions with their attributes set.
pub struct Rebuilt {
    pub mapping: ArenaMapping,
    pub graphs: Vec<RetainedGraph>,
    pub functions: rebuild::Functions,
    /// Seconds the modules took to load, with nothing else running: the restore's floor
    /// for its modules.
    pub modules_s: f64,
}

/// Maps the arena, loads the modules and rebuilds every template, for reading back what a
/// rebuild restored.
pub fn rebuild_only(core: &Core, ctx: &Context) -> Result<Rebuilt, ReplayError> {
    let m = core.manifest();
    // Nothing is launched: a kernel holding a peer's address is built, never run.
    check_context(m, ctx, true)?;
    let mapping = map_arena(m, ctx)?;
    let (functions, modules_s) = load_modules(core, ctx)?;
    let graphs = rebuild::templates(ctx, m, &functions)?;
    Ok(Rebuilt { mapping, graphs, functions, modules_s })
}

/// The floors an upload of `core` is held against, measured now on this machine (it reads
/// up to 2 GiB of the shard files again, `cold` after dropping them from the page cache):
/// for reporting, not part of a restore.
pub fn measure_floors(core: &Core, ctx: &Context, cold: bool) -> Result<Floors, ReplayError> {
    floors::measure(core, ctx, Staging::default(), cold)
}

/// Seconds `core`'s modules take to load with nothing else running, on the threads a
/// restore loads them on: the floor of its modules. For reporting, not part of a restore.
pub fn module_floor_s(core: &Core, ctx: &Context) -> Result<f64, ReplayError> {
    load_modules(core, ctx).map(|(_, seconds)| seconds)
}

/// Stage times, a stage met again adding to its total; the stage that failed and the
/// template being launched, for a [`StageFailure`].
#[derive(Default)]
struct Stages {
    times: StageTimes,
    failed: Option<Stage>,
    template: Option<String>,
    /// Seconds spent building templates, and making them ready.
    building_s: f64,
    ready_s: f64,
    /// Seconds the modules took to load on their own threads, alongside the upload.
    modules_s: f64,
    executables_bytes: Option<u64>,
    /// Host memory at its peak in each stage.
    peaks: crate::host_memory::Peaks,
}

impl Stages {
    fn add(&mut self, name: Stage, seconds: f64) {
        match self.times.iter_mut().find(|(n, _)| *n == name) {
            Some((_, total)) => *total += seconds,
            None => self.times.push((name, seconds)),
        }
    }

    /// Marks `stage` as where the replay stopped, unless an earlier one was.
    fn fail(&mut self, stage: Stage) {
        self.failed.get_or_insert(stage);
    }

    fn time<T, E>(&mut self, name: Stage, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        // The peak's reads of /proc stay outside the stage's time: reset, launch and read
        // run once per launch of every template.
        let mut seconds = 0.0;
        let result = self.peaks.measure(name.name(), || {
            let started = Instant::now();
            let result = f();
            seconds = started.elapsed().as_secs_f64();
            result
        });
        self.add(name, seconds);
        if result.is_err() {
            self.fail(name);
        }
        result
    }
}

/// Refuses a core that maps its peers' memory to a replay not given its rank set: a kernel
/// holding a peer's address would fault where no peer is mapped.
pub fn check_supported(m: &Manifest) -> Result<(), ReplayError> {
    match m.peers.len() {
        0 => Ok(()),
        ranges => Err(ReplayError::PeersNotMapped { ranges }),
    }
}

/// Whether this process can replay `m`: its device and driver, and its peers' memory
/// where it maps some (`linked`: it was given the rank set to meet).
fn check_context(m: &Manifest, ctx: &Context, linked: bool) -> Result<(), ReplayError> {
    if !linked {
        check_supported(m)?;
    }
    if m.context.sm != ctx.info().sm {
        let (core, device) = (format!("sm_{}", m.context.sm), ctx.info().arch());
        return Err(ReplayError::ContextMismatch { what: "SM", core, device });
    }
    let driver = crate::cuda::driver_version()?;
    if driver < m.context.driver_version {
        let (core, device) = (m.context.driver_version.to_string(), driver.to_string());
        return Err(ReplayError::ContextMismatch { what: "driver version", core, device });
    }
    // Shards are multiples of the core's granularity; the driver maps only multiples of its own.
    let granularity = ArenaMapping::granularity(ctx)?;
    if m.arena.granularity % granularity != 0 {
        let (core, device) = (ByteSize(m.arena.granularity).to_string(), ByteSize(granularity).to_string());
        return Err(ReplayError::ContextMismatch { what: "allocation granularity", core, device });
    }
    Ok(())
}

/// Reserves the arena shard by shard at the core's recorded addresses, and maps memory up
/// to what the core uses ([`Manifest::mapped_lens`]): a generous reservation costs address
/// space, not device memory. (The whole shard is reserved: on driver 580 a reservation of
/// a few MiB was placed elsewhere than asked where the shard's own size was honoured.)
pub fn map_arena(m: &Manifest, ctx: &Context) -> Result<ArenaMapping, ReplayError> {
    let shards: Vec<(u64, u64, u64)> =
        m.shards.iter().zip(m.mapped_lens()).map(|(s, len)| (m.arena.base + s.offset, s.size, len)).collect();
    // A rank whose peers map its memory (every rank of a set with peers) shares its shards.
    match m.peers.is_empty() {
        true => Ok(ArenaMapping::map_parts(ctx, &shards)?),
        false => Ok(ArenaMapping::map_shareable(ctx, &shards)?),
    }
}

/// Fills the arena with NaN bit patterns before the upload, so nothing a previous process
/// left in the same physical memory (the exporter's own arena, say) can stand in for a
/// byte the upload failed to write, and what is undefined reads as poison; then zeroes the
/// buffers whose contents are zero.
fn poison(m: &Manifest, ctx: &Context) -> Result<(), ReplayError> {
    let stream = ctx.stream()?;
    for (at, size) in m.mapped_ranges() {
        // SAFETY: each range is mapped (by `map_arena`, or within the exporter's mapping for
        // handed executables); its size is a multiple of the granularity.
        unsafe { stream.memset_u32(m.arena.base + at, u32::from_ne_bytes([POISON; 4]), size / 4) }?;
    }
    for b in m.buffers.iter().filter(|b| b.contents == BufferContents::Zero) {
        // SAFETY: a buffer of the validated core lies inside the mapped arena.
        unsafe { stream.memset_u8(m.arena.base + b.offset, 0, b.size) }?;
    }
    Ok(stream.synchronize()?)
}

/// After the upload, every `zero` buffer reads back as zero and every `undefined` one as
/// poison, counted on the device in one launch per kind: a buffer the restore left
/// holding anything else fails it.
fn check_contents(m: &Manifest, ctx: &Context, checksummer: &checksum::Checksummer) -> Result<(), ReplayError> {
    let stream = ctx.stream()?;
    let kinds = [(BufferContents::Zero, "zero", "zero", 0), (BufferContents::Undefined, "undefined", "poison", POISON)];
    for (kind, contents, expected, byte) in kinds {
        let buffers: Vec<&Buffer> = m.buffers.iter().filter(|b| b.contents == kind && b.size > 0).collect();
        let ranges: Vec<checksum::Range> = buffers.iter().map(|b| (m.arena.base + b.offset, b.size)).collect();
        // SAFETY: buffers of the validated core lie inside the mapped arena.
        let counts = unsafe { checksummer.bytes_unlike(&ranges, byte) }?.run(&stream)?;
        if let Some((b, &differing)) = buffers.iter().zip(&counts).find(|(_, &n)| n > 0) {
            return Err(ReplayError::Contents { buffer: b.name.clone(), contents, expected, differing });
        }
    }
    Ok(())
}

/// Threads that load modules: the driver loads distinct modules concurrently (on the H200
/// runner 8 loaded llama-eager's 20 images fastest, `docs/driver-facts.md`).
const MODULE_THREADS: usize = 8;

/// Loads every module on [`MODULE_THREADS`] threads ([`load_on_threads`]), sets each
/// function's recorded attributes and checks its recorded layout against the driver's;
/// with the functions, the seconds the loading took.
fn load_modules(core: &Core, ctx: &Context) -> Result<(rebuild::Functions, f64), ReplayError> {
    let modules = &core.manifest().modules;
    let wanted: Vec<Vec<&str>> =
        modules.iter().map(|m| m.functions.iter().map(|f| f.name.as_str()).collect()).collect();
    let image = |i: usize| core.image(i).map_err(ReplayError::from);
    let loaded = load_on_threads(ctx, &wanted, image, MODULE_THREADS)?;
    Ok((recorded_functions(modules, loaded.modules)?, loaded.seconds))
}

/// Each loaded function under its module's id, its recorded attributes set, its layout
/// the recorded one.
fn recorded_functions(
    modules: &[gnomon_format::Module],
    loaded: Vec<(Module, Vec<Function>)>,
) -> Result<rebuild::Functions, ReplayError> {
    let mut functions = HashMap::new();
    for (module, (_, loaded)) in modules.iter().zip(loaded) {
        for (f, function) in module.functions.iter().zip(loaded) {
            translate::set_function_attributes(&function, &f.attributes)?;
            let driver = translate::param_slots(function.layout());
            if driver != f.params {
                let pairs = |slots: &[gnomon_format::ParamSlot]| slots.iter().map(|s| (s.offset, s.size)).collect();
                return Err(ReplayError::LayoutMismatch {
                    module: module.id.clone(),
                    function: f.name.clone(),
                    recorded: pairs(&f.params),
                    driver: pairs(&driver),
                });
            }
            functions.insert((module.id.clone(), f.name.clone()), function);
        }
    }
    Ok(functions)
}

fn plan(m: &Manifest, execs: Vec<GraphExec>) -> Result<ReplayPlan<GraphExec>, ReplayError> {
    let recorded: Vec<(&str, u64)> = m
        .templates
        .iter()
        .map(|t| (t.name.as_str(), recorded_flags(&t.flags).expect("validated flags").bits()))
        .collect();
    Ok(ReplayPlan::new(&recorded, execs)?)
}

/// A restored core, ready to launch: what every launch of [`launch_all`] uses.
struct Restored<'r> {
    ctx: &'r Context,
    core: &'r Core,
    arena: &'r LoadedState,
    plan: &'r ReplayPlan<GraphExec>,
    checksummer: &'r checksum::Checksummer,
    /// A rank of a set with peers launches with the others.
    ranks: Option<&'r ranks::Ranks>,
}

/// What [`launch_all`] gives back: the outputs, each template's first launch among them,
/// what reading them cost, and launch times in seconds by CUDA events (the first launch,
/// and all of them).
struct Launched {
    outputs: Vec<OutputCheck>,
    firsts: outputs::FirstLaunches,
    traffic: OutputTraffic,
    first_launch_s: f64,
    kernels_s: f64,
}

/// What a pass of [`launch_all`] compares its launches' outputs with.
enum ComparedWith<'l> {
    /// Its own first launches; `again` when a later pass will be compared with them too.
    ItsFirst { again: bool },
    /// An earlier pass's first launches.
    Earlier(&'l Launched),
}

/// Launches each template `launches` times, each from the core's initial state of the
/// writable buffers, reads its outputs ([`outputs::OutputReader`]: later launches, and all
/// of a pass compared with an earlier one, by device sums), and checks once, after the
/// last launch, that no weight changed (a check reads every weight: one per launch would
/// cost more than the restore). A rank of a set with peers launches with the others: all
/// reset, then all launch, then all finish, before anyone resets again.
fn launch_all(
    r: &Restored,
    launches: u32,
    compared: ComparedWith,
    stage: &'static str,
    stages: &mut Stages,
    staging: &mut outputs::OutputStaging,
) -> Result<Launched, ReplayError> {
    let Restored { ctx, core, arena, plan, checksummer, ranks } = *r;
    let (m, stream) = (core.manifest(), ctx.stream()?);
    let total = m.templates.len() as u64 * u64::from(launches);
    let mut progress = Progress::start(stage, Unit::Items("launches"), total);
    let weights = stages.time(Stage::WeightsCheck, || Weights::loaded(m, arena, checksummer, &stream))?;
    let (start, end) = (ctx.event()?, ctx.event()?);
    let (mut first_launch, mut kernels_ms) = (None, 0.0f64);
    let (mut outputs, mut firsts, mut traffic) =
        (Vec::new(), outputs::FirstLaunches::default(), OutputTraffic::default());
    let (earlier, sum_first) = match compared {
        ComparedWith::ItsFirst { again } => (None, launches > 1 || again),
        ComparedWith::Earlier(e) => (Some((e.outputs.as_slice(), &e.firsts)), false),
    };
    let on_device = outputs::OnDevice::new(arena, checksummer, &stream, staging);
    let mut reader = outputs::OutputReader::new(on_device, earlier, sum_first);
    let expected = m.expectations_by_template();
    for ((template, exec), launch) in
        m.templates.iter().zip(plan.executables()).flat_map(|te| (0..launches).map(move |l| (te, l)))
    {
        stages.template = Some(template.name.clone());
        stages.time(Stage::Reset, || arena.reset(&stream))?;
        with_peers(ranks, &stream, stages)?;
        let launched = stages.time(Stage::Launch, || {
            stream.record(&start)?;
            exec.launch(&stream)?;
            stream.record(&end)?;
            stream.synchronize()?;
            start.elapsed_ms(&end)
        })?;
        with_peers(ranks, &stream, stages)?;
        first_launch.get_or_insert(launched as f64 / 1e3);
        kernels_ms += launched as f64;
        if let Some(e) = expected.get(template.name.as_str()) {
            stages.time(Stage::ReadOutputs, || reader.read(e, launch, &mut outputs, &mut firsts, &mut traffic))?;
        }
        progress.advance(1);
    }
    progress.finish();
    stages.template = None;
    stages.time(Stage::WeightsCheck, || match weights.changed(&stream)? {
        changed if changed.is_empty() => Ok(()),
        changed => Err(weights.writer(core, ctx, arena, plan, &changed, &stream)),
    })?;
    let (first_launch_s, kernels_s) = (first_launch.unwrap_or(0.0), kernels_ms / 1e3);
    Ok(Launched { outputs, firsts, traffic, first_launch_s, kernels_s })
}

/// A rank of a set waits, once its stream is idle, until every other rank is as far.
fn with_peers(ranks: Option<&ranks::Ranks>, stream: &Stream, stages: &mut Stages) -> Result<(), ReplayError> {
    let Some(ranks) = ranks else { return Ok(()) };
    stages.time(Stage::RankSync, || ranks.sync_after(stream))
}

/// The weights as loaded, by a checksum of each, and the check that sums them again: no
/// launch may change them (`weights-unchanged`; the kit refuses an export whose launches
/// did, since its snapshot reads the weights while they launch).
pub struct Weights<'c> {
    buffers: Vec<&'c Buffer>,
    check: checksum::RangeCheck<'c>,
    loaded: Vec<u64>,
}

impl<'c> Weights<'c> {
    pub fn loaded(
        m: &'c Manifest,
        arena: &LoadedState,
        checksummer: &'c checksum::Checksummer,
        stream: &Stream,
    ) -> Result<Self, ReplayError> {
        let buffers: Vec<&Buffer> = m.buffers.iter().filter(|b| b.role == BufferRole::Weight).collect();
        let ranges: Vec<checksum::Range> = buffers.iter().map(|b| (arena.address(b), b.size)).collect();
        // SAFETY: weight buffers lie in the validated arena, mapped while `arena` lives.
        let check = unsafe { checksummer.checksums(&ranges) }?;
        let loaded = check.run(stream)?;
        Ok(Self { buffers, check, loaded })
    }

    /// The positions of the weights whose checksum differs from the loaded one.
    pub fn changed(&self, stream: &Stream) -> Result<Vec<usize>, ReplayError> {
        let now = self.check.run(stream)?;
        Ok((0..self.loaded.len()).filter(|&i| self.loaded[i] != now[i]).collect())
    }

    /// The name of the weight at position `i`.
    pub fn name(&self, i: usize) -> Option<&str> {
        self.buffers.get(i).map(|b| b.name.as_str())
    }

    /// Which template wrote a `changed` weight: each is launched alone, from the loaded
    /// state, the changed weights read back from the shard files first, until one changes
    /// a weight again. Costs nothing unless a weight was written.
    fn writer(
        &self,
        core: &Core,
        ctx: &Context,
        arena: &LoadedState,
        plan: &ReplayPlan<GraphExec>,
        changed: &[usize],
        stream: &Stream,
    ) -> ReplayError {
        let m = core.manifest();
        let written = |template: &str, i: usize| ReplayError::WeightWritten {
            template: template.to_owned(),
            buffer: self.buffers[i].name.clone(),
        };
        let search = || {
            for (template, exec) in m.templates.iter().zip(plan.executables()) {
                for &i in changed {
                    let b = self.buffers[i];
                    upload::reload(core, ctx, b.offset..b.offset + b.size)?;
                }
                arena.reset(stream)?;
                exec.launch(stream)?;
                stream.synchronize()?;
                if let Some(&i) = self.changed(stream)?.first() {
                    return Ok(written(&template.name, i));
                }
            }
            Ok(written("(no template alone; the sequence of all of them)", changed[0]))
        };
        search().unwrap_or_else(|e| e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_restore_waited_for_after_its_upload_is_each_phase_past_the_upload() {
        let seconds = |upload_s, ends| waited_after(upload_s, ends).map(|(_, s)| (s * 1e3).round() / 1e3);
        // Modules at 0.1 s, built at 0.3, ready at 0.5: an upload of 0.6 s hid them all.
        assert_eq!(seconds(0.6, [0.1, 0.3, 0.5]), [0.0, 0.0, 0.0]);
        // An upload of 0.2 s ended while building: the rest of the building and all the
        // instantiation are waited for.
        assert_eq!(seconds(0.2, [0.1, 0.3, 0.5]), [0.0, 0.1, 0.2]);
        // An upload of 0.05 s ended before the modules: every phase is waited for, and
        // together they are the building thread's end past the upload.
        assert_eq!(seconds(0.05, [0.1, 0.3, 0.5]), [0.05, 0.2, 0.2]);
        assert_eq!(
            waited_after(0.05, [0.1, 0.3, 0.5]).map(|(stage, _)| stage),
            [Stage::ModuleLoad, Stage::Rebuild, Stage::Instantiate]
        );
    }
}
