//! The subject Gnomon qualifies: the export contract for CUDA-graph cores.
//!
//! - [`format`]: core format v3 (v2 and v1 still read) — the manifest types, reading and writing a core directory.
//! - [`validate`]: every rule a core must satisfy before it may reach a GPU, and [`Core`], a core that did.
//! - [`account`]: what a valid core holds, in a few lines.
//! - [`flags`]: the instantiation-flags contract (exactly one source; 0, 1, 8 or 9).
//! - [`contract`]: export needs templates only; replay needs executables.
//! - [`shards`]: splitting a fixed-address arena into shards under a cap.
//! - [`spread`]: how far launches of an output lie from the first, in the data's units (tolerances).
//! - [`sharing`]: the other processes on this machine's GPUs (NVML), which a verdict reached beside them names.
//! - [`capture_order`]: the node and edge order that stream capture constructs.
//! - [`tensor_parallel`]: whether per-rank cores agree.
//! - [`page_cache`]: how much of a file the page cache holds, and dropping it (honest read floors).
//! - [`cuda`]: the only module that talks to the driver.

pub mod account;
pub mod capture_order;
pub mod contract;
pub mod cuda;
pub mod errors;
pub mod export;
pub mod flags;
pub mod format;
pub mod page_cache;
pub mod params;
pub mod record;
pub mod rendezvous;
pub mod replay;
pub mod shards;
pub mod sharing;
pub mod spread;
pub mod tensor_parallel;
pub mod validate;

pub use validate::Core;
