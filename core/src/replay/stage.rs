//! The stages of a restore. Each stage's name (its metric is `restore-NAME-s`) is spelled
//! here once; whoever sorts stages (the qualify judge, the restore's total) matches this
//! enum exhaustively, so a new stage cannot be filed under another by default.

use std::{fmt, time::Instant};

/// What `f` gives, its wall seconds added to `seconds`: a stage's parts summed where they
/// run many times (a template's launches, reads and checks).
pub fn timed<T>(seconds: &mut f64, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let result = f();
    *seconds += started.elapsed().as_secs_f64();
    result
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The core's SM, driver and granularity against the device's (before any timed stage).
    Context,
    /// Parsing and validating the core, in a process that already has its context.
    Open,
    /// A fresh process: opening the core while the context is made.
    OpenAndContext,
    ReserveAndMap,
    /// A rank of a set: handing its shards to the other ranks and mapping their ranges.
    MapPeers,
    ModuleLoad,
    /// NaN patterns over the arena before the upload.
    Poison,
    Upload,
    /// The device counts unlike bytes in every zero and undefined buffer.
    ContentsCheck,
    /// Device copies of the writable buffers, for the resets.
    WritableCopies,
    Rebuild,
    Instantiate,
    /// Executables handed over by the capturing process instead of being instantiated.
    Handover,
    Reset,
    Launch,
    ReadOutputs,
    /// Loading the check kernels, and summing the weights before and after the launches.
    WeightsCheck,
    /// One more launch of each template under the second poison.
    PoisonIndependence,
    /// Each template's launches timed, as its exporter timed them.
    Speed,
    /// The next launches of each template that draws random numbers.
    Draws,
    /// A rank of a set waiting for the others before and after each launch.
    RankSync,
    /// After a restore, in a replay case: its outputs against the expectations and the
    /// CPU reference.
    Compare,
    /// After a restore, in a replay case: the floors its upload is held against.
    MeasureFloors,
}

impl Stage {
    /// The stages that take a core from disk to every template ready to launch: their sum
    /// is `restore-total-s`. The checks are timed apart.
    pub const RESTORE: [Stage; 10] = [
        Stage::Open,
        Stage::OpenAndContext,
        Stage::ReserveAndMap,
        Stage::MapPeers,
        Stage::Poison,
        Stage::Upload,
        Stage::WritableCopies,
        Stage::ModuleLoad,
        Stage::Rebuild,
        Stage::Instantiate,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Stage::Context => "context",
            Stage::Open => "open",
            Stage::OpenAndContext => "open-and-context",
            Stage::ReserveAndMap => "reserve-and-map",
            Stage::MapPeers => "map-peers",
            Stage::ModuleLoad => "module-load",
            Stage::Poison => "poison",
            Stage::Upload => "upload",
            Stage::ContentsCheck => "contents-check",
            Stage::WritableCopies => "writable-copies",
            Stage::Rebuild => "rebuild",
            Stage::Instantiate => "instantiate",
            Stage::Handover => "handover",
            Stage::Reset => "reset",
            Stage::Launch => "launch",
            Stage::ReadOutputs => "read-outputs",
            Stage::WeightsCheck => "weights-check",
            Stage::PoisonIndependence => "poison-independence",
            Stage::Speed => "speed",
            Stage::Draws => "draws",
            Stage::RankSync => "rank-sync",
            Stage::Compare => "compare",
            Stage::MeasureFloors => "measure-floors",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
