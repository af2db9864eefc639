//! Turns the catalogue into libtest trials, so filters, `--list`, `--exact` and `--format`
//! behave as in any Rust test binary, and gathers each case's record into the report.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use gnomon_cases::{catalogue, expectations::Expectations, Batch, Case, CatalogueOptions, Isolation, Requirement};
use gnomon_reports::{exit_codes, CaseRecord, Environment, Partition, Run, Status, Subject};
use libtest_mimic::{Arguments, Completion, Failed, Trial};

use super::{
    console,
    executor::{execute, execute_batch, ChildSpec},
    signal,
    sink::ReportSink,
};
use crate::environment;

/// Where a run's cases come from.
pub enum CaseSource {
    /// The built-in catalogue (`gnomon run`), judging the reference exporter.
    Catalogue(CatalogueOptions),
    /// Cases made elsewhere, judging `subject` (`gnomon qualify`, judging a port).
    Given { cases: Vec<Case>, subject: Subject },
}

/// Everything one run needs; built by the CLI or by the `suite` test target.
pub struct RunConfig {
    pub source: CaseSource,
    pub libtest: Arguments,
    /// `None`: `reports/out/RUN-ID`.
    pub report_dir: Option<PathBuf>,
    pub require_arch: Option<String>,
    pub case_timeout: Duration,
    pub retries: u32,
    pub profile: String,
    /// The `gnomon` binary that runs isolated cases.
    pub child_exe: PathBuf,
    /// Run only this runner's share of the catalogue.
    pub partition: Option<Partition>,
    pub expectations: Expectations,
    /// Whether selecting no case is an error (`gnomon run`), or libtest's quiet success
    /// (`cargo test`, which hands every test binary the same filter).
    pub empty_selection_fails: bool,
    /// Whether a run without a usable GPU leaves undone what it was asked for (`gnomon
    /// qualify`): after its report is written it then exits with the precondition code,
    /// so a gate on the exit code never passes a port nothing qualified.
    pub needs_gpu: bool,
}

/// Runs the catalogue and returns the process exit code.
pub fn run(config: RunConfig) -> i32 {
    gnomon_core::progress::set_quiet(config.libtest.quiet);
    let (mut cases, subject) = match config.source {
        CaseSource::Catalogue(options) => (
            catalogue(options),
            Subject {
                name: "gnomon-core reference exporter".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                commit: environment::HARNESS_COMMIT.into(),
            },
        ),
        CaseSource::Given { cases, subject } => (cases, subject),
    };
    let mut left_out = Vec::new();
    if let Some(partition) = config.partition {
        let (mine, others): (Vec<Case>, Vec<Case>) = cases.into_iter().partition(|c| partition.contains(&c.id));
        left_out.extend(others.iter().map(Case::left_out));
        cases = mine;
    }
    let env = environment::collect();
    let facilities = environment::facilities(&env);
    // A case whose requirement is absent is ignored at list time, so `cargo test` and
    // nextest report it as skipped rather than passed.
    let planned: Vec<(Case, Option<String>)> = cases
        .into_iter()
        .map(|case| {
            let unmet = case.unmet(&facilities);
            (case, unmet)
        })
        .collect();
    if config.libtest.list {
        let trials = planned
            .iter()
            .map(|(c, unmet)| Trial::test(c.id.to_string(), || Ok(())).with_ignored_flag(unmet.is_some()));
        let _ = libtest_mimic::run(&config.libtest, trials.collect());
        return exit_codes::SUCCESS;
    }
    if let Some(reason) = arch_refusal(config.require_arch.as_deref(), &env) {
        eprintln!("gnomon: {reason}");
        return exit_codes::PRECONDITION;
    }
    let mut selected = Vec::new();
    let mut not_running = Vec::new();
    for (case, unmet) in planned {
        let stub = Trial::test(case.id.to_string(), || Ok(())).with_ignored_flag(unmet.is_some());
        if config.libtest.is_filtered_out(&stub) {
            left_out.push(case.left_out());
            continue;
        }
        if config.libtest.is_ignored(&stub) {
            // Said in the header; the trial records it, and libtest prints its reason.
            not_running.push(case.record(Status::Skipped, unmet.clone()));
        }
        selected.push((case, unmet));
    }
    let isolated = selected.iter().filter(|(c, u)| u.is_none() && c.isolation == Isolation::ChildProcess).count();
    if selected.is_empty() && config.empty_selection_fails {
        eprintln!("gnomon: no case matches {}", describe_filters(&config.libtest));
        return exit_codes::USAGE;
    }
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let run_id = format!("{}-{}", started_at.replace([':', '-'], ""), std::process::id());
    let dir = config.report_dir.clone().unwrap_or_else(|| PathBuf::from("reports/out").join(&run_id));
    let run = Run {
        id: run_id,
        started_at,
        profile: config.profile.clone(),
        filters: filters(&config.libtest),
        partition: config.partition.map(|p| p.to_string()),
        left_out,
        ..Run::default()
    };
    let left_out = gnomon_reports::left_out(&run.left_out);
    let sink = Arc::new(ReportSink::new(dir.clone(), run, subject, env.clone()));
    signal::install();
    if let Err(e) = sink.start() {
        eprintln!("gnomon: {e}");
        return exit_codes::USAGE;
    }
    console::header(&env, &dir, &not_running, left_out.as_deref());
    let scratch_problem = environment::scratch_problem();
    if let Some(problem) = &scratch_problem {
        eprintln!("gnomon: {problem}; cases that need scratch will be blocked, and the run fails (exit 3)");
    }
    let policy = Arc::new(Policy {
        batches: BatchRecords::default(),
        child: ChildSpec { exe: config.child_exe.clone(), timeout: config.case_timeout, relay: !config.libtest.quiet },
        retries: config.retries,
        gpu: Mutex::new(()),
        expectations: config.expectations,
        env,
        progress: console::Progress::new(isolated),
    });
    // A case whose requirement is absent runs as a trial that records its skip, so that
    // libtest's line says why ("ignored (skipped: needs a CUDA GPU: …)"); only a listing
    // marks it ignored, for nextest.
    let trials = selected.into_iter().map(|(case, unmet)| trial(case, unmet, Arc::clone(&policy), Arc::clone(&sink)));
    let conclusion = libtest_mimic::run(&config.libtest, trials.collect());
    let complete = !signal::cancelled();
    match sink.finish(complete, |records| policy.expectations.problems(records, &policy.env)) {
        Ok(report) => {
            console::closing(&report, &dir);
            if !complete {
                eprintln!("gnomon: cancelled: the report covers the {} cases that finished", report.cases.len());
                return exit_codes::CASES_FAILED;
            }
            if report.fails_run() || conclusion.has_failed() {
                return exit_codes::CASES_FAILED;
            }
            if config.needs_gpu && policy.env.gpus.is_empty() {
                let why = policy.env.gpu_unavailable.as_deref().unwrap_or("none was found");
                eprintln!(
                    "gnomon: nothing was qualified: no usable GPU ({}); only what needs none was judged \
                     (--allow-no-gpu accepts that)",
                    gnomon_reports::text::printable(why)
                );
                return exit_codes::PRECONDITION;
            }
            let blocked = report.totals.get(&Status::Blocked).copied().unwrap_or(0);
            if let Some(problem) = scratch_problem.filter(|_| blocked > 0) {
                eprintln!("gnomon: {blocked} cases blocked on this machine: {problem}");
                return exit_codes::PRECONDITION;
            }
            exit_codes::SUCCESS
        }
        Err(e) => {
            eprintln!("gnomon: could not write the report to {}: {e}", dir.display());
            exit_codes::CASES_FAILED
        }
    }
}

/// The records of each batch run so far: the first case of a batch to come runs it, the
/// others take their records. Batches are not retried: a port's verdict must not need it.
#[derive(Default)]
struct BatchRecords(Mutex<HashMap<usize, Option<Vec<CaseRecord>>>>);

impl BatchRecords {
    fn record_of(&self, case: &Case, batch: &Arc<Batch>, child: &ChildSpec) -> Option<CaseRecord> {
        let mut done = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let records = done.entry(Arc::as_ptr(batch) as usize).or_insert_with(|| execute_batch(batch, child));
        let records = records.as_ref()?;
        let mine = records.iter().find(|r| r.id == case.id).cloned();
        Some(mine.unwrap_or_else(|| case.record(Status::Crashed, Some("its batch gave no record for it".into()))))
    }
}

struct Policy {
    batches: BatchRecords,
    child: ChildSpec,
    retries: u32,
    /// Held while a GPU case runs: GPU cases measure device memory and time, which other
    /// processes on the same device would disturb, so they run one at a time.
    gpu: Mutex<()>,
    expectations: Expectations,
    env: Environment,
    progress: console::Progress,
}

fn trial(case: Case, unmet: Option<String>, policy: Arc<Policy>, sink: Arc<ReportSink>) -> Trial {
    Trial::ignorable_test(case.id.to_string(), move || {
        let cancelled = || Ok(Completion::ignored_with("cancelled"));
        if signal::cancelled() {
            return cancelled();
        }
        let record = match unmet {
            Some(reason) => Some(case.record(Status::Skipped, Some(reason))),
            None if case.isolation == Isolation::InProcess => attempt(&case, &policy),
            None => {
                let gpu_case = case.requires != Requirement::Nothing;
                let _one_gpu_case_at_a_time = gpu_case.then(|| policy.gpu.lock().unwrap_or_else(|e| e.into_inner()));
                policy.progress.start(case.id.as_str());
                let record = match &case.batch {
                    Some(batch) => policy.batches.record_of(&case, batch, &policy.child),
                    None => attempt(&case, &policy),
                };
                policy.progress.clear();
                record
            }
        };
        let Some(mut record) = record else { return cancelled() };
        policy.expectations.apply(&mut record, &policy.env);
        let outcome = outcome(&record);
        sink.add(record);
        outcome
    })
}

/// Runs a case, retrying failures; a case that passes after failing is flaky. `None`
/// when the run was cancelled before the case had a result.
fn attempt(case: &Case, policy: &Policy) -> Option<CaseRecord> {
    let first = execute(case, &policy.child)?;
    let mut last = first.clone();
    for attempt in 2..=policy.retries + 1 {
        if !last.status.fails_run() {
            break;
        }
        last = execute(case, &policy.child)?;
        last.attempts = attempt;
        if last.status == Status::Passed {
            last.status = Status::Flaky;
            last.reason = Some(format!(
                "passed on attempt {attempt}; first attempt {}: {}",
                first.status,
                first.reason.clone().unwrap_or_default()
            ));
        }
    }
    Some(last)
}

fn outcome(record: &CaseRecord) -> Result<Completion, Failed> {
    let reason = record.reason.as_deref().unwrap_or("");
    match record.status {
        Status::Passed | Status::Flaky | Status::ExpectedFailure => Ok(Completion::Completed),
        Status::Skipped | Status::Blocked => Ok(Completion::ignored_with(format!("{}: {reason}", record.status))),
        status => {
            let stderr = record.stderr.as_deref().map(|s| format!("\n--- child output ---\n{s}")).unwrap_or_default();
            Err(format!("{status}: {reason}{stderr}").into())
        }
    }
}

fn describe_filters(args: &Arguments) -> String {
    let filters = filters(args);
    if filters.is_empty() {
        "(no filter: the catalogue is empty for this partition)".into()
    } else {
        filters.join(" ")
    }
}

/// The selection as the report records it: the filter, each `--skip`, and `--exact`.
fn filters(args: &Arguments) -> Vec<String> {
    let skips = args.skip.iter().map(|s| format!("--skip {s}"));
    let exact = args.exact.then(|| "--exact".to_owned());
    args.filter.iter().cloned().chain(skips).chain(exact).collect()
}

/// The selection a report's recorded filters make, read back as libtest reads them.
pub fn selection_of(filters: &[String]) -> Arguments {
    let mut args = Arguments::default();
    for f in filters {
        match f.strip_prefix("--skip ") {
            Some(skip) => args.skip.push(skip.to_owned()),
            None if f == "--exact" => args.exact = true,
            None => args.filter = Some(f.clone()),
        }
    }
    args
}

/// Why `--require-arch` refuses this machine, if it does.
fn arch_refusal(required: Option<&str>, env: &Environment) -> Option<String> {
    let required = required?;
    if env.gpus.iter().any(|g| g.arch == required) {
        return None;
    }
    let found: Vec<_> = env.gpus.iter().map(gnomon_reports::Gpu::label).collect();
    Some(match (found.is_empty(), &env.gpu_unavailable) {
        (true, Some(reason)) => format!("--require-arch {required}: no GPU ({reason})"),
        _ => format!(
            "--require-arch {required}: found {}",
            if found.is_empty() { "no GPU".into() } else { found.join(", ") }
        ),
    })
}
