use gnomon_core::errors::{CudaError, ExportError, RecordError, ReplayError};
use thiserror::Error;

/// The arena refused an allocation or a free.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum AllocError {
    #[error("cannot allocate {size} bytes in the gnomon arena of {arena} bytes: {free} are free, the largest free range {largest} (pass a larger size to use_arena)")]
    Exhausted { size: u64, arena: u64, free: u64, largest: u64 },
    #[error("an allocation of {size} bytes cannot be placed")]
    TooLarge { size: u64 },
    #[error("0x{address:x} is not an allocation of the gnomon arena")]
    NotAllocated { address: u64 },
    #[error("PyTorch's block of {size} bytes at 0x{address:x} cannot be declared: {why}")]
    Piece { address: u64, size: u64, why: &'static str },
}

/// Exporting a live process's graphs.
#[derive(Debug, Error)]
pub enum KitError {
    #[error("no gnomon arena is in use: call use_arena before the program's first allocation")]
    NoArena,
    #[error("tensor `{name}` (0x{address:x}) is not in the gnomon arena: it was allocated before use_arena, under gnomon.torch.outside_arena(), or by another allocator")]
    OutsideArena { name: String, address: u64 },
    #[error("tensor `{name}` lies in memory that was freed")]
    Freed { name: String },
    #[error("one allocation holds `{first}` ({first_role}) and `{second}` ({second_role}): a buffer has one role")]
    TwoRoles { first: String, first_role: &'static str, second: String, second_role: &'static str },
    #[error(
        "two allocations are named `{0}`: name each tensor once (a template's own mapping names its tensors after it)"
    )]
    SameName(String),
    #[error("{0}")]
    Role(String),
    #[error("an arena of {0} bytes cannot be mapped: it does not round up to the driver's granularity")]
    ArenaSize(u64),
    #[error("template `{template}` node {node}: kernel `{kernel}` of {library} has no recorded image (start the recorder before the program's first kernel): {source}")]
    MissingImage { template: String, node: usize, kernel: String, library: String, source: RecordError },
    #[error(
        "template `{template}` node {node}: {what} holds 0x{address:x}, in {pool} outside the gnomon arena, and \
         the graph uses it ({used}), which no core maps: allocate what a graph reads while the arena routes tensors (not under \
         gnomon.torch.outside_arena(), and on the thread that called use_arena), and capture into \
         gnomon.torch.graph_pool()"
    )]
    PointsOutside { template: String, node: usize, what: String, address: u64, pool: String, used: String },
    #[error("template `{template}` node {node}: kernel `{kernel}` of `{library}` cannot be exported: {reason}")]
    Collective { template: String, node: usize, kernel: String, library: String, reason: &'static str },
    #[error(
        "rank {rank} of a world of {world} must map every other rank's arena once; its windows are for ranks {peers:?}"
    )]
    RankSet { rank: u32, world: u32, peers: Vec<u32> },
    #[error("recorded image {sha256} is neither an ELF cubin nor PTX text (it begins {head})")]
    ImageKind { sha256: String, head: String },
    /// A template draws random numbers in a way the core could not replay as PyTorch does.
    #[error("{0}")]
    Draws(String),
    #[error("template `{0}` has no outputs: name at least one tensor it writes in `outputs`")]
    NoOutputs(String),
    #[error("template `{template}`: {outputs} did not give their first launch's bytes again in {launches} launches from the loaded state, though each of their launches before gave one result (the template runs a kernel found to vary): export again, launching more times")]
    VariedWhenAgain { template: String, outputs: String, launches: u32 },
    #[error("template `{template}` output `{buffer}` gave {distinct} different results over {launches} launches from the same state, and a bitwise export was asked for; the first node found to vary: {nodes}")]
    Varies { template: String, buffer: String, distinct: usize, launches: u32, nodes: String },
    /// Under another poison pattern a template's outputs departed from its launches: the
    /// core would record outputs that depend on memory it does not hold.
    #[error("{0}: the core would record outputs that depend on memory it does not hold, and qualify's poison-independence would fail; name the tensor the template reads before writing (as an input or kv-cache, so the core stores it), or write it in the template")]
    ReadsUnwritten(String),
    #[error("launching the templates changed weight `{0}`: a weight is stored once and no launch may change it (qualify's weights-unchanged would fail); declare what a template writes as one of its tensors, not as a weight")]
    WeightWritten(String),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error(transparent)]
    Cuda(#[from] CudaError),
}
