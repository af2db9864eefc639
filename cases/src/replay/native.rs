//! The native side: replay a core and judge what it produced, bitwise against the
//! exported expectations and within tolerance against the CPU reference the core names.
//! Also the bodies of `gnomon replay` and `gnomon export`.

use std::{collections::BTreeMap, path::Path, time::Instant};

use gnomon_format::{validate::Opening, Core};

use gnomon_core::{
    cuda::{Context, CudaError},
    errors::ReplayError,
    replay::{
        measure_floors, module_floor_s, replay_launching, shards_cached_fraction, start, Executables, Floors, Launches,
        OutputCheck, RankLink, ReplayReport, Stage, StageTimes, StartError, Started,
    },
};
use gnomon_fixtures::{
    reference::{describe_differences, from_bytes, max_scaled_diff},
    workloads::{
        self,
        allreduce::{is_rank_set, rank_set},
        by_name, Contents,
    },
};
use gnomon_reports::{exit_codes, Metric, Status};
use serde::{Deserialize, Serialize};

use super::{
    pipeline::{export, ExportOptions, Handover},
    rank_set,
};
use crate::{measured, Metrics, Verdict};

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

/// A restore that found less of its shard files than this in the page cache read mostly
/// from storage: its read floor is measured cold.
const COLD_BELOW: f64 = 0.5;

/// The native side of a replay, timed stage by stage from `started`: `before` holds the
/// stages already run (opening the core, making the context, which took `context_s`: 0
/// where the context was there already), the rest are replay's own and the comparison
/// with the expectations and the CPU reference.
pub fn replay_and_check(
    core: &Core,
    ctx: &Context,
    executables: Executables,
    launches: Launches,
    started: Instant,
    mut before: StageTimes,
    context_s: f64,
) -> Result<Metrics, Verdict> {
    // Before the restore reads them: how much of the shard files the page cache holds
    // decides which read floor the upload is held against.
    let cached = shards_cached_fraction(core).map_err(|e| Verdict::Failed(e.to_string()))?;
    let report = replay_launching(core, ctx, executables, launches).map_err(|f| match f.error {
        ReplayError::Cuda(e @ CudaError::AddressNotHonoured { .. }) => Verdict::Blocked(e.to_string()),
        other => Verdict::Failed(format!("replay: {other}")),
    })?;
    let compared = Instant::now();
    let worst = check(core, &report)?;
    before.extend(report.stages.iter().copied());
    before.push((Stage::Compare, compared.elapsed().as_secs_f64()));
    let measured_at = Instant::now();
    let floors =
        floors_as_found(core, ctx, cached).map_err(|e| Verdict::Failed(format!("measure the upload floors: {e}")))?;
    // A handed-over restore loads no modules, so its floor holds none.
    let module_floor_s = rebuilt(&report)
        .then(|| module_floor_s(core, ctx))
        .transpose()
        .map_err(|e| Verdict::Failed(format!("load the modules again alone: {e}")))?;
    before.push((Stage::MeasureFloors, measured_at.elapsed().as_secs_f64()));
    let (mut metrics, restored) = replay_metrics(core, &report, &before);
    metrics.extend(floor_metrics(&restored, &floors, Unavoidable { context_s, module_floor_s }));
    metrics.extend([measured("shards-cached-fraction", cached, "1")]);
    let covered: f64 = before.iter().map(|(_, s)| s).sum();
    metrics.extend([
        measured("reference-max-scaled-diff", worst as f64, "1"),
        measured("stage-coverage", covered / started.elapsed().as_secs_f64(), "1"),
        measured("peak-host-rss-bytes", peak_rss_bytes() as f64, "B"),
    ]);
    Ok(metrics)
}

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
pub(crate) fn floors_as_found(core: &Core, ctx: &Context, cached: f64) -> Result<Floors, ReplayError> {
    measure_floors(core, ctx, cached < COLD_BELOW)
}

/// What a restore did, as its floor is set against it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Restored {
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
pub(crate) struct Unavoidable {
    pub context_s: f64,
    /// Where the restore loaded modules (it rebuilt its templates).
    pub module_floor_s: Option<f64>,
}

/// Whether a restore rebuilt its templates (a direct handover is handed them).
pub(crate) fn rebuilt(report: &ReplayReport) -> bool {
    report.ready_s > 0.0
}

/// Stage timings and the scale metrics of a restore, and its figures for a floor.
pub(crate) fn replay_metrics(core: &Core, report: &ReplayReport, stages: &StageTimes) -> (Metrics, Restored) {
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
    metrics.extend(opening_metrics(core.opening()));
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
pub(crate) fn floor_metrics(restored: &Restored, floors: &Floors, unavoidable: Unavoidable) -> Metrics {
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

/// The most host memory this process has held (`VmHWM`), in bytes; 0 where unknown.
fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().strip_suffix("kB"));
    kib.and_then(|v| v.trim().parse::<u64>().ok()).map_or(0, |k| k * 1024)
}

/// Bitwise against the expectations, then within tolerance against the CPU reference,
/// template by template; returns the largest scaled difference from the reference.
fn check(core: &Core, report: &ReplayReport) -> Result<f32, Verdict> {
    let mut worst = 0.0f32;
    for t in &core.manifest().templates {
        digests_match(&t.name, &report.outputs)?;
        worst = worst.max(within_reference(core, report, &t.name, &|_| None)?);
    }
    Ok(worst)
}

/// Every first-launch output of `template` has the digest the original run recorded.
pub(crate) fn digests_match(template: &str, outputs: &[OutputCheck]) -> Result<(), Verdict> {
    let mut first_launch = outputs.iter().filter(|o| o.template == template && o.launch == 0);
    match first_launch.find(|o| !o.matches()) {
        None => Ok(()),
        Some(bad) => Err(Verdict::Failed(format!(
            "template `{}` output `{}` has SHA-256 {}, the original run's was {}",
            bad.template, bad.buffer, bad.actual_sha256, bad.expected_sha256
        ))),
    }
}

/// The outputs of `template` against the CPU reference its expectation names, if any,
/// within the expectation's tolerance or the one `tolerance(buffer)` gives instead;
/// returns the largest scaled difference (0 without a reference).
pub(crate) fn within_reference(
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
pub(crate) fn reference_differences(core: &Core, report: &ReplayReport, output: &OutputCheck) -> Option<String> {
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

/// `gnomon replay CORE_DIR`: validate, replay on device 0, judge. A rank of a set whose
/// kernels reach into its peers' memory meets the other ranks as `ranks` says.
pub fn replay_core(dir: &Path, ranks: Option<RankLink>) -> Result<Metrics, Verdict> {
    let started = Instant::now();
    let s = start(dir, 0).map_err(|e| match e {
        StartError::Core(e) => Verdict::Failed(format!("core refused: {e}")),
        StartError::Device(e) => Verdict::Blocked(format!("open device 0: {e}")),
    })?;
    let launches = Launches { ranks, ..Launches::default() };
    let (stages, context_s) = (start_stages(&s), s.context_s);
    let mut metrics = replay_and_check(&s.core, &s.ctx, Executables::Rebuild, launches, started, stages, context_s)?;
    metrics.extend(start_metrics(&s));
    Ok(metrics)
}

/// The stage a fresh process's start counts in `restore-total-s`: the wall of opening the
/// core and making the context at once.
pub(crate) fn start_stages(s: &Started) -> StageTimes {
    vec![(Stage::OpenAndContext, s.wall_s)]
}

/// What opening the core and making the context took, each alone.
pub(crate) fn start_metrics(s: &Started) -> [(String, Metric); 2] {
    [measured("restore-open-s", s.open_s, "s"), measured("restore-context-s", s.context_s, "s")]
}

/// Opens a core (parse, validate, sizes and module hashes; shard contents are hashed as
/// they are uploaded); returns it with the `open` stage.
pub fn open_timed(dir: &Path) -> Result<(Core, (Stage, f64)), Verdict> {
    let started = Instant::now();
    let core = Core::open_for_upload(dir).map_err(|e| Verdict::Failed(format!("core refused: {e}")))?;
    Ok((core, (Stage::Open, started.elapsed().as_secs_f64())))
}

/// `gnomon export WORKLOAD --out DIR`: writes the core of a built-in workload, as the
/// exporting process of the process-exit handover does. With `world` > 1 it writes one
/// core per rank, `DIR/rank-R`, each recording its rank. `Err` is a usage error: no such
/// workload, or a rank set asked for another number of ranks.
pub fn export_workload(workload: &str, options: ExportOptions, dir: &Path) -> Result<Result<Metrics, Verdict>, String> {
    if is_rank_set(workload) {
        let ranks = rank_set(workload, options.world).ok_or_else(|| {
            format!("`{workload}` is a rank set of 2 or 4 ranks (--tp 2, --tp 4), not {}", options.world)
        })?;
        return Ok(rank_set::export_rank_set(ranks, options.cap, dir));
    }
    let Some(w) = by_name(workload) else {
        let known: Vec<_> = workloads::all().into_iter().chain(workloads::nightly()).map(|w| w.name()).collect();
        return Err(format!("no workload `{workload}`; the workloads are {}", known.join(", ")));
    };
    // A rank set's metrics are its last rank's: the ranks are exported alike, one by one.
    Ok((0..options.world).try_fold(Metrics::new(), |_, rank| {
        let rank_dir = if options.world == 1 { dir.to_owned() } else { dir.join(format!("rank-{rank}")) };
        export(w, ExportOptions { rank, ..options }, &rank_dir, Handover::Exit).map(|e| e.metrics)
    }))
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

    #[test]
    fn module_images_are_kept_only_as_validated_and_taken_once() {
        use gnomon_fixtures::sample::{CoreDraft, MODULE_FILE};
        let dir = tempfile::tempdir().expect("a temporary directory");
        let draft = CoreDraft::sample();
        draft.write(dir.path()).expect("the sample core is written");
        let (module, validated) = (dir.path().join(MODULE_FILE), &draft.files[MODULE_FILE]);
        std::fs::write(&module, b"// not the image the manifest names").expect("the module is replaced");
        assert!(Core::open_for_upload(dir.path()).is_err(), "an image unlike its digest is refused, not kept");
        std::fs::write(&module, validated).expect("the module is put back");
        let core = Core::open_for_upload(dir.path()).expect("the sample core is valid");
        std::fs::write(&module, b"// swapped after validation").expect("the module is replaced");
        assert_eq!(core.take_image(0).as_ref(), Some(validated), "the load gets the bytes validation hashed");
        assert_eq!(core.take_image(0), None, "an image is taken once");
        assert!(core.image(0).is_err(), "once taken, a swapped file read again is refused");
        std::fs::write(&module, validated).expect("the module is put back");
        let opened = Core::open(dir.path()).expect("the sample core is valid");
        assert_eq!(opened.take_image(0), None, "only an upload keeps images");
        assert_eq!(opened.image(0).as_ref().ok(), Some(validated), "an image not kept is read and checked again");
    }
}
