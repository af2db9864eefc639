//! What a restore measured, as the replay family and `qualify` both judge it: its stages
//! and scale, the floor it is held against, and the CPU reference a built-in workload's
//! outputs are held to. Below both families, so neither borrows from the other.

use std::collections::BTreeMap;

use gnomon_core::{
    cuda::Context,
    errors::ReplayError,
    replay::{measure_floors, Floors, OutputCheck, ReplayReport, Stage, StageTimes, Started},
};
use gnomon_fixtures::{
    reference::{describe_differences, from_bytes, max_scaled_diff},
    workloads::{by_name, Contents},
};
use gnomon_format::{validate::Opening, Core};
use gnomon_reports::Metric;

use crate::{measured, Metrics, Verdict};

/// A restore that found less of its shard files than this in the page cache read mostly
/// from storage: its read floor is measured cold.
const COLD_BELOW: f64 = 0.5;

/// The producer second a port's exporter records for its cold-start rival
/// (`python/ports/hf.py --cold-start-rival`).
const COLD_START_RIVAL: &str = "cold-start-s";

/// `cold-start-speedup` of a restore ready in `total` seconds, where the producer timed
/// its rival; above 1 the core wins.
fn rival_speedup(producer: &BTreeMap<String, f64>, total: f64) -> Option<(String, Metric)> {
    let rival = producer.get(COLD_START_RIVAL)?;
    Some(measured("cold-start-speedup", rival / total, "1"))
}

/// The floors, the shard files read as a restore that found `cached` of them in the page
/// cache read them: cold below [`COLD_BELOW`], warm otherwise.
pub fn floors_as_found(core: &Core, ctx: &Context, cached: f64) -> Result<Floors, ReplayError> {
    measure_floors(core, ctx, cached < COLD_BELOW)
}

/// What a restore did, as its floor is set against it.
#[derive(Clone, Copy, Debug)]
pub struct Restored {
    pub total_s: f64,
    pub upload_gbps: f64,
    pub bytes: u64,
    pub nodes: usize,
    /// Seconds spent building and instantiating, where the restore rebuilt its templates.
    pub ready_s: Option<f64>,
}

/// What a restore cannot do without beside its bytes and nodes, measured in the same run:
/// making its context and loading its modules with nothing else running.
#[derive(Clone, Copy, Debug)]
pub struct Unavoidable {
    pub context_s: f64,
    /// Where the restore loaded modules (it rebuilt its templates).
    pub module_floor_s: Option<f64>,
}

/// Whether a restore rebuilt its templates (a direct handover is handed them).
pub fn rebuilt(report: &ReplayReport) -> bool {
    report.ready_s > 0.0
}

/// Stage timings and the scale metrics of a restore, and its figures for a floor.
pub fn replay_metrics(core: &Core, report: &ReplayReport, stages: &StageTimes) -> (Metrics, Restored) {
    let m = core.manifest();
    let stage = |wanted: Stage| stages.iter().find(|(n, _)| *n == wanted).map_or(0.0, |(_, s)| *s);
    let mut metrics: Metrics = stages.iter().map(|(name, s)| measured(&format!("restore-{name}-s"), *s, "s")).collect();
    let nodes: usize = m.templates.iter().map(|t| t.nodes.len()).sum();
    let upload_gbps = report.uploaded.bytes as f64 / stage(Stage::Upload) / 1e9;
    let total: f64 = Stage::RESTORE.iter().map(|&s| stage(s)).sum();
    metrics.extend([
        measured("restore-total-s", total, "s"),
        measured("restore-first-launch-s", report.first_launch_s, "s"),
        measured("restore-launch-kernels-s", report.kernels_s, "s"),
        measured("restore-launch-overhead-s", (stage(Stage::Launch) - report.kernels_s).max(0.0), "s"),
        measured("outputs-read-bytes", report.output_traffic.read_bytes as f64, "B"),
        measured("outputs-compared-on-device-bytes", report.output_traffic.summed_bytes as f64, "B"),
        measured("graphs", m.templates.len() as f64, "1"),
        measured("nodes", nodes as f64, "1"),
        measured("edges", m.templates.iter().map(|t| t.edges.len()).sum::<usize>() as f64, "1"),
        measured("arena-bytes", m.arena.size as f64, "B"),
        measured("arena-mapped-bytes", m.mapped_ranges().iter().map(|(_, size)| size).sum::<u64>() as f64, "B"),
        measured("templates-unchecked", m.unchecked.len() as f64, "1"),
        measured("upload-gbps", upload_gbps, "GB/s"),
        measured("restore-upload-pinning-s", report.uploaded.pinning_s, "s"),
    ]);
    // What the producing process spent, beside what the restore spends (v3), and where
    // its exporter timed the fair rival (a fresh process that loads the weights from
    // files, warms up and captures), how much sooner the restore is ready.
    metrics.extend(m.producer_seconds.iter().map(|(name, s)| measured(&format!("producer-{name}"), *s, "s")));
    metrics.extend(rival_speedup(&m.producer_seconds, total));
    metrics.extend(
        report
            .host_peaks
            .by_stage()
            .iter()
            .map(|(stage, bytes)| measured(&format!("peak-host-rss-{stage}-bytes"), *bytes as f64, "B")),
    );
    metrics.extend(opening_metrics(core.opening()));
    if !report.speeds.speeds.is_empty() {
        metrics.extend([
            measured("restore-speed-scoping-s", report.speeds.scoping_s, "s"),
            measured("speed-retimed-templates", report.speeds.retimed.len() as f64, "1"),
        ]);
    }
    // Modules load and templates are built and instantiated during the upload: the
    // stages are what the restore waited for after it, these their own times.
    let (rebuilt, ready) = (rebuilt(report), report.ready_s);
    if rebuilt {
        metrics.extend([
            measured("restore-us-per-node", ready / nodes.max(1) as f64 * 1e6, "us/node"),
            measured("templates-ready-s", ready, "s"),
            measured("restore-building-s", report.building_s, "s"),
            measured("restore-modules-loading-s", report.modules_s, "s"),
        ]);
        metrics.extend(report.executables_bytes.map(|b| measured("executables-device-bytes", b as f64, "B")));
    }
    let ready_s = rebuilt.then_some(ready);
    let restored = Restored { total_s: total, upload_gbps, bytes: report.uploaded.bytes, nodes, ready_s };
    (metrics, restored)
}

/// Where opening the core spent its time, part by part: diagnostics, never gated.
fn opening_metrics(o: Opening) -> [(String, Metric); 4] {
    [
        measured("open-read-s", o.read_s, "s"),
        measured("open-parse-s", o.parse_s, "s"),
        measured("open-rules-s", o.rules_s, "s"),
        measured("open-files-s", o.files_s, "s"),
    ]
}

/// The restore against its floor, measured in the same run: what is unavoidable, its
/// bytes at the slower of reading and copying, and, where it rebuilt, its nodes at the
/// driver's own cost.
pub fn floor_metrics(restored: &Restored, floors: &Floors, unavoidable: Unavoidable) -> Metrics {
    let floor_gbps = floors.read_gbps.min(floors.pinned_h2d_gbps);
    let per_node_us = floors.driver_us_per_node;
    let node_floor_s = restored.ready_s.map_or(0.0, |_| restored.nodes as f64 * per_node_us / 1e6);
    let bytes_floor_s = restored.bytes as f64 / (floor_gbps * 1e9);
    let module_floor_s = unavoidable.module_floor_s.unwrap_or(0.0);
    let floor_s = unavoidable.context_s + module_floor_s + bytes_floor_s + node_floor_s;
    let mut metrics = Metrics::from([
        measured("read-floor-gbps", floors.read_gbps, "GB/s"),
        measured("read-floor-cold", if floors.cold { 1.0 } else { 0.0 }, "1"),
        measured("pinned-h2d-floor-gbps", floors.pinned_h2d_gbps, "GB/s"),
        measured("upload-fraction-of-floor", restored.upload_gbps / floor_gbps, "1"),
        measured("driver-floor-us-per-node", per_node_us, "us/node"),
        measured("restore-floor-s", floor_s, "s"),
        measured("restore-over-floor", restored.total_s / floor_s, "1"),
    ]);
    metrics.extend(unavoidable.module_floor_s.map(|s| measured("restore-module-floor-s", s, "s")));
    if let Some(ready) = restored.ready_s {
        let over = ready / restored.nodes.max(1) as f64 * 1e6 / per_node_us;
        metrics.extend([measured("restore-over-driver-floor", over, "1")]);
    }
    metrics
}

/// The outputs of `template` against the CPU reference its expectation names, if any,
/// within the expectation's tolerance or the one `tolerance(buffer)` gives instead;
/// returns the largest scaled difference (0 without a reference).
pub fn within_reference(
    core: &Core,
    report: &ReplayReport,
    template: &str,
    tolerance: &dyn Fn(&str) -> Option<f64>,
) -> Result<f32, Verdict> {
    let mut worst = 0.0f32;
    for e in core.manifest().expectations.iter().filter(|e| e.template == template) {
        let Some(name) = e.reference.as_deref() else { continue };
        for (buffer, expected) in cpu_reference(report, template, name)? {
            let got = report.outputs.iter().find(|o| o.template == template && o.buffer == buffer && o.launch == 0);
            let got = got.ok_or_else(|| Verdict::Failed(format!("no output `{buffer}` for `{template}`")))?;
            let diff = max_scaled_diff(&from_bytes(&got.bytes), &expected).unwrap_or(f32::INFINITY);
            let allowed = tolerance(buffer).or(e.tolerance).unwrap_or(0.0);
            if diff as f64 > allowed {
                return Err(Verdict::Failed(format!(
                    "template `{template}` output `{buffer}` differs from the CPU reference by {diff} (allowed {allowed})"
                )));
            }
            worst = worst.max(diff);
        }
    }
    Ok(worst)
}

/// Where an output departs from the CPU reference its core names, in words
/// ([`describe_differences`]): what a digest that differs cannot say. `None` where the
/// core names no reference, or the output equals it.
pub fn reference_differences(core: &Core, report: &ReplayReport, output: &OutputCheck) -> Option<String> {
    let e = core.manifest().expectations.iter().find(|e| e.template == output.template)?;
    let reference = cpu_reference(report, &output.template, e.reference.as_deref()?).ok()?;
    let (_, expected) = reference.into_iter().find(|(buffer, _)| *buffer == output.buffer)?;
    describe_differences(&from_bytes(&output.bytes), &expected).map(|d| format!("against the CPU reference, {d}"))
}

/// What the CPU reference `name` computes for `template`, from the buffers as loaded.
fn cpu_reference(report: &ReplayReport, template: &str, name: &str) -> Result<Vec<(&'static str, Vec<f32>)>, Verdict> {
    let workload = by_name(name).ok_or_else(|| {
        Verdict::Failed(format!("template `{template}` names CPU reference `{name}`, which this gnomon does not know"))
    })?;
    let contents = |name: &str| report.initial_contents(name).expect("a CPU reference reads a buffer of the core");
    Ok(workload.reference(template, &Contents(&contents)))
}

/// The stage a fresh process's start counts in `restore-total-s`: the wall of opening the
/// core and making the context at once.
pub fn start_stages(s: &Started) -> StageTimes {
    vec![(Stage::OpenAndContext, s.wall_s)]
}

/// What opening the core and making the context took, each alone.
pub fn start_metrics(s: &Started) -> [(String, Metric); 2] {
    [measured("restore-open-s", s.open_s, "s"), measured("restore-context-s", s.context_s, "s")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_rival_gives_the_cold_start_speedup_and_none_gives_none() {
        let mut producer = BTreeMap::from([("warm-up-s".to_owned(), 1.5)]);
        assert!(rival_speedup(&producer, 0.5).is_none());
        producer.insert(COLD_START_RIVAL.into(), 12.0);
        let (name, metric) = rival_speedup(&producer, 0.5).expect("a rival was timed");
        assert_eq!((name.as_str(), metric.value), ("cold-start-speedup", 24.0));
    }

    #[test]
    fn the_floor_adds_what_is_unavoidable_to_the_bytes_at_the_slower_floor_and_the_rebuilt_nodes() {
        let floors = Floors { read_gbps: 20.0, pinned_h2d_gbps: 50.0, cold: false, driver_us_per_node: 4.0 };
        let rebuilt =
            Restored { total_s: 1.0, upload_gbps: 20.0, bytes: 10_000_000_000, nodes: 1000, ready_s: Some(0.01) };
        let unavoidable = Unavoidable { context_s: 0.1, module_floor_s: Some(0.2) };
        let value = |m: &Metrics, name: &str| m.get(name).map(|m| (m.value * 1e6).round() / 1e6);
        let metrics = floor_metrics(&rebuilt, &floors, unavoidable);
        // 0.1 + 0.2 + 10 GB / 20 GB/s + 1 000 × 4 us.
        assert_eq!(value(&metrics, "restore-floor-s"), Some(0.804));
        assert_eq!(value(&metrics, "restore-over-floor"), Some((1.0 / 0.804 * 1e6f64).round() / 1e6));
        assert_eq!(value(&metrics, "upload-fraction-of-floor"), Some(1.0));
        assert_eq!(value(&metrics, "restore-over-driver-floor"), Some(2.5));
        assert_eq!(value(&metrics, "restore-module-floor-s"), Some(0.2));
        // Handed executables: no nodes built, none in the floor.
        let handed = Restored { ready_s: None, ..rebuilt };
        let metrics = floor_metrics(&handed, &floors, Unavoidable { context_s: 0.0, module_floor_s: None });
        assert_eq!(value(&metrics, "restore-floor-s"), Some(0.5));
        assert_eq!(value(&metrics, "restore-over-driver-floor"), None);
        assert_eq!(value(&metrics, "restore-module-floor-s"), None);
    }

    #[test]
    fn opening_is_reported_part_by_part_and_never_gated() {
        let opening = Opening { read_s: 0.01, parse_s: 0.2, rules_s: 0.03, files_s: 0.04 };
        let metrics = opening_metrics(opening);
        let seconds: Vec<(&str, f64)> = metrics.iter().map(|(n, m)| (n.as_str(), m.value)).collect();
        assert_eq!(
            seconds,
            [("open-read-s", 0.01), ("open-parse-s", 0.2), ("open-rules-s", 0.03), ("open-files-s", 0.04)]
        );
        let policy = gnomon_reports::MetricPolicy::default();
        for (name, m) in &metrics {
            assert_eq!(policy.direction(name, &m.unit), gnomon_reports::Direction::Informational, "{name}");
        }
    }
}
