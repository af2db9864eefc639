//! The native side: replay a core and judge what it produced, bitwise against the
//! exported expectations and within tolerance against the CPU reference the core names.
//! Also the bodies of `gnomon replay` and `gnomon export`.

use std::{path::Path, time::Instant};

use gnomon_format::Core;

use gnomon_core::{
    cuda::{Context, CudaError},
    errors::ReplayError,
    replay::{
        module_floor_s, replay_launching, shards_cached_fraction, start, Executables, Launches, OutputCheck, RankLink,
        ReplayReport, Stage, StageTimes, StartError,
    },
};
use gnomon_fixtures::workloads::{
    self,
    allreduce::{is_rank_set, rank_set},
    by_name,
};

use super::{
    pipeline::{export, ExportOptions, Handover},
    rank_set,
};
use crate::{
    measured,
    restored::{
        floor_metrics, floors_as_found, rebuilt, replay_metrics, start_metrics, start_stages, within_reference,
        Unavoidable,
    },
    Metrics, Verdict,
};

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
        measured("peak-host-rss-bytes", report.host_peaks.overall() as f64, "B"),
    ]);
    Ok(metrics)
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
