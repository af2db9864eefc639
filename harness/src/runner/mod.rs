//! The runner. `dispatch` turns the catalogue (or a qualification's cases) into libtest
//! trials, applies retries and collects records; `executor` runs one case, in this
//! process or in a child with a time limit, or a batch's children at once, ending each
//! child's whole process group on a timeout or a cancel, and `relay` reads the progress
//! lines a child writes while it runs; `signal` handles Ctrl-C; `console` prints the
//! header, progress and closing line; `sink` keeps the report on disk, rewritten
//! atomically after every case.

mod console;
mod dispatch;
mod executor;
mod relay;
mod signal;
mod sink;

pub use dispatch::{run, selection_of, CaseSource, RunConfig};
pub use executor::child_main;
