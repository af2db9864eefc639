//! The native side: replay a core and judge what it produced, bitwise against the
//! exported expectations and within tolerance against the CPU reference the core names.
//! Also the bodies of `gnomon replay` and the hidden `gnomon __export`.

use std::{path::Path, time::Instant};

use gnomon_core::{
    cuda::{Context, CudaError},
    errors::ReplayError,
    format::Core,
    replay::{replay, Executables, ReplayReport},
    shards::MIB,
};
use gnomon_fixtures::{
    reference::{from_bytes, max_scaled_diff},
    workloads::{by_name, Contents},
};
use gnomon_reports::{exit_codes, Status};
use serde::{Deserialize, Serialize};

use super::pipeline::{export, Handover};
use crate::{measured, Metrics, Verdict};

/// What a helper process (export or replay) reports to the case that started it.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct StepOutcome {
    pub status: Option<Status>,
    pub reason: Option<String>,
    pub metrics: Metrics,
}

impl StepOutcome {
    fn new(result: Result<Metrics, Verdict>) -> Self {
        let mut outcome = Self::default();
        match result {
            Ok(metrics) => {
                outcome.status = Some(Status::Passed);
                outcome.metrics = metrics;
            }
            Err(verdict) => {
                let (status, reason) = verdict.into_status();
                (outcome.status, outcome.reason) = (Some(status), Some(reason));
            }
        }
        outcome
    }

    /// Back into a verdict, keeping the metrics in `into`.
    pub fn into_result(self, into: &mut Metrics) -> Result<(), Verdict> {
        into.extend(self.metrics);
        match self.status {
            Some(Status::Passed) => Ok(()),
            Some(Status::Blocked) => Err(Verdict::Blocked(self.reason.unwrap_or_default())),
            _ => Err(Verdict::Failed(self.reason.unwrap_or_else(|| "the helper process reported nothing".into()))),
        }
    }

    fn exit_code(&self) -> i32 {
        match self.status {
            Some(Status::Passed) => exit_codes::SUCCESS,
            Some(Status::Blocked) => exit_codes::PRECONDITION,
            _ => exit_codes::CASES_FAILED,
        }
    }
}

/// Replays a core that was validated by `Core::open` and judges its outputs.
pub fn replay_and_check(core: &Core, ctx: &Context, executables: Executables) -> Result<Metrics, Verdict> {
    let report = replay(core, ctx, executables).map_err(|e| match e {
        ReplayError::Cuda(e @ CudaError::AddressNotHonoured { .. }) => Verdict::Blocked(e.to_string()),
        other => Verdict::Failed(format!("replay: {other}")),
    })?;
    let mut metrics = stage_metrics(&report);
    metrics.extend([measured("reference-max-scaled-diff", check(core, &report)? as f64, "1")]);
    Ok(metrics)
}

fn stage_metrics(report: &ReplayReport) -> Metrics {
    let restore: f64 = report.stages.iter().filter(|(name, _)| *name != "first-launch").map(|(_, s)| s).sum();
    let mut metrics: Metrics =
        report.stages.iter().map(|(name, s)| measured(&format!("restore-{name}-s"), *s, "s")).collect();
    metrics.extend([measured("restore-total-s", restore, "s")]);
    metrics
}

/// Bitwise against the expectations, then within tolerance against the CPU reference.
fn check(core: &Core, report: &ReplayReport) -> Result<f32, Verdict> {
    let m = core.manifest();
    if let Some(bad) = report.outputs.iter().find(|o| !o.matches()) {
        return Err(Verdict::Failed(format!(
            "template `{}` output `{}` has SHA-256 {}, the original run's was {}",
            bad.template, bad.buffer, bad.actual_sha256, bad.expected_sha256
        )));
    }
    let contents = |name: &str| {
        let b = m.buffers.iter().find(|b| b.name == name).expect("reference reads a known buffer");
        report.initial_bytes(b.offset, b.size)
    };
    let mut worst = 0.0f32;
    for e in &m.expectations {
        let Some(workload) = e.reference.as_deref().and_then(by_name) else {
            continue;
        };
        for (buffer, expected) in workload.reference(&e.template, &Contents(&contents)) {
            let got = report.outputs.iter().find(|o| o.template == e.template && o.buffer == buffer);
            let got = got.ok_or_else(|| Verdict::Failed(format!("no output `{buffer}` for `{}`", e.template)))?;
            let diff = max_scaled_diff(&from_bytes(&got.bytes), &expected).unwrap_or(f32::INFINITY);
            if diff as f64 > e.tolerance.unwrap_or(0.0) {
                return Err(Verdict::Failed(format!(
                    "template `{}` output `{buffer}` differs from the CPU reference by {diff}",
                    e.template
                )));
            }
            worst = worst.max(diff);
        }
    }
    Ok(worst)
}

/// `gnomon replay CORE_DIR`: validate, replay on device 0, judge; the outcome goes to
/// `result` as JSON when given, and to standard error in words.
pub fn replay_command(dir: &Path, result: Option<&Path>) -> i32 {
    let outcome = StepOutcome::new(open_and_replay(dir));
    finish(outcome, result, &format!("replay {}", dir.display()))
}

fn open_and_replay(dir: &Path) -> Result<Metrics, Verdict> {
    let (core, mut metrics) = open_timed(dir)?;
    let ctx = Context::new(0).map_err(|e| Verdict::Blocked(format!("open device 0: {e}")))?;
    metrics.extend(replay_and_check(&core, &ctx, Executables::Rebuild)?);
    Ok(metrics)
}

/// Opens (reads and validates) a core; the time it took is the `restore-read-s` stage.
pub fn open_timed(dir: &Path) -> Result<(Core, Metrics), Verdict> {
    let started = Instant::now();
    let core = Core::open(dir).map_err(|e| Verdict::Failed(format!("core refused: {e}")))?;
    Ok((core, Metrics::from([measured("restore-read-s", started.elapsed().as_secs_f64(), "s")])))
}

/// `gnomon __export WORKLOAD --cap BYTES --dir DIR`: the exporting process of the
/// process-exit handover. It writes the core and exits.
pub fn export_command(workload: &str, cap: u64, dir: &Path, result: Option<&Path>) -> i32 {
    let exported = match by_name(workload) {
        Some(w) => export(w, cap, dir, Handover::Exit).map(|e| e.metrics),
        None => Err(Verdict::Failed(format!("no workload `{workload}`"))),
    };
    finish(StepOutcome::new(exported), result, &format!("export `{workload}` at cap {} MiB", cap / MIB))
}

fn finish(outcome: StepOutcome, result: Option<&Path>, what: &str) -> i32 {
    eprintln!("gnomon: {what}: {}", outcome.reason.as_deref().unwrap_or("passed"));
    if let Some(path) = result {
        let json = serde_json::to_vec_pretty(&outcome).expect("an outcome always serializes");
        if let Err(e) = gnomon_reports::write_atomically(path, &json) {
            eprintln!("gnomon: could not write {}: {e}", path.display());
            return exit_codes::USAGE;
        }
    }
    outcome.exit_code()
}
