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

use gnomon_cases::{catalogue, Case, CatalogueOptions, Isolation};
use gnomon_reports::{exit_codes, CaseRecord, Status};
use nix::sys::signal::Signal;
use wait_timeout::ChildExt;

use super::signal;

/// Bytes of a child's output kept in the report: the start (where a panic message is)
/// and the end (where the last words are).
const OUTPUT_HEAD: u64 = 4 * 1024;
const OUTPUT_TAIL: u64 = 4 * 1024;

/// Where a child case runs and how long it may take.
#[derive(Clone, Debug)]
pub struct ChildSpec {
    pub exe: std::path::PathBuf,
    pub timeout: Duration,
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
    match spawn_and_wait(case, spec) {
        Ok(record) => Some(record),
        Err(Ended::Cancelled) => None,
        Err(Ended::Without(mut record)) => {
            record.duration_s = started.elapsed().as_secs_f64();
            Some(*record)
        }
    }
}

/// Why a child gave no record of its own.
enum Ended {
    Cancelled,
    /// A record made here: the child crashed, hung, or could not start.
    Without(Box<CaseRecord>),
}

/// How often a waiting runner looks for a cancellation.
const POLL: Duration = Duration::from_millis(100);

/// `Ok` holds the child's own record. The child runs in a process group of its own, so a
/// timeout or a cancel ends it with every helper it started (an exporter, a replayer).
fn spawn_and_wait(case: &Case, spec: &ChildSpec) -> Result<CaseRecord, Ended> {
    let blocked = |what: &str, e: std::io::Error| {
        Ended::Without(Box::new(case.record(Status::Blocked, Some(format!("{what}: {e}")))))
    };
    let result_file = tempfile::NamedTempFile::new().map_err(|e| blocked("no result file", e))?;
    let mut output = tempfile::tempfile().map_err(|e| blocked("no output file", e))?;
    let output_for_stdout = output.try_clone().map_err(|e| blocked("no output file", e))?;
    let mut child = Command::new(&spec.exe)
        .arg("__run-case")
        .arg(case.id.as_str())
        .arg("--result-file")
        .arg(result_file.path())
        .stdin(Stdio::null())
        .stdout(output_for_stdout)
        .stderr(output.try_clone().map_err(|e| blocked("no output file", e))?)
        .process_group(0)
        .spawn()
        .map_err(|e| blocked(&format!("could not start {}", spec.exe.display()), e))?;
    let group = signal::Group::register(child.id());
    let deadline = Instant::now() + spec.timeout;
    let status = loop {
        if let Ok(Some(status)) = child.wait_timeout(POLL) {
            break status;
        }
        if signal::cancelled() {
            end(&mut child, &group);
            return Err(Ended::Cancelled);
        }
        if Instant::now() >= deadline {
            end(&mut child, &group);
            let reason = format!("no result within {}", humantime::format_duration(spec.timeout));
            return Err(Ended::Without(with_output(case.record(Status::TimedOut, Some(reason)), &mut output)));
        }
    };
    drop(group);
    let parsed = fs::read_to_string(result_file.path()).ok().and_then(|t| serde_json::from_str::<CaseRecord>(&t).ok());
    match parsed {
        Some(record) if status.success() => Ok(record),
        _ => {
            let reason = format!("child process ended without a result: {}", describe_exit(status));
            Err(Ended::Without(with_output(case.record(Status::Crashed, Some(reason)), &mut output)))
        }
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

fn with_output(mut record: CaseRecord, output: &mut fs::File) -> Box<CaseRecord> {
    record.stderr = Some(head_and_tail(output));
    Box::new(record)
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
