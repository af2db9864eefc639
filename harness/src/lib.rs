//! The `gnomon` binary's library half: the command line, the environment probe, the
//! runner, and the subcommands (`commands` read files, `steps` run one GPU step). `src/main.rs` and the `suite` test target are thin callers of [`runner::run`].

pub mod cli;
pub mod commands;
pub mod environment;
pub mod heap;
pub mod pipes;
pub mod runner;
pub mod steps;
