//! `replay/allreduce/`: a rank set whose kernels reach into each other's arenas (issue
//! 27). The exporter holds every rank in one process: each rank's arena at its own fixed
//! address, mapped shareable, and each rank's windows onto its peers' arenas mapped from
//! the same memory; it captures each rank's step, runs the ranks eagerly at once for the
//! expectations (checked bit for bit against the CPU reference), then launches the
//! captured graphs of all ranks at once, several times from the loaded state, to show the
//! flags reset between launches. Replay runs one process per rank on GPU 0; the ranks meet
//! to share their memory and launch together (H200 baseline:
//! `baselines/h200-sm90-580.159.04-ranks/`).

use std::{path::Path, time::Instant};

use gnomon_format::{
    buffers_end, hash_hex, shards::GIB, Arena, Buffer, Expectation, OutputDigest, PeerRange, RecordedFlags,
};

use gnomon_core::{
    cuda::{Context, RetainedGraph},
    export::Exporter,
    replay::{map_own_range, LoadedState},
    translate::Instantiate,
};
use gnomon_fixtures::workloads::{allreduce::AllReduceRank, Contents, Workload};

use super::{
    helper,
    peers::{gnomon_command, run_ranks},
    pipeline::{
        blocked, core_context, core_state, digest_within, failed, layout, module_images, open_session, ExportOptions,
        Session, ARENA_BASE,
    },
    scratch,
};
use crate::{measured, Case, Metrics, Verdict};

const CLAIM: &str = "peer-mapping";
/// Rank R's arena lies at `ARENA_BASE + R × RANK_STRIDE`: apart, since the exporter maps
/// them all in one process.
const RANK_STRIDE: u64 = 64 * GIB;
/// Rank R's window onto rank P lies at its arena's base + `WINDOWS_AT + P × WINDOW_STRIDE`.
const WINDOWS_AT: u64 = 16 * GIB;
const WINDOW_STRIDE: u64 = 4 * GIB;
/// Launches of the captured graphs, all ranks at once, before the core is written.
const CHECK_LAUNCHES: u32 = 3;
/// How long the absent-rank case lets rank 0 wait for rank 1.
const ABSENT_LIMIT: &str = "5s";

pub fn cases() -> Vec<Case> {
    let both_ranks = |workload: &'static str| {
        let id = format!("replay/{workload}/tp=2/handover=exit/ranks-on-one-gpu");
        Case::gpu(&id, CLAIM, move |ctx| {
            let tmp = scratch()?;
            let (metrics, outcome) = export_then_replay(tmp.path(), workload, &[0, 1])?;
            ctx.metrics(metrics);
            outcome
        })
    };
    let absent = Case::gpu("replay/allreduce/tp=2/rank-1-absent", CLAIM, |ctx| {
        let tmp = scratch()?;
        let (metrics, outcome) = export_then_replay(tmp.path(), "allreduce", &[0])?;
        ctx.metrics(metrics);
        named_absent(outcome)
    });
    [both_ranks("allreduce"), both_ranks("allreduce-two-shot"), absent].map(|c| c.with_parameter("tp", "2")).into()
}

/// Exports the two-rank set of `workload` in a helper process, then replays `ranks` of it
/// at once, each a process on GPU 0.
fn export_then_replay(dir: &Path, workload: &str, ranks: &[u32]) -> Result<(Metrics, Result<(), Verdict>), Verdict> {
    let (core, meet, results) = (dir.join("core"), dir.join("meet"), dir.join("replays"));
    std::fs::create_dir_all(&results).map_err(|e| Verdict::Blocked(format!("scratch: {e}")))?;
    let mut metrics = Metrics::new();
    let export = ["export", workload, "--quiet", "--tp", "2", "--out"].map(String::from);
    helper(&export, &core, &dir.join("export.json")).into_result(&mut metrics)?;
    let replays = ranks.iter().map(|&rank| {
        let mut replay = gnomon_command()?;
        replay.arg("replay").arg(core.join(format!("rank-{rank}"))).arg("--meet").arg(&meet);
        // Alone, a rank is told to give up on its peer sooner than the default limit.
        if ranks.len() == 1 {
            replay.args(["--meet-limit", ABSENT_LIMIT]);
        }
        Ok((rank, replay))
    });
    let (replayed, outcome) = run_ranks(replays.collect::<Result<_, Verdict>>()?, &results);
    metrics.extend(replayed);
    Ok((metrics, outcome))
}

/// Rank 0 alone must fail within its limit, naming rank 1.
fn named_absent(outcome: Result<(), Verdict>) -> Result<(), Verdict> {
    match outcome {
        Err(Verdict::Failed(why)) if why.contains("rank 1 did not") => Ok(()),
        Err(Verdict::Blocked(why)) => Err(Verdict::Blocked(why)),
        Ok(()) => Err(Verdict::Failed("rank 0 replayed without rank 1: its launches waited for nobody".into())),
        Err(other) => {
            Err(Verdict::Failed(format!("rank 0 alone failed without naming rank 1: {}", other.into_status().1)))
        }
    }
}

/// Where rank `r` of a set maps rank `p`'s memory.
fn window(r: u32, p: u32) -> u64 {
    ARENA_BASE + u64::from(r) * RANK_STRIDE + WINDOWS_AT + u64::from(p) * WINDOW_STRIDE
}

/// `gnomon export allreduce --tp N`: every rank's core under `dir/rank-R`.
pub fn export_rank_set(ranks: &'static [AllReduceRank], cap: u64, dir: &Path) -> Result<Metrics, Verdict> {
    let started = Instant::now();
    let ctx = Context::new(0).map_err(blocked("open device 0"))?;
    let world = ranks.len() as u32;
    let inits = ranks[0].buffers();
    let (buffers, arena) = layout(&inits, cap, &ctx)?;
    // Every rank has the same layout at its own base; a peer maps what a rank uses.
    let used = buffers_end(&buffers, arena.granularity);
    let arena_of = |r: u32| Arena { base: ARENA_BASE + u64::from(r) * RANK_STRIDE, ..arena };
    let peers_of = |r: u32| -> Vec<PeerRange> {
        let others = (0..world).filter(move |&p| p != r);
        others.map(|p| PeerRange { rank: p, offset: 0, size: used, address: window(r, p) }).collect()
    };
    let mut sessions = Vec::new();
    for w in ranks {
        sessions.push(open_session(w, &ctx, &w.buffers(), &buffers, &arena_of(w.rank), &peers_of(w.rank))?);
    }
    for w in ranks {
        for range in peers_of(w.rank) {
            let peer = &sessions[range.rank as usize].mapping;
            let mapped = map_own_range(&ctx, &range, peer, arena_of(range.rank).base);
            let window = mapped.map_err(|e| Verdict::Blocked(format!("map rank {}'s window: {e}", w.rank)))?;
            sessions[w.rank as usize].mapping.keep_windows(vec![window]);
        }
    }
    let graphs: Vec<RetainedGraph> = ranks
        .iter()
        .zip(&sessions)
        .map(|(w, s)| {
            s.stream.capture(|st| w.issue("step", st, &s.env())).map_err(|e| failed("capture")(e.to_string()))
        })
        .collect::<Result<_, _>>()?;
    let mut exporters = Vec::new();
    for (w, s) in ranks.iter().zip(&sessions) {
        let options = ExportOptions { rank: w.rank, world, ..ExportOptions::at_cap(cap) };
        let rank_dir = dir.join(format!("rank-{}", w.rank));
        let mut exporter = Exporter::new(
            &rank_dir,
            core_context(&ctx, options)?,
            arena_of(w.rank),
            buffers.clone(),
            &module_images(w, s),
        )
        .map_err(|e| failed("start export")(e.to_string()))?;
        exporter.peers(peers_of(w.rank));
        exporter.snapshot(&ctx, &s.mapping).map_err(|e| failed("snapshot shards")(e.to_string()))?;
        let flags = RecordedFlags { explicit: Some(0), from_executable: None };
        exporter
            .template("step", &graphs[w.rank as usize], flags)
            .map_err(|e| failed("record template")(e.to_string()))?;
        exporters.push(exporter);
    }
    let export_s = started.elapsed().as_secs_f64();
    let states: Vec<LoadedState> = exporters.iter().map(|e| core_state(&ctx, e)).collect::<Result<_, _>>()?;
    let expected = original_run(ranks, &sessions, &buffers)?;
    launch_captured(&ctx, ranks, &sessions, &graphs, &states, &buffers, &expected)?;
    for ((w, exporter), outputs) in ranks.iter().zip(&mut exporters).zip(expected) {
        exporter.expect(Expectation {
            template: "step".into(),
            outputs,
            reference: Some(w.name().into()),
            tolerance: Some(0.0),
            speed: None,
        });
    }
    for exporter in exporters {
        exporter.finish().map_err(|e| failed("finish export")(e.to_string()))?;
    }
    Ok(Metrics::from([measured("export-s", export_s, "s"), measured("window-bytes", used as f64, "B")]))
}

/// Every rank's step issued eagerly on its own stream, all at once (each rank's
/// all-reduce waits for the others'), checked bit for bit against the CPU reference; each
/// rank's output digests.
fn original_run(
    ranks: &[AllReduceRank],
    sessions: &[Session],
    buffers: &[Buffer],
) -> Result<Vec<Vec<OutputDigest>>, Verdict> {
    for (w, s) in ranks.iter().zip(sessions) {
        w.issue("step", &s.stream, &s.env()).map_err(blocked("run the original eagerly"))?;
    }
    let mut digests = Vec::new();
    for (w, s) in ranks.iter().zip(sessions) {
        s.stream.synchronize().map_err(blocked("run the original eagerly"))?;
        let no_inputs =
            |name: &str| -> Vec<u8> { panic!("the all-reduce reference reads no buffer, asked for `{name}`") };
        let mut outputs = Vec::new();
        for (buffer, expected) in w.reference("step", &Contents(&no_inputs)) {
            let bytes = read(s, buffers, buffer)?;
            outputs.push(digest_within(buffer, &bytes, &expected, w.tolerance()).map_err(|diff| {
                Verdict::Failed(format!(
                    "rank {}: the original run's `{buffer}` differs from the CPU reference by {diff}",
                    w.rank
                ))
            })?);
        }
        digests.push(outputs);
    }
    Ok(digests)
}

/// The captured graphs, instantiated, launched all ranks at once from the loaded state
/// `CHECK_LAUNCHES` times: every launch must give the original's outputs, which it cannot
/// if a flag kept its value from the launch before.
fn launch_captured(
    ctx: &Context,
    ranks: &[AllReduceRank],
    sessions: &[Session],
    graphs: &[RetainedGraph],
    states: &[LoadedState],
    buffers: &[Buffer],
    expected: &[Vec<OutputDigest>],
) -> Result<(), Verdict> {
    let execs =
        graphs.iter().map(|g| g.instantiate(0)).collect::<Result<Vec<_>, _>>().map_err(blocked("instantiate"))?;
    for launch in 0..CHECK_LAUNCHES {
        for (state, s) in states.iter().zip(sessions) {
            state.reset(&s.stream).map_err(|e| Verdict::Blocked(format!("reset: {e}")))?;
        }
        ctx.synchronize().map_err(blocked("reset"))?;
        for (exec, s) in execs.iter().zip(sessions) {
            exec.launch(&s.stream).map_err(blocked("launch the captured step"))?;
        }
        ctx.synchronize().map_err(blocked("launch the captured step"))?;
        for ((w, s), outputs) in ranks.iter().zip(sessions).zip(expected) {
            for o in outputs {
                let digest = hash_hex(&read(s, buffers, &o.buffer)?[..]).expect("hashing memory");
                if digest != o.sha256 {
                    return Err(Verdict::Failed(format!(
                        "rank {}: launch {launch} of the captured step gave `{}` with SHA-256 {digest}, the original run's was {}",
                        w.rank, o.buffer, o.sha256
                    )));
                }
            }
        }
    }
    Ok(())
}

fn read(s: &Session, buffers: &[Buffer], name: &str) -> Result<Vec<u8>, Verdict> {
    let b = buffers.iter().find(|b| b.name == name).expect("the workload names its own buffers");
    let address = s.env().address(name).map_err(blocked("find the output"))?;
    // SAFETY: a buffer of the rank's arena, which its session keeps mapped.
    unsafe { s.ctx.read(address, b.size) }.map_err(blocked("read an output"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_lie_apart_from_every_rank_arena_and_from_each_other() {
        let arena = |r: u32| ARENA_BASE + u64::from(r) * RANK_STRIDE;
        for r in 0..8 {
            for p in 0..8 {
                let w = window(r, p);
                assert!(w >= arena(r) + WINDOWS_AT && w + WINDOW_STRIDE <= arena(r + 1), "rank {r} onto {p}");
            }
        }
        assert_eq!(window(1, 0), ARENA_BASE + RANK_STRIDE + WINDOWS_AT);
    }
}
