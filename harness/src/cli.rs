//! The command line. `gnomon run` takes every libtest flag (filters, `--exact`, `--skip`,
//! `--list`, `--format`), so `cargo nextest` and people use it the same way.

use std::{path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand};

use crate::runner::RunConfig;

#[derive(Debug, Parser)]
#[command(name = "gnomon", version, about = "Qualifies exported CUDA-graph cores")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the case catalogue: CPU cases always, GPU cases where a GPU is present.
    Run(RunArgs),
    /// Validate a core and replay it natively on device 0, at its fixed addresses.
    Replay(ReplayArgs),
    /// Export a fixture workload's core and exit (the exporting process of a replay case).
    #[command(name = "__export", hide = true)]
    Export(ExportArgs),
    /// Run one case in this process and write its record (used by `run` for isolation).
    #[command(name = "__run-case", hide = true)]
    RunCase(RunCaseArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Directory for report.json, report.md and junit.xml [default: reports/out/RUN-ID].
    #[arg(long)]
    pub report_dir: Option<PathBuf>,
    /// Refuse to run unless a GPU of this arch (for example sm_90) is present.
    #[arg(long, value_name = "ARCH")]
    pub require_arch: Option<String>,
    /// Time limit for each case run in a child process.
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    pub case_timeout: Duration,
    /// Run a failing case up to N more times; one that then passes is reported flaky.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub retries: u32,
    /// Name recorded as the run's profile (release, nightly, port).
    #[arg(long, default_value = "default")]
    pub profile: String,
    /// Include the runner's self-test cases under mock/.
    #[arg(long, hide = true)]
    pub include_mock: bool,
    /// Include gpu/fault/ cases, whose kernels fault on purpose.
    #[arg(long, hide = true)]
    pub include_faults: bool,
    #[command(flatten)]
    pub libtest: libtest_mimic::Arguments,
}

impl RunArgs {
    pub fn into_config(self) -> RunConfig {
        RunConfig {
            report_dir: self.report_dir,
            require_arch: self.require_arch,
            case_timeout: self.case_timeout,
            retries: self.retries,
            profile: self.profile,
            include_mock: self.include_mock,
            include_faults: self.include_faults,
            child_exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("gnomon")),
            libtest: self.libtest,
        }
    }
}

#[derive(Debug, Args)]
pub struct RunCaseArgs {
    pub case: String,
    #[arg(long)]
    pub result_file: PathBuf,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The core directory (holding manifest.json).
    pub core: PathBuf,
    /// Also write the outcome and stage timings as JSON here.
    #[arg(long)]
    pub result: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    pub workload: String,
    /// Shard cap in bytes.
    #[arg(long)]
    pub cap: u64,
    #[arg(long)]
    pub dir: PathBuf,
    #[arg(long)]
    pub result: Option<PathBuf>,
}
