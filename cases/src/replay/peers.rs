//! `replay/peers/`: the ranks of a rank set map each other's memory, two processes on one
//! GPU (issue 27). Each rank maps a shareable allocation at its own fixed address and fills
//! it with its pattern, hands it to the other as a file descriptor (`rendezvous`), maps
//! the other's at a fixed window of its own and reads it back. A second meeting keeps
//! each alive until the other has read (passed on the H200:
//! `baselines/h200-sm90-580.159.04-ranks/`).

use std::{
    collections::BTreeSet,
    os::fd::AsFd,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use gnomon_core::{
    cuda::{map_peer, ArenaMapping, Context, CudaError, PeerPiece},
    rendezvous::{Meeting, Offer},
};

use super::{outcome::StepOutcome, pipeline::ARENA_BASE, scratch};
use crate::{measured, Case, Metrics, Verdict};

const CLAIM: &str = "peer-mapping";
/// How long a rank waits for the other at each meeting.
const MEETING_LIMIT: Duration = Duration::from_secs(20);
/// Where rank R's own allocation lies: apart from any core's arena.
const RANK_BASE: [u64; 2] = [ARENA_BASE + (16 << 30), ARENA_BASE + (32 << 30)];
/// What each rank shares.
const SHARED: u64 = 64 << 20;
/// Where a rank maps its peer's allocation: this far above its own.
const WINDOW_OFFSET: u64 = 4 << 30;

pub fn cases() -> Vec<Case> {
    vec![Case::gpu("replay/peers/two-ranks-one-gpu", CLAIM, |ctx| {
        let tmp = scratch()?;
        let ranks = (0..2u32).map(|rank| {
            let mut command = gnomon_command()?;
            command.args(["__peer-probe", "--rank", &rank.to_string()]).arg(tmp.path());
            Ok((rank, command))
        });
        let (metrics, outcome) = run_ranks(ranks.collect::<Result<_, Verdict>>()?, tmp.path());
        ctx.metrics(metrics);
        outcome
    })]
}

/// This gnomon binary, as a command for a helper process.
pub(super) fn gnomon_command() -> Result<Command, Verdict> {
    let exe = std::env::current_exe().map_err(|e| Verdict::Blocked(format!("the gnomon binary: {e}")))?;
    Ok(Command::new(exe))
}

/// Runs each rank's command at once, each writing its outcome to `DIR/rank-R.json`
/// (`--result`); the ranks' metrics, named `rank-R-…`, and the first rank's failure.
pub(super) fn run_ranks(ranks: Vec<(u32, Command)>, dir: &Path) -> (Metrics, Result<(), Verdict>) {
    let started: Vec<_> = ranks
        .into_iter()
        .map(|(rank, mut command)| {
            let result = dir.join(format!("rank-{rank}.json"));
            (rank, command.arg("--result").arg(&result).spawn(), result)
        })
        .collect();
    let mut metrics = Metrics::new();
    let mut first_failure = None;
    for (rank, child, result) in started {
        let status = child.and_then(|mut c| c.wait());
        let outcome = StepOutcome::read(&result, &format!("rank {rank}"), status);
        let named = outcome.metrics.into_iter().map(|(name, m)| (format!("rank-{rank}-{name}"), m));
        let outcome = StepOutcome { metrics: named.collect(), ..outcome };
        if let Err(e) = outcome.into_result(&mut metrics) {
            first_failure.get_or_insert((rank, e));
        }
    }
    let outcome = match first_failure {
        None => Ok(()),
        Some((rank, Verdict::Blocked(why))) => Err(Verdict::Blocked(format!("rank {rank}: {why}"))),
        Some((rank, e)) => Err(Verdict::Failed(format!("rank {rank}: {}", e.into_status().1))),
    };
    (metrics, outcome)
}

fn failed(what: &'static str) -> impl Fn(CudaError) -> Verdict {
    move |e| Verdict::Failed(format!("{what}: {e}"))
}

fn pattern(rank: u32) -> u8 {
    0x10 + rank as u8
}

/// `gnomon __peer-probe --rank R DIR`: one rank of [`cases`].
pub fn peer_probe(rank: u32, dir: &Path) -> Result<Metrics, Verdict> {
    let peer = match rank {
        0 | 1 => 1 - rank,
        other => return Err(Verdict::Blocked(format!("rank {other}: the probe has ranks 0 and 1"))),
    };
    let ctx = Context::new(0).map_err(|e| Verdict::Blocked(format!("open device 0: {e}")))?;
    let granularity = ArenaMapping::granularity(&ctx).map_err(failed("granularity"))?;
    // As large as the arena's shards: the driver honours the address of a reservation of
    // 64 MiB where it may place a smaller one elsewhere.
    let size = SHARED.next_multiple_of(granularity);
    let base = RANK_BASE[rank as usize];
    let own = ArenaMapping::map_shareable(&ctx, &[(base, size, size)]).map_err(failed("map shareable memory"))?;
    let stream = ctx.stream().map_err(failed("stream"))?;
    // SAFETY: `size` bytes at `base` were mapped just above.
    unsafe { stream.memset_u8(base, pattern(rank), size) }.map_err(failed("fill"))?;
    stream.synchronize().map_err(failed("fill"))?;
    let exported = own.shards()[0].export().map_err(failed("export the allocation"))?;
    let other = BTreeSet::from([peer]);
    // Two meetings, each in a directory of its own: a rank still serving the first must
    // not be asked for the second.
    let share = dir.join("share");
    std::fs::create_dir_all(&share).map_err(|e| Verdict::Blocked(format!("meeting directory: {e}")))?;
    let meet = |at| Meeting { dir: at, rank, limit: MEETING_LIMIT };
    let started = Instant::now();
    let mut taken = meet(&share)
        .exchange(Offer { fds: &[exported.as_fd()], note: &[] }, &other, &other)
        .map_err(|e| Verdict::Failed(format!("share memory: {e}")))?;
    let exchange_s = started.elapsed().as_secs_f64();
    let fd = taken.remove(&peer).and_then(|t| t.fds.into_iter().next());
    let fd = fd.ok_or_else(|| Verdict::Failed(format!("rank {peer} offered no allocation")))?;
    let window = base + WINDOW_OFFSET;
    let mapped = map_peer(&ctx, window, &[PeerPiece { fd: fd.as_fd(), offset: 0, len: size }])
        .map_err(failed("map the peer's allocation"))?;
    // SAFETY: the window was mapped just above, `size` bytes.
    let bytes = unsafe { ctx.read(window, size) }.map_err(failed("read the window"))?;
    let wrong = bytes.iter().position(|&b| b != pattern(peer));
    // Neither leaves before the other has read.
    meet(dir).barrier("done", &other).map_err(|e| Verdict::Failed(format!("finish: {e}")))?;
    drop(mapped);
    if let Some(at) = wrong {
        return Err(Verdict::Failed(format!(
            "the window at {window:#x} onto rank {peer}'s memory reads {:#04x} at byte {at}, where rank {peer} wrote {:#04x}",
            bytes[at],
            pattern(peer)
        )));
    }
    Ok(Metrics::from([measured("exchange-s", exchange_s, "s"), measured("window-bytes", size as f64, "B")]))
}
