//! `qualify/`: a port's cores judged as a release gate, by `gnomon qualify`. A target is
//! a core or a rank set ([`Target`]). Validation runs in the runner's process, so it needs
//! no GPU; everything else about a core is judged by one child process that restores it
//! once ([`judge`]), and the ranks of a set are restored at once, each on its own GPU or
//! all on one ([`Placement`]). Ranks whose kernels reach into each other's arenas meet
//! in a directory of the batch's own to share their memory and launch together.

mod agreement;
mod case;
mod draws;
mod judge;
mod outputs;
mod profile;
mod speed;
mod target;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use gnomon_format::{account::Account, tensor_parallel, Core, Manifest};
use gnomon_reports::{CaseRecord, Status};

use case::CoreCase;
pub use judge::judge_core;
pub use profile::{Budget, Profile};
pub use target::{CoreDir, Target};

use crate::{measured, Batch, BatchChild, Case, Requirement, Verdict};

const CLAIM: &str = "port-qualification";

/// Where the ranks of a set run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// Rank R on GPU R, as a tensor-parallel server runs them.
    #[default]
    OwnGpu,
    /// Every rank on GPU 0, each a process of its own: the whole path on one GPU.
    OneGpu,
}

/// Every case for `targets`, in id order.
pub fn cases(targets: &[Target], profile: &Profile, placement: Placement) -> Vec<Case> {
    let mut cases = Vec::new();
    for target in targets {
        let prefix = format!("qualify/{}", target.name());
        match target {
            Target::Core { core, .. } => {
                cases.push(validate_case(&prefix, core));
                cases.extend(batch(vec![child(&prefix, core, None, profile)], None, 1, None));
            }
            Target::RankSet { ranks, .. } => {
                cases.push(ranks_agree_case(&prefix, ranks));
                let world = ranks.len() as u32;
                let gpus = if placement == Placement::OneGpu { 1 } else { world };
                let meeting = meeting_for(ranks);
                let meet = meeting.as_ref().map(|d| d.path());
                let mut children = Vec::new();
                for (r, core) in ranks.iter().enumerate() {
                    let rank_prefix = format!("{prefix}/rank={r}");
                    cases.push(validate_case(&rank_prefix, core).with_parameter("rank", r.to_string()));
                    let device = if placement == Placement::OneGpu { 0 } else { r as u32 };
                    children.push(child(&rank_prefix, core, Some(RankChild { rank: r as u32, device, meet }), profile));
                }
                let concurrent = Case::judged_by_batch(&format!("{prefix}/concurrent"), CLAIM, Requirement::Gpus(gpus));
                cases.extend(batch(children, Some(concurrent), gpus, meeting));
            }
        }
    }
    cases.sort_by(|a, b| a.id.cmp(&b.id));
    cases
}

/// The cases one core's child judges, after `PREFIX/`, in the order it judges them. A
/// rank (`rank` set) also proves which GPU it ran on.
pub(crate) fn core_cases(prefix: &str, templates: &[String], profile: &Profile, rank: Option<u32>) -> Vec<Case> {
    let budgets = profile.budgets_for(target_of(prefix)).into_keys();
    CoreCase::all(templates, budgets, rank.is_some())
        .into_iter()
        .map(|core_case| {
            let case = Case::judged_by_batch(&format!("{prefix}/{core_case}"), CLAIM, Requirement::Gpus(1));
            let case = core_case.template().into_iter().fold(case, |c, t| c.with_parameter("template", t.to_owned()));
            rank.into_iter().fold(case, |c, r| c.with_parameter("rank", r.to_string()))
        })
        .collect()
}

/// The target a case prefix names: `qualify/TARGET[/rank=R]`.
pub(crate) fn target_of(prefix: &str) -> &str {
    prefix.split('/').nth(1).unwrap_or_default()
}

/// A rank's child: its rank, its GPU, and where it meets the others when it maps their memory.
struct RankChild<'m> {
    rank: u32,
    device: u32,
    meet: Option<&'m Path>,
}

/// The directory where the ranks of a set meet, when any of them maps its peers' memory.
/// (Made fresh for the run; a set that cannot have one is replayed without, and its ranks
/// refuse their peers' ranges.)
fn meeting_for(ranks: &[CoreDir]) -> Option<tempfile::TempDir> {
    let maps_peers = ranks.iter().any(|c| c.manifest.as_ref().is_some_and(|m| !m.peers.is_empty()));
    maps_peers.then(|| tempfile::Builder::new().prefix("gnomon-ranks-").tempdir().ok()).flatten()
}

/// The child that restores `core` and judges its cases: for a rank, on its GPU.
fn child(prefix: &str, core: &CoreDir, rank: Option<RankChild<'_>>, profile: &Profile) -> BatchChild {
    let mut args = vec!["__qualify-core".to_owned(), core.dir.display().to_string(), "--prefix".into(), prefix.into()];
    if let Some(r) = &rank {
        args.extend(["--device".to_owned(), r.device.to_string()]);
        args.extend(r.meet.iter().flat_map(|d| ["--meet".to_owned(), d.display().to_string()]));
    }
    args.extend(profile.path.iter().flat_map(|p| ["--profile".to_owned(), p.display().to_string()]));
    BatchChild { args, cases: core_cases(prefix, &core.templates(), profile, rank.map(|r| r.rank)) }
}

/// The runner's cases of one batch: every child's, and `concurrent` for a rank set,
/// each needing `gpus` GPUs. `meeting` lives as long as the batch.
fn batch(
    children: Vec<BatchChild>,
    concurrent: Option<Case>,
    gpus: u32,
    meeting: Option<tempfile::TempDir>,
) -> Vec<Case> {
    let needing = |c: &Case| c.clone().requiring(Requirement::Gpus(gpus));
    let mut listed: Vec<Case> = children.iter().flat_map(|c| &c.cases).map(needing).collect();
    listed.extend(concurrent.clone());
    let combine = Box::new(move |records: &[CaseRecord]| {
        let _removed_with_the_batch = &meeting;
        concurrent.iter().map(|c| overlapped(c, records)).collect()
    });
    let batch = Arc::new(Batch { children, combine });
    listed.into_iter().map(|c| c.in_batch(&batch)).collect()
}

/// Whether every rank's restore-and-launch window overlapped the others': the ranks of a
/// set must run at the same time, as they would in a tensor-parallel server.
fn overlapped(case: &Case, records: &[CaseRecord]) -> CaseRecord {
    let window =
        |r: &CaseRecord| Some((r.metrics.get("window-start-unix-s")?.value, r.metrics.get("window-end-unix-s")?.value));
    let devices: Vec<&CaseRecord> = records.iter().filter(|r| r.id.as_str().ends_with("/device")).collect();
    let windows: Option<Vec<(f64, f64)>> = devices.iter().map(|r| window(r)).collect();
    let Some(w) = windows.filter(|w| !w.is_empty()) else {
        return case.record(Status::Blocked, Some("a rank gave no replay window".to_owned()));
    };
    let latest_start = w.iter().map(|(s, _)| *s).fold(f64::MIN, f64::max);
    let earliest_end = w.iter().map(|(_, e)| *e).fold(f64::MAX, f64::min);
    let record = match latest_start < earliest_end {
        true => case.record(Status::Passed, None),
        false => case.record(Status::Failed, Some(format!("the ranks' replays did not overlap: windows {w:?}"))),
    };
    CaseRecord { metrics: [measured("overlap-s", earliest_end - latest_start, "s")].into(), ..record }
}

/// Every rule of the format, file hashes included, in the runner's process: no GPU needed.
fn validate_case(prefix: &str, core: &CoreDir) -> Case {
    let (dir, parsed) = (core.dir.clone(), core.manifest.clone());
    Case::new(&format!("{prefix}/validate"), CLAIM, move |ctx| {
        // The target's parse is validated as it is; only an unreadable one is read again,
        // for the reader's words.
        let opened = match parsed.clone() {
            Some(m) => Core::validated(&dir, m),
            None => Core::open(&dir),
        };
        let core = opened.map_err(|e| Verdict::Failed(e.to_string()))?;
        let account = Account::of(core.manifest());
        ctx.metrics(
            [
                measured("templates", account.templates as f64, "1"),
                measured("nodes", account.nodes as f64, "1"),
                measured("stored-bytes", account.stored_bytes as f64, "B"),
            ]
            .into(),
        );
        Ok(())
    })
}

/// The ranks of a set agree on everything but their data.
fn ranks_agree_case(prefix: &str, ranks: &[CoreDir]) -> Case {
    let parsed: Vec<(PathBuf, Option<Manifest>)> = ranks.iter().map(|c| (c.dir.clone(), c.manifest.clone())).collect();
    Case::new(&format!("{prefix}/ranks-agree"), CLAIM, move |_| {
        // A rank whose manifest the target could not read is read again, for the reader's words.
        let read = |d: &Path| gnomon_format::read_manifest(d).map_err(|e| Verdict::Failed(e.to_string()));
        let mut manifests = Vec::with_capacity(parsed.len());
        for (dir, manifest) in &parsed {
            manifests.push(match manifest {
                Some(m) => std::borrow::Cow::Borrowed(m),
                None => std::borrow::Cow::Owned(read(dir)?),
            });
        }
        tensor_parallel::check(&manifests.iter().map(|m| m.as_ref()).collect::<Vec<_>>())
            .map_err(|e| Verdict::Failed(e.to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device_record(rank: u32, start: f64, end: f64) -> CaseRecord {
        let case = Case::judged_by_batch(&format!("qualify/s/rank={rank}/device"), CLAIM, Requirement::Gpus(2));
        let metrics = [measured("window-start-unix-s", start, "s"), measured("window-end-unix-s", end, "s")];
        CaseRecord { metrics: metrics.into(), ..case.record(Status::Passed, None) }
    }

    #[test]
    fn a_prefix_names_its_target() {
        assert_eq!(target_of("qualify/decode"), "decode");
        assert_eq!(target_of("qualify/tp2/rank=1"), "tp2");
    }

    #[test]
    fn ranks_must_overlap_in_time() {
        let case = Case::judged_by_batch("qualify/s/concurrent", CLAIM, Requirement::Gpus(2));
        let together = overlapped(&case, &[device_record(0, 10.0, 12.0), device_record(1, 11.0, 13.0)]);
        assert_eq!((together.status, together.metrics["overlap-s"].value), (Status::Passed, 1.0));
        let one_after_another = overlapped(&case, &[device_record(0, 10.0, 12.0), device_record(1, 12.5, 13.0)]);
        assert_eq!(one_after_another.status, Status::Failed);
        let touching = overlapped(&case, &[device_record(0, 10.0, 12.0), device_record(1, 12.0, 13.0)]);
        assert_eq!(touching.status, Status::Failed, "one ending as the other starts is not together");
        let no_window = overlapped(
            &case,
            &[device_record(0, 10.0, 12.0), CaseRecord { metrics: Default::default(), ..device_record(1, 0.0, 0.0) }],
        );
        assert_eq!(no_window.status, Status::Blocked);
    }
}
