//! `replay/`: export from retained templates and native replay at fixed addresses, over
//! shard cap {64 GiB, 64 MiB} × handover {exit, direct} × workload; bad cores refused on
//! the GPU path; the smallest reservation the driver places where asked; and the upload
//! with its copies lagging the readers.

mod bad_core;
mod cold_start;
mod native;
mod outcome;
mod peers;
mod pipeline;
mod rank_set;
mod reservation;
mod upload;

use std::{path::Path, process::Command};

use gnomon_format::{
    shards::{GIB, MIB},
    Core,
};

use gnomon_core::replay::{drop_shards_from_cache, Executables, Launches};
use gnomon_fixtures::workloads::{self, all, Workload};

pub use cold_start::cold_start;
pub use native::{export_workload, replay_core};
pub use outcome::StepOutcome;
pub use peers::peer_probe;
pub use pipeline::ExportOptions;
use pipeline::{export, Handover};

use crate::{Case, Ctx, Metrics, Verdict};

const CLAIM: &str = "native-replay";
const CAPS: [(&str, u64); 2] = [("64GiB", 64 * GIB), ("64MiB", 64 * MIB)];

/// The replay family; `nightly` adds the workloads too large for the default run.
pub fn cases(nightly: bool) -> Vec<Case> {
    let mut cases = Vec::new();
    let extra = if nightly { workloads::nightly() } else { Vec::new() };
    for w in all().into_iter().chain(extra.iter().copied()) {
        for (cap_name, cap) in CAPS {
            for (handover_name, handover) in [("exit", Handover::Exit), ("direct", Handover::Direct)] {
                let id = format!("replay/{}/cap={cap_name}/handover={handover_name}", w.name());
                let case = Case::gpu(&id, CLAIM, move |ctx| match handover {
                    Handover::Exit => exit_handover(w, cap, Cache::AsWritten, ctx),
                    Handover::Direct => direct_handover(w, cap, ctx),
                });
                cases.push(case.with_parameter("cap", cap_name).with_parameter("handover", handover_name));
            }
        }
    }
    // The nightly workloads restore once more from storage, not from the page cache.
    for w in extra {
        for (cap_name, cap) in CAPS {
            let id = format!("replay/{}/cap={cap_name}/handover=exit/cache=cold", w.name());
            let case = Case::gpu(&id, CLAIM, move |ctx| exit_handover(w, cap, Cache::Dropped, ctx));
            cases.push(
                case.with_parameter("cap", cap_name).with_parameter("handover", "exit").with_parameter("cache", "cold"),
            );
        }
    }
    cases.extend(bad_core::cases());
    cases.extend(reservation::cases());
    cases.extend(peers::cases());
    cases.extend(rank_set::cases());
    cases.extend(upload::cases());
    cases
}

/// Where an exit handover's replay finds the shard files: in the page cache, as the
/// export left them, or dropped from it, so the restore reads from storage.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cache {
    AsWritten,
    Dropped,
}

fn scratch() -> Result<tempfile::TempDir, Verdict> {
    tempfile::tempdir().map_err(|e| Verdict::Blocked(format!("no scratch directory: {e}")))
}

/// `workload`'s core exported at a 64 MiB cap into `SCRATCH/core`, the exporting
/// session ended so its arena no longer holds the addresses; the scratch directory goes
/// when the returned value does.
pub(crate) fn exported_core(workload: &str) -> Result<(tempfile::TempDir, std::path::PathBuf), Verdict> {
    let tmp = scratch()?;
    let dir = tmp.path().join("core");
    let workload = workloads::by_name(workload).expect("a built-in workload");
    drop(export(workload, ExportOptions::at_cap(64 * MIB), &dir, Handover::Exit)?);
    Ok((tmp, dir))
}

/// The exporter runs as its own process and exits; the core is moved to another path;
/// a fresh process replays it from disk, and another starts the workload without it.
fn exit_handover(w: &dyn Workload, cap: u64, cache: Cache, ctx: &mut Ctx) -> Result<(), Verdict> {
    let tmp = scratch()?;
    let (written, moved) = (tmp.path().join("exported"), tmp.path().join("elsewhere").join("core"));
    let mut metrics = Metrics::new();
    let export_args = ["export", w.name(), "--quiet", "--cap", &cap.to_string(), "--out"].map(String::from);
    let outcome = helper(&export_args, &written, &tmp.path().join("export.json"));
    outcome.into_result(&mut metrics)?;
    std::fs::create_dir_all(moved.parent().expect("has a parent")).map_err(|e| Verdict::Blocked(e.to_string()))?;
    std::fs::rename(&written, &moved).map_err(|e| Verdict::Blocked(format!("move the core: {e}")))?;
    // The restore, then the same start without the core: each a fresh process that finds
    // the shard files as the export left them, or dropped from the page cache.
    let mut fresh = |args: &[String], result: &str| {
        from_cache(cache, &moved)?;
        helper(args, &moved, &tmp.path().join(result)).into_result(&mut metrics)
    };
    let replayed = fresh(&["replay".into()], "replay.json");
    let rival = fresh(&["__cold-start".into(), w.name().into()], "cold-start.json");
    ctx.metrics(with_cold_start_speedup(metrics));
    replayed.and(rival)
}

/// Drops the core's shard files from the page cache where `cache` asks for it.
fn from_cache(cache: Cache, dir: &Path) -> Result<(), Verdict> {
    if cache == Cache::Dropped {
        let core = Core::open_for_upload(dir).map_err(|e| Verdict::Failed(e.to_string()))?;
        drop_shards_from_cache(&core).map_err(|e| Verdict::Blocked(e.to_string()))?;
    }
    Ok(())
}

/// Runs `gnomon ARGS DIR --result RESULT` and reads its outcome.
fn helper(args: &[String], dir: &Path, result: &Path) -> StepOutcome {
    let exe = std::env::current_exe().expect("the running gnomon binary");
    let status = Command::new(exe).args(args).arg(dir).arg("--result").arg(result).status();
    StepOutcome::read(result, &format!("`gnomon {}`", args.join(" ")), status)
}

/// In one process: export, then hand the live executables to the native side, which
/// validates the written core and launches them without re-instantiating.
fn direct_handover(w: &dyn Workload, cap: u64, ctx: &mut Ctx) -> Result<(), Verdict> {
    let tmp = scratch()?;
    let dir = tmp.path().join("core");
    let exported = export(w, ExportOptions::at_cap(cap), &dir, Handover::Direct)?;
    let mut metrics = exported.metrics;
    let started = std::time::Instant::now();
    let (core, open) = native::open_timed(&dir)?;
    let handed = Executables::Handed(exported.handed);
    let device = &exported.session.ctx;
    // The exporter's context is handed over with its executables: none is made.
    let replayed = native::replay_and_check(&core, device, handed, Launches::default(), started, vec![open], 0.0);
    let result = replayed.map(|replayed| metrics.extend(replayed));
    ctx.metrics(metrics);
    result
}

/// `cold-start-speedup`: starting without the core (`nocore-ready-s`) over restoring it
/// (`restore-total-s`), each in a fresh process; above 1 the core wins.
fn with_cold_start_speedup(mut metrics: Metrics) -> Metrics {
    let value = |name: &str| metrics.get(name).map(|m| m.value);
    if let (Some(nocore), Some(restore)) = (value("nocore-ready-s"), value("restore-total-s")) {
        metrics.extend([crate::measured("cold-start-speedup", nocore / restore, "1")]);
    }
    metrics
}
