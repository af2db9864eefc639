//! Runs one case: in this process, or in a child `gnomon __run-case` with a time limit.
//! A child that crashes, hangs or leaves a sticky CUDA error fails its case alone.

use std::{
    fs,
    io::{Read, Seek, SeekFrom},
    os::unix::process::CommandExt,
    path::Path,
    process::{Command, Stdio},
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use gnomon_cases::{catalogue, Batch, Case, CatalogueOptions, Isolation};
use gnomon_reports::{exit_codes, CaseRecord, Status};
use nix::sys::signal::Signal;
use wait_timeout::ChildExt;

use super::{console, relay::ProgressFile, signal};

/// Bytes of a child's output kept in the report: the start (where a panic message is)
/// and the end (where the last words are).
const OUTPUT_HEAD: u64 = 4 * 1024;
const OUTPUT_TAIL: u64 = 4 * 1024;

/// Where a child case runs and how long it may take.
#[derive(Clone, Debug)]
pub struct ChildSpec {
    pub exe: std::path::PathBuf,
    pub timeout: Duration,
    /// Whether a child's progress lines are said while it runs (not with `--quiet`).
    pub relay: bool,
}

/// Runs `case`; `None` when the run was cancelled before the case had a result.
pub fn execute(case: &Case, child: &ChildSpec) -> Option<CaseRecord> {
    match case.isolation {
        Isolation::InProcess => Some(case.execute()),
        Isolation::ChildProcess => in_child(case, child),
    }
}

fn in_child(case: &Case, spec: &ChildSpec) -> Option<CaseRecord> {
    let started = Instant::now();
    let args = ["__run-case", case.id.as_str()].map(String::from);
    match run_together(&[args.to_vec()], spec).remove(0) {
        ChildEnd::Cancelled => None,
        ChildEnd::Wrote(text) => {
            Some(serde_json::from_str::<CaseRecord>(&text).unwrap_or_else(|e| {
                case.record(Status::Crashed, Some(format!("the child's record does not parse: {e}")))
            }))
        }
        ChildEnd::Without { status, reason, output } => {
            let mut record = case.record(status, Some(reason));
            (record.stderr, record.duration_s) = (output, started.elapsed().as_secs_f64());
            Some(record)
        }
    }
}

/// Runs a batch: its children at once, then its combined records. Each case of a child
/// that gave no records gets the child's end (crashed, timed out, blocked) as its own.
/// `None` when the run was cancelled.
pub fn execute_batch(batch: &Batch, spec: &ChildSpec) -> Option<Vec<CaseRecord>> {
    let args: Vec<Vec<String>> = batch.children.iter().map(|c| c.args.clone()).collect();
    let mut records = Vec::new();
    for (child, ended) in batch.children.iter().zip(run_together(&args, spec)) {
        match ended {
            ChildEnd::Cancelled => return None,
            ChildEnd::Wrote(text) => match serde_json::from_str::<Vec<CaseRecord>>(&text) {
                Ok(written) => records.extend(written),
                Err(e) => {
                    records.extend(child.records(Status::Crashed, &format!("its records do not parse: {e}"), None))
                }
            },
            ChildEnd::Without { status, reason, output } => records.extend(child.records(status, &reason, output)),
        }
    }
    let combined = (batch.combine)(&records);
    records.extend(combined);
    Some(records)
}

/// How a child process ended.
enum ChildEnd {
    Cancelled,
    /// It exited 0 and wrote this to its result file.
    Wrote(String),
    /// It crashed, hung, or could not start; with the end of its output.
    Without {
        status: Status,
        reason: String,
        output: Option<String>,
    },
}

/// How often a waiting runner looks for a cancellation.
const POLL: Duration = Duration::from_millis(100);

/// A started child: its process group, where it writes its result, its output and its
/// progress.
struct Running {
    child: std::process::Child,
    group: signal::Group,
    result_file: tempfile::NamedTempFile,
    output: fs::File,
    progress: ProgressFile,
    ended: Option<ChildEnd>,
}

impl Running {
    /// Says the progress lines the child added since the last look.
    fn relay(&mut self, spec: &ChildSpec) {
        let lines = self.progress.new_lines();
        if spec.relay {
            lines.iter().for_each(|line| console::relay(line));
        }
    }
}

/// Starts `gnomon ARGS --result-file FILE` for each entry at once and waits for all,
/// under one time limit. Each child runs in a process group of its own, so a timeout or
/// a cancel ends it with every helper it started (an exporter, a replayer).
fn run_together(args: &[Vec<String>], spec: &ChildSpec) -> Vec<ChildEnd> {
    let deadline = Instant::now() + spec.timeout;
    let mut running: Vec<Result<Running, ChildEnd>> = args.iter().map(|a| start(a, spec)).collect();
    while running.iter().any(|r| matches!(r, Ok(Running { ended: None, .. }))) {
        let cancelled = signal::cancelled();
        let late = Instant::now() >= deadline;
        for r in running.iter_mut().flatten().filter(|r| r.ended.is_none()) {
            let waited = r.child.wait_timeout(POLL / args.len() as u32);
            r.relay(spec);
            if let Ok(Some(status)) = waited {
                r.ended = Some(finished(r, status));
            } else if cancelled {
                end(&mut r.child, &r.group);
                r.ended = Some(ChildEnd::Cancelled);
            } else if late {
                end(&mut r.child, &r.group);
                let reason = format!("no result within {}", humantime::format_duration(spec.timeout));
                let output = Some(head_and_tail(&mut r.output));
                r.ended = Some(ChildEnd::Without { status: Status::TimedOut, reason, output });
            }
        }
    }
    running
        .into_iter()
        .map(|r| r.map_or_else(|not_started| not_started, |r| r.ended.expect("every child ended")))
        .collect()
}

fn start(args: &[String], spec: &ChildSpec) -> Result<Running, ChildEnd> {
    let blocked = |what: &str, e: std::io::Error| ChildEnd::Without {
        status: Status::Blocked,
        reason: format!("{what}: {e}"),
        output: None,
    };
    let result_file = tempfile::NamedTempFile::new().map_err(|e| blocked("no result file", e))?;
    let output = tempfile::tempfile().map_err(|e| blocked("no output file", e))?;
    let progress = ProgressFile::new().map_err(|e| blocked("no progress file", e))?;
    let (stdout, stderr) = match (output.try_clone(), output.try_clone()) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return Err(blocked("no output file", e)),
    };
    let child = Command::new(&spec.exe)
        .args(args)
        .arg("--result-file")
        .arg(result_file.path())
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .env(gnomon_core::progress::RELAY_FILE_ENV, progress.path())
        .process_group(0)
        .spawn()
        .map_err(|e| blocked(&format!("could not start {}", spec.exe.display()), e))?;
    let group = signal::Group::register(child.id());
    Ok(Running { child, group, result_file, output, progress, ended: None })
}

fn finished(r: &mut Running, status: std::process::ExitStatus) -> ChildEnd {
    match fs::read_to_string(r.result_file.path()) {
        Ok(text) if status.success() && !text.is_empty() => ChildEnd::Wrote(text),
        _ => ChildEnd::Without {
            status: Status::Crashed,
            reason: format!("child process ended without a result: {}", describe_exit(status)),
            output: Some(head_and_tail(&mut r.output)),
        },
    }
}

/// Ends a child's whole process group: SIGTERM, a grace period, then SIGKILL.
fn end(child: &mut std::process::Child, group: &signal::Group) {
    group.signal(Signal::SIGTERM);
    if !matches!(child.wait_timeout(signal::GRACE), Ok(Some(_))) {
        group.signal(Signal::SIGKILL);
        let _ = child.kill();
        let _ = child.wait();
    }
    // Helpers of the group may outlive the child by a moment; make sure none stays.
    group.signal(Signal::SIGKILL);
}

fn head_and_tail(file: &mut fs::File) -> String {
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut read_at = |start: u64, limit: u64| {
        let mut bytes = Vec::new();
        let _ = file.seek(SeekFrom::Start(start)).and_then(|_| file.take(limit).read_to_end(&mut bytes));
        String::from_utf8_lossy(&bytes).into_owned()
    };
    if len <= OUTPUT_HEAD + OUTPUT_TAIL {
        return read_at(0, len);
    }
    let skipped = len - OUTPUT_HEAD - OUTPUT_TAIL;
    format!("{}\n[… {skipped} bytes …]\n{}", read_at(0, OUTPUT_HEAD), read_at(len - OUTPUT_TAIL, OUTPUT_TAIL))
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (_, Some(signal)) => format!("killed by signal {signal}"),
        (Some(code), _) => format!("exit code {code}"),
        _ => status.to_string(),
    }
}

/// Set once a case has run in this process; a second would share CUDA state with it.
static CASE_RAN: AtomicBool = AtomicBool::new(false);

/// The child side: runs exactly one case and writes its record to `result_file`.
pub fn child_main(id: &str, result_file: &Path) -> i32 {
    if CASE_RAN.swap(true, Ordering::SeqCst) {
        eprintln!("gnomon: two cases in one process; isolation is broken");
        std::process::abort();
    }
    let cases = catalogue(CatalogueOptions { include_mock: true, include_faults: true, include_nightly: true });
    let Some(case) = cases.iter().find(|c| c.id.as_str() == id) else {
        eprintln!("gnomon: no case with id `{id}`");
        return exit_codes::USAGE;
    };
    let record = case.execute();
    let json = serde_json::to_string(&record).expect("a case record always serializes");
    match gnomon_reports::write_atomically(result_file, json.as_bytes()) {
        Ok(()) => exit_codes::SUCCESS,
        Err(e) => {
            eprintln!("gnomon: could not write {}: {e}", result_file.display());
            exit_codes::USAGE
        }
    }
}
