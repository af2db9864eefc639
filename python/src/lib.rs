//! `gnomon._native`: the port kit for Python. PyTorch's pluggable allocator calls the two
//! C entry points below; Python calls the functions of the module. Everything they do is
//! in `gnomon-kit` and `gnomon-core`; this file only converts.

use std::{
    cell::RefCell,
    ffi::c_void,
    path::PathBuf,
    sync::{Mutex, MutexGuard},
    time::Duration,
};

use gnomon_format::{account::Account, spread::Element, Core, Producer};

use gnomon_core::{
    cuda::{ArenaMapping, Context},
    record::ImageRecorder,
    replay::RankLink,
};
use gnomon_kit::{
    allocations::{Allocations, Block, Piece, Standing},
    declare::{declare, Logits, Role, Tensor},
    launches::Launching,
    live::{self, RankSet, Request},
    outside::LiveBlock,
    random::HostGenerator,
};
use pyo3::{exceptions::PyRuntimeError, prelude::*};

/// The arena's bookkeeping, shared with the allocator's entry points on any thread.
static ARENA: Mutex<Option<Allocations>> = Mutex::new(None);
/// The load-time image recorder, from `start_recording` to the end of the process.
static RECORDER: Mutex<Option<ImageRecorder>> = Mutex::new(None);

thread_local! {
    /// The arena's mapping, on the thread that made it (CUDA handles here are bound to
    /// one thread). Kept to the end of the process: memory may be freed into it until then.
    static MAPPING: RefCell<Option<ArenaMapping>> = const { RefCell::new(None) };
    /// The rank set this process joined (`join_ranks`), on the arena's thread.
    static RANKS: RefCell<Option<RankSet>> = const { RefCell::new(None) };
}

fn error(e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Subscribes to the driver's module loads; returns the CUPTI library it runs on.
#[pyfunction]
fn start_recording() -> PyResult<String> {
    let mut recorder = lock(&RECORDER);
    if recorder.is_some() {
        return Err(error("the recorder is already running"));
    }
    let started = ImageRecorder::start().map_err(error)?;
    let library = started.library().map(|p| p.display().to_string()).unwrap_or_default();
    *recorder = Some(started);
    Ok(library)
}

/// Whether the recorder runs.
#[pyfunction]
fn recording() -> bool {
    lock(&RECORDER).is_some()
}

/// Maps `size` bytes at exactly `base` on `device`, `shareable` with the other ranks of a
/// set; returns the size mapped (rounded up to the granularity).
#[pyfunction]
#[pyo3(signature = (base, size, device, shareable=false))]
fn use_arena(base: u64, size: u64, device: u32, shareable: bool) -> PyResult<u64> {
    let mut arena = lock(&ARENA);
    if arena.is_some() {
        return Err(error("an arena is already in use"));
    }
    let ctx = Context::new(device).map_err(error)?;
    let mapping = live::map_arena(&ctx, base, size, shareable).map_err(error)?;
    let mapped = mapping.size();
    *arena = Some(Allocations::new(base, mapped));
    MAPPING.with(|m| *m.borrow_mut() = Some(mapping));
    Ok(mapped)
}

/// Joins the ranks of a set as `rank` of `world`, meeting them in `meet_dir` (waiting at
/// most `limit_s` for each): hands them this rank's arena (shareable) and maps each
/// peer's at its window, `windows` being (peer, address) pairs.
#[pyfunction]
fn join_ranks(rank: u32, world: u32, meet_dir: PathBuf, windows: Vec<(u32, u64)>, limit_s: f64) -> PyResult<()> {
    let base = lock(&ARENA).as_ref().ok_or_else(|| error(gnomon_kit::errors::KitError::NoArena))?.base();
    let limit = Duration::try_from_secs_f64(limit_s).map_err(error)?;
    let link = RankLink { dir: meet_dir, limit };
    let set = MAPPING.with(|m| {
        let mut mapping = m.borrow_mut();
        let mapping =
            mapping.as_mut().ok_or_else(|| error("join_ranks must run on the thread that called use_arena"))?;
        live::join(mapping, base, (rank, world), link, windows).map_err(error)
    })?;
    RANKS.with(|r| *r.borrow_mut() = Some(set));
    Ok(())
}

/// Waits until every other rank of the set this process joined has come as far.
#[pyfunction]
fn sync_ranks() -> PyResult<()> {
    RANKS.with(|r| r.borrow().as_ref().ok_or_else(|| error("this process joined no rank set"))?.sync().map_err(error))
}

/// PyTorch's `CUDAPluggableAllocator` allocation entry point. A refusal is said on stderr
/// and returns null, which PyTorch reports as out of memory.
#[no_mangle]
pub extern "C" fn gnomon_torch_malloc(size: isize, _device: i32, stream: *mut c_void) -> *mut c_void {
    // SAFETY: PyTorch passes its current stream of the current context.
    let capturing = unsafe { gnomon_core::cuda::is_capturing(stream as usize) };
    let mut arena = lock(&ARENA);
    let Some(allocations) = arena.as_mut() else {
        eprintln!("gnomon: allocation before use_arena");
        return std::ptr::null_mut();
    };
    match allocations.allocate(size.max(0) as u64, capturing) {
        Ok(address) => address as *mut c_void,
        Err(e) => {
            eprintln!("gnomon: {e}");
            std::ptr::null_mut()
        }
    }
}

/// PyTorch's `CUDAPluggableAllocator` free entry point.
#[no_mangle]
pub extern "C" fn gnomon_torch_free(ptr: *mut c_void, _size: isize, _device: i32, stream: *mut c_void) {
    // SAFETY: as in `gnomon_torch_malloc`.
    let capturing = unsafe { gnomon_core::cuda::is_capturing(stream as usize) };
    if let Some(allocations) = lock(&ARENA).as_mut() {
        if let Err(e) = allocations.free(ptr as u64, capturing) {
            eprintln!("gnomon: free: {e}");
        }
    }
}

/// A tensor as Python names it: (name, address, role, templates, dtype, (vocabulary, rows)),
/// the last (0, 0) but for logits.
type Named = (String, u64, String, Vec<String>, String, (u32, u32));

fn tensors(named: Vec<Named>) -> PyResult<Vec<Tensor>> {
    named
        .into_iter()
        .map(|(name, address, role, templates, dtype, (vocabulary, rows))| {
            let (role, element) = (Role::parse(&role).map_err(error)?, Element::of_dtype(&dtype));
            let logits = (vocabulary > 0 && rows > 0).then_some(Logits { vocabulary, rows });
            Ok(Tensor { name, address, role, element, templates, logits })
        })
        .collect()
}

/// The arena's bytes by standing as JSON (`Stats`); an error before `use_arena`.
#[pyfunction]
fn arena_stats() -> PyResult<String> {
    let arena = lock(&ARENA);
    let allocations = arena.as_ref().ok_or_else(|| error(gnomon_kit::errors::KitError::NoArena))?;
    Ok(serde_json::to_string(&allocations.stats()).expect("stats always serialize"))
}

/// PyTorch's blocks in the arena's segments as Python lists them: (address, size, live).
type Pieces = Vec<(u64, u64, bool)>;

fn pieces(listed: Pieces) -> Vec<Piece> {
    listed.into_iter().map(|(address, size, live)| Piece { address, size, live }).collect()
}

/// PyTorch's live blocks outside the arena as Python lists them: (address, size, pool).
type Outside = Vec<(u64, u64, String)>;

/// Exports graphs (name, raw `CUgraph`) as a core at `out`; returns what it did as JSON.
/// `blocks` divides the arena's segments as PyTorch's caching allocator does; no node may
/// point into `outside`. `generator` is the default CUDA generator's seed, its next
/// offset, and by how much each graph's replay advanced it (`None`: never replayed).
#[pyfunction]
#[pyo3(signature = (out, graphs, tensors_named, blocks, outside, flags, shard_cap, producer_version, producer_seconds, launches, bitwise, progress, generator))]
#[allow(clippy::too_many_arguments)]
fn export(
    out: PathBuf,
    graphs: Vec<(String, u64)>,
    tensors_named: Vec<Named>,
    blocks: Pieces,
    outside: Outside,
    flags: u64,
    shard_cap: u64,
    producer_version: String,
    producer_seconds: Vec<(String, f64)>,
    launches: (u32, u32, u32),
    bitwise: bool,
    progress: bool,
    generator: (u64, u64, Vec<(String, Option<u64>)>),
) -> PyResult<String> {
    gnomon_core::progress::set_quiet(!progress);
    let recorder = lock(&RECORDER);
    let recorder =
        recorder.as_ref().ok_or_else(|| error("the recorder was not started: call gnomon.torch.record() first"))?;
    let allocations = lock(&ARENA).as_ref().ok_or_else(|| error(gnomon_kit::errors::KitError::NoArena))?.clone();
    let allocations = allocations.divided(&pieces(blocks)).map_err(error)?;
    let producer = Producer { name: "gnomon port kit".into(), version: producer_version, commit: String::new() };
    let tensors = tensors(tensors_named)?;
    MAPPING.with(|m| {
        RANKS.with(|r| {
            let mapping = m.borrow();
            let mapping =
                mapping.as_ref().ok_or_else(|| error("export must run on the thread that called use_arena"))?;
            let ctx = mapping.context().clone();
            let set = r.borrow();
            let request = Request {
                out: &out,
                graphs,
                tensors,
                outside: outside
                    .into_iter()
                    .map(|(address, size, pool)| LiveBlock { range: address..address.saturating_add(size), pool })
                    .collect(),
                flags,
                shard_cap,
                producer,
                producer_seconds,
                launching: Launching { least: launches.0, quiet: launches.1, most: launches.2 },
                bitwise,
                ranks: set.as_ref(),
                generator: HostGenerator {
                    seed: generator.0,
                    next_offset: generator.1,
                    increments: generator.2.into_iter().collect(),
                },
            };
            let exported = live::export(&ctx, mapping, &allocations, recorder, request).map_err(error)?;
            Ok(serde_json::to_string(&exported).expect("a summary always serializes"))
        })
    })
}

/// The arena's bookkeeping on its own, for tests and tools: no GPU needed.
#[pyclass(name = "Allocations")]
struct PyAllocations(Allocations);

#[pymethods]
impl PyAllocations {
    #[new]
    fn new(base: u64, size: u64) -> Self {
        Self(Allocations::new(base, size))
    }

    #[pyo3(signature = (size, capturing=false))]
    fn allocate(&mut self, size: u64, capturing: bool) -> PyResult<u64> {
        self.0.allocate(size, capturing).map_err(error)
    }

    #[pyo3(signature = (address, capturing=false))]
    fn free(&mut self, address: u64, capturing: bool) -> PyResult<()> {
        self.0.free(address, capturing).map_err(error)
    }

    /// The arena with its allocations divided into PyTorch's blocks.
    fn divided(&self, blocks: Pieces) -> PyResult<Self> {
        Ok(Self(self.0.divided(&pieces(blocks)).map_err(error)?))
    }

    /// The arena's bytes by standing, as JSON.
    fn stats(&self) -> String {
        serde_json::to_string(&self.0.stats()).expect("stats always serialize")
    }

    /// `(offset, size, "live" | "retired")` of every allocation a core would declare.
    fn blocks(&self) -> Vec<(u64, u64, &'static str)> {
        self.0.blocks().into_iter().map(|(b, s)| describe(b, s)).collect()
    }

    /// The buffers a core would declare for these tensors: `(name, offset, size, role,
    /// contents)`.
    fn declare(&self, tensors_named: Vec<Named>) -> PyResult<Vec<(String, u64, u64, String, String)>> {
        let declared = declare(&self.0, &tensors(tensors_named)?).map_err(error)?;
        let kebab = |v: serde_json::Value| v.as_str().unwrap_or_default().to_owned();
        Ok(declared
            .buffers
            .into_iter()
            .map(|b| {
                let role = kebab(serde_json::to_value(b.role).expect("enum"));
                let contents = kebab(serde_json::to_value(b.contents).expect("enum"));
                (b.name, b.offset, b.size, role, contents)
            })
            .collect())
    }
}

fn describe(b: Block, s: Standing) -> (u64, u64, &'static str) {
    (b.offset, b.size, if s == Standing::Live { "live" } else { "retired" })
}

/// The bytes a size's text names (`64MiB`, `1.5GiB`, `4096`): the one parser every door
/// of Gnomon reads sizes with; a text it refuses raises `ValueError` with its words.
#[pyfunction]
fn parse_size(text: &str) -> PyResult<u64> {
    gnomon_format::size::parse_size(text).map_err(pyo3::exceptions::PyValueError::new_err)
}

/// Every rule of the format, file hashes included; returns the core's account as JSON.
#[pyfunction]
fn validate(core: PathBuf) -> PyResult<String> {
    let core = Core::open(&core).map_err(error)?;
    let account = Account::of(core.manifest());
    Ok(serde_json::to_string(&account).map_err(error)?)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(start_recording, m)?)?;
    m.add_function(wrap_pyfunction!(recording, m)?)?;
    m.add_function(wrap_pyfunction!(use_arena, m)?)?;
    m.add_function(wrap_pyfunction!(join_ranks, m)?)?;
    m.add_function(wrap_pyfunction!(sync_ranks, m)?)?;
    m.add_function(wrap_pyfunction!(export, m)?)?;
    m.add_function(wrap_pyfunction!(arena_stats, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add_class::<PyAllocations>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
