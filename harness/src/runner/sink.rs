//! Holds the records of a run and keeps `report.json` on disk current: rewritten
//! atomically at most once per [`KEEP_CURRENT_EVERY`] (so a run of any number of cases
//! costs time linear in them), and whole at the end, so a run that dies part-way still
//! leaves what it did. A lock on the report directory keeps two runs from writing one.

use std::{
    fs::{File, TryLockError},
    path::{Path, PathBuf},
    sync::Mutex,
    time::{Duration, Instant},
};

use gnomon_reports::{render, CaseRecord, Environment, Report, Run, Subject};

/// How stale `report.json` may be while a run goes on.
pub const KEEP_CURRENT_EVERY: Duration = Duration::from_secs(1);
const LOCK_FILE: &str = ".gnomon-run.lock";

pub struct ReportSink {
    dir: PathBuf,
    started: Instant,
    run: Run,
    subject: Subject,
    environment: Environment,
    state: Mutex<State>,
}

struct State {
    records: Vec<CaseRecord>,
    written: Option<Instant>,
    writes: usize,
    lock: Option<File>,
}

impl ReportSink {
    pub fn new(dir: PathBuf, run: Run, subject: Subject, environment: Environment) -> Self {
        let state = State { records: Vec::new(), written: None, writes: 0, lock: None };
        Self { dir, started: Instant::now(), run, subject, environment, state: Mutex::new(state) }
    }

    /// Takes the report directory for this run and writes the report with no case yet, so
    /// an unwritable directory, or one another run is writing, is found before the first
    /// case runs, and a run that dies at once still leaves a report.
    pub fn start(&self) -> Result<(), String> {
        let lock = lock(&self.dir)?;
        let mut state = self.state();
        state.lock = Some(lock);
        self.write_current(&mut state).map_err(|e| format!("cannot write the report to {}: {e}", self.dir.display()))
    }

    pub fn add(&self, record: CaseRecord) {
        self.add_all([record]);
    }

    /// Adds records; `report.json` is rewritten if it is older than [`KEEP_CURRENT_EVERY`].
    pub fn add_all(&self, records: impl IntoIterator<Item = CaseRecord>) {
        let mut state = self.state();
        state.records.extend(records);
        if state.written.is_none_or(|at| at.elapsed() >= KEEP_CURRENT_EVERY) {
            if let Err(e) = self.write_current(&mut state) {
                eprintln!("gnomon: could not update {}: {e}", self.dir.display());
            }
        }
    }

    /// Writes the final report (`complete` unless the run was cancelled), with the
    /// expectation problems `problems` finds in its records, and its renderings; then
    /// gives the report directory up.
    pub fn finish(
        &self,
        complete: bool,
        problems: impl FnOnce(&[CaseRecord]) -> Vec<String>,
    ) -> std::io::Result<Report> {
        let mut state = self.state();
        let mut report = self.report(state.records.clone(), complete);
        report.expectation_problems = problems(&report.cases);
        if !report.environment.gpus.is_empty() {
            crate::environment::add_gpu_processes(&mut report.environment);
        }
        render::write_all(&report, &self.dir)?;
        if state.lock.take().is_some() {
            let _ = std::fs::remove_file(self.dir.join(LOCK_FILE));
        }
        Ok(report)
    }

    /// How often `report.json` was written so far.
    #[cfg(test)]
    fn writes(&self) -> usize {
        self.state().writes
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write_current(&self, state: &mut State) -> std::io::Result<()> {
        let partial = self.report(state.records.clone(), false);
        gnomon_reports::write_atomically(&self.dir.join("report.json"), partial.to_json().as_bytes())?;
        (state.written, state.writes) = (Some(Instant::now()), state.writes + 1);
        Ok(())
    }

    fn report(&self, records: Vec<CaseRecord>, complete: bool) -> Report {
        let run = Run { duration_s: self.started.elapsed().as_secs_f64(), complete, ..self.run.clone() };
        Report::new(run, self.subject.clone(), self.environment.clone(), records)
    }
}

/// An exclusive lock on `DIR/.gnomon-run.lock`, held while the run lives; the kernel
/// releases it if gnomon dies, so a stale file never blocks a later run.
fn lock(dir: &Path) -> Result<File, String> {
    let path = dir.join(LOCK_FILE);
    let file = std::fs::create_dir_all(dir)
        .and_then(|()| File::options().create(true).truncate(false).write(true).open(&path))
        .map_err(|e| format!("cannot write the report to {}: {e}", dir.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(format!(
            "the report directory {} is in use by another gnomon run; give each run its own --report-dir",
            dir.display()
        )),
        Err(TryLockError::Error(e)) => Err(format!("cannot lock {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink(dir: &Path) -> ReportSink {
        ReportSink::new(dir.to_owned(), Run::default(), Subject::default(), Environment::default())
    }

    fn record(i: usize) -> CaseRecord {
        let id = format!("cpu/n={i}");
        CaseRecord {
            id: gnomon_reports::CaseId::new(&id),
            family: "cpu".into(),
            parameters: Default::default(),
            status: gnomon_reports::Status::Passed,
            reason: None,
            attempts: 1,
            duration_s: 0.0,
            metrics: Default::default(),
            claims: Vec::new(),
            stderr: None,
        }
    }

    /// Rewriting the whole report after each of N cases is quadratic: thousands of quick
    /// cases write it a handful of times, and the final report holds them all.
    #[test]
    fn many_quick_cases_rewrite_the_report_a_bounded_number_of_times() {
        let dir = tempfile::tempdir().unwrap();
        let sink = sink(dir.path());
        sink.start().unwrap();
        (0..5000).for_each(|i| sink.add(record(i)));
        assert!(sink.writes() < 20, "report.json written {} times for 5000 cases", sink.writes());
        assert_eq!(sink.finish(true, |_| Vec::new()).unwrap().cases.len(), 5000);
        assert!(!dir.path().join(LOCK_FILE).exists(), "the lock file is removed at the end");
    }

    #[test]
    fn a_report_directory_in_use_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = sink(dir.path());
        first.start().unwrap();
        let refused = sink(dir.path()).start().unwrap_err();
        let refused = refused.replace(&dir.path().display().to_string(), "DIR");
        insta::assert_snapshot!(refused, @"the report directory DIR is in use by another gnomon run; give each run its own --report-dir");
        first.finish(true, |_| Vec::new()).unwrap();
        sink(dir.path()).start().unwrap();
    }
}
