use std::{cmp::Ordering, collections::BTreeMap, fmt};

use serde::{Deserialize, Serialize};

pub const SCHEMA_VERSION: u32 = 1;

/// A case id: stable, hierarchical, free of run state (`replay/gemm/cap=64MiB/handover=exit`).
/// Ordered segment by segment, so `cpu/a/b` sorts with `cpu/a` and before `cpu/a-b`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CaseId(String);

impl CaseId {
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first segment: `cpu`, `gpu`, `replay` or `mock`.
    pub fn family(&self) -> &str {
        self.0.split('/').next().unwrap_or_default()
    }
}

impl Ord for CaseId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.split('/').cmp(other.0.split('/'))
    }
}

impl PartialOrd for CaseId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for CaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What happened to one case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Passed,
    Failed,
    Crashed,
    TimedOut,
    /// A precondition failed before the subject ran.
    Blocked,
    /// A requirement is absent (no GPU, one GPU where two are needed).
    Skipped,
    /// Failed as an expectations entry says it will.
    ExpectedFailure,
    /// Passed where an expectations entry says it fails: fails the run until removed.
    UnexpectedPass,
    /// Failed, then passed on a retry.
    Flaky,
}

impl Status {
    /// Every status, in the order of the enum.
    pub const ALL: [Status; 9] = [
        Status::Passed,
        Status::Failed,
        Status::Crashed,
        Status::TimedOut,
        Status::Blocked,
        Status::Skipped,
        Status::ExpectedFailure,
        Status::UnexpectedPass,
        Status::Flaky,
    ];

    /// Whether this status makes the run fail.
    pub fn fails_run(self) -> bool {
        matches!(self, Status::Failed | Status::Crashed | Status::TimedOut | Status::UnexpectedPass)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Crashed => "crashed",
            Status::TimedOut => "timed-out",
            Status::Blocked => "blocked",
            Status::Skipped => "skipped",
            Status::ExpectedFailure => "expected-failure",
            Status::UnexpectedPass => "unexpected-pass",
            Status::Flaky => "flaky",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A measured value with its unit (`s`, `B`, `us/node`, …).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Metric {
    pub value: f64,
    pub unit: String,
}

impl Metric {
    pub fn new(value: f64, unit: &str) -> Self {
        Self { value, unit: unit.into() }
    }
}

/// The result of one case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CaseRecord {
    pub id: CaseId,
    pub family: String,
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub attempts: u32,
    pub duration_s: f64,
    #[serde(default)]
    pub metrics: BTreeMap<String, Metric>,
    #[serde(default)]
    pub claims: Vec<String>,
    /// The tail of a child process's standard error, for cases that crashed or hung.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Run {
    pub id: String,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub duration_s: f64,
    pub profile: String,
    #[serde(default)]
    pub filters: Vec<String>,
    /// `hash:K/N` when this report covers one partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// False while the run is still going (the report is rewritten after every case).
    pub complete: bool,
    /// Cases of the run's source that its selection (filters, `--skip`, `--exact`, a
    /// partition) left out, with their claims: a claim one of them rests on is not
    /// established by this run, whatever the cases it ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOut>,
}

/// A case the run's selection left out, and the claims it would have tested.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct LeftOut {
    pub id: CaseId,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<String>,
}

/// What was qualified.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Subject {
    pub name: String,
    pub version: String,
    pub commit: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Environment {
    pub host: String,
    pub cpu: String,
    pub os: String,
    pub harness_version: String,
    pub harness_commit: String,
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    /// The CUDA version the driver supports (`cuDriverGetVersion`), `major.minor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    /// The kernel driver's release (`580.159.04`), where the host says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_release: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvrtc_version: Option<String>,
    /// Why no GPU case could run, when none could.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_unavailable: Option<String>,
    /// The kernel's transparent huge page mode (`always`, `madvise`, `never`), where the
    /// host says it: the staging pool and the instantiating threads' heap ask for huge
    /// pages, and a restore is slower without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transparent_huge_pages: Option<String>,
    /// Other processes that held a context on a GPU when the run started or ended (NVML):
    /// a launch beside them can give other bits, so a verdict reached there may differ
    /// from one reached alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_processes: Vec<GpuProcess>,
}

/// A process other than gnomon's own on a GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct GpuProcess {
    pub gpu: u32,
    pub pid: u32,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
}

impl GpuProcess {
    /// `pid 4242 (python3) on GPU 0`.
    pub fn label(&self) -> String {
        format!("pid {} ({}) on GPU {}", self.pid, self.name, self.gpu)
    }
}

/// The processes in words: what a console, a summary and a Markdown report say.
pub fn shared_with(processes: &[GpuProcess]) -> String {
    processes.iter().map(GpuProcess::label).collect::<Vec<_>>().join(", ")
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Gpu {
    pub index: u32,
    pub name: String,
    /// `sm_90` and the like.
    pub arch: String,
    pub memory_bytes: u64,
}

impl Gpu {
    /// `NVIDIA H200 (sm_90)`: how reports, gates and the console name a GPU.
    pub fn label(&self) -> String {
        format!("{} ({})", self.name, self.arch)
    }
}

/// Whether a claim is established, and if not, which cases stand in the way.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ClaimVerdict {
    pub claim: String,
    pub established: bool,
    pub cases: u32,
    #[serde(default)]
    pub not_passed: Vec<Shortfall>,
    /// Cases of the claim that the run's selection left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<CaseId>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Shortfall {
    pub case: CaseId,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Report {
    pub schema_version: u32,
    pub run: Run,
    pub subject: Subject,
    pub environment: Environment,
    pub cases: Vec<CaseRecord>,
    pub claims: Vec<ClaimVerdict>,
    pub totals: BTreeMap<Status, u32>,
    /// Unused or overlapping expectation entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expectation_problems: Vec<String>,
}

impl Report {
    /// Assembles a report, sorting cases by id and deriving claims and totals from them.
    pub fn new(mut run: Run, subject: Subject, environment: Environment, mut cases: Vec<CaseRecord>) -> Self {
        cases.sort_by(|a, b| a.id.cmp(&b.id));
        run.left_out.sort_by(|a, b| a.id.cmp(&b.id));
        let claims = crate::verdicts(&cases, &run.left_out);
        let mut totals = BTreeMap::new();
        for case in &cases {
            *totals.entry(case.status).or_insert(0) += 1;
        }
        Self {
            schema_version: SCHEMA_VERSION,
            run,
            subject,
            environment,
            cases,
            claims,
            totals,
            expectation_problems: Vec::new(),
        }
    }

    pub fn from_json(text: &str) -> serde_json::Result<Self> {
        serde_json::from_str(text)
    }

    /// Reads a report as a gate must: a schema version this crate reads, each case once,
    /// and totals and claims derived again from the cases, never taken on the file's word.
    pub fn parse(text: &str) -> Result<Self, String> {
        let r = Self::from_json(text).map_err(|e| e.to_string())?;
        if !(1..=SCHEMA_VERSION).contains(&r.schema_version) {
            return Err(format!(
                "schema version {} is not one this gnomon reads (1..={SCHEMA_VERSION})",
                r.schema_version
            ));
        }
        let mut seen = std::collections::HashMap::new();
        for c in &r.cases {
            if let Some(first) = seen.insert(&c.id, c.status) {
                return Err(format!(
                    "case `{}` is in the report twice ({first}, then {}): a report holds each case once",
                    c.id, c.status
                ));
            }
        }
        let problems = r.expectation_problems;
        let mut derived = Self::new(r.run, r.subject, r.environment, r.cases);
        derived.expectation_problems = problems;
        Ok(derived)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes") + "\n"
    }

    /// A copy with what differs between runs of the same code replaced by placeholders
    /// or dropped: run id, times, durations, host, CPU, OS, commits, memory sizes and the
    /// huge page mode. For snapshots, and for sharing a report without the machine's
    /// details.
    pub fn redacted(&self) -> Report {
        let mut r = self.clone();
        (r.run.id, r.run.started_at, r.run.duration_s) = ("[run]".into(), "[time]".into(), 0.0);
        let env = &mut r.environment;
        (env.host, env.cpu, env.os, env.harness_commit) =
            ("[host]".into(), "[cpu]".into(), "[os]".into(), "[commit]".into());
        env.transparent_huge_pages = None;
        env.gpus.iter_mut().for_each(|g| g.memory_bytes = 0);
        r.subject.commit = "[commit]".into();
        r.cases.iter_mut().for_each(|c| c.duration_s = 0.0);
        r
    }

    pub fn fails_run(&self) -> bool {
        self.cases.iter().any(|c| c.status.fails_run())
    }
}
