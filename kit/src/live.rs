//! The GPU side of the kit, in the capturing process: map the arena where asked, then
//! export graphs that another library captured into it. Templates are walked by the
//! core's exporter; each kernel's image is the recorded image with exactly its module's
//! kernels; expectations come from launching each template here several times from the
//! core's own state (`launches`).

use std::{
    collections::{BTreeMap, HashMap},
    path::{Path, PathBuf},
    sync::atomic::{AtomicBool, Ordering},
    time::Instant,
};

use gnomon_format::{
    shard_writer::WriteStages, Arena, Context as CoreContext, Generator, ModuleKind, PeerRange, Producer, RecordedFlags,
};

use gnomon_core::{
    cuda::{driver_version, ArenaMapping, Context, Function, NodeInfo, NodeKind, RetainedGraph},
    errors::ExportError,
    export::{Exporter, ModuleImage},
    record::{image_of, images_by_entries, provenance, Heard, ImageRecorder, LoadedImage},
    replay::{RankLink, Ranks},
    sharing::GpuProcess,
};
use serde::Serialize;

use crate::{
    allocations::{Allocations, Stats},
    collectives,
    declare::{declare, Declared, Tensor},
    errors::KitError,
    launches::{expectations, ExpectationStages, Expected, Launcher, Launching, Varied},
    outside::{self, Suspect},
    random::{self, HostGenerator},
};

/// Reserves and maps `size` bytes (rounded up to the granularity) at exactly `base`, or
/// says where the driver would have put them. A `shareable` arena can be handed to the
/// other ranks of a set ([`join`]).
pub fn map_arena(ctx: &Context, base: u64, size: u64, shareable: bool) -> Result<ArenaMapping, KitError> {
    let granularity = ArenaMapping::granularity(ctx)?;
    let size = size.checked_next_multiple_of(granularity).ok_or(KitError::ArenaSize(size))?;
    Ok(match shareable {
        false => ArenaMapping::map(ctx, &[(base, size)])?,
        true => ArenaMapping::map_shareable(ctx, &[(base, size, size)])?,
    })
}

/// This process as rank `rank` of a port's set: where it maps each peer's arena, and how
/// it meets them to launch.
pub struct RankSet {
    pub rank: u32,
    pub world: u32,
    /// Each other rank and the address where this rank maps its arena, whole.
    pub windows: Vec<(u32, u64)>,
    ranks: Ranks,
}

/// Meets the other ranks of a set at `link`, hands them this rank's arena (`mapping`,
/// shareable, at `base`) and maps each of theirs at its window: from here on this rank's
/// kernels may hold addresses in its peers' arenas. Every rank's arena is of one size.
pub fn join(
    mapping: &mut ArenaMapping,
    base: u64,
    (rank, world): (u32, u32),
    link: RankLink,
    windows: Vec<(u32, u64)>,
) -> Result<RankSet, KitError> {
    every_peer_once(rank, world, &windows)?;
    let ranks = Ranks::new(rank, world, link);
    let ctx = mapping.context().clone();
    let mapped = ranks.share_and_map(&ranges(&windows, mapping.size()), &ctx, mapping, base)?;
    mapping.keep_windows(mapped);
    Ok(RankSet { rank, world, windows, ranks })
}

/// Rank `rank` of `world` has a window for every other rank, once.
fn every_peer_once(rank: u32, world: u32, windows: &[(u32, u64)]) -> Result<(), KitError> {
    let others: Vec<u32> = (0..world).filter(|&r| r != rank).collect();
    let mut peers: Vec<u32> = windows.iter().map(|&(p, _)| p).collect();
    peers.sort_unstable();
    match rank < world && peers == others {
        true => Ok(()),
        false => Err(KitError::RankSet { rank, world, peers }),
    }
}

impl RankSet {
    /// Waits until every other rank of the set has come as far (the ranks call it alike).
    pub fn sync(&self) -> Result<(), KitError> {
        Ok(self.ranks.sync()?)
    }
}

/// Each peer's arena from its start, `size` bytes of it, at its window.
fn ranges(windows: &[(u32, u64)], size: u64) -> Vec<PeerRange> {
    windows.iter().map(|&(rank, address)| PeerRange { rank, offset: 0, size, address }).collect()
}

/// What to export: graphs by template name (raw `CUgraph` handles), the tensors the caller
/// named, and how replay shall instantiate and store them.
pub struct Request<'a> {
    pub out: &'a Path,
    pub graphs: Vec<(String, u64)>,
    pub tensors: Vec<Tensor>,
    /// PyTorch's live blocks outside the arena, which no node may point into.
    pub outside: Vec<outside::LiveBlock>,
    pub flags: u64,
    pub shard_cap: u64,
    pub producer: Producer,
    /// Seconds the capturing process spent before the export, by name.
    pub producer_seconds: Vec<(String, f64)>,
    /// How many times each template is launched for its expectations.
    pub launching: Launching,
    /// Refuse the export when an output varies from launch to launch.
    pub bitwise: bool,
    /// The set this process is a rank of, if it joined one.
    pub ranks: Option<&'a RankSet>,
    /// The default CUDA generator's seed, next offset and each graph's increment.
    pub generator: HostGenerator,
}

/// What an export did, for the caller's report.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Exported {
    pub templates: usize,
    pub nodes: usize,
    pub kernel_nodes: usize,
    /// Kernel nodes whose image came from each recorder route; none is missing, or the
    /// export failed naming it.
    pub kernel_nodes_by_route: BTreeMap<&'static str, usize>,
    /// Kernel nodes by the library that loaded their image (`unknown` where the stack
    /// could not be walked).
    pub kernel_nodes_by_library: BTreeMap<String, usize>,
    pub images_recorded: usize,
    /// Recorded images tied to the module handle of a `cuModuleLoad*` given them.
    pub images_tied_to_module_loads: usize,
    pub modules: usize,
    pub module_bytes: u64,
    pub buffers: usize,
    pub stored_bytes: u64,
    /// The arena's bytes by standing at the export (`gnomon.torch.memory_stats()`).
    pub arena: Stats,
    /// The most launches any template's expectations compared.
    pub launches_per_template: u32,
    /// Outputs that launches from the same state did not give alike, or that take the
    /// spread of one that did.
    pub varied: Vec<Varied>,
    /// Nodes whose words pointed into live blocks outside the arena that their templates
    /// were shown not to use.
    pub dismissed: Vec<Suspect>,
    /// Other processes on a GPU when the export began (NVML): expectations recorded beside
    /// them may hold bits a launch alone would not give.
    pub other_gpu_processes: Vec<GpuProcess>,
    /// Where the export's time went, stage by stage: reading the graphs, their kernels'
    /// images and writing the modules; the snapshot (its `zero` buffers checked, then
    /// copied, digested and written, each stage's busy seconds summed over its threads);
    /// the expectations' launches; validating and writing the manifest. The snapshot is
    /// written while the launches run, so `snapshot_s` and `expectations_s` overlap: each
    /// is its own work's wall time, from its start to its end.
    pub prepare_s: f64,
    pub snapshot_s: f64,
    pub zero_check_s: f64,
    pub snapshot_stages: WriteStages,
    pub expectations_s: f64,
    pub expectation_stages: ExpectationStages,
    /// Device memory the expectations' executables held at most, one alive at a time
    /// (replay, which holds them all, reports `executables-device-bytes`).
    pub executable_bytes: u64,
    /// Validating and writing the manifest, syncing the core and swapping it in.
    pub finish_s: f64,
    /// Of `finish_s`, syncing the core's files and directories to the disk: the price of an
    /// export that a kill or a power loss cannot leave half written.
    pub sync_s: f64,
    pub export_s: f64,
    /// Host memory at its peak in the snapshot and the expectations (one stage, since they
    /// run at once: `snapshot-and-expectations`) and the finish, and over the whole
    /// process (`whole`), in bytes: where the kernel resets the mark, each stage is
    /// measured alone.
    pub peak_host_rss_bytes: BTreeMap<&'static str, u64>,
}

/// The bytes each memset and device-to-device copy of the templates' `nodes` touches,
/// `(address, len)`.
fn touched(nodes: &[Vec<NodeInfo>]) -> Vec<(u64, u64)> {
    let mut ranges = Vec::new();
    for node in nodes.iter().flatten() {
        match node.kind {
            NodeKind::Memset { dst, element_size, count, .. } => {
                ranges.push((dst, u64::from(element_size).saturating_mul(count)))
            }
            NodeKind::Memcpy { dst, src, bytes, host: None } => ranges.extend([(dst, bytes), (src, bytes)]),
            _ => {}
        }
    }
    ranges
}

/// Exports `request.graphs`, captured in the arena `mapping` maps, as a core.
pub fn export(
    ctx: &Context,
    mapping: &ArenaMapping,
    allocations: &Allocations,
    recorder: &ImageRecorder,
    request: Request,
) -> Result<Exported, KitError> {
    let started = Instant::now();
    let other_gpu_processes = gnomon_core::sharing::other_processes(&[]).unwrap_or_default();
    ctx.synchronize()?;
    let graphs = request
        .graphs
        .iter()
        // SAFETY: the caller hands live graphs of this process's primary context.
        .map(|(name, raw)| Ok((name.clone(), unsafe { RetainedGraph::clone_of(ctx, *raw) }?)))
        .collect::<Result<Vec<_>, KitError>>()?;
    // Read from the driver once for the two checks that look at every node.
    let nodes = graphs.iter().map(|(_, g)| g.nodes()).collect::<Result<Vec<_>, _>>()?;
    let suspects = outside::suspects(graphs.iter().map(|(name, _)| name.as_str()).zip(&nodes), &request.outside);
    let Heard { images, loaders } = recorder.heard(ctx);
    let kernels = Kernels::resolve(ctx, &graphs, &images, &loaders)?;
    let allocations = &allocations.joined(&touched(&nodes));
    let declared = declare(allocations, &request.tensors)?;
    let arena = Arena {
        base: allocations.base(),
        size: mapping.size(),
        shard_cap: request.shard_cap,
        granularity: ArenaMapping::granularity(ctx)?,
    };
    let context = CoreContext {
        sm: ctx.info().sm,
        device_name: ctx.info().name.clone(),
        driver_version: driver_version()?,
        tp_rank: request.ranks.map_or(0, |r| r.rank),
        tp_world_size: request.ranks.map_or(1, |r| r.world),
        producer: request.producer.clone(),
    };
    let modules = kernels.modules(&images)?;
    let module_bytes = modules.iter().map(|m| m.image.len() as u64).sum();
    let mut exporter = Exporter::new(request.out, context, arena, declared.buffers.clone(), &modules)?;
    // A rank's core maps each peer's arena up to what this rank uses: the ranks run one
    // program, so their buffers lie alike.
    if let Some(set) = request.ranks {
        exporter.peers(ranges(&set.windows, exporter.manifest().used_end()));
    }
    let flags = RecordedFlags { explicit: Some(request.flags), from_executable: None };
    for (t, (name, graph)) in graphs.iter().enumerate() {
        exporter.template_with(name, graph, flags, |node, _| kernels.by_node.get(&(t, node.0)).cloned())?;
    }
    let prepare_s = started.elapsed().as_secs_f64();
    let mut peaks = gnomon_core::host_memory::Peaks::default();
    // Planned (its `zero` buffers checked) before the launcher fills the unstored buffers.
    let mut plan = exporter.plan_snapshot(ctx)?;
    let computing = Instant::now();
    let launcher = Launcher::new(ctx, exporter.manifest())?;
    let weights = launcher.weights(exporter.manifest())?;
    // The snapshot is written on a thread of its own while the templates launch here: it
    // reads the writable buffers from the launcher's copies of them as loaded, and the
    // weights from the arena, which no launch may change (checked after).
    let (written, computed) = peaks.measure("snapshot-and-expectations", || {
        let (stop, reads, held, writing) = (launcher.given_up(), ctx.lend_reads(), launcher.held_at(), plan.writing());
        std::thread::scope(|s| {
            let snapshot = s.spawn(|| writing.write(&reads, &held, stop));
            let stopping = StopOnDrop(stop); // a panic here stops the snapshot too
            let computed = compute(&launcher, &exporter, &graphs, &request, &declared, suspects)
                .and_then(|c| launcher.weights_unchanged(&weights).map(|()| c))
                .map(|c| (c, computing.elapsed().as_secs_f64()));
            if computed.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            std::mem::forget(stopping);
            (snapshot.join().expect("the snapshot's thread does not panic"), computed)
        })
    });
    let ((Computed { expected, dismissed, drawn }, expectations_s), written) = first_failure(computed, written)?;
    let snapshot = exporter.stored(plan, written);
    exporter.generators(drawn.into_iter().collect());
    expected.expectations.into_iter().for_each(|e| exporter.expect(e));
    exporter.producer_seconds(request.producer_seconds);
    exporter.producer_seconds([("export-s".to_owned(), started.elapsed().as_secs_f64())]);
    let finishing = Instant::now();
    let (manifest, written) = peaks.measure("finish", || exporter.finish())?;
    let mut peak_host_rss_bytes = peaks.by_stage().clone();
    peak_host_rss_bytes.insert("whole", peaks.overall());
    let finish_s = finishing.elapsed().as_secs_f64();
    Ok(Exported {
        templates: manifest.templates.len(),
        nodes: manifest.templates.iter().map(|t| t.nodes.len()).sum(),
        kernel_nodes: kernels.by_node.len(),
        kernel_nodes_by_route: BTreeMap::from([("cupti-module-loaded", kernels.by_node.len())]),
        kernel_nodes_by_library: by_library(&modules, &kernels),
        images_recorded: images.len(),
        images_tied_to_module_loads: images.iter().filter(|i| !i.modules.is_empty()).count(),
        modules: manifest.modules.len(),
        module_bytes,
        buffers: manifest.buffers.len(),
        stored_bytes: snapshot.stored_bytes,
        arena: allocations.stats(),
        launches_per_template: expected.launches,
        varied: expected.varied,
        dismissed,
        other_gpu_processes,
        prepare_s,
        snapshot_s: snapshot.seconds,
        zero_check_s: snapshot.zero_check_s,
        snapshot_stages: snapshot.stages,
        expectations_s,
        expectation_stages: expected.stages,
        executable_bytes: expected.executable_bytes,
        finish_s,
        sync_s: written.sync_s,
        export_s: started.elapsed().as_secs_f64(),
        peak_host_rss_bytes,
    })
}

/// Both sides' results, or the failure of the side that failed first: the other gave up
/// (`Abandoned`), and the launches' failure comes first where both failed by themselves.
fn first_failure<C, W>(computed: Result<C, KitError>, written: Result<W, ExportError>) -> Result<(C, W), KitError> {
    match (computed, written) {
        (Err(KitError::Export(ExportError::Abandoned)), Err(e)) => Err(e.into()),
        (computed, written) => Ok((computed?, written?)),
    }
}

/// Sets its flag when dropped: a panic of the launches stops the snapshot beside them
/// (forgotten where they returned).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// What the launches found: the expectations, the suspects outside the arena dismissed,
/// and the draws of a template that draws random numbers.
struct Computed {
    expected: Expected,
    dismissed: Vec<Suspect>,
    drawn: Option<Generator>,
}

/// Every template launched from the loaded state: its draws found (a template whose draws
/// cannot be replayed is refused first), its expectations, the suspects confirmed or
/// dismissed, a bitwise export's variation refused, and its draws recorded.
fn compute(
    launcher: &Launcher,
    exporter: &Exporter,
    graphs: &[(String, RetainedGraph)],
    request: &Request,
    declared: &Declared,
    suspects: Vec<Suspect>,
) -> Result<Computed, KitError> {
    let ranks = request.ranks.map(|set| &set.ranks);
    let drawing = random::find(exporter.manifest(), |at| launcher.read_word(at), &request.generator)?;
    if drawing.is_some() && ranks.is_some() {
        return Err(KitError::Draws(
            "a rank of a set draws random numbers: its launches wait for its peers', and the kit records draws alone"
                .into(),
        ));
    }
    let expected = expectations(launcher, exporter, graphs, request.flags, declared, request.launching, ranks)?;
    let first_launch = |t: &str, b: &str| expected.first_launches.get(&(t.to_owned(), b.to_owned())).map(Vec::as_slice);
    let recorded = outside::Expected { expectations: &expected.expectations, first_launch: &first_launch };
    let dismissed = outside::confirm(launcher, graphs, request.flags, &recorded, suspects, ranks.is_some())?;
    if let Some(v) = expected.varied.iter().find(|v| request.bitwise && v.spread_of.is_none()) {
        return Err(KitError::Varies {
            template: v.template.clone(),
            buffer: v.buffer.clone(),
            distinct: v.distinct,
            launches: v.launches,
            nodes: v.nodes.iter().map(|(n, k)| format!("{n} ({k})")).collect::<Vec<_>>().join(", "),
        });
    }
    let drawn = match drawing {
        Some(found) => Some(random::with_draws(found, launcher, graphs, request.flags, &expected.expectations)?),
        None => None,
    };
    Ok(Computed { expected, dismissed, drawn })
}

/// Each kernel node's module, and the functions each module must list.
struct Kernels {
    /// (template index, node) → module id.
    by_node: HashMap<(usize, usize), String>,
    /// Module id → (image index, functions by name).
    functions: BTreeMap<String, (usize, BTreeMap<String, Function>)>,
}

impl Kernels {
    fn resolve(
        ctx: &Context,
        graphs: &[(String, RetainedGraph)],
        images: &[LoadedImage],
        loaders: &HashMap<usize, Option<PathBuf>>,
    ) -> Result<Self, KitError> {
        let by_entries = images_by_entries(ctx, images)?;
        let mut kernels = Self { by_node: HashMap::new(), functions: BTreeMap::new() };
        for (t, (template, graph)) in graphs.iter().enumerate() {
            for (node, function, module) in graph.kernel_functions()? {
                let loader = loaders.get(&module.handle).cloned().flatten();
                if let Some(reason) = collectives::refusal(function.name(), loader.as_deref()) {
                    return Err(KitError::Collective {
                        template: template.clone(),
                        node: node.0,
                        kernel: function.name().into(),
                        library: loader.map_or_else(|| "an unknown library".into(), |l| l.display().to_string()),
                        reason,
                    });
                }
                let image = image_of(function.name(), &module, images, &by_entries).map_err(|source| {
                    KitError::MissingImage {
                        template: template.clone(),
                        node: node.0,
                        kernel: function.name().into(),
                        library: loader.map_or_else(
                            || "a library whose module load the recorder did not hear".into(),
                            |l| format!("`{}`", l.display()),
                        ),
                        source,
                    }
                })?;
                let index = images.iter().position(|i| std::ptr::eq(i, image)).expect("an image of the list");
                let id = module_id(image);
                let (_, functions) = kernels.functions.entry(id.clone()).or_insert_with(|| (index, BTreeMap::new()));
                functions.entry(function.name().to_owned()).or_insert(function);
                kernels.by_node.insert((t, node.0), id);
            }
        }
        Ok(kernels)
    }

    /// Each distinct image the templates use, once, with the functions they use from it.
    fn modules(&self, images: &[LoadedImage]) -> Result<Vec<ModuleImage>, KitError> {
        self.functions
            .iter()
            .map(|(id, (index, functions))| {
                let image = &images[*index];
                Ok(ModuleImage {
                    id: id.clone(),
                    kind: image_kind(image)?,
                    image: image.bytes.clone(),
                    functions: functions.values().cloned().collect(),
                    provenance: image.loaders.first().map(|l| provenance(l)),
                })
            })
            .collect()
    }
}

/// Kernel nodes counted by the library that loaded their module's image.
fn by_library(modules: &[ModuleImage], kernels: &Kernels) -> BTreeMap<String, usize> {
    let library: HashMap<&str, &str> = modules
        .iter()
        .map(|m| (m.id.as_str(), m.provenance.as_ref().map_or("unknown", |p| p.library.as_str())))
        .collect();
    let mut counts = BTreeMap::new();
    for id in kernels.by_node.values() {
        *counts.entry(library.get(id.as_str()).copied().unwrap_or("unknown").to_owned()).or_insert(0) += 1;
    }
    counts
}

/// Modules are named by content, so an image loaded twice is stored once.
fn module_id(image: &LoadedImage) -> String {
    format!("m{}", &image.sha256[..16])
}

fn image_kind(image: &LoadedImage) -> Result<ModuleKind, KitError> {
    let head = &image.bytes[..image.bytes.len().min(8)];
    if head.starts_with(b"\x7fELF") {
        Ok(ModuleKind::Cubin)
    } else if head.is_ascii() {
        Ok(ModuleKind::Ptx)
    } else {
        Err(KitError::ImageKind { sha256: image.sha256.clone(), head: format!("{head:02x?}") })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the snapshot and the launches beside it fail, the side that failed says why,
    /// not the one that gave up after it.
    #[test]
    fn the_side_that_failed_first_says_why() {
        let abandoned = || Err(ExportError::Abandoned);
        let said = |r: Result<((), ()), KitError>| r.map_err(|e| e.to_string());
        let full = || Err::<(), _>(ExportError::NotZero { buffer: "kv".into() });
        let launches_gave_up = || Err::<(), _>(KitError::Export(ExportError::Abandoned));
        assert_eq!(said(first_failure(launches_gave_up(), full())), Err(full().unwrap_err().to_string()));
        let varied = || Err::<(), _>(KitError::NoOutputs("b1".into()));
        assert_eq!(said(first_failure(varied(), abandoned())), Err(varied().unwrap_err().to_string()));
        assert_eq!(said(first_failure(varied(), full())), Err(varied().unwrap_err().to_string()));
        assert_eq!(said(first_failure(Ok(()), full())), Err(full().unwrap_err().to_string()));
        assert_eq!(said(first_failure(Ok(()), Ok(()))), Ok(((), ())));
    }

    fn image(bytes: &[u8]) -> LoadedImage {
        let sha256 = gnomon_format::hash_hex(bytes).unwrap();
        LoadedImage {
            sha256,
            bytes: bytes.to_vec(),
            loads: 1,
            loaders: Default::default(),
            modules: Default::default(),
        }
    }

    #[test]
    fn a_rank_maps_every_other_rank_once() {
        assert!(every_peer_once(1, 3, &[(2, 0x3000), (0, 0x1000)]).is_ok());
        let refused = every_peer_once(0, 3, &[(1, 0x1000), (1, 0x2000)]).unwrap_err().to_string();
        insta::assert_snapshot!(refused, @"rank 0 of a world of 3 must map every other rank's arena once; its windows are for ranks [1, 1]");
        assert!(every_peer_once(0, 2, &[(0, 0x1000)]).is_err(), "itself");
        assert!(every_peer_once(2, 2, &[(0, 0x1000), (1, 0x2000)]).is_err(), "a rank past the world");
    }

    #[test]
    fn images_are_cubins_or_ptx_and_named_by_their_digest() {
        let cubin = image(b"\x7fELF\x02\x01\x01\x33rest");
        assert_eq!(image_kind(&cubin).unwrap(), ModuleKind::Cubin);
        assert_eq!(image_kind(&image(b".version 8.0\n.target sm_90")).unwrap(), ModuleKind::Ptx);
        let fatbin = image(&[0x50, 0xed, 0x55, 0xba, 1, 0, 0, 0, 9]);
        let refused = image_kind(&fatbin).unwrap_err().to_string();
        let said = format!(
            "recorded image {} is neither an ELF cubin nor PTX text (it begins [50, ed, 55, ba, 01, 00, 00, 00])",
            fatbin.sha256
        );
        assert_eq!(refused, said);
        assert_eq!(module_id(&cubin), format!("m{}", &cubin.sha256[..16]));
    }

    /// Each module the templates use is its image's bytes, kind and loader, once; kernel
    /// nodes are counted by the library that loaded their module.
    #[test]
    fn modules_carry_their_images_and_nodes_count_by_library() {
        let mut cublas = image(b"\x7fELF\x02\x01\x01\x33gemm");
        cublas.loaders.insert("/opt/lib/libcublasLt.so.13".into());
        let images = [image(b".version 8.0\n.target sm_90"), cublas];
        let (ptx, elf) = (module_id(&images[0]), module_id(&images[1]));
        let functions = BTreeMap::from([(ptx.clone(), (0, BTreeMap::new())), (elf.clone(), (1, BTreeMap::new()))]);
        let by_node = HashMap::from([((0, 0), elf.clone()), ((0, 1), ptx.clone()), ((1, 0), elf.clone())]);
        let kernels = Kernels { by_node, functions };
        let modules = kernels.modules(&images).unwrap();
        // Modules come in id order.
        let got: Vec<_> = modules.iter().map(|m| (m.id.clone(), m.kind, m.image.len())).collect();
        let (ptx_row, elf_row) =
            ((ptx, ModuleKind::Ptx, images[0].bytes.len()), (elf, ModuleKind::Cubin, images[1].bytes.len()));
        let want = if ptx_row.0 < elf_row.0 { vec![ptx_row, elf_row] } else { vec![elf_row, ptx_row] };
        assert_eq!(got, want);
        let libraries: Vec<_> = modules.iter().map(|m| m.provenance.as_ref().map(|p| p.library.clone())).collect();
        assert!(libraries.contains(&Some("libcublasLt.so.13".into())) && libraries.contains(&None), "{libraries:?}");
        let counted = by_library(&modules, &kernels);
        assert_eq!(counted, BTreeMap::from([("libcublasLt.so.13".into(), 2), ("unknown".into(), 1)]));
    }
}
