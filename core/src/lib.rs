//! The GPU side of the export contract, above `gnomon-format`: exporting retained
//! templates as a core, replaying a core natively, recording the images the driver loads,
//! the ranks' rendezvous, and the other processes on a GPU.
//!
//! - [`cuda`]: the only module that talks to the driver, in the driver's terms.
//! - [`translate`]: the format's terms in the driver's, both ways (attributes, edges,
//!   parameter slots, the flags contract at instantiation).
//! - [`record`]: the images the driver loads, heard from CUPTI (its own `unsafe` room).
//! - [`export`]: retained templates and their arena written as a core.
//! - [`replay`]: a core restored and its executables launched, stage by stage.
//! - [`rendezvous`]: rank processes meeting to share their memory.
//! - [`sharing`]: the other processes on this machine's GPUs (NVML), which a verdict reached beside them names.
//! - [`host_memory`]: the process's peak resident memory, stage by stage.
//! - [`page_cache`]: how much of a file the page cache holds, and dropping it (honest read floors).

pub mod cuda;
pub mod errors;
pub mod export;
pub mod host_memory;
pub mod page_cache;
pub mod progress;
pub mod record;
pub mod rendezvous;
pub mod replay;
pub mod sharing;
pub mod translate;
