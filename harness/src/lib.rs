//! The `gnomon` binary's library half: the command line, the environment probe, and the
//! runner. `src/main.rs` and the `suite` test target are thin callers of [`runner::run`].

pub mod cli;
pub mod commands;
pub mod environment;
pub mod heap;
pub mod pipes;
pub mod runner;
