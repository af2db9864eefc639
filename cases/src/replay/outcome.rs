//! What a helper process (an export, a replay, a rank of a set) reports to the case that
//! started it, through the file named by `--result`: below the cases that start helpers
//! and the steps that are them, so each reads and writes it one way.

use std::path::Path;

use gnomon_reports::{exit_codes, Status};
use serde::{Deserialize, Serialize};

use crate::{Metrics, Verdict};

/// What a helper process (export or replay) reports to the case that started it.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct StepOutcome {
    pub status: Option<Status>,
    pub reason: Option<String>,
    pub metrics: Metrics,
}

impl StepOutcome {
    pub fn new(result: Result<Metrics, Verdict>) -> Self {
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

    pub fn exit_code(&self) -> i32 {
        match self.status {
            Some(Status::Passed) => exit_codes::SUCCESS,
            Some(Status::Blocked) => exit_codes::PRECONDITION,
            _ => exit_codes::CASES_FAILED,
        }
    }
}

impl StepOutcome {
    /// The outcome a helper wrote to `result`, or, where it wrote none, a failure that says
    /// `who` gave no result and how it ended (`ended`).
    pub(super) fn read(result: &Path, who: &str, ended: impl std::fmt::Debug) -> Self {
        let read = std::fs::read_to_string(result).ok().and_then(|t| serde_json::from_str(&t).ok());
        read.unwrap_or_else(|| Self { reason: Some(format!("{who} gave no result ({ended:?})")), ..Self::default() })
    }
}
