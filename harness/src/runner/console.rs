//! What a person sees around libtest's own lines: a header before the first case (machine,
//! GPUs, driver, where the report goes, what will be skipped and why), a progress line
//! for isolated cases when standard error is a terminal, and a closing line in the
//! report's own status words. All of it goes to standard error, so `--format json` and
//! `--list` keep a clean standard output.

use std::{
    io::{IsTerminal, Write},
    path::Path,
    sync::atomic::{AtomicUsize, Ordering},
};

use gnomon_reports::{text::printable, CaseRecord, Environment, Report};

/// `left_out` counts the cases the selection left out (libtest's own line says "0
/// filtered out": the runner hands it only the cases selected).
pub fn header(env: &Environment, report_dir: &Path, skipped: &[CaseRecord], left_out: Option<&str>) {
    let mut lines = vec![format!(
        "gnomon {} (commit {}) on {}: {}, {}",
        env.harness_version, env.harness_commit, env.host, env.cpu, env.os
    )];
    for gpu in &env.gpus {
        lines.push(format!("  GPU {}: {} ({}, {:.1} GiB)", gpu.index, gpu.name, gpu.arch, gib(gpu.memory_bytes)));
    }
    match (&env.driver_release, &env.driver_version, &env.gpu_unavailable) {
        (_, _, Some(reason)) => lines.push(format!("  no GPU: {reason}")),
        (release, api, None) => lines.push(format!(
            "  driver {} (CUDA {}), NVRTC {}",
            release.as_deref().unwrap_or("release unknown"),
            api.as_deref().unwrap_or("unknown"),
            env.nvrtc_version.as_deref().unwrap_or("unknown")
        )),
    }
    lines.extend(shared(env).map(|s| format!("  {s}")));
    lines.push(format!("  report: {}", report_dir.display()));
    lines.extend(
        left_out.map(|left| format!("  left out by the selection: {left}; claims resting on them are not established")),
    );
    for group in gnomon_reports::not_run(skipped) {
        lines.push(format!("  {}: {}", group.who(), group.reason));
    }
    // Each line is one of gnomon's: a newline or an escape inside a name is written out.
    let lines: Vec<_> = lines.iter().map(|l| printable(l)).collect();
    eprintln!("{}", lines.join("\n"));
}

/// `gnomon: 103 passed, 43 skipped; report in DIR`, then each group of cases not run.
pub fn closing(report: &Report, report_dir: &Path) {
    let totals: Vec<_> = report.totals.iter().map(|(status, n)| format!("{n} {status}")).collect();
    let totals = if totals.is_empty() { "no case selected".to_owned() } else { totals.join(", ") };
    eprintln!("gnomon: {totals}; report in {}", report_dir.display());
    for group in gnomon_reports::not_run(&report.cases) {
        eprintln!("gnomon: {}: {}", group.who(), printable(group.reason));
    }
    if let Some(shared) = shared(&report.environment) {
        eprintln!("gnomon: {}", printable(&shared));
    }
    for problem in &report.expectation_problems {
        eprintln!("gnomon: expectations: {}", printable(problem));
    }
}

/// What the console says of other processes on the GPU, if there were any.
fn shared(env: &Environment) -> Option<String> {
    (!env.gpu_processes.is_empty()).then(|| {
        format!(
            "the GPU is shared with {}: a verdict reached beside another process may differ from one reached alone",
            gnomon_reports::shared_with(&env.gpu_processes)
        )
    })
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// A progress line of a running child: in place of the running case's line on a
/// terminal, a line of its own otherwise.
pub fn relay(line: &str) {
    let line = printable(line);
    let mut err = std::io::stderr().lock();
    let _ = match err.is_terminal() {
        true => write!(err, "\r\x1b[2K{line}").and_then(|()| err.flush()),
        false => writeln!(err, "{line}"),
    };
}

/// A line on a terminal that says which isolated case is running and how far the family
/// has come; nothing at all when standard error is a file or a pipe.
pub struct Progress {
    total: usize,
    started: AtomicUsize,
    live: bool,
}

impl Progress {
    pub fn new(total: usize) -> Self {
        Self { total, started: AtomicUsize::new(0), live: std::io::stderr().is_terminal() }
    }

    /// Shows `[k/N] id` until [`Progress::clear`].
    pub fn start(&self, id: &str) {
        let k = self.started.fetch_add(1, Ordering::SeqCst) + 1;
        if self.live {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K[{k}/{}] running {id}", self.total);
            let _ = err.flush();
        }
    }

    pub fn clear(&self) {
        if self.live {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
        }
    }
}
