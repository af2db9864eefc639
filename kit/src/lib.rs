//! The port kit: what a capturing process links to turn its CUDA graphs into a core.
//!
//! - [`allocations`]: the arena's bookkeeping, which knows every allocation and never
//!   reuses memory a capture may hold;
//! - [`declare`]: buffers from those allocations and the roles the caller names;
//! - [`live`]: the GPU side, mapping the arena and exporting graphs with the core's
//!   exporter, images from the load-time recorder;
//! - [`launches`]: expectations from repeated launches, and what varied between them;
//! - [`collectives`]: the kernels no core can hold (NCCL's), refused by name;
//! - [`outside`]: PyTorch's memory outside the arena, which no node may point into;
//! - [`random`]: templates that draw from PyTorch's CUDA generator, and how they advance.
//!
//! The Python package (`python/`) is a thin binding over this crate.

pub mod allocations;
pub mod collectives;
pub mod declare;
pub mod errors;
pub mod launches;
pub mod live;
pub mod outside;
pub mod random;
