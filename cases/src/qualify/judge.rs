//! The child side of a qualification: restore one core once (map, modules, upload,
//! rebuild, instantiate with the recorded flags), launch every template N times, and
//! judge each case of the core from that one restore. A stage that fails fails its own
//! case; the cases it made impossible are blocked, naming it.

use std::{
    collections::HashMap,
    path::Path,
    time::{Instant, SystemTime, UNIX_EPOCH},
};

use gnomon_format::{Core, Speed, Template};

use gnomon_core::{
    cuda::Context,
    errors::ReplayError,
    replay::{
        rebuild_only, replay_launching, shards_cached_fraction, start, Executables, Launches, RankLink, ReplayReport,
        Stage, StageFailure, StartError, Started, MEETING_LIMIT,
    },
};
use gnomon_reports::{CaseRecord, Status};

use super::{
    agreement::Agreements,
    case::{CoreCase, Phase, Step},
    core_cases, draws,
    outputs::{
        checker_rejects_wrong_outputs, deterministic, floors_said, outputs_of, poison_independent, template_facts,
        Agreed, Launched, Reference, TemplateFacts,
    },
    speed, Budget, CoreDir, Profile,
};

type Budgets = std::collections::BTreeMap<String, Budget>;
use crate::{
    measured,
    rebuilt::Recorded,
    restored::{
        floor_metrics, floors_as_found, reference_differences, replay_metrics, start_metrics, start_stages,
        within_reference, Restored, Unavoidable,
    },
    Case, Metrics, Verdict,
};

/// `gnomon __qualify-core CORE --prefix P [--device D] [--meet DIR] [--profile FILE]`:
/// the records of the core's cases. `device` is given for a rank of a set, which must run
/// on that GPU; a rank whose kernels reach into its peers' memory meets them in `meet`.
pub fn judge_core(
    dir: &Path,
    prefix: &str,
    device: Option<u32>,
    meet: Option<&Path>,
    profile: &Profile,
) -> Vec<CaseRecord> {
    let ordinal = device.unwrap_or(0);
    // One parse of the manifest per process: the restore's own open names the cases; only
    // a core it could not open is read again, for what its manifest still says.
    let started = start(dir, ordinal);
    let (templates, tp_rank) = match &started {
        Ok(s) => (template_names(s.core.manifest()), Some(s.core.manifest().context.tp_rank)),
        Err(_) => {
            let core = CoreDir::read(dir.to_owned());
            (core.templates(), core.manifest.map(|m| m.context.tp_rank))
        }
    };
    let rank = device.map(|_| tp_rank.unwrap_or(u32::MAX));
    let mut verdicts = Verdicts::new(prefix, core_cases(prefix, &templates, profile, rank));
    let budgets = profile.budgets_for(super::target_of(prefix));
    let link = meet.map(|dir| RankLink { dir: dir.to_owned(), limit: MEETING_LIMIT });
    if let Err(why) = judge(&mut verdicts, started, ordinal, rank, link, profile, &budgets) {
        verdicts.unjudged = why;
    }
    verdicts.finish()
}

/// The records of one core's cases, set by case.
struct Verdicts {
    prefix: String,
    cases: Vec<Case>,
    /// Each case's place in `cases`, by id: a core of many templates has many cases.
    index: HashMap<String, usize>,
    records: HashMap<String, CaseRecord>,
    /// Why the cases still without a record were never judged.
    unjudged: String,
    /// The restore completed: from then on every case can be judged, and one left
    /// without a verdict is the judge's failure, never a blocked case.
    restored: bool,
}

impl Verdicts {
    fn new(prefix: &str, cases: Vec<Case>) -> Self {
        let unjudged = "the qualification stopped before it".into();
        let index = cases.iter().enumerate().map(|(i, c)| (c.id.to_string(), i)).collect();
        Self { prefix: prefix.into(), cases, index, records: HashMap::new(), unjudged, restored: false }
    }

    fn id(&self, case: &CoreCase) -> String {
        format!("{}/{case}", self.prefix)
    }

    /// Records the first verdict of `case`; `Ok` holds its metrics.
    fn set(&mut self, case: &CoreCase, result: Result<Metrics, Verdict>) {
        let id = self.id(case);
        let Some(case) = self.index.get(&id).map(|&i| &self.cases[i]) else { return };
        let record = match result {
            Ok(metrics) => CaseRecord { metrics, ..case.record(Status::Passed, None) },
            Err(verdict) => {
                let (status, reason) = verdict.into_status();
                case.record(status, Some(reason))
            }
        };
        self.records.entry(case.id.to_string()).or_insert(record);
    }

    /// Changes the record of `PREFIX/suffix`, once it has one.
    fn amend(&mut self, case: &CoreCase, change: impl FnOnce(&mut CaseRecord)) {
        if let Some(record) = self.records.get_mut(&self.id(case)) {
            change(record);
        }
    }

    /// As [`Self::set`], with a passed case saying which outputs agreed other than bitwise.
    fn set_agreed(&mut self, case: &CoreCase, result: Result<Agreed, Verdict>) {
        let sentence = result.as_ref().ok().and_then(Agreed::sentence);
        self.set(case, result.map(|a| a.metrics().into_iter().chain(a.metrics).collect()));
        if let Some(sentence) = sentence {
            self.amend(case, |r| r.reason = Some(sentence));
        }
    }

    fn pass(&mut self, case: &CoreCase) {
        self.set(case, Ok(Metrics::new()));
    }

    /// Every case's record: those never judged are blocked with the reason, or failed
    /// when the restore had completed (nothing stood in their way).
    fn finish(self) -> Vec<CaseRecord> {
        let Self { cases, mut records, unjudged, restored, .. } = self;
        let unjudged = |c: &Case| match restored {
            true => c.record(
                Status::Failed,
                Some("the restore completed but the judge gave this case no verdict (a bug in gnomon)".into()),
            ),
            false => c.record(Status::Blocked, Some(unjudged.clone())),
        };
        cases.iter().map(|c| records.remove(c.id.as_str()).unwrap_or_else(|| unjudged(c))).collect()
    }
}

/// Judges what it can; `Err` says why the cases left were never judged.
fn judge(
    v: &mut Verdicts,
    started: Result<Started, StartError>,
    ordinal: u32,
    rank: Option<u32>,
    link: Option<RankLink>,
    profile: &Profile,
    budgets: &Budgets,
) -> Result<(), String> {
    let started = started.map_err(|e| match e {
        StartError::Core(e) => format!("the core did not validate: {e}"),
        StartError::Device(e) => format!("open device {ordinal}: {e}"),
    })?;
    let (core, ctx) = (&started.core, &started.ctx);
    // Before the restore reads them: whether the shard files were cold decides which read
    // floor the restore is held against.
    let cached = shards_cached_fraction(core).map_err(|e| format!("ask the page cache about the shard files: {e}"));
    let window_start = unix_now();
    let launches =
        Launches { each: profile.launches, again_under_second_poison: true, timed: true, draws: true, ranks: link };
    let replayed = replay_launching(core, ctx, Executables::Rebuild, launches);
    let window = [measured("window-start-unix-s", window_start, "s"), measured("window-end-unix-s", unix_now(), "s")];
    if let Some(rank) = rank {
        v.set(&CoreCase::Device, on_rank_device(ctx, rank, ordinal));
        v.amend(&CoreCase::Device, |r| r.metrics.extend(window));
    }
    let templates = template_names(core.manifest());
    match replayed {
        Ok(report) => judge_restored(v, &started, report, cached, profile, budgets),
        Err(failure) => stopped(v, &templates, failure),
    }
}

/// Every case of a restore that completed: its launches, its rebuilt nodes read back, and
/// the restore itself against its floor and budgets.
fn judge_restored(
    v: &mut Verdicts,
    started: &Started,
    report: ReplayReport,
    cached: Result<f64, String>,
    profile: &Profile,
    budgets: &Budgets,
) -> Result<(), String> {
    let (core, ctx) = (&started.core, &started.ctx);
    let lap = Instant::now();
    let (mut metrics, restored) = judge_replay(v, started, &report, profile)?;
    // The restore's arena mapping goes with its report, so the arena can be mapped again
    // for the rebuild that is read back.
    drop(report);
    let judged_s = lap.elapsed().as_secs_f64();
    let module_floor_s = judge_attributes(v, core, ctx);
    let read_back_s = lap.elapsed().as_secs_f64() - judged_s;
    let no_floor = floors_of(core, ctx, cached, &restored, started.context_s, module_floor_s)
        .map(|floors| metrics.extend(floors))
        .err();
    // What the qualification spends after the replay, apart from the restore's stages.
    metrics.extend([
        measured("judge-outputs-s", judged_s, "s"),
        measured("judge-read-back-s", read_back_s, "s"),
        measured("judge-floors-s", lap.elapsed().as_secs_f64() - judged_s - read_back_s, "s"),
    ]);
    judge_restore(v, metrics, budgets);
    if let Some(why) = no_floor {
        v.amend(&CoreCase::Restore, |r| r.reason = Some(format!("no floor to hold the restore against: {why}")));
    }
    Ok(())
}

fn template_names(m: &gnomon_format::Manifest) -> Vec<String> {
    m.templates.iter().map(|t| t.name.clone()).collect()
}

/// Every template rebuilt again by replay's own rebuild (the same node descriptions the
/// restore built from) and read back from the driver against the manifest: each node,
/// edge and function attribute, the first difference named. Not part of the restore's
/// time. Returns the seconds the modules took to load there, with nothing else running:
/// the floor of the restore's modules.
fn judge_attributes(v: &mut Verdicts, core: &Core, ctx: &Context) -> Option<f64> {
    let m = core.manifest();
    let case = |t: &Template| CoreCase::Template(t.name.clone(), Step::Attributes);
    match rebuild_only(core, ctx) {
        Ok(rebuilt) => {
            let recorded = Recorded::of(m);
            for (t, graph) in m.templates.iter().zip(&rebuilt.graphs) {
                let restored = recorded.template_restored(t, graph, &rebuilt.functions);
                v.set(&case(t), restored.map(|()| Metrics::new()).map_err(Verdict::Failed));
            }
            Some(rebuilt.modules_s)
        }
        Err(e) => {
            let why = format!("rebuild the templates again to read them back: {e}");
            m.templates.iter().for_each(|t| v.set(&case(t), Err(Verdict::Failed(why.clone()))));
            None
        }
    }
}

/// The floor of a restore, measured after it and apart from its time (the shard files
/// read again as the restore found them, cold or warm).
fn floors_of(
    core: &Core,
    ctx: &Context,
    cached: Result<f64, String>,
    restored: &Restored,
    context_s: f64,
    module_floor_s: Option<f64>,
) -> Result<Metrics, String> {
    module_floor_s.ok_or("the modules were not loaded again alone")?;
    let floors = floors_as_found(core, ctx, cached?).map_err(|e| format!("measuring it failed: {e}"))?;
    Ok(floor_metrics(restored, &floors, Unavoidable { context_s, module_floor_s }))
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The driver runs this process's work on the GPU of `rank`: rank r on device r.
fn on_rank_device(ctx: &Context, rank: u32, ordinal: u32) -> Result<Metrics, Verdict> {
    let device = ctx.current_device().map_err(|e| Verdict::Failed(format!("ask the driver for the device: {e}")))?;
    match device == ordinal {
        true => Ok(Metrics::from([measured("device", device as f64, "1")])),
        false => Err(Verdict::Failed(format!("rank {rank} ran on device {device}, not on device {ordinal}"))),
    }
}

/// Every case of a restore that completed, but the restore's own; returns its metrics and
/// figures.
fn judge_replay(
    v: &mut Verdicts,
    started: &Started,
    report: &ReplayReport,
    profile: &Profile,
) -> Result<(Metrics, Restored), String> {
    let core = &started.core;
    let mut stages = start_stages(started);
    stages.extend(report.stages.iter().copied());
    let seconds = |case: &CoreCase| {
        stages.iter().filter(|(s, _)| phase_of(*s) == Some(case.phase())).map(|(_, s)| s).sum::<f64>()
    };
    for case in &CoreCase::STAGES {
        v.pass(case);
        v.amend(case, |r| r.duration_s = seconds(case));
    }
    let facts = template_facts(core.manifest());
    let launched = Launched { outputs: &report.outputs, repoisoned: &report.repoisoned, launches: profile.launches };
    let reference = |template: &str| {
        let tolerance = |buffer: &str| profile.tolerance(template, buffer);
        within_reference(core, report, template, &tolerance)
    };
    let agreements = Agreements::of(core, profile.rule).map_err(|e| format!("the core's varying outputs: {e}"))?;
    let reference = Reference { within: &reference, differences: &|o| reference_differences(core, report, o) };
    judge_templates(v, &facts, &launched, &agreements, &reference);
    judge_speeds(v, core.manifest(), &report.speeds.speeds);
    v.set(&CoreCase::RandomDraws, draws::judged(core.manifest(), &report.draws));
    let (mut metrics, restored) = replay_metrics(core, report, &stages);
    metrics.extend(start_metrics(started));
    Ok((metrics, restored))
}

/// The restore's case, with its metrics, and each budget held against them.
fn judge_restore(v: &mut Verdicts, metrics: Metrics, budgets: &Budgets) {
    for (metric, budget) in budgets {
        let case = CoreCase::Budget(metric.clone());
        let Some(m) = metrics.get(metric) else {
            let measured: Vec<&str> = metrics.keys().map(String::as_str).collect();
            let why = format!("no metric `{metric}` was measured; the restore measures {}", measured.join(", "));
            v.set(&case, Err(Verdict::Failed(why)));
            continue;
        };
        let within = budget
            .broken_by(m.value)
            .map_or(Ok(Metrics::new()), |why| Err(Verdict::Failed(format!("{metric}: {why}"))));
        v.set(&case, within);
        v.amend(&case, |r| r.metrics.extend([(metric.clone(), m.clone())]));
    }
    let total = metrics.get("restore-total-s").map_or(0.0, |m| m.value);
    v.set(&CoreCase::Restore, Ok(metrics));
    v.amend(&CoreCase::Restore, |r| r.duration_s = total);
}

/// Every template's speed against the one its exporter recorded.
fn judge_speeds(v: &mut Verdicts, m: &gnomon_format::Manifest, restored: &[(String, Speed)]) {
    let recorded = m.expectations_by_template();
    let restored: HashMap<&str, &Speed> = restored.iter().map(|(name, s)| (name.as_str(), s)).collect();
    for t in &m.templates {
        let recorded = recorded.get(t.name.as_str()).and_then(|e| e.speed.as_ref());
        let timed = restored.get(t.name.as_str()).copied();
        v.set(&CoreCase::Template(t.name.clone(), Step::Speed), speed::judged(&t.name, recorded, timed));
    }
}

/// After a completed restore, every template gets its rebuild, instantiate and outputs
/// verdicts, and the core its determinism, weights, checker and poison verdicts, each
/// output held to `agreements`' rule. `reference` holds a template's outputs against the
/// CPU reference the core names.
fn judge_templates(
    v: &mut Verdicts,
    templates: &[TemplateFacts],
    launched: &Launched,
    agreements: &Agreements,
    reference: &Reference,
) {
    v.restored = true;
    for t in templates {
        let case = |step| CoreCase::Template(t.name.to_owned(), step);
        v.pass(&case(Step::Rebuild));
        v.pass(&case(Step::Instantiate));
        let case = case(Step::Outputs);
        v.set_agreed(&case, outputs_of(t, launched.outputs, agreements, reference));
    }
    let checked: Vec<&TemplateFacts> = templates.iter().filter(|t| t.unchecked.is_none()).collect();
    v.set_agreed(&CoreCase::Determinism, deterministic(&checked, launched, agreements));
    let launches_checked = templates.len() as u32 * launched.launches;
    let launches_checked = Metrics::from([measured("launches-checked", launches_checked as f64, "1")]);
    v.set(&CoreCase::WeightsUnchanged, Ok(launches_checked));
    let names: Vec<&str> = checked.iter().map(|t| t.name).collect();
    let wrong_refused = checker_rejects_wrong_outputs(&names, launched.outputs, agreements);
    let refused = wrong_refused.is_ok();
    v.set(&CoreCase::CheckerRejectsWrongOutputs, wrong_refused);
    let floors = agreements.floors();
    if refused && !floors.is_empty() {
        let said =
            format!("refused every wrong output fed, defects at the floors below included; {}", floors_said(&floors));
        v.amend(&CoreCase::CheckerRejectsWrongOutputs, |r| r.reason = Some(said));
    }
    v.set_agreed(&CoreCase::PoisonIndependence, poison_independent(&checked, launched, agreements));
}

/// The restore stopped: the stages before the failing one passed, the failing stage's
/// case failed, and every case after it is blocked, naming the failure.
fn stopped(v: &mut Verdicts, templates: &[String], failure: StageFailure) -> Result<(), String> {
    let StageFailure { stage, template, error } = failure;
    let said = format!("{error}");
    let Some(phase) = phase_of(stage) else {
        return Err(format!("the core cannot run on this device: {said}"));
    };
    let failed = |reason: &str| match &error {
        ReplayError::Cuda(e @ gnomon_core::cuda::CudaError::AddressNotHonoured { .. }) => {
            Verdict::Blocked(e.to_string())
        }
        _ => Verdict::Failed(reason.to_owned()),
    };
    for case in &CoreCase::STAGES {
        if case.phase() < phase {
            v.pass(case);
        } else if case.phase() == phase {
            v.set(case, Err(failed(&said)));
        }
    }
    let at = template.as_deref().and_then(|t| templates.iter().position(|n| n == t));
    // Templates are rebuilt, then instantiated, in order: those before the one at fault
    // passed its stage. When the driver names none, the stage fails for every template.
    let unnamed = format!("{said} (the driver does not say which template)");
    for step in [Step::Rebuild, Step::Instantiate] {
        for (i, t) in templates.iter().enumerate() {
            let case = CoreCase::Template(t.clone(), step);
            let step_phase = case.phase();
            if phase > step_phase || (phase == step_phase && at.is_some_and(|a| i < a)) {
                v.pass(&case);
            } else if phase == step_phase && at.is_none_or(|a| i == a) {
                v.set(&case, Err(failed(if at.is_some() { &said } else { &unnamed })));
            }
        }
    }
    if phase == Phase::Launches {
        match (&error, template) {
            (ReplayError::WeightWritten { .. }, _) => v.set(&CoreCase::WeightsUnchanged, Err(failed(&said))),
            (_, Some(t)) => v.set(&CoreCase::Template(t, Step::Outputs), Err(failed(&said))),
            (_, None) => {}
        }
    }
    Err(format!("the restore stopped in stage `{stage}`: {said}"))
}

/// The phase of the restore a stage belongs to; `None` for what comes before them all
/// (the context check, opening the core) and for the replay cases' own steps after a
/// restore. Exhaustive: a new stage must be placed here.
fn phase_of(stage: Stage) -> Option<Phase> {
    Some(match stage {
        Stage::Context | Stage::Open | Stage::OpenAndContext | Stage::Compare | Stage::MeasureFloors => return None,
        Stage::ReserveAndMap | Stage::MapPeers => Phase::Map,
        Stage::ModuleLoad => Phase::Modules,
        Stage::Poison | Stage::Upload | Stage::ContentsCheck | Stage::WritableCopies => Phase::Upload,
        Stage::Rebuild => Phase::Rebuild,
        Stage::Instantiate | Stage::Handover => Phase::Instantiate,
        Stage::Reset
        | Stage::Launch
        | Stage::ReadOutputs
        | Stage::WeightsCheck
        | Stage::PoisonIndependence
        | Stage::Speed
        | Stage::Draws
        | Stage::RankSync => Phase::Launches,
    })
}

#[cfg(test)]
mod tests {
    use gnomon_core::{cuda::CudaError, errors::ReplayError, replay::OutputCheck};

    use super::*;

    /// The status of case `id` among `got`.
    fn status(got: &[(String, Status)], id: &str) -> Status {
        got.iter().find(|(i, _)| i == id).map(|(_, s)| *s).unwrap_or_else(|| panic!("no {id}"))
    }

    fn statuses(failure: StageFailure) -> Vec<(String, Status)> {
        let templates = ["a", "b", "c"].map(String::from);
        let mut v = Verdicts::new("qualify/x", core_cases("qualify/x", &templates, &Profile::default(), None));
        let why = stopped(&mut v, &templates, failure).unwrap_err();
        v.unjudged = why;
        v.finish().into_iter().map(|r| (r.id.as_str().trim_start_matches("qualify/x/").to_owned(), r.status)).collect()
    }

    #[test]
    fn a_template_that_fails_to_rebuild_fails_alone_and_blocks_what_follows() {
        let error =
            ReplayError::Node { template: "b".into(), node: "n1".into(), source: CudaError::Unsupported("no".into()) };
        let got = statuses(StageFailure { stage: Stage::Rebuild, template: Some("b".into()), error });
        for passed in ["map", "upload", "modules", "template=a/rebuild"] {
            assert_eq!(status(&got, passed), Status::Passed, "{passed}");
        }
        assert_eq!(status(&got, "template=b/rebuild"), Status::Failed);
        for blocked in ["template=c/rebuild", "template=a/instantiate", "template=a/outputs", "determinism", "restore"]
        {
            assert_eq!(status(&got, blocked), Status::Blocked, "{blocked}");
        }
    }

    fn unsupported() -> ReplayError {
        ReplayError::Cuda(CudaError::Unsupported("no".into()))
    }

    /// Each stage decides its own case: the ones before it pass, its own fails, the rest
    /// are blocked; an address the driver will not give blocks the map instead.
    #[test]
    fn each_stage_fails_its_own_case() {
        for (stage, own) in
            [(Stage::ReserveAndMap, "map"), (Stage::ModuleLoad, "modules"), (Stage::ContentsCheck, "upload")]
        {
            let got = statuses(StageFailure { stage, template: None, error: unsupported() });
            let cases = ["map", "modules", "upload"];
            let at = cases.iter().position(|c| *c == own).unwrap();
            for (i, case) in cases.iter().enumerate() {
                let want = match i.cmp(&at) {
                    std::cmp::Ordering::Less => Status::Passed,
                    std::cmp::Ordering::Equal => Status::Failed,
                    std::cmp::Ordering::Greater => Status::Blocked,
                };
                assert_eq!(status(&got, case), want, "{stage}: {case}");
            }
            assert_eq!(status(&got, "template=a/rebuild"), Status::Blocked, "{stage}");
        }
        let far = CudaError::AddressNotHonoured { wanted: 1 << 41, got: 1 << 42, size: 1 << 26 };
        let got = statuses(StageFailure { stage: Stage::ReserveAndMap, template: None, error: ReplayError::Cuda(far) });
        assert_eq!(status(&got, "map"), Status::Blocked);
    }

    /// Instantiation in template order: those before the one at fault passed, it failed,
    /// those after are blocked; when the driver names none, every template's fails.
    #[test]
    fn instantiation_fails_the_template_at_fault() {
        let got =
            statuses(StageFailure { stage: Stage::Instantiate, template: Some("b".into()), error: unsupported() });
        let want = [("a", Status::Passed), ("b", Status::Failed), ("c", Status::Blocked)];
        for (t, s) in want {
            assert_eq!(status(&got, &format!("template={t}/instantiate")), s, "{t}");
            assert_eq!(status(&got, &format!("template={t}/rebuild")), Status::Passed, "{t}");
        }
        let got = statuses(StageFailure { stage: Stage::Instantiate, template: None, error: unsupported() });
        for t in ["a", "b", "c"] {
            assert_eq!(status(&got, &format!("template={t}/instantiate")), Status::Failed, "{t}");
        }
    }

    /// A core that cannot run on this device (the context check) leaves every case
    /// unjudged, with that reason.
    #[test]
    fn the_context_check_leaves_every_case_unjudged() {
        let templates = ["a"].map(String::from);
        let mut v = Verdicts::new("qualify/x", core_cases("qualify/x", &templates, &Profile::default(), None));
        let failure = StageFailure { stage: Stage::Context, template: None, error: unsupported() };
        assert_eq!(stopped(&mut v, &templates, failure).unwrap_err(), "the core cannot run on this device: no");
    }

    /// On a machine without a GPU the judge gives a record for every case, blocked with
    /// the reason.
    #[test]
    fn without_a_device_every_case_is_blocked_with_the_reason() {
        if gnomon_core::cuda::preflight().is_ok() {
            return; // A machine with a GPU restores the core instead: the GPU runs judge that.
        }
        let core = gnomon_fixtures::golden::v2().unwrap();
        let records = judge_core(core.path(), "qualify/g", None, None, &Profile::default());
        assert!(!records.is_empty());
        for r in &records {
            assert_eq!(r.status, Status::Blocked, "{}", r.id);
            assert!(r.reason.as_deref().unwrap_or("").starts_with("open device 0"), "{:?}", r.reason);
        }
    }

    #[test]
    fn a_weight_written_fails_weights_unchanged_and_a_failed_launch_fails_its_outputs() {
        let error = ReplayError::WeightWritten { template: "c".into(), buffer: "w".into() };
        let got = statuses(StageFailure { stage: Stage::WeightsCheck, template: Some("c".into()), error });
        assert!(got.contains(&("weights-unchanged".into(), Status::Failed)));
        assert!(got.contains(&("template=c/instantiate".into(), Status::Passed)));
        let error = ReplayError::Cuda(CudaError::Unsupported("launch failed".into()));
        let got = statuses(StageFailure { stage: Stage::Launch, template: Some("b".into()), error });
        assert!(got.contains(&("template=b/outputs".into(), Status::Failed)));
        assert!(got.contains(&("template=a/outputs".into(), Status::Blocked)));
    }

    fn output(template: &str, launch: u32, digest: &str) -> OutputCheck {
        OutputCheck {
            template: template.into(),
            buffer: "y".into(),
            launch,
            expected_sha256: "aa".repeat(32),
            actual_sha256: digest.repeat(32),
            bytes: Default::default(),
            blank: None,
        }
    }

    /// A core naming no CPU reference.
    const NO_REFERENCE: Reference<'static> = Reference { within: &|_| Ok(0.0), differences: &|_| None };

    /// Three launches of every template, all as expected, and the same again under the
    /// second poison; `change` plants what a test needs.
    fn judged(
        facts: &[TemplateFacts],
        change: impl FnOnce(&mut Vec<OutputCheck>, &mut Vec<OutputCheck>),
    ) -> Vec<(String, Status, Option<String>)> {
        judged_against(facts, &NO_REFERENCE, change)
    }

    /// [`judged`], the outputs held to `reference`.
    fn judged_against(
        facts: &[TemplateFacts],
        reference: &Reference,
        change: impl FnOnce(&mut Vec<OutputCheck>, &mut Vec<OutputCheck>),
    ) -> Vec<(String, Status, Option<String>)> {
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let mut v = Verdicts::new("qualify/x", core_cases("qualify/x", &names, &Profile::default(), None));
        let checked = facts.iter().filter(|t| t.unchecked.is_none());
        let mut outputs: Vec<OutputCheck> =
            checked.clone().flat_map(|t| (0..3).map(|l| output(t.name, l, "aa"))).collect();
        let mut repoisoned: Vec<OutputCheck> = checked.map(|t| output(t.name, 0, "aa")).collect();
        change(&mut outputs, &mut repoisoned);
        let launched = Launched { outputs: &outputs, repoisoned: &repoisoned, launches: 3 };
        judge_templates(&mut v, facts, &launched, &Agreements::default(), reference);
        let records = v.finish();
        let weights = records.iter().find(|r| r.id.as_str() == "qualify/x/weights-unchanged").expect("a record");
        let checked = facts.len() as f64 * 3.0;
        assert_eq!(
            weights.metrics.get("launches-checked").map(|m| m.value),
            Some(checked).filter(|_| weights.status == Status::Passed)
        );
        let strip = |r: CaseRecord| (r.id.as_str().trim_start_matches("qualify/x/").to_owned(), r.status, r.reason);
        records.into_iter().map(strip).collect()
    }

    fn facts(unchecked_b: bool) -> Vec<TemplateFacts<'static>> {
        let fact = |name, unchecked: Option<&'static str>| TemplateFacts { name, unchecked, expected: 1 };
        vec![fact("a", None), fact("b", unchecked_b.then_some("reads the clock")), fact("c", None)]
    }

    fn status_of(got: &[(String, Status, Option<String>)], id: &str) -> (Status, String) {
        let (_, status, reason) = got.iter().find(|(i, _, _)| i == id).unwrap_or_else(|| panic!("no {id}"));
        (*status, reason.clone().unwrap_or_default())
    }

    /// The facts of the v2 sample core: `decode-b1` checked with its one output,
    /// `prefill-b2` unchecked with the core's reason and nothing expected.
    #[test]
    fn template_facts_come_from_the_manifest() {
        let core = gnomon_fixtures::sample::v2_features();
        let got: Vec<_> = template_facts(&core.manifest).iter().map(|t| (t.name, t.unchecked, t.expected)).collect();
        let reason = "shows a programmatic edge; its output is decode-b1's";
        assert_eq!(got, [("decode-b1", None, 1), ("prefill-b2", Some(reason), 0)]);
    }

    #[test]
    fn a_completed_restore_judges_every_case() {
        let got = judged(&facts(false), |_, _| {});
        let not_passed: Vec<_> = got.iter().filter(|(_, s, _)| *s != Status::Passed).map(|(i, s, _)| (i, s)).collect();
        // The caller sets the stage cases and `restore` (with the metrics) around the
        // templates, each template's `attributes` from a rebuild read back on the device
        // and its `speed` from the restore's timings, and `random-draws` from its draws;
        // here they are left without a verdict after a completed restore.
        let mut around: Vec<String> = vec!["map".into(), "modules".into(), "upload".into()];
        for case in ["attributes", "speed"] {
            around.extend(["a", "b", "c"].map(|t| format!("template={t}/{case}")));
        }
        around.extend(["random-draws".into(), "restore".into()]);
        assert_eq!(not_passed, around.iter().map(|i| (i, &Status::Failed)).collect::<Vec<_>>());
    }

    /// A judge that forgets a template after a completed restore (here: it is handed only
    /// two of three) fails that template's cases; it never leaves them blocked.
    #[test]
    fn cases_left_without_a_verdict_after_a_restore_fail() {
        let two = &facts(false)[..2];
        let got = judged(two, |_, _| {});
        for case in ["template=c/rebuild", "template=c/instantiate", "template=c/outputs"] {
            let (status, reason) = status_of(&got, case);
            assert_eq!(status, Status::Failed, "{case}");
            assert!(reason.contains("gave this case no verdict"), "{reason}");
        }
    }

    #[test]
    fn a_missing_last_template_fails_its_outputs_and_the_self_check() {
        let got = judged(&facts(false), |outputs, repoisoned| {
            outputs.retain(|o| o.template != "c");
            repoisoned.retain(|o| o.template != "c");
        });
        assert_eq!(
            status_of(&got, "template=c/outputs"),
            (Status::Failed, "template `c` gave 0 of its 1 expected outputs".into())
        );
        assert_eq!(status_of(&got, "checker-rejects-wrong-outputs").0, Status::Failed);
        assert_eq!(status_of(&got, "template=c/rebuild").0, Status::Passed);
    }

    /// A checked template the core expects nothing of, and that gave nothing: validation
    /// refuses such a core, and the judge fails its `outputs` on its own all the same.
    #[test]
    fn a_checked_template_with_no_expected_output_fails_its_outputs() {
        let mut facts = facts(false);
        facts[2].expected = 0;
        let got = judged(&facts, |outputs, repoisoned| {
            outputs.retain(|o| o.template != "c");
            repoisoned.retain(|o| o.template != "c");
        });
        let (status, reason) = status_of(&got, "template=c/outputs");
        assert_eq!(status, Status::Failed);
        assert!(reason.contains("template `c` is checked but the core expects no output of it"), "{reason}");
        assert_eq!(status_of(&got, "template=a/outputs").0, Status::Passed);
    }

    /// Two outputs of one template differ: `outputs` names both, so a reader sees which
    /// differ together (a collective's result and its missing-peer mask, say), and says
    /// where one departs from the CPU reference where the core names one.
    #[test]
    fn every_differing_output_of_a_template_is_named() {
        let mut facts = facts(false);
        facts[0].expected = 2;
        let explained = |o: &OutputCheck| (o.buffer == "y").then(|| "against the CPU reference, 1 of 4 differ".into());
        let reference = Reference { within: &|_| Ok(0.0), differences: &explained };
        let got = judged_against(&facts, &reference, |outputs, _| {
            let mask = OutputCheck { buffer: "missing".into(), actual_sha256: "cc".repeat(32), ..output("a", 0, "aa") };
            outputs.push(mask);
            outputs
                .iter_mut()
                .filter(|o| o.template == "a" && o.buffer == "y")
                .for_each(|o| o.actual_sha256 = "bb".repeat(32));
        });
        let (status, reason) = status_of(&got, "template=a/outputs");
        assert_eq!(status, Status::Failed);
        assert!(
            reason.contains("output `y` has SHA-256 bbbb")
                && reason.contains("aa (against the CPU reference, 1 of 4 differ); template `a` output `missing` has")
                && reason.ends_with("aa"),
            "{reason}"
        );
    }

    /// Launch 0 differs from launches 1 and 2, which agree: only a check that compares the
    /// first launch finds it. A launch that is missing fails too.
    #[test]
    fn determinism_compares_every_launch_with_the_first() {
        let got = judged(&facts(false), |outputs, _| {
            outputs
                .iter_mut()
                .filter(|o| o.template == "b" && o.launch == 0)
                .for_each(|o| o.actual_sha256 = "bb".repeat(32));
        });
        let (status, reason) = status_of(&got, "determinism");
        assert_eq!(status, Status::Failed);
        assert!(reason.starts_with("launch 1 against launch 0: template `b` output `y` has SHA-256 aaaa"), "{reason}");
        let got = judged(&facts(false), |outputs, _| outputs.retain(|o| !(o.template == "a" && o.launch == 1)));
        assert_eq!(
            status_of(&got, "determinism"),
            (Status::Failed, "template `a` output `y`: launches [0, 2] were compared, not 0..3".into())
        );
    }

    /// An unchecked template's outputs are skipped with the core's reason, and it is left
    /// out of the checks that compare outputs.
    #[test]
    fn an_unchecked_template_is_skipped_never_passed() {
        let got = judged(&facts(true), |_, _| {});
        assert_eq!(
            status_of(&got, "template=b/outputs"),
            (Status::Skipped, "the core declares it unchecked: reads the clock".into())
        );
        for case in ["determinism", "checker-rejects-wrong-outputs", "poison-independence", "template=b/rebuild"] {
            assert_eq!(status_of(&got, case).0, Status::Passed, "{case}");
        }
    }

    /// The metrics each verdict carries: outputs compared per template, wrong digests the
    /// checker refused, outputs compared under the second poison.
    #[test]
    fn verdicts_carry_what_they_counted() {
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let mut v = Verdicts::new("qualify/x", core_cases("qualify/x", &names, &Profile::default(), None));
        let facts = facts(true);
        let outputs: Vec<OutputCheck> = ["a", "c"].iter().flat_map(|t| (0..3).map(|l| output(t, l, "aa"))).collect();
        let repoisoned = vec![output("a", 0, "aa"), output("c", 0, "aa")];
        let launched = Launched { outputs: &outputs, repoisoned: &repoisoned, launches: 3 };
        judge_templates(&mut v, &facts, &launched, &Agreements::default(), &NO_REFERENCE);
        let records = v.finish();
        let metric = |id: &str, name: &str| {
            let r = records.iter().find(|r| r.id.as_str() == format!("qualify/x/{id}")).unwrap();
            r.metrics.get(name).map(|m| m.value)
        };
        assert_eq!(metric("template=a/outputs", "outputs-compared"), Some(1.0));
        assert_eq!(metric("checker-rejects-wrong-outputs", "wrong-digests-refused"), Some(2.0));
        assert_eq!(metric("poison-independence", "outputs-compared"), Some(2.0));
    }

    /// Poison-independence compares the first launch with the launch under the second
    /// poison, whatever later launches gave (determinism judges those).
    #[test]
    fn poison_independence_compares_the_first_launch() {
        let got = judged(&facts(false), |outputs, _| {
            outputs
                .iter_mut()
                .filter(|o| o.template == "a" && o.launch > 0)
                .for_each(|o| o.actual_sha256 = "bb".repeat(32));
        });
        assert_eq!(status_of(&got, "determinism").0, Status::Failed);
        assert_eq!(status_of(&got, "poison-independence").0, Status::Passed);
    }

    #[test]
    fn outputs_that_change_under_another_poison_fail_poison_independence() {
        let got = judged(&facts(false), |_, repoisoned| repoisoned[2].actual_sha256 = "cc".repeat(32));
        let (status, reason) = status_of(&got, "poison-independence");
        assert_eq!(status, Status::Failed);
        assert!(reason.starts_with("template `c` output `y` depends on memory it never wrote"), "{reason}");
        let got = judged(&facts(false), |_, repoisoned| repoisoned.truncate(1));
        assert!(status_of(&got, "poison-independence").1.contains("was not launched again"));
    }

    #[test]
    fn the_self_check_fails_a_checker_that_skips_a_template() {
        let output = |template: &str| OutputCheck {
            template: template.into(),
            buffer: "y".into(),
            launch: 0,
            expected_sha256: "ab".repeat(32),
            actual_sha256: "ab".repeat(32),
            bytes: Default::default(),
            blank: None,
        };
        let outputs = vec![output("a"), output("b")];
        let agreements = Agreements::default();
        assert!(checker_rejects_wrong_outputs(&["a", "b"], &outputs, &agreements).is_ok());
        let missing = checker_rejects_wrong_outputs(&["a", "b", "c"], &outputs, &agreements).unwrap_err();
        assert_eq!(missing, Verdict::Failed("template `c` produced no output to check".into()));
    }
}
