//! Every error `gnomon-core` returns that touches the GPU: the driver's, exporting,
//! replaying and recording. The format's own errors are `gnomon_format::errors`.

use gnomon_format::errors::{bytes, ContractError, CoreError, FlagsError, ParamError, ValidationError};
use thiserror::Error;

use crate::rendezvous::RendezvousError;

/// A call into the CUDA driver or NVRTC that did not do what was asked.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CudaError {
    #[error("{call} failed: {code}")]
    Driver { call: &'static str, code: String },
    #[error("no usable CUDA device: {0}")]
    Unavailable(String),
    #[error("instantiate: {0}")]
    Flags(#[from] FlagsError),
    #[error("compile `{name}` with NVRTC (options {options:?}): {log}")]
    Compile { name: String, options: Vec<String>, log: String },
    #[error("reserve {} at 0x{wanted:x}: the driver placed it at 0x{got:x}", bytes(*size))]
    AddressNotHonoured { wanted: u64, got: u64, size: u64 },
    #[error("{0}")]
    Unsupported(String),
    #[error("{call} ({target}, {attribute} = {value}) failed: {code}")]
    Attribute { call: &'static str, target: String, attribute: &'static str, value: String, code: String },
    /// A release in `Drop` failed; the next call on the context reports it instead of running.
    #[error("releasing a handle earlier: {call} failed: {code}{}", and_more(*more))]
    Release { call: &'static str, code: String, more: usize },
}

fn and_more(more: usize) -> String {
    match more {
        0 => String::new(),
        n => format!(" (and {n} more failed releases)"),
    }
}

/// Exporting retained templates into a core.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ExportError {
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error("node `{node}` of template `{template}`: {what}")]
    Node { template: String, node: String, what: String },
    #[error("buffer `{buffer}` is declared zero but holds other bytes")]
    NotZero { buffer: String },
    #[error("the snapshot was given up: the work beside it failed")]
    Abandoned,
    #[error("the written core does not validate: {0}")]
    Invalid(#[from] ValidationError),
}

/// Replaying a core natively.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReplayError {
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(transparent)]
    Contract(#[from] ContractError),
    #[error("core was exported on {what} {core}, this device has {device}")]
    ContextMismatch { what: &'static str, core: String, device: String },
    #[error("the core maps {ranges} ranges of its peers' arenas, and this replay was given no rank set to meet (`gnomon qualify` of the whole rank set does): none of its kernels is launched")]
    PeersNotMapped { ranges: usize },
    #[error("meet the other ranks: {0}")]
    Ranks(#[from] RendezvousError),
    #[error("function `{function}` of module `{module}`: the driver reports parameter layout {driver:?}, the core records {recorded:?}")]
    LayoutMismatch { module: String, function: String, recorded: Vec<(u64, u64)>, driver: Vec<(u64, u64)> },
    #[error("node `{node}` of template `{template}` is a {kind} node, which native replay does not rebuild")]
    UnsupportedNode { template: String, node: String, kind: &'static str },
    #[error("read shard {index} ({file}): {source}")]
    Shard { index: u32, file: String, source: std::io::Error },
    /// A module image not kept by validation, read again and refused by its rules.
    #[error("read a module image again: {0}")]
    ModuleImage(#[from] ValidationError),
    #[error("ask the page cache about the shard files: {source}")]
    Cache { source: std::io::Error },
    #[error(transparent)]
    Param(#[from] ParamError),
    #[error(
        "buffer `{buffer}` is declared {contents}, but after the upload {differing} of its bytes are not {expected}"
    )]
    Contents { buffer: String, contents: &'static str, expected: &'static str, differing: u64 },
    #[error("template `{template}` wrote weight buffer `{buffer}` (its checksum changed when the template ran)")]
    WeightWritten { template: String, buffer: String },
    #[error(transparent)]
    KernelNode(Box<KernelNodeError>),
    #[error("template `{template}` node `{node}`: {source}")]
    Node { template: String, node: String, source: CudaError },
}

impl ReplayError {
    /// The template at fault, when the error names one.
    pub fn template(&self) -> Option<&str> {
        match self {
            Self::UnsupportedNode { template, .. }
            | Self::WeightWritten { template, .. }
            | Self::Node { template, .. } => Some(template),
            Self::KernelNode(k) => Some(&k.template),
            _ => None,
        }
    }
}

/// A kernel node the driver would not add, with what it asked for.
#[derive(Debug, Error)]
#[error("template `{template}` node `{node}` (function `{function}`, grid {grid:?}, block {block:?}, {shared_mem} B of dynamic shared memory): {source}")]
pub struct KernelNodeError {
    pub template: String,
    pub node: String,
    pub function: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem: u32,
    pub source: CudaError,
}

/// Recording the images the driver loads.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RecordError {
    #[error("no CUDA driver on this machine (libcuda.so.1 could not be loaded): recording kernel images needs a GPU and its driver")]
    NoDriver,
    #[error("CUPTI could not be loaded (set GNOMON_CUPTI to libcupti.so); tried {}", .tried.join(", "))]
    NoCupti { tried: Vec<String> },
    #[error("{call} failed: {text} ({code})")]
    Cupti { call: &'static str, code: u32, text: String },
    #[error("recorded image {image} does not load: {source}")]
    Load { image: usize, source: CudaError },
    #[error("no recorded image holds the module of kernel `{function}` (its kernels: {})", .module.join(", "))]
    NoImage { function: String, module: Vec<String> },
    #[error("recorded images of different bytes hold the same kernels as the module of `{function}`")]
    Ambiguous { function: String },
}
