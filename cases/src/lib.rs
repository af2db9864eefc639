//! Gnomon's case catalogue. Each case has a stable hierarchical id, declares what it needs
//! (nothing, or GPUs), how it must be isolated, and which claims it establishes.
//!
//! - `cpu/`: the export contract checked without a GPU.
//! - `gpu/` and `replay/`: need a CUDA device; each runs in its own child process.
//! - `qualify/`: a port's own cores, judged by `gnomon qualify` (not in the catalogue).
//! - `mock/`: hidden cases that pass, fail, crash, hang and flake on purpose, so the
//!   runner can test its own isolation without a GPU.

mod case;
mod check;
pub mod cpu;
pub mod expectations;
mod gpu;
pub mod mock;
pub mod qualify;
mod rebuilt;
pub mod replay;
mod restored;

pub use case::{
    measured, Batch, BatchChild, Case, CaseBody, Ctx, Facilities, Isolation, Metrics, Requirement, Verdict,
};
pub use check::*;

/// What to include beyond the normal catalogue.
#[derive(Clone, Copy, Debug, Default)]
pub struct CatalogueOptions {
    /// The self-test cases under `mock/`.
    pub include_mock: bool,
    /// `gpu/fault/`: kernels that fault on purpose.
    pub include_faults: bool,
    /// Workloads too large for the default run (`replay/model-scale-nightly/`), for
    /// `--profile nightly`.
    pub include_nightly: bool,
}

/// Every case, in id order.
pub fn catalogue(options: CatalogueOptions) -> Vec<Case> {
    let mut cases = cpu::cases();
    cases.extend(gpu::cases(options.include_faults));
    cases.extend(replay::cases(options.include_nightly));
    if options.include_mock {
        cases.extend(mock::cases());
    }
    cases.sort_by(|a, b| a.id.cmp(&b.id));
    cases
}
