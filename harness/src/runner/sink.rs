//! Holds the records of a run and keeps `report.json` on disk current: rewritten
//! atomically after every case, so a run that dies part-way still leaves what it did.

use std::{path::PathBuf, sync::Mutex, time::Instant};

use gnomon_reports::{render, CaseRecord, Environment, Report, Run, Subject};

pub struct ReportSink {
    dir: PathBuf,
    started: Instant,
    run: Run,
    subject: Subject,
    environment: Environment,
    records: Mutex<Vec<CaseRecord>>,
}

impl ReportSink {
    pub fn new(dir: PathBuf, run: Run, subject: Subject, environment: Environment) -> Self {
        Self { dir, started: Instant::now(), run, subject, environment, records: Mutex::new(Vec::new()) }
    }

    /// Writes the report with no case yet, so an unwritable directory is found before the
    /// first case runs, and a run that dies at once still leaves a report.
    pub fn start(&self) -> std::io::Result<()> {
        let empty = self.report(Vec::new(), false);
        gnomon_reports::write_atomically(&self.dir.join("report.json"), empty.to_json().as_bytes())
    }

    pub fn add(&self, record: CaseRecord) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        records.push(record);
        let partial = self.report(records.clone(), false);
        if let Err(e) = gnomon_reports::write_atomically(&self.dir.join("report.json"), partial.to_json().as_bytes()) {
            eprintln!("gnomon: could not update {}: {e}", self.dir.display());
        }
    }

    /// Writes the final report (`complete` unless the run was cancelled), with the
    /// expectation problems `problems` finds in its records, and its renderings.
    pub fn finish(
        &self,
        complete: bool,
        problems: impl FnOnce(&[CaseRecord]) -> Vec<String>,
    ) -> std::io::Result<Report> {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut report = self.report(records, complete);
        report.expectation_problems = problems(&report.cases);
        render::write_all(&report, &self.dir)?;
        Ok(report)
    }

    fn report(&self, records: Vec<CaseRecord>, complete: bool) -> Report {
        let run = Run { duration_s: self.started.elapsed().as_secs_f64(), complete, ..self.run.clone() };
        Report::new(run, self.subject.clone(), self.environment.clone(), records)
    }
}
