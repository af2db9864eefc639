//! Expectations: known failures as data, matched on the case id, the device, the driver
//! and the failure's message. See `cases/expectations.toml`.

use std::sync::Mutex;

use globset::{Glob, GlobMatcher};
use gnomon_reports::{CaseRecord, Environment, Status};
use serde::Deserialize;

/// The catalogue's own expectations, built into the binary.
pub const DEFAULT: &str = include_str!("../expectations.toml");

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct File {
    #[serde(default)]
    expect: Vec<Entry>,
}

/// One known failure, as written in an expectations file or a qualification profile.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Entry {
    cases: String,
    status: Status,
    reason: String,
    link: String,
    sm: Option<u32>,
    driver_min: Option<String>,
    driver_max: Option<String>,
    gpu: Option<String>,
    message: Option<String>,
}

struct Expectation {
    entry: Entry,
    matcher: GlobMatcher,
}

/// Parsed expectations, with a count of the cases each one matched during a run.
pub struct Expectations {
    list: Vec<Expectation>,
    used: Mutex<Vec<Vec<String>>>,
}

impl Expectations {
    /// Parses and checks a file.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: File = toml::from_str(text).map_err(|e| format!("expectations: {e}"))?;
        Self::from_entries(file.expect)
    }

    /// Checks entries: every one expects a failing status and has a valid glob.
    pub fn from_entries(entries: Vec<Entry>) -> Result<Self, String> {
        let list = entries
            .into_iter()
            .enumerate()
            .map(|(i, entry)| {
                if !entry.status.fails_run() || entry.status == Status::UnexpectedPass {
                    return Err(format!("expectation {}: status must be failed, crashed or timed-out", i + 1));
                }
                let matcher =
                    Glob::new(&entry.cases).map_err(|e| format!("expectation {}: {e}", i + 1))?.compile_matcher();
                Ok(Expectation { entry, matcher })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let used = Mutex::new(vec![Vec::new(); list.len()]);
        Ok(Self { list, used })
    }

    /// Turns a matched failure into `expected-failure` and a pass into `unexpected-pass`.
    pub fn apply(&self, record: &mut CaseRecord, env: &Environment) {
        let Some((index, e)) = self.list.iter().enumerate().find(|(_, e)| e.matches_case(record, env)) else { return };
        self.used.lock().unwrap_or_else(|p| p.into_inner())[index].push(record.id.to_string());
        let entry = &e.entry;
        match record.status {
            Status::Passed | Status::Flaky => {
                record.status = Status::UnexpectedPass;
                record.reason = Some(format!(
                    "expected to fail ({}); remove the expectation if fixed: {}",
                    entry.status, entry.reason
                ));
            }
            status if status == entry.status && e.matches_message(record) => {
                record.status = Status::ExpectedFailure;
                let actual = record.reason.take().unwrap_or_default();
                record.reason = Some(format!("{} [{}] — actual: {actual}", entry.reason, entry.link));
            }
            _ => {}
        }
    }

    /// Entries whose cases are not in the run (stale, or filtered out), and cases matched
    /// by more than one entry. An entry whose cases are in the run but were skipped here,
    /// or that is for another machine, is not a problem: it waits for its machine.
    pub fn problems(&self, ran: &[CaseRecord], env: &Environment) -> Vec<String> {
        let used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        let mut problems: Vec<String> = self
            .list
            .iter()
            .zip(used.iter())
            .filter(|(e, hits)| hits.is_empty() && !ran.iter().any(|r| e.matcher.is_match(r.id.as_str())))
            .map(|(e, _)| format!("unused expectation `{}`: no case of this run has that id", e.entry.cases))
            .collect();
        for record in ran {
            let matching: Vec<_> =
                self.list.iter().filter(|e| e.matches_case(record, env)).map(|e| e.entry.cases.as_str()).collect();
            if matching.len() > 1 {
                problems.push(format!("case `{}` matches several expectations: {matching:?}", record.id));
            }
        }
        problems
    }
}

impl Expectation {
    fn matches_case(&self, record: &CaseRecord, env: &Environment) -> bool {
        let e = &self.entry;
        let gpu = env.gpus.first();
        self.matcher.is_match(record.id.as_str())
            && e.sm.is_none_or(|sm| gpu.is_some_and(|g| g.arch == format!("sm_{sm}")))
            && e.gpu.as_deref().is_none_or(|name| gpu.is_some_and(|g| g.name.contains(name)))
            && driver_in_range(env.driver_version.as_deref(), e.driver_min.as_deref(), e.driver_max.as_deref())
    }

    fn matches_message(&self, record: &CaseRecord) -> bool {
        self.entry.message.as_deref().is_none_or(|m| record.reason.as_deref().is_some_and(|r| r.contains(m)))
    }
}

fn version(v: &str) -> Option<(u32, u32)> {
    let (major, minor) = v.split_once('.').unwrap_or((v, "0"));
    Some((major.trim().parse().ok()?, minor.trim().parse().ok()?))
}

fn driver_in_range(driver: Option<&str>, min: Option<&str>, max: Option<&str>) -> bool {
    if min.is_none() && max.is_none() {
        return true;
    }
    let Some(driver) = driver.and_then(version) else { return false };
    min.and_then(version).is_none_or(|m| driver >= m) && max.and_then(version).is_none_or(|m| driver <= m)
}
