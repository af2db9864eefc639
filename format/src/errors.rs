//! Every error `gnomon-format` returns. Messages name the offending item (which shard, which
//! node, which parameter, which byte range) and read well after "failed to …: ".

use std::{io, ops::Range, path::PathBuf};

use thiserror::Error;

/// Renders a byte count exactly, with a binary-unit reading beside it.
pub fn bytes(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        _ => format!("{n} B ({})", bytesize::ByteSize(n).display().iec()),
    }
}

fn hex_range(r: &Range<u64>) -> String {
    format!("0x{:x}..0x{:x}", r.start, r.end)
}

/// Reading or writing a core directory.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CoreError {
    #[error("read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("read {}: manifest is {}, more than the limit of {}", path.display(), bytes(*size), bytes(*limit))]
    ManifestTooLarge { path: PathBuf, size: u64, limit: u64 },
    #[error("parse {}: {source}", path.display())]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("validate core: {0}")]
    Invalid(#[from] ValidationError),
    #[error("write {}: it holds files but no {}, so it is no core, and an export replaces only a core; name an empty or new directory", path.display(), crate::MANIFEST_FILE)]
    NotACore { path: PathBuf },
}

/// A rule of `docs/format-v2.md` (or v1) that a manifest or its files break.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum ValidationError {
    #[error("{item} has `{field}`, a format v2 field, but the core says version 1")]
    V2FieldInV1 { field: &'static str, item: String },
    #[error("{item} has `{field}`, a format v3 field, but the core says version {version}")]
    V3FieldInOlder { field: &'static str, item: String, version: u32 },
    #[error("{item}: {what} (format v3, docs/format-v3.md \"What v3 settles\")")]
    Unsettled { item: String, what: String },
    #[error("peer range {index} (rank {rank}): {what} (format v3, docs/format-v3.md \"peers\")")]
    Peer { index: usize, rank: u32, what: String },
    #[error("node `{node}` of template `{template}` is an {kind} node: native replay does not rebuild event nodes, so a core holding one is refused")]
    EventNode { template: String, node: String, kind: &'static str },
    #[error("node `{node}` of template `{template}`: parameter {param} is declared external, memory outside the arena that replay does not map; no kernel may receive such an address")]
    ExternalPointer { template: String, node: String, param: u32 },
    #[error("node `{node}` of template `{template}` asks for {} of dynamic shared memory, but function `{function}` allows {} (record its max-dynamic-shared-size-bytes)", bytes(u64::from(*requested)), bytes(u64::from(*allowed)))]
    SharedMemory { template: String, node: String, function: String, requested: u32, allowed: u32 },
    #[error("{item}: {what}")]
    Attribute { item: String, what: String },
    #[error("edge {from} -> {to} of template `{template}` is {kind}, but only kernel nodes have programmatic ports")]
    TypedEdge { template: String, from: String, to: String, kind: &'static str },
    #[error("template `{template}` {what}")]
    Unchecked { template: String, what: &'static str },
    #[error("every template is unchecked: a core with nothing checked would pass with nothing compared")]
    NothingChecked,
    #[error("format name is `{found}`, expected `gnomon-core`")]
    FormatName { found: String },
    #[error("format version {found} is not readable (readable: {readable:?})")]
    UnsupportedVersion { found: u32, readable: Vec<u32> },
    #[error(transparent)]
    ShardCap(#[from] ShardPlanError),
    #[error("arena base 0x{base:x} is not a multiple of the granularity {}", bytes(*granularity))]
    BaseMisaligned { base: u64, granularity: u64 },
    #[error("arena size {} cannot be real: it is zero or above the limit of {}", bytes(*size), bytes(*limit))]
    ArenaSize { size: u64, limit: u64 },
    #[error("arena 0x{base:x} + {} runs past the end of the address space", bytes(*size))]
    ArenaOverflow { base: u64, size: u64 },
    #[error("shard at position {position} has index {index}, expected {position}")]
    ShardIndex { position: usize, index: u32 },
    #[error("shard {index} ({file}) is empty")]
    ShardEmpty { index: u32, file: String },
    #[error("shard {index} ({file}) is {}, larger than the shard cap {}", bytes(*size), bytes(*cap))]
    ShardOverCap { index: u32, file: String, size: u64, cap: u64 },
    #[error("shard {index} ({file}) at offset {offset} is not aligned to the granularity {}", bytes(*granularity))]
    ShardMisaligned { index: u32, file: String, offset: u64, granularity: u64 },
    #[error("shard {index} ({file}) starts at offset {offset}, overlapping the previous shard, which ends at {previous_end}")]
    ShardOverlap { index: u32, file: String, offset: u64, previous_end: u64 },
    #[error("shard {index} ({file}) starts at offset {offset}, leaving a gap after the previous shard, which ends at {previous_end}")]
    ShardGap { index: u32, file: String, offset: u64, previous_end: u64 },
    #[error(
        "shard {index} ({file}) covers offsets {}, past the arena's end {arena_size}: extra shard",
        hex_range(span)
    )]
    ExtraShard { index: u32, file: String, span: Range<u64>, arena_size: u64 },
    #[error("shards cover the arena only up to offset {covered}, its size is {arena_size}: missing shard")]
    MissingShard { covered: u64, arena_size: u64 },
    #[error("{kind} `{name}` is declared more than once")]
    Duplicate { kind: &'static str, name: String },
    #[error("buffer `{buffer}` covers offsets {}, outside the arena of {}", hex_range(span), bytes(*arena_size))]
    BufferOutsideArena { buffer: String, span: Range<u64>, arena_size: u64 },
    #[error("buffers `{first}` and `{second}` overlap at offsets {}", hex_range(overlap))]
    BuffersOverlap { first: String, second: String, overlap: Range<u64> },
    #[error(
        "function `{function}` of module `{module}`: parameter {param} at {} overlaps the previous parameter",
        hex_range(span)
    )]
    ParamLayout { module: String, function: String, param: usize, span: Range<u64> },
    #[error("template `{template}` flags: {source}")]
    Flags { template: String, source: FlagsError },
    #[error("node `{node}` of template `{template}` references module `{module}`, which does not exist")]
    UnknownModule { template: String, node: String, module: String },
    #[error("node `{node}` of template `{template}` references function `{function}`, which module `{module}` does not have")]
    UnknownFunction { template: String, node: String, module: String, function: String },
    #[error("node `{node}` of template `{template}` holds {found} parameter bytes, but `{function}`'s recorded layout needs {expected}")]
    ParamBytes { template: String, node: String, function: String, expected: u64, found: u64 },
    #[error("node `{node}` of template `{template}` declares parameter {param} a pointer, but `{function}` has {count} parameters")]
    PointerParamIndex { template: String, node: String, function: String, param: u32, count: usize },
    #[error("node `{node}` of template `{template}` declares a pointer at byte {at} of parameter {param}, but the parameter is {size} bytes, so the 8 bytes do not fit")]
    PointerParamSize { template: String, node: String, param: u32, at: u64, size: u64 },
    #[error("node `{node}` of template `{template}`: parameter {param} (bytes {}) holds address 0x{address:x}, which lies in no buffer", hex_range(bytes))]
    DanglingPointer { template: String, node: String, param: u32, bytes: Range<u64>, address: u64 },
    #[error("node `{node}` of template `{template}` references buffer `{buffer}`, which does not exist")]
    UnknownBuffer { template: String, node: String, buffer: String },
    #[error("node `{node}` of template `{template}` touches offsets {} of buffer `{buffer}`, which is {} long", hex_range(span), bytes(*size))]
    BufferRange { template: String, node: String, buffer: String, span: Range<u64>, size: u64 },
    #[error("node `{node}` of template `{template}`: memset element size {element_size} is not 1, 2 or 4")]
    MemsetElement { template: String, node: String, element_size: u32 },
    #[error("edge {edge} of template `{template}` references node `{node}`, which does not exist")]
    UnknownEdgeNode { template: String, edge: usize, node: String },
    #[error("edges of template `{template}` form a cycle through nodes {nodes:?}")]
    Cycle { template: String, nodes: Vec<String> },
    #[error("capture order of template `{template}` is not a permutation of its nodes: {reason}")]
    CaptureOrder { template: String, reason: String },
    #[error("expectation {index} references {kind} `{name}`, which does not exist")]
    ExpectationTarget { index: usize, kind: &'static str, name: String },
    #[error("function `{function}` of module `{module}`: parameter {param} at offsets {} ends past the {limit}-byte limit of kernel parameters", hex_range(span))]
    ParamPastLimit { module: String, function: String, param: usize, span: Range<u64>, limit: u64 },
    #[error("{item} digest `{digest}` is not {digits} lowercase hexadecimal digits")]
    DigestFormat { item: String, digest: String, digits: usize },
    #[error("tensor-parallel rank {rank} does not fit world size {world}")]
    TensorParallel { rank: u32, world: u32 },
    #[error("{kind} `{name}` of template `{template}` appears more than once")]
    DuplicateIn { template: String, kind: &'static str, name: String },
    #[error("expectation of template `{template}` has tolerance {value}, which is not a finite number ≥ 0")]
    Tolerance { template: String, value: f64 },
    #[error("node `{node}` of template `{template}`: {what} {dims:?} is outside what a launch allows ({limit})")]
    LaunchShape { template: String, node: String, what: &'static str, dims: [u32; 3], limit: &'static str },
    #[error("template `{template}` has no nodes")]
    EmptyTemplate { template: String },
    #[error("node `{node}` of template `{template}`: memset value 0x{value:x} does not fit an element of {element_size} bytes")]
    MemsetValue { template: String, node: String, value: u32, element_size: u32 },
    #[error("node `{node}` of template `{template}`: parameter byte {offset} lies between parameters and is not zero")]
    ParamPadding { template: String, node: String, offset: usize },
    #[error("generator {index}: {what} (format v3, docs/format-v3.md \"generators\")")]
    Generator { index: usize, what: String },
    #[error("{item} path `{path}` has an empty, `.` or `..` component")]
    PathNotCanonical { item: String, path: String },
    #[error("{item} path `{path}` leaves the core directory")]
    PathEscapes { item: String, path: String },
    #[error("{item} path `{path}` goes through a symbolic link")]
    PathThroughLink { item: String, path: String },
    #[error("{item} file `{path}` is missing")]
    MissingFile { item: String, path: String },
    #[error("{item} path `{path}` is {kind}, not a regular file")]
    NotAFile { item: String, path: String, kind: &'static str },
    #[error("{item} file `{path}` is {}, the manifest says {}", bytes(*found), bytes(*declared))]
    FileSize { item: String, path: String, declared: u64, found: u64 },
    #[error("{item} file `{path}` has {kind} {found}, the manifest says {expected}")]
    HashMismatch { item: String, path: String, kind: &'static str, expected: String, found: String },
    #[error("{item} file `{path}` could not be read: {reason}")]
    FileUnreadable { item: String, path: String, reason: String },
    #[error("module `{module}` names no arch: {reason}")]
    ImageArch { module: String, reason: String },
    #[error("module `{module}` holds code for {image}, which cannot run on the core's sm_{core}: {rule}")]
    NoCodeForArch { module: String, image: String, core: u32, rule: &'static str },
}

/// The instantiation-flags contract.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FlagsError {
    #[error("flags come from both an explicit value and a live executable; exactly one source is allowed")]
    BothSources,
    #[error("flags have no source; give an explicit value or a live executable")]
    NoSource,
    #[error("flags value {value} sets bit {bit} ({name}), which is not supported (supported values: 0, 1, 8, 9)")]
    UnsupportedBit { value: u64, bit: u64, name: &'static str },
    #[error("the driver reports flags {reported} for an executable instantiated with {instantiated} (bits 0x{:x} lost); record the flags explicitly instead", instantiated ^ reported)]
    ReadbackMismatch { instantiated: u64, reported: u64 },
}

/// The template/executable contract.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContractError {
    #[error("template `{template}` has no executable; native replay needs one per template")]
    MissingExecutable { template: String },
    #[error("executable for `{template}` matches no template of the core")]
    UnmatchedExecutable { template: String },
    #[error("template `{template}` has more than one executable")]
    DuplicateExecutable { template: String },
    #[error("template `{template}` is listed more than once")]
    DuplicateTemplate { template: String },
    #[error("executable for `{template}` was instantiated with flags {executable}, the core records {recorded}")]
    FlagsDiffer { template: String, recorded: u64, executable: u64 },
    #[error("template `{template}` flags: {source}")]
    Flags { template: String, source: FlagsError },
}

/// Planning shards of an arena under a cap.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardPlanError {
    #[error("shard cap is zero")]
    CapZero,
    #[error("allocation granularity {} is not a non-zero power of two", bytes(*granularity))]
    Granularity { granularity: u64 },
    #[error("shard cap {} is smaller than the allocation granularity {}", bytes(*cap), bytes(*granularity))]
    CapBelowGranularity { cap: u64, granularity: u64 },
    #[error("shard cap {} is not a multiple of the allocation granularity {}", bytes(*cap), bytes(*granularity))]
    CapNotMultiple { cap: u64, granularity: u64 },
    #[error("arena size is zero")]
    EmptyArena,
    #[error("arena size {} rounded up to the granularity overflows", bytes(*size))]
    ArenaOverflow { size: u64 },
}

/// Replaying a recorded stream capture.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CaptureError {
    #[error("op {op}: stream {stream} is used before it joined the capture (it must wait on a captured event first)")]
    StreamNotCaptured { op: usize, stream: u32 },
    #[error("op {op}: stream {stream} waits on event `{event}`, which was never recorded")]
    EventNotRecorded { op: usize, stream: u32, event: String },
    #[error("stream {stream} was never joined back into the origin stream before capture ended")]
    Unjoined { stream: u32 },
}

/// Whether per-rank cores of one tensor-parallel model agree.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TensorParallelError {
    #[error("no cores given")]
    Empty,
    #[error("rank {rank} says world size {found}, but {expected} cores were given")]
    WorldSize { rank: u32, found: u32, expected: usize },
    #[error("rank {rank} appears more than once")]
    DuplicateRank { rank: u32 },
    #[error("rank {rank} is missing")]
    MissingRank { rank: u32 },
    #[error("rank {rank} disagrees with rank 0 on {what}")]
    Mismatch { rank: u32, what: String },
    #[error("rank {rank}'s peer range {index} ends at {end:#x} of rank {peer}'s arena, past the {used:#x} bytes that rank uses (replay maps and shares no more)")]
    PeerUnused { rank: u32, index: usize, peer: u32, end: u64, used: u64 },
    #[error("rank {rank}'s peer range {index} maps {offset:#x}..{end:#x} of rank {peer}'s arena, which splits a shard (a window maps its peer's shards whole)")]
    PeerSplitsShard { rank: u32, index: usize, peer: u32, offset: u64, end: u64 },
}

/// Filling a kernel parameter blob.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParamError {
    #[error("parameter {index} does not exist: the function has {count}")]
    NoSuchParam { index: usize, count: usize },
    #[error("parameter {index} is {slot} bytes, a value of {given} bytes was given")]
    SizeMismatch { index: usize, slot: u64, given: usize },
}
