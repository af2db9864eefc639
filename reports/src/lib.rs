//! Gnomon's report schema v1: stable, versioned, machine-readable types shared by the
//! runner and by everything that reads its output, plus the renderers.
//!
//! Compatibility rule: fields added after v1 carry `#[serde(default)]`, so every reader of
//! this crate reads every report an older harness wrote.

mod claims;
mod compare;
pub mod exit_codes;
mod groups;
mod merge;
mod model;
mod partition;
mod policy;
pub mod render;
mod summary;
pub mod text;

pub use claims::verdicts;
pub use compare::{
    classify, compare, Comparison, EnvironmentDifference, Gate, MetricChange, Transition, TransitionKind,
};
pub use groups::{group, left_out, not_run, Group};
pub use merge::{merge, MergeError};
pub use model::*;
pub use partition::Partition;
pub use policy::{Direction, MetricPolicy};
pub use summary::summary;

/// Writes `bytes` to `path` through a temporary file in the same directory, synced, and a
/// rename, then syncs the directory: a reader, a killed writer or a power loss leaves the
/// old file or the new one, never half of one.
pub fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut file =
        tempfile::Builder::new().permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644)).tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    std::fs::File::open(dir)?.sync_all()
}
