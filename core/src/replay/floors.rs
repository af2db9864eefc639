//! The two floors an upload is held against, measured in the same run on the same
//! machine: how fast the shard files read (the upload's pieces on its reader count, no
//! hashing), cold or warm as the restore found them, and how fast page-locked memory
//! copies to the device.

use std::{
    os::unix::fs::FileExt,
    sync::atomic::{AtomicU64, AtomicUsize, Ordering},
    time::Instant,
};

use super::upload::Staging;
use crate::{
    cuda::{
        build_and_instantiate, Context, GraphSpec, KernelSpec, Module, NodeSpec, Overlap, PinnedHost, ReadyFailure,
    },
    errors::ReplayError,
    page_cache,
};
use gnomon_format::{digest::pieces, validate::Core};

/// Bytes read from the shard files at most, so the measurement stays short at any size.
const READ_SAMPLE: u64 = 2 << 30;
/// Bytes of one page-locked copy, made `H2D_REPEATS` times.
const H2D_BYTES: usize = 256 << 20;
const H2D_REPEATS: u32 = 4;

#[derive(Clone, Copy, Debug)]
pub struct Floors {
    pub read_gbps: f64,
    pub pinned_h2d_gbps: f64,
    /// Whether the read floor was measured with the shard files out of the page cache.
    pub cold: bool,
    /// What the driver itself takes per node to build and instantiate templates of empty
    /// kernels, as replay does (built on one thread, each instantiated on replay's other
    /// threads as soon as it is built): µs.
    pub driver_us_per_node: f64,
}

/// The floors, the read floor measured `cold` (the shard files dropped from the page
/// cache first) or warm, to match the condition the restore met.
pub fn measure(core: &Core, ctx: &Context, staging: Staging, cold: bool) -> Result<Floors, ReplayError> {
    if cold {
        drop_shards_from_cache(core)?;
    }
    Ok(Floors {
        read_gbps: read_gbps(core, staging)?,
        pinned_h2d_gbps: pinned_h2d_gbps(ctx)?,
        cold,
        driver_us_per_node: driver_us_per_node(ctx, super::READY)?,
    })
}

/// The share of the shard files' pages the page cache holds now.
pub fn shards_cached_fraction(core: &Core) -> Result<f64, ReplayError> {
    let files = shard_files(core)?;
    page_cache::resident_fraction(&files).map_err(|source| ReplayError::Cache { source })
}

/// Drops every shard file from the page cache, so the next read comes from storage.
pub fn drop_shards_from_cache(core: &Core) -> Result<(), ReplayError> {
    for file in shard_files(core)? {
        page_cache::drop_from_cache(&file).map_err(|source| ReplayError::Cache { source })?;
    }
    Ok(())
}

fn shard_files(core: &Core) -> Result<Vec<std::fs::File>, ReplayError> {
    let shards = &core.manifest().shards;
    let open = |s: &gnomon_format::Shard| core.open_file(&s.file, &format!("shard {}", s.index));
    shards.iter().map(|s| open(s).map_err(|e| ReplayError::Cache { source: std::io::Error::other(e) })).collect()
}

/// Reads the shard files as the upload does (the same pieces, on as many readers), up
/// to [`READ_SAMPLE`] bytes, without hashing or copying. Each reader's buffer is written
/// before the clock starts: the upload reads into staging slots already faulted in, so
/// faulting fresh pages in here would lower the floor the upload is held against.
fn read_gbps(core: &Core, staging: Staging) -> Result<f64, ReplayError> {
    let pieces = pieces(core.manifest());
    let (next, claimed) = (AtomicUsize::new(0), AtomicU64::new(0));
    let readers = staging.readers.clamp(1, pieces.len().max(1));
    let buffers: Vec<Vec<u8>> = (0..readers).map(|_| vec![0xA5; staging.slot_bytes]).collect();
    let started = Instant::now();
    let read: Result<Vec<u64>, ReplayError> = std::thread::scope(|scope| {
        let readers: Vec<_> = buffers
            .into_iter()
            .map(|mut buffer| {
                let (next, claimed, pieces) = (&next, &claimed, &pieces);
                scope.spawn(move || {
                    let mut total = 0u64;
                    while let Some(piece) = pieces.get(next.fetch_add(1, Ordering::SeqCst)) {
                        let len = piece.bytes.end - piece.bytes.start;
                        let before = claimed.fetch_add(len, Ordering::SeqCst);
                        let want = len.min(READ_SAMPLE.saturating_sub(before));
                        if want == 0 {
                            break;
                        }
                        let s = piece.shard;
                        let io = |source| ReplayError::Shard { index: s.index, file: s.file.clone(), source };
                        let file = core.open_file(&s.file, "shard").map_err(|e| io(std::io::Error::other(e)))?;
                        for at in (0..want).step_by(buffer.len()) {
                            let n = (want - at).min(buffer.len() as u64) as usize;
                            file.read_exact_at(&mut buffer[..n], piece.bytes.start + at).map_err(io)?;
                        }
                        total += want;
                    }
                    Ok(total)
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().expect("a reader does not panic")).collect()
    });
    let bytes: u64 = read?.iter().sum();
    Ok(bytes as f64 / started.elapsed().as_secs_f64() / 1e9)
}

fn pinned_h2d_gbps(ctx: &Context) -> Result<f64, ReplayError> {
    let mut host = PinnedHost::new(ctx, H2D_BYTES)?;
    let device = ctx.alloc(H2D_BYTES as u64)?;
    let stream = ctx.stream()?;
    let (start, end) = (ctx.event()?, ctx.event()?);
    stream.record(&start)?;
    for _ in 0..H2D_REPEATS {
        // SAFETY: `device` holds `H2D_BYTES`; `host` outlives the copies, which the
        // elapsed-time query below waits for.
        unsafe { stream.upload_async(device.ptr(), host.as_mut_slice()) }?;
    }
    stream.record(&end)?;
    let seconds = start.elapsed_ms(&end)? as f64 / 1e3;
    Ok(H2D_BYTES as f64 * H2D_REPEATS as f64 / seconds / 1e9)
}

/// Templates and nodes of the driver's per-node floor: enough to pass the first, slower
/// instantiations, as few as keep it to tens of milliseconds.
const FLOOR_TEMPLATES: usize = 8;
const FLOOR_NODES: usize = 1000;

/// Builds [`FLOOR_TEMPLATES`] chains of [`FLOOR_NODES`] empty-kernel nodes and instantiates
/// them as `how` says (replay's way: [`super::READY`]); the time per node is what no
/// rebuild can go below.
pub fn driver_us_per_node(ctx: &Context, how: (Overlap, usize)) -> Result<f64, ReplayError> {
    let (module, _) = Module::compile(ctx, "gnomon-empty", "extern \"C\" __global__ void empty() {}")?;
    let empty = module.function("empty")?;
    let kernel = KernelSpec::new(&empty, [1, 1, 1], [1, 1, 1], 0, &[])?;
    let chain = || GraphSpec {
        nodes: (0..FLOOR_NODES).map(|i| (NodeSpec::Kernel(kernel), i.checked_sub(1).into_iter().collect())).collect(),
        typed_edges: Vec::new(),
    };
    let specs: Vec<GraphSpec> = (0..FLOOR_TEMPLATES).map(|_| chain()).collect();
    let started = Instant::now();
    let used = (0..FLOOR_TEMPLATES).map(|_| vec![empty.clone()]).collect();
    // SAFETY: the graphs hold kernel nodes only, no memory addresses.
    let ready = unsafe { build_and_instantiate(ctx, &specs, used, &[0; FLOOR_TEMPLATES], how) };
    let seconds = started.elapsed().as_secs_f64();
    ready.map_err(|failure| match failure {
        ReadyFailure::Build(f) => ReplayError::from(f.error),
        ReadyFailure::Instantiate(e) => e.into(),
    })?;
    Ok(seconds / (FLOOR_TEMPLATES * FLOOR_NODES) as f64 * 1e6)
}
