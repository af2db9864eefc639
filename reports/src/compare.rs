//! `gnomon compare BASE NEW`: status transitions, metric changes beyond a noise threshold,
//! and environment differences between two reports.

use std::{collections::BTreeMap, fmt::Write};

use serde::{Deserialize, Serialize};

use crate::{CaseId, CaseRecord, Environment, Report, Status};

/// What a change of status means for a release gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransitionKind {
    /// Was not failing (or absent), now fails the run.
    Regression,
    /// Was failing the run, now passes.
    Fix,
    NewlyBlocked,
    NewlySkipped,
    Added,
    Removed,
    /// Any other change of status (passed → flaky, blocked → passed, …).
    Changed,
}

impl TransitionKind {
    /// The words a reader sees.
    pub fn label(self) -> &'static str {
        match self {
            TransitionKind::Regression => "regression",
            TransitionKind::Fix => "fix",
            TransitionKind::NewlyBlocked => "newly blocked",
            TransitionKind::NewlySkipped => "newly skipped",
            TransitionKind::Added => "added",
            TransitionKind::Removed => "removed",
            TransitionKind::Changed => "changed",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Transition {
    pub case: CaseId,
    pub kind: TransitionKind,
    pub base: Option<Status>,
    pub new: Option<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct MetricChange {
    pub case: CaseId,
    pub metric: String,
    pub unit: String,
    pub base: f64,
    pub new: f64,
    /// Relative change in percent.
    pub change_pct: f64,
    pub threshold_pct: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct EnvironmentDifference {
    pub field: String,
    pub base: String,
    pub new: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Comparison {
    pub base_run: String,
    pub new_run: String,
    pub transitions: Vec<Transition>,
    pub metric_changes: Vec<MetricChange>,
    pub environment: Vec<EnvironmentDifference>,
    /// The new run ended before every selected case had a result.
    #[serde(default)]
    pub new_incomplete: bool,
    /// Whether cases absent from the new run are accepted (`--allow-removed`).
    #[serde(default)]
    pub removed_allowed: bool,
}

/// How `compare` judges: noise thresholds for metrics, and whether a case that is in the
/// baseline but not in the new run (a filtered or crashed run) may pass the gate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gate {
    pub thresholds: Thresholds,
    pub allow_removed: bool,
}

/// Noise thresholds in percent (a default and per-metric overrides), and per unit an
/// absolute floor below which any change is noise (sub-millisecond timings jitter by
/// tens of percent from run to run).
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    pub default_pct: f64,
    pub per_metric: BTreeMap<String, f64>,
    pub floor_per_unit: BTreeMap<String, f64>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self { default_pct: 10.0, per_metric: BTreeMap::new(), floor_per_unit: [("s".to_owned(), 1e-3)].into() }
    }
}

impl Thresholds {
    fn for_metric(&self, name: &str) -> f64 {
        self.per_metric.get(name).copied().unwrap_or(self.default_pct)
    }
}

pub fn compare(base: &Report, new: &Report, gate: &Gate) -> Comparison {
    let thresholds = &gate.thresholds;
    let index =
        |r: &Report| -> BTreeMap<CaseId, CaseRecord> { r.cases.iter().map(|c| (c.id.clone(), c.clone())).collect() };
    let (old, current) = (index(base), index(new));
    let mut transitions = Vec::new();
    let mut metric_changes = Vec::new();
    for id in old.keys().chain(current.keys().filter(|id| !old.contains_key(*id))) {
        let (b, n) = (old.get(id), current.get(id));
        let kind = classify(b.map(|c| c.status), n.map(|c| c.status));
        if let Some(kind) = kind {
            let reason = n.or(b).and_then(|c| c.reason.clone());
            transitions.push(Transition {
                case: id.clone(),
                kind,
                base: b.map(|c| c.status),
                new: n.map(|c| c.status),
                reason,
            });
        }
        if let (Some(b), Some(n)) = (b, n) {
            metric_changes.extend(metric_deltas(b, n, thresholds));
        }
    }
    transitions.sort_by(|a, b| (a.kind, &a.case).cmp(&(b.kind, &b.case)));
    Comparison {
        base_run: base.run.id.clone(),
        new_run: new.run.id.clone(),
        transitions,
        metric_changes,
        environment: environment_differences(&base.environment, &new.environment),
        new_incomplete: !new.run.complete,
        removed_allowed: gate.allow_removed,
    }
}

fn classify(base: Option<Status>, new: Option<Status>) -> Option<TransitionKind> {
    use TransitionKind::*;
    Some(match (base, new) {
        (None, Some(n)) if n.fails_run() => Regression,
        (None, Some(_)) => Added,
        (Some(_), None) => Removed,
        (Some(b), Some(n)) if b == n => return None,
        (Some(b), Some(n)) if n.fails_run() && !b.fails_run() => Regression,
        (Some(b), Some(Status::Passed)) if b.fails_run() => Fix,
        (Some(_), Some(Status::Blocked)) => NewlyBlocked,
        (Some(_), Some(Status::Skipped)) => NewlySkipped,
        _ => Changed,
    })
}

fn metric_deltas(base: &CaseRecord, new: &CaseRecord, thresholds: &Thresholds) -> Vec<MetricChange> {
    base.metrics
        .iter()
        .filter_map(|(name, b)| {
            let n = new.metrics.get(name)?;
            let change_pct = if b.value == 0.0 {
                if n.value == 0.0 {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else {
                (n.value - b.value) / b.value.abs() * 100.0
            };
            let threshold_pct = thresholds.for_metric(name);
            let floor = thresholds.floor_per_unit.get(&b.unit).copied().unwrap_or(0.0);
            let beyond = change_pct.abs() > threshold_pct && (n.value - b.value).abs() > floor;
            beyond.then(|| MetricChange {
                case: base.id.clone(),
                metric: name.clone(),
                unit: b.unit.clone(),
                base: b.value,
                new: n.value,
                change_pct,
                threshold_pct,
            })
        })
        .collect()
}

fn environment_differences(base: &Environment, new: &Environment) -> Vec<EnvironmentDifference> {
    let gpus =
        |e: &Environment| e.gpus.iter().map(|g| format!("{} ({})", g.name, g.arch)).collect::<Vec<_>>().join(", ");
    let opt = |v: &Option<String>| v.clone().filter(|v| !v.is_empty()).unwrap_or_else(|| "none".into());
    let fields = [
        ("host", base.host.clone(), new.host.clone()),
        ("cpu", base.cpu.clone(), new.cpu.clone()),
        ("os", base.os.clone(), new.os.clone()),
        ("harness-commit", base.harness_commit.clone(), new.harness_commit.clone()),
        ("gpus", gpus(base), gpus(new)),
        ("driver-version", opt(&base.driver_version), opt(&new.driver_version)),
        ("driver-release", opt(&base.driver_release), opt(&new.driver_release)),
        ("nvrtc-version", opt(&base.nvrtc_version), opt(&new.nvrtc_version)),
    ];
    let shown = |v: String| if v.is_empty() { "none".to_owned() } else { v };
    fields
        .into_iter()
        .filter(|(_, b, n)| b != n)
        .map(|(field, base, new)| EnvironmentDifference { field: field.into(), base: shown(base), new: shown(new) })
        .collect()
}

impl Comparison {
    /// The transitions that fail the gate: regressions, and removed cases unless allowed.
    pub fn failing(&self) -> impl Iterator<Item = &Transition> {
        self.transitions.iter().filter(|t| match t.kind {
            TransitionKind::Regression => true,
            TransitionKind::Removed => !self.removed_allowed,
            _ => false,
        })
    }

    /// Whether the new run fails the gate: a failing transition, or an incomplete run.
    pub fn has_regression(&self) -> bool {
        self.new_incomplete || self.failing().next().is_some()
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a comparison always serializes") + "\n"
    }

    pub fn to_markdown(&self) -> String {
        let mut out = format!("# Comparison `{}` → `{}`\n\n", self.base_run, self.new_run);
        let _ = writeln!(out, "Verdict: {}.\n\n## Status transitions\n", self.verdict());
        if self.transitions.is_empty() {
            out.push_str("None.\n");
        }
        let show = |s: Option<Status>| s.map(|s| s.to_string()).unwrap_or_else(|| "absent".into());
        for t in &self.transitions {
            let reason = t.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
            let _ = writeln!(out, "- {} `{}`: {} → {}{reason}", t.kind.label(), t.case, show(t.base), show(t.new));
        }
        let _ = writeln!(out, "\n## Metric changes beyond noise\n");
        if self.metric_changes.is_empty() {
            out.push_str("None.\n");
        }
        for m in &self.metric_changes {
            let _ = writeln!(
                out,
                "- `{}` {}: {} → {} {} ({:+.1} %, threshold {} %)",
                m.case,
                m.metric,
                figure(m.base),
                figure(m.new),
                m.unit,
                m.change_pct,
                m.threshold_pct
            );
        }
        let _ = writeln!(out, "\n## Environment differences\n");
        if self.environment.is_empty() {
            out.push_str("None.\n");
        }
        for e in &self.environment {
            let _ = writeln!(out, "- {}: `{}` → `{}`", e.field, e.base, e.new);
        }
        out
    }
}

impl Comparison {
    fn verdict(&self) -> String {
        let mut reasons = Vec::new();
        let count = |kind| self.failing().filter(|t| t.kind == kind).count();
        let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        if count(TransitionKind::Regression) > 0 {
            reasons.push(plural(count(TransitionKind::Regression), "regression", "regressions"));
        }
        if count(TransitionKind::Removed) > 0 {
            let absent = plural(count(TransitionKind::Removed), "case", "cases");
            reasons.push(format!(
                "{absent} of the baseline absent (pass --allow-removed if the run was filtered on purpose)"
            ));
        }
        if self.new_incomplete {
            reasons.push("the new run is incomplete".into());
        }
        match reasons.is_empty() {
            true => "no regression".into(),
            false => format!("**fails the gate**: {}", reasons.join("; ")),
        }
    }
}

/// A measured value with four significant digits, as a person reads it.
fn figure(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return v.to_string();
    }
    let decimals = (3 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let text = format!("{v:.decimals$}");
    match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.').to_owned(),
        false => text,
    }
}
