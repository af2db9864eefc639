//! The commands that run one step on a GPU in a process of its own: a user's `replay`
//! and `export`, and the children the runner starts (`__qualify-core`, `__cold-start`,
//! `__peer-probe`). The step is a function of `gnomon-cases` that returns its outcome;
//! here it is said on standard error and written, atomically, where the parent reads it.

use std::path::Path;

use gnomon_cases::{
    qualify::{judge_core, Profile},
    replay::{cold_start, export_workload, peer_probe, replay_core, StepOutcome},
    Metrics, Verdict,
};
use gnomon_core::replay::{RankLink, MEETING_LIMIT};
use gnomon_format::shards::MIB;
use gnomon_reports::exit_codes;

use crate::cli::{ColdStartArgs, ExportArgs, PeerProbeArgs, QualifyCoreArgs, ReplayArgs};

pub fn replay(args: &ReplayArgs) -> i32 {
    let ranks = args.meet.clone().map(|dir| RankLink { dir, limit: args.meet_limit.unwrap_or(MEETING_LIMIT) });
    finish(replay_core(&args.core, ranks), args.result.as_deref(), &format!("replay {}", args.core.display()))
}

pub fn export(args: &ExportArgs) -> i32 {
    gnomon_core::progress::set_quiet(args.quiet);
    let exported = match export_workload(&args.workload, args.options(), &args.out) {
        Ok(exported) => exported,
        Err(usage) => return usage_error(&usage),
    };
    let what = match args.tp {
        1 => format!("export `{}` at cap {} MiB to {}", args.workload, args.cap / MIB, args.out.display()),
        world => format!("export `{}` --tp {world}", args.workload),
    };
    finish(exported, args.result.as_deref(), &what)
}

pub fn cold_start_step(args: &ColdStartArgs) -> i32 {
    let what = format!("start {} without its core", args.workload);
    finish(cold_start(&args.workload, &args.core), args.result.as_deref(), &what)
}

pub fn peer_probe_step(args: &PeerProbeArgs) -> i32 {
    finish(peer_probe(args.rank, &args.dir), args.result.as_deref(), &format!("rank {} of the peer probe", args.rank))
}

/// The records of one core's cases, as a JSON array in `--result-file`.
pub fn qualify_core(args: &QualifyCoreArgs) -> i32 {
    let profile = match args.profile.as_deref().map(Profile::load).transpose() {
        Ok(p) => p.unwrap_or_default(),
        Err(e) => return usage_error(&e),
    };
    let records = judge_core(&args.core, &args.prefix, args.device, args.meet.as_deref(), &profile);
    let json = serde_json::to_vec(&records).expect("records always serialize");
    write(&args.result_file, &json).unwrap_or(exit_codes::SUCCESS)
}

/// Says the outcome of `what` and writes it to `result` when given.
fn finish(outcome: Result<Metrics, Verdict>, result: Option<&Path>, what: &str) -> i32 {
    let outcome = StepOutcome::new(outcome);
    eprintln!("gnomon: {what}: {}", outcome.reason.as_deref().unwrap_or("passed"));
    let json = serde_json::to_vec_pretty(&outcome).expect("an outcome always serializes");
    result.and_then(|path| write(path, &json)).unwrap_or_else(|| outcome.exit_code())
}

/// `None` once written; else the exit code of a file that could not be.
fn write(path: &Path, bytes: &[u8]) -> Option<i32> {
    let e = gnomon_reports::write_atomically(path, bytes).err()?;
    usage_error(&format!("could not write {}: {e}", path.display())).into()
}

fn usage_error(said: &str) -> i32 {
    eprintln!("gnomon: {said}");
    exit_codes::USAGE
}
