use std::{
    collections::BTreeMap,
    panic::{catch_unwind, AssertUnwindSafe},
    sync::Arc,
    time::Instant,
};

use gnomon_reports::{CaseId, CaseRecord, Metric, Status};

/// Why a case did not pass. `Ok(())` from a body means it passed.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Failed(String),
    /// A precondition failed before the subject ran.
    Blocked(String),
    /// A requirement is absent.
    Skipped(String),
}

impl Verdict {
    pub fn into_status(self) -> (Status, String) {
        match self {
            Verdict::Failed(r) => (Status::Failed, r),
            Verdict::Blocked(r) => (Status::Blocked, r),
            Verdict::Skipped(r) => (Status::Skipped, r),
        }
    }
}

/// Measured values by name.
pub type Metrics = BTreeMap<String, Metric>;

/// One entry of [`Metrics`].
pub fn measured(name: &str, value: f64, unit: &str) -> (String, Metric) {
    (name.to_owned(), Metric::new(value, unit))
}

/// What a case body may record while it runs.
#[derive(Debug, Default)]
pub struct Ctx {
    metrics: Metrics,
}

impl Ctx {
    pub fn metric(&mut self, name: &str, value: f64, unit: &str) {
        self.metrics.extend([measured(name, value, unit)]);
    }

    pub fn metrics(&mut self, more: Metrics) {
        self.metrics.extend(more);
    }
}

pub type CaseBody = Arc<dyn Fn(&mut Ctx) -> Result<(), Verdict> + Send + Sync>;

/// What a case needs from the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requirement {
    Nothing,
    /// At least this many CUDA devices.
    Gpus(u32),
    /// NVRTC, to compile without running (no GPU needed).
    Nvrtc,
}

/// Where a case runs. GPU cases run each in a child process, so a crash, a sticky CUDA
/// error or a hang fails that case alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    InProcess,
    ChildProcess,
}

/// Cases judged together by child processes started at once: `gnomon qualify` restores a
/// core once and judges every stage and template of it from that one restore (restoring
/// an 8 GiB arena per case would take the run hours), and replays the ranks of a set on
/// their GPUs at the same time.
pub struct Batch {
    pub children: Vec<BatchChild>,
    /// Records made from every child's records together (the ranks overlapped, say).
    pub combine: Combine,
}

pub type Combine = Box<dyn Fn(&[CaseRecord]) -> Vec<CaseRecord> + Send + Sync>;

/// One child of a batch: `gnomon ARGS --result-file FILE`, which writes the records of
/// `cases` as a JSON array.
pub struct BatchChild {
    pub args: Vec<String>,
    pub cases: Vec<Case>,
}

impl BatchChild {
    /// A record of each of this child's cases, for a child that wrote none.
    pub fn records(&self, status: Status, reason: &str, output: Option<String>) -> Vec<CaseRecord> {
        let record = |c: &Case| CaseRecord { stderr: output.clone(), ..c.record(status, Some(reason.to_owned())) };
        self.cases.iter().map(record).collect()
    }
}

/// What the machine offers, as the runner's preflight found it.
#[derive(Clone, Debug, Default)]
pub struct Facilities {
    pub gpus: u32,
    /// Why there are no GPUs, when there are none.
    pub gpu_unavailable: Option<String>,
    /// Why NVRTC cannot be used, when it cannot.
    pub nvrtc_unavailable: Option<String>,
}

#[derive(Clone)]
pub struct Case {
    pub id: CaseId,
    pub parameters: BTreeMap<String, String>,
    pub claims: Vec<&'static str>,
    pub requires: Requirement,
    pub isolation: Isolation,
    /// Set for a case judged by a batch's child rather than by its own body.
    pub batch: Option<Arc<Batch>>,
    body: CaseBody,
}

impl Case {
    /// A case that needs nothing and runs in the runner's process.
    pub fn new(
        id: &str,
        claim: &'static str,
        body: impl Fn(&mut Ctx) -> Result<(), Verdict> + Send + Sync + 'static,
    ) -> Self {
        Self {
            id: CaseId::new(id),
            parameters: BTreeMap::new(),
            claims: vec![claim],
            requires: Requirement::Nothing,
            isolation: Isolation::InProcess,
            batch: None,
            body: Arc::new(body),
        }
    }

    /// A case that needs one GPU and runs in its own child process.
    pub fn gpu(
        id: &str,
        claim: &'static str,
        body: impl Fn(&mut Ctx) -> Result<(), Verdict> + Send + Sync + 'static,
    ) -> Self {
        Self::new(id, claim, body).requiring(Requirement::Gpus(1)).isolated()
    }

    pub fn requiring(mut self, requires: Requirement) -> Self {
        self.requires = requires;
        self
    }

    pub fn isolated(mut self) -> Self {
        self.isolation = Isolation::ChildProcess;
        self
    }

    /// A case that a batch's child judges; its own body only says so, should it be run alone.
    pub fn judged_by_batch(id: &str, claim: &'static str, requires: Requirement) -> Self {
        let alone = |_: &mut Ctx| Err(Verdict::Blocked("judged only with the other cases of its batch".into()));
        Self::new(id, claim, alone).requiring(requires).isolated()
    }

    pub fn in_batch(mut self, batch: &Arc<Batch>) -> Self {
        self.batch = Some(Arc::clone(batch));
        self
    }

    pub fn with_claims(mut self, claims: &[&'static str]) -> Self {
        self.claims = claims.to_vec();
        self
    }

    pub fn with_parameter(mut self, name: &str, value: impl Into<String>) -> Self {
        self.parameters.insert(name.into(), value.into());
        self
    }

    /// Why this case cannot run here, if it cannot.
    pub fn unmet(&self, facilities: &Facilities) -> Option<String> {
        match self.requires {
            Requirement::Nothing => None,
            Requirement::Nvrtc => facilities.nvrtc_unavailable.as_ref().map(|r| format!("needs NVRTC: {r}")),
            Requirement::Gpus(n) if facilities.gpus >= n => None,
            Requirement::Gpus(n) => Some(match (&facilities.gpu_unavailable, n) {
                (Some(reason), _) => format!("needs a CUDA GPU: {reason}"),
                (None, 1) => "needs a CUDA GPU".to_owned(),
                (None, n) => format!("needs {n} CUDA GPUs, {} present", facilities.gpus),
            }),
        }
    }

    /// Runs the body here, catching panics, and returns its record.
    pub fn execute(&self) -> CaseRecord {
        let started = Instant::now();
        let mut ctx = Ctx::default();
        let result = catch_unwind(AssertUnwindSafe(|| (self.body)(&mut ctx)))
            .unwrap_or_else(|panic| Err(Verdict::Failed(format!("panicked: {}", panic_message(&panic)))));
        let (status, reason) = match result {
            Ok(()) => (Status::Passed, None),
            Err(verdict) => {
                let (status, reason) = verdict.into_status();
                (status, Some(reason))
            }
        };
        let mut record = self.record(status, reason);
        record.duration_s = started.elapsed().as_secs_f64();
        record.metrics = ctx.metrics;
        record
    }

    /// This case as a run whose selection left it out records it.
    pub fn left_out(&self) -> gnomon_reports::LeftOut {
        gnomon_reports::LeftOut { id: self.id.clone(), claims: self.claims.iter().map(|c| c.to_string()).collect() }
    }

    /// A record of this case with the given outcome and nothing measured.
    pub fn record(&self, status: Status, reason: Option<String>) -> CaseRecord {
        CaseRecord {
            id: self.id.clone(),
            family: self.id.family().to_owned(),
            parameters: self.parameters.clone(),
            status,
            reason,
            attempts: 1,
            duration_s: 0.0,
            metrics: BTreeMap::new(),
            claims: self.claims.iter().map(|c| c.to_string()).collect(),
            stderr: None,
        }
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}
