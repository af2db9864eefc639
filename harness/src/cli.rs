//! The command line. `gnomon run` takes every libtest flag (filters, `--exact`, `--skip`,
//! `--list`, `--format`), so `cargo nextest` and people use it the same way.

use std::{path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand};

use gnomon_cases::{expectations::Expectations, qualify::Target, CatalogueOptions};
use gnomon_reports::Partition;

use crate::runner::{CaseSource, RunConfig};

#[derive(Debug, Parser)]
#[command(
    name = "gnomon",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("GNOMON_COMMIT"), ")"),
    about = "Qualifies exported CUDA-graph cores: validation, GPU cases and fixed-address native replay"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the case catalogue: CPU cases always, GPU cases where a GPU is present.
    #[command(
        long_about = "Run the case catalogue: CPU cases always, GPU and replay cases where a CUDA GPU is \
                      present (skipped with the reason otherwise). Writes report.json, report.md and \
                      junit.xml, and exits non-zero when a case fails.",
        help_template = "{about-with-newline}\n{usage-heading} {usage}\n\n{all-args}{after-help}",
        after_help = "Exit codes: 0 every selected case passed, was skipped, blocked or failed as expected; \
                      101 a case failed, crashed, timed out or passed unexpectedly; 2 bad usage; \
                      3 --require-arch not met.",
        mut_arg("include_ignored", |a| a.help("Also run cases whose requirements are absent (each records skipped)")),
        mut_arg("ignored", |a| a.help("Run only cases whose requirements are absent (each records skipped)")),
        mut_arg("list", |a| a.help("List the selected case ids and exit")),
        mut_arg("exact", |a| a.help("Match FILTER against whole case ids")),
        mut_arg("skip", |a| a.help("Leave out cases whose id contains FILTER (repeatable)")),
        mut_arg("filter", |a| a.help("Run only cases whose id contains FILTER (for example gpu/flags/)")),
        mut_arg("test_threads", |a| a.help("Threads for in-process cases; isolated GPU cases always run one at a time")),
        mut_arg("test", |a| a.hide(true)),
        mut_arg("bench", |a| a.hide(true)),
        mut_arg("nocapture", |a| a.hide(true)),
        mut_arg("show_output", |a| a.hide(true)),
        mut_arg("unstable_flags", |a| a.hide(true)),
        mut_arg("logfile", |a| a.hide(true)),
    )]
    Run(RunArgs),
    /// Compare two reports: status transitions, metric changes, environment differences.
    Compare(CompareArgs),
    /// Join partial reports of one partitioned run into one report.
    Merge(MergeArgs),
    /// Print a report as one paragraph of prose.
    Summary(SummaryArgs),
    /// Render several reports (nightly runs, say) as one HTML page: a status grid of
    /// cases × runs and a plot of each metric over the runs.
    Trend(TrendArgs),
    /// Qualify a port's cores or rank sets: the standard cases against each, as a report
    /// that compare, merge, summary and expectations apply to.
    #[command(after_help = "Exit codes: 0 every case passed, was skipped, blocked or failed as expected; \
                            101 a case failed; 2 bad usage (a target or profile that cannot be read).")]
    Qualify(QualifyArgs),
    /// Restore one core and judge its qualification cases (a child of `qualify`).
    #[command(name = "__qualify-core", hide = true)]
    QualifyCore(QualifyCoreArgs),
    /// Check cores against every rule of the format, without a GPU, and say what each holds.
    #[command(
        after_help = "Exit codes: 0 every core is valid; 101 a core was refused (the rule it breaks is printed); \
                            2 a core could not be read."
    )]
    Validate(ValidateArgs),
    /// Validate a core and replay it natively on device 0, at its fixed addresses.
    Replay(ReplayArgs),
    /// Write the core of a built-in workload (the exporter the replay cases run), to read
    /// as an example of the format or to qualify; needs a GPU.
    Export(ExportArgs),
    /// Start a built-in workload without its core, its weights read from the core's shard
    /// files: the rival a restore is timed against (a child of the replay cases).
    #[command(name = "__cold-start", hide = true)]
    ColdStart(ColdStartArgs),
    /// One rank of two mapping each other's memory on one GPU (a child of `replay/peers/`).
    #[command(name = "__peer-probe", hide = true)]
    PeerProbe(PeerProbeArgs),
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
    #[arg(long, value_name = "ARCH", value_parser = parse_arch)]
    pub require_arch: Option<String>,
    /// Time limit for each case run in a child process (1s to 24h).
    #[arg(long, default_value = "120s", value_parser = parse_timeout)]
    pub case_timeout: Duration,
    /// Run a failing case up to N more times (at most 10); one that then passes is reported flaky.
    #[arg(long, default_value_t = 0, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=10))]
    pub retries: u32,
    /// Name recorded as the run's profile; `nightly` also runs the 8 GiB replay/model-scale-nightly family.
    #[arg(long, default_value = "default")]
    pub profile: String,
    /// Run only this share of the catalogue: hash:K/N (1 ≤ K ≤ N).
    #[arg(long, value_name = "hash:K/N")]
    pub partition: Option<Partition>,
    /// Expectations file [default: the catalogue's own cases/expectations.toml].
    #[arg(long, value_name = "FILE")]
    pub expectations: Option<PathBuf>,
    /// Include the runner's self-test cases under mock/.
    #[arg(long, hide = true)]
    pub include_mock: bool,
    /// Also run gpu/fault/ cases, whose kernels fault on purpose (proves isolation on a GPU).
    #[arg(long)]
    pub include_faults: bool,
    #[command(flatten)]
    pub libtest: libtest_mimic::Arguments,
}

impl RunArgs {
    pub fn into_config(self) -> Result<RunConfig, String> {
        if self.libtest.test_threads == Some(0) {
            return Err("--test-threads must be at least 1".into());
        }
        let text = match &self.expectations {
            Some(path) => std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?,
            None => gnomon_cases::expectations::DEFAULT.to_owned(),
        };
        Ok(RunConfig {
            source: CaseSource::Catalogue(CatalogueOptions {
                include_mock: self.include_mock,
                include_faults: self.include_faults,
                include_nightly: self.profile == "nightly",
            }),
            report_dir: self.report_dir,
            require_arch: self.require_arch,
            case_timeout: self.case_timeout,
            retries: self.retries,
            profile: self.profile,
            child_exe: this_binary(),
            partition: self.partition,
            expectations: Expectations::parse(&text)?,
            libtest: self.libtest,
            empty_selection_fails: true,
            needs_gpu: false,
        })
    }
}

/// The running `gnomon`, which isolated cases and batches start as children.
fn this_binary() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("gnomon"))
}

/// `sm_` and the compute capability's digits, as the report writes arches.
fn parse_arch(s: &str) -> Result<String, String> {
    match s.strip_prefix("sm_") {
        Some(digits) if !digits.is_empty() && digits.len() <= 4 && digits.chars().all(|c| c.is_ascii_digit()) => {
            Ok(s.to_owned())
        }
        _ => Err(format!("`{s}` is not an arch such as sm_90")),
    }
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(24 * 3600) {
        return Err(format!("`{s}` is outside 1s ..= 24h"));
    }
    Ok(d)
}

#[derive(Debug, Args)]
pub struct RunCaseArgs {
    pub case: String,
    #[arg(long)]
    pub result_file: PathBuf,
}

#[derive(Debug, Args)]
pub struct QualifyArgs {
    /// Cores (directories holding manifest.json) and rank sets (directories of per-rank
    /// cores); the profile's `cores` come in addition.
    pub targets: Vec<PathBuf>,
    /// The port's qualification profile (TOML): cores, launches, tolerances, budgets,
    /// expected failures.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Directory for report.json, report.md and junit.xml [default: reports/out/RUN-ID].
    #[arg(long)]
    pub report_dir: Option<PathBuf>,
    /// Time limit for each core's restore and judgement (1s to 24h).
    #[arg(long, default_value = "600s", value_parser = parse_timeout)]
    pub case_timeout: Duration,
    /// List the case ids and exit.
    #[arg(long)]
    pub list: bool,
    /// Exit 0 without a usable GPU when every case that needs none passed; without it such
    /// a run exits 3, since nothing was qualified.
    #[arg(long)]
    pub allow_no_gpu: bool,
    /// Run every rank of a rank set on GPU 0, each in a process of its own (on a machine
    /// with fewer GPUs than ranks), instead of rank R on GPU R.
    #[arg(long)]
    pub ranks_on_one_gpu: bool,
    /// Say nothing of how far a long stage of a restore is (its launches, its speed), and
    /// one character per case instead of a line.
    #[arg(long, short)]
    pub quiet: bool,
}

impl QualifyArgs {
    pub fn into_config(self) -> Result<RunConfig, String> {
        let profile = match &self.profile {
            Some(path) => gnomon_cases::qualify::Profile::load(path)?,
            None => gnomon_cases::qualify::Profile::default(),
        };
        let paths: Vec<&PathBuf> = self.targets.iter().chain(&profile.cores).collect();
        if paths.is_empty() {
            return Err("qualify: name a core or rank set, or a profile with `cores`".into());
        }
        let targets = paths.iter().map(|p| Target::find(p)).collect::<Result<Vec<_>, _>>()?;
        let names: Vec<&str> = targets.iter().map(Target::name).collect();
        if let Some(twice) = names.iter().enumerate().find_map(|(i, n)| names[..i].contains(n).then_some(n)) {
            return Err(format!("qualify: two targets are named `{twice}`; case ids would collide"));
        }
        let subject = qualify_subject(&targets);
        let placement = match self.ranks_on_one_gpu {
            true => gnomon_cases::qualify::Placement::OneGpu,
            false => gnomon_cases::qualify::Placement::OwnGpu,
        };
        let cases = gnomon_cases::qualify::cases(&targets, &profile, placement);
        let run_profile = self
            .profile
            .as_deref()
            .and_then(|p| p.file_stem())
            .map_or("qualify".into(), |s| s.to_string_lossy().into_owned());
        let libtest = libtest_mimic::Arguments { list: self.list, quiet: self.quiet, ..Default::default() };
        Ok(RunConfig {
            source: CaseSource::Given { cases, subject },
            report_dir: self.report_dir,
            require_arch: None,
            case_timeout: self.case_timeout,
            retries: 0,
            profile: run_profile,
            child_exe: this_binary(),
            partition: None,
            expectations: profile.expectations,
            libtest,
            empty_selection_fails: true,
            needs_gpu: !self.allow_no_gpu,
        })
    }
}

/// The port, as its cores' producer names it.
fn qualify_subject(targets: &[Target]) -> gnomon_reports::Subject {
    let first = targets.iter().flat_map(|t| match t {
        Target::Core { core, .. } => std::slice::from_ref(core),
        Target::RankSet { ranks, .. } => ranks.as_slice(),
    });
    let producer = first.filter_map(|c| c.manifest.as_ref()).map(|m| m.context.producer.clone()).next();
    let names: Vec<&str> = targets.iter().map(Target::name).collect();
    gnomon_reports::Subject {
        name: format!("port {}", names.join(", ")),
        version: producer.as_ref().map_or(String::new(), |p| format!("{} {}", p.name, p.version)),
        commit: producer.map_or(String::new(), |p| p.commit),
    }
}

#[derive(Debug, Args)]
pub struct QualifyCoreArgs {
    pub core: PathBuf,
    #[arg(long)]
    pub prefix: String,
    /// The GPU of a rank of a set.
    #[arg(long)]
    pub device: Option<u32>,
    /// Where the ranks of a set meet to map each other's memory.
    #[arg(long)]
    pub meet: Option<PathBuf>,
    #[arg(long)]
    pub profile: Option<PathBuf>,
    #[arg(long)]
    pub result_file: PathBuf,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Core directories (each holding manifest.json).
    #[arg(required = true)]
    pub cores: Vec<PathBuf>,
    /// Output format: an account in words, or one JSON object per core.
    #[arg(long, value_enum, default_value = "text")]
    pub format: AccountFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AccountFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The core directory (holding manifest.json).
    pub core: PathBuf,
    /// For a rank of a set whose kernels reach into its peers' memory: the directory where
    /// the ranks, each replayed by a process of its own at once, meet.
    #[arg(long)]
    pub meet: Option<PathBuf>,
    /// How long a rank waits for the others at each meeting [default: 60s].
    #[arg(long, value_parser = parse_timeout)]
    pub meet_limit: Option<Duration>,
    /// Also write the outcome and stage timings as JSON here.
    #[arg(long)]
    pub result: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ColdStartArgs {
    /// The built-in workload the core was exported from.
    pub workload: String,
    /// The core directory whose shard files hold the weights.
    pub core: PathBuf,
    #[arg(long)]
    pub result: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PeerProbeArgs {
    #[arg(long)]
    pub rank: u32,
    /// The directory both ranks meet in.
    pub dir: PathBuf,
    #[arg(long)]
    pub result: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The workload: elementwise, gemm, fork-join, decode, model-scale, model-scale-nightly;
    /// or a rank set whose kernels reach into each other's memory, allreduce or
    /// allreduce-two-shot (with --tp 2 or 4).
    pub workload: String,
    /// Directory for the core (for --tp N, one core per rank under DIR/rank-R).
    #[arg(long)]
    pub out: PathBuf,
    /// Shard cap, for example 64MiB or 64GiB.
    #[arg(long, default_value = "64GiB", value_parser = parse_cap)]
    pub cap: u64,
    /// Instantiation flags for every template (0, 1, 8 or 9) instead of the workload's own.
    #[arg(long, value_parser = parse_flags)]
    pub flags: Option<u64>,
    /// Tensor-parallel world size: write a rank set of N cores.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub tp: u32,
    /// Also write the outcome and metrics as JSON here.
    #[arg(long)]
    pub result: Option<PathBuf>,
    /// Say nothing of how far a long stage is (the snapshot).
    #[arg(long, short)]
    pub quiet: bool,
}

impl ExportArgs {
    pub fn options(&self) -> gnomon_cases::replay::ExportOptions {
        let at_cap = gnomon_cases::replay::ExportOptions::at_cap(self.cap);
        gnomon_cases::replay::ExportOptions { flags: self.flags, world: self.tp, ..at_cap }
    }
}

fn parse_flags(s: &str) -> Result<u64, String> {
    let value = s.parse::<u64>().map_err(|_| format!("`{s}` is not a number"))?;
    gnomon_format::flags::InstantiateFlags::new(value).map(|f| f.bits()).map_err(|e| e.to_string())
}

/// A byte size such as `64MiB`; a plain number is bytes (the format's one size parser).
fn parse_cap(s: &str) -> Result<u64, String> {
    gnomon_format::size::parse_size(s)
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline report.json (for example one under baselines/).
    pub base: PathBuf,
    /// The new report.json.
    pub new: PathBuf,
    /// Output format of the comparison.
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: OutputFormat,
    /// Noise threshold for metric changes, in percent [default: the metric policy's].
    #[arg(long, value_parser = parse_percent)]
    pub threshold: Option<f64>,
    /// A per-metric threshold, NAME=PERCENT (repeatable).
    #[arg(long = "metric-threshold", value_name = "NAME=PERCENT", value_parser = parse_metric_threshold)]
    pub metric_thresholds: Vec<(String, f64)>,
    /// Let cases of the baseline be absent from the new run (a run filtered on purpose);
    /// without it, an absent case fails the gate.
    #[arg(long)]
    pub allow_removed: bool,
    /// Let cases that passed in the baseline be skipped or blocked in the new run; without
    /// it, each fails the gate.
    #[arg(long)]
    pub allow_not_run: bool,
    /// The metric policy (TOML: direction, threshold and floor per metric) [default: the
    /// committed reports/metrics.toml].
    #[arg(long, value_name = "FILE")]
    pub metric_policy: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum OutputFormat {
    Markdown,
    Json,
}

fn parse_metric_threshold(s: &str) -> Result<(String, f64), String> {
    let (name, pct) = s.split_once('=').ok_or("expected NAME=PERCENT")?;
    Ok((name.to_owned(), parse_percent(pct)?))
}

/// A finite percentage ≥ 0: NaN or infinity would hide every change.
fn parse_percent(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(p),
        _ => Err(format!("`{s}` is not a finite percentage ≥ 0")),
    }
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// report.json files of the partitions.
    #[arg(required = true)]
    pub parts: Vec<PathBuf>,
    /// Directory for the merged report.
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct TrendArgs {
    /// report.json files, in any order (the page orders them by start time).
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// Directory for trend.html.
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// The report.json to summarise.
    pub report: PathBuf,
}
