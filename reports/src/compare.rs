//! `gnomon compare BASE NEW`: status transitions, metric changes beyond a noise threshold,
//! and environment differences between two reports.

use std::{collections::BTreeMap, fmt::Write};

use serde::{Deserialize, Serialize};

use crate::{
    policy::{Direction, MetricPolicy},
    text::{md_code, printable},
    CaseId, CaseRecord, Environment, Gpu, Report, Status,
};

/// What a change of status means for a release gate. The order is the order of the
/// comparison's listing: what fails the gate first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransitionKind {
    /// Was not failing (or absent), now fails the run; or passed, now fails as expected.
    Regression,
    /// Passed in the base, now skipped or blocked: what it established is no longer shown.
    NotRun,
    Removed,
    /// Was failing the run, now passes.
    Fix,
    NewlyBlocked,
    NewlySkipped,
    Added,
    /// Any other change of status (passed → flaky, blocked → passed, …).
    Changed,
}

impl TransitionKind {
    /// The words a reader sees.
    pub fn label(self) -> &'static str {
        match self {
            TransitionKind::Regression => "regression",
            TransitionKind::NotRun => "passed before, not run now",
            TransitionKind::Removed => "removed",
            TransitionKind::Fix => "fix",
            TransitionKind::NewlyBlocked => "newly blocked",
            TransitionKind::NewlySkipped => "newly skipped",
            TransitionKind::Added => "added",
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
    #[serde(default = "informational")]
    pub direction: Direction,
    /// Beyond the threshold in the worse direction: fails the gate.
    #[serde(default)]
    pub regression: bool,
}

fn informational() -> Direction {
    Direction::Informational
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct EnvironmentDifference {
    pub field: String,
    pub base: String,
    pub new: String,
    /// The new run lost a GPU or runs on another arch: its results do not stand for the base's.
    #[serde(default)]
    pub fails_gate: bool,
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
    /// Whether cases that passed and are now skipped or blocked are accepted (`--allow-not-run`).
    #[serde(default)]
    pub not_run_allowed: bool,
}

/// How `compare` judges: the metric policy, and what the command line allows to be
/// missing: cases absent from the new run (a filtered or crashed run), and cases that
/// passed in the base and are now skipped or blocked.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gate {
    pub metrics: MetricPolicy,
    pub allow_removed: bool,
    pub allow_not_run: bool,
}

pub fn compare(base: &Report, new: &Report, gate: &Gate) -> Comparison {
    let policy = &gate.metrics;
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
            metric_changes.extend(metric_deltas(b, n, policy));
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
        not_run_allowed: gate.allow_not_run,
    }
}

/// The transition from `base` to `new`, for every pair of statuses (absent included);
/// `None` when nothing changed. Table-tested over all of them.
pub fn classify(base: Option<Status>, new: Option<Status>) -> Option<TransitionKind> {
    use Status::*;
    use TransitionKind::*;
    let passing = |s: Status| matches!(s, Passed | Flaky);
    Some(match (base, new) {
        (None, None) => return None,
        (Some(b), Some(n)) if b == n => return None,
        (b, Some(n)) if n.fails_run() && !b.is_some_and(Status::fails_run) => Regression,
        (Some(b), Some(ExpectedFailure)) if passing(b) => Regression,
        (Some(b), Some(Skipped | Blocked)) if passing(b) => NotRun,
        (Some(_), None) => Removed,
        (None, Some(_)) => Added,
        (Some(b), Some(Passed)) if b.fails_run() => Fix,
        (Some(_), Some(Blocked)) => NewlyBlocked,
        (Some(_), Some(Skipped)) => NewlySkipped,
        _ => Changed,
    })
}

fn metric_deltas(base: &CaseRecord, new: &CaseRecord, policy: &MetricPolicy) -> Vec<MetricChange> {
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
            let threshold_pct = policy.threshold(name);
            let beyond =
                factor_pct(b.value, n.value) > threshold_pct && (n.value - b.value).abs() > policy.floor(&b.unit);
            let direction = policy.direction(name, &b.unit);
            beyond.then(|| MetricChange {
                case: base.id.clone(),
                metric: name.clone(),
                unit: b.unit.clone(),
                base: b.value,
                new: n.value,
                change_pct,
                threshold_pct,
                direction,
                regression: direction.worse(b.value, n.value),
            })
        })
        .collect()
}

/// How far apart two values are, as the factor between them in percent (`new / base - 1`
/// when it grew, `base / new - 1` when it shrank), so a rate halved is as far as a time
/// doubled; infinite to or from zero; the plain relative change across or below zero.
fn factor_pct(base: f64, new: f64) -> f64 {
    if base == new {
        0.0
    } else if base > 0.0 && new > 0.0 {
        (base.max(new) / base.min(new) - 1.0) * 100.0
    } else if base == 0.0 || new == 0.0 {
        f64::INFINITY
    } else {
        ((new - base) / base.abs() * 100.0).abs()
    }
}

fn environment_differences(base: &Environment, new: &Environment) -> Vec<EnvironmentDifference> {
    let gpus = |e: &Environment| e.gpus.iter().map(Gpu::label).collect::<Vec<_>>().join(", ");
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
        ("transparent-huge-pages", opt(&base.transparent_huge_pages), opt(&new.transparent_huge_pages)),
    ];
    let shown = |v: String| if v.is_empty() { "none".to_owned() } else { v };
    let arches = |e: &Environment| e.gpus.iter().map(|g| g.arch.clone()).collect::<std::collections::BTreeSet<_>>();
    let lost = new.gpus.len() < base.gpus.len() || arches(base) != arches(new);
    fields
        .into_iter()
        .filter(|(_, b, n)| b != n)
        .map(|(field, base, new)| EnvironmentDifference {
            fails_gate: field == "gpus" && lost,
            field: field.into(),
            base: shown(base),
            new: shown(new),
        })
        .collect()
}

impl Comparison {
    /// The transitions that fail the gate: regressions, and cases that passed and are now
    /// not run or absent, unless the command line allows it.
    pub fn failing(&self) -> impl Iterator<Item = &Transition> {
        self.transitions.iter().filter(|t| match t.kind {
            TransitionKind::Regression => true,
            TransitionKind::NotRun => !self.not_run_allowed,
            TransitionKind::Removed => !self.removed_allowed,
            _ => false,
        })
    }

    /// Metrics beyond their threshold in their worse direction.
    pub fn metric_regressions(&self) -> impl Iterator<Item = &MetricChange> {
        self.metric_changes.iter().filter(|m| m.regression)
    }

    /// Whether the new run fails the gate: a failing transition, a metric regression, a
    /// lost GPU or a changed arch, or an incomplete run.
    pub fn has_regression(&self) -> bool {
        self.new_incomplete
            || self.failing().next().is_some()
            || self.metric_regressions().next().is_some()
            || self.environment.iter().any(|e| e.fails_gate)
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
            let reason = t.reason.as_deref().map(|r| format!(": {}", printable(r))).unwrap_or_default();
            let case = md_code(t.case.as_str());
            let _ = writeln!(out, "- {} {case}: {} → {}{reason}", t.kind.label(), show(t.base), show(t.new));
        }
        let _ = writeln!(out, "\n## Metric changes beyond noise\n");
        if self.metric_changes.is_empty() {
            out.push_str("None.\n");
        }
        for m in &self.metric_changes {
            let judged = match (m.regression, m.direction) {
                (true, _) => "**regression**",
                (false, Direction::Informational) => "informational",
                (false, _) => "better",
            };
            let _ = writeln!(
                out,
                "- {judged} {} {}: {} → {} {} ({:+.1} %, threshold {} %)",
                md_code(m.case.as_str()),
                printable(&m.metric),
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
            let fails = if e.fails_gate { " (**fails the gate**)" } else { "" };
            let _ = writeln!(out, "- {}: {} → {}{fails}", e.field, md_code(&e.base), md_code(&e.new));
        }
        out
    }
}

impl Comparison {
    fn verdict(&self) -> String {
        let count = |kind| self.failing().filter(|t| t.kind == kind).count();
        let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut reasons = Vec::new();
        let regressions = count(TransitionKind::Regression);
        if regressions > 0 {
            reasons.push(plural(regressions, "regression", "regressions"));
        }
        let not_run = count(TransitionKind::NotRun);
        if not_run > 0 {
            let cases = plural(not_run, "case", "cases");
            reasons.push(format!("{cases} that passed not run now (pass --allow-not-run if that is intended)"));
        }
        let removed = count(TransitionKind::Removed);
        if removed > 0 {
            let absent = plural(removed, "case", "cases");
            reasons.push(format!(
                "{absent} of the baseline absent (pass --allow-removed if the run was filtered on purpose)"
            ));
        }
        let metrics = self.metric_regressions().count();
        if metrics > 0 {
            reasons.push(plural(metrics, "metric regressed", "metrics regressed"));
        }
        if self.environment.iter().any(|e| e.fails_gate) {
            reasons.push("the new run lost a GPU or changed arch".into());
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

#[cfg(test)]
mod tests {
    use super::factor_pct;

    /// The factor between two values, either way round; infinite to or from zero; the
    /// plain relative change where a value is negative.
    #[test]
    fn a_change_is_the_factor_between_the_values() {
        for (base, new, pct) in [(1.0, 2.0, 100.0), (2.0, 1.0, 100.0), (1.0, 3.0, 200.0), (4.0, 1.0, 300.0)] {
            assert_eq!(factor_pct(base, new), pct, "{base} → {new}");
        }
        assert_eq!(factor_pct(0.0, 0.0), 0.0);
        assert_eq!(factor_pct(0.0, 5.0), f64::INFINITY);
        assert_eq!(factor_pct(0.0, -5.0), f64::INFINITY);
        assert_eq!(factor_pct(5.0, 0.0), f64::INFINITY, "a rate that fell to nothing");
        assert_eq!(factor_pct(-1.0, -2.0), 100.0);
        assert_eq!(factor_pct(1.0, -1.0), 200.0);
        assert_eq!(factor_pct(-2.0, 2.0), 200.0);
        assert_eq!(factor_pct(-3.0, -3.0), 0.0);
    }
}
